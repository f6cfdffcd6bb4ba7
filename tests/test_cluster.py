"""``qconform certify --cluster local:N``: the corpus engine on a real Dask LocalCluster.

The same report as the local executor; a Dask worker killed mid-run loses no verdict (its shard is
rerun elsewhere); a case that kills every worker it lands on ends as that case's crash. The killing
is real: the runner's worker process sends SIGKILL to its parent, the Dask worker."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from qconform import cli, corpus, tools

if tools.missing("distributed"):
    pytest.skip(tools.missing("distributed"), allow_module_level=True)

from test_certify import _found  # noqa: E402

#: Passes, failures, information cases; several corpus groups.
SLICE = "QuantizeLinear-21/float32-int8/*"

KILLER = '''
"""cpu-ref whose worker kills the Dask worker it runs under (its parent) on one chosen case: once
(a marker file says it happened) or every time."""
import hashlib
import os
import signal
import time
from pathlib import Path

import numpy as np

from qconform.runners.cpu_ref import CpuRefRunner


class KillsItsWorker(CpuRefRunner):
    name = "cpu-ref"

    def __init__(self, target="", marker=""):
        super().__init__()
        self.target, self.marker = target, marker

    def prepare(self, model):
        run = super().prepare(model)

        def go(feeds):
            if _digest(feeds) == self.target:
                if not self.marker or not Path(self.marker).exists():
                    if self.marker:
                        Path(self.marker).write_text("killed once")
                    os.kill(os.getppid(), signal.SIGKILL)
                    time.sleep(30)
            return run(feeds)

        return go


def _digest(feeds):
    return hashlib.sha256(b"".join(np.ascontiguousarray(v).tobytes() for _, v in sorted(feeds.items()))).hexdigest()
'''


def _certify(*args: str) -> int:
    return cli.main(["certify", *args])


def _target() -> tuple[str, str]:
    """(a case of SLICE, the SHA-256 of its x): the only case of the slice with that x."""
    index = corpus.index(corpus.DEFAULT_ROOT)
    ids = [r.id for r in index.refs if r.id.startswith(SLICE[:-1])]
    shas: dict[str, list[str]] = {}
    for cid, case in index.cases_of(ids).items():
        digest = hashlib.sha256(b"".join(np.ascontiguousarray(v).tobytes() for _, v in sorted(case.feeds.items())))
        shas.setdefault(digest.hexdigest(), []).append(cid)
    cid = "QuantizeLinear-21/float32-int8/basic/per-axis"
    sha = next(s for s, c in shas.items() if cid in c)
    assert shas[sha] == [cid]
    return cid, sha


def test_a_cluster_run_writes_the_local_runs_report(tmp_path):
    """A runtime that rounds half away from zero (a deviation model as a runner), diagnosed: the same
    report.json from two local workers and from a 2-worker LocalCluster, but for how it ran."""
    runner = ("--runner", "qconform.diagnosis.runner:DeviationRunner", "--runner-opt", "model=round-half-away")
    assert _certify(*runner, "--case", SLICE, "--report", str(tmp_path / "local"), "-j", "2") == 1
    assert _certify(*runner, "--case", SLICE, "--report", str(tmp_path / "dask"), "--cluster", "local:2") == 1
    local, dask = _found(tmp_path / "local"), _found(tmp_path / "dask")
    assert local["counts"]["fail"] and local["counts"]["pass"] and local["counts"]["info"]
    assert any(f.get("diagnosis") for f in local["failures"])
    assert dask == local
    inv = json.loads((tmp_path / "dask" / "report.json").read_text())["invocation"]
    assert inv["executor"] == "dask: 2 worker(s) on a LocalCluster" and inv["runner_workers"] == 2


def test_a_killed_worker_loses_no_verdict_and_a_case_that_kills_every_worker_is_its_crash(tmp_path):
    (tmp_path / "killer.py").write_text(KILLER)
    runner = f"{tmp_path / 'killer.py'}:KillsItsWorker"
    cid, sha = _target()
    assert _certify("--runner", "cpu-ref", "--case", SLICE, "--report", str(tmp_path / "healthy"), "-j", "2") == 0
    healthy = {c["id"]: c["verdict"] for c in _found(tmp_path / "healthy")["cases"]}

    marker = tmp_path / "killed-once"
    assert _certify("--runner", runner, "--runner-opt", f"target={sha}", "--runner-opt", f"marker={marker}",
                    "--case", SLICE, "--report", str(tmp_path / "once"), "--cluster", "local:2") == 0
    assert marker.exists()  # a Dask worker really was killed mid-shard ...
    once = {c["id"]: c["verdict"] for c in _found(tmp_path / "once")["cases"]}
    assert once == healthy  # ... and every case kept exactly its verdict

    assert _certify("--runner", runner, "--runner-opt", f"target={sha}", "--case", SLICE, "--report",
                    str(tmp_path / "always"), "--cluster", "local:2") == 1
    always = _found(tmp_path / "always")
    verdicts = {c["id"]: c["verdict"] for c in always["cases"]}
    assert verdicts == {**healthy, cid: "crashed"}
    (crash,) = [f for f in always["failures"] if f["id"] == cid]
    assert "took down the Dask worker running it 2 times" in crash["problem"]


def test_bad_cluster_words_are_one_line(tmp_path, capsys):
    assert _certify("--runner", "cpu-ref", "--cluster", "remote:2", "--report", str(tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "expected local or local:N" in err
    assert not (tmp_path / "report.json").exists()

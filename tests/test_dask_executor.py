"""The Dask executor: the same units, digests and state file as the local pool, on a real
LocalCluster whose workers die mid-run."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from qconform import sweep as S
from qconform import tools
from qconform.runners.cpu_ref import CpuRefRunner
from qconform.sweep.domains import domain, inputs
from qconform.sweep.units import unit_key

if tools.missing("distributed"):
    pytest.skip(tools.missing("distributed"), allow_module_level=True)

from qconform.sweep.dask_executor import DaskExecutor, parse_cluster  # noqa: E402

SWEEPS = [s for s in S.select(["float32-float8e4m3fn/"]) if s.id.endswith("saturate=1")]
DIES_ONCE, DIES_ALWAYS = "QCONFORM_TEST_DIES_ONCE", "QCONFORM_TEST_DIES_ALWAYS"


def _first_code(sweep, chunk: int) -> str:
    return str(int(inputs(sweep, domain(sweep, "sampled"), chunk).reshape(-1).view(np.uint32)[0]))


def _die() -> None:
    """Take down the Dask worker running this unit: the runner runs in a worker process of its own
    beside it (whose own death would be the unit's crash, as in a local run), so it kills its parent."""
    os.kill(os.getppid(), signal.SIGKILL)
    os._exit(9)


class DyingRunner(CpuRefRunner):
    """cpu-ref, whose Dask worker dies on chosen units: once (its retry then succeeds), or always."""

    def prepare(self, model):
        healthy = super().prepare(model)

        def run(feeds):
            first = str(int(feeds["x"].reshape(-1).view(np.uint32)[0]))
            once = Path(os.environ.get(DIES_ONCE, "/nonexistent"))
            if once.name.startswith(first + ".") and not once.exists():
                once.write_text("died here once")
                _die()  # the Dask worker dies mid-unit
            if os.environ.get(DIES_ALWAYS) == first:
                _die()
            return healthy(feeds)

        return run


def test_a_killed_worker_loses_no_unit_and_a_unit_that_kills_twice_is_an_error(tmp_path, monkeypatch):
    (sweep,) = SWEEPS
    monkeypatch.setenv(DIES_ONCE, str(tmp_path / f"{_first_code(sweep, 1)}.died"))
    monkeypatch.setenv(DIES_ALWAYS, _first_code(sweep, 2))
    state = tmp_path / "state.jsonl"
    runner = f"{__file__}:DyingRunner"
    got = S.check(SWEEPS, ("sampled",), runner, state=state, executor=DaskExecutor(local_workers=2))
    by_chunk = {r.chunk: r for r in got.results}
    assert sorted(by_chunk) == [0, 1, 2] and len(got.results) == 3  # every unit accounted for, once
    assert (tmp_path / f"{_first_code(sweep, 1)}.died").exists()  # a worker really died in chunk 1 ...
    assert by_chunk[1].status == "ok"  # ... and the unit was rerun elsewhere
    assert by_chunk[2].status == "error" and "took down the Dask worker running it 2 times" in by_chunk[2].detail
    local = S.check(SWEEPS, ("sampled",), "cpu-ref", chunks=range(0, 2))
    assert {r.chunk: (r.status, r.digest) for r in local.results} == \
        {c: (by_chunk[c].status, by_chunk[c].digest) for c in (0, 1)}
    # the state file resumes: finished units are read back, the failed one is run again
    monkeypatch.delenv(DIES_ALWAYS)
    again = S.check(SWEEPS, ("sampled",), runner, state=state, executor=DaskExecutor(local_workers=1))
    assert {r.chunk: r.status for r in again.results} == {0: "ok", 1: "ok", 2: "ok"}
    lines = state.read_text().splitlines()
    assert sum(unit_key(sweep.id, "sampled", 2) in ln or '"chunk": 2' in ln for ln in lines[1:]) == 2


def test_cluster_specs():
    assert parse_cluster("local:3") == 3 and parse_cluster("local") == (os.cpu_count() or 1)
    for bad in ("remote:2", "local:x", "local:0"):
        with pytest.raises(ValueError):
            parse_cluster(bad)

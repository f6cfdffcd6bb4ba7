"""A run interrupted with SIGINT (Ctrl-C) still writes its report, marked incomplete.

The run is a real ``pytest`` process in its own process group; a runner that stalls after a few
cases tells the test (through a file) that the run is under way, and the test then sends SIGINT
to the whole group, as a terminal's Ctrl-C does. With and without runner isolation.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from qconform import corpus as corpus_mod
from qconform.plugin import default_golden
from qconform.pool import FLUSH
from qconform.report import model
from qconform.runners.cpu_ref import CpuRefRunner

HERE = Path(__file__).resolve()
AFTER = 3  # cases that complete before the runner stalls


class StallAfterRunner(CpuRefRunner):
    """cpu-ref that, after ``after`` cases, writes ``marker`` and stalls inside the next case."""

    name = "stall-after"

    def __init__(self, marker: str, after: str = str(AFTER)) -> None:
        self.marker, self.after, self.calls = Path(marker), int(after), 0

    def prepare(self, model):
        run = super().prepare(model)

        def stall(feeds):
            self.calls += 1
            if self.calls > self.after:
                self.marker.write_text(str(self.calls))
                time.sleep(120)
            return run(feeds)

        return stall


@pytest.fixture(scope="module")
def golden(tmp_path_factory) -> Path:
    """Twenty real cases (QuantizeLinear-21, basic family) from the bundled corpus."""
    src, group = default_golden(), tmp_path_factory.mktemp("group")
    for sub, ext in (("index", "jsonl"), ("data", "pb")):
        (group / sub).mkdir()
        shutil.copy(src / sub / f"QuantizeLinear-21.{ext}", group / sub)
    corpus_mod.write_manifest(group)
    cases = [c for c in corpus_mod.load(group).cases if c.family == "basic"][:20]
    root = tmp_path_factory.mktemp("golden")
    corpus_mod.write(cases, root)
    return root


@pytest.mark.parametrize("isolate", ["on", "off"])
def test_sigint_writes_a_partial_report(tmp_path: Path, golden: Path, isolate: str):
    marker, out = tmp_path / "stalled", tmp_path / "out"
    cmd = [sys.executable, "-m", "pytest", f"--runner={HERE}:StallAfterRunner", f"--runner-opt=marker={marker}",
           f"--golden={golden}", f"--report={out}", f"--isolate={isolate}", "-p", "no:cacheprovider",
           "-p", "no:randomly", "-q"]
    # A shell starts pytest with Ctrl-C at its default disposition; this test process may not have it
    # (seen under the full `-n 2` run: an inherited SIG_IGN made the child deaf to SIGINT), so the
    # child gets the default explicitly.
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()[0][-3000:]
            assert time.monotonic() < deadline, "the run never reached the stalling case"
            time.sleep(0.05)
        # the cases before the stall ended; their results travel in groups, at most pool.FLUSH seconds
        # after they end: Ctrl-C a moment later must find every one of them in the report
        time.sleep(max(1.0, 10 * FLUSH))
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the whole foreground process group
        try:
            output, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired as exc:
            os.killpg(proc.pid, signal.SIGKILL)
            rest, _ = proc.communicate()
            seen = (exc.output or b"").decode(errors="replace") if isinstance(exc.output, bytes) else (exc.output or "")
            pytest.fail(f"no exit 60 s after SIGINT (returncode {proc.returncode}); output:\n{(seen + rest)[-4000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, output[-3000:]

    report = json.loads((out / "report.json").read_text())
    jsonschema.Draft202012Validator(model.schema()).validate(report)
    c = report["counts"]
    assert report["complete"] is False and report["interrupted"] is True
    assert c["collected"] == c["reported"] == len(corpus_mod.load(golden).cases)
    assert c["pass"] == AFTER and c["ran"] == AFTER and c["not-run"] == c["collected"] - AFTER
    assert [case["verdict"] for case in report["cases"]] == ["pass"] * AFTER + ["not-run"] * (c["collected"] - AFTER)
    assert (out / "report.html").exists() and "Incomplete run (interrupted)" in (out / "report.html").read_text()
    assert "Incomplete run" in (out / "summary.md").read_text()

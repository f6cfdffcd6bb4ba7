"""A runner that crashes, hangs or returns garbage never loses a result."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO, run_pytest
from fault_runners import FAULTS

from qconform import isolation

RUNNER = f"--runner={Path(__file__).with_name('fault_runners.py')}:FaultRunner"

EXPECTED = {  # fault -> (verdict word in the failure line, detail)
    "segfault": ("crashed", "SIGSEGV"),
    "abort": ("crashed", "SIGABRT"),
    "exit": ("crashed", "exited with status 3"),
    "hang": ("timeout", "--case-timeout=3s"),
    "memory": ("error", "out of memory"),
    "exception": ("error", "RuntimeError: kernel exploded"),
    "wrong-dtype": ("", "element type int16, expected int8"),
    "wrong-shape": ("", "shape (1, "),
    "none": ("error", "runner returned NoneType"),
    "extra-output": ("error", "returned 2 output(s)"),
    "mutate-input": ("error", "mutated its input 'x'"),
}


class BesideRun:
    """Another qconform run on the same machine (cpu-ref over the whole corpus, an isolated worker, the
    machine's own temp directory), started before the test's own run, still working when it ends,
    then stopped with Ctrl-C as a user would. One runner worker: it is there to share the machine's
    temp directory and process table, not to load its cores."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--runner=cpu-ref",
                                      "--runner-workers=1", "-v", "--tb=short"], cwd=REPO, start_new_session=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        self.lines: list[str] = []
        self.started = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)
            if " PASSED" in line:  # its workers are running cases
                self.started.set()
        self.started.set()

    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> str:
        """Ctrl-C, then its whole output once it has ended."""
        try:
            os.killpg(self.proc.pid, signal.SIGINT)
            self.proc.wait(timeout=120)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self._reader.join(timeout=10)
        return "".join(self.lines)


def test_every_fault_is_classified_and_the_run_completes(tmp_path):
    """The run's workers make their temporary directories in this test's own one (TMPDIR), so the
    check looks only at what this run made, while another qconform run works beside it."""
    own = tmp_path / "tmp"
    own.mkdir()
    beside = BesideRun()
    assert beside.started.wait(300) and beside.running(), "".join(beside.lines[-50:])
    r = run_pytest(RUNNER, "-m", "opset_13 and family_basic", "--case-timeout=3", "--worker-memory-mb=3000", "-rA", timeout=300,
                   env={"TMPDIR": str(own)})
    overlapped = beside.running()
    out = r.stdout
    assert r.returncode == 1, out[-3000:]
    lines = {m.group(1): m.group(2) for m in re.finditer(r"^(?:FAILED|PASSED) qconform/golden/MANIFEST::(\S+)(.*)$", out, re.M)}
    for cid, fault in FAULTS.items():
        verdict, detail = EXPECTED[fault]
        assert cid in lines, f"{cid} ({fault}) has no verdict line"
        section = out[out.index(f"_ {cid} _"):] if f"_ {cid} _" in out else lines[cid]
        assert detail in section[:3000], f"{fault}: {detail!r} not in {section[:500]!r}"
        if verdict:
            assert f"{verdict}: " in section[:3000]
    healthy = [cid for cid in lines if cid not in FAULTS]
    assert healthy and all(f"PASSED qconform/golden/MANIFEST::{cid}" in out for cid in healthy)
    n_collected = int(re.search(r"(\d+) (?:passed|failed)", out.splitlines()[-1]).group(1))
    assert n_collected > 0
    counts = re.findall(r"(\d+) (passed|failed|skipped|deselected)", out.splitlines()[-1])
    ran = sum(int(n) for n, what in counts if what in ("passed", "failed"))
    assert ran == len(lines)  # every collected case has exactly one verdict
    info = sum(int(n) for n in re.findall(r"^SKIPPED \[(\d+)\] .*information: ", out, re.M))  # invalid by text
    assert sum(int(n) for n, what in counts if what == "skipped") == info
    assert not list(own.glob("qconform-worker-*")), "a worker's temporary directory survived a crash, a kill or the run"
    other = beside.stop()
    assert overlapped, "the other run ended before this one: no overlap was shown"
    assert " PASSED" in other and " FAILED" not in other and "INTERNALERROR" not in other, other[-3000:]


def test_without_isolation_exceptions_and_garbage_are_still_classified():
    safe = [cid for cid, f in FAULTS.items() if f in ("exception", "none", "extra-output", "mutate-input", "wrong-dtype")]
    k = " or ".join(f"opset_13 and {m}" for m in ("types_int32_float32_int8", "types_int32_float32_uint8",
                                                     "types_int8_float32"))
    r = run_pytest(RUNNER, "--isolate=off", "-m", k, "-rA", timeout=300)
    for cid in safe:
        if f"::{cid}" in r.stdout:
            assert f"FAILED qconform/golden/MANIFEST::{cid}" in r.stdout
    assert "Traceback" not in r.stdout.split("short test summary")[0] or "INTERNALERROR" not in r.stdout
    assert "INTERNALERROR" not in r.stdout


#: Linux's list of a process's children (``/proc/PID/task/TID/children``): the tests below find the
#: run's worker there, reading only their own run's processes.
PROC_CHILDREN = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists()
needs_proc_children = pytest.mark.skipif(not PROC_CHILDREN, reason="needs Linux's /proc/PID/task/TID/children "
                                                                   "to find the run's worker process")


def _workers(pid: int) -> list[int]:
    """The runner worker processes (multiprocessing's spawned children) of the run ``pid``."""
    found = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            for child in children.read_text().split():
                if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                    found.append(int(child))
        except (OSError, ValueError):
            continue
    return found


def _kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class KilledRun:
    """A ``qconform certify --runner cpu-ref`` run whose workers make their directories in ``own``
    (TMPDIR), once its first worker's directory is there (the worker started)."""

    def __init__(self, own: Path, report: Path) -> None:
        self.own = own
        self.proc = subprocess.Popen([sys.executable, "-m", "qconform.cli", "certify", "--runner", "cpu-ref", "-j", "1",
                                      "--report", str(report)], cwd=REPO, env={**os.environ, "TMPDIR": str(own)},
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.workers: list[int] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (self.dirs() and self.workers) and self.proc.poll() is None:
            self.workers = _workers(self.proc.pid)
            time.sleep(0.05)
        assert self.proc.poll() is None and self.dirs() and self.workers, "the run never started its worker"
        time.sleep(1)  # the worker past its start (it has read what it runs from its controller)

    def dirs(self) -> list[Path]:
        return list(self.own.glob("qconform-worker-*"))

    def gone_within(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while self.dirs() and time.monotonic() < deadline:
            time.sleep(0.1)
        return not self.dirs()

    def clean_up(self) -> None:
        for pid in [self.proc.pid, *self.workers]:
            _kill_quietly(pid)
        self.proc.wait(30)


@needs_proc_children
def test_a_worker_whose_controller_is_killed_removes_its_own_directory(tmp_path):
    """The controller SIGKILLed (the OOM killer, a killed pytest, a lost Dask worker) never removes its
    worker's directory: the worker, left alone, removes it as it ends."""
    own = tmp_path / "tmp"
    own.mkdir()
    run = KilledRun(own, tmp_path / "r")
    try:
        os.kill(run.proc.pid, signal.SIGKILL)
        run.proc.wait(30)
        assert run.gone_within(30), f"the orphaned worker left {run.dirs()}"
    finally:
        run.clean_up()


@needs_proc_children
def test_the_directory_of_a_worker_killed_with_its_controller_is_swept_and_a_live_ones_is_not(tmp_path):
    """Killed together (SIGKILL both: a device worker's runner dies with it), no code of theirs runs:
    the next worker started on the machine removes the directory. A live run's directory stays."""
    own = tmp_path / "tmp"
    own.mkdir()
    run = KilledRun(own, tmp_path / "r")
    try:
        live = run.dirs()
        assert isolation.sweep(str(own)) == [] and all(d.is_dir() for d in live)  # its controller and worker hold it
        for sig in (signal.SIGSTOP, signal.SIGKILL):  # stopped first: neither sees the other go
            for pid in (run.proc.pid, *run.workers):
                os.kill(pid, sig)
        run.proc.wait(30)
        time.sleep(1)
        left = run.dirs()
        assert left, "nothing was left behind to sweep"
        swept = isolation.sweep(str(own))
        assert sorted(Path(p).name for p in swept) == sorted(d.name for d in left) and not run.dirs()
    finally:
        run.clean_up()


def test_outputs_in_the_other_byte_order_are_the_same_values():
    """A binding that hands back big-endian arrays holding the runtime's values: the same element type
    and bits once in this machine's order (compared as they were, every element read as another
    type: 'element type >f4, expected float32')."""
    import numpy as np

    from qconform.verdicts import Call

    values = np.array([1.5, -0.0, np.nan, 65504.0], np.float32)
    res = isolation.call(lambda feeds: [values.astype(">f4"), np.array([-3, 7], ">i2")], {})
    assert res.kind == Call.OK
    (f, i) = res.outputs
    assert f.dtype == np.float32 and f.tobytes() == values.tobytes()
    assert i.dtype == np.int16 and i.tolist() == [-3, 7]


SLOW_RUNNER = '''
"""A runtime that takes ten minutes over every model: a batch in progress when its controller dies."""
import time


class Slow:
    name = "slow"

    def describe(self):
        return {"name": self.name, "version": "1"}

    def prepare(self, model):
        def run(inputs):
            time.sleep(600)
        return run
'''


@needs_proc_children
def test_a_worker_whose_controller_is_killed_mid_case_ends_with_it(tmp_path):
    """A controller killed outright (a CI timeout's SIGKILL) while its worker is inside a long case:
    the worker notices its controller gone and ends, with whatever it started, instead of computing
    the rest of its batch for nobody."""
    runner = tmp_path / "slow.py"
    runner.write_text(SLOW_RUNNER, encoding="utf-8")
    own = tmp_path / "tmp"
    own.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "qconform.cli", "certify", "--runner", f"{runner}:Slow", "-j", "1",
                             "--case", "QuantizeLinear-10/float32-uint8/basic/*", "--report", str(tmp_path / "r")],
                            cwd=REPO, env={**os.environ, "TMPDIR": str(own)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not workers and proc.poll() is None:
            workers = _workers(proc.pid)
            time.sleep(0.05)
        assert workers and proc.poll() is None, "the run never started its worker"
        time.sleep(3)  # inside the ten-minute case
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        deadline = time.monotonic() + 60  # a liveness bound, far below the case's ten minutes
        while time.monotonic() < deadline and any(Path(f"/proc/{w}").exists() for w in workers):
            time.sleep(0.2)
        assert not any(Path(f"/proc/{w}").exists() for w in workers), "the orphaned worker computes on"
        assert not list(own.glob("qconform-worker-*")), "the orphaned worker left its directory"
    finally:
        for pid in [proc.pid, *workers]:
            _kill_quietly(pid)

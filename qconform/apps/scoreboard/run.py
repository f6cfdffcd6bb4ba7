"""Running the runtimes: one certification per installed runtime, in parallel where cores allow."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from qconform.apps.scoreboard._common import CHECKOUT
from qconform.report.model import ReportError, load
from qconform.runner import RunnerError, describe, resolve
from qconform.verdicts import CRASHED, HEADLINE, NOT_RUN, TIMEOUT


def certify_command(name: str, report_dir: Path, marker: str | None = None, scheduler: str | None = None) -> list[str]:
    """The certification of one runtime, the command users run: ``qconform certify`` (the engine's own
    front-end: the report.json ``pytest --runner=NAME --report=DIR`` writes, without a pytest item
    per case), on a Dask cluster against its ``scheduler`` where given, with ``--pack`` (which packs
    only a runtime whose facts file shows packed and single runs equivalent here, and says in the
    report which cases ran packed or why none did); with a ``marker`` (``-m`` is pytest's) certify
    runs it through pytest, every option passed on, unpacked."""
    return [sys.executable, "-m", "qconform.cli", "certify", "--runner", name, "--report", str(report_dir),
            *(["--scheduler", scheduler] if scheduler else []),
            *(["-m", marker, "-q", "--tb=no", "-p", "no:randomly"] if marker else ["--pack"])]


def installed(name: str) -> tuple[dict | None, str]:
    """(describe(), "") of a runner that starts here, else (None, the one-line reason)."""
    try:
        return describe(resolve(name)), ""
    except RunnerError as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 - a runtime broken here is skipped like a missing one
        return None, f"runner {name!r} cannot start: {type(exc).__name__}: {exc}".splitlines()[0]


def _summary(report: Mapping[str, Any]) -> str:
    c = report["counts"]
    parts = [f"{c.get(v, 0)} {v}" for v in HEADLINE] + [f"{c.get(CRASHED, 0) + c.get(TIMEOUT, 0)} crashed/timeout"]
    return f"{c.get('collected', 0)} cases: " + ", ".join(parts)


def _say(line: str) -> None:
    print(line, flush=True)  # progress shows at once, also through a pipe or a CI log


def run_one(name: str, reports: Path, marker: str | None = None, say: Callable[[str], None] = _say,
            scheduler: str | None = None) -> bool:
    """Run one runtime over the corpus into ``reports/name``; True when a fresh report.json came out.
    The run's own output goes to ``reports/name/run.log`` (its tail is shown when no report came)."""
    out = (reports / name).resolve()
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").unlink(missing_ok=True)  # an old report must never pass for this run's
    log = out / "run.log"
    say(f"{name}: started")
    t0 = time.monotonic()
    with log.open("w", encoding="utf-8") as fh:
        command = certify_command(name, out, marker, scheduler)
        rc = subprocess.run(command, cwd=CHECKOUT or Path.cwd(),
                            stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, check=False).returncode
    seconds = time.monotonic() - t0
    try:
        report = load(out / "report.json")
    except ReportError:
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
        say(f"{name}: no report after {seconds:.0f} s (exit status {rc}); end of {log}:")
        for line in tail:
            say(f"    {line}")
        return False
    say(f"{name}: finished in {seconds:.0f} s: {_summary(report)}"
        + ("" if report.get("complete") else f" (INCOMPLETE: {report['counts'].get(NOT_RUN, 0)} not run)"))
    return True


def run_all(names: Sequence[str], reports: Path, jobs: int = 1, marker: str | None = None,
            say: Callable[[str], None] = _say, scheduler: str | None = None) -> list[str]:
    """Run the runtimes, ``jobs`` at a time (a thread each waits on its certification's process); the names
    that produced a report."""
    lock = threading.Lock()

    def one_line(line: str) -> None:  # whole lines, never two runners' halves
        with lock:
            say(line)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        done = list(pool.map(lambda n: run_one(n, reports, marker, one_line, scheduler), names))
    return [n for n, ok in zip(names, done) if ok]

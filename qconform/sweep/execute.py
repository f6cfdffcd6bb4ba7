"""Running units: executors (a local process pool here; a Dask cluster in dask_executor.py), the
resumable state file, the progress line, golden regeneration and the summary.

An executor maps units to ``UnitResult``s, yielding each as it finishes; it resolves the runner once
per worker process (``UnitWorker``) and never changes what a unit computes. ``execute`` adds what
every executor shares: resuming from the state file, recording results, and progress.
"""
from __future__ import annotations

import json
import multiprocessing
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Iterator, Protocol

from qconform.sweep.domains import domain
from qconform.sweep.goldens import golden_digests, save_golden
from qconform.sweep.table import FORMAT, Sweep
from qconform.sweep.units import Unit, UnitResult, UnitWorker, unit_key, unit_size, units
from qconform.verdicts import SweepStatus


class Executor(Protocol):
    """Runs units somewhere and yields their results as they finish (any order)."""

    def map(self, work: list[Unit], runner_name: str | None, options: dict[str, str],
            golden_root: str | None) -> Iterator[UnitResult]: ...


_WORKER: UnitWorker | None = None


def _init_worker(runner_name, options, golden_root) -> None:
    global _WORKER
    _WORKER = UnitWorker(runner_name, options, golden_root)


def _run_unit(unit) -> UnitResult:
    assert _WORKER is not None
    return _WORKER.run(unit)


@dataclass
class LocalPool:
    """This machine: ``jobs`` spawned worker processes (in-process when one job or one unit)."""

    jobs: int = 1

    def map(self, work, runner_name, options, golden_root) -> Iterator[UnitResult]:
        if self.jobs <= 1 or len(work) <= 1:
            worker = UnitWorker(runner_name, options, golden_root)
            for u in work:
                yield worker.run(u)
            return
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(min(self.jobs, len(work)), initializer=_init_worker,
                      initargs=(runner_name, options, golden_root)) as pool:
            yield from pool.imap_unordered(_run_unit, work, chunksize=1)


class Progress:
    """One status line on stderr: units, elements per second, ETA (refreshed, or a line a while)."""

    def __init__(self, total_units: int, total_elements: int, label: str, stream=None) -> None:
        self.total_units, self.total_elements, self.label = total_units, total_elements, label
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.units = self.elements = 0
        self.t0 = self.last = time.perf_counter()

    def update(self, elements: int) -> None:
        self.units += 1
        self.elements += elements
        now = time.perf_counter()
        if not self.tty and now - self.last < 10 and self.units < self.total_units:
            return
        self.last = now
        rate = self.elements / max(now - self.t0, 1e-9)
        left = (self.total_elements - self.elements) / rate if rate else float("inf")
        width = 24
        filled = int(width * self.units / max(self.total_units, 1))
        line = (f"{self.label} [{'#' * filled}{'.' * (width - filled)}] {self.units}/{self.total_units} chunks, "
                f"{rate / 1e6:,.1f} M inputs/s, ETA {_hms(left)}")
        self.stream.write(("\r" + line) if self.tty else (line + "\n"))
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _hms(sec: float) -> str:
    if sec == float("inf"):
        return "?"
    sec = int(sec)
    return f"{sec // 3600}:{sec % 3600 // 60:02d}:{sec % 60:02d}"


def read_state(path: Path, runner_label: str) -> dict[str, UnitResult]:
    done: dict[str, UnitResult] = {}
    if not path.is_file():
        return done
    lines = path.read_text().splitlines()
    if lines:
        head = json.loads(lines[0])
        if head.get("runner") != runner_label:
            raise ValueError(f"state file {path} belongs to runner {head.get('runner')!r}, not {runner_label!r}; "
                             f"use another --state or delete it")
    for line in lines[1:]:
        try:
            r = UnitResult(**json.loads(line))
        except (json.JSONDecodeError, TypeError):
            continue  # a line cut by an interruption
        if r.status != SweepStatus.ERROR:
            done[unit_key(r.sweep, r.domain, r.chunk)] = r
    return done


def execute(work: list[Unit], runner_name: str | None, options: dict[str, str] | None = None,
            jobs: int = 1, state: Path | None = None, golden_root: Path | None = None,
            progress: bool = True, label: str = "sweep", executor: Executor | None = None) -> Iterator[UnitResult]:
    """Run units on an executor (default: a local pool of ``jobs`` processes), yielding results as
    they finish; units already recorded in the state file come first and are not run again."""
    options = dict(options or {})
    runner_label = runner_name or "oracle"
    done = read_state(state, runner_label) if state else {}
    todo = [u for u in work if unit_key(u[0].id, u[1], u[2]) not in done]
    for u in work:
        key = unit_key(u[0].id, u[1], u[2])
        if key in done:
            yield done[key]
    fh = None
    if state:
        state.parent.mkdir(parents=True, exist_ok=True)
        fresh = not state.is_file() or state.stat().st_size == 0
        fh = state.open("a")
        if fresh:
            fh.write(json.dumps({"runner": runner_label, "format": FORMAT}) + "\n")
            fh.flush()
    sizes = {unit_key(u[0].id, u[1], u[2]): unit_size(u) for u in todo}
    bar = Progress(len(todo), sum(sizes.values()), label) if progress and todo else None
    executor = executor or LocalPool(jobs)
    try:
        for r in executor.map(todo, runner_name, options, str(golden_root) if golden_root else None):
            if fh:
                fh.write(json.dumps(asdict(r)) + "\n")
                fh.flush()
            if bar:
                bar.update(sizes[unit_key(r.sweep, r.domain, r.chunk)])
            yield r
    finally:
        if bar:
            bar.close()
        if fh:
            fh.close()


def regenerate(sweeps: list[Sweep], domains: Iterable[str], chunks: range | None = None, jobs: int = 1,
               root: Path | None = None, progress: bool = True, force: bool = False,
               executor: Executor | None = None) -> dict[str, int]:
    """Compute golden digests with the oracle (only missing chunks unless ``force``); saves as it goes."""
    work = units(sweeps, domains, chunks)
    current: dict[tuple[str, str], list] = {}
    for s, d, _ in work:
        if (s.id, d) not in current:
            current[(s.id, d)] = list(golden_digests(s, domain(s, d), root))
    if not force:
        work = [u for u in work if current[(u[0].id, u[1])][u[2]] is None]
    by_id = {s.id: s for s in sweeps}
    pending_save: dict[tuple[str, str], float] = {}
    last_save = time.perf_counter()
    n = 0
    for r in execute(work, None, jobs=jobs, golden_root=root, progress=progress, label="oracle", executor=executor):
        if r.status != SweepStatus.GOLDEN:
            raise RuntimeError(f"oracle failed on {r.sweep} {r.domain} chunk {r.chunk}: {r.detail}")
        current[(r.sweep, r.domain)][r.chunk] = r.digest
        pending_save[(r.sweep, r.domain)] = pending_save.get((r.sweep, r.domain), 0.0) + r.seconds
        n += 1
        if time.perf_counter() - last_save > 30:
            _flush(pending_save, current, by_id, root)
            last_save = time.perf_counter()
    _flush(pending_save, current, by_id, root)
    return {"chunks": n}


def _flush(pending, current, by_id, root) -> None:
    for (sid, dname), secs in list(pending.items()):
        s = by_id[sid]
        save_golden(s, domain(s, dname), current[(sid, dname)], root, secs)
        del pending[(sid, dname)]


@dataclass
class Summary:
    results: list[UnitResult]

    def by_sweep(self) -> dict[tuple[str, str], list[UnitResult]]:
        out: dict[tuple[str, str], list[UnitResult]] = {}
        for r in self.results:
            out.setdefault((r.sweep, r.domain), []).append(r)
        return out

    @property
    def failed(self) -> list[UnitResult]:
        return [r for r in self.results if SweepStatus(r.status).deviates]

    @property
    def missing(self) -> list[UnitResult]:
        return [r for r in self.results if r.status == SweepStatus.NO_GOLDEN]

    def lines(self) -> list[str]:
        out = []
        for (sid, dname), rs in sorted(self.by_sweep().items()):
            counts: dict[str, int] = {}
            for r in rs:
                counts[r.status] = counts.get(r.status, 0) + 1
            elements = sum(r.elements for r in rs)
            status = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
            out.append(f"{sid} [{dname}] {elements:,} inputs: {status}")
            unsup = next((r for r in rs if r.status == SweepStatus.UNSUPPORTED), None)
            if unsup:
                detail = unsup.detail if len(unsup.detail) <= 240 else unsup.detail[:240] + " ..."
                out.append(f"  {SweepStatus.UNSUPPORTED}: {detail}")
            for r in sorted(rs, key=lambda r: r.chunk):
                if SweepStatus(r.status).deviates:
                    out.append(f"  chunk {r.chunk}: {r.status}: " + r.detail.replace("\n", "\n  "))
                elif r.status == SweepStatus.READING:
                    out.append(f"  chunk {r.chunk}: {r.detail}")
        return out


def check(sweeps: list[Sweep], domains: Iterable[str], runner_name: str, options: dict[str, str] | None = None,
          chunks: range | None = None, jobs: int = 1, state: Path | None = None, golden_root: Path | None = None,
          progress: bool = False, executor: Executor | None = None) -> Summary:
    """Run a runner over sweeps and return the per-unit results (the API the tests use)."""
    work = units(sweeps, domains, chunks)
    return Summary(list(execute(work, runner_name, options, jobs, state, golden_root, progress,
                                executor=executor)))



"""Running units on the engine's pools: this machine's worker processes (``LocalPool``) or a Dask
cluster (``dask_executor.DaskExecutor``), with the state file and progress line every long run of
qconform keeps (``qconform.progress``), golden regeneration and the summary.

An executor starts a pool for a ``SweepJob`` (``qconform.pool.Job``); it never changes what a unit
computes. ``execute`` adds what every executor shares: resuming from the state file, recording
results, and progress.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Iterator, Protocol

from qconform.pool import Job, local_pool
from qconform.progress import Progress, StateFile
from qconform.sweep.domains import domain
from qconform.sweep.goldens import golden_digests, save_golden
from qconform.sweep.table import FORMAT, Sweep
from qconform.sweep.units import SweepJob, Unit, UnitResult, unit_key, unit_size, units
from qconform.verdicts import SweepStatus

#: A sweep state file's header.
STATE_FORMAT = f"qconform-sweep-state/{FORMAT}"


class Executor(Protocol):
    """Where units run: starts a pool (``submit``, ``result``, ``close``) for a job."""

    def start(self, job: Job): ...


@dataclass
class LocalPool:
    """This machine: ``jobs`` worker processes (``qconform.pool.IsolatedPool``: a chunk that crashes
    or hangs its worker is that chunk's error); one job runs in this process."""

    jobs: int = 1

    def start(self, job: Job):
        return local_pool(job, isolate=self.jobs > 1, workers=self.jobs, timeout=None)


def execute(work: list[Unit], runner_name: str | None, options: dict[str, str] | None = None,
            jobs: int = 1, state: Path | None = None, golden_root: Path | None = None,
            progress: bool = True, label: str = "sweep", executor: Executor | None = None) -> Iterator[UnitResult]:
    """Run units on an executor (default: a local pool of ``jobs`` processes), yielding results in
    order; units already recorded in the state file come first and are not run again (an error is
    run again)."""
    options = dict(options or {})
    job = SweepJob(runner_name, tuple(sorted(options.items())), str(golden_root) if golden_root else None)
    store = StateFile(state, STATE_FORMAT, {"runner": runner_name or "oracle", "options": options}) if state else None
    done = {k: UnitResult(**r) for k, r in store.load(lambda r: unit_key(r["sweep"], r["domain"], r["chunk"])).items()
            if r["status"] != SweepStatus.ERROR} if store else {}
    todo = [u for u in work if job.key(u) not in done]
    for u in work:
        if job.key(u) in done:
            yield done[job.key(u)]
    if not todo:
        return
    bar = Progress(len(todo), label, "chunks", weight=sum(unit_size(u) for u in todo)) if progress else None
    pool = (executor or LocalPool(jobs)).start(job)
    try:
        pool.submit(todo)
        for u in todo:
            r = pool.result(job.key(u))
            if store:
                store.append(asdict(r))
            if bar:
                bar.step(SweepStatus(r.status).deviates, unit_size(u))
            yield r
    finally:
        pool.close()
        if bar:
            bar.done()
        if store:
            store.close()


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



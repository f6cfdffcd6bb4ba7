"""The diagnosis run: judge cases through the engine, diagnose the failures, rank the models.

What the project's diagnosis tests and ``benchmarks/bench_diagnosis.py`` drive (both import it, so
it lives in the package). An application of the engine (``qconform.execution``), it sits above it;
``qconform.diagnosis`` (what the engine calls per failing case: ``diagnose.py``) stays below the
engine and never imports it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterable

from qconform.case import Case
from qconform.record import CaseRecord
from qconform.diagnosis.diagnose import GroupDiagnosis, rank


@dataclass
class Run:
    records: list[dict]
    groups: list[GroupDiagnosis]
    seconds_running: float = 0.0
    seconds_diagnosing: float = 0.0  # diagnose_case on the failing cases plus rank()
    seconds_ranking: float = 0.0  # the rank() part


def run_cases(runner: Any, cases: Iterable[Case], *, diagnose: bool = True, strict_nan: bool = False,
              profile: str = "default", per_group: int | None = None, isolate: bool = False) -> Run:
    """Judge the cases through the engine the plugin uses (``qconform.execution``), diagnosing the
    failures (at most ``per_group`` per type group), then rank them. In this process, or with
    ``isolate`` (bundled corpus cases, a bundled runner by name) in a worker process as certify runs
    them: a runtime that aborts on a case (onnxruntime's QLinearSigmoid without its zero point) then
    crashes that case, not the caller."""
    from qconform.execution import Pipeline

    cases = list(cases)
    records, t_all, t_run = [], 0.0, 0.0
    if isolate:
        t0 = time.perf_counter()
        results = _isolated(getattr(runner, "name", runner), cases, diagnose, strict_nan, profile, per_group)
        records = [res.record.over(CaseRecord.stub(case)).to_dict() for case, res in zip(cases, results)]
        t_all = time.perf_counter() - t0
    else:
        pipeline = Pipeline.local(runner, diagnose=diagnose, strict_nan=strict_nan, profile=profile,
                                  per_group=per_group)
        for case in cases:
            t0 = time.perf_counter()
            res = pipeline.judge(case)
            t_all += time.perf_counter() - t0
            t_run += res.runner_seconds
            records.append(res.record.to_dict())
    groups: list[GroupDiagnosis] = []
    t_rank = 0.0
    if diagnose:
        t0 = time.perf_counter()
        groups = rank(records, {c.id: c for c in cases}, strict_nan=strict_nan, profile=profile)
        t_rank = time.perf_counter() - t0
    return Run(records, groups, t_run, t_all - t_run + t_rank, t_rank)


def _isolated(runner: str, cases: list[Case], diagnose: bool, strict_nan: bool, profile: str,
              per_group: int | None) -> list:
    """The bundled corpus's ``cases`` judged by one isolated worker (``local_executor``)."""
    from qconform import corpus as corpus_mod
    from qconform.execution import Options, local_executor
    root = corpus_mod.DEFAULT_ROOT
    options = Options(golden=str(root), runner=runner, strict_nan=strict_nan, profile=profile, diagnose=diagnose,
                      diagnose_per_group=per_group)
    engine = local_executor(options, corpus_mod.index(root), workers=1)
    try:
        engine.submit([case.id for case in cases])
        return [engine.result(case.id) for case in cases]
    finally:
        engine.close()

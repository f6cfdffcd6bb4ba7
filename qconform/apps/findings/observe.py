"""Running a case through the engine, and the arrays a finding stores."""
from __future__ import annotations

import io
import os
import signal
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from qconform.verdicts import ERROR, FAULTS, Call, Probe


@dataclass
class Observation:
    verdict: str  # the engine's verdict (pass | fail | error | unsupported | info), or ran | rejected
    outputs: list[np.ndarray] | None
    message: str = ""
    diagnosis: list[str] | None = None  # a failure's deviation models, where the pipeline diagnoses
    record: dict | None = None  # the engine's record of the case (``CaseRecord.to_dict``)


def case_of(ref: str, index) -> tuple[Any, bool]:
    """(the Case, whether it is a must-reject probe) for a case id or ``probe:NAME``."""
    from qconform.facts import PROBE
    from qconform.facts.probes import probe_case

    if ref.startswith(PROBE):
        return probe_case(ref[len(PROBE):])
    return index.case(ref), False


def observe(runner, case, must_reject: bool = False) -> Observation:
    """One case judged by the engine (``qconform.execution``), its outputs kept for the finding's
    files; a must-reject probe says whether the runner ran the invalid model. ``runner`` may be a
    ``Pipeline`` (one per runtime: prepared models are reused, failures diagnosed)."""
    import warnings

    from qconform.execution import Pipeline

    pipeline = runner if isinstance(runner, Pipeline) else Pipeline.local(runner, keep_outputs=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if must_reject:
            call, _ = pipeline.call(case)
            return Observation(Probe.of(call.kind), list(call.outputs) if call.kind == Call.OK else None, call.message)
        res = pipeline.judge(case)
    verdict = ERROR if res.verdict in FAULTS else res.verdict
    return Observation(verdict, res.outputs, res.record.problem or "", res.record.diagnosis, res.record.to_dict())


def findings_pipeline(runner):
    """The engine for one runtime's findings: outputs kept, every failure diagnosed."""
    from qconform.execution import Pipeline

    return runner if isinstance(runner, Pipeline) else Pipeline.local(runner, diagnose=True, keep_outputs=True)


_WORKER_PIPELINES: dict[str, Any] = {}  # in a worker process: its runtime's pipeline, resolved once


def _observe_by_name(load: tuple[str, dict | None], case, must_reject: bool) -> Observation:
    """``observe`` in a worker process: the runner resolved there from its name and options."""
    import json

    from qconform.runner import resolve

    key = json.dumps(load, sort_keys=True, default=str)
    if key not in _WORKER_PIPELINES:
        _WORKER_PIPELINES[key] = findings_pipeline(resolve(load[0], load[1]))
    return observe(_WORKER_PIPELINES[key], case, must_reject)


class IsolatedObserver:
    """``observe`` run in one worker process per runtime, so that a runtime that ends its process
    (an assertion's SIGABRT, a segfault) ends that worker, not the findings run: the case is then
    observed as crashed, with how the worker ended, and a fresh worker takes the next one. A case
    with no result after ``timeout`` seconds (certify's default ``--case-timeout``) is observed as a
    timeout and its worker ended, so that a runtime that hangs holds up one case, not the run."""

    def __init__(self, load: tuple[str, dict | None], timeout: float = 120.0) -> None:
        self.load, self.timeout = load, timeout
        self._pool = None

    def __call__(self, case, must_reject: bool = False) -> Observation:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures import TimeoutError as FutureTimeout
        from concurrent.futures.process import BrokenProcessPool

        from qconform.verdicts import CRASHED, TIMEOUT

        if self._pool is None:  # the worker leads a process group: a compiler it started dies with it
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn"),
                                             initializer=getattr(os, "setsid", None))  # POSIX only
        try:
            return self._pool.submit(_observe_by_name, self.load, case, must_reject).result(timeout=self.timeout)
        except FutureTimeout:
            self.close(kill=True)
            return Observation(TIMEOUT, None, f"no result after {self.timeout:g} s: the worker was ended "
                                              "(certify reports the case as timeout)")
        except BrokenProcessPool:
            self.close()
            return Observation(CRASHED, None, "the runtime ended the worker process (a crash or an abort): "
                                              "certify reports the case as crashed")

    def close(self, kill: bool = False) -> None:
        """Shut the worker down; ``kill``: end it first (it is busy with a case that hangs)."""
        if self._pool is not None:
            if kill:  # the worker and what it started (IREE's iree-compile): its whole process group
                for proc in list(getattr(self._pool, "_processes", {}).values()):
                    try:
                        os.killpg(proc.pid, signal.SIGKILL) if hasattr(os, "killpg") else proc.kill()
                    except ProcessLookupError:
                        pass
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def storable(arr: np.ndarray) -> tuple[np.ndarray, Any]:
    """(what the npz holds, the qconform element type when it is held as codes, else None)."""
    from qconform import adapt, dtypes

    arr = np.asarray(arr)
    t = dtypes.BY_DTYPE.get(arr.dtype)
    if t is None or t.onnx in adapt.NUMPY_NATIVE:
        return np.array(arr, order="C", copy=True), None
    return np.array(t.to_bits(arr), order="C", copy=True), t


def write_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """np.savez, but with a fixed member timestamp (np.savez stamps the current time)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, arr in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.array(arr, order="C", copy=True), allow_pickle=False)
            zf.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0)), member.getvalue())
    path.write_bytes(buf.getvalue())


def closest_reading(case, outputs: Sequence[np.ndarray] | None):
    """The case's permitted reading nearest to the runtime's outputs (``compare.closest``: fewest
    differing elements; the first reading on a tie, a structural difference or no outputs): what a
    finding shows as expected, so that a difference the spec permits (another reading) is never
    reported."""
    from qconform.compare import candidates, closest

    if outputs is None or len(case.readings) == 1:
        return case.readings[0]
    _, name = closest(candidates(case), outputs)
    return next((r for r in case.readings if r.name == name), case.readings[0])


def skip_mask(case, outputs: Sequence[np.ndarray] | None, reading=None) -> dict[str, np.ndarray]:
    """Per output, the elements the script does not compare: those the comparison rule excuses
    (``ElemType.excused``: don't-care, or both NaN) -- NaN only for the types numpy cannot hold,
    which the script compares as codes (numpy's own NaN compares as a value there)."""
    from qconform import dtypes
    from qconform.compare import masks

    out = {}
    chosen = reading or case.readings[0]
    for name, e, mask, a in zip(case.output_names, chosen.outputs, masks(case, chosen),
                                list(outputs or ()) + [None] * len(case.output_names)):
        t = dtypes.get(e.dtype)
        a = None if a is None else np.asarray(a)
        if a is not None and a.dtype == e.dtype and a.shape == np.shape(e) and t.onnx not in _native():
            m = t.excused(e, a, mask)
        else:
            m = np.zeros(np.shape(e), bool) if mask is None else np.array(mask, bool)
        if m.any():
            out[name] = m
    return out


def _native() -> frozenset[int]:
    from qconform import adapt

    return adapt.NUMPY_NATIVE

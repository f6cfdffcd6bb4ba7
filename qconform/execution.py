"""Running cases: one case's whole pipeline, and the engines that run many, in order, ahead of pytest.

``Pipeline.run(case_id)`` is everything that happens to one case -- load it, build its model (a
prepared model is reused when a later case has the very same model bytes), call the runner through
``isolation.execute`` (which classifies everything a runner can do wrong), compare, diagnose -- and
returns a small ``CaseResult``: the verdict, the per-case record of the report, and the failure text.

Engines hand case ids to a pipeline and give results back in the order the ids were submitted:

* ``InProcessEngine`` (``--isolate=off``): the pipeline in this process, computed on demand.
* ``IsolatedEngine`` (``--isolate=on``): the pipeline in a worker process (``isolation.Child``).
  The controller sends batches of ids (many cases per round trip); the worker loads the corpus groups
  it needs itself and streams one result per case back, so the runner works ahead while pytest
  reports. A crash or a hang is attributed to the case that was running -- the first submitted case
  without a result -- and the rest of its batch continues in a fresh worker.
"""
from __future__ import annotations

import hashlib
import time
import traceback
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from qconform.isolation import CallResult, Child, _raised, call, describe_exit

#: How many prepared models a pipeline keeps (keyed by the serialized model: identical models only).
PREPARED_CACHE = 32


@dataclass(frozen=True)
class Options:
    """What the pipeline needs from the command line (picklable: it crosses to the worker)."""

    golden: str
    runner: str
    runner_options: Mapping[str, str] = field(default_factory=dict)
    strict_nan: bool = False
    profile: str = "default"
    diagnose: bool = True
    diagnose_per_group: int | None = 16


@dataclass
class CaseResult:
    """One case's outcome: small enough to stream per case from a worker."""

    id: str
    verdict: str  # pass | fail | error | crashed | timeout | unsupported
    record: dict[str, Any]  # the report's per-case record
    message: str = ""  # the failure text for the terminal ('' for a pass)
    runner_seconds: float = 0.0


class Pipeline:
    """One case at a time: corpus -> model -> runner -> compare -> diagnosis -> record."""

    def __init__(self, options: Options, runner: Any, cases=None) -> None:
        from qconform import corpus as corpus_mod

        self.options = options
        self.runner = runner
        #: anything with .case(id): the controller's Index in process, a Groups loader in a worker
        self.cases = cases if cases is not None else corpus_mod.Groups(Path(options.golden))
        self._prepared: OrderedDict[str, Callable] = OrderedDict()
        self.prepared_hits = 0
        self._budget = None

    def _prepare(self, model) -> tuple[Callable | None, CallResult | None]:
        """The runner's prepared callable for this model (reused for identical model bytes)."""
        from qconform.runner import Unsupported, prepare

        key = hashlib.sha256(model.SerializeToString()).hexdigest()
        if key in self._prepared:
            self._prepared.move_to_end(key)
            self.prepared_hits += 1
            return self._prepared[key], None
        try:
            run = prepare(self.runner, model)
        except Unsupported as exc:
            msg = str(exc).strip()
            return None, CallResult("unsupported", message=msg.splitlines()[0] if msg else "unsupported")
        except Exception as exc:  # noqa: BLE001 — the runner's own failure: this case's error
            return None, _raised(exc)
        self._prepared[key] = run
        if len(self._prepared) > PREPARED_CACHE:
            self._prepared.popitem(last=False)
        return run, None

    def run(self, case_id: str) -> CaseResult:
        from qconform.model import build_model

        case = self.cases.case(case_id)
        try:
            model = build_model(case)
        except Exception as exc:  # noqa: BLE001 — a model qconform cannot build is that case's error
            return self._finish(case, CallResult("error", message=f"build_model: {type(exc).__name__}: {exc}"))
        run, refused = self._prepare(model)
        t0 = time.perf_counter()
        result = refused or call(run, case.feeds)
        return self._finish(case, result, time.perf_counter() - t0)

    def _finish(self, case, call: CallResult, seconds: float = 0.0) -> CaseResult:
        from qconform.compare import Outcome, compare

        o = self.options
        if call.kind != "ok":
            outcome = Outcome(call.kind, problem=call.message)
            rec = record(case, outcome)
            if call.traceback:
                rec["traceback"] = call.traceback
            message = "" if call.kind == "unsupported" else f"{case.id}: {call.kind}: {call.message}"
            return CaseResult(case.id, call.kind, rec, message, seconds)
        outcome = compare(case, call.outputs, strict_nan=o.strict_nan, profile=o.profile)
        diagnosis = self._diagnose(case, outcome, call.outputs)
        rec = record(case, outcome, diagnosis)
        if outcome.verdict == "pass":
            return CaseResult(case.id, "pass", rec, "", seconds)
        lines = [outcome.message(case)]
        if diagnosis is not None:
            from qconform.diagnosis.diagnose import message_lines

            lines += message_lines(diagnosis)
        return CaseResult(case.id, outcome.verdict, rec, "\n".join(lines), seconds)

    def _diagnose(self, case, outcome, outputs) -> list | None:
        """Which known deviations reproduce a failure (None: not diagnosed, by option or budget)."""
        if outcome.verdict != "fail" or not self.options.diagnose:
            return None
        from qconform.diagnosis.diagnose import Budget, diagnose_case

        if self._budget is None:
            self._budget = Budget(self.options.diagnose_per_group or None)
        if not self._budget.allow(case):
            return None
        try:
            return diagnose_case(case, outputs, strict_nan=self.options.strict_nan)
        except Exception:  # diagnosis is advice: it must never turn a verdict into a crash
            return None


def record(case, outcome, diagnosis: list | None = None) -> dict[str, Any]:
    """The report's per-case record (qconform/report/model.py reads it)."""
    import dataclasses

    rec = {"id": case.id, "op": case.op, "domain": case.domain, "opset": case.opset, "types": case.types,
           "family": case.family, "clause": case.clause, "verdict": outcome.verdict, "reading": outcome.reading,
           "readings": len(case.readings), "masked": outcome.masked, "mismatches": outcome.mismatch_count,
           "problem": outcome.problem,
           "first_mismatches": [dataclasses.asdict(m) for m in outcome.mismatches],
           "output_types": list(case.output_types)}
    if diagnosis is not None:
        rec["diagnosis"] = [d.model for d in diagnosis]
    return rec


def crash_result(case_ref, kind: str, message: str) -> CaseResult:
    """A case whose worker crashed or hung: no outputs, the verdict from the controller."""
    rec = {"id": case_ref.id, "op": case_ref.op, "domain": case_ref.domain, "opset": case_ref.opset,
           "types": case_ref.types, "family": case_ref.family, "clause": case_ref.clause, "verdict": kind,
           "reading": None, "readings": case_ref.readings, "masked": 0, "mismatches": 0, "problem": message,
           "first_mismatches": [], "output_types": list(case_ref.output_types)}
    return CaseResult(case_ref.id, kind, rec, f"{case_ref.id}: {kind}: {message}")


# ----------------------------------------------------------------------------------------------
# Engines
# ----------------------------------------------------------------------------------------------
class InProcessEngine:
    """``--isolate=off``: the pipeline in this process; a case is computed when pytest asks for it."""

    def __init__(self, options: Options, runner: Any, index=None) -> None:
        self.pipeline = Pipeline(options, runner, index)

    def submit(self, case_ids) -> None:
        pass

    def result(self, case_id: str) -> CaseResult:
        return self.pipeline.run(case_id)

    def close(self) -> None:
        pass


#: The worker's first message: started, runner resolved. The case timeout runs from here, so a slow
#: start (a loaded machine, a heavy runtime to import) is never a case's timeout.
READY = "ready"
#: How long a worker may take to start (spawn, imports, the runner's constructor).
STARTUP_TIMEOUT = 300.0


def _serve(conn, options: Options) -> None:
    """The worker's loop: a batch of ids in, one CaseResult out per case, in order."""
    from qconform.runner import resolve

    try:
        pipeline = Pipeline(options, resolve(options.runner, options.runner_options))
        conn.send(READY)
    except Exception as exc:  # the runner cannot even start here: every case says so
        why = f"runner failed to start in its worker: {type(exc).__name__}: {exc}"
        conn.send(READY)
        while (batch := conn.recv()) is not None:
            for cid in batch:
                conn.send(CaseResult(cid, "error", {"id": cid, "verdict": "error", "problem": why}, f"{cid}: error: {why}"))
        return
    while (batch := conn.recv()) is not None:
        for cid in batch:
            try:
                res = pipeline.run(cid)
            except Exception as exc:  # a qconform bug on one case: that case's error, the run goes on
                why = f"qconform failed on this case: {type(exc).__name__}: {exc}"
                res = CaseResult(cid, "error", {"id": cid, "verdict": "error", "problem": why,
                                                "traceback": traceback.format_exc()}, f"{cid}: error: {why}")
            try:
                conn.send(res)
            except Exception as exc:  # e.g. a record that cannot be pickled
                conn.send(CaseResult(cid, "error", {"id": cid, "verdict": "error", "problem": str(exc)},
                                     f"{cid}: error: result cannot be transferred: {exc}"))


class IsolatedEngine:
    """``--isolate=on``: the pipeline in a worker process, fed ahead in batches, read back in order."""

    def __init__(self, options: Options, index, timeout: float | None, memory_mb: int = 0, batch: int = 64) -> None:
        self.options, self.index = options, index
        self.timeout, self.batch = timeout, batch
        self.child = Child(_serve, (options,), memory_mb)
        self.pending: deque[str] = deque()  # submitted, no result yet, in order
        self.done: dict[str, CaseResult] = {}
        self.restarts = 0
        self._ready = False
        self._last = time.monotonic()

    def submit(self, case_ids) -> None:
        """Queue cases (those not already queued or done) for the worker, in batches."""
        fresh = [c for c in case_ids if c not in self.done and c not in self._queued]
        if not fresh:
            return
        if not self.child.alive():
            self._restart()
        for i in range(0, len(fresh), self.batch):
            chunk = fresh[i:i + self.batch]
            self.pending.extend(chunk)
            self.child.send(chunk)

    @property
    def _queued(self) -> set[str]:
        return set(self.pending)

    def _restart(self) -> None:
        if self.child.started:
            self.restarts += 1
        self.child.start()
        self._ready = False
        self._last = time.monotonic()
        again = list(self.pending)
        for i in range(0, len(again), self.batch):
            self.child.send(again[i:i + self.batch])

    def result(self, case_id: str) -> CaseResult:
        if case_id not in self.done and case_id not in self._queued:
            self.submit([case_id])
        while case_id not in self.done:
            self._next()
        return self.done.pop(case_id)

    def _wait_ready(self) -> bool:
        """Wait for the fresh worker's READY; False (and the head case's verdict) if it never comes."""
        got = self.child.receive(max(STARTUP_TIMEOUT, self.timeout or 0.0))
        if got == READY:
            self._ready = True
            self._last = time.monotonic()
            return True
        head = self.pending[0]
        why = (f"the runner's worker did not start within {max(STARTUP_TIMEOUT, self.timeout or 0.0):g}s"
               if got is Child.TIMEOUT else f"the runner's worker died while starting: {describe_exit(self.child.wait_exit())}")
        self.child.kill()
        self._settle(crash_result(self.index.by_id[head], "crashed" if got is Child.GONE else "timeout", why))
        return False

    def _next(self) -> None:
        """Read the next result, or turn the head case into a crash or a timeout."""
        if not self._ready and not self._wait_ready():
            return
        head = self.pending[0]
        left = None if self.timeout is None else max(0.0, self._last + self.timeout - time.monotonic())
        got = self.child.receive(left)
        if got is Child.TIMEOUT:
            self.child.kill()
            self._settle(crash_result(self.index.by_id[head], "timeout",
                                      f"no result within --case-timeout={self.timeout:g}s; worker killed"))
        elif got is Child.GONE:
            code = self.child.wait_exit()
            self.child.kill()
            self._settle(crash_result(self.index.by_id[head], "crashed", describe_exit(code)))
        else:
            if got.id != head:  # the protocol is strictly in order: anything else is a qconform bug
                raise RuntimeError(f"worker answered {got.id!r} while {head!r} was due")
            self.pending.popleft()
            self.done[got.id] = got
            self._last = time.monotonic()

    def _settle(self, res: CaseResult) -> None:
        """The head case gets the controller's verdict; the rest of its batch goes to a fresh worker."""
        self.pending.popleft()
        self.done[res.id] = res
        if self.pending:
            self._restart()
        self._last = time.monotonic()

    def close(self) -> None:
        self.child.close()


__all__ = ["CaseResult", "InProcessEngine", "IsolatedEngine", "Options", "Pipeline", "crash_result", "record"]

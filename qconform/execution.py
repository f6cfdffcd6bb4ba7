"""Running cases: one case's whole pipeline, and the engines that run many, in order, ahead of pytest.

This is the one path from a case to a verdict. ``Pipeline.judge(case)`` is everything that happens
to one case -- build its model (a prepared model is reused when a later case has the very same model
bytes), call the runner (``isolation.call`` classifies everything a runner can do wrong), compare,
diagnose -- and returns a small ``CaseResult``: the verdict, the per-case record of the report, and
the failure text. Every application judges through it: the pytest plugin (``Pipeline.run`` by case
id, in a worker or in process), facts observation and drift, findings, the diagnosis run, explore.
``judge(runner, case)`` is the one-case form; ``Pipeline.local(runner)`` the form for a loop.

Executors hand case ids to pipelines and give one result back per id (``Executor``, the seam the
front-ends drive; a remote device, a Dask cluster or offline result files are executors too):

* ``InProcessEngine`` (``--isolate=off``): the pipeline in this process, computed on demand.
* ``IsolatedEngine`` (``--isolate=on``): the pipeline in a worker process (``isolation.Child``).
  The controller sends batches of ids (many cases per round trip); the worker loads the corpus groups
  it needs itself and streams one result per case back, so the runner works ahead while pytest
  reports. A crash or a hang is attributed to the case that was running -- the first submitted case
  without a result -- and the rest of its batch continues in a fresh worker.
"""
from __future__ import annotations

import time
import traceback
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence, runtime_checkable

from qconform.isolation import CallResult, Child, _raised, call, describe_exit, reason_line
from qconform.verdicts import FAIL, FAULTS, NOT_RUN, PASS, UNSUPPORTED

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
    verdict: str  # pass | fail | error | crashed | timeout | unsupported | info
    record: dict[str, Any]  # the report's per-case record
    message: str = ""  # the failure text for the terminal ('' for a pass)
    runner_seconds: float = 0.0
    detail: str = ""  # the comparison's own text for a failure (``message`` without the diagnosis lines)
    outputs: list | None = None  # the runner's outputs, kept only where asked (``keep_outputs``)
    stop: bool = False  # not run because the device is gone: the front-end stops the run here


class Pipeline:
    """One case at a time: corpus -> model -> runner -> compare -> diagnosis -> record."""

    def __init__(self, options: Options, runner: Any, cases=None, keep_outputs: bool = False) -> None:
        self.options = options
        self.runner = runner
        #: anything with .case(id): the controller's Index in process, a Groups loader in a worker
        self._cases = cases
        self.keep_outputs = keep_outputs
        self._prepared: OrderedDict[str, Callable] = OrderedDict()
        self.prepared_hits = 0
        self._budget = None
        #: the run of cases being judged (its first id; None: judged one by one): the diagnosis budget's scope
        self.run_scope: str | None = None

    @classmethod
    def local(cls, runner: Any, *, diagnose: bool = False, strict_nan: bool = False, profile: str = "default",
              keep_outputs: bool = False, per_group: int | None = None) -> "Pipeline":
        """A pipeline over cases the caller holds (``judge``), in this process: what the applications
        that are not the pytest plugin use. With ``diagnose``, every failure is diagnosed (at most
        ``per_group`` per type group where given)."""
        name = getattr(runner, "name", type(runner).__name__)
        return cls(Options(golden="", runner=name, strict_nan=strict_nan, profile=profile, diagnose=diagnose,
                           diagnose_per_group=per_group), runner, keep_outputs=keep_outputs)

    @property
    def cases(self):
        if self._cases is None:
            from qconform import corpus as corpus_mod

            self._cases = corpus_mod.Groups(Path(self.options.golden))
        return self._cases

    def _prepare(self, model) -> tuple[Callable | None, CallResult | None]:
        """The runner's prepared callable for this model (reused for identical model bytes);
        ``model`` is a ModelProto or its serialised bytes (parsed only when not prepared before)."""
        from qconform.runner import Unsupported, prepare

        key = model if isinstance(model, bytes) else model.SerializeToString()  # bytes hash once, in C
        if key in self._prepared:
            self._prepared.move_to_end(key)
            self.prepared_hits += 1
            return self._prepared[key], None
        try:
            if isinstance(model, bytes):
                import onnx

                model = onnx.load_from_string(model)
            run = prepare(self.runner, model)
        except Unsupported as exc:
            return None, CallResult("unsupported", message=reason_line(str(exc)))
        except Exception as exc:  # noqa: BLE001 — the runner's own failure: this case's error
            return None, _raised(exc)
        self._prepared[key] = run
        if len(self._prepared) > PREPARED_CACHE:
            self._prepared.popitem(last=False)
        return run, None

    def knows(self, model_bytes: bytes) -> bool:
        """Whether a model (its bytes) is prepared already, so a call will not parse it."""
        return model_bytes in self._prepared

    def run(self, case_id: str) -> CaseResult:
        return self.judge(self.cases.case(case_id))

    def call(self, case) -> tuple[CallResult, float]:
        """The runner on one case: build its model, prepare it (or reuse an identical one), call it.
        Never raises for anything the runner does; the seconds are the call's own."""
        from qconform.model import build_model

        try:
            model = build_model(case, check=False)  # every corpus model passed onnx.checker when it was written
        except Exception as exc:  # noqa: BLE001 — a model qconform cannot build is that case's error
            return CallResult("error", message=f"build_model: {type(exc).__name__}: {exc}"), 0.0
        return self.call_model(model, case.feeds)

    def call_model(self, model, feeds) -> tuple[CallResult, float]:
        """The runner on a model (a ModelProto, or the bytes a device worker was sent) and its inputs,
        prepared once per identical model: what ``call`` does after building the case's model."""
        run, refused = self._prepare(model)
        t0 = time.perf_counter()
        result = refused or call(run, feeds)
        return result, time.perf_counter() - t0

    def judge(self, case) -> CaseResult:
        """One case's verdict, record and failure text: the one path every application takes."""
        result, seconds = self.call(case)
        return self.judge_call(case, result, seconds)

    def judge_call(self, case, result: CallResult, seconds: float = 0.0) -> CaseResult:
        """The verdict of a runner call made elsewhere (a device's stored outputs, ``qconform.offline``):
        the same comparison, diagnosis and record as ``judge``."""
        out = self._finish(case, result, seconds)
        if self.keep_outputs and result.kind == "ok":
            out.outputs = list(result.outputs)
        return out

    def _finish(self, case, call: CallResult, seconds: float = 0.0) -> CaseResult:
        from qconform.compare import Outcome, compare

        o = self.options
        if call.kind == NOT_RUN:  # the infrastructure failed, not the runtime: no verdict on it
            return CaseResult(case.id, NOT_RUN, record(case, Outcome(NOT_RUN, problem=call.message)),
                              f"{case.id}: not run: {call.message}", seconds, stop=call.stop)
        if case.information and call.kind not in FAULTS:
            return self._inform(case, call, seconds)
        if call.kind != "ok":
            outcome = Outcome(call.kind, problem=call.message)
            rec = record(case, outcome)
            if call.traceback:
                rec["traceback"] = call.traceback
            message = "" if call.kind == UNSUPPORTED else f"{case.id}: {call.kind}: {_terminal(call.message)}"
            return CaseResult(case.id, call.kind, rec, message, seconds)
        outcome = compare(case, call.outputs, strict_nan=o.strict_nan, profile=o.profile)
        diagnosis, diagnosis_errors, step = self._diagnose(case, outcome, call.outputs)
        rec = record(case, outcome, diagnosis, diagnosis_errors, step)
        if outcome.verdict == FAIL and outcome.mismatch_count:
            from qconform.compare import evidence

            try:
                rec["evidence"] = evidence(case, call.outputs, outcome.reading, o.strict_nan)
            except Exception:  # noqa: BLE001 - evidence is for the report; it never changes a verdict
                pass
        if outcome.verdict == PASS:
            return CaseResult(case.id, "pass", rec, "", seconds)
        lines = [outcome.message(case)]
        if diagnosis is not None:
            from qconform.diagnosis.diagnose import message_lines

            lines += message_lines(diagnosis, step)
        return CaseResult(case.id, outcome.verdict, rec, "\n".join(lines), seconds, detail=lines[0])

    def _inform(self, case, call: CallResult, seconds: float) -> CaseResult:
        """A model the text makes invalid: what the runner did with it, as information (never a pass
        or a failure; qconform/docs/semantics.md#principles). Rejecting it is right; running it is
        compared with the reading runtimes commonly follow, and said."""
        from qconform.compare import Outcome, compare

        reading = None
        if call.kind == "ok":
            o = compare(case, call.outputs, strict_nan=self.options.strict_nan, profile=self.options.profile)
            if o.verdict == PASS:
                reading, did = o.reading, f"ran it; the outputs match reading '{o.reading}'"
            else:
                did = "ran it; " + (o.problem or f"{o.mismatch_count} element(s) differ from reading '{o.reading}'")
        else:
            first = (call.message.strip().splitlines() or [""])[0]
            did = f"rejected it ({call.kind}: {first})"
        outcome = Outcome("info", reading=reading, problem=f"information: {case.information}. The runner {did}.")
        return CaseResult(case.id, "info", record(case, outcome), "", seconds)

    def _diagnose(self, case, outcome, outputs) -> tuple[list | None, list[str], str]:
        """Which known deviations reproduce a failure (None: not diagnosed, by option or budget); the
        models that broke on it (shown in the summary and report); and, when none explains it, the
        step the difference sits in."""
        if outcome.verdict != FAIL or not self.options.diagnose:
            return None, [], ""
        from qconform.diagnosis.diagnose import Budget, diagnose_case

        if self._budget is None:
            self._budget = Budget(self.options.diagnose_per_group or None)
        if not self._budget.allow(case, self.run_scope):
            return None, [], ""
        errors: list[str] = []
        try:
            found = diagnose_case(case, outputs, strict_nan=self.options.strict_nan, profile=self.options.profile,
                                  errors=errors)
        except Exception as exc:  # noqa: BLE001 - advice never turns a verdict into a crash, but it shows
            found = []
            errors.append(f"diagnose: {type(exc).__name__}: {exc}")
        step = ""
        if not found:
            from qconform.diagnosis.diagnose import localise

            try:
                step = localise(case, outputs, outcome.reading)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"localise: {type(exc).__name__}: {exc}")
        return found, errors, step


#: The terminal (and JUnit) shows a runner's message up to this many characters; report.json keeps
#: the whole text once beside it (qconform.report.model).
TERMINAL_CHARS = 4000


def _terminal(text: str) -> str:
    return text if len(text) <= TERMINAL_CHARS else f"{text[:TERMINAL_CHARS]}… [{len(text):,} characters in all]"


def judge(runner: Any, case, *, diagnose: bool = False, strict_nan: bool = False, profile: str = "default",
          keep_outputs: bool = False) -> CaseResult:
    """One case through the one engine, in this process (``Pipeline.local(...).judge`` for a loop)."""
    return Pipeline.local(runner, diagnose=diagnose, strict_nan=strict_nan, profile=profile,
                          keep_outputs=keep_outputs).judge(case)


def record(case, outcome, diagnosis: list | None = None, diagnosis_errors: Sequence[str] = (),
           diagnosis_step: str = "") -> dict[str, Any]:
    """The report's per-case record (qconform/report/model.py reads it)."""
    import dataclasses

    rec = {"id": case.id, "op": case.op, "domain": case.domain, "opset": case.opset, "types": case.types,
           "family": case.family, "clause": case.clause, "verdict": outcome.verdict, "reading": outcome.reading,
           "readings": len(case.readings), "masked": outcome.masked, "mismatches": outcome.mismatch_count,
           "problem": outcome.problem,
           "first_mismatches": [dataclasses.asdict(m) for m in outcome.mismatches],
           "output_types": list(case.output_types)}
    if diagnosis is not None:
        from qconform.diagnosis.diagnose import record_fields

        rec.update(record_fields(diagnosis, diagnosis_errors))
        if diagnosis_step:
            rec["diagnosis_step"] = diagnosis_step
    return rec


def crash_result(case_ref, kind: str, message: str) -> CaseResult:
    """A case whose worker crashed or hung: no outputs, the verdict from the controller."""
    rec = {"id": case_ref.id, "op": case_ref.op, "domain": case_ref.domain, "opset": case_ref.opset,
           "types": case_ref.types, "family": case_ref.family, "clause": case_ref.clause, "verdict": kind,
           "reading": None, "readings": case_ref.readings, "masked": 0, "mismatches": 0, "problem": message,
           "first_mismatches": [], "output_types": list(case_ref.output_types)}
    return CaseResult(case_ref.id, kind, rec, f"{case_ref.id}: {kind}: {message}")


# ----------------------------------------------------------------------------------------------
# Executors
# ----------------------------------------------------------------------------------------------
@runtime_checkable
class Executor(Protocol):
    """Where cases run. A front-end submits case ids (as many as it likes, ahead) and asks for each
    id's result once, in any order; the executor owns isolation, retries and attribution: a crash
    or hang is that case's verdict, never a lost result. ``InProcessEngine`` and ``IsolatedEngine``
    are the local ones; an executor for a device over the network, a Dask cluster or offline result
    files implements these three calls and the front-ends need no change."""

    runs_ahead: bool  # whether submit() starts work before result() is asked (pytest then feeds it ahead)

    def submit(self, case_ids: Sequence[str]) -> None: ...

    def result(self, case_id: str) -> CaseResult: ...

    def close(self) -> None: ...


def local_executor(options: Options, index, *, isolate: bool = True, workers: int = 1, timeout: float | None = 120.0,
                   memory_mb: int = 0, batch: int = 64, runner: Any = None) -> Executor:
    """This machine's executor: ``workers`` isolated worker processes, or (``isolate=False``) the
    pipeline in this process with ``runner``."""
    if isolate:
        return IsolatedEngine(options, index, timeout, memory_mb, batch, workers=workers)
    from qconform.runner import resolve

    return InProcessEngine(options, runner or resolve(options.runner, options.runner_options), index)


class InProcessEngine:
    """``--isolate=off``: the pipeline in this process; a case is computed when pytest asks for it."""

    runs_ahead = False  # submit() is a no-op: nothing to hand over ahead of pytest

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


def _incoming(conn):
    """The controller's batches, read by a thread as soon as they arrive: the controller's send never
    waits for the worker to finish what it is doing. Ends at the controller's None (or a closed pipe)."""
    import queue
    import threading

    inbox: queue.Queue = queue.Queue()

    def read() -> None:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                msg = None
            inbox.put(msg)
            if msg is None:
                return

    threading.Thread(target=read, daemon=True, name="qconform-batches").start()
    while (batch := inbox.get()) is not None:
        yield batch


def _serve(conn, options: Options) -> None:
    """The worker's loop: a batch of ids in, one CaseResult out per case, in order."""
    from qconform.runner import resolve

    try:
        pipeline = Pipeline(options, resolve(options.runner, options.runner_options))
        conn.send(READY)
    except Exception as exc:  # the runner cannot even start here: every case says so
        why = f"runner failed to start in its worker: {type(exc).__name__}: {exc}"
        conn.send(READY)
        while (msg := conn.recv()) is not None:
            for cid in msg[1]:
                conn.send(CaseResult(cid, "error", {"id": cid, "verdict": "error", "problem": why}, f"{cid}: error: {why}"))
        return
    for scope, batch in _incoming(conn):
        pipeline.run_scope = scope
        for cid in batch:
            try:
                res = pipeline.run(cid)
            except Exception as exc:  # a qconform bug on one case: that case's error, the run goes on
                why = f"qconform failed on this case: {type(exc).__name__}: {exc}"
                res = CaseResult(cid, "error", {"id": cid, "verdict": "error", "problem": why,
                                                "traceback": traceback.format_exc()}, f"{cid}: error: {why}")
            try:
                conn.send(res)
            except (BrokenPipeError, ConnectionError, EOFError):
                return  # the controller is gone (killed with its machine, its Dask worker): nobody to answer
            except Exception as exc:  # e.g. a record that cannot be pickled
                conn.send(CaseResult(cid, "error", {"id": cid, "verdict": "error", "problem": str(exc)},
                                     f"{cid}: error: result cannot be transferred: {exc}"))


class _Lane:
    """One runner worker and the cases handed to it, in order: its crashes and hangs are its own."""

    def __init__(self, engine: "IsolatedEngine") -> None:
        self.engine = engine
        self.child = Child(_serve, (engine.options,), engine.memory_mb)
        self.pending: deque[str] = deque()  # submitted to this worker, no result yet, in order
        self.run_of: dict[str, str] = {}  # pending case -> the run it was handed over in (its first id)
        self.ready = False
        self.last = time.monotonic()

    def send(self, ids: list[str]) -> None:
        """Hand over one run of cases (one corpus group); batches carry the run's first id."""
        if not self.child.alive():
            self.restart()
        self.pending.extend(ids)
        self.run_of.update((cid, ids[0]) for cid in ids)
        self._send(ids)

    def _send(self, ids: list[str]) -> None:
        start = 0
        for i in range(1, len(ids) + 1):  # batches never straddle two runs
            if i == len(ids) or i - start >= self.engine.batch or self.run_of[ids[i]] != self.run_of[ids[start]]:
                self.child.send((self.run_of[ids[start]], ids[start:i]))
                start = i

    def restart(self) -> None:
        if self.child.started:
            self.engine.restarts += 1
        self.child.start()
        self.ready = False
        self.last = time.monotonic()
        self._send(list(self.pending))

    def _wait_ready(self) -> bool:
        """Wait for a fresh worker's READY; False (and the head case's verdict) if it never comes."""
        limit = max(STARTUP_TIMEOUT, self.engine.timeout or 0.0)
        got = self.child.receive(limit)
        if got == READY:
            self.ready = True
            self.last = time.monotonic()
            return True
        why = (f"the runner's worker did not start within {limit:g}s" if got is Child.TIMEOUT
               else f"the runner's worker died while starting: {describe_exit(self.child.wait_exit())}")
        self.child.kill()
        self._settle("crashed" if got is Child.GONE else "timeout", why)
        return False

    def next(self) -> None:
        """Read this worker's next result, or turn its head case into a crash or a timeout."""
        if not self.ready and not self._wait_ready():
            return
        head, timeout = self.pending[0], self.engine.timeout
        # the head case started when the message before it arrived (results come strictly in order)
        since = max(self.last, self.child.last_arrival) if self.child.inbox_empty() else self.last
        got = self.child.receive(None if timeout is None else max(0.0, since + timeout - time.monotonic()))
        if got is Child.TIMEOUT:
            self.child.kill()
            self._settle("timeout", f"no result within --case-timeout={timeout:g}s; worker killed")
        elif got is Child.GONE:
            code = self.child.wait_exit()
            self.child.kill()
            self._settle("crashed", describe_exit(code))
        else:
            if got.id != head:  # the protocol is strictly in order: anything else is a qconform bug
                raise RuntimeError(f"worker answered {got.id!r} while {head!r} was due")
            self.pending.popleft()
            self.run_of.pop(got.id, None)
            self.engine.done[got.id] = got
            self.last = time.monotonic()

    def _settle(self, kind: str, why: str) -> None:
        """The head case gets the controller's verdict; the rest of its batch goes to a fresh worker."""
        head = self.pending.popleft()
        self.run_of.pop(head, None)
        self.engine.done[head] = crash_result(self.engine.index.by_id[head], kind, why)
        if self.pending:
            self.restart()
        self.last = time.monotonic()


def runs(case_ids: Sequence[str], size: int) -> Iterator[list[str]]:
    """The ids cut into runs handed to one worker each: consecutive cases of one corpus group (a
    worker loads a group once), at most ``size``. Every executor cuts them here, so a run (the
    diagnosis budget's scope) is the same whichever executor runs it."""
    from qconform.corpus import group_of

    run: list[str] = []
    for cid in case_ids:
        if run and (len(run) >= size or group_of(cid) != group_of(run[0])):
            yield run
            run = []
        run.append(cid)
    if run:
        yield run


class IsolatedEngine:
    """``--isolate=on``: the pipeline in ``workers`` worker processes, fed ahead in batches, results
    read back per worker in order. Cases go to workers in runs of one corpus group (a worker loads a
    group once), each run to the worker with the least work pending."""

    runs_ahead = True

    RUN = 512  # the longest run of one group handed to one worker at a time

    def __init__(self, options: Options, index, timeout: float | None, memory_mb: int = 0, batch: int = 64,
                 workers: int = 1) -> None:
        self.options, self.index = options, index
        self.timeout, self.memory_mb, self.batch = timeout, memory_mb, batch
        self.lanes = [_Lane(self) for _ in range(max(1, workers))]
        self.owner: dict[str, _Lane] = {}
        self.submitted: set[str] = set()  # every id ever submitted (results are handed out once)
        self.done: dict[str, CaseResult] = {}
        self.restarts = 0

    @property
    def child(self) -> Child:  # the first worker (tests look at it)
        return self.lanes[0].child

    def submit(self, case_ids) -> None:
        """Queue cases (those never submitted before) for the workers."""
        fresh = [c for c in case_ids if c not in self.submitted]
        self.submitted.update(fresh)
        for run in runs(fresh, self.RUN):
            lane = min(self.lanes, key=lambda ln: len(ln.pending))
            for c in run:
                self.owner[c] = lane
            lane.send(run)

    def result(self, case_id: str) -> CaseResult:
        lane = self.owner.get(case_id)
        if case_id not in self.done and (lane is None or case_id not in lane.pending):
            self.submitted.discard(case_id)  # never submitted, or its result was handed out: compute (again)
            self.submit([case_id])
        while case_id not in self.done:
            self.owner[case_id].next()
        self.owner.pop(case_id, None)
        return self.done.pop(case_id)

    @property
    def pending(self) -> list[str]:
        return [c for lane in self.lanes for c in lane.pending]

    def close(self) -> None:
        for lane in self.lanes:
            lane.child.close()


__all__ = ["CaseResult", "Executor", "InProcessEngine", "IsolatedEngine", "Options", "Pipeline", "crash_result", "judge", "runs",
           "local_executor", "record"]

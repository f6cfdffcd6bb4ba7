"""Running cases: one case's whole pipeline, and the engines that run many, in order, ahead of pytest.

This is the one path from a case to a verdict. ``Pipeline.judge(case)`` is everything that happens
to one case -- build its model (a prepared model is reused when a later case has the very same model
bytes), call the runner (``isolation.call`` classifies everything a runner can do wrong), compare,
diagnose -- and returns a small ``CaseResult``: the verdict, the per-case record of the report, and
the failure text. Every application judges through it: the pytest plugin (``Pipeline.run`` by case
id, in a worker or in process), facts observation and drift, findings, the diagnosis run, explore.
``judge(runner, case)`` is the one-case form; ``Pipeline.local(runner)`` the form for a loop.

Executors hand case ids to pipelines and give one result back per id (``Executor``, the seam the
front-ends drive; a remote device, a Dask cluster or offline result files are executors too). The
local ones are ``qconform.pool``'s pools over a ``CorpusJob`` (sweeps run their units through the
same pools):

* ``InProcessEngine`` (``--isolate=off``): the pipeline in this process, computed on demand.
* ``IsolatedEngine`` (``--isolate=on``): the pipeline in worker processes, fed ahead in batches; a
  crash or a hang is the case that was running's verdict, the rest of its batch continues in a fresh
  worker.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

from qconform.isolation import CallResult, _raised, call, reason_line
from qconform.pool import RUN, InProcessPool, IsolatedPool
from qconform.record import CaseRecord
from qconform.verdicts import FAIL, NOT_RUN, PASS, Call, Verdict

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
    #: run the cases of a batch that share a pack key as one model (``qconform.packing``); only a
    #: pass is taken from a packed run, everything else is judged alone
    pack: bool = False
    #: a failure's diagnosis is left to whoever receives the result (``Pipeline.diagnose_later``): the
    #: controller diagnoses beside its runner workers instead of between two of their cases
    diagnose_elsewhere: bool = False
    #: the controller's runner (``runner.identity_digest`` of the identity the report names; "" unchecked):
    #: a worker that resolves another runtime, version, setting or platform runs nothing
    runner_identity: str = ""


@dataclass
class CaseResult:
    """One case's outcome: small enough to stream per case from a worker."""

    record: CaseRecord  # the case's record (the report's, and what every application reads)
    message: str = ""  # the failure text for the terminal ('' for a pass)
    runner_seconds: float = 0.0
    detail: str = ""  # the comparison's own text for a failure (``message`` without the diagnosis lines)
    outputs: list | None = None  # the runner's outputs, kept only where asked (``keep_outputs``)
    stop: bool = False  # not run because the device is gone: the front-end stops the run here
    #: a failure whose diagnosis is still to run (``Options.diagnose_elsewhere``): its case and the
    #: comparison's outcome travel with it (the receiver reads no corpus group and compares nothing
    #: again), its outputs in ``outputs``, and ``scope`` is the run of cases it was judged in (the
    #: diagnosis budget's scope)
    undiagnosed: tuple | None = None
    scope: str | None = None

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def verdict(self) -> Verdict:
        return self.record.verdict

    @classmethod
    def without_outputs(cls, record: CaseRecord) -> "CaseResult":
        """A verdict the engine gives with no outputs to judge (a crash, a timeout, a worker that
        broke): the terminal line says the verdict and why."""
        return cls(record, f"{record.id}: {record.verdict}: {_terminal(record.problem)}")


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
        self.scope: str | None = None
        #: called before qconform's own work on a case the runner has answered (a failure's diagnosis):
        #: a pool's worker tells its pool, whose item timeout measures the runtime alone
        self.on_qconform_work: Callable[[], None] | None = None

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

    def _prepare(self, model, key: bytes | None = None) -> tuple[Callable | None, CallResult | None]:
        """The runner's prepared callable for this model (reused for identical model bytes);
        ``model`` is a ModelProto or its serialised bytes (parsed only when not prepared before);
        ``key``, where the caller holds them, the model's bytes (not serialised again)."""
        from qconform.runner import Unsupported, prepare

        if key is None:
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
            return None, CallResult(Call.UNSUPPORTED, message=reason_line(str(exc)))
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

    @property
    def runner_batches(self) -> bool:
        """Whether the runner runs many models in one exchange (``run_batch``: a device worker)."""
        return callable(getattr(self.runner, "run_batch", None))

    @property
    def batches(self) -> bool:
        """Whether this pipeline judges a batch as a whole (the pools then hand it ``run_many``):
        packing, or a runner that runs batches."""
        return self.options.pack or self.runner_batches

    def run_many(self, case_ids: Sequence[str]) -> list[CaseResult]:
        """A batch of cases by id, packed where ``options.pack`` says so (``judge_many``)."""
        return self.judge_many([self.cases.case(cid) for cid in case_ids])

    def judge_many(self, cases: Sequence[Any]) -> list[CaseResult]:
        """Every case's result, as ``judge`` gives it, in order. With ``options.pack``, the cases that
        share a pack key run as packed models first; a case takes a packed verdict only where it
        passes, every other case is judged alone (its own single model: its own verdict, diagnosis
        and reproducer). The single runs go to the runner together (``call_batch``)."""
        results: list[CaseResult | None] = [None] * len(cases)
        models: dict[int, Any] = {}  # built once for packing, reused by the single runs
        if self.options.pack and len(cases) > 1:
            self._judge_packed(cases, results, models)
        alone = [i for i, r in enumerate(results) if r is None]
        if len(alone) > 1 and self.runner_batches:
            self._judge_batch(cases, alone, results, models)
        return [r if r is not None else self._judge_built(c, models.get(i)) for i, (c, r) in enumerate(zip(cases, results))]

    def _judge_batch(self, cases: Sequence[Any], which: list[int], results: list, models: dict[int, Any]) -> None:
        """The cases at ``which`` judged from one ``call_batch`` (a case whose model cannot be built is
        left for ``judge``, which says so)."""
        from qconform.model import build_model

        built = []
        for i in which:
            if i not in models:
                try:
                    models[i] = build_model(cases[i], check=False)
                except Exception:  # noqa: BLE001 - judge() gives this case its error
                    continue
            built.append(i)
        calls = self.call_batch([models[i] for i in built], [cases[i].feeds for i in built])
        for i, (result, seconds) in zip(built, calls):
            results[i] = self.judge_call(cases[i], result, seconds)

    def _judge_built(self, case, model) -> CaseResult:
        """``judge``, with the case's model already built (None: build it here)."""
        return self.judge(case) if model is None else self.judge_call(case, *self.call_model(model, case.feeds))

    def _judge_packed(self, cases: Sequence[Any], results: list, models: dict[int, Any]) -> None:
        from qconform.compare import compare

        def probe(i: int, model) -> bool:
            results[i] = self._judge_built(cases[i], model)
            return results[i].verdict == PASS

        o = self.options
        for i, (outputs, seconds) in self.packed(cases, probe, models).items():
            outcome = compare(cases[i], outputs, strict_nan=o.strict_nan, profile=o.profile)
            if outcome.verdict != PASS:
                continue  # judged alone: a deviation is always its own single model's
            rec = CaseRecord.judged(cases[i], outcome)
            rec.packed = True
            res = CaseResult(rec, "", seconds)
            if self.keep_outputs:
                res.outputs = list(outputs)
            results[i] = res

    def packed(self, cases: Sequence[Any], probe: Callable[[int, Any], bool],
               models: dict[int, Any] | None = None) -> dict[int, tuple[list, float]]:
        """The outputs the runner gives each case inside packed models, by position in ``cases``
        (with each case's share of the call's seconds): the one packing path of the engine and of
        ``qconform facts packing``. Per pack key (``packing.groups``) the first case runs alone first
        (``probe(i, model)``, the caller's single run): where it does not succeed, the runtime would
        refuse or fail a packed model too, and the group is not packed. A packed model the runtime
        refuses or fails is cut: without the part its message names (``c<i>_``), else in halves, down
        to ``packing.MIN_PACK`` cases; the cases left out have no packed outputs (they run alone).
        ``models`` (where given) receives every case's model built here, for the caller's single runs."""
        from qconform import packing as packing_mod

        out: dict[int, tuple[list, float]] = {}

        def run(part: list[tuple[int, Any]]) -> None:
            if len(part) < packing_mod.MIN_PACK:
                return
            try:
                model = packing_mod.pack([m for _, m in part])
                feeds = packing_mod.feeds([cases[i].feeds for i, _ in part])
            except Exception:  # noqa: BLE001 - a pack qconform cannot build: its cases run alone
                return
            result, seconds = self.call_model(model, feeds)
            if result.kind == Call.OK:
                try:
                    outs = packing_mod.split(result.outputs, [len(m.graph.output) for _, m in part])
                except ValueError:
                    return
                out.update((i, (o, seconds / len(part))) for (i, _), o in zip(part, outs))
                return
            if result.kind not in (Call.ERROR, Call.UNSUPPORTED):
                return
            named = packing_mod.named_parts(result.message, len(part))
            if len(named) == 1:
                run([p for j, p in enumerate(part) if j not in named])
            else:
                run(part[:len(part) // 2])
                run(part[len(part) // 2:])

        groups = packing_mod.groups(cases)
        if models is not None:
            models.update(m for g in groups for m in g)
        for members in groups:
            if not probe(*members[0]):
                continue
            rest = members[1:]
            for at in range(0, len(rest), packing_mod.MAX_PACK):
                run(rest[at:at + packing_mod.MAX_PACK])
        return out

    def call(self, case) -> tuple[CallResult, float]:
        """The runner on one case: build its model, prepare it (or reuse an identical one), call it.
        Never raises for anything the runner does; the seconds are the call's own."""
        from qconform.model import build_model

        try:
            model = build_model(case, check=False)  # every corpus model passed onnx.checker when it was written
        except Exception as exc:  # noqa: BLE001 — a model qconform cannot build is that case's error
            return CallResult(Call.ERROR, message=f"build_model: {type(exc).__name__}: {exc}"), 0.0
        return self.call_model(model, case.feeds)

    def call_model(self, model, feeds, key: bytes | None = None) -> tuple[CallResult, float]:
        """The runner on a model (a ModelProto, or the bytes a device worker was sent) and its inputs,
        prepared once per identical model: what ``call`` does after building the case's model."""
        run, refused = self._prepare(model, key)
        t0 = time.perf_counter()
        result = refused or call(run, feeds)
        return result, time.perf_counter() - t0

    def call_batch(self, models: Sequence[Any], feeds: Sequence[Mapping]) -> list[tuple[CallResult, float]]:
        """The runner on many models (ModelProtos or bytes) and their inputs: as one exchange where the
        runner runs a batch at once (``run_batch``: a device worker, one round trip for them all),
        else one ``call_model`` each. Either way each result is classified by ``isolation.call``."""
        if not self.runner_batches:
            return [self.call_model(m, f) for m, f in zip(models, feeds)]
        data = [m if isinstance(m, bytes) else m.SerializeToString() for m in models]
        out = []
        for (outcome, seconds), f in zip(self.runner.run_batch(list(zip(data, feeds))), feeds):
            out.append((call(_given(outcome), f), seconds))
        return out

    def judge(self, case) -> CaseResult:
        """One case's verdict, record and failure text: the one path every application takes."""
        result, seconds = self.call(case)
        return self.judge_call(case, result, seconds)

    def judge_call(self, case, result: CallResult, seconds: float = 0.0) -> CaseResult:
        """The verdict of a runner call made elsewhere (a device's stored outputs, ``qconform.offline``):
        the same comparison, diagnosis and record as ``judge``."""
        out = self._finish(case, result, seconds)
        if self.keep_outputs and result.kind == Call.OK:
            out.outputs = list(result.outputs)
        return out

    def _finish(self, case, call: CallResult, seconds: float = 0.0) -> CaseResult:
        from qconform.compare import compare

        o = self.options
        if call.kind == Call.NOT_RUN:  # the infrastructure failed, not the runtime: no verdict on it
            return CaseResult(CaseRecord.stub(case, NOT_RUN, call.message), f"{case.id}: not run: {call.message}",
                              seconds, stop=call.stop)
        if case.information and call.kind not in (Call.CRASHED, Call.TIMEOUT):
            return self._inform(case, call, seconds)
        if call.kind != Call.OK:
            rec = CaseRecord.stub(case, Call(call.kind).verdict, call.message)
            rec.traceback = call.traceback or None
            message = "" if call.kind == Call.UNSUPPORTED else f"{case.id}: {call.kind}: {_terminal(call.message)}"
            return CaseResult(rec, message, seconds)
        outcome = compare(case, call.outputs, strict_nan=o.strict_nan, profile=o.profile)
        if o.diagnose_elsewhere and o.diagnose and outcome.verdict == FAIL:
            return self._undiagnosed(case, outcome, call.outputs, seconds)
        diagnosis, diagnosis_errors, step = self._diagnose(case, outcome, call.outputs)
        rec = CaseRecord.judged(case, outcome, None if diagnosis is None else [d.model for d in diagnosis],
                                diagnosis_errors, step)
        self._evidence(rec, case, outcome, call.outputs)
        if outcome.verdict == PASS:
            return CaseResult(rec, "", seconds)
        lines = [outcome.message(case)]
        if diagnosis is not None:
            from qconform.diagnosis.diagnose import message_lines

            lines += message_lines(diagnosis, step)
        return CaseResult(rec, "\n".join(lines), seconds, detail=lines[0])

    def _undiagnosed(self, case, outcome, outputs: list, seconds: float) -> CaseResult:
        """A failure judged here and diagnosed where the result goes (``diagnose_later``)."""
        rec = CaseRecord.judged(case, outcome)
        self._evidence(rec, case, outcome, outputs)
        line = outcome.message(case)
        return CaseResult(rec, line, seconds, detail=line, outputs=list(outputs), undiagnosed=(case, outcome), scope=self.scope)

    def diagnose_later(self, result: CaseResult) -> CaseResult:
        """Finish a failure judged elsewhere without its diagnosis (``CaseResult.undiagnosed``): the
        same diagnosis, within the same budget and scope, as ``judge`` would have given it."""
        case, outcome = result.undiagnosed
        self.scope = result.scope
        diagnosis, diagnosis_errors, step = self._diagnose(case, outcome, result.outputs or [])
        if diagnosis is not None:
            result.record.diagnosed([d.model for d in diagnosis], diagnosis_errors, step)
            from qconform.diagnosis.diagnose import message_lines

            result.message = "\n".join([result.detail, *message_lines(diagnosis, step)])
        result.undiagnosed = None
        if not self.keep_outputs:
            result.outputs = None
        return result

    def _evidence(self, rec: CaseRecord, case, outcome, outputs: list) -> None:
        if outcome.verdict == FAIL and outcome.mismatch_count:
            from qconform.compare import evidence

            try:
                rec.evidence = evidence(case, outputs, outcome)
            except Exception:  # noqa: BLE001 - evidence is for the report; it never changes a verdict
                pass

    def _inform(self, case, call: CallResult, seconds: float) -> CaseResult:
        """A model the text makes invalid: what the runner did with it, as information (never a pass
        or a failure; qconform/docs/semantics.md#principles). Rejecting it is right; running it is
        compared with the reading runtimes commonly follow, and said."""
        from qconform.compare import compare

        reading = None
        if call.kind == Call.OK:
            o = compare(case, call.outputs, strict_nan=self.options.strict_nan, profile=self.options.profile)
            if o.verdict == PASS:
                reading, did = o.reading, f"ran it; the outputs match reading '{o.reading}'"
            else:
                did = "ran it; " + (o.problem or f"{o.mismatch_count} element(s) differ from reading '{o.reading}'")
        else:
            first = (call.message.strip().splitlines() or [""])[0]
            did = f"rejected it ({call.kind}: {first})"
        return CaseResult(CaseRecord.informed(case, reading, did), "", seconds)

    def _diagnose(self, case, outcome, outputs) -> tuple[list | None, list[str], str]:
        """Which known deviations reproduce a failure (None: not diagnosed, by option or budget); the
        models that broke on it (shown in the summary and report); and, when none explains it, the
        step the difference sits in."""
        if outcome.verdict != FAIL or not self.options.diagnose:
            return None, [], ""
        from qconform.diagnosis.diagnose import Budget, diagnose_case

        if self._budget is None:
            self._budget = Budget(self.options.diagnose_per_group or None)
        if not self._budget.allow(case, self.scope):
            return None, [], ""
        if self.on_qconform_work is not None:
            self.on_qconform_work()
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
                step = localise(case, outputs, outcome)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"localise: {type(exc).__name__}: {exc}")
        return found, errors, step


def _given(outcome: Any) -> Callable:
    """A runner call that already happened elsewhere, as a prepared callable: its outputs, or the
    exception it ended in (so ``isolation.call`` classifies a batch's results as it does one call's)."""

    def run(_feeds):
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return run


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


# ----------------------------------------------------------------------------------------------
# Executors
# ----------------------------------------------------------------------------------------------
@runtime_checkable
class Executor(Protocol):
    """Where cases run. A front-end submits case ids (as many as it likes, ahead) and asks for each
    id's result once, in any order; the executor owns isolation, retries and attribution: a crash
    or hang is that case's verdict, never a lost result. The local pools (``qconform.pool``) over a
    ``CorpusJob`` are the local ones; a Dask cluster (``qconform.cluster``), a device over the
    network or offline result files implement these three calls and the front-ends need no change."""

    runs_ahead: bool  # whether submit() starts work before result() is asked (pytest then feeds it ahead)

    def submit(self, case_ids: Sequence[str]) -> None: ...

    def result(self, case_id: str) -> CaseResult: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class CorpusJob:
    """Corpus cases as the pools' work (``qconform.pool.Job``): an item is a case id, a worker is a
    ``Pipeline`` over the corpus at ``options.golden``, a group is a corpus group (a worker loads
    one once)."""

    options: Options

    def start(self) -> Pipeline:
        """This worker's pipeline. NotRun (every case of this worker not run) where its runner is not
        the one the report names: a worker resolves ``options.runner`` again, in its own process,
        folder or machine, and a device worker may have been replaced since the controller asked."""
        from qconform.runner import NotRun, identity, identity_digest, resolve

        o = self.options
        runner = resolve(o.runner, o.runner_options)
        if o.runner_identity:
            mine = identity(runner, o.runner, o.runner_options)
            if identity_digest(mine) != o.runner_identity:
                what = " ".join(str(mine.get(k, "")) for k in ("name", "version", "device")).strip()
                raise NotRun(f"this worker's runner ({what}, its describe() or platform) is not the one the run "
                             "started with: it ran no case", stop=True)
        return Pipeline(o, runner)

    def key(self, case_id: str) -> str:
        return case_id

    def group(self, case_id: str) -> str:
        from qconform.corpus import group_of

        return group_of(case_id)

    def failed(self, case_id: str, verdict: Verdict, why: str, traceback: str = "") -> CaseResult:
        """A case with no outputs behind its verdict: only its id is known here; the front-end's stub
        of the case supplies the rest (``CaseRecord.over``)."""
        return CaseResult.without_outputs(CaseRecord.lost(case_id, verdict, why, traceback))


class InProcessEngine(InProcessPool):
    """``--isolate=off``: the pipeline in this process; a case is computed when pytest asks for it."""

    def __init__(self, options: Options, runner: Any, index=None) -> None:
        super().__init__(CorpusJob(options), Pipeline(options, runner, index))

    @property
    def pipeline(self) -> Pipeline:
        return self.worker


class IsolatedEngine(IsolatedPool):
    """``--isolate=on``: the pipeline in ``workers`` worker processes (``qconform.pool.IsolatedPool``).
    With ``diagnose_here`` a failure is diagnosed in the controller, as its result is handed out,
    while the workers go on with their cases (``Options.diagnose_elsewhere``): what certify wants,
    whose workers are the busiest processes. Without it the workers diagnose: what pytest wants, whose
    own per-item work keeps the controller the busiest (measured: the workers wait half the run)."""

    RUN = RUN

    def __init__(self, options: Options, index, timeout: float | None, memory_mb: int = 0, batch: int = 64,
                 workers: int = 1, diagnose_here: bool = True) -> None:
        import dataclasses

        super().__init__(CorpusJob(dataclasses.replace(options, diagnose_elsewhere=diagnose_here)), timeout, memory_mb,
                         batch, workers=workers)
        self.options, self.index = options, index
        self._diagnosis = Pipeline(options, None, index)

    def result(self, key: str) -> CaseResult:
        res = super().result(key)
        if res.undiagnosed is not None:
            return self._diagnosis.diagnose_later(res)
        return res


def local_executor(options: Options, index, *, isolate: bool = True, workers: int = 1, timeout: float | None = 120.0,
                   memory_mb: int = 0, batch: int = 64, runner: Any = None, diagnose_here: bool = True) -> Executor:
    """This machine's executor: ``workers`` isolated worker processes (failures diagnosed in this
    process unless ``diagnose_here`` is False: ``IsolatedEngine``), or (``isolate=False``) the
    pipeline in this process with ``runner``."""
    if isolate:
        return IsolatedEngine(options, index, timeout, memory_mb, batch, workers=workers, diagnose_here=diagnose_here)
    from qconform.runner import resolve

    return InProcessEngine(options, runner or resolve(options.runner, options.runner_options), index)


__all__ = ["CaseResult", "CorpusJob", "Executor", "InProcessEngine", "IsolatedEngine", "Options", "Pipeline",
           "judge", "local_executor"]

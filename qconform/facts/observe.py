"""What a runner does on every corpus case and every probe, observed in-process.

This is the evidence the facts are checked against (tests/test_facts.py) and the drift command
compares with (``qconform.apps.facts_drift``). Each case is judged by the engine the plugin uses
(``qconform.execution``), in an isolated worker process by default: a runtime that aborts on a case
(onnxruntime 1.32.0 on a QLinearSigmoid without its trailing zero point: SIGABRT) ends only its
worker, and the case is observed as crashed, an error, as a finished run reports it. A ``Result`` is
the facts' view of the engine's verdict, never a second judgement.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from qconform.facts import PROBE, Fact
from qconform.facts.probes import PROBES, probe_case
from qconform.verdicts import CRASHED, ERROR, FAIL, PASS, TIMEOUT, UNSUPPORTED, Probe, Verdict

#: seconds an example the source never finishes (a fact's ``hangs``) is given: a timeout is all it
#: can show, and the case's own 120 s would be spent on every observation
HANG_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Result:
    """One case under one runner: the verdict, and for a pass the reading it matched."""

    verdict: Verdict | Probe  # the engine's verdict; a must-reject probe's: what the runner did
    reading: str | None = None  # default profile: the reading matched (pass) or compared against (fail)
    first: str | None = None  # the case's first (strict) reading
    message: str = ""  # first lines of the failure, or the runner's message
    diagnosis: str = ""  # a fail's first-named deviation model (observed with diagnose=True), "" if none
    clause: str = ""  # the semantics clause the case tests

    @property
    def disagrees(self) -> bool:
        """Fails the default profile (a wrong result, or a runner error)."""
        return self.verdict in (FAIL, ERROR)

    @property
    def strict_disagrees(self) -> bool:
        """Fails ``--profile=strict``: a default disagreement, or a pass on a non-first reading."""
        return self.disagrees or (self.verdict == PASS and self.reading != self.first)


def run_case(runner, case, diagnose: bool = False) -> Result:
    """One case judged by the engine; with ``diagnose`` a failure also carries the deviation model
    qconform's diagnosis names first (what drift groups by). ``runner`` may be a ``Pipeline``."""
    from qconform.execution import Pipeline

    pipeline = runner if isinstance(runner, Pipeline) else Pipeline.local(runner, diagnose=diagnose)
    return _view(case, pipeline.judge(case))


def _view(case, res) -> Result:
    """The facts' view of one engine result."""
    rec = res.record
    if res.verdict in (UNSUPPORTED, ERROR, CRASHED, TIMEOUT):
        return Result(UNSUPPORTED if res.verdict == UNSUPPORTED else ERROR, message=rec.problem or "",
                      clause=case.clause)
    msg = "" if res.verdict == PASS else "\n".join((res.detail or rec.problem or "").splitlines()[:3])
    return Result(res.verdict, rec.reading, case.readings[0].name, msg, (rec.diagnosis or [""])[0], case.clause)


def run_probe(runner, name: str) -> Result:
    """A probe under a runner; a must-reject probe reports whether the runner ran the invalid model."""
    from qconform.execution import Pipeline

    pipeline = runner if isinstance(runner, Pipeline) else Pipeline.local(runner)
    case, invalid = probe_case(name)
    if not invalid:
        return run_case(pipeline, case)
    call, _ = pipeline.call(case)
    return Result(Probe.of(call.kind), message=call.message)


def observe(runner_name: str, root: str | Path, probes: bool = True, select: tuple[str, ...] = (),
            also: frozenset[str] = frozenset(), diagnose: bool = False, isolate: bool = True,
            hangs: frozenset[str] = frozenset()) -> dict[str, Result]:
    """Every case of the corpus at ``root`` (with ``select``, the ids matching one of its globs, and
    those in ``also``) and every probe (keyed ``probe:NAME``) under a runner; with ``isolate`` the
    cases run in a worker process (probes, small and few, in this one), those in ``hangs`` (the
    examples of facts that say the source never finishes them) with ``HANG_TIMEOUT_S``."""
    from qconform import corpus as corpus_mod
    from qconform.runner import resolve

    from qconform.execution import Pipeline

    pipeline = Pipeline.local(resolve(runner_name), diagnose=diagnose)
    corpus = corpus_mod.load(Path(root))
    cases = [case for case in corpus.cases
             if not select or case.id in also or any(fnmatchcase(case.id, g) for g in select)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy overflow warnings inside the runners
        if isolate:
            results = _isolated(runner_name, Path(root), corpus.digest, cases, diagnose, hangs)
        else:
            results = {case.id: run_case(pipeline, case) for case in cases}
        if probes:
            for name in PROBES:
                results[PROBE + name] = run_probe(pipeline, name)
    return results


def _isolated(runner_name: str, root: Path, digest: str, cases: list, diagnose: bool,
              hangs: frozenset[str] = frozenset()) -> dict[str, Result]:
    """The cases judged by one isolated worker (``qconform.execution.local_executor``), as certify
    runs them: a crash or a timeout is the case's verdict, not the end of the observation. The
    cases in ``hangs`` get ``HANG_TIMEOUT_S`` in a worker of their own."""
    from qconform import corpus as corpus_mod
    from qconform.execution import Options, local_executor

    options = Options(golden=str(root), runner=runner_name, diagnose=diagnose, diagnose_per_group=None)
    index = corpus_mod.index(root, digest)
    out: dict[str, Result] = {}
    for part, short in (([c for c in cases if c.id not in hangs], False), ([c for c in cases if c.id in hangs], True)):
        if not part:
            continue
        engine = local_executor(options, index, workers=1, timeout=HANG_TIMEOUT_S) if short \
            else local_executor(options, index, workers=1)
        try:
            engine.submit([case.id for case in part])
            out.update({case.id: _view(case, engine.result(case.id)) for case in part})
        finally:
            engine.close()
    return out


def _unbucketed(text: str) -> str:
    """A report's reason bucket (``qconform.report.model.reason_bucket``: the numbers in generated
    names became N) read back as one reason it stands for, numbers as 0: a fact's message matches
    the runtime's own words, ``n[\\d.]+_Clip_[\\d.]+``, which the bucket's ``n1_Clip_N`` is not."""
    import re

    text = re.sub(r"(?<=_)N(?![A-Za-z0-9])", "0", text)
    return re.sub(r"\b0xN\b", "0x000000", text)


def from_report(report: dict, cases: dict) -> dict[str, Result]:
    """The observations a finished ``--report`` run already made (report.json), keyed like
    ``observe``'s: a whole-corpus run of a slow runtime need not be repeated to compute its drift.
    A failure carries the model the run's diagnosis named first; an unsupported case its reason."""
    reasons = report.get("reasons") or []
    failures = {f["id"]: f for f in report.get("failures") or []}
    results = {}
    for entry in report.get("cases") or []:
        cid, verdict = entry["id"], entry["verdict"]
        f = failures.get(cid, {})
        reason = entry.get("reason")
        message = f.get("problem") or (_unbucketed(reasons[reason]["text"]) if reason is not None else "")
        case = cases.get(cid)
        if verdict in (CRASHED, TIMEOUT):  # as _view reads the engine's verdict: the runner failed the case
            results[cid] = Result(ERROR, message=message, clause=f.get("clause") or (case.clause if case else ""))
            continue
        results[cid] = Result(verdict, f.get("reading") or entry.get("reading"),
                              case.readings[0].name if case else None, message, (f.get("diagnosis") or [""])[0],
                              f.get("clause") or (case.clause if case else ""))
    return results


def shows(fact: Fact, results: dict[str, Result]) -> tuple[bool, str]:
    """Whether the observations show what the fact says, and what was seen (for messages)."""
    import re

    example = fact.example
    if example not in results:
        return False, f"{example}: not observed (not in the corpus and not a probe)"
    r = results[example]
    seen = f"{example}: {r.verdict}" + (f" (reading {r.reading})" if r.reading else "") + \
           (f": {r.message.splitlines()[0]}" if r.message else "")
    if fact.intermittent:  # observed either way; what it says is that the outcome varies
        return r.disagrees or r.verdict == PASS, seen
    if fact.kind in ("erratum", "oracle-gap"):
        return r.disagrees, seen
    if fact.kind == "reading":
        return (r.verdict == PASS and fact.reading in (r.reading or "").split("+") and r.strict_disagrees), seen
    if fact.kind == UNSUPPORTED:
        return (r.verdict == UNSUPPORTED and (not fact.message or re.search(fact.message, r.message) is not None)), seen
    if fact.kind == "must-reject":
        return r.verdict == Probe.RAN, seen
    return False, seen


def case_id_of(key: str) -> str:
    """The case id behind an observation key (a probe's key is ``probe:NAME``)."""
    return probe_case(key[len(PROBE):])[0].id if key.startswith(PROBE) else key


def explains(fact: Fact, key: str, r: Result) -> bool:
    """Whether the fact accounts for this observation (a failure, or an unsupported reason)."""
    import re

    if not fact.covers(case_id_of(key)):
        return False
    if r.disagrees:
        return fact.kind in ("erratum", "oracle-gap")
    if r.verdict == UNSUPPORTED:
        return fact.kind == UNSUPPORTED and (not fact.message or re.search(fact.message, r.message) is not None)
    return False


__all__ = ["HANG_TIMEOUT_S", "Result", "case_id_of", "explains", "from_report", "observe", "run_case", "run_probe",
           "shows"]

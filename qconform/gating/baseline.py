"""Known deviations a run may carry without failing (``--baseline=FILE``), and the run's gate: what both
front-ends (the pytest plugin and ``qconform certify``) read and decide, below either of them.

A vendor ships with some known bugs; CI should fail on *new* deviations only, and the list of
known ones must stay honest: every entry names a reason, may expire, and entries that no longer
match a failure are reported as stale. The file is JSON (read by the standard library, reviews
well in a diff)::

    {"qconform_baseline": 1,
     "entries": [
       {"id": "QuantizeLinear-23/float16-float8e5m2fnuz/*", "reason": "ORT saturates to ±max, not NaN",
        "expires": "2027-06-30"},
       {"id": "DequantizeLinear-21/int4-float32/basic/per-axis", "reason": "vendor bug 1234"}]}

``id`` is a case id or an ``fnmatch`` glob over the whole id (``*`` also crosses ``/``). An entry
accepts one deviating verdict of its cases: ``"verdict"`` is ``fail`` (wrong outputs: the default),
``error``, ``crashed`` or ``timeout`` -- a model the runtime used to reject is a different bug from
wrong bits or a crash on it, and an entry for one never accepts the others. ``unsupported`` is never
a deviation. An entry whose ``expires`` date (ISO, inclusive) has passed covers nothing and fails the
run by itself.

An entry accepts a *behaviour* where it names one: ``"diagnosis": "round-half-away"`` covers only
the failures of its ids that the diagnosis names with that model first (a pair ``a+b`` as written),
and ``"diagnosis": "none"`` only a failure no model names -- of one case: an unexplained failure is
no known behaviour, so it is accepted case by case, never by a glob. A run with such a baseline
diagnoses every failure. ``qconform baseline create`` (and ``refresh --add-new``) writes one entry
per op version, types and behaviour (``cases`` says how many it covered then), one per case for
failures no model names, and one per case and verdict for the rest, so accepting one known bug never
accepts another that appears beside it. The file is checked whole: unknown keys, a key given twice,
an unknown model name or verdict are refused in one line. ``"runner"`` (written by ``create``) names
the runner whose report the file came from: a run of another runner fails its gate, saying so.

Writing a baseline from a report and refreshing it (``qconform baseline create|refresh``) is the
command line's, ``qconform.apps.baseline``.
"""
from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from qconform.record import UNNAMED, behaviour
from qconform.verdicts import DEVIATING, FAIL, NOT_RUN, PASS, Stale

FORMAT_KEY = "qconform_baseline"
FORMAT_VERSION = 1
#: What ``qconform baseline create`` writes when no ``--reason`` is given. The gate refuses a file
#: that still holds it: accepting a deviation takes a sentence saying why.
PLACEHOLDER = "TODO: why is this deviation accepted?"


class BaselineError(Exception):
    """The baseline file is missing or malformed: one line naming the file and the entry."""


@dataclass(frozen=True)
class Entry:
    pattern: str
    reason: str
    expires: _dt.date | None = None
    number: int = 0  # 1-based position in the file, for messages
    diagnosis: str | None = None  # the behaviour it accepts: a model name, UNNAMED, or None (any)
    verdict: str = FAIL  # the deviating verdict it accepts

    def names(self, case_id: str) -> bool:
        """Whether its ``id`` (a case id or a glob) names the case, whatever the case did."""
        return case_id == self.pattern or fnmatchcase(case_id, self.pattern)

    def matches(self, case_id: str, verdict: str, named: str | None = None) -> bool:
        """Whether it accepts the case: its id, the verdict, and ``named``, the case's behaviour
        (``behaviour(record)``), where the entry names one."""
        if verdict != self.verdict or (self.diagnosis is not None and named != self.diagnosis):
            return False
        return self.names(case_id)

    def expired(self, today: _dt.date) -> bool:
        return self.expires is not None and today > self.expires

    def as_dict(self) -> dict[str, Any]:
        return {"entry": self.number, "id": self.pattern, "reason": self.reason,
                "expires": self.expires.isoformat() if self.expires else None, "verdict": self.verdict} \
            | ({"diagnosis": self.diagnosis} if self.diagnosis is not None else {})


@dataclass(frozen=True)
class Baseline:
    path: str
    entries: tuple[Entry, ...]
    #: The runner whose report the file was written from (``"runner"``; absent in files written
    #: before qconform recorded it): a run of another runner fails its gate rather than use it.
    runner: str | None = None

    def live_match(self, case_id: str, verdict: str, today: _dt.date, named: str | None = None) -> Entry | None:
        """The first unexpired entry accepting this case (id, verdict and behaviour), if any."""
        return next((e for e in self.entries if not e.expired(today) and e.matches(case_id, verdict, named)), None)

    @property
    def by_behaviour(self) -> bool:
        """Whether an entry names a behaviour: the run must then diagnose every failure."""
        return any(e.diagnosis is not None for e in self.entries)

    def diagnose_every_failure(self, diagnose: bool) -> bool:
        """Whether a run with this baseline must diagnose every failure (no per-group budget); a
        run that diagnoses nothing cannot use a baseline by behaviour: BaselineError."""
        if self.by_behaviour and not diagnose:
            raise BaselineError(f"{self.path} accepts deviations by their diagnosis: it needs --diagnose=on")
        return self.by_behaviour


def parse_entry(raw: Any, n: int, where: str) -> Entry:
    if not isinstance(raw, dict):
        raise BaselineError(f"{where}: entry {n} is {type(raw).__name__}, not an object with id and reason")
    unknown = sorted(set(raw) - _ENTRY_KEYS)
    if unknown:
        raise BaselineError(f"{where}: entry {n} has unknown key(s) {unknown}; allowed: {', '.join(sorted(_ENTRY_KEYS))}")
    diagnosis = raw.get("diagnosis")
    if diagnosis is not None and (not isinstance(diagnosis, str) or not diagnosis):
        raise BaselineError(f"{where}: entry {n}: \"diagnosis\" names a deviation model, or \"{UNNAMED}\"")
    pattern, reason = raw.get("id"), raw.get("reason")
    if not isinstance(pattern, str) or not pattern:
        raise BaselineError(f"{where}: entry {n} needs \"id\": a case id or glob pattern")
    unknown_model = _unknown_model(diagnosis)
    if unknown_model:
        raise BaselineError(f"{where}: entry {n} ({pattern}): \"diagnosis\" {diagnosis!r}: {unknown_model!r} is no "
                            f"deviation model of this qconform (qconform/docs/diagnosis.md lists them; "
                            f"\"{UNNAMED}\": a failure no model names)")
    if diagnosis == UNNAMED and _is_glob(pattern):
        raise BaselineError(f"{where}: entry {n} ({pattern}): a failure no model names is accepted case by case: "
                            f"\"diagnosis\": \"{UNNAMED}\" needs one case id, not a glob")
    verdict = raw.get("verdict", FAIL)
    if verdict not in DEVIATING:
        raise BaselineError(f"{where}: entry {n} ({pattern}): \"verdict\" {verdict!r} is not a deviating verdict; "
                            f"one of {', '.join(sorted(DEVIATING))}")
    if diagnosis is not None and verdict != FAIL:
        raise BaselineError(f"{where}: entry {n} ({pattern}): a diagnosis names a failure's behaviour: "
                            f"\"verdict\" must be {FAIL} (or left out) where \"diagnosis\" is given")
    if not isinstance(reason, str) or not reason.strip():
        raise BaselineError(f"{where}: entry {n} ({pattern}) needs a non-empty \"reason\"")
    expires = raw.get("expires")
    if expires is not None:
        try:
            expires = _dt.date.fromisoformat(expires)
        except (TypeError, ValueError):
            raise BaselineError(f"{where}: entry {n} ({pattern}): expires {expires!r} is not an ISO date "
                                f"like 2027-01-31") from None
    return Entry(pattern, reason.strip(), expires, n, diagnosis, verdict)


_ENTRY_KEYS = frozenset({"id", "reason", "expires", "diagnosis", "verdict", "cases"})


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


def _unknown_model(diagnosis: str | None) -> str | None:
    """The part of a ``diagnosis`` value that names no deviation model (None: every part does)."""
    if diagnosis is None or diagnosis == UNNAMED:
        return None
    from qconform.diagnosis.models import MODELS

    return next((part for part in diagnosis.split("+") if part not in MODELS), None)


def _no_repeated_keys(pairs: list[tuple[str, Any]]) -> dict:
    """``json.loads``'s object hook: a key given twice would silently drop the first value."""
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise BaselineError(f"the key {key!r} is given twice in one object (the first would be lost)")
        seen[key] = value
    return seen


def parse(data: Any, where: str = "<baseline>") -> Baseline:
    runner = None
    if isinstance(data, dict):
        if data.get(FORMAT_KEY) != FORMAT_VERSION:
            raise BaselineError(f"{where}: expected \"{FORMAT_KEY}\": {FORMAT_VERSION} at the top level")
        unknown = sorted(set(data) - {FORMAT_KEY, "runner", "entries"})
        if unknown:
            raise BaselineError(f"{where}: unknown top-level key(s) {unknown}; a baseline holds "
                                f"\"{FORMAT_KEY}\", \"runner\" and \"entries\" only")
        runner = data.get("runner")
        if runner is not None and (not isinstance(runner, str) or not runner):
            raise BaselineError(f"{where}: \"runner\" names the runner the baseline was written for "
                                f"(its report's runner name), not {runner!r}")
        data = data.get("entries")
    if not isinstance(data, list):
        raise BaselineError(f"{where}: expected {{\"{FORMAT_KEY}\": {FORMAT_VERSION}, \"entries\": [...]}} "
                            f"or a list of entries")
    entries = tuple(parse_entry(raw, n, where) for n, raw in enumerate(data, 1))
    unfilled = [e for e in entries if e.reason == PLACEHOLDER]
    if unfilled:
        shown = "\n".join(f"  entry {e.number}: {e.pattern}" + (f" [{e.diagnosis}]" if e.diagnosis else "")
                          for e in unfilled)
        raise BaselineError(f"{where}: {len(unfilled)} entr{'y' if len(unfilled) == 1 else 'ies'} still "
                            f"ha{'s' if len(unfilled) == 1 else 've'} the placeholder reason: write why each is "
                            f"accepted (or remove it; `qconform baseline create REPORT --reason TEXT` gives every "
                            f"entry one reason):\n{shown}")
    return Baseline(where, entries, runner)


def load(path: str | Path) -> Baseline:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise BaselineError(f"baseline file {p} cannot be read: {exc.strerror or exc}") from None
    return parse(read_json(text, p), str(p))


def read_json(text: str, path: Path) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_no_repeated_keys)
    except json.JSONDecodeError as exc:
        raise BaselineError(f"baseline file {path} is not JSON: line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except BaselineError as exc:
        raise BaselineError(f"baseline file {path}: {exc}") from None


def stale_entries(entries: list[Entry], report: dict, today: _dt.date, filtered: bool) -> list[tuple[Entry, dict]]:
    """The live entries this report shows stale, each with what the gate says of it: no deviating case
    of the run is covered by it (the first live entry that matches a case covers it), and either its
    cases now pass or no longer deviate, or it matches no case of a run over the whole corpus (the case
    is gone). An entry matching nothing in a filtered run is not stale: nothing shows it fixed; nor is
    one whose cases did not run (an incomplete run). The gate lists these entries; ``baseline
    refresh`` removes exactly these."""
    filtered = filtered or not report.get("complete", True)
    named = {f["id"]: behaviour(f) for f in report.get("failures") or ()}
    live = [e for e in entries if not e.expired(today)]
    used, covering = set(), {}
    for case in report["cases"]:
        if case["verdict"] in DEVIATING:
            entry = next((e for e in live if e.matches(case["id"], case["verdict"], named.get(case["id"]))), None)
            if entry is not None:
                used.add(entry.number)
                covering[case["id"]] = entry.number
    out = []
    for e in live:
        if e.number in used:
            continue
        mine = [c for c in report["cases"] if e.names(c["id"]) and c["verdict"] != NOT_RUN]
        matching = [c for c in mine if c["verdict"] not in DEVIATING or e.matches(c["id"], c["verdict"], named.get(c["id"]))]
        # an entry naming no behaviour whose cases deviate otherwise now (a failure became an error)
        other = [c for c in mine if e.diagnosis is None and c["verdict"] in DEVIATING and c not in matching]
        if not matching and not other and filtered:
            continue
        now = sorted({c["verdict"] for c in matching + other})
        before = sorted({covering[c["id"]] for c in matching if c["id"] in covering})
        if before:  # shadowed, not fixed: an earlier entry (a behaviour that covers these cases now) accepts them
            why = (f"its cases still deviate and entr{'y' if len(before) == 1 else 'ies'} "
                   f"{', '.join(f'#{n}' for n in before)} before it accept{'s' if len(before) == 1 else ''} them: "
                   "this entry is redundant")
            state = Stale.REDUNDANT
        elif not matching and not other:
            why, state = "matches no case in this run", Stale.UNMATCHED
        elif PASS in now:
            why, state = "its cases now " + "/".join(now), Stale.FIXED
        elif other:
            why = (f"its cases now {'/'.join(now)}: another deviation than the {e.verdict} it accepts "
                   "(the new one is not accepted)")
            state = Stale.CHANGED
        else:
            why, state = "its cases now " + "/".join(now), Stale.NOT_DEVIATING
        matching += other
        out.append((e, {**e.as_dict(), "why": why, "cases": len(matching), "state": state}))
    return out


def stale_lines(gate_: dict) -> list[str]:
    """What a front-end's terminal says of the stale entries: one line each, and the redundant ones
    (an entry before each accepts their cases) in one line."""
    redundant = [e for e in gate_.get("stale") or [] if e.get("state") == Stale.REDUNDANT]
    lines = [f"stale baseline entry {e['entry']} ({e['id']}): {e['why']}"
             for e in gate_.get("stale") or [] if e not in redundant]
    if redundant:
        lines.append(f"{len(redundant)} redundant baseline entr{'y' if len(redundant) == 1 else 'ies'} (an entry "
                     "before each accepts its cases): qconform baseline refresh removes them")
    return lines


def gate(report: dict, baseline: Baseline | None, today: _dt.date, *, min_cases: int = 0,
         filtered: bool = False) -> dict:
    """Decide the run's gate from a report; marks covered cases/failures with their entry's reason.

    Fails on: deviations no live entry covers, expired entries, fewer collected cases than
    ``min_cases``, a run that is not complete (stopped, interrupted, cases not run), a baseline
    written for another runner. Stale entries (matching no deviation in this run) are listed, not failed on.
    """
    used: dict[int, list[str]] = {}
    new = []
    named = {f["id"]: behaviour(f) for f in report.get("failures") or ()}
    for case in report["cases"]:
        entry = baseline.live_match(case["id"], case["verdict"], today, named.get(case["id"])) if baseline else None
        if case["verdict"] in DEVIATING:
            if entry:
                case["baseline"] = entry.reason
                used.setdefault(entry.number, []).append(case["id"])
            else:
                new.append(case["id"])
    reasons = {c["id"]: c["baseline"] for c in report["cases"] if c.get("baseline")}
    for f in report["failures"]:
        f["baseline"] = reasons.get(f["id"])

    expired = [e.as_dict() for e in baseline.entries if e.expired(today)] if baseline else []
    stale = [s for _, s in stale_entries(baseline.entries, report, today, filtered)] if baseline else []

    collected = report["counts"]["collected"]
    messages = []
    ran_by = runner_of(report).get("runner")
    runner_ok = not (baseline and baseline.runner and ran_by and baseline.runner != ran_by)
    if not runner_ok:
        messages.append(f"baseline {baseline.path} was written for runner {baseline.runner!r}; this run's runner is "
                        f"{ran_by!r}: another runtime's known deviations are not this one's (write one for "
                        f"{ran_by!r} with qconform baseline create)")
    complete = report.get("complete", True)
    if not complete:
        c = report["counts"]
        messages.append(f"the run is incomplete ({c.get('ran', 0)} of {collected} selected case(s) ran"
                        + (f"; stopped: {report['stopped']}" if report.get("stopped") else "")
                        + (", interrupted" if report.get("interrupted") else "")
                        + "): a partial run passes no gate")
    if new:
        messages.append(f"{len(new)} deviation(s) not covered by " + (f"baseline {baseline.path}" if baseline
                                                                        else "a baseline"))
    for e in expired:
        messages.append(f"baseline entry {e['entry']} ({e['id']}) expired on {e['expires']}: "
                        f"fix the deviation or renew the entry with a new date and reason")
    floor_ok = collected >= min_cases
    if not floor_ok:
        messages.append(f"only {collected} case(s) collected, fewer than the floor of {min_cases} "
                        f"(--min-cases): a generator or a selection filter may be broken")
    return {
        "passed": not new and not expired and floor_ok and runner_ok and complete,
        "baseline": baseline.path if baseline else None,
        "today": today.isoformat(),
        "new_failures": new,
        "baselined": sum(len(v) for v in used.values()),
        "expired": expired,
        "stale": stale,
        "min_cases": min_cases,
        "floor_ok": floor_ok,
        "messages": messages,
    }


def runner_of(report: dict) -> dict:
    """``{"runner": name}`` of the report's runtime, or nothing where the report names none: the
    runtime ``runtime_name`` gives (onnxruntime-qnn, onnxruntime-optimized, onnxruntime[PROVIDER]),
    not describe()'s name, which every onnxruntime variant shares."""
    from qconform.runner import runtime_name

    ident = report.get("runner") or {}
    return {"runner": runtime_name(ident)} if ident.get("name") else {}


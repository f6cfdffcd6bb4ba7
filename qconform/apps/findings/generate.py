"""One runtime's findings: its groups, each checked by running its script."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from qconform.apps.findings._common import TRIES
from qconform.apps.findings.groups import Group, fact_groups, observed_groups
from qconform.apps.findings.observe import IsolatedObserver, Observation, case_of, findings_pipeline, observe
from qconform.apps.findings.templates import TEMPLATES, generic_template
from qconform.apps.findings.write import write_finding
from qconform.verdicts import ERROR, FAIL, Probe


@dataclass
class Outcome:
    written: list[str] = field(default_factory=list)  # keys
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (group or fact, why)


def _disagrees(obs: Observation, g: Group, must_reject: bool) -> bool:
    """The runtime still deviates on this case the way the group says (wrong outputs, or an error)."""
    if must_reject:
        return obs.verdict == Probe.RAN
    if g.fact:
        return obs.verdict in (FAIL, ERROR)
    return obs.verdict == (ERROR if g.kind == ERROR else FAIL)




def generate(runtime: str, out: Path, *, failures: Sequence[Mapping[str, Any]] | None = None, rediagnose: bool = False,
             select: str | None = None, limit: int = 0, log: Callable[[str], None] = print,
             identity: Mapping[str, Any] | None = None, characterisation: Mapping[str, Any] | None = None) -> Outcome:
    """Write the findings of one runtime (see the module docstring); what was written and skipped.
    ``identity``: the report's runner identity, for a runner with no template of its own (loaded
    again from its ``load`` entry; the scripts load it the same way). ``characterisation``: the
    report's, for the failures no model names (without a report: the run's own)."""
    from qconform import corpus
    from qconform.facts import SOURCES
    from qconform.runner import resolve

    if runtime in TEMPLATES:
        tpl, load = TEMPLATES[runtime], (runtime, None)
    else:
        tpl = generic_template(runtime, identity or {})
        entry = (identity or {})["load"]
        load = (entry["runner"], entry.get("options"))
    runner = resolve(*load)
    version = tpl.installed_version()
    if version is None:
        raise RuntimeError(f"{runtime}: {tpl.package} is not installed here")
    index = corpus.index(corpus.DEFAULT_ROOT)
    runner = findings_pipeline(runner)
    outcome = Outcome()
    if runtime in SOURCES and runtime in TEMPLATES and failures is None:
        groups, skipped = fact_groups(runtime, version)
        outcome.skipped.extend(skipped)
    else:
        if failures is None:
            records = run_corpus(runner, index, select, log)
            failures = [r for r in records if r["verdict"] in (FAIL, ERROR)]
            characterisation = characterise(records, index)
        ids = {f["id"] for f in failures}
        failures = _diagnosed(runner, failures, index, log, rediagnose)
        cases = index.cases_of(ids)
        groups = observed_groups(runtime, failures, cases, characterisation)
    if limit and len(groups) > limit:
        groups.sort(key=lambda g: (-g.cases, g.key))
        for g in groups[limit:]:
            outcome.skipped.append((g.key, f"over --max-per-runtime {limit} ({g.cases} failing case(s))"))
        groups = sorted(groups[:limit], key=lambda g: g.key)
    isolated = IsolatedObserver(load)  # a runtime that aborts on a case ends a worker, not this run
    try:
        for g in groups:
            _write_group(g, out, tpl, index, isolated, version, outcome, runtime, log)
    finally:
        isolated.close()
    return outcome


def _write_group(g: Group, out: Path, tpl, index, isolated: IsolatedObserver, version: str, outcome: Outcome,
                 runtime: str, log: Callable[[str], None]) -> None:
    """The group's finding from the first candidate case that still shows it (its script checked),
    or the reason none did."""
    done = False
    why = "no candidate case"
    for ref in g.candidates[:TRIES]:
        case, must_reject = case_of(ref, index)
        obs = isolated(case, must_reject)
        if not _disagrees(obs, g, must_reject):
            why = f"{case.id}: {obs.verdict} here" + (f" ({obs.message.splitlines()[0]})" if obs.message else "")
            continue
        try:
            final, line, output = write_finding(out, g, tpl, case, obs, version, must_reject)
        except ValueError as exc:  # the template cannot carry a type
            why = f"{case.id}: {exc}"
            continue
        if final is not None:
            outcome.written.append(g.key)
            log(f"  {runtime}/{g.key}: {line}")
            done = True
            break
        tail = " | ".join(output.strip().splitlines()[-2:])
        why = f"{case.id}: repro.py did not show the mismatch: {tail[:300]}"
    if not done:
        outcome.skipped.append((g.key, why))
        log(f"  {runtime}/{g.key}: SKIPPED: {why}")



def run_corpus(runner, index, select: str | None, log: Callable[[str], None]) -> list[dict]:
    """The records of a runner over the corpus (``select``: fnmatch over case ids), failures diagnosed:
    the engine's record of each case (a crash or timeout read as an error)."""
    pipeline = findings_pipeline(runner)
    records = []
    refs = [r for r in index.refs if not select or fnmatchcase(r.id, select)]
    log(f"  running {len(refs)} case(s)")
    for cid, case in sorted(index.cases_of([r.id for r in refs]).items()):
        obs = observe(pipeline, case)
        rec = dict(obs.record or {"id": cid})
        rec.update(verdict=obs.verdict, problem=obs.message)
        if obs.verdict == FAIL:
            rec["diagnosis"] = obs.diagnosis or []
        records.append(rec)
    return records


def characterise(records: Sequence[Mapping[str, Any]], index) -> dict[str, Any] | None:
    """What the failures no model names and the errors have in common (``qconform.diagnosis.characterise``,
    as a certification's report says it); None where it breaks (the findings are written without it)."""
    from qconform.diagnosis import characterise as ch
    from qconform.diagnosis.diagnose import report_section

    try:
        return ch.report_section(records, index.cases_of, report_section(records, index.cases_of))
    except Exception:  # noqa: BLE001 - advice only
        return None


def _diagnosed(runner, failures: Sequence[Mapping[str, Any]], index, log, rediagnose: bool = False) -> list[dict]:
    """The failures, each failing one with a diagnosis (run and diagnosed here where the report has
    none; with ``rediagnose`` also where it named no model: a report made before a model existed)."""
    pipeline = findings_pipeline(runner)
    out = []
    todo = [f["id"] for f in failures if f["verdict"] == FAIL
            and (f.get("diagnosis") is None or (rediagnose and not f["diagnosis"]))]
    cases = index.cases_of(todo) if todo else {}
    if todo:
        log(f"  diagnosing {len(todo)} failing case(s) the report left undiagnosed"
            + (" or unnamed" if rediagnose else ""))
    for f in failures:
        f = dict(f)
        if f["id"] in cases:
            obs = observe(pipeline, cases[f["id"]])
            f["diagnosis"] = (obs.diagnosis or []) if obs.outputs else []
        out.append(f)
    return out

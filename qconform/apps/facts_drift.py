"""``qconform facts drift``: what a runtime does now, against what the facts say it did.

For the day a runtime releases. The bundled runner of a source runs the whole corpus and every
probe in-process; its observations are compared with the facts recorded for a *baseline* version
(``--against``; by default the installed version where it has been measured, else the newest
measured version) on this platform. The result is a proposal, never a silent change:

* **fixed**: a fact of the baseline whose example no longer shows it. If its range still contains
  the installed version, the proposal closes it (``<INSTALLED``).
* **holds**: a fact still shown. If its range excludes the installed version, the proposal widens it.
* **new**: failures and refusals no shown fact accounts for, grouped into proposed facts bounded to
  ``>=INSTALLED``, with ``TODO`` where a reviewer must write what the spec says (a test refuses
  committed facts that still say TODO).
* **measured**: the installed version on this machine's ISA class is added to the file.

``--write`` rewrites the facts file in place (review it with ``git diff``); otherwise the proposed
file is written under ``--out`` and the diff against the current file is printed.
"""
from __future__ import annotations

import datetime
import difflib
import re
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from qconform.declarations import operators
from qconform import facts, platform as plat
from qconform.facts.observe import Result, case_id_of, explains, observe, shows
from qconform.verdicts import UNSUPPORTED

TODO = "TODO"


@dataclass
class Drift:
    source: str
    installed: str
    against: str
    platform: str
    fixed: list[tuple[facts.Fact, str]] = field(default_factory=list)  # (fact, what was seen)
    holds: list[facts.Fact] = field(default_factory=list)
    unobserved: list[facts.Fact] = field(default_factory=list)  # example not in this corpus: no verdict
    changed: list[tuple[facts.Fact, facts.Fact, str]] = field(default_factory=list)  # (old, new, why)
    new: list[tuple[facts.Fact, list[str]]] = field(default_factory=list)  # (proposed fact, case ids)
    measured_added: facts.Measured | None = None
    proposed: facts.FactFile | None = None
    #: observed cases left to another runtime's facts (``Runtime.facts_scope``): (that runtime, how many)
    elsewhere: tuple[str, int] | None = None
    #: the packing measurement re-run on the observed cases, where one is recorded for the installed
    #: version here: (recorded, compared now, ids differing now)
    packing: tuple[facts.Packing, int, list[str]] | None = None

    @property
    def packing_drifted(self) -> bool:
        """A recorded equivalence that no longer holds, or a recorded difference no longer seen."""
        if self.packing is None:
            return False
        recorded, compared, differing = self.packing
        return bool(differing) == recorded.equivalent and compared > 0

    @property
    def drifted(self) -> bool:
        return bool(self.changed or self.new or self.measured_added or self.packing_drifted)

    def text(self) -> str:
        lines = [f"{self.source} {self.installed} on {self.platform}, against the facts recorded for "
                 f"{self.source} {self.against}:"]
        if self.fixed:
            lines.append(f"  fixed or changed ({len(self.fixed)}): facts whose example no longer shows them")
            for f, seen in self.fixed:
                rec = "range still contains it: proposed close" if f.holds_for(self.installed) else \
                      f"already recorded ({f.versions})"
                lines.append(f"    {f.id} [{f.kind}] {f.op_versions} -- {rec}\n      now: {seen}")
        lines.append(f"  still hold: {len(self.holds)} ({', '.join(f.id for f in self.holds) or 'none'})")
        if self.elsewhere:
            lines.append(f"  left to {self.elsewhere[0]}'s facts: {self.elsewhere[1]:,} observed case(s) outside "
                         "the cases this file speaks for (it runs them as that runtime does)")
        if self.unobserved:
            lines.append(f"  not observed (example not in this corpus): {', '.join(f.id for f in self.unobserved)}")
        for old, new, why in self.changed:
            lines.append(f"  {why}: {old.id} versions {old.versions or '(all)'!r} -> {new.versions or '(all)'!r}")
        if self.new:
            lines.append(f"  new ({len(self.new)}): behaviour no fact accounts for, proposed with TODO for review")
            for f, ids in self.new:
                lines.append(f"    {f.id} [{f.kind}] {len(ids)} case(s) {', '.join(f.cases)}; e.g. {f.example}")
                if f.message:
                    lines.append(f"      reason matches: {f.message}")
        if self.measured_added:
            m = self.measured_added
            lines.append(f"  measured: add {m.version} on {m.platform!r} ({m.how})")
        if self.packing is not None:
            recorded, compared, differing = self.packing
            was = "equivalent" if recorded.equivalent else f"{recorded.differing:,} of {recorded.compared:,} differing"
            now = (f"{len(differing):,} of {compared:,} observed cases differ packed and alone"
                   + (f" (e.g. {', '.join(differing[:3])})" if differing else ""))
            verdict = ("changed: measure again with qconform facts packing --write" if self.packing_drifted
                       else "still holds")
            lines.append(f"  packing (recorded {recorded.date}: {was}): now {now}; {verdict}")
        if not self.drifted:
            lines.append("  no drift: the recorded facts describe this version on this platform")
        return "\n".join(lines)


def default_against(ff: facts.FactFile, installed: str) -> str:
    """The installed version where measured here, else the newest measured version (any platform);
    for a source never measured, the installed one (its first measurement: everything is new)."""
    if ff.measured_here(installed):
        return installed
    versions = sorted({m.version for m in ff.measured}, key=Version)
    if not versions:
        return installed
    older = [v for v in versions if Version(v) <= Version(installed)]
    return (older or versions)[-1]


def _close(spec: str, version: str) -> str:
    return str(SpecifierSet(f"{spec},<{version}" if spec.strip() else f"<{version}"))


def _widen(spec: str, version: str) -> str:
    v = Version(version)
    return str(SpecifierSet(",".join(str(s) for s in SpecifierSet(spec) if s.contains(v, prereleases=True))))


_TYPE = r"(?:float8e\w+|float4e2m1|float6e\w+|u?int\d+|bfloat16|float\d*|[IUF]\d{1,2})\b"
_OPS = "|".join(sorted(operators.names(), key=len, reverse=True))  # the longest name first
_VARIABLE = re.compile(rf"({_OPS})"
                       rf"|(?i:\b{_TYPE}(?:, {_TYPE})*)|(\d+(?:\.\d+)*)")


def _reason_pattern(message: str) -> str:
    """A regex matching ``message`` (its first sentence, at most ~160 characters, no backtrace) with
    op names, numbers and type names (a list of them as one) as wildcards."""
    message = message.split(" | Stack backtrace")[0]
    cut = message.find(". ", 40)
    if 0 < cut < 160:
        message = message[: cut + 1]
    elif len(message) > 160:
        message = message[:160].rsplit(" ", 1)[0]
    out, pos = [], 0
    for m in _VARIABLE.finditer(message):
        out.append(re.escape(message[pos:m.start()]))
        out.append(r"[\d.]+" if m.group(2) else r"\w+" if m.group(1) else r"[\w, ]+")
        pos = m.end()
    out.append(re.escape(message[pos:]))
    return "".join(out).replace("\\ ", " ")


def _group_globs(ids: list[str]) -> tuple[str, ...]:
    """``Op-*/types/*`` globs for failing ids (one per op and type signature)."""
    keys = sorted({(cid.split("/")[0].rsplit("-", 1)[0], cid.split("/")[1]) for cid in ids})
    return tuple(f"{op}-*/{types}/*" for op, types in keys)


def _op_versions(ids: list[str]) -> str:
    return ", ".join(sorted({cid.split("/")[0] for cid in ids}))


def _new_facts(source: str, installed: str, label: str, uncovered: dict[str, Result], start: int
               ) -> list[tuple[facts.Fact, list[str]]]:
    """Proposed facts for observations nothing accounts for: failures by op and by the deviation
    model the diagnosis names first (their type signatures as globs; a named model writes the row's
    ``does`` and ``spec``, an unexplained group leaves TODO for a reviewer), refusals by reason."""
    from qconform.diagnosis.models import get as model

    case_id = case_id_of  # a probe's glob is its draft's id

    failing: dict[tuple[str, str], list[str]] = defaultdict(list)
    refused: dict[str, list[str]] = defaultdict(list)
    for cid, r in sorted(uncovered.items()):
        if r.disagrees:
            key = cid if cid.startswith(facts.PROBE) else cid.split("/")[0].rsplit("-", 1)[0]
            failing[key, r.diagnosis].append(cid)
        else:
            refused[_reason_pattern(r.message)].append(cid)
    out, n = [], start
    for (key, named), ids in sorted(failing.items()):
        r = uncovered[ids[0]]
        first = (r.message or r.verdict).splitlines()
        globs = _group_globs([case_id(c) for c in ids])
        spec = f"the text at [{r.clause}](#{r.clause})" if r.clause else ""
        if named and spec:
            does = (f"what qconform's deviation model `{named}` computes on every case of the group "
                    f"([diagnosis](diagnosis.md#{named.split('+')[0]})): {model(named).explanation}")
        else:
            does = f"{TODO}: describe. Seen first: " + " / ".join(x.strip() for x in first[:3])
            spec = f"{TODO}: the sentence of qconform/docs/semantics.md this contradicts"
        f = facts.Fact(f"E{n}", source, "erratum", f">={installed}", "", _op_versions([case_id(c) for c in ids]),
                       globs, ids[0], does, spec, evidence=f"{facts.DRIFT_COMMAND}: {len(ids)} case(s) on {label}")
        out.append((f, ids))
        n += 1
    for pattern, ids in sorted(refused.items()):
        globs = tuple(sorted({f"{case_id(cid).split('/')[0]}/*" for cid in ids}))
        r = uncovered[ids[0]]
        reason = r.message.split(" | Stack backtrace")[0]
        reason = reason if len(reason) <= 240 else reason[:240].rsplit(" ", 1)[0] + " …"
        f = facts.Fact(f"E{n}", source, UNSUPPORTED, f">={installed}", "", _op_versions([case_id(c) for c in ids]),
                       globs, ids[0], f"refuses the model: {reason}",
                       f"valid models: the text at [{r.clause}](#{r.clause})" if r.clause
                       else f"{TODO}: where the spec admits these models",
                       message=pattern, evidence=f"{facts.DRIFT_COMMAND}: {len(ids)} case(s) on {label}")
        out.append((f, ids))
        n += 1
    return out


def compute(source: str, results: dict[str, Result], installed: str, against: str | None = None,
            feats: frozenset[str] | None = None, machine: str | None = None,
            files: dict[str, facts.FactFile] | None = None) -> Drift:
    """The drift of one source, from observations already made (pure: testable without a runtime)."""
    files = files or facts.load_all()
    ff = files[source]
    against = against or default_against(ff, installed)
    label = plat.label(feats, machine)
    drift = Drift(source, installed, against, label)
    src = facts.SOURCES.get(source)
    if src is not None and src.elsewhere:  # cases another runtime's facts speak for
        outside = [cid for cid in results if not src.speaks_for(case_id_of(cid))]
        drift.elsewhere = (src.elsewhere, len(outside))
        results = {cid: r for cid, r in results.items() if src.speaks_for(case_id_of(cid))}
    proposed: dict[str, facts.Fact] = {f.id: f for f in ff.facts}
    baseline = [f for f in ff.facts if f.applies(against, feats, machine)]
    for f in baseline:
        if f.example not in results:
            drift.unobserved.append(f)
            continue
        ok, seen = shows(f, results)
        if ok:
            drift.holds.append(f)
            if not f.holds_for(installed):
                new = replace(f, versions=_widen(f.versions, installed))
                proposed[f.id] = new
                drift.changed.append((f, new, "holds again: widen"))
        else:
            drift.fixed.append((f, seen))
            if f.holds_for(installed):
                new = replace(f, versions=_close(f.versions, installed))
                proposed[f.id] = new
                drift.changed.append((f, new, "no longer shown: close"))
    for f in ff.facts:  # facts recorded for the installed version but not the baseline
        if f not in baseline and f.applies(installed, feats, machine) and f.example in results:
            ok, seen = shows(f, results)
            (drift.holds.append(f) if ok else drift.fixed.append((f, seen)))
    showing = [f for f in proposed.values() if f.applies(installed, feats, machine) and shows(f, results)[0]]
    uncovered = {cid: r for cid, r in results.items()
                 if (r.disagrees or r.verdict == UNSUPPORTED) and not any(explains(f, cid, r) for f in showing)}
    drift.new = _new_facts(source, installed, label, uncovered, facts.next_id(files))
    for f, _ in drift.new:
        proposed[f.id] = f
    measured = list(ff.measured)
    if not ff.measured_here(installed, feats, machine):
        drift.measured_added = facts.Measured(installed, plat.label_condition(feats, machine),
                                              datetime.date.today().isoformat(), f"{label}, via {facts.DRIFT_COMMAND}")
        measured.append(drift.measured_added)
    drift.proposed = facts.with_facts(ff, sorted(proposed.values(), key=lambda f: int(f.id[1:])), measured)
    return drift


def run(source: str, golden: Path, against: str | None = None, whole: bool = False) -> Drift:
    """Observe the source (its tests' slice, or with ``whole`` the whole corpus) and compare."""
    src = facts.SOURCES[source]
    if src.runner is None:
        raise facts.FactsError(f"{source} has no bundled runner; its facts are checked by the project's tests")
    installed = src.version()
    if installed is None:
        raise facts.FactsError(f"{source} is not installed here")
    ff = facts.load(source)
    examples = frozenset(f.example for f in ff.facts)
    select = () if whole else src.check
    results = observe(src.runner, golden, select=select, also=examples, diagnose=True,
                      hangs=ff.hanging_examples)
    drift = compute(source, results, installed, against)
    recorded = ff.packing_here(installed)
    if recorded is not None:  # what certify --pack rests on: re-measured on the same cases
        drift.packing = _packing_now(src.runner, golden, recorded, select)
    return drift


def _packing_now(runner: str, golden: Path, recorded: facts.Packing, select: tuple[str, ...]
                 ) -> tuple[facts.Packing, int, list[str]]:
    from fnmatch import fnmatchcase

    from qconform import corpus as corpus_mod
    from qconform.apps.packing_check import measure
    from qconform.execution import Pipeline
    from qconform.runner import resolve

    cases = [c for c in corpus_mod.load(golden).cases if not select or any(fnmatchcase(c.id, g) for g in select)]
    m = measure(Pipeline.local(resolve(runner)), cases)
    return recorded, m.compared, m.differing


def _version_of(runner: dict, source: str) -> str:
    """The version a report's run had of the source its facts are keyed by: a plugin execution
    provider's own package (onnxruntime-qnn 2.7.0) where the source is that package, else the
    runner's (onnxruntime-qnn's report names onnxruntime 1.32.0 as its runner)."""
    src = facts.SOURCES.get(source)
    ep = runner.get("execution_provider") or {}
    dist = src.runtime.dist if src is not None and src.runtime is not None else None
    if dist and ep.get("package") == dist and ep.get("version"):
        return str(ep["version"])
    return str(runner["version"])


def from_report(path: Path, golden: Path, against: str | None = None) -> Drift:
    """The drift shown by a finished ``pytest --runner=NAME --report=DIR`` run (DIR or its
    report.json): the version and the platform are the run's own, nothing is re-run."""
    import json

    from qconform import corpus as corpus_mod
    from qconform.facts.observe import from_report as observations
    from qconform.runner import runtime_name

    path = path / "report.json" if path.is_dir() else path
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        runner = report["runner"]
        source = runtime_name(runner)
        installed = facts.release(_version_of(runner, source))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise facts.FactsError(f"{path}: not a qconform report.json ({type(exc).__name__}: {exc})") from exc
    if source not in facts.RUNNER_SOURCES:
        raise facts.FactsError(f"{path}: runner {source!r} has no facts file; known: {', '.join(facts.RUNNER_SOURCES)}")
    if not report.get("complete") or report.get("interrupted"):
        raise facts.FactsError(f"{path}: the run did not finish ({report.get('counts', {}).get('reported', 0)} of "
                               f"{report.get('counts', {}).get('collected', '?')} cases reported): its drift would "
                               "call every case it never reached unobserved")
    corpus = corpus_mod.load(golden)
    if report.get("corpus", {}).get("digest") != corpus.digest:
        raise facts.FactsError(f"{path}: ran another corpus than {golden} (its digest differs)")
    plat_info = runner.get("platform") or {}
    feats = frozenset(plat_info["features"]) if "features" in plat_info else None
    cases = {c.id: c for c in corpus.cases}
    return compute(source, observations(report, cases), installed, against, feats, plat_info.get("arch"))


def main(args) -> int:
    from qconform.corpus import DEFAULT_ROOT

    golden = Path(args.golden or DEFAULT_ROOT)
    if args.from_report:
        try:
            d = from_report(Path(args.from_report), golden, args.against)
        except facts.FactsError as exc:
            print(f"qconform: {exc}")
            return 2
        return _show(d, args)
    sources = args.runner or [s for s in facts.RUNNER_SOURCES if facts.SOURCES[s].version() is not None]
    drifted = False
    for source in sources:
        if source not in facts.RUNNER_SOURCES:
            print(f"qconform: no facts source {source!r}; known: {', '.join(facts.RUNNER_SOURCES)}")
            return 2
        try:
            d = run(source, golden, args.against, args.whole)
        except facts.FactsError as exc:
            print(f"qconform: {exc}")
            return 2
        drifted = _show(d, args) == 1 or drifted
    return 1 if drifted else 0


def _show(d: Drift, args) -> int:
    """Print one source's drift and write its proposed facts file; 1 when it drifted."""
    print(d.text())
    if not d.drifted:
        return 0
    source = d.source
    current = facts.dump(facts.load(source))
    new = facts.dump(d.proposed)
    if args.write:
        path = facts.write(d.proposed)
        print(f"  wrote {path}: review with git diff, replace every TODO, then run the tests")
    else:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        path = facts.write(d.proposed, out / f"{source}.toml")
        diff = "".join(difflib.unified_diff(current.splitlines(True), new.splitlines(True),
                                            f"a/{facts.path_of(source).name}", f"b/{source}.toml"))
        (out / f"{source}.diff").write_text(diff)
        print(f"  proposed file: {path}; diff: {out / f'{source}.diff'} "
              f"(apply with --write, or copy it over {facts.path_of(source)})")
    return 1


def add_arguments(p) -> None:
    p.add_argument("--runner", action="append", metavar="SOURCE",
                   help=f"source to check (repeatable; default: {', '.join(facts.RUNNER_SOURCES)})")
    p.add_argument("--against", metavar="VERSION", default=None,
                   help="compare with the facts recorded for this version (default: the installed version "
                        "where measured, else the newest measured one)")
    p.add_argument("--golden", metavar="DIR", default=None, help="golden corpus directory")
    p.add_argument("--out", metavar="DIR", default="qconform-drift",
                   help="where the proposed facts files and diffs go (default: qconform-drift)")
    p.add_argument("--write", action="store_true", help="rewrite the facts files in place instead")
    p.add_argument("--from-report", metavar="DIR", default=None,
                   help="run nothing: the drift shown by a finished pytest --runner=NAME --report=DIR run "
                        "(its runner, version and platform), e.g. a whole-corpus run of a slow runtime")
    p.add_argument("--whole", action="store_true",
                   help="observe the whole corpus even for a source whose tests check a slice "
                        "(third-party runtimes: tens of minutes)")


__all__ = ["Drift", "add_arguments", "compute", "default_against", "from_report", "main", "run"]

"""What a certificate states: a verdict per scope a customer understands, one overall statement,
and the integrity digests that let ``qconform report verify`` show the documents were not edited.

Scopes are op versions and, inside each, type combinations. A scope is *conformant* when every one
of its cases ran and every case that ran passed, and only then; *not fully run* when some of its
cases did not run and none deviates (what ran is no statement about what did not); *deviates,
accepted by baseline* when it deviates and every deviation is covered by the baseline (each with its
reason): an accepted deviation is still a deviation, and is never worded or coloured as conformance;
*deviates* when a deviation is not covered; *not supported* when the runner ran none of its cases.
CI's words (gate, passed/failed) stay in CI output. Accepted deviations that no diagnosis model names
are counted apart, so a blanket baseline cannot hide a deviation nobody has explained.

One rule (``tone``) decides whether a certificate is green, for report.html and summary.md alike: a
certificate never claims more than the run showed, so a partial, empty, unauthenticated run, or one
against a corpus other than qconform's bundled one, says so and is not green.
"""
from __future__ import annotations

import functools
import hashlib
import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from qconform.verdicts import DEVIATING, FAIL, INFO, NOT_RUN, PASS, UNSUPPORTED, Conformance

CONFORMANT, ACCEPTED, DEVIATES = Conformance.CONFORMANT, Conformance.ACCEPTED, Conformance.DEVIATES
#: A scope some of whose cases did not run, none deviating: never conformant, whatever ran passed.
NOT_FULLY_RUN = Conformance.NOT_FULLY_RUN
#: The tone of a certificate that may claim conformance (``tone``; report.html's CSS class of it).
GREEN = "ok"


def verdict_of(cases: list[dict], unnamed: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The verdict of one scope from its compact case rows (id, verdict, baseline); ``unnamed``: the
    ids of deviations no diagnosis model names."""
    cnt = Counter(c["verdict"] for c in cases)
    new = sum(1 for c in cases if c["verdict"] in DEVIATING and not c.get("baseline"))
    accepted = sum(1 for c in cases if c["verdict"] in DEVIATING and c.get("baseline"))
    accepted_unnamed = sum(1 for c in cases if c["verdict"] in DEVIATING and c.get("baseline") and c["id"] in unnamed)
    reasons = sorted({c["baseline"] for c in cases if c["verdict"] in DEVIATING and c.get("baseline")})
    if new:
        word = DEVIATES
    elif accepted:
        word = ACCEPTED
    elif cnt[NOT_RUN]:  # what did not run may deviate: no conformance over it
        word = NOT_FULLY_RUN if cnt[NOT_RUN] < len(cases) else Conformance.NOT_RUN
    elif cnt[PASS]:
        word = CONFORMANT
    elif cnt[UNSUPPORTED]:
        word = Conformance.UNSUPPORTED
    elif cnt[INFO]:
        word = Conformance.INFORMATION
    else:
        word = Conformance.NOT_RUN
    return {"verdict": word, "cases": len(cases), PASS: cnt[PASS], "new": new, "accepted": accepted,
            "accepted_unnamed": accepted_unnamed, UNSUPPORTED: cnt[UNSUPPORTED], INFO: cnt[INFO],
            NOT_RUN: cnt[NOT_RUN], "reasons": reasons}


def unnamed_deviations(report: dict) -> frozenset[str]:
    """Ids of the deviating cases no diagnosis model names (errors, crashes, unexplained failures)."""
    return frozenset(f["id"] for f in report.get("failures") or () if not f.get("diagnosis"))


def scopes(report: dict) -> list[dict]:
    """Per op version, its verdict and its type combinations' verdicts (from case ids:
    ``OpVersion/types/family/name``)."""
    by_ov: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for c in report["cases"]:
        ov, types = c["id"].split("/")[:2]
        by_ov[ov][types].append(c)

    def key(ov: str) -> tuple:
        op, _, v = ov.rpartition("-")
        return (op, int(v) if v.isdigit() else 0)

    unnamed = unnamed_deviations(report)
    out = []
    for ov in sorted(by_ov, key=key):
        every = [c for cs in by_ov[ov].values() for c in cs]
        out.append({"op_version": ov, **verdict_of(every, unnamed),
                    "types": [{"types": t, **verdict_of(cs, unnamed)} for t, cs in sorted(by_ov[ov].items())]})
    if coverage(report):  # a selection: what passed in it is no conformance of the op version
        for row in (r for s in out for r in (s, *s["types"])):
            if row["verdict"] == CONFORMANT:
                row["verdict"] = Conformance.SELECTION_PASSED
    return out


def behaviours(report: dict) -> list[dict]:
    """The deviations grouped by behaviour across op versions: a failure by the model its diagnosis
    names first ("named by no model", "not diagnosed"), an error, crash or timeout by its verdict;
    largest first, each with its op versions, how many a baseline accepts and one example."""
    from qconform.record import UNNAMED, behaviour

    rows: dict[str, dict] = {}
    for f in report["failures"]:
        named = behaviour(f) if f["verdict"] == FAIL else None
        key = (f["verdict"] if f["verdict"] != FAIL else
               "not diagnosed" if named is None else "named by no model" if named == UNNAMED else named)
        row = rows.setdefault(key, {"behaviour": key, "model": named not in (None, UNNAMED) and f["verdict"] == FAIL,
                                    "cases": 0, "accepted": 0, "op_versions": {}, "example": f})
        row["cases"] += 1
        row["accepted"] += bool(f.get("baseline"))
        row["op_versions"][f["op_version"]] = row["op_versions"].get(f["op_version"], 0) + 1
    return sorted(rows.values(), key=lambda r: (-r["cases"], r["behaviour"]))


def certified(ident: dict) -> str:
    """What was certified, named as a customer knows it: the runtime (an onnxruntime variant by its
    own name: an execution provider's package and version, its SDK and backend, then the onnxruntime
    it runs in), never only the runner's name."""
    from qconform.runner import runtime_name

    name, version = str(ident.get("name", "?")), ident.get("version")
    runtime = runtime_name(ident) if "name" in ident else name
    ep = ident.get("execution_provider")
    if ep:
        sdk = f", SDK {ep['sdk']}" if ep.get("sdk") else ""
        backend = f", {ident['device']} backend" if ident.get("device") else ""
        return f"{runtime} {ep.get('version', '')} ({ep.get('name')}{sdk}{backend}) on {name} {version}"
    if runtime != name:
        level = (ident.get("options") or {}).get("optimize")
        how = f" at graph optimisation level {level}" if level and level != "ORT_DISABLE_ALL" else ""
        providers = ident.get("providers") or []
        on = f" on {', '.join(providers)}" if providers and providers != ["CPUExecutionProvider"] else ""
        return f"{runtime} ({name} {version}{on}{how})"
    return " ".join(str(x) for x in (name, version) if x)


def coverage(report: dict) -> str:
    """What the run did not cover, said wherever a verdict is stated ('' when it judged the whole
    corpus, or the whole of the runtime's declared scope): a selection of the corpus, or no case judged
    at all (every case unsupported or information). Neither is a conformance statement."""
    c = report.get("counts") or {}
    judged = sum(c.get(v, 0) for v in (PASS, *DEVIATING))
    total = int((report.get("corpus") or {}).get("cases") or 0)
    total -= int(((report.get("invocation") or {}).get("scope") or {}).get("left_out") or 0)
    collected = int(c.get("collected", 0))
    if not judged:
        return (f"no case judged ({collected:,} case{'s' if collected != 1 else ''} collected, "
                "none that the runtime ran and qconform compared)")
    if total and collected < total:
        return f"partial selection: {collected:,} of {total:,} cases"
    model = (report.get("invocation") or {}).get("model")
    if model:  # a model's own node groups: their verdicts, no op version's conformance
        return (f"one model's node groups ({model.get('file', '?')}: {model.get('groups', 0)} group"
                f"{'s' if model.get('groups', 0) != 1 else ''} judged, {collected:,} cases at its own parameters)")
    return ""


def model_finding(report: dict) -> str:
    """What a model's whole-model check (report.json's ``invocation.model.whole``, written by
    ``gating.model_check``) found outside the permitted readings, in one clause; '' for nothing."""
    whole = ((report.get("invocation") or {}).get("model") or {}).get("whole") or {}
    first = whole.get("first")
    if not first:
        return ""
    return (f"the model run whole leaves the permitted readings first at group {first.get('group', '?')} "
            f"({first.get('nodes', '?')}), input set {first.get('set', '?')}: {first.get('verdict', '?')}")


def overall(report: dict, scoped: list[dict] | None = None) -> str:
    """One sentence for the top of the certificate. An incomplete run states no conformance count:
    it says how many op versions did not run in full instead."""
    scoped = scoped if scoped is not None else scopes(report)
    n = Counter(s["verdict"] for s in scoped)
    runner = certified(report["runner"])
    other = other_corpus(report)
    who = f"{runner} (run against {other})" if other else runner
    complete = report.get("complete", True)
    if complete and coverage(report):  # a selection certifies no op version, whatever passed in it
        parts = [f"{n[Conformance.SELECTION_PASSED]} of {len(scoped)} op versions passed every selected case"]
    elif complete:
        parts = [f"{n[CONFORMANT]} of {len(scoped)} op versions conformant"]
    else:  # what ran is no statement about what did not
        short = sum(1 for s in scoped if s.get(NOT_RUN))
        parts = [f"{short} of {len(scoped)} op versions not fully run"]
        if n[CONFORMANT]:
            parts.append(f"{n[CONFORMANT]} ran in full with every case passing")
    accepted = sum(s["accepted"] for s in scoped)
    if n[DEVIATES]:
        new = sum(s["new"] for s in scoped)
        parts.append(f"{n[DEVIATES]} deviate ({new} deviating case{'s' if new != 1 else ''} not accepted)")
    if n[ACCEPTED]:
        parts.append(f"{n[ACCEPTED]} deviate only where the baseline accepts it")
    if accepted:
        base = ((report.get("invocation") or {}).get("baseline") or {}).get("path")
        unnamed = sum(s["accepted_unnamed"] for s in scoped)
        parts.append(f"{accepted} deviating case{'s' if accepted != 1 else ''} accepted by "
                     + (f"baseline {base}" if base else "a baseline")
                     + (f", {unnamed} of them named by no diagnosis model" if unnamed else ""))
    if n[Conformance.UNSUPPORTED]:
        parts.append(f"{n[Conformance.UNSUPPORTED]} not supported")
    if not complete:  # an incomplete run certifies nothing, whatever ran passed
        c = report.get("counts") or {}
        why = report.get("stopped") or ("interrupted" if report.get("interrupted") else "")
        head = (f"{who}: incomplete run, {c.get(NOT_RUN, 0):,} of {c.get('collected', 0):,} cases not run"
                + (f" ({why})" if why else "") + "; no conformance is stated"
                + ("; the cases that ran deviate from the ONNX specification" if n[DEVIATES] or n[ACCEPTED] else ""))
    elif coverage(report):  # a selection, or nothing judged: what ran is reported, nothing is certified
        head = (f"{who}: {coverage(report)}; no conformance is stated"
                + ("; the cases that ran deviate from the ONNX specification" if n[DEVIATES] or n[ACCEPTED] else "")
                + (f"; {model_finding(report)}" if model_finding(report) else ""))
    elif not n[DEVIATES] and not n[ACCEPTED]:
        head = f"{who} conforms bit-exactly {'against that corpus ' if other else ''}wherever it runs these operators"
    elif not n[DEVIATES]:
        head = f"{who} deviates from the ONNX specification; a baseline accepts every deviation"
    else:
        head = f"{who} deviates from the ONNX specification"
    unverified = unauthenticated(report)
    if unverified:
        head += f" ({unverified})"
    if scope_line(report):
        parts.append(scope_line(report))
    return f"{head}: {', '.join(parts)}."


def scope_line(report: dict) -> str:
    """What a run on a runtime's declared scope says wherever its verdict is stated ('' for none)."""
    scope = (report.get("invocation") or {}).get("scope")
    if not scope:
        return ""
    return f"in its declared scope: {scope['why']} ({scope.get('left_out', 0):,} cases outside it, not run)"


def tone(report: dict, scoped: list[dict] | None = None) -> str:
    """The one rule for a certificate's colour and summary.md's tick, so the two never disagree:
    'bad' where a case deviates (a baseline's acceptance included), the run is incomplete or its gate
    failed; 'warn' where nothing deviates but the run shows less than a conformance claim needs
    (``withheld``); 'ok', green, only otherwise."""
    scoped = scoped if scoped is not None else scopes(report)
    if (not report.get("complete", True) or (report.get("gate") or {}).get("passed") is False
            or any(s["verdict"] in (DEVIATES, ACCEPTED) for s in scoped)):
        return "bad"
    if withheld(report) or not any(s["verdict"] == CONFORMANT for s in scoped):
        return "warn"
    return GREEN


def withheld(report: dict) -> str:
    """Why a run in which nothing deviates is still not green ('' when it may be): a selection or
    nothing judged, a device nobody authenticated (a pass nobody can attribute), or another corpus
    than qconform's bundled one."""
    if coverage(report):
        return f"{coverage(report)}, none deviating; no conformance is stated"
    if unauthenticated(report):
        return "passed on a device that was not authenticated"
    if other_corpus(report):
        return f"passed against {other_corpus(report)}"
    return ""


@functools.lru_cache(maxsize=1)
def bundled_corpus_digest() -> str | None:
    """The digest of qconform's bundled corpus, as its MANIFEST states it (None when it cannot be
    read): what 'the corpus' means in an unqualified certificate. Its files need no hashing here: a
    run checks every byte of the corpus it reads."""
    from qconform import corpus

    return corpus.manifest_digest(corpus.DEFAULT_ROOT)


def other_corpus(report: dict) -> str:
    """'' when the run was against qconform's bundled corpus, else which corpus it was: its goldens
    are whoever made them, so conformance holds only against that corpus."""
    c = report.get("corpus") or {}
    digest = str(c.get("digest") or "")
    if digest and digest == bundled_corpus_digest():
        return ""
    cases = c.get("cases")
    size = f", {cases:,} cases" if isinstance(cases, int) else ""
    return f"another corpus, not qconform's bundled one: digest {digest[:16] or '?'}…{size}"


def resumed_line(report: dict) -> str:
    """How many verdicts were read back from an earlier run's ``--state`` file rather than run now
    ('' when none): the date and duration are this run's, those verdicts are not."""
    inv = report.get("invocation") or {}
    n = int(inv.get("resumed") or 0)
    if not n:
        return ""
    total = int((report.get("counts") or {}).get("collected", 0))
    return (f"{n:,} of {total:,} cases were read back from an earlier run (--state), not run now: "
            "their verdicts are that run's")


def platforms(report: dict) -> tuple[dict, dict | None, str]:
    """The platform the runtime ran on, the controller's (None when the runtime ran here), and how
    the first is known: where it ran elsewhere (a device worker, a device's stored results), the
    device's own declaration, never this host's CPU or packages."""
    from qconform.runner import ran_elsewhere

    ident, here = report.get("runner") or {}, report.get("platform") or {}
    where = ran_elsewhere(ident)
    if not where:
        return here, None, ""
    device = ident.get("platform") if isinstance(ident.get("platform"), dict) else {}
    how = f"declared by the device ({where})" + (", not authenticated" if ident.get("authenticated") is False else "")
    return device, here, how


def packing_line(report: dict) -> str:
    """What ``certify --pack`` did, in one sentence ('' when it was not asked for): how many passes
    came from packed models and the measurement that allows it, or why every case ran alone."""
    p = (report.get("invocation") or {}).get("packing")
    if not p:
        return ""
    if not p.get("used"):
        return f"packing asked for and not used: {p.get('why', '')}"
    return (f"{p.get('cases', 0):,} passes came from packed models (many cases' nodes in one model); every "
            f"other verdict is its case's own single model's: {p.get('why', '')}")


def unauthenticated(report: dict) -> str:
    """What a reader must know when the runtime's identity was not proved: a device worker reached
    without a shared secret, or an offline results folder without a valid MAC ('' when proved or
    when the runtime ran here)."""
    ident = report.get("runner") or {}
    if ident.get("authenticated") is not False:
        return ""
    from qconform.runner import ran_elsewhere

    where = ran_elsewhere(ident) or "the device"
    return (f"as declared by {where}, not authenticated: no shared secret proved who answered, so anyone "
            "able to answer there could have produced these results")


# ----------------------------------------------------------------------------------------------
# Integrity
# ----------------------------------------------------------------------------------------------
def content_digest(report: dict) -> str:
    """SHA-256 of the report's content: canonical JSON of everything but the integrity block."""
    body = {k: v for k, v in report.items() if k != "integrity"}
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: The report directory's checksum file (the ``sha256sum -c`` format): every file, byte for byte.
SUMS = "SHA256SUMS"
#: Documents a front-end may write beside the report (``writer.write(beside=...)``, or ``writer.add`` after
#: it: a model's groups.md).
BESIDE = ("certificate.json", "groups.md")
#: The document a model's run (report.json's ``invocation.model``) writes beside the report: listed in SUMS.
MODEL_DOCUMENT = "groups.md"
#: The documents the writer writes into every report directory (besides SUMS), and its folders with
#: the files it writes there: what ``verify`` requires listed, and all ``writer.prepare`` clears.
DOCUMENTS = ("report.json", "report.html", "summary.md", "semantics.html")
FOLDERS = {"evidence": "*.csv", "texts": "*.txt", "model-check": "*"}


def sums_text(root: Path, names: list[str]) -> str:
    return "".join(f"{sha256_file(root / n)}  {n}\n" for n in names)


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def referenced(report: dict) -> list[str]:
    """The files beside report.json that the report names (evidence CSVs, whole runner texts): each
    must be in SUMS too, or an edited one would go unseen."""
    evidence = [f["evidence_file"] for f in report.get("failures") or () if f.get("evidence_file")]
    texts = re.findall(r"texts/[0-9a-f]{64}\.txt", json.dumps(report, ensure_ascii=False))
    return list(dict.fromkeys([*evidence, *texts]))


def verify(root: Path) -> list[str]:
    """What does not match in a report directory (empty: intact). Every file the writer writes must
    be listed in SUMS and match: checking only what SUMS happens to list lets a rewritten document
    pass once its line is deleted. A digest is not a signature: it shows an edit, not who made the
    document."""
    root = root if root.is_dir() else root.parent
    try:
        report = json.loads((root / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [f"{root / 'report.json'}: cannot be read as JSON ({exc})"]
    integ = report.get("integrity")
    if not isinstance(integ, dict):
        return [f"{root / 'report.json'}: has no integrity block (written by a qconform before 0.2?)"]
    problems = []
    if content_digest(report) != integ.get("content_sha256"):
        problems.append("report.json: its content does not match its digest (edited after it was written)")
    if integ.get("corpus_digest") != report.get("corpus", {}).get("digest"):
        problems.append("report.json: the corpus digest was changed")
    sums = root / SUMS
    if not sums.is_file():
        return problems + [f"{SUMS}: missing (it lists every file's SHA-256)"]
    listed: dict[str, str] = {}
    for line in sums.read_text(encoding="utf-8").splitlines():
        digest, _, name = line.partition("  ")
        listed[name] = digest
    model_run = bool((report.get("invocation") or {}).get("model"))
    for name in [*DOCUMENTS, *([MODEL_DOCUMENT] if model_run else []), *referenced(report)]:
        if name not in listed:
            problems.append(f"{name}: not listed in {SUMS} (every file the writer writes is)")
    for name, digest in listed.items():
        path = root / name
        if Path(name).is_absolute() or ".." in Path(name).parts:
            problems.append(f"{name}: listed in {SUMS} but outside the report directory")
        elif not path.is_file():
            problems.append(f"{name}: missing")
        elif sha256_file(path) != digest:
            problems.append(f"{name}: edited after it was written (its SHA-256 is not the one in {SUMS})")
    html = root / "report.html"
    if html.is_file() and integ.get("content_sha256", "") not in html.read_text(encoding="utf-8", errors="replace"):
        problems.append("report.html: does not show the report's digest")
    return problems

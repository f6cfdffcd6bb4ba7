"""Deviation groups: a runtime's facts, or its failing cases grouped by op and mechanism."""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from qconform.apps.findings._common import FACT_KINDS
from qconform.apps.findings.templates import TEMPLATES
from qconform.verdicts import ERROR, FAIL


@dataclass
class Group:
    runtime: str
    key: str  # the directory name under OUT/<runtime>/
    op_versions: str  # "QuantizeLinear-19 … -25" (a fact's) or "QuantizeLinear-23, -24" (observed)
    mechanism: str  # fact id, deviation model(s), "unexplained" or "error: <message>"
    candidates: list[str]  # case ids (or probe:NAME), smallest first
    does: str
    spec: str = ""  # markdown, links to semantics.md anchors as (#anchor)
    evidence: str = ""
    kind: str = FAIL  # erratum | must-reject (a fact's kind); fail | error (observed: the verdict)
    fact: str = ""  # fact id
    versions: str = ""  # the fact's version range
    platform: str = ""  # the fact's platform condition
    cases: int = 0  # failing cases in the group (0: not counted, a fact)
    case_ids: list[str] = field(default_factory=list)  # a few of them, for the README
    #: what the failing cases have in common where no model names them (qconform.diagnosis.characterise)
    characterised: list[str] = field(default_factory=list)


def slug(text: str, limit: int = 72) -> str:
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")
    if len(s) > limit:
        s = s[:limit].rsplit("-", 1)[0]
    return s


def _case_slug(case_id: str) -> str:
    parts = case_id.split("/")
    return slug("-".join(parts[:2] + parts[3:]) if len(parts) == 4 else case_id)


def fact_groups(runtime: str, version: str) -> tuple[list[Group], list[tuple[str, str]]]:
    """The facts of a runtime that make findings and hold here, and (fact id, why not) for the others."""
    from qconform import facts
    from qconform import platform as plat
    from qconform.facts.probes import probe_case

    ff = facts.load(runtime)
    groups, skipped = [], []
    for f in ff.facts:
        if f.kind not in FACT_KINDS:
            continue
        if not f.holds_for(version):
            skipped.append((f.id, f"holds for {f.scope()}, not {runtime} {version}"))
            continue
        if not plat.condition_holds(f.platform):
            skipped.append((f.id, f"holds where {f.platform}; this machine is {plat.label()}"))
            continue
        case_id = probe_case(f.probe)[0].id if f.probe else f.example
        groups.append(Group(runtime, f"{f.id}-{_case_slug(case_id)}", f.op_versions, f.id, [f.example], f.does,
                            f.spec, f.evidence, f.kind, f.id, f.versions, f.platform))
    return groups, skipped


_ERROR_PREFIX = re.compile(r"^runner raised ")


def error_signature(problem: str) -> str:
    """A run's error without the numbers that vary between cases (shapes, sizes, addresses)."""
    first = _ERROR_PREFIX.sub("", problem.strip().splitlines()[0] if problem and problem.strip() else ERROR)
    first = re.sub(r"\d+", "#", first)
    return re.sub(r"[(\[][\s#,()\[\]]*[)\]]", "(…)", first)[:160]  # shapes: "((#, #), (#, #))" -> "(…)"


def mechanism_of(verdict: str, diagnosis: Sequence[str] | None, problem: str = "") -> str:
    if verdict != FAIL:
        return "error: " + error_signature(problem)
    return diagnosis[0] if diagnosis else "unexplained"


def _op_versions(ids: Iterable[str]) -> str:
    byop: dict[str, set[int]] = {}
    for cid in ids:
        head = cid.split("/", 1)[0]
        op, v = head.rsplit("-", 1)
        byop.setdefault(op, set()).add(int(v))
    return "; ".join(f"{op}-" + ", -".join(str(v) for v in sorted(vs)) for op, vs in sorted(byop.items()))


def _op_of(case_id: str) -> str:
    return case_id.split("/", 1)[0].rsplit("-", 1)[0]


def _mechanism_slug(mech: str) -> str:
    if not mech.startswith("error: "):
        return slug(mech)
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", mech[len("error: "):])
    return slug("error-" + "-".join(words), 56)


def _example_key(case, families: set[str]) -> tuple:
    """Which failing case of a group shows it best: one of the families the deviation model names
    (where its witness lives), without empty tensors (they show little, and some runtimes fold them
    away), the fewest elements."""
    empty = any(np.size(o) == 0 for o in case.expected) or any(a is not None and a.value.size == 0
                                                              for a in case.inputs)
    return (bool(families) and case.family not in families, empty, _size(case))


def _size(case) -> int:
    n = sum(int(a.value.size) for a in case.inputs if a is not None)
    return n + sum(int(np.size(o)) for o in case.expected)


def characterised(mechanism: str, ids: Sequence[str], section: Mapping[str, Any] | None, limit: int = 3) -> list[str]:
    """The characterisation's sentences for a group of failures no model names: the descriptions of the
    (op version, types) groups its unexplained cases fall in, and of the error causes its cases
    raised (report.json's ``characterisation``)."""
    from qconform.diagnosis.characterise import relation_sentence

    if not section:
        return []
    mine, out = set(ids), []
    if mechanism == "unexplained":
        for g in section.get("groups") or ():
            if mine & set(g.get("unexplained") or ()):
                rel = (g.get("relations") or [None])[0]
                what = f" {relation_sentence(rel, g.get('related', g['deviating']))}" if rel else ""
                said = [d["sentence"] for d in (g.get("descriptions") or [])[:1]] or \
                    ([g["everything"]] if g.get("everything") else [])
                out += [f"{g['label']}: {s}{what}" for s in said]
    elif mechanism.startswith("error: "):
        for e in section.get("errors") or ():
            if mine & set(e.get("ids") or e.get("examples") or ()):
                out += [f"{e['cause']}: {d['sentence']}" for d in (e.get("descriptions") or [])[:1]]
    return out[:limit]


def observed_groups(runtime: str, failures: Sequence[Mapping[str, Any]], cases: Mapping[str, Any],
                    characterisation: Mapping[str, Any] | None = None) -> list[Group]:
    """Failing cases grouped by (op, mechanism); ``failures``: report.json failure entries (id,
    verdict, problem, and ``diagnosis`` where the case was diagnosed); ``cases``: the corpus cases
    by id (for sizes); ``characterisation``: the run's (report.json's), for what the failures no model
    names have in common. Keys are unique: a slug shared by two mechanisms gets a hash suffix."""
    from qconform.diagnosis.models import get

    members: dict[tuple[str, str], list[str]] = {}
    for f in failures:
        if f["id"] not in cases:
            continue
        mech = mechanism_of(f["verdict"], f.get("diagnosis"), f.get("problem", ""))
        members.setdefault((_op_of(f["id"]), mech), []).append(f["id"])
    keys: dict[str, list[tuple[str, str]]] = {}
    for op, mech in members:
        keys.setdefault(f"{op}-{_mechanism_slug(mech)}", []).append((op, mech))
    groups = []
    for key, owners in sorted(keys.items()):
        for op, mech in sorted(owners):
            ids = members[(op, mech)]
            k = key if len(owners) == 1 else f"{key}-{hashlib.sha256(mech.encode()).hexdigest()[:6]}"
            try:
                families = {f for name in mech.split("+") for f in get(name).families}
            except KeyError:
                families = set()
            ordered = sorted(ids, key=lambda i: (_example_key(cases[i], families), i))
            if mech.startswith("error: "):
                does, evidence, kind = f"the run raises `{mech[len('error: '):]}`", "", ERROR
            elif mech == "unexplained":
                does, evidence, kind = ("returns outputs that differ from the spec's; no deviation model of "
                                        "qconform/docs/diagnosis.md reproduces them"), "", FAIL
            else:
                try:
                    parts = [get(name) for name in mech.split("+")]
                except KeyError:
                    parts = []
                does = " ".join(p.explanation for p in parts) or mech
                evidence = " ".join(p.evidence for p in parts)
                kind = FAIL
            groups.append(Group(runtime, k, _op_versions(ids), mech, ordered, does, evidence=evidence, kind=kind,
                                cases=len(ids), case_ids=ordered[:5],
                                characterised=characterised(mech, ids, characterisation)))
    return groups


def load_report(path: Path, digest: str) -> tuple[str, list[dict], dict, dict | None]:
    """(runner name, failure entries, runner identity, characterisation) of a report.json written over
    the corpus with ``digest``."""
    path = Path(path)
    if path.is_dir():
        path = path / "report.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    got = data.get("corpus", {}).get("digest")
    if got != digest:
        raise ValueError(f"{path}: written over corpus {str(got)[:12]}, this corpus is {digest[:12]}: "
                         "rerun pytest --runner=NAME --report=DIR")
    from qconform.runner import runtime_name

    name = runtime_name(data["runner"])  # onnxruntime on an execution provider: that variant's name
    if "[" in name:
        raise ValueError(f"{path}: no script template for {name} (templates: {', '.join(TEMPLATES)})")
    return name, list(data.get("failures", ())), dict(data["runner"]), data.get("characterisation")

"""The comparison as data: every runtime's report read into scoreboard.json's rows."""
from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from qconform.apps.scoreboard._common import FORMAT, REPORT_FILES, _order
from qconform.report import certificate
from qconform.report.model import load
from qconform.runner import BUNDLED
from qconform.verdicts import DEVIATING, FAIL, INFO, PASS, UNSUPPORTED, Status


def found_reports(root: Path) -> list[str]:
    """Runner names with a ``root/NAME/report.json``."""
    return sorted((p.parent.name for p in root.glob("*/report.json")), key=_order)


def _inside(path: Path, folder: Path) -> bool:
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents


def _links(report_dir: Path, out: Path) -> dict[str, str]:
    """Relative links from the scoreboard to a runtime's report files (only when they sit inside
    the output folder: a link out of it would break once the folder is committed or moved)."""
    if not _inside(report_dir, out):
        return {}
    rel = Path(os.path.relpath(report_dir.resolve(), out.resolve())).as_posix()
    return {f: f"{rel}/{f}" for f in REPORT_FILES if (report_dir / f).is_file()}


def _diagnosis(report: Mapping[str, Any]) -> dict[str, Any]:
    """What the diagnosis said about the run's deviations (report.json ``failures`` and ``diagnosis``)."""
    failures = report.get("failures") or []
    names: Counter = Counter()
    steps: Counter = Counter()
    named = unnamed = undiagnosed = failing = failing_named = 0
    for f in failures:
        if f.get("verdict") == FAIL:  # outputs to explain (an error or a crash has none)
            failing += 1
            failing_named += bool(f.get("diagnosis"))
        diag = f.get("diagnosis")
        if diag is None:  # absent: not diagnosed (an error, a crash, --diagnose=off, the budget)
            undiagnosed += 1
        elif diag:
            named += 1
            names.update(dict.fromkeys(diag, 1))
        else:
            unnamed += 1
            steps[f.get("diagnosis_step") or "?"] += 1
    summary = report.get("diagnosis") or {}
    adds = {o["model"]: o.get("adds", 0) for o in summary.get("overall") or [] if "model" in o}
    models = [{"model": m, "cases": n, "adds": adds.get(m, 0)}
              for m, n in sorted(names.items(), key=lambda kv: (-kv[1], kv[0]))]
    return {"deviations": len(failures), "named": named, "unnamed": unnamed, "undiagnosed": undiagnosed,
            "failing": failing, "failing_named": failing_named,
            "models": models, "steps": dict(sorted(steps.items())),
            "errors": sum(e.get("cases", 0) for e in summary.get("errors") or [])}


def page_path(name: str) -> str:
    """Where a runtime's page goes, relative to the scoreboard folder."""
    return f"runtimes/{name}.md"


def certificate_path(name: str) -> str:
    """Where a runtime's machine-readable certificate goes, relative to the scoreboard folder."""
    return f"runtimes/{name}.certificate.json"


#: The certificate file's format tag (bump on an incompatible change).
CERTIFICATE_FORMAT = "qconform-certificate/1"


def _scopes(report: Mapping[str, Any], scoped: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per op version (``scoped``: ``certificate.scopes(report)``): its verdict word, its counts, and
    each deviating type combination with the deviation models that reproduce it (what a runtime's
    page shows: the certification report in the few KB a repository can keep; the full one is
    report.html)."""
    failures = {f["id"]: f for f in report.get("failures") or []}
    grouped: dict[str, dict[str, list[dict]]] = {}
    for c in report["cases"]:
        ov, types = c["id"].split("/")[:2]
        grouped.setdefault(ov, {}).setdefault(types, []).append(c)
    out = []
    for scope in scoped:
        ov = scope["op_version"]
        counts: Counter = Counter()
        bad = []
        for types, rows in sorted(grouped[ov].items()):
            counts.update(Status.DEVIATES if c["verdict"] in DEVIATING else c["verdict"] for c in rows)
            dev = [failures.get(c["id"], {"id": c["id"], "verdict": c["verdict"]}) for c in rows if c["verdict"] in DEVIATING]
            if not dev:
                continue
            models: Counter = Counter()
            for f in dev:
                diag = f.get("diagnosis")
                models.update(diag if diag else ["(unexplained)" if diag == [] else f"({f['verdict']}, not diagnosed)"])
            example = min(dev, key=lambda f: f["id"])
            bad.append({"types": types, Status.DEVIATES: len(dev), "ran": sum(c["verdict"] != UNSUPPORTED for c in rows),
                        "models": dict(sorted(models.items(), key=lambda kv: (-kv[1], kv[0]))),
                        "example": example["id"], "problem": _first_line(example.get("problem") or "")})
        out.append({"op_version": ov, "verdict": scope["verdict"],
                    "counts": {k: counts.get(k, 0) for k in (PASS, Status.DEVIATES, UNSUPPORTED, INFO)},
                    "deviating_types": bad})
    return out


#: The machine-readable certificate's row: one per op version (types "*") and per type combination.
CERTIFICATE_COLUMNS = ("op_version", "types", "verdict", "cases", PASS, Status.DEVIATES, "accepted", UNSUPPORTED, INFO)


def _verdicts(scope: Mapping[str, Any]) -> list[list[Any]]:
    """One op version's certificate rows: the op version as a whole ("*"), then each type
    combination (``certificate.verdict_of`` says what each verdict word means)."""
    def row(types: str, v: Mapping[str, Any]) -> list[Any]:
        return [scope["op_version"], types, v["verdict"], v["cases"], v[PASS], v["new"] + v["accepted"],
                v["accepted"], v[UNSUPPORTED], v[INFO]]

    return [row("*", scope), *(row(t["types"], t) for t in scope["types"])]


def _first_line(text: str, width: int = 160) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def _op_versions(report: Mapping[str, Any]) -> dict[tuple, dict[str, int]]:
    """(domain, op, opset, label) -> pass / deviate / unsupported, summed over the matrix cells."""
    rows: dict[tuple, Counter] = {}
    for cell in report.get("matrix") or []:
        key = (cell.get("domain") or "", cell.get("op") or "?", int(cell.get("opset") or 0), cell["op_version"])
        cnt = rows.setdefault(key, Counter())
        for verdict, n in (cell.get("counts") or {}).items():
            cnt[Status.DEVIATES if verdict in DEVIATING else verdict] += n
    return {k: {v: c[v] for v in (PASS, Status.DEVIATES, UNSUPPORTED)} for k, c in rows.items()}


def build(reports: Mapping[str, Mapping[str, Any]], links: Mapping[str, Mapping[str, str]] | None = None) -> dict:
    """The scoreboard as one JSON-able dict, from report dicts keyed by runner name."""
    links = links or {}
    names = sorted(reports, key=_order)
    rts, digests, per_ov = [], {}, {}
    for name in names:
        r = reports[name]
        who, c = r.get("runner") or {}, r["counts"]
        plat, _, _ = certificate.platforms(dict(r))  # where it ran elsewhere, the device's own, never this host's
        digest = (r.get("corpus") or {}).get("digest") or ""
        digests.setdefault(digest, []).append(name)
        scoped = certificate.scopes(dict(r))
        rts.append({
            "name": name,
            "runner": {k: who.get(k) for k in ("name", "version", "device", "options")},
            "platform": " ".join(str(x) for x in (plat.get("label") or plat.get("machine"), plat.get("system"),
                                                  plat.get("implementation"), plat.get("python")) if x),
            "qconform_version": r.get("qconform_version", ""),
            "corpus_digest": digest,
            "corpus_cases": (r.get("corpus") or {}).get("cases"),
            "selection": list((r.get("invocation") or {}).get("filters") or []),
            "complete": bool(r.get("complete")),
            "counts": {k: int(v) for k, v in sorted(c.items())},
            "diagnosis": _diagnosis(r),
            **({} if name in BUNDLED else {"command": _command(r)}),
            **_packing(r),
            "links": {"certificate": page_path(name), "certificate.json": certificate_path(name),
                      **dict(links.get(name) or {})},
            "overall": certificate.overall(r, scoped),
            "scopes": _scopes(r, scoped),
            "verdicts": [_verdicts(sc) for sc in scoped],
        })
        for key, cell in _op_versions(r).items():
            per_ov.setdefault(key, {})[name] = cell
    return {
        "format": FORMAT,
        "corpus": {"digests": {d: n for d, n in sorted(digests.items())}},
        "runtimes": rts,
        "op_versions": [{"op_version": key[3], "cells": cells} for key, cells in sorted(per_ov.items())],
    }


def _packing(report: Mapping[str, Any]) -> dict:
    """Whether the run was asked to pack (``certify --pack``, what ``qconform scoreboard`` runs), and
    what it did: how many cases' passes came from packed models, or why none could (a runtime is
    packed only where its facts file shows packing equivalent on that platform). Nothing for a run
    that was not asked (a scoreboard measured before the option keeps its bytes)."""
    p = (report.get("invocation") or {}).get("packing") or {}
    if not p.get("asked"):
        return {}
    return {"packing": {"used": bool(p.get("used")), "cases": int(p.get("cases") or 0), "why": str(p.get("why") or "")}}


def _command(report: Mapping[str, Any]) -> str:
    """How a row that is not a bundled runner's name was certified (an execution provider through
    the onnxruntime runner, a vendor's runner): the report's command as typed, its folder as DIR."""
    import re

    line = (report.get("invocation") or {}).get("command_line") or ""
    return re.sub(r"(--report[= ])\S+", r"\1DIR", line)


def merge(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict:
    """``old`` (a scoreboard.json) with the rows of ``new`` added or replacing its rows of the same
    name: a runtime measured elsewhere (another environment, a variant that cannot share this one's
    onnxruntime) joins the committed comparison without re-running the others."""
    names = {rt["name"] for rt in new["runtimes"]}
    rts = sorted([rt for rt in old["runtimes"] if rt["name"] not in names] + list(new["runtimes"]),
                 key=lambda rt: _order(rt["name"]))
    cells: dict[str, dict] = {}
    for ov in old["op_versions"]:
        cells[ov["op_version"]] = {k: v for k, v in ov["cells"].items() if k not in names}
    for ov in new["op_versions"]:
        cells.setdefault(ov["op_version"], {}).update(ov["cells"])
    digests: dict[str, list[str]] = {}
    for rt in rts:
        digests.setdefault(rt["corpus_digest"], []).append(rt["name"])
    order = [ov["op_version"] for ov in old["op_versions"]] + [ov["op_version"] for ov in new["op_versions"]]
    return {**old, "corpus": {"digests": dict(sorted(digests.items()))}, "runtimes": rts,
            "op_versions": [{"op_version": k, "cells": cells[k]} for k in dict.fromkeys(order)]}


def collect(root: Path, names: Iterable[str], out: Path) -> dict:
    """``build`` over the report directories ``root/NAME`` (read by ``qconform.report.model.load``)."""
    reports, links = {}, {}
    for name in names:
        reports[name] = load(root / name / "report.json")
        links[name] = _links(root / name, out)
    return build(reports, links)

"""The report model: report.json as one plain dict, built from per-case records and session metadata.

Everything downstream (HTML, Markdown, gating, ``qconform report diff``) reads this dict and never
a pytest object, so two report.json files are all a diff needs. The layout is described by
``schema.json`` beside this module (``SCHEMA_VERSION``); bump it on any incompatible change.
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

from qconform import dtypes

SCHEMA_VERSION = 1

#: Every verdict a case can carry in a report. ``crashed``/``timeout`` come from runner isolation,
#: ``not-run`` marks a collected case that produced no result (interrupted or stopped run).
VERDICTS = ("pass", "fail", "error", "crashed", "timeout", "unsupported", "not-run")
#: Verdicts that are deviations: they fail a run unless a baseline entry covers them.
BAD = frozenset({"fail", "error", "crashed", "timeout"})

#: A case row keeps this much of a runner's message (thousands of unsupported cases repeat one long
#: message); the failures list keeps up to FAILURE_PROBLEM_CHARS.
PROBLEM_CHARS = 240
FAILURE_PROBLEM_CHARS = 4000

#: Per-case fields copied from the plugin's record (the rest is derived here).
_CASE_FIELDS = ("id", "op", "domain", "opset", "types", "family", "clause", "verdict", "reading",
                "readings", "masked", "mismatches", "problem")


def op_version(r: Mapping[str, Any]) -> str:
    """``QuantizeLinear-21`` / ``com.microsoft.QuantizeLinear-1``: the heat map's row key."""
    prefix = f"{r['domain']}." if r.get("domain") else ""
    return f"{prefix}{r.get('op') or '?'}-{r.get('opset', '?')}"


def type_pair(r: Mapping[str, Any]) -> str:
    """Input data type → output type (``float32→int8``): the heat map's column key.

    The id's type signature starts with the data input's type; scale types, which the signature
    also names, are folded into the pair so the matrix stays readable.
    """
    types = r.get("types") or "?"
    outs = r.get("output_types") or []
    return f"{types.split('-')[0]}→{outs[0]}" if outs else types


def hex_bits(type_name: str | None, bits: int) -> str:
    """Raw bits as hex, zero-padded to the element type's width (``0x7f``, ``0x7c00``)."""
    try:
        width = max(1, (dtypes.get(type_name).bits + 3) // 4) if type_name else 1
    except (KeyError, LookupError, TypeError):
        width = 1
    return f"0x{bits:0{width}x}"


def cell_status(counts: Mapping[str, int]) -> str:
    """One colour class per heat-map cell: fail > error > pass/partial > unsupported > not-run."""
    if counts.get("fail"):
        return "fail"
    if any(counts.get(v) for v in BAD):
        return "error"
    if counts.get("pass"):
        return "partial" if counts.get("unsupported") else "pass"
    if counts.get("unsupported"):
        return "unsupported"
    return "not-run"


def _mismatches(rec: Mapping[str, Any]) -> list[dict]:
    names, types = rec.get("output_names") or [], rec.get("output_types") or []
    out = []
    for m in rec.get("first_mismatches") or []:
        t = types[names.index(m["output"])] if m["output"] in names else (types[0] if len(types) == 1 else None)
        out.append({**m, "index": list(m["index"]), "type": t,
                    "expected_hex": hex_bits(t, m["expected_bits"]), "actual_hex": hex_bits(t, m["actual_bits"])})
    return out


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _case_row(rec: Mapping[str, Any]) -> dict:
    row = {k: rec.get(k) for k in _CASE_FIELDS}
    row.update(readings=rec.get("readings") or 0, masked=rec.get("masked") or 0,
               mismatches=rec.get("mismatches") or 0, problem=_clip(rec.get("problem") or "", PROBLEM_CHARS),
               output_types=list(rec.get("output_types") or []), op_version=op_version(rec),
               type_pair=type_pair(rec), duration_s=round(float(rec.get("duration_s") or 0.0), 6),
               baseline=rec.get("baseline"))
    return row


def build(records: Iterable[Mapping[str, Any]], collected: Iterable[Mapping[str, Any]],
          meta: Mapping[str, Any]) -> dict:
    """The report dict.

    ``collected``: one stub per collected case (id and the case's static fields), in collection
    order; ``records``: the results that arrived, keyed by their ``id``. A collected case without
    a record gets verdict ``not-run`` and makes the report incomplete; a record for a case that
    was not collected (should not happen) is kept and shows up as ``reported > collected``.
    """
    results = {r["id"]: r for r in records}
    stubs = list(collected)
    cases, seen = [], set()
    for stub in stubs:
        rec = results.get(stub["id"]) or {**stub, "verdict": "not-run"}
        cases.append(_case_row({**stub, **rec}))
        seen.add(stub["id"])
    cases += [_case_row(r) for cid, r in results.items() if cid not in seen]

    totals = Counter(c["verdict"] for c in cases)
    counts = {"collected": len(stubs), "reported": len(cases),
              "ran": len(cases) - totals["not-run"], **{v: totals[v] for v in VERDICTS}}
    interrupted = bool(meta.get("interrupted"))
    complete = not interrupted and counts["not-run"] == 0 and counts["collected"] == counts["reported"]

    cells: dict[tuple, Counter] = defaultdict(Counter)
    followed: dict[str, Counter] = defaultdict(Counter)
    for c in cases:
        cells[(c["domain"] or "", c["op"] or "?", c["opset"] or 0, c["type_pair"])][c["verdict"]] += 1
        if c["readings"] > 1 and c["verdict"] == "pass" and c["reading"]:
            followed[c["op_version"]][c["reading"]] += 1
    matrix = [{"domain": d, "op": op, "opset": v, "op_version": op_version({"domain": d, "op": op, "opset": v}),
               "type_pair": tp, "counts": dict(sorted(cnt.items())), "status": cell_status(cnt)}
              for (d, op, v, tp), cnt in sorted(cells.items(), key=lambda kv: tuple(map(str, kv[0][:2])) + kv[0][2:])]
    readings = [{"op_version": ov, "cases": sum(cnt.values()), "matched": dict(cnt.most_common())}
                for ov, cnt in sorted(followed.items())]

    failures = []
    for c in cases:
        if c["verdict"] in BAD:
            rec = results.get(c["id"], {})
            failures.append({k: c[k] for k in ("id", "verdict", "op_version", "type_pair", "clause", "reading",
                                                 "mismatches", "masked", "problem", "baseline")}
                            | {"problem": _clip(rec.get("problem") or c["problem"], FAILURE_PROBLEM_CHARS),
                               "first_mismatches": _mismatches({**rec, "output_types": c["output_types"]})}
                            | ({"diagnosis": rec["diagnosis"]} if "diagnosis" in rec else {}))

    return {
        "schema_version": SCHEMA_VERSION,
        "qconform_version": meta.get("qconform_version", ""),
        "complete": complete,
        "interrupted": interrupted,
        "exit_status": meta.get("exit_status"),
        "runner": dict(meta.get("runner") or {}),
        "corpus": dict(meta.get("corpus") or {}),
        "platform": dict(meta.get("platform") or {}),
        "invocation": dict(meta.get("invocation") or {}),
        "timing": dict(meta.get("timing") or {}),
        "counts": counts,
        "gate": dict(meta.get("gate") or {}),
        "matrix": matrix,
        "readings_followed": readings,
        "failures": failures,
        "cases": cases,
    }


def schema() -> dict:
    """The JSON Schema of report.json (package data ``qconform/report/schema.json``)."""
    return json.loads(resources.files("qconform.report").joinpath("schema.json").read_text(encoding="utf-8"))


def dumps(report: Mapping[str, Any]) -> str:
    """report.json text: top level indented, one list element per line (small, and a line diff per case)."""
    parts = []
    for key, value in report.items():
        if isinstance(value, list) and value:
            body = ",\n  ".join(json.dumps(v, ensure_ascii=False, separators=(",", ":")) for v in value)
            parts.append(f'"{key}": [\n  {body}\n ]')
        else:
            parts.append(f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=False, separators=(',', ':'))}")
    return "{\n " + ",\n ".join(parts) + "\n}\n"

"""The report model: report.json as one plain dict, built from per-case records and session metadata.

Everything downstream (HTML, Markdown, gating, ``qconform report diff``) reads this dict and never
a pytest object, so two report.json files are all a diff needs. The layout is described by
``schema.json`` beside this module (``SCHEMA_VERSION``); bump it on any incompatible change.
"""
from __future__ import annotations

import functools
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from qconform import dtypes
from qconform.verdicts import DEVIATING, FAIL, INFO, NOT_RUN, PASS, UNSUPPORTED, VERDICTS, Status

SCHEMA_VERSION = 2


#: The failures list keeps a runner's message up to this many characters; a longer one is cut there
#: and kept whole, once per distinct text, in ``texts/<sha256>.txt`` beside report.json.
FAILURE_PROBLEM_CHARS = 4000
#: The same for a traceback, an unsupported reason and a diagnosis model's error: whatever a runner
#: raises, report.json stays small (a 6 MB message on every case once made it 433 MB).
TRACEBACK_CHARS = 8000
REASON_CHARS = 1000


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


def cell_status(counts: Mapping[str, int]) -> Status:
    """One colour class per heat-map cell: fail > error > pass/partial > unsupported > not-run."""
    if counts.get(FAIL):
        return Status.FAIL
    if any(counts.get(v) for v in DEVIATING):
        return Status.ERROR
    if counts.get(PASS):
        return Status.PARTIAL if counts.get(UNSUPPORTED) else Status.PASS
    if counts.get(UNSUPPORTED):
        return Status.UNSUPPORTED
    return Status.INFO if counts.get(INFO) else Status.NOT_RUN


def _mismatches(rec: Mapping[str, Any]) -> list[dict]:
    names, types = rec.get("output_names") or [], rec.get("output_types") or []
    out = []
    for m in rec.get("first_mismatches") or []:
        t = types[names.index(m["output"])] if m["output"] in names else (types[0] if len(types) == 1 else None)
        out.append({**m, "index": list(m["index"]), "type": t,
                    "expected_hex": hex_bits(t, m["expected_bits"]), "actual_hex": hex_bits(t, m["actual_bits"])})
    return out


@functools.lru_cache(maxsize=4096)  # a run repeats a few hundred reasons over thousands of cases
def reason_bucket(text: str) -> str:
    """One unsupported reason per cause: the numbers a runtime puts in generated names
    (``subgraph_12_0``, ``QuantizeLinear_token_7``) and long addresses become N, so a cause refused
    in every subgraph is one row, not dozens. The bucket's text is what the report shows."""
    text = re.sub(r"(?<=_)\d+", "N", text)
    return re.sub(r"\b0x[0-9a-fA-F]{6,}\b", "0xN", text)


def text_digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _bounded(text: str, n: int, texts: dict[str, str] | None) -> str:
    """``text`` when it is short; else its first ``n`` characters and where the whole text is kept
    (``texts``: digest -> text, written once each as ``texts/<digest>.txt``)."""
    if len(text) <= n:
        return text
    digest = text_digest(text)
    if texts is not None:
        texts[digest] = text
    tail = f"… [{len(text):,} characters; the whole text: texts/{digest}.txt]"
    return text[: max(0, n - len(tail))] + tail


def _case_row(rec: Mapping[str, Any]) -> dict:
    """A case's row: its id and verdict, and only what differs from the defaults. The case's static
    fields (op, version, types, family) are in its id; unsupported reasons are stored once, in
    ``reasons``, and referenced by index; a failure's details are in ``failures``."""
    row: dict[str, Any] = {"id": rec["id"], "verdict": rec.get("verdict", NOT_RUN)}
    readings = rec.get("readings") or 0
    if readings > 1:
        row["readings"] = readings
        if rec.get("reading"):
            row["reading"] = rec["reading"]
    for key in ("mismatches", "masked", "packed"):
        if rec.get(key):
            row[key] = rec[key]
    return row


def build(records: Iterable[Mapping[str, Any]], collected: Iterable[Mapping[str, Any]],
          meta: Mapping[str, Any], texts: dict[str, str] | None = None) -> dict:
    """The report dict.

    Runner texts (messages, tracebacks, reasons) longer than their cap are cut; where ``texts`` is
    given, each whole text is put there once, by its SHA-256, for the writer to keep beside it.

    ``collected``: one stub per collected case (id and the case's static fields), in collection
    order; ``records``: the results that arrived, keyed by their ``id``. A collected case without
    a record gets verdict ``not-run`` and makes the report incomplete; a record for a case that
    was not collected (should not happen) is kept and shows up as ``reported > collected``.
    """
    results = {r["id"]: r for r in records}
    stubs = list(collected)
    full, seen = [], set()  # whole records, for the matrix and the failures
    for stub in stubs:
        full.append({**stub, **(results.get(stub["id"]) or {"verdict": NOT_RUN})})
        seen.add(stub["id"])
    full += [r for cid, r in results.items() if cid not in seen]
    reasons: dict[str, int] = {}
    reason_counts: Counter = Counter()
    cases = []
    for rec in full:
        row = _case_row(rec)
        if row["verdict"] == UNSUPPORTED or (row["verdict"] == NOT_RUN and rec.get("problem")):
            text = reason_bucket(rec.get("problem") or "")
            row["reason"] = reasons.setdefault(text, len(reasons))  # one entry per cause
            reason_counts[text] += 1
        cases.append(row)

    totals = Counter(c["verdict"] for c in cases)
    counts = {"collected": len(stubs), "reported": len(cases),
              "ran": len(cases) - totals[NOT_RUN], **{v: totals[v] for v in VERDICTS}}
    interrupted = bool(meta.get("interrupted"))
    complete = (not interrupted and not meta.get("stopped") and counts[NOT_RUN] == 0
                and counts["collected"] == counts["reported"])

    cells: dict[tuple, Counter] = defaultdict(Counter)
    followed: dict[str, Counter] = defaultdict(Counter)
    for c in full:
        cells[(c.get("domain") or "", c.get("op") or "?", c.get("opset") or 0, type_pair(c))][c["verdict"]] += 1
        if (c.get("readings") or 0) > 1 and c["verdict"] == PASS and c.get("reading"):
            followed[op_version(c)][c["reading"]] += 1
    matrix = [{"domain": d, "op": op, "opset": v, "op_version": op_version({"domain": d, "op": op, "opset": v}),
               "type_pair": tp, "counts": dict(sorted(cnt.items())), "status": cell_status(cnt)}
              for (d, op, v, tp), cnt in sorted(cells.items(), key=lambda kv: tuple(map(str, kv[0][:2])) + kv[0][2:])]
    readings = [{"op_version": ov, "cases": sum(cnt.values()), "matched": dict(cnt.most_common())}
                for ov, cnt in sorted(followed.items())]

    failures = []
    for c in full:
        if c["verdict"] in DEVIATING:
            failures.append({"id": c["id"], "verdict": c["verdict"], "op_version": op_version(c),
                             "type_pair": type_pair(c), "clause": c.get("clause"), "reading": c.get("reading"),
                             "mismatches": c.get("mismatches") or 0, "masked": c.get("masked") or 0,
                             "problem": _bounded(c.get("problem") or "", FAILURE_PROBLEM_CHARS, texts),
                             "baseline": None, "first_mismatches": _mismatches(c)}
                            | ({"diagnosis": c["diagnosis"]} if "diagnosis" in c else {})
                            | ({"diagnosis_errors": [_bounded(e, REASON_CHARS, texts) for e in c["diagnosis_errors"]]}
                               if c.get("diagnosis_errors") else {})
                            | ({"diagnosis_step": c["diagnosis_step"]} if c.get("diagnosis_step") else {})
                            | ({"traceback": _bounded(c["traceback"], TRACEBACK_CHARS, texts)} if c.get("traceback") else {})
                            | ({"evidence": c["evidence"]} if c.get("evidence") else {}))

    return {
        "schema_version": SCHEMA_VERSION,
        "qconform_version": meta.get("qconform_version", ""),
        "complete": complete,
        "interrupted": interrupted,
        "stopped": meta.get("stopped"),
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
        "reasons": [{"text": _bounded(text, REASON_CHARS, texts), "cases": reason_counts[text]} for text in reasons],
        "cases": cases,
    }


class ReportError(Exception):
    """A file that is not a readable qconform report.json of a known schema version."""


def load(path: str | Path) -> dict:
    """A report.json, or the report directory holding it."""
    p = Path(path)
    p = p / "report.json" if p.is_dir() else p
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReportError(f"{p}: cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ReportError(f"{p}: not JSON: line {exc.lineno}: {exc.msg}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise ReportError(f"{p}: not a qconform report.json (no \"cases\" list)")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise ReportError(f"{p}: report schema_version {data.get('schema_version')!r}; this qconform reads "
                          f"{SCHEMA_VERSION}")
    return data


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

"""Characterisation: what the failures no deviation model explains have in common, in one sentence.

The diagnosis names a failure when a model reproduces it bit for bit; a deviation nobody has
modelled yet gets nothing from it. This describes it instead, from what the run's records carry:

* per (op, version, types) group with failing cases no model explains, the table of its elements
  (``features``): the deviating ones are the mismatching elements of those cases (the record's
  ``evidence``: index and actual code of each), the conforming ones the other elements of those
  cases and every element of up to ``Budget.passing`` of the group's passing cases. ``search``
  finds the simplest predicate that separates the two ("all 312 deviating elements, and none of
  the 4,021 conforming ones, are where the scale is a positive subnormal (exponent field 0)"), with
  its precision and recall; ``relations`` says what the deviating elements hold instead ("is zero
  where the expected value is not");
* across every such group at once (the same search over all their rows), for a deviation that
  shows in many op versions and types;
* failures with no elements to compare (another shape or element type) by their problem, and the
  cases of the group by case-level facts;
* errors (a runner that raises, crashes or hangs on a valid case): grouped by cause (the message
  without its numbers), each cause's cases against the cases of the same op versions that ran
  without it, by case-level facts (an empty tensor, a rank-0 scale, an attribute).

A failing case beyond the diagnosis budget (not diagnosed) counts as unexplained where no model
explains any failing case of its group, and is left out otherwise. Nothing is run again: the cases
are read from the corpus (``cases_of``) and the oracle's steps looked at (``probe``).
"""
from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from qconform import dtypes
from qconform.case import Case
from qconform.diagnosis.features import Features, Rows, concat
from qconform.diagnosis.relations import ranked, relate
from qconform.diagnosis.search import Description, describe
from qconform.verdicts import CRASHED, ERROR, FAIL, PASS, TIMEOUT

ERRORS = (ERROR, CRASHED, TIMEOUT)


@dataclass(frozen=True)
class Budget:
    """How much a characterisation reads: it must stay a small part of the run it describes."""

    passing: int = 48  # passing cases per group, as conforming elements
    failing_elements: int = 8192  # elements examined per output of a failing case (evenly spaced beyond)
    passing_elements: int = 2048  # ... of a passing case
    rows: int = 60_000  # rows of one group's table (each side thinned evenly beyond half of it)
    overall_rows: int = 60_000  # rows of the table across groups, likewise
    related: int = 4096  # deviating elements per case whose relation to the expected code is read
    contrast: int = 400  # cases an error cause is set against
    #: passing cases of each group of the same op versions without unexplained failures, and at most
    #: so many in all, set against every group's failures at once
    others_per_group: int = 4
    others: int = 256
    top: int = 3  # descriptions kept per table


ELEMENT_WORDS = {"unit": "element"}
#: Where elements were sampled (a large case, a large group): the counts are of those examined.
SAMPLED_WORDS = {"unit": "element", "deviating": "examined deviating", "conforming": "examined conforming"}


def report_section(records: Sequence[Mapping[str, Any]], cases_of: Callable[[Iterable[str]], Mapping[str, Case]],
                   diagnosis: Mapping[str, Any] | None, budget: Budget = Budget()) -> dict[str, Any]:
    """report.json's ``characterisation``: per group and across groups, the descriptions of the
    failures no model explains; per error cause, the descriptions of the cases that raise it."""
    t0 = time.perf_counter()
    groups = unexplained_groups(records, diagnosis)
    errors = error_causes(records)
    out: dict[str, Any] = {"groups": [], "overall": None, "errors": []}
    if not groups and not errors:
        return out
    by_id = {r["id"]: r for r in records}
    by_group: dict[tuple, list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        by_group[_key(r)].append(r)
    wanted: set[str] = set()
    chosen: dict[tuple, list[str]] = {}
    for key, ids in groups.items():
        chosen[key] = _passing(by_group[key], ids, budget.passing)
        wanted |= set(ids) | set(chosen[key])
    others = _others(by_group, groups, budget)
    wanted |= set(others)
    contrasts: dict[tuple, list[str]] = {}
    for cause, ids in errors.items():
        contrasts[cause] = _contrast(records, ids, budget.contrast)
        wanted |= set(ids) | set(contrasts[cause])
    try:
        cases = cases_of(sorted(wanted)) if wanted else {}
    except Exception as exc:  # noqa: BLE001 - advice only: the report is never lost to it
        out["problem"] = f"cases unreadable: {type(exc).__name__}: {exc}"
        return out
    feats = Features()
    tables: list[Rows] = []
    for key, ids in sorted(groups.items()):
        entry, rows = _group(key, [cases[i] for i in ids if i in cases], [cases[i] for i in chosen[key] if i in cases],
                             by_id, feats, budget)
        out["groups"].append(entry)
        if rows is not None:
            tables.append(rows)
    if len(tables) > 1:
        rows = _thin(concat(tables + [feats.case_rows(cases[i], None) for i in others if i in cases]),
                     budget.overall_rows)
        descs = describe(rows, feats.columns, budget.top)
        sampled = rows.n < sum(t.n for t in tables) or any(g.get("sampled") for g in out["groups"])
        out["overall"] = {"groups": len(tables), "deviating": int(rows.deviating.sum()),
                          "conforming": int(rows.n - rows.deviating.sum()), "other_passing_cases": len(others),
                          "sampled": sampled,
                          "descriptions": [d.to_json(feats.columns, **(SAMPLED_WORDS if sampled else ELEMENT_WORDS))
                                           for d in descs]}
    if any(g.get("structural") for g in out["groups"]):  # failures without elements: said by case facts
        failing = [cases[i] for ids in groups.values() for i in ids if i in cases]
        passing = [cases[i] for ids in chosen.values() for i in ids if i in cases] + \
            [cases[i] for i in others if i in cases]
        rows = concat([feats.case_rows(c, None, elements=False) for c in failing + passing])
        rows.deviating = np.array([True] * len(failing) + [False] * len(passing))
        said = out["overall"] or {"groups": len(groups), "descriptions": []}
        said["case_descriptions"] = [d.to_json(feats.columns, unit="case", deviating="unexplained failing",
                                               conforming="passing") for d in describe(rows, feats.columns, budget.top)]
        out["overall"] = said
    for (verdict, cause), ids in sorted(errors.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        out["errors"].append(_error(verdict, cause, [cases[i] for i in ids if i in cases],
                                    [cases[i] for i in contrasts[(verdict, cause)] if i in cases], ids, by_id, feats,
                                    budget))
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


# -- which failures ------------------------------------------------------------------------------
def _key(r: Mapping[str, Any]) -> tuple:
    return (r.get("domain") or "", r.get("op") or "", int(r.get("opset") or 0), r.get("types") or "")


def label(key: tuple) -> str:
    domain, op, opset, types = key
    return f"{domain + '.' if domain else ''}{op}-{opset} {types}"


def unexplained_groups(records: Sequence[Mapping[str, Any]], diagnosis: Mapping[str, Any] | None) -> dict[tuple, list[str]]:
    """(domain, op, opset, types) -> the failing cases no model explains there. Without a diagnosis
    section every failing case counts (a run with the diagnosis off still gets its description)."""
    if diagnosis and diagnosis.get("groups") is not None:
        out = {}
        for g in diagnosis["groups"]:
            ids = list(g.get("unexplained") or ())
            if not g.get("candidates"):
                ids += [i for i in g.get("undiagnosed") or () if i not in ids]
            if ids:
                out[(g.get("domain") or "", g["op"], int(g["opset"]), g["types"])] = ids
        if out or any(r.get("verdict") == FAIL and r.get("diagnosis") is not None for r in records):
            return out
    out = defaultdict(list)
    for r in records:
        if r.get("verdict") == FAIL and not r.get("diagnosis"):
            out[_key(r)].append(r["id"])
    return dict(out)


def _others(by_group: Mapping[tuple, Sequence[Mapping[str, Any]]], groups: Mapping[tuple, Any],
            budget: Budget) -> list[str]:
    """Passing cases of the groups of the same op versions that have no unexplained failure (their
    elements conform too): what sets a deviation in some types apart from the others."""
    ops = {k[:3] for k in groups}
    out: list[str] = []
    for key in sorted(by_group):
        if key in groups or key[:3] not in ops:
            continue
        out += [r["id"] for r in by_group[key] if r.get("verdict") == PASS][:budget.others_per_group]
    return out[:budget.others]


def _passing(records: Sequence[Mapping[str, Any]], failing: Sequence[str], n: int) -> list[str]:
    """Up to ``n`` passing cases of the group, those of the failing cases' families first."""
    families = {i.split("/")[2] for i in failing if i.count("/") >= 3}
    passing = [r["id"] for r in records if r.get("verdict") == PASS]
    return sorted(passing, key=lambda i: (i.split("/")[2] not in families if i.count("/") >= 3 else True, i))[:n]


# -- one group ------------------------------------------------------------------------------------
def deviating_elements(case: Case, record: Mapping[str, Any]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Output name -> (flat indices, actual codes) of a failing case's mismatching elements, from the
    record's evidence rows (output, index, inputs, expected, expected bits, actual, actual bits)."""
    rows = record.get("evidence") or ()
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, expected in zip(case.output_names, case.expected):
        mine = [r for r in rows if r[0] == name] if len(case.output_names) > 1 else rows
        if not mine:
            continue
        rank = expected.ndim
        if rank:
            idx = np.array(",".join(r[1] for r in mine).split(","), np.int64).reshape(-1, rank)
            if (idx >= np.array(expected.shape)).any() or (idx < 0).any():
                continue
            flat = np.ravel_multi_index(tuple(idx.T), expected.shape)
        else:
            flat = np.zeros(len(mine), np.int64)
        bits = np.array([int(r[6], 16) for r in mine], np.uint64)
        out[name] = (np.asarray(flat, np.int64), bits)
    return out


def _group(key: tuple, failing: list[Case], passing: list[Case], by_id: Mapping[str, Mapping[str, Any]],
           feats: Features, budget: Budget) -> tuple[dict, Rows | None]:
    entry: dict[str, Any] = {"domain": key[0], "op": key[1], "opset": key[2], "types": key[3], "label": label(key),
                             "unexplained": [c.id for c in failing], "passing_examined": 0}
    parts, relations, structural = [], Counter(), defaultdict(list)
    thinned, related = feats.thinned, 0
    for case in failing:
        rec = by_id[case.id]
        dev = deviating_elements(case, rec)
        if not dev:  # another shape or type, or nothing readable: said by its problem
            structural[_cause(rec.get("problem") or "no elements to compare")].append(case.id)
            continue
        chosen = next((r for r in case.readings if r.name == rec.get("reading")), case.readings[0])
        for name, (flat, bits) in dev.items():
            i = case.output_names.index(name)
            t = dtypes.get(chosen.outputs[i].dtype)
            few = _even(np.arange(len(flat)), budget.related)
            relations.update(relate(t, t.to_bits(chosen.outputs[i]).reshape(-1), flat[few], bits[few],
                                    _same_data(case, chosen.outputs[i], t)))
            related += len(few)
        parts.append(feats.case_rows(case, {k: v[0] for k, v in dev.items()}, rec.get("reading"),
                                     sample=budget.failing_elements))
    n = sum(p.n for p in parts)
    for case in passing:
        if n >= budget.rows:
            break
        if by_id[case.id].get("reading") not in (None, case.readings[0].name):
            continue  # passed by another reading: its values are not the first reading's (what ``probe`` sees)
        rows = feats.case_rows(case, None, sample=budget.passing_elements)
        parts.append(rows)
        n += rows.n
        entry["passing_examined"] += 1
    whole = concat(parts)
    rows = _thin(whole, budget.rows)
    d = int(rows.deviating.sum())
    entry["deviating"], entry["conforming"] = d, int(rows.n - d)
    entry["sampled"] = rows.n < whole.n or feats.thinned > thinned
    words = SAMPLED_WORDS if entry["sampled"] else ELEMENT_WORDS
    if d and d == rows.n:
        entry["everything"] = (f"Every one of the {d:,} compared elements of its {sum(p.n > 0 for p in parts)} "
                               "case(s) deviates: the group has no conforming element to set them against.")
    entry["descriptions"] = [x.to_json(feats.columns, **words) for x in describe(rows, feats.columns, budget.top)]
    entry["relations"] = [{"relation": k, "elements": v} for k, v in ranked(relations)]
    entry["related"] = related  # the deviating elements the relations were read on
    if structural:
        entry["structural"] = [{"problem": p, "cases": len(ids), "example": ids[0]} for p, ids in structural.items()]
        case_rows = concat([feats.case_rows(c, None, elements=False) for c in failing + passing])
        mark = {c.id for ids in structural.values() for c in failing if c.id in ids}
        case_rows.deviating = np.array([c.id in mark for c in failing + passing], bool)
        entry["case_descriptions"] = [x.to_json(feats.columns, unit="case", deviating="failing", conforming="passing")
                                      for x in describe(case_rows, feats.columns, budget.top)]
    return entry, (rows if d else None)


def _same_data(case: Case, output: np.ndarray, t: dtypes.ElemType) -> np.ndarray | None:
    """The codes of the case's first input of the output's type and shape, flat (what an op that does
    nothing would return), or None."""
    for a in case.inputs:
        if a is not None and a.type == t.name and a.value.shape == output.shape:
            return t.to_bits(a.value).reshape(-1)
    return None


def _thin(rows: Rows, limit: int) -> Rows:
    """At most ``limit`` rows: each side (deviating, conforming) beyond half of it thinned evenly,
    the room one side leaves given to the other."""
    if rows.n <= limit:
        return rows
    dev, conf = np.flatnonzero(rows.deviating), np.flatnonzero(~rows.deviating)
    half = limit // 2
    n_dev = min(len(dev), max(half, limit - len(conf)))
    n_conf = min(len(conf), limit - n_dev)
    keep = np.sort(np.concatenate([_even(dev, n_dev), _even(conf, n_conf)]))
    return Rows(len(keep), {k: v[keep] for k, v in rows.values.items()}, rows.deviating[keep])


def _even(idx: np.ndarray, n: int) -> np.ndarray:
    return idx if len(idx) <= n else idx[np.linspace(0, len(idx) - 1, n).astype(np.int64)]


# -- errors ---------------------------------------------------------------------------------------
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(\.\d+)?(e[-+]?\d+)?(?!\w)")
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]+\b")


def _cause(problem: str) -> str:
    """A runner's message as its cause: the line that says why, without the numbers that vary from
    case to case (shapes, sizes, addresses, node names' counters)."""
    from qconform.isolation import reason_line

    line = reason_line(problem) if problem.strip() else "no message"
    line = _ADDRESS.sub("0xN", line)
    return _NUMBER.sub("N", line)[:200]


def error_causes(records: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], list[str]]:
    """(verdict, cause) -> the ids of the cases a runner raised, crashed or hung on with it."""
    out: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in records:
        if r.get("verdict") in ERRORS:
            out[(str(r["verdict"]), _cause(r.get("problem") or ""))].append(r["id"])
    return dict(out)


def _contrast(records: Sequence[Mapping[str, Any]], ids: Sequence[str], n: int) -> list[str]:
    """Cases of the same op versions that ran and did not raise this (passed or failed), up to n,
    those of the same types first."""
    mine = set(ids)
    ops = {i.split("/")[0] for i in ids}
    types = {i.split("/")[1] for i in ids if "/" in i}
    pool = [r["id"] for r in records if r.get("verdict") in (PASS, FAIL) and r["id"].split("/")[0] in ops
            and r["id"] not in mine]
    return sorted(pool, key=lambda i: (i.split("/")[1] not in types, i))[:n]


def _error(verdict: str, cause: str, raising: list[Case], others: list[Case], ids: Sequence[str],
           by_id: Mapping[str, Mapping[str, Any]], feats: Features, budget: Budget) -> dict:
    entry = {"verdict": verdict, "cause": cause, "cases": len(ids), "examples": list(ids[:3]), "ids": list(ids),
             "message": (by_id[ids[0]].get("problem") or "")[:500] if ids else "",
             "op_versions": sorted({i.split("/")[0] for i in ids})}
    if raising and others:
        rows = concat([feats.case_rows(c, None, elements=False) for c in raising + others])
        rows.deviating = np.array([True] * len(raising) + [False] * len(others))
        entry["descriptions"] = [d.to_json(feats.columns, unit="case", deviating=f"{verdict}",
                                           conforming="non-" + verdict)
                                 for d in describe(rows, feats.columns, budget.top)]
    else:
        entry["descriptions"] = []
    return entry


def relation_sentence(relation: Mapping[str, Any], deviating: int) -> str:
    """"Each is zero where the expected value is not (312 of 312)."""
    n = relation["elements"]
    head = "Each" if n == deviating else f"{n:,} of the {deviating:,}"
    return f"{head} {relation['relation']}" + ("." if n == deviating else " (the most common relation).")


def lines(section: Mapping[str, Any] | None, per_group: int = 1) -> list[str]:
    """The characterisation as terminal or Markdown lines: across groups first, then each group's
    best description, then each error cause's."""
    if not section:
        return []
    out = []
    ov = section.get("overall")
    if ov and ov.get("descriptions"):
        out.append(f"across {ov['groups']} groups: {ov['descriptions'][0]['sentence']}")
    if ov and ov.get("case_descriptions"):
        out.append(f"across {ov['groups']} groups, by case: {ov['case_descriptions'][0]['sentence']}")
    for g in section.get("groups") or ():
        rel = g.get("relations") or []
        what = f" {relation_sentence(rel[0], g.get('related', g['deviating']))}" if rel else ""
        if g.get("everything"):
            out.append(f"{g['label']}: {g['everything']}{what}")
        for d in (g.get("descriptions") or [])[:per_group]:
            out.append(f"{g['label']}: {d['sentence']}{what}")
        for s in g.get("structural") or ():
            out.append(f"{g['label']}: {s['cases']} case(s): {s['problem']}")
    for e in section.get("errors") or ():
        d = (e.get("descriptions") or [None])[0]
        out.append(f"{e['cases']} case(s) {e['verdict']}: {e['cause']}" + (f" — {d['sentence']}" if d else ""))
    return out


__all__ = ["Budget", "Description", "deviating_elements", "error_causes", "lines", "relation_sentence",
           "report_section", "unexplained_groups"]

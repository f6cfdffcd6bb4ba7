"""``qconform report diff OLD NEW``: what regressed, what got fixed, what changed support status.

Works from two report.json files alone (a release branch's certification against a nightly's).
Cases are matched by id. Exit status 1 when anything regressed (a case that passed now deviates),
so a CI step can gate on it; 0 otherwise; 2 for a file that is not a qconform report.
"""
from __future__ import annotations

import json

from qconform.report.model import load
from qconform.verdicts import DEVIATING, FAIL, NOT_RUN, PASS, UNSUPPORTED

GOOD = PASS


def _kind(old: dict, new: dict) -> str | None:
    a, b = old["verdict"], new["verdict"]
    if a == GOOD and b in DEVIATING:
        return "regressed"
    if a in DEVIATING and b == GOOD:
        return "fixed"
    if (a == UNSUPPORTED) != (b == UNSUPPORTED) and NOT_RUN not in (a, b):
        return "support"
    if a != b or (a == FAIL and old.get("mismatches") != new.get("mismatches")):
        return "changed"
    return None


def diff(old: dict, new: dict) -> dict:
    """Lists of {id, old, new} per kind, plus added/removed ids and warnings on what differs."""
    o = {c["id"]: c for c in old["cases"]}
    n = {c["id"]: c for c in new["cases"]}
    out: dict = {k: [] for k in ("regressed", "fixed", "support", "changed")}
    for cid in sorted(o.keys() & n.keys()):
        kind = _kind(o[cid], n[cid])
        if kind:
            out[kind].append({"id": cid, "old": o[cid]["verdict"], "new": n[cid]["verdict"],
                              "old_mismatches": o[cid].get("mismatches", 0),
                              "new_mismatches": n[cid].get("mismatches", 0)})
    out["added"] = [{"id": cid, "new": n[cid]["verdict"]} for cid in sorted(n.keys() - o.keys())]
    out["removed"] = [{"id": cid, "old": o[cid]["verdict"]} for cid in sorted(o.keys() - n.keys())]
    warnings = []
    if old["corpus"].get("digest") != new["corpus"].get("digest"):
        warnings.append("the corpus differs between the reports (cases may have changed meaning)")
    for label, rep in (("old", old), ("new", new)):
        if not rep.get("complete", False):
            warnings.append(f"the {label} report is incomplete: {rep['counts'].get(NOT_RUN, '?')} case(s) not run")
    out["warnings"] = warnings
    return out


def _verdict(v: str, mismatches: int) -> str:
    return f"{v} ({mismatches} elements)" if v == FAIL and mismatches else v


def format_text(d: dict, old: dict, new: dict) -> str:
    def who(r: dict) -> str:
        return " ".join(str(x) for x in (r["runner"].get("name"), r["runner"].get("version")) if x)

    lines = [f"old: {who(old)} ({old['counts']['collected']} cases) → new: {who(new)} "
             f"({new['counts']['collected']} cases)"]
    lines += [f"warning: {w}" for w in d["warnings"]]
    titles = {"regressed": "regressed (passed before, deviates now)", "fixed": "fixed (deviated before, passes now)",
              "support": "support status changed", "changed": "other verdict changes"}
    for kind, title in titles.items():
        lines.append(f"{title}: {len(d[kind])}")
        lines += [f"  {e['id']}: {_verdict(e['old'], e['old_mismatches'])} → "
                  f"{_verdict(e['new'], e['new_mismatches'])}" for e in d[kind]]
    for kind, key in (("added", "new"), ("removed", "old")):
        if d[kind]:
            lines.append(f"{kind} cases: {len(d[kind])}")
            lines += [f"  {e['id']}: {e[key]}" for e in d[kind]]
    return "\n".join(lines)


def main(old_path: str, new_path: str, as_json: bool = False) -> int:
    old, new = load(old_path), load(new_path)
    d = diff(old, new)
    print(json.dumps(d, indent=1) if as_json else format_text(d, old, new))
    return 1 if d["regressed"] else 0

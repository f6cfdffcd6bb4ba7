"""``qconform baseline create|refresh``: a baseline file (``--baseline=FILE``) written from a report, and
refreshed from a later one.

``create`` writes one entry per op version, types and behaviour (``cases`` says how many it covered
then), one per case for failures no model names, and one per case and verdict for the rest, so
accepting one known bug never accepts another that appears beside it; ``refresh`` drops exactly the
entries the gate reports stale for a later report and lists (or, with ``--add-new``, adds) its new
deviations. The file itself -- its entries, how it is read and checked -- and the run's gate are
``qconform.gating.baseline``, which both front-ends read.
"""
from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any

from qconform.gating.baseline import (FORMAT_KEY, FORMAT_VERSION, PLACEHOLDER, BaselineError, Entry, parse, parse_entry,
                                      read_json, runner_of, stale_entries)
from qconform.record import UNNAMED, behaviour
from qconform.report.model import ReportError
from qconform.report.model import load as load_report
from qconform.verdicts import DEVIATING, FAIL


def read_report(path: str | Path) -> dict:
    """A report.json (or the report directory holding it)."""
    try:
        return load_report(path)
    except ReportError as exc:
        raise BaselineError(str(exc)) from None


def deviations(report: dict) -> list[str]:
    return sorted(c["id"] for c in report["cases"] if c.get("verdict") in DEVIATING)


def create(report: dict, reason: str | None = None, expires: str | None = None) -> dict:
    """A baseline accepting exactly the report's deviations (never unsupported ones): ``entries_for``
    every one of them."""
    if expires is not None:
        _dt.date.fromisoformat(expires)  # refuse a bad date now, not at the next run
    return {FORMAT_KEY: FORMAT_VERSION, **runner_of(report),
            "entries": entries_for(report, deviations(report), reason, expires)}



def entries_for(report: dict, ids: list[str], reason: str | None = None, expires: str | None = None) -> list[dict]:
    """Entries accepting these deviating cases of the report and no other behaviour: one per op
    version, types and diagnosis model (``OpVersion/types/*`` with ``diagnosis`` and ``cases``); a
    failure no model names (``none``), or one the report did not diagnose (a ``--diagnose-per-group``
    budget), gets an entry of its own id, as an error, a crash or a timeout does, with its verdict."""
    failures = {f["id"]: f for f in report.get("failures") or ()}
    verdicts = {c["id"]: c["verdict"] for c in report["cases"]}
    groups: dict[tuple[str, str | None, str], list[str]] = {}
    for cid in ids:
        named = behaviour(failures.get(cid, {})) if verdicts[cid] == FAIL else None
        if named is not None and named != UNNAMED:
            key = (cid.rsplit("/", 2)[0] + "/*", named, FAIL)
        else:
            key = (cid, named, verdicts[cid])
        groups.setdefault(key, []).append(cid)
    return [{"id": pattern, **({"diagnosis": named} if named is not None else {}),
             **({"cases": len(ids)} if named is not None and named != UNNAMED else {}),
             **({"verdict": verdict} if verdict != FAIL else {}),
             "reason": reason or PLACEHOLDER, **({"expires": expires} if expires else {})}
            for (pattern, named, verdict), ids in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or "", kv[0][2]))]


def undiagnosed(report: dict) -> list[str]:
    """The report's failures its diagnosis did not look at (a per-group budget): ``create`` can only
    accept them by case id, not by behaviour."""
    return sorted(f["id"] for f in report.get("failures") or () if f.get("verdict") == FAIL and behaviour(f) is None)


def refresh(data: dict, report: dict, *, add_new: bool = False, reason: str | None = None) -> tuple[dict, list, list]:
    """(refreshed file, dropped entries, new deviations). An entry is dropped when every case it
    matches in the report no longer deviates (fixed, or now unsupported); an entry matching no case
    of the report (a filtered run, a case gone from the corpus) is kept, since nothing shows it fixed.
    Kept entries keep their reason and expiry. New deviations are listed; with ``add_new`` they get
    entries (with ``reason`` or the placeholder the gate refuses)."""
    raw = data.get("entries", []) if isinstance(data, dict) else data
    runner, ran_by = (data.get("runner") if isinstance(data, dict) else None), runner_of(report).get("runner")
    if runner and ran_by and runner != ran_by:
        raise BaselineError(f"the baseline was written for runner {runner!r}, the report is of {ran_by!r}: "
                            f"refresh it from a report of {runner!r}")
    if not report.get("complete", True):
        raise BaselineError("the report is of a run that did not complete (stopped, interrupted or cases not "
                            "run): what it did not run shows nothing fixed; refresh from a complete run")
    parsed = [_entry_lenient(r, n) for n, r in enumerate(raw, 1)]
    named = {f["id"]: behaviour(f) for f in report.get("failures") or ()}
    filtered = bool((report.get("invocation") or {}).get("filters"))
    gone = {e.number: s for e, s in stale_entries(parsed, report, _dt.date.fromisoformat(
        (report.get("gate") or {}).get("today") or _dt.date.today().isoformat()), filtered)}
    kept, dropped = [], []
    for entry, raw_entry in zip(parsed, raw):
        if entry.number in gone:  # exactly the entries the gate reported stale for this report
            dropped.append({**raw_entry, "now": gone[entry.number]["why"]})
        else:
            kept.append(raw_entry)
    covered = [e for e in parsed if e.number not in gone]
    verdicts = {c["id"]: c["verdict"] for c in report["cases"]}
    new = [cid for cid in deviations(report) if not any(e.matches(cid, verdicts[cid], named.get(cid)) for e in covered)]
    if add_new:
        kept += entries_for(report, new, reason)
    return {FORMAT_KEY: FORMAT_VERSION, **({"runner": runner} if runner else {}), "entries": kept}, dropped, new


def _entry_lenient(raw: Any, n: int) -> Entry:
    """An entry for matching only: a placeholder reason is fine while refreshing."""
    if isinstance(raw, dict) and str(raw.get("reason", "")).strip() == PLACEHOLDER:
        raw = {**raw, "reason": "placeholder"}
    return parse_entry(raw, n, "<baseline>")


def dumps(data: dict) -> str:
    """One entry per line: a baseline reviews well in a diff."""
    lines = [json.dumps(e, ensure_ascii=False) for e in data["entries"]]
    body = ",\n    ".join(lines)
    head = f'{{"{FORMAT_KEY}": {FORMAT_VERSION}' + (f', "runner": {json.dumps(data["runner"])}' if data.get("runner") else "")
    return f'{head},\n "entries": [\n    {body}\n ]}}\n' if lines else f'{head}, "entries": []}}\n'


def main(args) -> int:
    """``qconform baseline create|refresh``."""
    import sys

    try:
        report = read_report(args.report)
        if args.baseline_cmd == "create":
            try:
                data = create(report, args.reason, args.expires)
            except ValueError:
                raise BaselineError(f"--expires {args.expires!r}: expected an ISO date like 2027-01-31") from None
            out = Path(args.output)
            out.write_text(dumps(data), encoding="utf-8")
            n = len(data["entries"])
            print(f"wrote {out}: {n} entr{'y' if n == 1 else 'ies'} from {args.report}")
            blind = undiagnosed(report)
            if blind:
                print(f"{len(blind)} failure(s) of the report were not diagnosed (a --diagnose-per-group budget): "
                      f"each is accepted by its own id, whatever its behaviour; certify with --diagnose-per-group 0 "
                      f"to accept them by behaviour")
            if n and not args.reason:
                print(f"each entry has the placeholder reason {PLACEHOLDER!r}; the gate refuses the file until "
                      f"every reason says why the deviation is accepted")
            return 0
        path = Path(args.baseline)
        try:
            data = read_json(path.read_text(encoding="utf-8"), path)
        except OSError as exc:
            raise BaselineError(f"baseline file {path}: {exc.strerror or exc}") from None
        parse(data if not isinstance(data, dict) else {**data, "entries": [
            {**e, "reason": "placeholder"} if isinstance(e, dict) and e.get("reason") == PLACEHOLDER else e
            for e in data.get("entries", [])]}, str(path))  # malformed entries: one clear line
        refreshed, dropped, new = refresh(data, report, add_new=args.add_new, reason=args.reason)
        out = Path(args.output or path)
        out.write_text(dumps(refreshed), encoding="utf-8")
        print(f"wrote {out}: kept {len(refreshed['entries']) - (len(new) if args.add_new else 0)}, "
              f"dropped {len(dropped)}, {len(new)} new deviation(s)" + (" added" if args.add_new and new else ""))
        for d in dropped:
            print(f"  dropped  {d['id']}  (now {d['now']}; reason was: {d.get('reason')})")
        for cid in new:
            print(f"  new      {cid}")
        if new and not args.add_new:
            print("new deviations are not in the baseline: fix them, or add them with --add-new")
        return 0
    except BaselineError as exc:
        print(f"qconform: {exc}", file=sys.stderr)
        return 2


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="baseline_cmd", required=True)
    c = sub.add_parser("create", help="a baseline accepting every deviation of a report")
    c.add_argument("report", help="report.json, or the report directory")
    c.add_argument("-o", "--output", default="baseline.json", help="file to write (default baseline.json)")
    c.add_argument("--reason", default=None, help="the reason for every entry (default: a placeholder the gate "
                                                  "refuses until you replace it)")
    c.add_argument("--expires", default=None, metavar="YYYY-MM-DD", help="expiry date for every entry")
    r = sub.add_parser("refresh", help="drop the entries a later report shows fixed; list new deviations")
    r.add_argument("baseline", help="the baseline file")
    r.add_argument("report", help="report.json of a later run, or its directory")
    r.add_argument("-o", "--output", default=None, help="file to write (default: the baseline file itself)")
    r.add_argument("--add-new", action="store_true", help="also add entries for new deviations")
    r.add_argument("--reason", default=None, help="with --add-new: the reason for the added entries")

"""Known deviations a run may carry without failing (``--baseline=FILE``), and the run's gate.

A vendor ships with some known bugs; CI should fail on *new* deviations only, and the list of
known ones must stay honest: every entry names a reason, may expire, and entries that no longer
match a failure are reported as stale. The file is JSON (read by the standard library, reviews
well in a diff)::

    {"qconform_baseline": 1,
     "entries": [
       {"id": "QuantizeLinear-23/float16-float8e5m2fnuz/*", "reason": "ORT saturates to ±max, not NaN",
        "expires": "2027-06-30"},
       {"id": "DequantizeLinear-21/int4-float32/basic/per-axis", "reason": "vendor bug 1234"}]}

``id`` is a case id or an ``fnmatch`` glob over the whole id (``*`` also crosses ``/``). An entry
covers the deviating verdicts (fail, error, crashed, timeout), never ``unsupported``. An entry
whose ``expires`` date (ISO, inclusive) has passed covers nothing and fails the run by itself.
"""
from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from qconform.report.model import BAD

FORMAT_KEY = "qconform_baseline"
FORMAT_VERSION = 1


class BaselineError(Exception):
    """The baseline file is missing or malformed: one line naming the file and the entry."""


@dataclass(frozen=True)
class Entry:
    pattern: str
    reason: str
    expires: _dt.date | None = None
    number: int = 0  # 1-based position in the file, for messages

    def matches(self, case_id: str) -> bool:
        return case_id == self.pattern or fnmatchcase(case_id, self.pattern)

    def expired(self, today: _dt.date) -> bool:
        return self.expires is not None and today > self.expires

    def as_dict(self) -> dict[str, Any]:
        return {"entry": self.number, "id": self.pattern, "reason": self.reason,
                "expires": self.expires.isoformat() if self.expires else None}


@dataclass(frozen=True)
class Baseline:
    path: str
    entries: tuple[Entry, ...]

    def live_match(self, case_id: str, today: _dt.date) -> Entry | None:
        """The first unexpired entry covering this case id, if any."""
        return next((e for e in self.entries if not e.expired(today) and e.matches(case_id)), None)


def _entry(raw: Any, n: int, where: str) -> Entry:
    if not isinstance(raw, dict):
        raise BaselineError(f"{where}: entry {n} is {type(raw).__name__}, not an object with id and reason")
    unknown = sorted(set(raw) - {"id", "reason", "expires"})
    if unknown:
        raise BaselineError(f"{where}: entry {n} has unknown key(s) {unknown}; allowed: id, reason, expires")
    pattern, reason = raw.get("id"), raw.get("reason")
    if not isinstance(pattern, str) or not pattern:
        raise BaselineError(f"{where}: entry {n} needs \"id\": a case id or glob pattern")
    if not isinstance(reason, str) or not reason.strip():
        raise BaselineError(f"{where}: entry {n} ({pattern}) needs a non-empty \"reason\"")
    expires = raw.get("expires")
    if expires is not None:
        try:
            expires = _dt.date.fromisoformat(expires)
        except (TypeError, ValueError):
            raise BaselineError(f"{where}: entry {n} ({pattern}): expires {expires!r} is not an ISO date "
                                f"like 2027-01-31") from None
    return Entry(pattern, reason.strip(), expires, n)


def parse(data: Any, where: str = "<baseline>") -> Baseline:
    if isinstance(data, dict):
        if data.get(FORMAT_KEY) != FORMAT_VERSION:
            raise BaselineError(f"{where}: expected \"{FORMAT_KEY}\": {FORMAT_VERSION} at the top level")
        data = data.get("entries")
    if not isinstance(data, list):
        raise BaselineError(f"{where}: expected {{\"{FORMAT_KEY}\": {FORMAT_VERSION}, \"entries\": [...]}} "
                            f"or a list of entries")
    return Baseline(where, tuple(_entry(raw, n, where) for n, raw in enumerate(data, 1)))


def load(path: str | Path) -> Baseline:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise BaselineError(f"baseline file {p} cannot be read: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(f"baseline file {p} is not JSON: line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    return parse(data, str(p))


def gate(report: dict, baseline: Baseline | None, today: _dt.date, *, min_cases: int = 0,
         filtered: bool = False) -> dict:
    """Decide the run's gate from a report; marks covered cases/failures with their entry's reason.

    Fails on: deviations no live entry covers, expired entries, fewer collected cases than
    ``min_cases``. Stale entries (matching no deviation in this run) are listed, not failed on.
    """
    used: dict[int, list[str]] = {}
    new = []
    for case in report["cases"]:
        entry = baseline.live_match(case["id"], today) if baseline else None
        if case["verdict"] in BAD:
            if entry:
                case["baseline"] = entry.reason
                used.setdefault(entry.number, []).append(case["id"])
            else:
                new.append(case["id"])
    reasons = {c["id"]: c["baseline"] for c in report["cases"] if c.get("baseline")}
    for f in report["failures"]:
        f["baseline"] = reasons.get(f["id"])

    expired, stale = [], []
    for e in baseline.entries if baseline else ():
        if e.expired(today):
            expired.append(e.as_dict())
        elif e.number not in used:
            matching = [c for c in report["cases"] if e.matches(c["id"])]
            why = ("matches no case in this run" + (" (the run was filtered)" if filtered else "")
                   if not matching else
                   "its cases now " + "/".join(sorted({c["verdict"] for c in matching})))
            stale.append({**e.as_dict(), "why": why, "cases": len(matching)})

    collected = report["counts"]["collected"]
    messages = []
    if new:
        messages.append(f"{len(new)} deviation(s) not covered by " + (f"baseline {baseline.path}" if baseline
                                                                        else "a baseline"))
    for e in expired:
        messages.append(f"baseline entry {e['entry']} ({e['id']}) expired on {e['expires']}: "
                        f"fix the deviation or renew the entry with a new date and reason")
    floor_ok = collected >= min_cases
    if not floor_ok:
        messages.append(f"only {collected} case(s) collected, fewer than the floor of {min_cases} "
                        f"(--min-cases): a generator or a selection filter may be broken")
    return {
        "passed": not new and not expired and floor_ok,
        "baseline": baseline.path if baseline else None,
        "today": today.isoformat(),
        "new_failures": new,
        "baselined": sum(len(v) for v in used.values()),
        "expired": expired,
        "stale": stale,
        "min_cases": min_cases,
        "floor_ok": floor_ok,
        "messages": messages,
    }

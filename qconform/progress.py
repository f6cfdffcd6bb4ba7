"""What a long run keeps while it goes, whatever it runs (corpus cases, sweep units): the resumable
state file and the progress line.

``StateFile``: every finished item's record, one JSON line each, written as it arrives, under a
header naming the run (corpus, runner, options...). A run stopped part way (Ctrl-C, a lost client, a
machine gone) restarts with the same command and reads back what was done; a file written by another
run is refused, never mixed in. ``Progress``: one line on stderr.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Callable


class StateError(Exception):
    """A state file written by another run: one line naming it."""


class StateFile:
    """``--state FILE`` (see the module docstring); ``key``: what makes two runs the same run."""

    def __init__(self, path: Path, fmt: str, key: dict) -> None:
        self.path, self.format = Path(path), fmt
        self.key = json.loads(json.dumps(key, sort_keys=True, default=str))
        self._fh = None

    def load(self, key_of: Callable[[dict], str]) -> dict[str, dict]:
        """Every record of an earlier run of this one, by ``key_of(record)``."""
        if not self.path.exists():
            return {}
        done = {}
        with self.path.open(encoding="utf-8") as fh:
            try:
                head = json.loads(fh.readline() or "{}")
            except ValueError:
                head = {}
            if head.get("format") != self.format or head.get("key") != self.key:
                raise StateError(f"--state {self.path}: written by another run (another corpus, runner or options); "
                                 "remove it or give another file")
            for line in fh:
                try:
                    rec = json.loads(line)
                    done[key_of(rec)] = rec
                except (ValueError, KeyError, TypeError):  # the last line of a run killed mid-write
                    continue
        return done

    def append(self, record: dict[str, Any]) -> None:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fresh = not self.path.exists() or self.path.stat().st_size == 0
            self._fh = self.path.open("a", encoding="utf-8")
            if fresh:
                self._fh.write(json.dumps({"format": self.format, "key": self.key}, sort_keys=True) + "\n")
        self._fh.write(json.dumps(record, default=str) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def code_digest() -> str:
    """qconform's own code, as one SHA-256 over every module of the package (docs/ aside): a state
    file keeps verdicts judged by this code (its comparison, its diagnosis), so one written by another
    build is refused rather than read back under this build's name. The version alone does not move."""
    import hashlib

    package = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*.py") if "docs" not in p.relative_to(package).parts):
        h.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


class Progress:
    """One line on stderr, rewritten at most twice a second (a terminal) or every 10 % (a log):
    items done, how many deviate, the time so far; with a weight (a sweep's inputs), the rate and
    the time left."""

    def __init__(self, total: int, label: str, noun: str = "cases", *, weight: int = 0,
                 weight_noun: str = "inputs", stream=None) -> None:
        self.total, self.label, self.noun = total, label, noun
        self.total_weight, self.weight_noun = weight, weight_noun
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.n = self.bad = self.weight = 0
        self.t0 = self.last = time.perf_counter()
        self.next_mark = 0.1

    def step(self, deviating: bool = False, weight: int = 0) -> None:
        self.n += 1
        self.bad += bool(deviating)
        self.weight += weight
        now = time.perf_counter()
        if (self.tty and now - self.last >= 0.5) or (not self.tty and self.n >= self.next_mark * self.total):
            self.last = now
            while self.next_mark * self.total <= self.n and self.next_mark <= 1.0:
                self.next_mark += 0.1
            self._write(now)

    def _write(self, now: float) -> None:
        seconds = now - self.t0
        line = (f"{self.label}: {self.n:,} of {self.total:,} {self.noun} ({100 * self.n // max(self.total, 1)}%), "
                f"{self.bad:,} deviating, {seconds:.0f} s")
        if self.total_weight:
            rate = self.weight / max(seconds, 1e-9)
            left = (self.total_weight - self.weight) / rate if rate else float("inf")
            line += f", {rate / 1e6:,.1f} M {self.weight_noun}/s, ETA {_hms(left)}"
        self.stream.write(("\r" + line) if self.tty else (line + "\n"))
        self.stream.flush()

    def done(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _hms(sec: float) -> str:
    if sec == float("inf"):
        return "?"
    sec = int(sec)
    return f"{sec // 3600}:{sec % 3600 // 60:02d}:{sec % 60:02d}"


__all__ = ["Progress", "StateError", "StateFile"]

"""The scoreboard regenerated end to end: `qconform scoreboard --reports DIR --out DIR` over every
installed runtime (or `--runners A,B`), its wall time against the 15-minute goal, and each runtime's
share (its certification's own seconds, from the scoreboard's "NAME: finished in N s" lines).
Prints; asserts nothing. Runs for as long as the runtimes take (tens of minutes on 2 cores).

    python benchmarks/bench_scoreboard.py [--runners A,B] [--keep DIR]
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402

GOAL_S = 15 * 60
FINISHED = re.compile(r"^(?P<name>\S+): finished in (?P<s>\d+) s: (?P<what>.*)$")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runners", default=None, help="comma-separated runtimes (default: every installed one)")
    ap.add_argument("--keep", default=None, help="write the reports and the board here (default: a temporary directory)")
    args = ap.parse_args()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="qconform-bench-scoreboard-"))
    cmd = [_common.python(), "-m", "qconform.cli", "scoreboard", "--reports", str(root / "reports"),
           "--out", str(root / "board"), *(["--runners", args.runners] if args.runners else [])]
    print(f"machine: {_common.machine()}")
    print(f"command: {' '.join(cmd[1:])}", flush=True)
    wall, rss, rc, out = _common.run_child(cmd, echo=True)
    shares = [(m["name"], int(m["s"]), m["what"]) for m in map(FINISHED.match, out.splitlines()) if m]
    for line in out.splitlines():
        if ": skipped: " in line or ": no report after " in line:
            print(f"  {line}")
    own = sum(s for _, s, _ in shares) or 1
    for name, s, what in sorted(shares, key=lambda t: -t[1]):
        print(f"  {name:<24} {s:>6} s  {100 * s / own:5.1f} %   {what}")
    verdict = ("met" if wall <= GOAL_S and rc == 0 else "not met") if not args.runners else \
        "not judged (the goal is every installed runtime; this was --runners)"
    print(f"scoreboard end to end: {wall:.0f} s wall ({wall / 60:.1f} min), exit {rc}, peak RSS {rss:.0f} MiB; "
          f"goal <= {GOAL_S // 60} min: {verdict}")
    print(f"reports and board in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

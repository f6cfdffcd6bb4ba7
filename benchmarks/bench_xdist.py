"""pytest-xdist speed-up: the default corpus against onnxruntime with `-n 2` vs one process, on the
same machine in one run, with isolation on (the default: one process already runs its runner in two
worker processes beside pytest) and off (pytest and the runner in one process); and, without xdist,
one process with one runner worker vs two (`--runner-workers`), the way qconform itself uses a
second core. Prints figures, asserts nothing. Goal (issue 45): -n 2 not slower than one process.
Since 2026-11-27 ``-n N`` with no test paths runs the corpus on N runner workers in one pytest
process (qconform.plugin.options.take_over_xdist) where isolation is on.

    python benchmarks/bench_xdist.py [--runner onnxruntime]
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runner", default="onnxruntime")
    a = ap.parse_args()
    print(f"machine: {_common.machine()}")
    plans = {
        "--isolate=on": (("1 process", ["--isolate=on"]), ("-n 2", ["--isolate=on", "-n", "2"])),
        "--isolate=off": (("1 process", ["--isolate=off"]), ("-n 2", ["--isolate=off", "-n", "2"])),
        "runner workers": (("1 process", ["--isolate=on", "--runner-workers=1"]),
                           ("2 workers", ["--isolate=on", "--runner-workers=2"])),
    }
    for name, (base, other) in plans.items():
        res = {}
        for label, extra in (base, other):
            wall, rss, rc, out = _common.run_child([_common.python(), "-m", "pytest", f"--runner={a.runner}", "-q",
                                                   "-p", "no:cacheprovider", *extra])
            tail = [ln for ln in out.splitlines() if re.search(r"\d+ (passed|failed|skipped)", ln)]
            res[label] = wall
            print(f"{' '.join(extra):38} {wall:7.1f} s wall, peak RSS {rss:6.0f} MiB, exit {rc}: "
                  f"{tail[-1].strip('= ') if tail else '?'}")
        print(f"{name}: speed-up {other[0]} = {res[base[0]] / res[other[0]]:.2f}  (goal: >= 1.0, not slower)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

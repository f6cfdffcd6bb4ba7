"""pytest-xdist speed-up: the default corpus against onnxruntime with `-n 2` vs one process, on the
same machine in one run. Prints figures, asserts nothing. Goal: speed-up >= 1.7 on 2 cores.

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
    res = {}
    for label, extra in (("1 process", []), ("-n 2", ["-n", "2"])):
        wall, rss, rc, out = _common.run_child([_common.python(), "-m", "pytest", f"--runner={a.runner}", "-q",
                                               "-p", "no:cacheprovider", *extra])
        tail = [ln for ln in out.splitlines() if re.search(r"\d+ (passed|failed|skipped)", ln)]
        res[label] = wall
        print(f"{label:10} {wall:7.1f} s wall, peak RSS {rss:6.0f} MiB (controller), exit {rc}: "
              f"{tail[-1] if tail else '?'}")
    print(f"speed-up -n 2 = {res['1 process'] / res['-n 2']:.2f}  (goal >= 1.7)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

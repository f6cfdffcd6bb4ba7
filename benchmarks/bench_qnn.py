"""The QNN HTP certification's wall time (``qconform certify --runner onnxruntime-qnn``): its declared
scope (the QDQ patterns and QLinearMatMul) and the pattern corpus alone, on this machine's cores.
Prints figures, asserts nothing. Target: the whole pattern corpus on QNN in <= 20 minutes on 2 cores.

    python benchmarks/bench_qnn.py [-j 2]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-j", type=int, default=2)
    a = ap.parse_args()
    print(f"machine: {_common.machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        for label, sel in (("patterns", ["--case", "qdq.*"]), ("declared scope", [])):
            out = Path(tmp) / label.replace(" ", "-")
            wall, rss, rc, text = _common.run_child([_common.python(), "-m", "qconform.cli", "certify", "--runner",
                                                     "onnxruntime-qnn", "-j", str(a.j), "--report", str(out), *sel])
            if rc not in (0, 1):
                raise SystemExit(f"{label}: exit {rc}\n{text[-3000:]}")
            c = json.loads((out / "report.json").read_text())["counts"]
            print(f"{label:15s} {wall:7.1f} s  {c['collected']:,} cases: {c['pass']:,} pass, {c['fail']:,} fail, "
                  f"{c['unsupported']:,} unsupported, {c['error']:,} error  (peak RSS {rss:.0f} MiB)")
    print("target: the pattern corpus <= 20 minutes on 2 cores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

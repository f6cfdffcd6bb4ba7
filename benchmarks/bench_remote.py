"""``qconform certify`` through a device worker over loopback against the same runner in-process
workers, the same slice and worker count, one run each (children, as typed). Prints figures and the
ratio, asserts nothing. Target: remote over loopback <= 1.25x the local certify time.

    python benchmarks/bench_remote.py [--runner onnxruntime] [--case GLOB ...] [-j 2]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runner", default="onnxruntime")
    ap.add_argument("--case", action="append", default=None, help="case globs (default: the whole corpus)")
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1,
                    help="alternate local and remote runs this many times and keep each one's fastest "
                         "(on a shared machine the background load moves between runs)")
    a = ap.parse_args()
    sel = [w for c in (a.case or []) for w in ("--case", c)]
    print(f"machine: {_common.machine()}")
    worker = subprocess.Popen([_common.python(), "-m", "qconform.cli", "worker", "--runner", a.runner, "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = worker.stdout.readline()
        port = line.split(" on 127.0.0.1:")[1].split()[0]
        with tempfile.TemporaryDirectory() as tmp:
            times, verdicts = {}, {}
            for _ in range(max(1, a.repeat)):
                for label, runner in (("local", a.runner), ("remote", f"remote:127.0.0.1:{port}")):
                    out = Path(tmp) / label
                    wall, _, rc, text = _common.run_child([_common.python(), "-m", "qconform.cli", "certify",
                                                           "--runner", runner, "--report", str(out), "-j", str(a.j),
                                                           *sel])
                    if rc not in (0, 1):
                        raise SystemExit(f"{label}: exit {rc}\n{text[-3000:]}")
                    rep = json.loads((out / "report.json").read_text())
                    times[label] = min(wall, times.get(label, wall))
                    verdicts[label] = {c["id"]: c["verdict"] for c in rep["cases"]}
                    print(f"{label:7s} {wall:6.1f} s  ({rep['counts']['collected']} cases, {rep['counts']['pass']} pass)")
            print(f"remote over loopback / local: {times['remote'] / times['local']:.2f}x (target <= 1.25x)")
            print(f"same verdicts: {verdicts['remote'] == verdicts['local']}")
    finally:
        worker.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

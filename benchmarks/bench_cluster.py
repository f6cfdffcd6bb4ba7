"""``qconform certify`` of a compile-heavy runtime on a Dask LocalCluster against the local executor,
the same slice, one run each, as ``qconform certify`` is typed (a child process each): local -j 2,
Dask with 1 worker, Dask with 2 workers. Prints figures and ratios, asserts nothing.

Targets: Dask 1 -> 2 workers >= 1.8x; Dask 2 workers vs local -j 2 <= +10 %.

    python benchmarks/bench_cluster.py [--runner tvm] [--case 'DequantizeLinear-2*' ...]

The default slice is TVM on DequantizeLinear-21 ... -28: about 8,000 cases, of which TVM compiles and
runs about 970 (each its own model: the compile-heavy part); the rest it refuses at import.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402


def _certify(runner: str, cases: list[str], report: Path, *where: str) -> tuple[float, dict]:
    cmd = [_common.python(), "-m", "qconform.cli", "certify", "--runner", runner, "--report", str(report), *where]
    for c in cases:
        cmd += ["--case", c]
    wall, _, rc, out = _common.run_child(cmd)
    if rc not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {rc}:\n{out[-3000:]}")
    return wall, json.loads((report / "report.json").read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runner", default="tvm")
    ap.add_argument("--case", action="append", default=None, help="case globs (default: DequantizeLinear-21 ... -28)")
    a = ap.parse_args()
    cases = a.case or ["DequantizeLinear-2*"]
    print(f"machine: {_common.machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        runs = {}
        for label, where in (("local -j 2", ["-j", "2"]), ("dask 1 worker", ["--cluster", "local:1"]),
                             ("dask 2 workers", ["--cluster", "local:2"])):
            runs[label] = _certify(a.runner, cases, Path(tmp) / label.replace(" ", "_"), *where)
            wall, rep = runs[label]
            c = rep["counts"]
            print(f"{label:15s} {wall:7.1f} s  ({c['collected']} cases: {c['pass']} pass, {c['fail']} fail, "
                  f"{c['unsupported']} unsupported)")
        verdicts = {k: {x["id"]: x["verdict"] for x in rep["cases"]} for k, (_, rep) in runs.items()}
        same = all(v == verdicts["local -j 2"] for v in verdicts.values())
        one, two, local = runs["dask 1 worker"][0], runs["dask 2 workers"][0], runs["local -j 2"][0]
        print(f"Dask 1 -> 2 workers: {one / two:.2f}x (target >= 1.8x)")
        print(f"Dask 2 workers vs local -j 2: {100 * (two / local - 1):+.1f} % (target <= +10 %)")
        print(f"same verdicts in all three runs: {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Packing: ``qconform certify --runner onnxruntime --pack`` against the same run unpacked and against
onnxruntime's own single-node time (session creation + run per case model, measured here as
``bench_suite_overhead.py`` does), whole corpus, one run each, -j 1 and -j 2. Prints figures, the
ratios and whether both runs gave the same verdict for every case; asserts nothing.
Target: packed <= 0.5x onnxruntime's own single-node time, with the same verdicts.

Packing is used only on a measurement in qconform/facts/onnxruntime.toml for the installed version,
this platform and this corpus (``qconform facts packing --runner onnxruntime --write``); the script
says when the run fell back to unpacked and why.

    python benchmarks/bench_pack.py [--case GLOB ...] [-j 1]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _common  # noqa: E402
from bench_suite_overhead import ort_own_seconds  # noqa: E402

CERTIFY = [_common.python(), "-m", "qconform.cli", "certify", "--runner", "onnxruntime"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", action="append", default=[], help="case globs (default: the whole corpus)")
    ap.add_argument("-j", type=int, action="append", default=None, help="worker counts (default: 1 and 2)")
    a = ap.parse_args()
    sel = [w for c in a.case for w in ("--case", c)]
    print(f"machine: {_common.machine()}")
    own, n = (ort_own_seconds() if not a.case else (float("nan"), 0))
    if n:
        print(f"onnxruntime's own time (session creation + run, one model per case) over {n:,} models: {own:.1f} s")
    with tempfile.TemporaryDirectory() as tmp:
        for jobs in a.j or [1, 2]:
            reports, walls = {}, {}
            for label, flag in (("unpacked", []), ("packed", ["--pack"])):
                out = Path(tmp) / f"{label}-{jobs}"
                walls[label], rss, rc, text = _common.run_child([*CERTIFY, "-j", str(jobs), *sel, *flag,
                                                                 "--report", str(out)])
                reports[label] = json.loads((out / "report.json").read_text())
                line = next((ln for ln in text.splitlines() if " cases in " in ln), "?")
                print(f"certify -j {jobs} {label}: {walls[label]:.1f} s wall, peak RSS {rss:.0f} MiB, exit {rc}: {line}")
            p = reports["packed"]["invocation"].get("packing") or {}
            if not p.get("used"):
                print(f"  packing was not used: {p.get('why', '?')}")
            else:
                print(f"  {p['cases']:,} passes came from packed models")
            same = ({c["id"]: c["verdict"] for c in reports["unpacked"]["cases"]}
                    == {c["id"]: c["verdict"] for c in reports["packed"]["cases"]})
            print(f"  packed / unpacked: {walls['packed'] / walls['unpacked']:.2f}; same verdicts: {same}")
            if n:
                print(f"  packed / onnxruntime's own single-node time: {walls['packed'] / own:.2f}  (target <= 0.5); "
                      f"unpacked: {walls['unpacked'] / own:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What the characterisation of unexplained failures costs, against the certification it is part of
(it should stay under a tenth of a whole-corpus certification with 1,000 or more unexplained
failures). Prints; asserts nothing.

    python benchmarks/bench_characterise.py                    # FlipIntegerRunner over the whole corpus
    python benchmarks/bench_characterise.py --case 'QuantizeLinear-21/*' -j 2

It runs ``qconform certify`` as a child (the front-end a user runs: workers, comparison, diagnosis,
the assembly of report.json, the writing of the report directory) with a runner whose deviation no
model explains (``_runners.FlipIntegerRunner`` flips the lowest bit of every integer output, so
every case with one fails, unexplained), then reads from report.json how long the certification
took and how long its characterisation (``characterisation.seconds``, timed inside the assembly)
took, and prints the ratio.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, machine, python, run_child  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runner", default=str(REPO / "benchmarks" / "_runners.py") + ":FlipIntegerRunner")
    ap.add_argument("--case", action="append", default=[], help="case glob (default: the whole corpus)")
    ap.add_argument("-j", "--jobs", default="2")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [python(), "-m", "qconform.cli", "certify", "--runner", args.runner, "--report", tmp, "-j", args.jobs]
        for c in args.case:
            cmd += ["--case", c]
        wall, rss, rc, out = run_child(cmd)
        report = json.loads((Path(tmp) / "report.json").read_text(encoding="utf-8"))
    ch = report.get("characterisation") or {}
    unexplained = sum(len(g["unexplained"]) for g in ch.get("groups") or ())
    errors = sum(e["cases"] for e in ch.get("errors") or ())
    took = float(report["timing"].get("characterisation_s") or 0.0)
    duration = float(report["timing"].get("duration_s") or wall)
    counts = report["counts"]
    print(f"machine: {machine()}")
    print(f"runner: {args.runner}; cases: {counts['collected']} ({counts['fail']} fail, {counts['error']} error); "
          f"exit {rc}")
    print(f"unexplained failing cases characterised: {unexplained} in {len(ch.get('groups') or ())} groups; "
          f"error cases: {errors}")
    print(f"certification: {duration:.1f} s (the child: {wall:.1f} s wall, {rss:.0f} MiB peak)")
    print(f"characterisation: {took:.2f} s = {100 * took / duration:.1f} % of the certification")
    if ch.get("overall") and ch["overall"].get("descriptions"):
        print("across groups:", ch["overall"]["descriptions"][0]["sentence"])
    return 0


if __name__ == "__main__":
    sys.exit(main())

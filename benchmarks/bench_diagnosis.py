"""How much time diagnosis adds to a run. Prints; asserts nothing.

    python benchmarks/bench_diagnosis.py                         # onnxruntime over the bundled corpus
    python benchmarks/bench_diagnosis.py --runner deviation:round-half-away --runner deviation:scale-inverted
    python benchmarks/bench_diagnosis.py --markdown docs/diagnosis-ort.md   # also write onnxruntime's diagnoses

Each runner runs over the corpus twice in process, like the plugin does (model built, runner
prepared and run, outputs compared): once without diagnosis and once with it (every failing case
through every applicable deviation model on the spot, then the ranking of the whole run with its
checks against passing cases). The difference is what diagnosis costs; the per-failing-case cost
is what a run pays per failure.
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from qconform import corpus as corpus_mod  # noqa: E402
from qconform.diagnosis import diagnose as dg  # noqa: E402
from qconform.apps.diagnosis_run import Run, run_cases  # noqa: E402
from qconform.plugin import default_golden  # noqa: E402
from qconform.runner import resolve  # noqa: E402


def make_runner(spec: str):
    if spec.startswith("deviation:"):
        from qconform.diagnosis.runner import DeviationRunner

        return DeviationRunner(model=spec.split(":", 1)[1])
    return resolve(spec)


def bench(spec: str, cases, repeat: int, per_group: int | None = None) -> Run:
    runner = make_runner(spec)
    best_off, best_on, last = float("inf"), float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        run_cases(runner, cases, diagnose=False)
        best_off = min(best_off, time.perf_counter() - t0)
        t0 = time.perf_counter()
        last = run_cases(runner, cases, diagnose=True, per_group=per_group)
        best_on = min(best_on, time.perf_counter() - t0)
    verdicts: dict[str, int] = {}
    for r in last.records:
        verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
    failing = verdicts.get("fail", 0)
    extra = best_on - best_off
    budget = f" [at most {per_group} diagnosed per group]" if per_group else ""
    print(f"\n{spec}{budget}: {len(cases)} cases, " + ", ".join(f"{v} {k}" for k, v in sorted(verdicts.items())))
    print(f"  without diagnosis  {best_off:8.2f} s")
    print(f"  with diagnosis     {best_on:8.2f} s   (+{extra:.2f} s, {100 * extra / best_off:+.1f}%)")
    per_case = last.seconds_diagnosing - last.seconds_ranking
    print(f"  of which diagnosis {last.seconds_diagnosing:8.2f} s   (cases {per_case:.2f} s"
          + (f", {1000 * per_case / failing:.1f} ms per failing case" if failing else "")
          + f"; ranking {last.seconds_ranking:.2f} s)")
    for line in dg.render_text(last.groups)[:12]:
        print("   ", line)
    if len(last.groups) > 6:
        print(f"    ... {len(last.groups)} groups in all")
    return last


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runner", action="append", help="onnxruntime, cpu-ref, deviation:NAME (repeatable)")
    ap.add_argument("--golden", default=None, help="corpus directory (default: the bundled one)")
    ap.add_argument("--limit", type=int, default=0, help="first N cases only")
    ap.add_argument("--repeat", type=int, default=1, help="best of N timings")
    ap.add_argument("--per-group", type=int, default=None, help="diagnose at most N failing cases per group")
    ap.add_argument("--markdown", default=None, help="write the last runner's diagnoses as a Markdown table here")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    corpus = corpus_mod.load(Path(args.golden) if args.golden else default_golden())
    cases = list(corpus.cases[: args.limit] if args.limit else corpus.cases)
    print(f"corpus {corpus.root} ({len(cases)} cases) loaded in {time.perf_counter() - t0:.1f} s")
    last = None
    for spec in args.runner or ["onnxruntime"]:
        last = bench(spec, cases, args.repeat, args.per_group)
    if args.markdown and last is not None:
        Path(args.markdown).write_text(dg.render_markdown(last.groups) + "\n")
        print(f"wrote {args.markdown}")


if __name__ == "__main__":
    main()

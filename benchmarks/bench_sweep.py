"""Exhaustive float32 sweep of one configuration, runner by runner, side by side: wall time, inputs
per second, and the share of the wall spent in qconform itself (making the inputs, canonical form,
SHA-256, comparison) versus inside the runner's prepared call. Prints figures, asserts nothing.
Goal (onnxruntime): wall <= 2x ORT's own time.

All 2^32 float32 inputs by default (256 chunks of 2^24); --limit-chunks N for a quick run. Chunks
without oracle goldens are still run and timed. A runner that cannot start here (gpu-kernel without
a CUDA device, onnxruntime not installed) is named with its reason and the others still run:

    python benchmarks/bench_sweep.py [--runners onnxruntime] [--sweep ID] [--limit-chunks N] [--jobs 1]
    python benchmarks/bench_sweep.py --runners gpu-kernel,onnxruntime --jobs 16   # the GPU vs the CPU
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
if importlib.util.find_spec("qconform") is None:  # a checkout without an install: its own package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _common  # noqa: E402

DEFAULT = "QuantizeLinear-25/float32-float8e4m3fn/scale=float32:1.0/saturate=1"


def measure(sweep, chunks: range, runner: str, jobs: int, deadline: float | None) -> dict | None:
    """One runner over the chunks; None (and the reason printed) where it cannot start or time ran out."""
    from qconform import sweep as S
    from qconform.runner import RunnerError, resolve

    try:
        resolve(runner)
    except RunnerError as exc:
        print(f"{runner}: not measured here: {exc}")
        return None
    if deadline is not None and time.time() > deadline:
        print(f"{runner}: not measured: out of time")
        return None
    t0 = time.perf_counter()
    summary = S.check([sweep], ("full",), runner, chunks=chunks, jobs=jobs, progress=True)
    wall = time.perf_counter() - t0
    rs = summary.results
    counts: dict[str, int] = {}
    for r in rs:
        counts[r.status] = counts.get(r.status, 0) + 1
    inside = sum(r.runner_seconds for r in rs)
    unit = sum(r.seconds for r in rs)
    n = sum(r.elements for r in rs)
    print(f"{runner}: {n:,} inputs in {wall:.1f} s wall ({n / wall / 1e6:.1f} M inputs/s); chunks: {counts}")
    print(f"  inside the runner's prepared call: {inside:.1f} s; qconform per chunk (inputs, canonical form, "
          f"SHA-256, compare): {unit - inside:.1f} s; startup and pool: {wall - unit / max(jobs, 1):.1f} s")
    print(f"  share of wall time in qconform itself: {1 - inside / max(jobs, 1) / wall:.0%}")
    if runner == "onnxruntime":
        print(f"  ratio wall / ORT's own time = {wall * max(jobs, 1) / inside:.2f}  (goal <= 2.0)")
    return {"runner": runner, "wall": wall, "inputs": n, "deviating": sum(r.mismatches for r in rs)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweep", default=DEFAULT, help=f"sweep id (default {DEFAULT})")
    ap.add_argument("--runners", default="onnxruntime", help="comma-separated runners, measured in this order")
    ap.add_argument("--limit-chunks", type=int, default=None)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--deadline", type=float, default=None, help="epoch seconds: start no runner after it")
    a = ap.parse_args()
    from qconform import sweep as S

    sw = S.select([a.sweep])[0]
    dom = S.domain(sw, "full")
    chunks = range(0, a.limit_chunks or dom.chunks)
    print(f"machine: {_common.machine()}")
    print(f"sweep {sw.id}, domain full: {len(chunks)} of {dom.chunks} chunks of {dom.chunk:,} inputs, "
          f"{a.jobs} process(es)")
    results = [r for r in (measure(sw, chunks, name.strip(), a.jobs, a.deadline)
                           for name in a.runners.split(",") if name.strip()) if r]
    print(f"peak RSS of this process: {_common.peak_rss_mib():.0f} MiB")
    if len(chunks) < dom.chunks and results:
        print(f"(whole 2^32 extrapolated from {len(chunks)} chunks: ~{results[0]['wall'] / len(chunks) * dom.chunks:.0f} s"
              f" for {results[0]['runner']})")
    if results:
        first = results[0]
        parts = [f"{r['runner']} {r['wall']:.1f} s ({r['inputs'] / r['wall'] / 1e6:,.0f} M inputs/s, "
                 f"{r['deviating']:,} deviating)" + ("" if r is first else f" = {r['wall'] / first['wall']:.2f}x "
                                                     f"{first['runner']}'s time") for r in results]
        print(f"side by side: {sw.id}, {results[0]['inputs']:,} inputs, {a.jobs} process(es): " + "; ".join(parts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

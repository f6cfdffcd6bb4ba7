"""Exhaustive float32 sweep of one configuration against onnxruntime: wall time, and the share of it
spent in qconform itself (making the inputs, canonical form, SHA-256, comparison) versus inside
onnxruntime's prepared call. Prints figures, asserts nothing. Goal: wall <= 2x ORT's own time.

All 2^32 float32 inputs by default (256 chunks of 2^24, one process, ORT with one thread);
--limit-chunks N for a quick run. Chunks without oracle goldens are still run and timed (their
digests are computed; the status line says how many had goldens to compare with).

    python benchmarks/bench_sweep.py [--sweep ID] [--limit-chunks N] [--jobs 1]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _common  # noqa: E402

DEFAULT = "QuantizeLinear-25/float32-float8e4m3fn/scale=float32:1.0/saturate=1"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweep", default=DEFAULT, help=f"sweep id (default {DEFAULT})")
    ap.add_argument("--runner", default="onnxruntime")
    ap.add_argument("--limit-chunks", type=int, default=None)
    ap.add_argument("--jobs", type=int, default=1)
    a = ap.parse_args()
    from qconform import sweep as S

    sw = S.select([a.sweep])[0]
    dom = S.domain(sw, "full")
    chunks = range(0, a.limit_chunks or dom.chunks)
    print(f"machine: {_common.machine()}")
    print(f"sweep {sw.id}, domain full: {len(chunks)} of {dom.chunks} chunks of {dom.chunk:,} inputs, "
          f"runner {a.runner}, {a.jobs} process(es)")
    t0 = time.perf_counter()
    summary = S.check([sw], ("full",), a.runner, chunks=chunks, jobs=a.jobs, progress=True)
    wall = time.perf_counter() - t0
    rs = summary.results
    inside = sum(r.runner_seconds for r in rs)
    unit = sum(r.seconds for r in rs)
    n = sum(r.elements for r in rs)
    counts: dict[str, int] = {}
    for r in rs:
        counts[r.status] = counts.get(r.status, 0) + 1
    print(f"{n:,} inputs in {wall:.1f} s wall ({n / wall / 1e6:.1f} M inputs/s); chunks: {counts}")
    print(f"inside the runner's prepared call: {inside:.1f} s; qconform per chunk (inputs, canonical form, "
          f"SHA-256, compare): {unit - inside:.1f} s; startup and pool: {wall - unit / max(a.jobs, 1):.1f} s")
    print(f"share of wall time in qconform itself: {1 - inside / max(a.jobs, 1) / wall:.0%}")
    print(f"ratio wall / ORT's own time = {wall * max(a.jobs, 1) / inside:.2f}  (goal <= 2.0)")
    print(f"peak RSS of this process: {_common.peak_rss_mib():.0f} MiB")
    if len(chunks) < dom.chunks:
        print(f"(whole 2^32 extrapolated from {len(chunks)} chunks: ~{wall / len(chunks) * dom.chunks / 60:.0f} min)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

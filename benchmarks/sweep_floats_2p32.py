"""Opt-in exhaustive check: every one of the 2^32 float32 bit patterns -> every float8 kind
(saturate=True), qconform.oracle.floats.encode against ml_dtypes.

Not a test (it takes a long time). The expectation is built as in tests/test_floats.py: ml_dtypes'
cast does not saturate, so where x is ±Inf or ml_dtypes returns Inf/NaN for a non-NaN x the ONNX
table (opset 24+) says ±max_finite. NaN codes compare as one class; all other codes exactly.

    PYTHONPATH=. python benchmarks/sweep_floats_2p32.py                 # all 256 chunks of 2^24
    PYTHONPATH=. python benchmarks/sweep_floats_2p32.py --limit-chunks 2
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qconform import dtypes as D  # noqa: E402
from qconform.oracle import floats as F  # noqa: E402

import ml_dtypes  # noqa: E402

CHUNK = 1 << 24
BATCH = 1 << 22  # inner batch, bounds memory (~1 GB peak)


def expected_sat(x32: np.ndarray, t: D.ElemType) -> np.ndarray:
    with np.errstate(all="ignore"):
        ml = x32.astype(t.dtype)
        mlv = ml.astype(np.float64)
    bits = t.to_bits(ml).astype(np.uint64)
    clamp = ~np.isnan(x32) & (np.isinf(x32) | ~np.isfinite(mlv))
    fi = ml_dtypes.finfo(t.dtype)
    pos, neg = t.to_bits(np.array([fi.max, -fi.max], dtype=t.dtype)).astype(np.uint64)
    return np.where(clamp, np.where(np.signbit(x32), neg, pos), bits)


def mismatches(bits: np.ndarray, t: D.ElemType) -> tuple[int, np.ndarray]:
    x32 = bits.view(np.float32)
    with np.errstate(invalid="ignore"):
        x = x32.astype(np.float64)
    got = F.encode(x, t, saturate=True).astype(np.uint64)
    exp = expected_sat(x32, t)
    gn, en = t.is_nan_bits(got), t.is_nan_bits(exp)
    bad = (gn != en) | (~gn & ~en & (got != exp))
    return int(bad.sum()), bits[bad][:5]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit-chunks", type=int, default=None, help="stop after this many 2^24 chunks")
    ap.add_argument("--start-chunk", type=int, default=0, help="first chunk (0..255)")
    args = ap.parse_args()

    kinds = [D.TYPES[n] for n in D.FLOAT8]
    n_chunks = 1 << 32 >> 24
    stop = n_chunks if args.limit_chunks is None else min(n_chunks, args.start_chunk + args.limit_chunks)
    total_bad = 0
    total_checked = 0
    t_start = time.perf_counter()
    for c in range(args.start_chunk, stop):
        t0 = time.perf_counter()
        chunk_bad = 0
        for lo in range(c * CHUNK, (c + 1) * CHUNK, BATCH):
            bits = np.arange(lo, lo + BATCH, dtype=np.uint64).astype(np.uint32)
            for t in kinds:
                n, examples = mismatches(bits, t)
                chunk_bad += n
                for b in examples:
                    print(f"  MISMATCH {t.name}: x bits {int(b):#010x}", flush=True)
                total_checked += bits.size
        total_bad += chunk_bad
        print(
            f"chunk {c:3d}/{n_chunks} [{c * CHUNK:#010x}, {(c + 1) * CHUNK:#010x}) "
            f"{chunk_bad} mismatches, {time.perf_counter() - t0:.1f}s",
            flush=True,
        )
    elapsed = time.perf_counter() - t_start
    print(f"checked {total_checked} conversions ({stop - args.start_chunk} chunks x {len(kinds)} kinds) in {elapsed:.1f}s")
    print(f"{total_bad} mismatches")
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())

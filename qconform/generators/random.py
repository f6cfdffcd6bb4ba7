"""Family "random": seeded bulk draws per combination, so ordinary values are covered too.

Floats are drawn TestFloat-style: a random sign, an exponent spread over the range that matters
(quotients from 2^-4 to beyond the output range), and a significand from TestFloat's patterns (all
zeros, all ones, a run of ones from the top or bottom, one bit set or clear, random bits). Scales
and zero points are drawn too (the zero point is sometimes left out where the version allows).
Integer and small-float data are drawn as uniform bit patterns. Each case's generator is seeded
from its case-id prefix through sha256 (qdq.seed), never from Python's salted hash()."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from qconform.case import Draft
from qconform.dtypes import ElemType
from qconform.generators import qdq
from qconform.oracle.arith import as_float64, fl
from qconform.schemas import OpSpec

FAMILY = "random"
N = 64
PRECISION_BITS = 23  # significand bits drawn (float32's); narrower types round them away


def applies(spec: OpSpec, combo: dict[str, str]) -> bool:
    return qdq.is_qdq(spec)


def significands(rng: np.random.Generator, n: int, p: int = PRECISION_BITS) -> np.ndarray:
    """Fractions in [1, 2) whose p fraction bits follow TestFloat's significand patterns."""
    k = rng.integers(0, p, n)
    full = (1 << p) - 1
    patterns = np.stack([
        np.zeros(n, np.int64), np.full(n, full, np.int64),
        full ^ ((1 << k) - 1),  # ones from the top
        (1 << k) - 1,  # ones from the bottom
        1 << k, full ^ (1 << k),  # one bit set, one bit clear
        rng.integers(0, 1 << p, n),  # random
    ])
    pick = rng.integers(0, len(patterns), n)
    return 1.0 + patterns[pick, np.arange(n)] / float(1 << p)


def _scale(rng: np.random.Generator, t: ElemType) -> float:
    if t.is_integer:
        return float(rng.integers(1, 100))
    if qdq.exponent_only(t):
        return float(2.0 ** rng.integers(-6, 7))
    return float(fl(t, significands(rng, 1)[0] * 2.0 ** rng.integers(-6, 7)))


def _codes(rng: np.random.Generator, t: ElemType, n: int) -> np.ndarray:
    if t.bits <= 16:
        return as_float64(t.from_bits(rng.integers(0, 1 << t.bits, n).astype(np.uint64)), t)
    e = rng.integers(0, t.bits - 1, n)
    v = np.floor(significands(rng, n) * 2.0 ** e)
    return np.clip(np.where(rng.random(n) < 0.5, -v, v), *t.qrange)


def _data(rng: np.random.Generator, c: qdq.Combo, s: float, zp: float) -> np.ndarray:
    if not c.quantize:
        return _codes(rng, c.x, N)
    top = c.y.bits + 2 if c.y.is_integer else int(np.log2(c.y.float_format.max_finite)) + 2
    q = np.where(rng.random(N) < 0.5, -1, 1) * significands(rng, N) * 2.0 ** rng.integers(-4, top, N)
    lo, hi = qdq.value_range(c.x)
    x = np.clip(q * s, lo, hi)
    return fl(c.x, x) if c.x.is_float else np.round(x)


def _zero_point(rng: np.random.Generator, c: qdq.Combo):
    if c.can_omit_zero_point() and rng.random() < 0.25:
        return None
    if c.q.is_float or c.zero_point_is_zero:
        return 0.0
    return float(rng.integers(c.q.qrange[0], c.q.qrange[1] + 1))


def generate() -> Iterator[Draft]:
    for c in qdq.combos():
        rng = qdq.rng(c.prefix, FAMILY)
        s = _scale(rng, c.s)
        zp = _zero_point(rng, c)
        x = _data(rng, c, s, zp or 0.0).reshape(8, N // 8)
        yield c.draft(FAMILY, "draw-000", x, s, zp, clause="q-formula" if c.quantize else "dq-formula",
                      note=f"seed {qdq.seed(c.prefix, FAMILY)}")

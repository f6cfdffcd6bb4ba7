"""Sums in an order the text leaves open, for the float ops of the QDQ patterns
(qconform/docs/semantics.md#qdq-sum-order).

A row of terms (each exact in float64: a product of two float32 values, alpha times one, or a
float32 value) has one exact sum. Where every term is a multiple of one power of two ``u`` and the
magnitudes add up to less than ``2^24·u``, every evaluation order, with or without fused
multiply-adds, gives that sum exactly in float32: the row has one value. A row that is not so is
refused: its value would depend on an order the text does not give.

Vectorised over rows: the check runs in int64 on the terms' binary mantissas (the corpus's
convolutions and long matmuls spend their time here).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from qconform.oracle.granularity import InvalidModel


class NotExact(InvalidModel):
    """A draft whose reduction is not exact in float32 for every order: its result would depend on
    an order the text leaves open, so it cannot be a case with one reading (a generator bug)."""


_F32_OVERFLOW = Fraction(2**128 - 2**103)
_F32_TINY = Fraction(1, 2**150)


def _round_fraction_f32(v: Fraction) -> float:
    """A rational rounded once to float32 (ties to even), exactly."""
    if v == 0:
        return 0.0
    if abs(v) >= _F32_OVERFLOW:  # IEEE: at or beyond max + half an ulp, the result is ±Inf
        return float("inf") if v > 0 else float("-inf")
    if abs(v) < _F32_TINY:  # below half the smallest subnormal: ±0
        return 0.0 if v > 0 else -0.0
    f64 = float(v)  # correctly rounded to float64 by Python
    # a float64 that is not a float32 midpoint rounds to the same float32 as the exact value; a
    # midpoint decides by the exact value's side of it
    f32 = np.float32(f64)
    if Fraction(float(f32)) == v:
        return float(f32)
    lo, hi = (np.nextafter(f32, np.float32(-np.inf)), f32) if Fraction(float(f32)) > v else \
        (f32, np.nextafter(f32, np.float32(np.inf)))
    mid = (Fraction(float(lo)) + Fraction(float(hi))) / 2
    if v < mid:
        return float(lo)
    if v > mid:
        return float(hi)
    return float(lo) if int(np.float32(lo).view(np.uint32)) % 2 == 0 else float(hi)



@dataclass(frozen=True)
class Sums:
    """Exact row sums (Fractions; None where not exact for every order) and which rows every order
    computes exactly."""

    exact: np.ndarray  # object array of Fraction
    every_order: np.ndarray  # bool


def row_sums(terms: np.ndarray) -> Sums:
    """The sums of ``terms`` (…, K) along the last axis, each term exact in float64."""
    terms = np.asarray(terms, np.float64)
    shape, k = terms.shape[:-1], terms.shape[-1]
    t = terms.reshape(-1, k)
    m, e = np.frexp(t)
    mi = np.abs(m * 2.0**53).astype(np.int64)
    nz = mi != 0
    low_bit = np.where(nz, mi & -mi, 1)
    tz = np.frexp(low_bit.astype(np.float64))[1] - 1
    odd = mi >> tz
    lb = np.where(nz, e - 53 + tz, np.iinfo(np.int32).max)
    kmin = lb.min(axis=1) if k else np.zeros(len(t), np.int64)
    kmin = np.where(nz.any(axis=1), kmin, 0)
    shift = np.where(nz, lb - kmin[:, None], 0)
    fits = (~nz) | ((odd < (1 << 24)) & (shift < 24))
    units = np.where(nz & fits, odd << np.clip(shift, 0, 30), 0)
    every = fits.all(axis=1) & (units.sum(axis=1) < (1 << 24))
    total = np.where(t < 0, -units, units).sum(axis=1)
    exact = np.empty(len(t), object)
    for i in np.flatnonzero(every):
        kk = int(kmin[i])
        exact[i] = Fraction(int(total[i]) << kk) if kk >= 0 else Fraction(int(total[i]), 1 << -kk)
    return Sums(exact.reshape(shape), every.reshape(shape))


def rounded(s: Sums, where: str, factor: np.ndarray | None = None) -> list[np.ndarray]:
    """[the exact sums (times ``factor``, exact rationals: the pools' 1/count) rounded once to
    float32]; a row some order would round is refused (NotExact): its value would depend on an order
    the text leaves open (#qdq-sum-order)."""
    if not s.every_order.all():
        raise NotExact(f"{where}: a sum the text leaves unordered is not exact in float32 for every order")
    flat = s.exact.reshape(-1)
    if factor is not None:
        flat = flat * np.broadcast_to(np.asarray(factor, object), s.exact.shape).reshape(-1)
    return [np.asarray([_round_fraction_f32(v) for v in flat], np.float32).reshape(s.exact.shape)]


__all__ = ["NotExact", "Sums", "row_sums", "rounded"]

"""Exact arithmetic helpers shared by every op oracle.

Values travel as float64 (every element of every type in scope converts to float64 exactly) or as
int64. ``fl(t, v)`` rounds a float64 to type t once, IEEE round-to-nearest-even with overflow to
±Inf; a float64 sum/product/quotient of two values of at most 24-bit precision followed by ``fl`` is
the correctly rounded operation in t (double rounding is innocuous since 53 ≥ 2·24 + 2).
"""
from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np

from qconform import dtypes
from qconform.dtypes import ElemType
from qconform.oracle import floats


#: Narrowing float64 -> float32 or float16 with numpy's cast is IEEE round-to-nearest-even with
#: overflow to ±Inf -- what ``fl`` means -- unless the process flushes subnormals to zero (FTZ/DAZ,
#: which a library may switch on): checked per call, the codec is used then. float16 also needs the
#: cast to round once, not through float32 (``_rounds_once``). tests/test_floats.py pins both paths
#: equal to the codec at every tie, just beside it, and at the subnormal and overflow edges.
_HARDWARE = {"float32": np.float32, "float16": np.float16}
_TINY = np.array([2.0**-149, 2.0**-126 * 1.5])
_TINY_VALUES = _TINY.tolist()


def _hardware_ok() -> bool:
    """The narrowing and a product keep float32's subnormals (no FTZ/DAZ). Asked per call of ``fl``,
    so compared as Python lists: ``np.all`` twice was an eighth of a diagnosis's time."""
    narrowed = _TINY.astype(np.float32)
    return narrowed.astype(np.float64).tolist() == _TINY_VALUES and 0.0 not in (narrowed * np.float32(1)).tolist()


#: float64 values just beside a float16 tie, where a cast through float32 lands on the tie and
#: rounds to even the wrong way: 1 + 2^-11 + 2^-40 (up to 1 + 2^-10), 1 + 3·2^-11 - 2^-40 (down to
#: 1 + 2^-10), and 2^-25 + 2^-60, above half the smallest subnormal (up to 2^-24).
_TIE_TRAPS = np.array([1 + 2.0**-11 + 2.0**-40, 1 + 3 * 2.0**-11 - 2.0**-40, 2.0**-25 + 2.0**-60])
_TIE_ROUNDED = np.array([1 + 2.0**-10, 1 + 2.0**-10, 2.0**-24])


@functools.cache
def _rounds_once() -> bool:
    """Whether numpy's float64 -> float16 cast rounds once (numpy's own conversion does; a build that
    converted through float32 would round twice): asked once per process, the codec is used if not."""
    with np.errstate(all="ignore"):
        return bool(np.all(_TIE_TRAPS.astype(np.float16).astype(np.float64) == _TIE_ROUNDED))


def as_float64(arr: np.ndarray, t: ElemType | str) -> np.ndarray:
    """Exact float64 value of every element (floats decoded from their bits; numpy's own float16/32
    arrays widened by numpy, which is exact unless subnormals are flushed: see ``_hardware_ok``)."""
    t = dtypes.get(t)
    arr = np.asarray(arr)
    if t.is_float and arr.dtype.kind == "f" and _hardware_ok():
        with np.errstate(invalid="ignore"):  # a signalling NaN widens to a quiet one (FE_INVALID): NaN either way
            return arr.astype(np.float64)
    if t.is_float:
        return floats.decode(t.to_bits(arr), t)
    return np.asarray(arr).astype(np.int64).astype(np.float64)


#: The precision name of float64 intermediates (no ElemType: no tensor of it crosses a model).
FLOAT64 = "float64"


def fl(t: ElemType | str, v: np.ndarray) -> np.ndarray:
    """Round float64 values to float type t (IEEE: RNE, overflow to ±Inf), back as float64.
    ``"float64"`` is the identity: the readings that keep a quotient in double name it as a precision."""
    v = np.asarray(v, dtype=np.float64)
    if t == FLOAT64:
        return v
    t = dtypes.get(t)
    if t.name in _HARDWARE and _hardware_ok() and (t.name != "float16" or _rounds_once()):
        # the codec's answer, ~20x faster (tests/test_floats.py), its NaN too: quiet, sign kept, no
        # payload (the cast would keep a payload's top bits, and a signalling NaN signalling)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            r = v.astype(_HARDWARE[t.name]).astype(np.float64)
            nan = np.isnan(r)
            return np.where(nan, np.copysign(np.nan, r), r) if nan.any() else r
    return floats.decode(floats.encode(v, t, saturate=False), t)


def round_half_even(v: np.ndarray) -> np.ndarray:
    """Round to the nearest integer, ties to even; exact on float64 (np.rint is IEEE roundeven)."""
    return np.rint(v)


def saturate_to_int(v: np.ndarray, t: ElemType | str) -> tuple[np.ndarray, np.ndarray]:
    """Clamp exact float64 integers (±Inf allowed) to t's range; NaN -> (0, undefined=True)."""
    t = dtypes.get(t)
    lo, hi = t.qrange
    nan = np.isnan(v)
    clipped = np.clip(np.where(nan, 0.0, v), lo, hi)
    return clipped.astype(np.int64), nan


def pack_output(values: np.ndarray, t: ElemType | str) -> np.ndarray:
    """int64 values (integer types) or raw codes (float types) -> an array of t's dtype."""
    t = dtypes.get(t)
    if t.is_integer:
        lo, hi = t.qrange
        if values.size and (values.min() < lo or values.max() > hi):
            raise ValueError(f"value outside {t.name} range")
        return t.from_bits(np.asarray(values, dtype=np.int64) & ((1 << t.bits) - 1))
    return t.from_bits(values)


def exact_product(t: ElemType | str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fl_t(a × b) with ONE rounding of the exact product (a, b float64 values).

    Where both factors carry few enough bits the float64 product is already exact; the rest (e.g.
    int32 × float32, up to 56 bits) is rounded from a Fraction, ties to even, by integer arithmetic."""
    t = dtypes.get(t)
    a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
    out = fl(t, a * b)
    # A zero factor keeps float64's product: its zero carries IEEE's sign, which an exact rational lacks.
    wide = np.isfinite(a) & np.isfinite(b) & (np.abs(a) > 2.0**29) & (b != 0)
    for idx in map(tuple, np.argwhere(wide)):
        out[idx] = _round_fraction(t, Fraction(a[idx]) * Fraction(b[idx]))
    return out


def exact_fma(t: ElemType | str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """fl_t(a × b + c) with ONE rounding of the exact value (a fused multiply-add); elements with a
    non-finite operand, or an exact zero sum, take float64's answer (the sign of a zero sum is
    IEEE's: -0 only when a × b and c are both -0, and float64 computes those exactly)."""
    t = dtypes.get(t)
    a, b, c = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (a, b, c)))
    with np.errstate(all="ignore"):
        out = fl(t, a * b + c)
    for idx in map(tuple, np.argwhere(np.isfinite(a) & np.isfinite(b) & np.isfinite(c))):
        exact = Fraction(a[idx]) * Fraction(b[idx]) + Fraction(c[idx])
        if exact != 0:
            out[idx] = _round_fraction(t, exact)
    return out


def _round_fraction(t: ElemType, r: Fraction) -> float:
    fmt = t.float_format
    if r == 0:
        return 0.0
    mag = abs(r)
    e = mag.numerator.bit_length() - mag.denominator.bit_length()
    if Fraction(2) ** e > mag:
        e -= 1
    quantum = Fraction(2) ** (max(e, fmt.emin) - fmt.mbits)
    v = round(mag / quantum) * quantum  # Fraction.__round__ is round-half-even
    if v > fmt.max_finite:
        return float("inf") if r > 0 else float("-inf")
    return float(v) if r > 0 else -float(v)


def round_with(v, mode: str = "half-even") -> np.ndarray:
    """Round exact float64 values to integers: ``half-even`` (the spec), ``half-away`` (C round,
    Rust f32::round), ``half-up`` (floor(v + 0.5)), ``toward-zero`` (a C cast). NaN and ±Inf
    pass through. Exact: floor and v - floor(v) are exact in float64."""
    v = np.asarray(v, dtype=np.float64)
    if mode == "half-even":
        return np.rint(v)
    with np.errstate(invalid="ignore"):
        f = np.floor(v)
        frac = v - f
        if mode == "half-away":
            up = np.where(v >= 0, frac >= 0.5, frac > 0.5)
        elif mode == "half-up":
            up = frac >= 0.5
        elif mode == "toward-zero":
            up = (v < 0) & (frac > 0)
        else:
            raise ValueError(f"unknown rounding mode {mode!r}")
        return np.where(np.isfinite(v), f + up, v)


def round_fraction(v: Fraction, mode: str = "half-even") -> int:
    """``round_with`` for one exact rational."""
    import math

    f = math.floor(v)
    frac = v - f
    half = Fraction(1, 2)
    if mode == "half-even":
        return f + (frac > half or (frac == half and f % 2 == 1))
    if mode == "half-away":
        return f + (frac >= half if v >= 0 else frac > half)
    if mode == "half-up":
        return f + (frac >= half)
    if mode == "toward-zero":
        return f + (v < 0 and frac > 0)
    raise ValueError(f"unknown rounding mode {mode!r}")

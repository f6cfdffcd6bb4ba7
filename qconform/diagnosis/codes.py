"""What kind of code an element holds: the classes a characterisation speaks of, read off the bits.

A deviation that no model explains is described by where it happens (qconform.diagnosis.characterise),
and most implementation bugs are triggered by a class of code rather than by a value: a subnormal
scale, a NaN with a payload in its low bits, a zero point whose top bit is set, an integer at the
end of its range. Every function here takes raw codes (``ElemType.to_bits``) of one registry type
and returns small integer class numbers, vectorised; ``*_LABELS`` say each class in words. Only the
type registry's ``FloatFormat`` fields are read, so a new type needs nothing here.
"""
from __future__ import annotations

import numpy as np

from qconform import dtypes

#: Float code classes, in the order ``float_class`` numbers them.
FLOAT_LABELS = ("+0", "-0", "a positive subnormal (exponent field 0)", "a negative subnormal (exponent field 0)",
                "the smallest positive normal", "the smallest negative normal", "a positive normal",
                "a negative normal", "+max (the largest finite value)", "-max", "+Inf", "-Inf", "NaN")
#: Float magnitude classes (the sign set aside), in the order ``magnitude_class`` numbers them.
MAGNITUDE_LABELS = ("zero", "subnormal (exponent field 0)", "the smallest normal", "normal", "the largest finite value",
                    "infinite", "NaN")
_MAGNITUDE = np.array([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6])
#: Integer code classes, in the order ``int_class`` numbers them.
INT_LABELS = ("0", "the type's minimum", "the type's maximum", "1", "-1", "another negative value",
              "another positive value")
#: Exponent field classes (floats).
EXPONENT_LABELS = ("0 (zero or subnormal)", "all ones (Inf or NaN)", "neither all zeros nor all ones")
#: NaN payload classes: where the payload (the mantissa below the quiet bit) has bits set.
PAYLOAD_LABELS = ("no payload", "a payload in its high bits only", "a payload in its low bits only",
                  "a payload in its high and low bits")


def float_class(bits: np.ndarray, t: dtypes.ElemType) -> np.ndarray:
    """Each code's class (an index into ``FLOAT_LABELS``)."""
    fmt = t.float_format
    b = np.asarray(bits).astype(np.uint64)
    sign = (b >> np.uint64(fmt.width - 1)) & np.uint64(1) if fmt.sign_bit else np.zeros(b.shape, np.uint64)
    neg = sign.astype(bool)
    mag = b & np.uint64((1 << (fmt.width - fmt.sign_bit)) - 1)
    exp = (mag >> np.uint64(fmt.mbits)).astype(np.int64)
    out = np.full(b.shape, 6, np.int64)  # a positive normal
    out[neg] = 7
    nan = t.is_nan_bits(b)
    inf = np.zeros(b.shape, bool)
    if fmt.has_inf:
        inf = (exp == (1 << fmt.ebits) - 1) & ~nan
    max_code = _max_magnitude(fmt)
    if fmt.nan_style == "e8m0":  # no zero, no subnormal, no sign: code 0 is the smallest value
        out[mag == 0] = 4
    else:
        zero, sub = mag == 0, (exp == 0) & (mag != 0)
        out[zero] = np.where(neg[zero], 1, 0)
        out[sub] = np.where(neg[sub], 3, 2)
        small = (exp == 1) & ((mag & np.uint64((1 << fmt.mbits) - 1)) == 0)
        out[small] = np.where(neg[small], 5, 4)
    top = mag == np.uint64(max_code)
    out[top] = np.where(neg[top], 9, 8)
    out[inf] = np.where(neg[inf], 11, 10)
    out[nan] = 12
    return out


def magnitude_class(bits: np.ndarray, t: dtypes.ElemType) -> np.ndarray:
    """``float_class`` without the sign (an index into ``MAGNITUDE_LABELS``)."""
    return magnitude_of(float_class(bits, t))


def magnitude_of(cls: np.ndarray) -> np.ndarray:
    """A ``float_class`` number without its sign."""
    return _MAGNITUDE[cls]


def _max_magnitude(fmt: dtypes.FloatFormat) -> int:
    """The magnitude bits of the largest finite value."""
    all_ones = (1 << (fmt.width - fmt.sign_bit)) - 1
    if fmt.nan_style == "ieee":
        return (((1 << fmt.ebits) - 2) << fmt.mbits) | ((1 << fmt.mbits) - 1)
    if fmt.nan_style in ("fn", "e8m0"):
        return all_ones - 1
    return all_ones  # fnuz, none: the all-ones magnitude is finite


def nan_kind(bits: np.ndarray, t: dtypes.ElemType) -> np.ndarray:
    """0 where the code is not NaN; else 1 + sign * 8 + signalling * 4 + payload class
    (``nan_label`` says it). Types with one NaN code (fn, fnuz, e8m0) give 1 + sign * 8."""
    fmt = t.float_format
    b = np.asarray(bits).astype(np.uint64)
    nan = t.is_nan_bits(b)
    out = np.zeros(b.shape, np.int64)
    if not nan.any():
        return out
    sign = ((b >> np.uint64(fmt.width - 1)) & np.uint64(1)).astype(np.int64) if fmt.sign_bit else 0
    if fmt.nan_style in ("fnuz", "e8m0"):  # the one NaN code has no sign of its own
        sign = 0
    if fmt.nan_style != "ieee":
        out[nan] = (1 + 8 * np.broadcast_to(sign, b.shape))[nan]
        return out
    m = fmt.mbits
    mant = b & np.uint64((1 << m) - 1)
    quiet = (mant >> np.uint64(m - 1)) & np.uint64(1)
    payload = mant & np.uint64((1 << (m - 1)) - 1)
    w = m - 1
    low_bits = w // 2  # the payload's lower half; an odd width gives the extra bit to the high half
    low = (payload & np.uint64((1 << low_bits) - 1)) != 0 if low_bits else np.zeros(b.shape, bool)
    high = (payload >> np.uint64(low_bits)) != 0
    cls = np.where(high & low, 3, np.where(high, 1, np.where(low, 2, 0)))
    kind = 1 + 8 * sign + 4 * (1 - quiet.astype(np.int64)) + cls
    out[nan] = kind[nan]
    return out


def nan_label(kind: int, t: dtypes.ElemType | None = None) -> str:
    """``nan_kind``'s number in words."""
    if kind == 0:
        return "not NaN"
    k = kind - 1
    sign = "-" if k >= 8 else "+"
    k %= 8
    if t is not None and t.float_format is not None and t.float_format.nan_style != "ieee":
        return f"{sign if t.float_format.nan_style == 'fn' else ''}NaN (the type's one NaN code)"
    quiet = "signalling" if k >= 4 else "quiet"
    return f"a {sign}{quiet} NaN with {PAYLOAD_LABELS[k % 4]}"


def exponent_field(bits: np.ndarray, t: dtypes.ElemType) -> np.ndarray:
    """0: the exponent field is all zeros; 1: all ones; 2: neither (``EXPONENT_LABELS``)."""
    fmt = t.float_format
    b = np.asarray(bits).astype(np.uint64)
    exp = ((b >> np.uint64(fmt.mbits)) & np.uint64((1 << fmt.ebits) - 1)).astype(np.int64)
    return np.where(exp == 0, 0, np.where(exp == (1 << fmt.ebits) - 1, 1, 2))


def int_class(bits: np.ndarray, t: dtypes.ElemType) -> np.ndarray:
    """Each integer code's class (an index into ``INT_LABELS``)."""
    v = np.asarray(t.from_bits(bits)).astype(np.int64)
    lo, hi = t.qrange
    out = np.where(v < 0, 5, 6)
    for value, cls in ((1, 3), (-1, 4), (hi, 2), (lo, 1), (0, 0)):  # later wins: 0 over an unsigned minimum
        out = np.where(v == value, cls, out)
    return out


def top_bit(bits: np.ndarray, t: dtypes.ElemType) -> np.ndarray:
    """1 where the code's most significant bit is set (a signed negative, an unsigned value of at least
    half its range, a float's sign)."""
    return ((np.asarray(bits).astype(np.uint64) >> np.uint64(t.bits - 1)) & np.uint64(1)).astype(np.int64)


def code_class(bits: np.ndarray, t: dtypes.ElemType) -> np.ndarray:
    """``float_class`` or ``int_class``, whichever the type has."""
    return float_class(bits, t) if t.is_float else int_class(bits, t)


def class_label(cls: int, t: dtypes.ElemType) -> str:
    return (FLOAT_LABELS if t.is_float else INT_LABELS)[cls]


__all__ = ["EXPONENT_LABELS", "FLOAT_LABELS", "INT_LABELS", "MAGNITUDE_LABELS", "PAYLOAD_LABELS", "class_label",
           "code_class", "exponent_field", "float_class", "int_class", "magnitude_class", "magnitude_of", "nan_kind",
           "nan_label",
           "top_bit"]

"""Family "code-classes": one code of every class of bit pattern of each float input, x and the scale
(qconform/docs/semantics.md#input-codes).

A kernel tests a code's bits, not its value: an exponent field of all zeros (subnormal, flushed),
all ones (Inf or NaN, told apart by the mantissa), the quiet bit, the sign. The classes of a binary
float format, from its ``FloatFormat`` fields alone: ±0; the smallest, a middle and the largest
subnormal; the smallest normal, 1 and the largest finite value; ±Inf; and NaN of both signs, quiet
and signalling, with a payload (the mantissa below the quiet bit) in its high bits only, its low
bits only, both, or none (quiet only), and all ones. A conversion that truncates the mantissa turns
a NaN whose payload sits only in the low bits into Inf; a quiet-bit test misses a signalling NaN.

QuantizeLinear: x is every class of its type, scale 1, in each version's combinations whose scale
has x's type, every output type. The scale: every class of each float scale type, one per row of
a per-axis scale (axis 0), in one combination per version and scale type (float32 x and an 8-bit
integer output; DequantizeLinear: 8-bit integer x). DequantizeLinear's float8/float4/float6 x are
exhaustive in family "floatkinds" already."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from qconform.case import Draft
from qconform.dtypes import ElemType
from qconform.generators import qdq

FAMILY = "code-classes"
CLAUSE = "input-codes"


def class_codes(t: ElemType) -> np.ndarray:
    """One code (raw bits) of every class of t's bit patterns, both signs where t has a sign."""
    f = t.float_format
    m, top = f.mbits, (1 << f.ebits) - 1
    if f.nan_style == "e8m0":  # exponent only: the smallest, 1, the two largest, NaN
        return np.array([0, 1, 127, 253, 254, 255], np.uint64)
    mags = {0, 1 << m, f.bias << m}  # zero, the smallest normal, 1
    if m:
        mags |= {1, 1 << (m - 1), (1 << m) - 1}  # subnormals: the smallest, a middle one, the largest
    all_ones = (top << m) | ((1 << m) - 1)
    if f.nan_style == "ieee":
        mags |= {all_ones - (1 << m), top << m, all_ones}  # the largest finite, Inf, the all-ones NaN
        quiet, w = 1 << (m - 1), m - 1
        high, low = (1 << (w - 1) if w else 0), (1 if w >= 2 else 0)
        payloads = {0, high, low, high | low}
        mags |= {(top << m) | quiet | p for p in payloads}  # quiet NaNs: no payload, high, low, both
        mags |= {(top << m) | p for p in payloads if p}  # signalling NaNs (a payload is what makes them NaN)
    elif f.nan_style == "fn":
        mags |= {all_ones, all_ones - 1}  # the NaN code, the largest finite
    else:  # fnuz, none: the all-ones magnitude is the largest finite value
        mags.add(all_ones)
    codes = set(mags)
    if f.sign_bit:  # the fnuz kinds' negative zero slot is their NaN code
        codes |= {(1 << (f.width - 1)) | c for c in mags}
    return np.array(sorted(codes), np.uint64)


def _x_classes(c: qdq.Combo) -> Draft:
    x = c.x.from_bits(class_codes(c.x))
    return c.draft(FAMILY, "every-x-class", x, 1.0, clause=CLAUSE,
                   note=f"one code of every class of {c.x.name}'s bit patterns (NaN payload high/low, quiet and "
                        "signalling, both signs), scale 1")


def _scale_classes(c: qdq.Combo) -> Draft:
    scales = c.s.from_bits(class_codes(c.s))
    row = np.array([1.0, -1.0, 0.0, 3.0]) if c.quantize else np.array([1.0, -1.0, 0.0, 100.0])
    x = np.tile(row, (len(scales), 1))
    zp = np.zeros(len(scales))
    return c.draft(FAMILY, "every-scale-class", x, scales, zp, attrs={"axis": 0}, clause=CLAUSE,
                   note=f"row i uses the i-th code of every class of {c.s.name}'s bit patterns as its scale")


def _scale_combo(c: qdq.Combo) -> bool:
    """The one combination per version and scale type that gets the scale's classes."""
    if not c.has("axis") or not c.s.is_float or c.q.name not in ("int8", "uint8"):
        return False
    if c.quantize:
        return c.x.name == "float32"
    return c.y.name == ("float32" if qdq.exponent_only(c.s) else c.s.name)


def generate() -> Iterator[Draft]:
    scaled: set[tuple] = set()
    for c in qdq.combos():
        if c.quantize and c.x.is_float and c.s.name == c.x.name:
            yield _x_classes(c)
        key = (c.spec.key, c.s.name)
        if key not in scaled and _scale_combo(c):
            scaled.add(key)
            yield _scale_classes(c)

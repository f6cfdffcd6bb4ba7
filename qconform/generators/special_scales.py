"""Family "special-scales": scales of ±0, a negative value, ±Inf and NaN, and the float8e8m0 NaN code
0xFF (qconform/docs/semantics.md#q-division: "Special scales follow IEEE").

QuantizeLinear: x / 0 is ±Inf (saturates) and 0 / 0 NaN (don't-care for integer outputs); x / ±Inf
is ±0; a negative scale flips the sign. DequantizeLinear: (x - zp) * s with the same IEEE rules.
The float32 combinations get three of the six scales per version, in windows that together walk
the list; the float8e8m0 combinations with float32 data and a float output get 0xFF."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from qconform.case import Draft
from qconform.generators import qdq
from qconform.oracle.arith import as_float64

FAMILY = "special-scales"
PER_VERSION = 3

SCALES = [("scale-pos-zero", 0.0), ("scale-neg-zero", -0.0), ("scale-negative", -2.0),
          ("scale-pos-inf", np.inf), ("scale-neg-inf", -np.inf), ("scale-nan", np.nan)]


def _x(c: qdq.Combo) -> np.ndarray:
    if c.quantize and c.x.is_integer:  # int32 x
        return np.array([-1000.0, -3.0, -1.0, 0.0, 1.0, 3.0, 1000.0])
    if c.quantize:
        return np.array([-3.0, -1.5, -0.0, 0.0, 1.5, 3.0, 1000.0, -np.inf, np.inf])
    if c.x.is_integer:
        lo, hi = c.x.qrange
        return np.array(sorted({lo, lo + 1, c.zero() - 1, c.zero(), c.zero() + 1, hi - 1, hi}), dtype=np.float64)
    v = as_float64(c.x.all_values(), c.x)
    fin = v[np.isfinite(v)]
    return np.concatenate([fin[:: max(1, len(fin) // 8)], [-0.0]])


def _draft(c: qdq.Combo, name: str, scale) -> Draft:
    zp = c.zero()
    return c.draft(FAMILY, name, _x(c), scale, zp, clause="q-division" if c.quantize else "dq-formula",
                   note=f"scale {scale!r} (IEEE special scale); zero point {zp}")


def generate() -> Iterator[Draft]:
    for c in qdq.combos():
        if qdq.exponent_only(c.s):  # float8e8m0 has no zero, sign or infinity: its one special is NaN
            # ... which makes every integer output undefined: only float outputs say something
            if (c.x if c.quantize else c.y).name == "float32" and c.y.is_float:
                yield _draft(c, "scale-e8m0-nan-code", np.array(np.nan))
        elif qdq.primary(c):
            for name, s in qdq.choose(SCALES, c, FAMILY, PER_VERSION):
                yield _draft(c, name, s)

"""Family "specials": NaN, ±Inf, ±0, subnormal data and subnormal quotients, quotients at and
beyond 2^7, 2^8, 2^15, 2^16, 2^31, 2^32, 2^63, 2^64 (every narrower integer range and the
platform-cast traps), crossed with extreme scales: 1, the smallest subnormal, the smallest normal
and the largest finite value of the scale type (qconform/docs/semantics.md#q-nan-int, #q-saturation-int,
#q-float8, #dq-formula).

One row of data per scale: a per-axis case on axis 0 where the version has an axis, else one case
per scale. A platform cast of NaN or ±Inf (int32(+Inf) = INT_MIN on x86) and float overflow of a
subnormal scale show here."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from qconform import dtypes
from qconform.case import Draft
from qconform.dtypes import ElemType
from qconform.generators import qdq
from qconform.schemas import OpSpec

FAMILY = "specials"
LADDER = (7, 8, 15, 16, 24, 31, 32, 63, 64, 127, 128)


def applies(spec: OpSpec, combo: dict[str, str]) -> bool:
    return qdq.is_qdq(spec)


def special_values(t: ElemType) -> np.ndarray:
    """The type's own special values: NaN (both signs), ±Inf, ±0, ±smallest subnormal and normal,
    ±largest finite, ±1 (integers: the range ends and the values around 0)."""
    if t.is_integer:
        lo, hi = t.qrange
        return qdq.keep([lo, lo + 1, -1, 0, 1, hi - 1, hi], t)
    f = t.float_format
    v = [np.nan, -np.nan if f.has_negative_zero else np.nan, np.inf, -np.inf, 0.0, -0.0, f.min_subnormal,
         -f.min_subnormal, 2.0 ** f.emin, -(2.0 ** f.emin), f.max_finite, -f.max_finite, 1.0, -1.0]
    v = np.array(v, dtype=np.float64)
    ok = np.isnan(v) & f.has_nan | np.isinf(v) & f.has_inf | np.isfinite(v) & qdq.representable(v, t)
    if f.sign_bit == 0:
        ok &= ~np.signbit(v)
    return v[ok]


def _row(c: qdq.Combo) -> np.ndarray:
    v = special_values(c.x)
    if c.quantize:  # powers of two around every integer range's limits, both signs
        ladder = np.array([s * 2.0 ** k + d for k in LADDER for s in (1, -1) for d in (-1, 0, 1)])
        v = np.concatenate([v, qdq.keep(ladder, c.x), [1.5, -2.5, 100.0]])
        v = v[np.isnan(v) | qdq.representable(v, c.x) | np.isinf(v)]
    return v


def scale_extremes(t: ElemType) -> list[tuple[str, float]]:
    if t.is_integer:
        return [("1", 1.0), ("2", 2.0), ("max", float(t.qrange[1]))]
    f = t.float_format
    out = [("1", 1.0), ("min-subnormal", f.min_subnormal), ("min-normal", 2.0 ** f.emin), ("max", f.max_finite)]
    seen, uniq = set(), []
    for n, s in out:
        if s not in seen:
            seen.add(s)
            uniq.append((n, s))
    return uniq


def _clause(c: qdq.Combo) -> str:
    if c.quantize:
        if c.y.is_integer:
            return "q-nan-int"
        return "q-float8" if c.y.name in dtypes.FLOAT8 else "q-float4-float6"
    if c.x.is_float:
        return "dq-float8"
    return "dq-e8m0-scale" if qdq.exponent_only(c.s) else "dq-formula"


def generate() -> Iterator[Draft]:
    for c in qdq.combos():
        row = _row(c)
        scales = scale_extremes(c.s)
        zps = [c.zero()]
        if c.q.is_integer and not c.zero_point_is_zero:
            zps = [c.zero(), *map(float, c.q.qrange)]
        if c.has("axis"):
            x = np.tile(row, (len(scales), 1))
            zp = [zps[i % len(zps)] for i in range(len(scales))]
            yield c.draft(FAMILY, "extremes", x, [s for _, s in scales], zp, attrs={"axis": 0},
                          clause=_clause(c), note="row i: the special values under scale i "
                          + ", ".join(n for n, _ in scales))
            continue
        for i, (n, s) in enumerate(scales):
            yield c.draft(FAMILY, f"extremes-scale-{n}", row, s, zps[i % len(zps)], clause=_clause(c))

"""Family "floatkinds": the float8, float4, float6 and e8m0 conversions, exhaustively.

QuantizeLinear to a float kind: every finite value, every midpoint between neighbours with one
step of x's type either side, the largest finite value and the overflow threshold with their
neighbours, the first steps past the overflow threshold, ±Inf and NaN, under saturate=1 and saturate=0 (the version's own Cast table decides;
qconform/docs/semantics.md#q-float8, #q-float8-fnuz-inf, #q-float4-float6), plus a non-zero float zero
point (#q-float8-zero-point). DequantizeLinear from a float kind: every code under scales 1, large
(output overflow) and small (output subnormals) (#dq-float8). An e8m0 scale: every one of its 255
finite values, one per row, with float32 data (QuantizeLinear) or output (DequantizeLinear); every
16th, those around 1 and the ends otherwise (#dq-e8m0-scale). Values are scaled by a power of two chosen so x's
type holds them; values it cannot hold are left out."""
from __future__ import annotations

import math
from typing import Iterator

import numpy as np

from qconform import dtypes
from qconform.case import Draft
from qconform.dtypes import ElemType
from qconform.generators import qdq
from qconform.oracle import floats
from qconform.schemas import OpSpec

FAMILY = "floatkinds"


def applies(spec: OpSpec, combo: dict[str, str]) -> bool:
    if not qdq.is_qdq(spec):
        return False
    c = qdq.Combo(spec, combo)
    return c.q.is_float or qdq.exponent_only(c.s)


def _pow2_scale(c: qdq.Combo, top: float) -> float:
    """A power of two s with top * s inside x's type and s inside the scale's type."""
    if c.x.is_float:
        p = min(0, math.floor(math.log2(c.x.float_format.max_finite / top)))
    else:
        p = 30 - math.ceil(math.log2(top))
    lo, hi = qdq.pow2_scales(c.s)
    return float(np.clip(2.0 ** p, lo, hi))


def _q_values(y: ElemType) -> np.ndarray:
    f = y.float_format
    vals = floats.all_finite_values(y)
    mids = floats.midpoints(y)
    # Beyond the overflow threshold: the first steps past max (the next binade's spacing), where
    # [x] > FLT_MAX but an implementation comparing x, not [x], or clamping late still says max
    # (onnxruntime's E4M3FN saturate=0 does for 480..495: fact E28, qconform/docs/facts.md), and far beyond.
    ulp = 2.0 ** (math.floor(math.log2(f.max_finite)) - f.mbits)
    over = np.array([f.max_finite + ulp * k for k in (1, 1.25, 1.5)] + [f.max_finite * k for k in (1.5, 2, 4)])
    over = np.concatenate([over, -over])
    return vals, np.concatenate([mids, over])


def _q(c: qdq.Combo) -> Iterator[Draft]:
    vals, edges = _q_values(c.y)
    s = _pow2_scale(c, 4 * c.y.float_format.max_finite)
    if c.x.is_float:
        edges = qdq.around(edges * s, c.x)
        specials = [np.inf, -np.inf, np.nan]
    else:
        edges, specials = edges * s, []
    xs = np.concatenate([qdq.keep(vals * s, c.x), qdq.keep(edges, c.x), specials])
    clause = "q-float8" if c.y.name in dtypes.FLOAT8 else "q-float4-float6"
    for sat in (1, 0):
        yield c.draft(FAMILY, f"saturate-{sat}", xs, s, attrs={"saturate": sat}, clause=clause,
                      note=f"every value and midpoint of {c.y.name} times {s}, overflow, ±Inf, NaN")
    yield c.draft(FAMILY, "zero-point-1", qdq.keep(vals[::7] * s, c.x), s, 1.0, clause="q-float8-zero-point",
                  note="a non-zero float zero point: y = round(x / s + zp)")


def _dq(c: qdq.Combo) -> Iterator[Draft]:
    codes = c.x.all_values()
    f, yf = c.x.float_format, c.y.float_format
    big = 2.0 ** (yf.emax - math.floor(math.log2(f.max_finite)))
    small = 2.0 ** (yf.emin - f.emin - f.mbits)
    lo, hi = qdq.pow2_scales(c.s)
    scales = sorted({float(np.clip(s, lo, hi)) for s in (1.0, big, small)})
    x = np.tile(codes, (len(scales), 1))
    yield c.draft(FAMILY, "every-code", x, scales, np.zeros(len(scales)), attrs={"axis": 0}, clause="dq-float8",
                  note=f"every code of {c.x.name}, row i under scale {scales}")


def _every_e8m0(c: qdq.Combo) -> Draft:
    codes = np.arange(255, dtype=np.uint64)
    name = "every-e8m0-scale"
    if (c.x if c.quantize else c.y).name != "float32":  # exhaustive once per version and side
        codes = np.unique(np.concatenate([codes[::16], codes[120:136], codes[-3:]]))
        name = "e8m0-scales"
    scales = floats.decode(codes, c.s)
    row = qdq.keep([0, 1, -1, 1.5, -3, 1000, 2.0 ** 20], c.x)
    if c.x.is_float:
        row = np.concatenate([row, [np.inf, np.nan]] if c.x.float_format.has_inf else [row, [np.nan]])
    x = np.tile(row, (len(scales), 1))
    return c.draft(FAMILY, name, x, scales, np.full(len(scales), c.zero()), attrs={"axis": 0},
                   clause="q-division" if c.quantize else "dq-e8m0-scale",
                   note="row i: the i-th of the scales 2^(code-127) listed in x_scale")


def generate() -> Iterator[Draft]:
    for c in qdq.combos():
        if not applies(c.spec, c.types):
            continue
        if c.q.is_float:
            yield from (_q if c.quantize else _dq)(c)
        if qdq.exponent_only(c.s):
            yield _every_e8m0(c)

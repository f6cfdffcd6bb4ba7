"""Family "ties": quotients exactly k + 0.5 and one float step either side, where round-half-away,
truncation and multiply-by-reciprocal part from round-half-to-even (qconform/docs/semantics.md#q-rounding).

QuantizeLinear to integer types: for k over the whole output range (all of it up to 8 bits; both
ends, around zero and a spread beyond) the data x = (k - zp + 0.5) * s and its neighbours in x's
type, for a power-of-two scale, a scale whose reciprocal is inexact (6: x * (1/6) misses the tie),
and the smallest and largest usable powers of two (float32 combinations get all four, the
others the power of two and one more, rotated). DequantizeLinear: products (x - zp) * s whose
exact value needs one bit more than the output holds (a scale one ulp above 1), so the output
rounding is a tie or next to one (qconform/docs/semantics.md#dq-precision)."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from qconform.case import Draft
from qconform.generators import qdq
from qconform.schemas import OpSpec

FAMILY = "ties"


def applies(spec: OpSpec, combo: dict[str, str]) -> bool:
    if not qdq.is_qdq(spec):
        return False
    c = qdq.Combo(spec, combo)
    if c.quantize:
        return c.y.is_integer
    return not qdq.exponent_only(c.s)  # an e8m0 scale only shifts exponents


def _scales(c: qdq.Combo) -> list[tuple[str, float]]:
    lo_s, hi_s = qdq.pow2_scales(c.s)
    lo_x, hi_x = qdq.pow2_scales(c.x) if c.x.is_float else (2.0, 2.0 ** 31)
    span = 2.0 ** (c.y.bits + 1)
    out = [("pow2-scale", 2.0), ("inexact-reciprocal", 6.0), ("tiny-scale", max(lo_s, lo_x)),
           ("huge-scale", min(hi_s, 2.0 ** np.floor(np.log2(hi_x / span))))]
    return [(n, s) for n, s in out if qdq.representable(np.array([s]), c.s)[0]]


def _quantize(c: qdq.Combo) -> Iterator[Draft]:
    lo, hi = c.y.qrange
    zp = c.zero()
    ks = np.array(qdq.sample_ints(lo - 1, hi, mid=zp), dtype=np.float64)
    scales = _scales(c)
    if not qdq.primary(c):  # the power of two always; one of the others, rotated over combinations
        scales = scales[:1] + qdq.rotate(scales[1:], c.prefix + "/" + FAMILY, 1)
    for name, s in scales:
        ties = qdq.keep((ks - zp + 0.5) * s, c.x)
        xs = qdq.keep(qdq.around(ties, c.x), c.x)
        if len(ties):
            yield c.draft(FAMILY, name, xs, s, zp, clause="q-rounding",
                          note=f"{len(ties)} exact ties x/s = k + 0.5, each with its neighbours")


def _dequantize(c: qdq.Combo) -> Iterator[Draft]:
    xs = c.x.all_values() if c.x.bits <= 8 else None
    if xs is None:
        lo, hi = c.x.qrange
        xs = np.array(qdq.sample_ints(lo, hi), dtype=np.float64)
    xs = qdq.keep(np.asarray(xs, dtype=np.float64), c.x)
    s = float(qdq.nextup(np.array([1.0]), c.s)[0]) if c.s.is_float else 3.0
    yield c.draft(FAMILY, "product-ties", xs, s, c.zero(), clause="dq-precision",
                  note="scale one ulp above 1: products need one more bit than the output holds")


def generate() -> Iterator[Draft]:
    for c in qdq.combos():
        if applies(c.spec, c.types):
            yield from (_quantize if c.quantize else _dequantize)(c)

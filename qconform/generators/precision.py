"""Family "precision": values placed where the compute precision changes the result
(qconform/docs/semantics.md#q-division, #q-division-half, #q-int32-input, #dq-precision, #dq-subtraction).

QuantizeLinear: quotients a little off k + 0.5 (2^-6 down to 2^-22) under scales 1, 3, 0.1 and
1/3 rounded to the scale type, so a quotient computed in float16, bfloat16, float32 or float64
rounds differently; the ``precision`` attribute (opset 23+) set to each float type in turn;
int32 data past 2^24, where float32 can no longer hold x and the division sees a rounded x.
DequantizeLinear: wide differences x − zp with non-zero zero points under inexact scales, where
subtracting first, distributing (x·s − zp·s) and the multiply's precision disagree. Where the
spec allows several readings the oracle records them all; a case fails only if none matches."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from qconform import dtypes
from qconform.case import Draft
from qconform.generators import qdq
from qconform.oracle.arith import fl
from qconform.schemas import OpSpec

FAMILY = "precision"
OFFSETS = [s * 2.0 ** -e for e in (6, 9, 12, 14, 17, 22) for s in (1, -1)]
KS = (-300, -129, -128, -33, -9, -3, -2, -1, 0, 1, 2, 3, 9, 33, 127, 128, 255, 300)  # k - zp
PRECISIONS = ("float32", "float16", "bfloat16")


def _half(t) -> bool:
    return t.is_float and t.bits == 16


def applies(spec: OpSpec, combo: dict[str, str]) -> bool:
    if not qdq.is_qdq(spec):
        return False
    c = qdq.Combo(spec, combo)
    if c.quantize:
        return _half(c.x) or _half(c.s) or c.x.name != c.s.name or c.has("precision")
    return not qdq.exponent_only(c.s)  # an e8m0 scale multiplies exactly


def _scales(c: qdq.Combo) -> np.ndarray:
    if c.s.is_integer or qdq.exponent_only(c.s):
        return qdq.keep([1.0, 3.0, 7.0, 0.5, 4.0], c.s)[:3]
    return np.unique(fl(c.s, np.array([1.0, 3.0, 0.1, 1 / 3])))


def _near_ties(c: qdq.Combo, s: float) -> np.ndarray:
    lo, hi = qdq.value_range(c.y) if c.y.is_integer else (-8, 8)
    ks = np.array(KS, dtype=np.float64)
    ks = ks[(ks + c.zero() >= lo - 1) & (ks + c.zero() <= hi)]
    q = (ks[:, None] + 0.5 + np.array(OFFSETS)[None, :]).ravel()
    x = q * s
    if c.x.is_integer:
        return qdq.keep(np.round(x), c.x)
    return qdq.keep(fl(c.x, x), c.x)


def _rows(c: qdq.Combo, name: str, rows: list[np.ndarray], scales, zps, clause: str, note: str,
          attrs=None) -> Iterator[Draft]:
    """One per-axis case over all rows where the version has an axis, else one case per row."""
    attrs = dict(attrs or {})
    if c.has("axis"):
        width = max(len(r) for r in rows)
        x = np.stack([np.resize(r, width) for r in rows])
        yield c.draft(FAMILY, name, x, list(scales), list(zps), attrs={**attrs, "axis": 0}, clause=clause,
                      note=note)
        return
    for i, (r, s, z) in enumerate(zip(rows, scales, zps)):
        yield c.draft(FAMILY, f"{name}-{i}", r, s, z, attrs=attrs, clause=clause, note=note)


def _int32_rows(c: qdq.Combo) -> tuple[list[np.ndarray], list[float]]:
    bits = c.y.bits if c.y.is_integer else 8
    s = 2.0 ** max(0, 25 - bits)
    ks = np.arange(-4, 4) + (2 ** (bits - 1) - 8 if c.y.is_integer else 0)
    x = ((ks + 0.5) * s)[:, None] + np.array([-3, -1, 0, 1, 3])[None, :]
    return [qdq.keep(np.round(x.ravel()), c.x)], [s]


def _quantize(c: qdq.Combo) -> Iterator[Draft]:
    if c.x.is_integer:
        rows, scales = _int32_rows(c)
        scales = [s for s in scales if qdq.representable(np.array([s]), c.s)[0]] or [1.0]
        yield from _rows(c, "int32-past-2^24", rows, scales, [c.zero()] * len(rows), "q-int32-input",
                         "int32 x near (k + 0.5) * s beyond 2^24: float32 cannot hold x exactly")
        return
    scales = _scales(c)
    rows = [_near_ties(c, s) for s in scales]
    keep = [i for i, r in enumerate(rows) if len(r)]
    rows, scales = [rows[i] for i in keep], scales[keep]
    clause = "q-division-half" if _half(c.x) or _half(c.s) else "q-division"
    yield from _rows(c, "near-ties", rows, scales, [c.zero()] * len(rows), clause,
                     "quotients k + 0.5 ± 2^-6 .. 2^-22 under scales " + ", ".join(map(repr, scales)))
    if c.has("precision") and c.s.is_float and not qdq.exponent_only(c.s):
        p = qdq.rotate([t for t in PRECISIONS if t != c.s.name] or list(PRECISIONS), c.prefix + "/" + FAMILY, 1)[0]
        yield from _rows(c, f"precision-{p}", rows, scales, [c.zero()] * len(rows), "q-division",
                         f"precision attribute {p}", attrs={"precision": dtypes.get(p).onnx})


def _dequantize(c: qdq.Combo) -> Iterator[Draft]:
    if c.x.is_integer:
        lo, hi = c.x.qrange
        xs = qdq.keep([lo, lo + 1, lo + 3, -2049, -257, -1, 0, 1, 3, 255, 257, 2049, 4097, 65535, 2 ** 24 + 1,
                       hi - 2, hi - 1, hi], c.x)
        zps = [z for z in (c.zero() + 1, float(lo), float(hi)) if qdq.representable(np.array([z]), c.x)[0]]
    else:
        xs = np.asarray([v for v in qdq.keep(np.linspace(-6, 6, 49), c.x)])
        zps = [0.0]
    scales = _scales(c)
    rows = [xs] * len(scales)
    zp = [zps[i % len(zps)] for i in range(len(scales))]
    yield from _rows(c, "wide-differences", rows, scales, zp, "dq-subtraction",
                     "x - zp wider than the output's precision, inexact scales, non-zero zero points")


def generate() -> Iterator[Draft]:
    for c in qdq.combos():
        if applies(c.spec, c.types):
            yield from (_quantize if c.quantize else _dequantize)(c)

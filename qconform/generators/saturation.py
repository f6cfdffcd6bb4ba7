"""Family "saturation": QuantizeLinear results landing on qmin−1, qmin, qmin+1, qmax−1, qmax,
qmax+1 (and half a step either side, and far beyond) after the zero-point shift, with the zero
point at qmin, mid-range and qmax (one row each of a per-axis case where the version has an axis),
for every integer output width (qconform/docs/semantics.md#q-saturation-int).

Wrap-around, a symmetric clamp (int8 to ±127), saturating before adding the zero point, or an
off-by-one range for 2- and 4-bit types each give a wrong value here.

``wide-quotients`` (float32 data and scale only): quotients from 2^31 to beyond 2^63 and ±Inf, with
the zero point at qmin and at qmax, in one case. An int32 intermediate (saturating or not) goes
wrong from 2^31, a saturating int64 one only from 2^63 (where the zero point then wraps it), so the
case tells the two apart."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from qconform.case import Draft
from qconform.generators import qdq
from qconform.oracle.arith import fl
from qconform.schemas import OpSpec

FAMILY = "saturation"
SCALE = 2.0  # a power of two: every target (t - zp) * 2 is exact wherever x's type allows


def applies(spec: OpSpec, combo: dict[str, str]) -> bool:
    return qdq.is_qdq(spec) and qdq.Combo(spec, combo).quantize and qdq.Combo(spec, combo).y.is_integer


def _targets(lo: int, hi: int) -> np.ndarray:
    edges = np.array([lo - 1, lo, lo + 1, hi - 1, hi, hi + 1], dtype=np.float64)
    far = np.array([lo - 2 * (hi - lo + 1), hi + 2 * (hi - lo + 1)], dtype=np.float64)
    return np.concatenate([edges, edges - 0.5, edges + 0.5, far])


def _xs(c: qdq.Combo, zp: float) -> np.ndarray:
    lo, hi = c.y.qrange
    exact = (_targets(lo, hi) - zp) * SCALE
    if c.x.is_float:  # where x's type cannot hold a target, its nearest values either side
        exact = qdq.around(fl(c.x, exact), c.x)
    else:
        exact = np.clip(exact, *c.x.qrange)
    return qdq.keep(exact, c.x)


# |x / s| from the int32 limit to beyond the int64 one (float32 values; 2^63 - 2^39 is the largest below 2^63)
WIDE = [2.0 ** 31, 3e9, 2.0 ** 40, 2.0 ** 62, 2.0 ** 63 - 2.0 ** 39, 2.0 ** 63, 2.0 ** 64, 1e30, np.inf]


def _wide(c: qdq.Combo) -> Iterator[Draft]:
    lo, hi = c.y.qrange
    zps = [float(z) for z in dict.fromkeys((hi, lo))]
    row = qdq.keep(np.concatenate([WIDE, -np.array(WIDE)]), c.x)
    row = np.concatenate([row, [np.inf, -np.inf]])
    note = "|x / y_scale| from 2^31 to past 2^63, and +-Inf"
    if c.has("axis"):
        x = np.stack([row] * len(zps))
        yield c.draft(FAMILY, "wide-quotients", x, [1.0] * len(zps), zps, attrs={"axis": 0},
                      clause="q-saturation-int", note=f"row i: zero point {zps}[i]; {note}")
        return
    for zp in zps:
        yield c.draft(FAMILY, f"wide-quotients-zp-{int(zp)}", row, 1.0, zp, clause="q-saturation-int",
                      note=f"zero point {zp}; {note}")


def generate() -> Iterator[Draft]:
    for c in qdq.combos(quantize=True):
        if not applies(c.spec, c.types):
            continue
        if qdq.primary(c):
            yield from _wide(c)
        lo, hi = c.y.qrange
        zps = [float(z) for z in dict.fromkeys((lo, c.zero(), hi))]
        rows = [_xs(c, zp) for zp in zps]
        if c.has("axis"):  # one case, one row per zero point
            width = max(map(len, rows))
            x = np.stack([np.concatenate([r, np.resize(r, width - len(r))]) for r in rows])
            yield c.draft(FAMILY, "zp-extremes", x, [SCALE] * len(zps), zps, attrs={"axis": 0},
                          clause="q-saturation-int", note=f"row i: zero point {zps}[i]; results at "
                          "qmin-1..qmin+1, qmax-1..qmax+1 and beyond")
            continue
        for zp, row in zip(zps, rows):
            yield c.draft(FAMILY, f"zp-{int(zp)}", row, SCALE, zp, clause="q-saturation-int",
                          note=f"zero point {zp}: results at qmin-1..qmin+1, qmax-1..qmax+1 and beyond")

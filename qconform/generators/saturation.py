"""Family "saturation": QuantizeLinear results landing on qmin−1, qmin, qmin+1, qmax−1, qmax,
qmax+1 (and half a step either side, and far beyond) after the zero-point shift, with the zero
point at qmin, mid-range and qmax (one row each of a per-axis case where the version has an axis),
for every integer output width (qconform/docs/semantics.md#q-saturation-int).

Wrap-around, a symmetric clamp (int8 to ±127), saturating before adding the zero point, or an
off-by-one range for 2- and 4-bit types each give a wrong value here."""
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


def generate() -> Iterator[Draft]:
    for c in qdq.combos(quantize=True):
        if not applies(c.spec, c.types):
            continue
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

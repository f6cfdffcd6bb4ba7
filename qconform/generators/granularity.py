"""Family "granularity": which scale and zero point each element uses
(qconform/docs/semantics.md#granularity-per-tensor, #granularity-per-axis, #granularity-blocked).

Per-axis on every axis of a rank-3 tensor (0, 1, -1 and -3, and -1 next to an equal dimension);
1-element scales of shape [] and [1]; blocked with block size 1, the full dimension, a size leaving
a partial last block, blocking on the first and a middle (negative) axis, and rank 4. Neighbouring
channels and blocks get different scales and zero points, so an element read with the wrong one
comes out wrong. The float32 combinations of each quantized type get six variants and the others
one, rotated (from a hash of the case-id prefix) so that every variant runs for every quantized
type across the versions."""
from __future__ import annotations

import math
from typing import Iterator

import numpy as np

from qconform.case import Draft
from qconform.generators import qdq
from qconform.oracle.arith import as_float64
from qconform.schemas import OpSpec

FAMILY = "granularity"
PRIMARY = 6  # variants per float32 combination; rotation covers the rest across the versions

# name -> (x shape, attributes, scale shape)
PER_AXIS = [(f"per-axis-{a if a >= 0 else 'neg' + str(-a)}", (2, 3, 5), {"axis": a}, ((2, 3, 5)[a],))
            for a in (0, 1, -1, -3)]  # axes 0, 1, 2 and two negative spellings
# Equal neighbouring dimensions: a negative axis counted one off still fits the scale, and is wrong.
PER_AXIS += [("per-axis-neg1-equal-dims", (2, 3, 3), {"axis": -1}, (3,))]
ONE_ELEMENT = [("scale-shape-scalar", (2, 3, 5), {}, ()), ("scale-shape-1", (2, 3, 5), {}, (1,))]
BLOCKED = [
    ("blocked-1", (2, 3, 7), {"axis": 2, "block_size": 1}, (2, 3, 7)),
    ("blocked-full", (2, 3, 7), {"axis": -1, "block_size": 7}, (2, 3, 1)),
    ("blocked-partial", (2, 3, 7), {"axis": 2, "block_size": 3}, (2, 3, 3)),
    ("blocked-axis0", (5, 3, 4), {"axis": 0, "block_size": 2}, (3, 3, 4)),
    ("blocked-axis-neg2", (2, 7, 3), {"axis": -2, "block_size": 4}, (2, 2, 3)),
    ("blocked-rank4", (2, 3, 5, 4), {"axis": 2, "block_size": 2}, (2, 3, 3, 4)),
]


def applies(spec: OpSpec, combo: dict[str, str]) -> bool:
    return qdq.is_qdq(spec) and "axis" in spec.attrs


def variants(c: qdq.Combo) -> list[tuple]:
    return PER_AXIS + ONE_ELEMENT + (BLOCKED if c.has("block_size") else [])


def _pool(c: qdq.Combo) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(scales, zero points, quantized values) to cycle through; lengths 7, ≤7, ≤11."""
    cand = [2, 4, 1, 8, 16, 32, 64] if c.x.is_integer else [2, 0.5, 4, 0.25, 8, 1, 16, 3, 5, 7]
    scales = qdq.keep(cand, c.s)[:7]
    if c.q.is_integer:
        lo, hi = c.q.qrange
        mid = c.zero()
        zps = qdq.keep(mid + np.array([0, 1, -1, 2, -2, 3, -3]), c.q)
        vals = qdq.keep(mid + np.arange(-6, 7), c.q)
    else:
        zps = np.zeros(1)
        vals = as_float64(c.q.all_values(), c.q)
        vals = vals[np.isfinite(vals) & (np.abs(vals) <= 4) & (vals != 0)]
    return scales, zps, vals


def _draft(c: qdq.Combo, name: str, shape, attrs, s_shape, family: str = FAMILY, clause: str = "") -> Draft:
    """x built from the pool so that element i decodes to the pool value with its own parameters."""
    scales, zps, vals = _pool(c)
    n_s = math.prod(s_shape)
    s = np.resize(scales, n_s).reshape(s_shape)
    zp = np.resize(zps, n_s).reshape(s_shape)
    q = np.resize(vals, math.prod(shape)).reshape(shape)
    if c.quantize:
        block = attrs.get("block_size", 0)
        axis = attrs.get("axis", 1)

        def spread(p):  # each element's own parameter, so x = (q - zp) * s puts q where it belongs
            if p.ndim == 0 or (p.size == 1 and not block):
                return p.reshape(())
            if not block:
                view = [1] * len(shape)
                view[axis] = -1
                return p.reshape(view)
            return np.repeat(p, block, axis=axis).take(range(shape[axis]), axis=axis)

        x = (q - spread(zp)) * spread(s)
    else:
        x = q
    return c.draft(family, name, x, s, zp, attrs=attrs,
                   clause=clause or ("granularity-blocked" if "block_size" in attrs else
                                     "granularity-per-axis" if s_shape and n_s > 1 else "granularity-per-tensor"),
                   note=f"x {shape}, scale {s_shape}, attributes {attrs}")


def generate() -> Iterator[Draft]:
    for c in qdq.combos():
        if not applies(c.spec, c.types):
            continue
        chosen = qdq.choose(variants(c), c, FAMILY, PRIMARY)
        for v in chosen:
            yield _draft(c, *v)

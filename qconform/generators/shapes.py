"""Family "shapes": empty tensors, zero-size dimensions (per-tensor and per-axis on another axis),
and ranks 0 through 5 (qconform/docs/semantics.md#principles: the output has x's shape, element for element).

A kernel that flattens rank 0 to [1], crashes or allocates on zero elements, or mixes up strides
for high ranks fails here. The float32 combinations of each quantized type get four variants and the
others one, rotated (from a hash of the case-id prefix) across the combinations."""
from __future__ import annotations

import math
from typing import Iterator

import numpy as np

from qconform.case import Draft
from qconform.generators import qdq
from qconform.oracle.arith import as_float64, fl
from qconform.schemas import OpSpec

FAMILY = "shapes"
PRIMARY = 4  # variants per float32 combination; rotation covers the rest across the versions

RANKS = [("rank0", ()), ("rank1", (7,)), ("rank2", (3, 5)), ("rank3", (2, 3, 4)), ("rank4", (2, 1, 3, 2)),
         ("rank5", (2, 1, 3, 1, 2))]
EMPTY = [("empty", (0,)), ("zero-size-dim", (2, 0, 3))]
EMPTY_AXIS = [("zero-size-dim-per-axis", (2, 0, 3), 0)]


def applies(spec: OpSpec, combo: dict[str, str]) -> bool:
    return qdq.is_qdq(spec)


def _values(c: qdq.Combo, n: int) -> np.ndarray:
    if c.q.is_integer:
        lo, hi = c.q.qrange
        q = np.array(qdq.sample_ints(lo, hi, edge=2, spread=8), dtype=np.float64)
    else:
        q = as_float64(c.q.all_values(), c.q)
        q = q[np.isfinite(q)][:: max(1, c.q.bits // 2)]
    q = np.resize(q, n)
    if not c.quantize:
        return q
    lo, hi = qdq.value_range(c.x)
    return fl(c.x, np.clip((q - c.zero()) * 2.0, lo, hi)) if c.x.is_float else np.clip((q - c.zero()) * 2.0, lo, hi)


def _draft(c: qdq.Combo, name: str, shape: tuple[int, ...], axis: int | None = None) -> Draft:
    x = _values(c, math.prod(shape)).reshape(shape)
    if axis is None:
        return c.draft(FAMILY, name, x, 2.0, c.zero(), clause="principles", note=f"x of shape {shape}")
    n = shape[axis]
    return c.draft(FAMILY, name, x, np.full(n, 2.0), np.full(n, c.zero()), attrs={"axis": axis},
                   clause="granularity-per-axis", note=f"x of shape {shape}, per-axis on axis {axis}")


def generate() -> Iterator[Draft]:
    for c in qdq.combos():
        variants = [(n, s, None) for n, s in RANKS + EMPTY]
        if c.has("axis"):
            variants += EMPTY_AXIS
        chosen = qdq.choose(variants, c, FAMILY, PRIMARY)
        for v in chosen:
            yield _draft(c, *v)

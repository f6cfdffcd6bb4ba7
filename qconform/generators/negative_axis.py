"""Family "negative-axis": per-axis quantization with a negative ``axis`` on data whose dimensions
differ, so that each wrong reading of ``axis = -k`` -- rank - k - 1 (off by one), k (its absolute
value) and k - 1 (counted from the front) -- fits the scale's length on its own case with values no
other reading gives (the others are rejected by the shape or give other values)
(qconform/docs/semantics.md#granularity-per-axis).

Only the float32 combinations of the 8-bit integer quantized types: the reading of the axis does
not depend on the types around it."""
from __future__ import annotations

from typing import Iterator

from qconform.case import Draft
from qconform.generators import granularity, qdq

FAMILY = "negative-axis"

# name -> (x shape, attributes, scale shape); the wrong reading that fits is in the name. Another
# axis of the scale's length comes before it where it can, so that reading the scale along "the
# first other axis of that length" (per-axis-wrong-axis) gives other values.
VARIANTS = [
    ("axis-neg1-fits-rank-minus-2", (5, 3, 5, 5), {"axis": -1}, (5,)),
    ("axis-neg1-fits-dim-1", (5, 5, 3, 5), {"axis": -1}, (5,)),
    ("axis-neg2-fits-dim-1", (5, 5, 3, 5, 2), {"axis": -2}, (5,)),
    ("axis-neg2-fits-dim-2", (3, 5, 5), {"axis": -2}, (5,)),
]


def generate() -> Iterator[Draft]:
    for c in qdq.combos():
        if not c.has("axis") or not qdq.primary(c) or c.q.name not in ("int8", "uint8"):
            continue
        for name, shape, attrs, s_shape in VARIANTS:
            yield granularity._draft(c, name, shape, attrs, s_shape, family=FAMILY, clause="granularity-per-axis")

"""Family "negative-axis": per-axis quantization with a negative ``axis`` on data whose dimensions
differ, so that each wrong reading of ``axis = -k`` -- rank - k - 1 (off by one), k (its absolute
value) and k - 1 (counted from the front) -- matches the scale's length on its own case and is
rejected by the shape on the others (qconform/docs/semantics.md#granularity-per-axis).

Only the float32 combinations of the 8-bit integer quantized types: the reading of the axis does
not depend on the types around it."""
from __future__ import annotations

from typing import Iterator

from qconform.case import Draft
from qconform.generators import granularity, qdq

FAMILY = "negative-axis"

# name -> (x shape, attributes, scale shape); the wrong reading that fits is in the name
VARIANTS = [
    ("axis-neg1-fits-rank-minus-2", (2, 3, 5, 5), {"axis": -1}, (5,)),
    ("axis-neg1-fits-dim-1", (2, 5, 3, 5), {"axis": -1}, (5,)),
    ("axis-neg1-fits-dim-0", (5, 2, 3, 5), {"axis": -1}, (5,)),
    ("axis-neg2-fits-dim-2", (3, 5, 5), {"axis": -2}, (5,)),
]


def generate() -> Iterator[Draft]:
    for c in qdq.combos():
        if not c.has("axis") or not qdq.primary(c) or c.q.name not in ("int8", "uint8"):
            continue
        for name, shape, attrs, s_shape in VARIANTS:
            yield granularity._draft(c, name, shape, attrs, s_shape, family=FAMILY, clause="granularity-per-axis")

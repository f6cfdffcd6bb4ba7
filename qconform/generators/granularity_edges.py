"""Family "granularity-edges": the granularity clauses family "granularity" leaves untouched
(qconform/docs/semantics.md#granularity-per-tensor, #granularity-blocked).

- a 1-element 1-D scale on an axis of length 1: per-axis by the text and per-tensor alike, so
  normative (on an axis of another length the model is invalid: family "granularity" keeps
  ``scale-shape-1`` as information);
- a scalar scale with ``block_size`` > 0: granularity is "determined by the shape of y_scale", and
  block_size is "Used only for blocked quantization", so it is per-tensor;
- blocked quantization of rank-1 and rank-2 data (rank-2 weight matrices are what it is for),
  on axis 0, a positive axis 1, and -1, with a partial last block;
- blocked quantization of a square [4, 4] x with one block on axis 1 (scale [4, 1]): the scale with
  its size-1 dimension dropped broadcasts numpy-style (right-aligned) to x, validly and wrongly.
Only the float32 combinations of each quantized type, with every variant: granularity does not depend
on the float types around it, and family "granularity" already rotates through those."""
from __future__ import annotations

from typing import Iterator

from qconform.case import Draft
from qconform.generators import granularity, qdq

FAMILY = "granularity-edges"

# name -> (x shape, attributes, scale shape, clause)
AXIS = [("scale-shape-1-axis-length-1", (2, 1, 5), {"axis": 1}, (1,), "granularity-per-tensor")]
BLOCKED = [
    ("scalar-scale-with-block-size", (2, 3, 4), {"axis": 1, "block_size": 2}, (), "granularity-per-tensor"),
    ("blocked-rank1", (7,), {"axis": 0, "block_size": 3}, (3,), "granularity-blocked"),
    ("blocked-rank2-axis0", (5, 3), {"axis": 0, "block_size": 2}, (3, 3), "granularity-blocked"),
    ("blocked-rank2-axis1", (3, 8), {"axis": 1, "block_size": 3}, (3, 3), "granularity-blocked"),
    ("blocked-rank2-axis-neg1", (4, 6), {"axis": -1, "block_size": 4}, (4, 2), "granularity-blocked"),
    ("blocked-square-one-block-axis1", (4, 4), {"axis": 1, "block_size": 4}, (4, 1), "granularity-blocked"),
]


def generate() -> Iterator[Draft]:
    for c in qdq.combos():
        if not c.has("axis") or not qdq.primary(c):
            continue
        for name, shape, attrs, s_shape, clause in AXIS + (BLOCKED if c.has("block_size") else []):
            yield granularity._draft(c, name, shape, attrs, s_shape, family=FAMILY, clause=clause)

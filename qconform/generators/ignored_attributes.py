"""Family "ignored-attributes": attributes the text says do not apply, present anyway:
their result is the result without them.

- ``saturate=0`` with an integer output: "The saturation attribute applies only to float 8 types"
  (QuantizeLinear-19+), so out-of-range quotients still saturate (qconform/docs/semantics.md#q-saturation-int);
- an explicit ``axis`` with a per-tensor (scalar) scale: the axis is "Ignored for per-tensor
  quantization" (QuantizeLinear-13+, DequantizeLinear-13+; #granularity-per-axis)."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from qconform.case import Draft
from qconform.generators import qdq

FAMILY = "ignored-attributes"


def _values(c: qdq.Combo) -> np.ndarray:
    """Quantized values from both ends of the range and around the zero point, as x."""
    if c.q.is_integer:
        lo, hi = c.q.qrange
        q = np.array(qdq.sample_ints(lo, hi, edge=2, spread=6), dtype=np.float64)
    else:
        q = np.array([-4.0, -1.0, -0.5, 0.0, 0.5, 1.0, 4.0])
    if not c.quantize:
        return q
    return np.concatenate([(q - c.zero()) * 2.0, [-1e6, 1e6]])  # beyond the range: saturation shows


def generate() -> Iterator[Draft]:
    for c in qdq.combos():
        if not qdq.primary(c):
            continue
        if c.quantize and c.y.is_integer and c.has("saturate"):
            yield c.draft(FAMILY, "saturate-0-integer-output", _values(c), 2.0, c.zero(), attrs={"saturate": 0},
                          clause="q-saturation-int", note="saturate=0 applies only to float8: integers still saturate")
        if c.has("axis"):
            x = _values(c)
            x = np.resize(x, 2 * 3 * ((len(x) + 5) // 6)).reshape(2, 3, -1)
            yield c.draft(FAMILY, "per-tensor-explicit-axis", x, 2.0, c.zero(), attrs={"axis": 0},
                          clause="granularity-per-axis", note="axis=0 with a scalar scale: ignored")

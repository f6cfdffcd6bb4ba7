"""Family "signed-zero": -0.0 into a float8/float4/float6 output with no zero point, or a +0 one.
(-0) + (+0) is +0 under IEEE; implementations that skip adding a zero zero
point keep -0: both are readings (qconform/docs/semantics.md#q-float8-zero-point), and the fnuz kinds
have no -0 at all."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from qconform.case import Draft
from qconform.generators import qdq
from qconform.generators.common import draft

FAMILY = "signed-zero"
X = np.array([-0.0, 0.0, -1e-30, 1e-30, -1.0, 1.0])  # ±0, and negatives that round to zero


def generate() -> Iterator[Draft]:
    for c in qdq.combos(quantize=True):
        if not qdq.primary(c) or not c.y.is_float:
            continue
        yield c.draft(FAMILY, "negative-zero-zero-point-pos-zero", X, 1.0, 0.0, clause="q-float8-zero-point",
                      note="x=-0 with y_zero_point=+0")
        if c.has("output_dtype"):
            names = c.names
            yield draft(c.spec, c.types, FAMILY, "negative-zero-no-zero-point", {names[0]: X, names[1]: 1.0},
                        {"output_dtype": c.y.onnx}, clause="q-float8-zero-point",
                        note="x=-0, no y_zero_point (output_dtype gives the type)")

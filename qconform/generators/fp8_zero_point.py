"""Family "fp8-nonzero-zero-point": DequantizeLinear of float8/float4/float6 x with a non-zero zero
point of the same type. The text keeps the formula "for consistency", so the
zero point is subtracted, exactly (qconform/docs/semantics.md#dq-float8); onnx.reference and
onnxruntime refuse or ignore it (errata)."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from qconform.case import Draft
from qconform.generators import qdq
from qconform.oracle.arith import as_float64

FAMILY = "fp8-nonzero-zero-point"


def generate() -> Iterator[Draft]:
    for c in qdq.combos(quantize=False):
        if not qdq.primary(c) or not c.x.is_float:
            continue
        v = as_float64(c.x.all_values(), c.x)
        fin = v[np.isfinite(v)]
        x = np.concatenate([fin[:: max(1, len(fin) // 12)], [0.5, 1.0, -1.0]])
        x = x[qdq.representable(x, c.x)]
        for name, zp in (("zero-point-one", 1.0), ("zero-point-minus-half", -0.5)):
            if qdq.representable(np.array([zp]), c.x)[0]:
                yield c.draft(FAMILY, name, x, 0.5, zp, clause="dq-float8",
                              note=f"x_zero_point {zp} of x's type: subtracted per the formula")

"""Family "defaults": the optional inputs and attributes left out.

QuantizeLinear with neither ``y_zero_point`` nor ``output_dtype``: the output is uint8 with a zero
point of 0 ("Default is uint8 with zero point of 0 if it's not specified"), at every version.
DequantizeLinear without ``x_zero_point``: "Zero point is 0 when it's not specified", at every
version and quantized type (qconform/docs/semantics.md#q-output-type, #dq-formula)."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from qconform.case import Draft
from qconform.generators import qdq
from qconform.generators.common import draft
from qconform.oracle.arith import as_float64

FAMILY = "defaults"


def _q(c: qdq.Combo) -> Draft:
    # negatives saturate to 0, ties round to even, large values to 255: what uint8 with zp 0 implies
    x = np.array([-300.0, -3.0, -0.5, 0.0, 0.5, 1.5, 2.5, 3.0, 100.0, 254.5, 255.5, 1000.0]) * 0.5
    names = c.names
    return draft(c.spec, c.types, FAMILY, "no-zero-point-no-output-dtype", {names[0]: x, names[1]: 0.5},
                 clause="q-output-type", note="y_zero_point and output_dtype both left out: uint8, zero point 0")


def _dq(c: qdq.Combo) -> Draft:
    if c.x.is_integer:
        lo, hi = c.x.qrange
        x = np.array(qdq.sample_ints(lo, hi, edge=3, spread=6), dtype=np.float64)
    else:
        v = as_float64(c.x.all_values(), c.x)
        x = v[np.isfinite(v)][:: max(1, len(v) // 24)]
    attrs = c.base_attrs(with_zero_point=False)
    names = c.names
    return draft(c.spec, c.types, FAMILY, "no-zero-point", {names[0]: x, names[1]: 0.5}, attrs,
                 clause="dq-formula", note="x_zero_point left out: zero point 0")


def generate() -> Iterator[Draft]:
    for c in qdq.combos():
        if not qdq.primary(c):
            continue
        if c.quantize and c.y.name == "uint8":
            yield _q(c)
        elif not c.quantize:
            yield _dq(c)

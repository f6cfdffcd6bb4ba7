"""DynamicQuantizeLinear's range and scale computed another way."""
from __future__ import annotations

import numpy as np

from qconform.diagnosis.models.base import _dev
from qconform.diagnosis.models.common import DQL, _F32


class DqlRangeExcludesZero:
    def dql_range(self, xv):
        if not xv.size:
            return 0.0, 0.0
        return float(xv.max()), float(xv.min())


class DqlScaleReciprocal:
    """y_scale = range * fl32(1 / 255): a division by a constant rewritten as a multiplication."""

    def dql_scale(self, rng):
        with np.errstate(all="ignore"):
            return float(self.fl(_F32, rng * self.fl(_F32, np.float64(1.0) / 255.0)))



#: The deviations of this step, each beside its mixin above (the registry's order: ``ORDER``).
DEVIATIONS = [
    _dev("dql-range-excludes-zero", DQL,
         "Your DynamicQuantizeLinear computes the scale from max(x) - min(x) without first widening the "
         "range to include 0.",
         "onnx/onnx#5597 (the spec text said (max(x) - min(x)) / 255 while the reference widens to 0); "
         "onnx/onnx-mlir#2129 (review of the zero-point formula).",
         "DynamicQuantizeLinear, x=[1, 2, 3, 4]: scale 4/255 expected, 3/255 given",
         DqlRangeExcludesZero, lambda d: True, ("dynamic-range", "ranges")),
    _dev("dql-scale-reciprocal", DQL,
         "Your DynamicQuantizeLinear computes y_scale as range * fl32(1/255) instead of range / 255: one ulp high "
         "for some ranges, and y follows.",
         "OpenVINO 2026.4.1 and tinygrad 0.14.0 (issue 20's probe: the same y_scale bits, 0x3AAB5602 for "
         "0x3AAB5601, in both); a division by a constant rewritten as a multiplication.",
         "DynamicQuantizeLinear, x = -1/3 spread: y_scale 0x3AAB5601 expected, 0x3AAB5602 given",
         DqlScaleReciprocal, lambda d: d.op == DQL, ("constant", "dynamic-range")),
]

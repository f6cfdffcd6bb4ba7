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


class DqlScaleInFloat64:
    """y_scale = fl32((max - min) / 255) with the range and the division in float64 (double
    arithmetic on the float32 extremes, one rounding to float32 at the end); the zero point and y
    then use that float32 scale as the spec does."""

    def dql_width(self, hi, lo):
        return float(np.float64(hi) - np.float64(lo))


#: The deviations of this step, each beside its mixin above (the registry's order: ``ORDER``).
class DqlZeroRangeScaleOne:
    """A zero range (all +-0, or empty) special-cased to y_scale = 1.0 (then zp 0 and y 0)."""

    def dql_scale(self, rng):
        return 1.0 if rng == 0 else super().dql_scale(rng)


class DqlZeroRangeUnitRange:
    """A zero range replaced by a range of 1 before the division: y_scale = fl32(1 / 255)."""

    def dql_scale(self, rng):
        return super().dql_scale(np.float64(1.0) if rng == 0 else rng)


def _zero_range(d) -> bool:
    x = d.inputs[0].value
    return d.op == DQL and (x.size == 0 or not np.any(np.asarray(x, np.float64)))


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
    _dev("dql-scale-in-float64", DQL,
         "Your DynamicQuantizeLinear computes the scale (max(x) - min(x)) / 255 in float64 and rounds it to float32 "
         "once, where the spec rounds max - min to float32 first: y_scale differs by an ulp where the float32 range "
         "is inexact, and y and y_zero_point follow.",
         "A dynamic scale computed in double is common in quantization code: pytorch/ao#2085 (the dynamic activation "
         "scale 'is always FP64' in its PTQ routines), facebookexperimental/protoquant#18 ('explicitly use fp64 "
         "intermediates to calculate scale ... to match the cuda reference'), qualcomm/aimet#3231 ('Always compute "
         "scale in float32'); onnxruntime's quantization tools compute rmin/scale in float64 "
         "(microsoft/onnxruntime#28522). No DynamicQuantizeLinear kernel is reported doing it.",
         "DynamicQuantizeLinear, x=[-127.49999237, 127.5, 0] (min one float32 step above -127.5): fl32(254.99999237) "
         "= 255, so y_scale 1.0 and y_zero_point 127 expected, 0.99999994 and 128 given",
         DqlScaleInFloat64, lambda d: d.op == DQL, ("dynamic-range", "ranges")),
    _dev("dql-zero-range-scale-one", DQL,
         "Your DynamicQuantizeLinear special-cases an all-zero (or empty) x to y_scale = 1.0, where the formula "
         "gives (0 - 0) / 255 = 0.",
         "onnx/onnx#8437 (y_scale for an all-zero input: onnxruntime 1.29.0 gives 1.0, as the C++ line quoted in "
         "onnx.reference's op_dynamic_quantize_linear.py; the function body and the text give 0); onnxruntime "
         "1.32.0 and onnxruntime-web 1.30.0 here (facts E37, E177).",
         "DynamicQuantizeLinear, x=[0, -0, 0]: y_scale 0 expected, 1.0 given",
         DqlZeroRangeScaleOne, _zero_range, ("constant", "shapes")),
    _dev("dql-zero-range-unit-range", DQL,
         "Your DynamicQuantizeLinear replaces a zero range (all-zero or empty x) by a range of 1 before dividing "
         "by 255: y_scale = 1/255 where the formula gives 0.",
         "onnx/onnx#8437 (onnx.reference's `1.0 if maxx == minx else (maxx - minx)` gives 1/255); onnx/onnx#8438 "
         "proposes the same guard for the function body; onnx.reference 1.23.2 here (fact E15).",
         "DynamicQuantizeLinear, x=[0, 0]: y_scale 0 expected, 0.003921569 (1/255) given",
         DqlZeroRangeUnitRange, _zero_range, ("constant", "shapes")),
]

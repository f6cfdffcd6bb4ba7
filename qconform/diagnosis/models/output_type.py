"""The output type chosen another way."""
from __future__ import annotations

from qconform import dtypes
from qconform.oracle import granularity
from qconform.diagnosis.models.base import _dev
from qconform.diagnosis.models.common import DQ, Q


class DqOutputDtypeIgnored:
    """DequantizeLinear-23+: output_dtype ignored, the output has the scale's type."""

    def output_type(self, draft, scale_t):
        if scale_t == "float8e8m0":
            raise granularity.InvalidModel("a float8e8m0 scale needs output_dtype")
        return scale_t


class QOutputDtypeIgnoredWithoutZeroPoint:
    """QuantizeLinear-21+ without a zero point: output_dtype ignored, uint8 returned."""

    def output_type(self, draft, zp):
        return zp.type if zp is not None else "uint8"



#: The deviations of this step, each beside its mixin above (the registry's order: ``ORDER``).
DEVIATIONS = [
    _dev("dq-output-dtype-ignored", DQ,
         "Your DequantizeLinear-23+ ignores output_dtype and returns the scale's type.",
         "tract 0.23.9 (issue 20's probe: 114 cases, e.g. DequantizeLinear-23/int16-float32-float16/basic/per-axis "
         "returns float32).",
         "DequantizeLinear-23 int8->float16 with a float32 scale: a float16 output expected, float32 given",
         DqOutputDtypeIgnored, lambda d: d.op == DQ and bool(d.attrs.get("output_dtype"))
         and dtypes.get(d.attrs["output_dtype"]).name != d.inputs[1].type, ("basic",)),
    _dev("q-output-dtype-ignored-without-zero-point", Q,
         "Your QuantizeLinear ignores output_dtype when there is no zero point and returns uint8.",
         "tract 0.23.9 (issue 20's probe: QuantizeLinear-24+ without y_zero_point, e.g. "
         "QuantizeLinear-25/float32-int8/random/draw-000, returns uint8).",
         "QuantizeLinear-25 float32 with output_dtype=INT8 and no zero point: an int8 output expected, uint8 given",
         QOutputDtypeIgnoredWithoutZeroPoint, lambda d: d.op == Q and len(d.inputs) < 3
         and dtypes.get(d.attrs.get("output_dtype", 2) or 2).name != "uint8", ("random", "defaults")),
]

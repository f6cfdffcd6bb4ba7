"""Saturating to the output type done another way."""
from __future__ import annotations

import numpy as np

from qconform import dtypes
from qconform.diagnosis.models.base import _dev, _int_saturation, _signed_int_out
from qconform.diagnosis.models.common import DQL, Q, QLMM, _int32_cast


class NarrowSignedRange:
    def saturate(self, v, t):
        t = dtypes.get(t)
        lo, hi = t.qrange
        nan = np.isnan(v)
        return np.clip(np.where(nan, 0.0, v), lo + 1 if t.signed else lo, hi).astype(np.int64), nan


class WrapAround:
    def saturate(self, v, t):
        t = dtypes.get(t)
        lo, _ = t.qrange
        nan = np.isnan(v)
        iv = _int32_cast(np.where(nan, 0.0, v)).astype(np.int64)
        return (iv - lo) % (1 << t.bits) + lo, nan


class CastBeforeClip:
    def saturate(self, v, t):
        t = dtypes.get(t)
        lo, hi = t.qrange
        nan = np.isnan(v)
        return np.clip(_int32_cast(np.where(nan, 0.0, v)), lo, hi).astype(np.int64), nan



#: The deviations of this step, each beside its mixin above (the registry's order: ``ORDER``).
DEVIATIONS = [
    _dev("narrow-signed-range", (Q, QLMM),
         "Your kernel clamps signed outputs to the symmetric range [-127, 127] (int8; -7 for int4, -32767 "
         "for int16) instead of the full two's-complement range.",
         "microsoft/onnxruntime#3442 (QuantizeLinear saturated int8 to [-127, 127]) and "
         "microsoft/onnxruntime#3531 (review: 'the bug about -127 to 127 range'); symmetric/narrow_range "
         "quantization (TensorRT, TF) clamps this way.",
         "QuantizeLinear float32->int8, x=-1000, y_scale=1: -128 expected, -127 given",
         NarrowSignedRange, _signed_int_out, ("saturation", "basic")),
    _dev("wrap-around", (Q, DQL, QLMM),
         "Your kernel converts out-of-range results to the output type by truncating the bits "
         "(wrap-around) instead of saturating: 300 becomes 44 in uint8.",
         "onnx/onnx#6169 and onnx/onnx#7835 (QLinearMatMul reference uses astype, -236 -> 20); "
         "Xilinx/onnx-mlir#145 (QuantizeLinear had no clamp); emmtrix/emx-onnx-cgen#735; "
         "huggingface/sentence-transformers#3847.",
         "QuantizeLinear float32->uint8, x=600, y_scale=2 (300 before saturation)",
         WrapAround, _int_saturation, ("saturation", "basic")),
    _dev("cast-before-clip", (Q, DQL, QLMM),
         "Your kernel converts the rounded value to int32 before clamping, so +Inf, NaN and quotients beyond "
         "2^31 become INT_MIN and then the type's minimum: +Inf quantizes to qmin instead of qmax.",
         "apache/tvm#9558 (+inf cast to int32 gave INT_MIN on x86, INT_MAX on M1); pytorch/pytorch#155109 "
         "and pytorch/pytorch#133557 (inf quantized to 0); onnx's reference np.rint(x).astype(int32) "
         "(docs/STYLE.md).",
         "QuantizeLinear float32->int8, x=[+Inf, 3e9], y_scale=1: 127 expected, -128 given",
         CastBeforeClip, _int_saturation, ("specials", "saturation")),
]

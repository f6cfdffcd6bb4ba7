"""The division x / scale (and the precision it is done in) done another way."""
from __future__ import annotations

import numpy as np

from qconform import dtypes
from qconform.oracle.arith import FLOAT64
from qconform.oracle.quantize import ONCE
from qconform.diagnosis.models.base import _dev, _half_scale, _ieee_involved, _involves, _q_int_or_dql, _q_or_dql, _q_out
from qconform.diagnosis.models.common import DQ, DQL, Q, _bfloat16_from_float32_bits, _minifloat


class ReciprocalMultiply:
    def quotient(self, x, s, prec):
        with np.errstate(all="ignore"):
            inv = self.fl(prec, 1.0 / self.fl(prec, s))
            return self.fl(prec, self.fl(prec, x) * inv)

    def quotient_once(self, x, s, prec):  # the deviating division under the exact-quotient reading too
        return self.quotient(x, s, prec)


class DivideInFloat64:
    def quotient(self, x, s, prec):
        with np.errstate(all="ignore"):
            return self.fl(prec, x) / self.fl(prec, s)  # float64 division, never rounded to prec

    def quotient_once(self, x, s, prec):
        with np.errstate(all="ignore"):
            return np.asarray(x, np.float64) / s

    def add_zero_float(self, q, zero, prec):
        return q + zero


class QuotientInFloat32:
    def division_readings(self, x_t, s_t, attrs):
        out = []
        for name, prec in super().division_readings(x_t, s_t, attrs):
            if prec.removeprefix(ONCE) in dtypes.having("is_half"):
                name, prec = "quotient-in-float32", "float32"
            if all(p != prec for _, p in out):
                out.append((name, prec))
        return out


class QuotientInInputType:
    """The scale converted to x's float16/bfloat16 type and the division done there: the precision
    taken from x, not from y_scale or the 'precision' attribute."""

    def division_readings(self, x_t, s_t, attrs):
        if x_t in dtypes.having("is_half") and s_t != x_t:  # and whatever 'precision' says
            return [(f"quotient-in-{x_t}", x_t)]
        return super().division_readings(x_t, s_t, attrs)


class Bfloat16Truncation:
    def exact_product(self, t, a, b):
        if dtypes.get(t).name != "bfloat16":
            return super().exact_product(t, a, b)
        with np.errstate(all="ignore"):
            return self.fl(t, np.asarray(a, np.float64) * np.asarray(b, np.float64))

    def fl(self, t, v):
        if t == FLOAT64 or dtypes.get(t).name != "bfloat16":
            return super().fl(t, v)
        return _bfloat16_from_float32_bits(v, lambda bits: bits >> np.uint64(16))


class FlushDenormals:
    def exact_product(self, t, a, b):
        return self.fl(t, super().exact_product(t, a, b))

    @staticmethod
    def _flush(v, t):
        if t == FLOAT64 or not dtypes.get(t).is_arithmetic:
            return v
        t = dtypes.get(t)
        tiny = 2.0 ** t.float_format.emin
        v = np.asarray(v, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            return np.where(np.abs(v) < tiny, np.copysign(0.0, v), v)

    def fl(self, t, v):
        return self._flush(super().fl(t, v), t)

    def data(self, arg):
        return self._flush(super().data(arg), arg.type)


class ScaleInverted:
    def quotient(self, x, s, prec):
        with np.errstate(all="ignore"):
            return self.fl(prec, self.fl(prec, x) * self.fl(prec, s))

    def quotient_once(self, x, s, prec):
        with np.errstate(all="ignore"):
            return self.exact_product(prec, x, s)

    def dq_value(self, xv, zero, scale, x_t, prec, out_t):
        prec = prec or out_t
        diff = self.subtract(xv, zero, x_t, prec)
        with np.errstate(all="ignore"):
            return self.fl(prec, self.fl(prec, diff) / self.fl(prec, scale))



#: The deviations of this step, each beside its mixin above (the registry's order: ``ORDER``).
DEVIATIONS = [
    _dev("reciprocal-multiply", (Q, DQL),
         "Your kernel multiplies x by a precomputed 1/scale instead of dividing by scale; the reciprocal's "
         "rounding error moves quotients that sit on or next to a rounding boundary.",
         "apache/tvm#17998 (Reciprocal causing TVM/ORT mismatch); pytorch/pytorch#87093 and #41342 "
         "(inv_scale = 1/scale then round(x * inv_scale)); tenstorrent/tt-metal#56525 (x * (1/scale) in one "
         "SFPMAD); arch-hdl-lang/arch-com#905 (294 of 6,174 boundary values diverge).",
         "QuantizeLinear float32->int8, y_scale=6, x = 6*(k+0.5) and its float32 neighbours",
         ReciprocalMultiply, lambda d: _q_int_or_dql(d) or (d.op == Q and _minifloat(_q_out(d))),
         ("ties", "basic")),
    _dev("divide-in-float64", (Q, DQL),
         "Your kernel computes x / scale in double precision and rounds that, instead of rounding the "
         "quotient to the scale's precision first.",
         "Plausible: Python/numpy reference code and constant folders compute in float64 "
         "(onnx/onnx#6169 shows the reference's C * (a_scale * b_scale / y_scale) in numpy); a float32 "
         "quotient that lands exactly on k + 0.5 is not a tie in double.",
         "QuantizeLinear float32->int8, y_scale=6, x = the float32 neighbours of 6*(k+0.5)",
         DivideInFloat64, _q_or_dql, ("ties", "floatkinds")),
    _dev("quotient-in-float32", Q,
         "Your kernel computes x / scale in float32 where the spec rounds the quotient to float16/bfloat16: "
         "a float16/bfloat16 scale from opset 23 (the default of 'precision'), or precision=float16/bfloat16.",
         "rustnn/rustnn#30 ('Use float32 compute path for float16 quantization division'); onnxruntime "
         "1.31.1 does this (qconform/docs/diagnosis.md); onnx/onnx#6531 introduced the precision attribute.",
         "QuantizeLinear-23 float16->float8e5m2fnuz, x=65504, y_scale=0.5: the float16 quotient is +Inf "
         "(NaN), the float32 quotient 131008 saturates",
         QuotientInFloat32, _half_scale, ("basic", "ties", "specials")),
    _dev("bfloat16-truncation", (Q, DQ),
         "Your kernel converts float32 intermediates to bfloat16 by dropping the low 16 bits (truncation) "
         "instead of rounding to nearest even.",
         "onnx/onnx#4237 and #4238 (truncation mode of float32_to_bfloat16); tenstorrent/tt-metal#19882; "
         "ROCm/triton#520 (TRUNCATE_F32_TO_BF16); tile-ai/tilelang#2483; stillwater-sc/universal#1133.",
         "DequantizeLinear int16->bfloat16, x=32767, x_scale=1: 32768 expected (RNE), 32512 given",
         Bfloat16Truncation, _involves("bfloat16"), ("basic", "ties")),
    _dev("flush-denormals", (Q, DQ, DQL),
         "Your kernel flushes subnormal float16/bfloat16/float32 inputs and results to zero (FTZ/DAZ).",
         "tenstorrent/tt-metal#19814 (denormal inputs flushed) and #50082; tensorflow/tensorflow#36514 "
         "(bfloat16 flushes denormals on TPU); GPUs and NEON flush by default (tc39/ecmascript_simd#234).",
         "DequantizeLinear float8e5m2->float16, x=0x01 (2^-16), x_scale=1: a float16 subnormal expected, 0 given",
         FlushDenormals, _ieee_involved, ("floatkinds", "specials")),
    _dev("scale-inverted", (Q, DQ),
         "Your kernel uses the reciprocal scale convention: QuantizeLinear multiplies by the scale and "
         "DequantizeLinear divides by it.",
         "sony/nnabla#674 (took the reciprocal of DequantizeLinear's scale for the ONNX-to-TensorRT path); "
         "frameworks that store an inverse scale (TF FakeQuant, OpenVINO FakeQuantize ranges).",
         "DequantizeLinear uint8->float32, x=[129], x_zero_point=128, x_scale=2: 2 expected, 0.5 given",
         ScaleInverted, lambda d: True, ("basic",)),
    _dev("quotient-in-input-type", Q,
         "Your QuantizeLinear converts the scale to x's float16/bfloat16 type and divides there, where the "
         "spec (23+) says the type of y_scale, or the 'precision' attribute, determines the precision of "
         "the division.",
         "IREE 3.13 in issue 20's run (QuantizeLinear-23 bfloat16 x, float16 scale 0.33325: 3.171875 gives 9, "
         "as 3.171875 / bf16(0.33325) = 9.497 does, where 3.171875 / 0.33325 = 9.518 gives 10).",
         "QuantizeLinear-23 bfloat16->int8, y_scale float16 0.33325, x=3.171875: 10 expected, 9 given",
         QuotientInInputType, lambda d: d.op == Q and d.inputs[0].type in dtypes.having("is_half")
         and d.inputs[1].type != d.inputs[0].type, ("precision", "basic")),
]

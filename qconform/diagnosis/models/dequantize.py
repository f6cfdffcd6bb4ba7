"""DequantizeLinear's subtraction, product and output conversion done another way."""
from __future__ import annotations

import numpy as np

from qconform import dtypes
from qconform.oracle.arith import exact_fma
from qconform.diagnosis.models.base import _dev, _dq_int_zero_point, _dq_integer_wide_to_narrow, _dq_out, _dq_with_zero_point, _involves, _types
from qconform.diagnosis.models.common import DQ, _F32, _bfloat16_from_float32_bits, _minifloat
from qconform.diagnosis.models.division import FlushDenormals


class HalfProductsFlushed:
    """A float16/bfloat16 product that comes out subnormal is flushed to zero, while subnormal
    operands (a scale of 2^-24) are read as they are: flush-to-zero without denormals-are-zero."""

    def dq_value(self, xv, zero, scale, x_t, prec, out_t):
        v = super().dq_value(xv, zero, scale, x_t, prec, out_t)
        t = prec or out_t
        return FlushDenormals._flush(v, t) if t in dtypes.having("is_half") else v


class DqBiasForm:
    def dq_value(self, xv, zero, scale, x_t, prec, out_t):
        prec = prec or out_t
        with np.errstate(all="ignore"):
            s = self.fl(prec, scale)
            offset = self.fl(prec, self.fl(prec, zero) * s)
            return self.fl(prec, self.fl(prec, self.fl(prec, xv) * s) - offset)


class DqSubtractWraps:
    def subtract(self, xv, zero, x_t, prec):
        t = dtypes.get(x_t)
        diff = xv - zero
        if not t.is_integer or t.bits > 16:
            return diff
        lo, _ = t.qrange
        return np.mod(diff - lo, 2.0**t.bits) + lo


class DqSubtractInOutputType:
    def subtract(self, xv, zero, x_t, prec):
        with np.errstate(all="ignore"):
            return self.fl(prec, self.fl(prec, xv) - self.fl(prec, zero))


class DqMinifloatZeroPointIgnored:
    """A float8/float4/float6 x read without its zero point (integer x keep theirs)."""

    def subtract(self, xv, zero, x_t, prec):
        return xv if _minifloat(x_t) else super().subtract(xv, zero, x_t, prec)


class DqSaturatingFloatCast:
    """The product converted to a float16/bfloat16 output with a saturating cast: overflow and ±Inf
    give ±max instead of ±Inf."""

    def _out(self, values, t):
        tt = dtypes.get(t)
        if tt.name in ("float16", "bfloat16"):
            big = tt.float_format.max_finite
            with np.errstate(invalid="ignore"):
                values = np.where(np.isnan(values), values, np.clip(self.fl(t, values), -big, big))
        return super()._out(values, t)


class DqMultiplyInScaleType:
    """DequantizeLinear-23+ with output_dtype: the product computed in the scale's type, then converted
    to the output type (the output type sets the precision)."""

    def product_type(self, out_t, scale_t):
        return scale_t if scale_t in dtypes.having("is_arithmetic") else out_t


class DqFusedBias:
    """OpenVINO's CPU plugin: (x - zp) * s rewritten as fma(x, s, bias) with bias = fl_T(-zp * s)
    folded in the output type T; for float16 the zero point and the scale (a float32 scale with
    output_dtype float16, 23+) are first converted to float16 and the fma is rounded to float32
    before float16. A zero bias is +0 (folded as 0 - zp * s), so a zero result is +0 whatever the signs."""

    def dq_value(self, xv, zero, scale, x_t, prec, out_t):
        if prec not in (_F32, "float16") or prec != out_t:
            return super().dq_value(xv, zero, scale, x_t, prec, out_t)
        with np.errstate(all="ignore"):
            if prec == _F32:
                return exact_fma(_F32, self.fl(_F32, xv), scale, 0.0 - self.exact_product(_F32, zero, scale))
            scale = self.fl("float16", scale)
            bias = 0.0 - self.exact_product("float16", self.fl("float16", zero), scale)
            return self.fl("float16", exact_fma(_F32, xv, scale, bias))


def bfloat16_half_up_if_odd(v: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 the way OpenVINO's ``ov::bfloat16::round_to_nearest_even`` does it:
    (bits + ((bits & 0x10000) >> 1)) >> 16. Half an ulp is added only when the kept last bit is odd, so
    an even last bit truncates (12.9126 -> 12.875, where round-to-nearest-even gives 12.9375)."""
    return _bfloat16_from_float32_bits(
        v, lambda bits: (bits + ((bits & np.uint64(0x10000)) >> np.uint64(1))) >> np.uint64(16))


class DqBfloat16HalfUpIfOdd:
    """OpenVINO's CPU plugin, DequantizeLinear to bfloat16: x, the zero point and the scale are
    converted to bfloat16 by ``bfloat16_half_up_if_odd`` (the Convert nodes and constant folding use
    ov::bfloat16), the bias -zp * s is folded the same way, and y = fma(x, s, bias) in float32,
    rounded to bfloat16 by the hardware (vcvtneps2bf16, a true round-to-nearest-even)."""

    def dq_value(self, xv, zero, scale, x_t, prec, out_t):
        if out_t != "bfloat16":
            return super().dq_value(xv, zero, scale, x_t, prec, out_t)
        x, zp, sc = (bfloat16_half_up_if_odd(v) for v in (xv, zero, scale))
        with np.errstate(all="ignore"):
            bias = bfloat16_half_up_if_odd(-zp * sc)
            return exact_fma(_F32, x, sc, bias)


#: float32's largest finite value: what OpenVINO's ConvertPrecision writes for a bfloat16 constant of ±Inf.
_FLT_MAX = float(np.finfo(np.float32).max)


def _flushed(v: np.ndarray) -> np.ndarray:
    """A float32 constant as OpenVINO's CPU plugin stores it: when it holds a subnormal, every element
    whose exponent field is zero (the subnormals and -0) becomes +0; otherwise it is left alone."""
    zero_exponent = np.abs(v) < 2.0**-126
    return np.where(zero_exponent, 0.0, v) if np.any(zero_exponent & (v != 0)) else v


class _Constant(np.ndarray):
    """A scale or zero point broadcast to the data's shape, with the element count of the constant
    it came from (``expand`` below): OpenVINO treats single-element constants and tensors differently."""

    elements: int = 1


class DqBfloat16EmulatedHalfUpIfOdd:
    """OpenVINO's CPU plugin on x86 without bfloat16 hardware (neither AVX-512 nor AVX2-VNNI-2: the
    AVX2 machines of the scoreboard), DequantizeLinear to bfloat16 (research/openvino-bfloat16.md).
    The common optimisations fold, in bfloat16 through ``ov::bfloat16`` (``bfloat16_half_up_if_odd``),
    the converted zero point and the bias -zp * s (a single zero zero point is removed instead: no
    bias); then ConvertPrecision turns every bfloat16 of the graph into float32: x is converted to
    float32 (exact for 8/16-bit codes), the bfloat16 constants are widened with a clamp (±Inf becomes
    ±FLT_MAX), and the plugin flushes a constant of more than one element that holds a subnormal (its
    subnormals and -0 become +0; a single-element constant becomes an immediate of the kernel and is
    left alone); y = fma(x, s, bias) in float32 (x * s without a bias) is stored as bfloat16 by the
    AVX2 emulation of vcvtneps2bf16, (bits + ((bits & 0x10000) >> 1)) >> 16: the same half-up-if-odd
    rounding."""

    def expand(self, p, shape, axis, block):
        out = super().expand(p, shape, axis, block)
        if self.op != DQ:
            return out
        out = np.asarray(out).view(_Constant)
        out.elements = int(np.size(p))
        return out

    def dq_value(self, xv, zero, scale, x_t, prec, out_t):
        tensor = {k: getattr(v, "elements", 1) > 1 for k, v in (("zero", zero), ("scale", scale))}
        given = isinstance(zero, _Constant)
        zero, scale = np.asarray(zero), np.asarray(scale)
        if out_t != "bfloat16":
            return super().dq_value(xv, zero, scale, x_t, prec, out_t)
        zp, sc = bfloat16_half_up_if_odd(zero), bfloat16_half_up_if_odd(scale)
        with np.errstate(all="ignore"):
            biased = given and (tensor["zero"] or bool(np.any(zp != 0)))
            bias = bfloat16_half_up_if_odd(-zp * sc) if biased else None
            sc = np.clip(sc, -_FLT_MAX, _FLT_MAX)
            if tensor["scale"]:
                sc = _flushed(sc)
            x = self.fl(_F32, xv)
            if bias is None:
                return bfloat16_half_up_if_odd(self.fl(_F32, x * sc))
            bias = np.clip(bias, -_FLT_MAX, _FLT_MAX)
            if tensor["scale"] or tensor["zero"]:
                bias = _flushed(bias)
            return bfloat16_half_up_if_odd(exact_fma(_F32, x, sc, bias))


#: The deviations of this step, each beside its mixin above (the registry's order: ``ORDER``).
DEVIATIONS = [
    _dev("dq-bias-form", DQ,
         "Your DequantizeLinear computes x * scale - zero_point * scale (two roundings, a precomputed bias) "
         "instead of (x - zero_point) * scale with one rounding.",
         "deepspeedai/DeepSpeed#7283 (dequantize as val * scale + offset); pytorch/pytorch#87093 (review: "
         "subtract the zero point before or after the cast); the affine x*s + b form of fused kernels.",
         "DequantizeLinear uint8->float32, x_zero_point=128, x_scale=1+2^-23, x=255",
         DqBiasForm, _dq_with_zero_point, ("ties", "basic")),
    _dev("dq-subtract-wraps", DQ,
         "Your DequantizeLinear computes x - zero_point in the input's own 8/16-bit type, which wraps: "
         "uint8 0 - 128 becomes 128 instead of -128.",
         "onnx/onnx#6132 (what if the subtraction overflows?); tile-ai/tilelang#2947 (q - zero in the "
         "unsigned storage dtype wraps); pytorch/executorch#20655 (int8 zero-point overflow).",
         "DequantizeLinear uint8->float32, x=[0], x_zero_point=128, x_scale=1: -128 expected, 128 given",
         DqSubtractWraps, _dq_int_zero_point, ("basic", "saturation")),
    _dev("dq-subtract-in-output-type", DQ,
         "Your DequantizeLinear converts x and the zero point to the output type (e.g. float16) before "
         "subtracting, so x - zero_point is rounded before the multiplication.",
         "Plausible: half-precision kernels convert operands to __half first (the int->bf16 "
         "conversion in tile-ai/tilelang#2483 and the scale downcast in Comfy-Org/comfy-kitchen#56 are "
         "the same pattern); exact only while |x| < 2^11 in float16.",
         "DequantizeLinear uint16->float16, x=65535, x_zero_point=32768, x_scale=0.5: 16383.5 -> 16384 "
         "expected, fl16(65535)=Inf given",
         DqSubtractInOutputType, _dq_integer_wide_to_narrow, ("basic", "ties")),
    _dev("dq-saturating-float-cast", DQ,
         "Your DequantizeLinear converts the product to its float16/bfloat16 output with a saturating cast: "
         "a product beyond the range (and ±Inf) gives ±65504 where IEEE conversion gives ±Inf.",
         "Seen in Apache TVM 0.27 (issue 20's probe: DequantizeLinear-19/int8-float16/specials/extremes gives "
         "-65504 where the spec gives -inf); saturating conversions are the default of several accelerator "
         "casts (jax-ml/ml_dtypes#400).",
         "DequantizeLinear int8->float16, x=-128, x_scale=1024: -inf expected (-131072 overflows), -65504 given",
         DqSaturatingFloatCast, _involves("float16", "bfloat16"), ("specials", "saturation")),
    _dev("dq-multiply-in-scale-type", DQ,
         "Your DequantizeLinear-23+ multiplies in the scale's type (float16/bfloat16) and converts to the "
         "output type after, where \"the output type also determines the precision of the multiplication\".",
         "Seen in IREE 3.13 (issue 20's probe: DequantizeLinear-23 int16 with a float16 scale gives -inf where "
         "-65536 is right in float32).",
         "DequantizeLinear-23 int16->float32, x_scale float16 = 2, x=-32768: -65536 expected, -inf given",
         DqMultiplyInScaleType, lambda d: d.op == DQ and bool(d.attrs.get("output_dtype"))
         and d.inputs[1].type in ("float16", "bfloat16"), ("basic", "specials")),
    _dev("bfloat16-half-up-if-odd", DQ,
         "Your float32-to-bfloat16 conversion adds half an ulp only when the kept last bit is odd, "
         "(bits + ((bits & 0x10000) >> 1)) >> 16, so it truncates whenever that bit is even: OpenVINO "
         "converts x, the scale and the folded bias -zero_point * scale this way, then rounds fma(x, scale, "
         "bias) correctly.",
         "OpenVINO 2026.4.1's CPU plugin (issue 20's probe: all 223 unexplained DequantizeLinear-to-bfloat16 "
         "cases, 10,252 elements, reproduced); the conversion is ov::bfloat16::round_to_nearest_even in "
         "openvino/core/type/bfloat16.hpp and the CPU plugin's bfloat16_t. Peers fixed the same class of "
         "non-RNE bfloat16 conversion: tenstorrent/tt-metal#19882, stillwater-sc/universal#1133, groonga/groonga#2961.",
         "DequantizeLinear int16->bfloat16, x_scale=1.0078125, x=-24401: -24576 expected, -24448 given",
         DqBfloat16HalfUpIfOdd, lambda d: d.op == DQ and _dq_out(d) == "bfloat16", ("precision", "ties", "random")),
    _dev("bfloat16-emulated-half-up-if-odd", DQ,
         "Without bfloat16 hardware your CPU plugin runs a DequantizeLinear to bfloat16 in float32 and stores "
         "the result with an emulated conversion that adds half an ulp only when the kept last bit is odd "
         "(truncating otherwise), after rounding the zero point and the folded bias -zero_point * scale to "
         "bfloat16 the same way (x itself stays exact), widening bfloat16 constants with a clamp that turns an "
         "infinite scale or bias into ±FLT_MAX and flushing a per-axis scale or bias that holds a subnormal.",
         "OpenVINO 2026.4.1's CPU plugin on x86 without AVX-512/AVX2-VNNI-2 (research/openvino-bfloat16.md: "
         "under ONEDNN_MAX_CPU_ISA=AVX2 it fails 435 DequantizeLinear-to-bfloat16 cases, 260 of them named by no "
         "other model, as on the AVX2 scoreboard; this model gives those 435 and the 931 it passes bit for bit, "
         "and 2,400 random models' outputs); sources: jit_uni_vcvtneps2bf16's emulation (jit_bf16_emitters.hpp), "
         "ConvertPrecision's clamping convert_value (convert_precision.cpp; openvinotoolkit/openvino#34138, #35484), "
         "the plugin's constant flush (input.cpp, cpu_memory.cpp).",
         "DequantizeLinear uint16->bfloat16, x=65535, x_zero_point=65535, x_scale=1: 0 expected, -1 given "
         "(the zero point rounded to 65536, x kept exact)",
         DqBfloat16EmulatedHalfUpIfOdd, lambda d: d.op == DQ and _dq_out(d) == "bfloat16",
         ("precision", "ties", "random", "specials")),
    _dev("dq-fused-bias", DQ,
         "Your DequantizeLinear computes fma(x, scale, bias) with bias = -zero_point * scale rounded to the output "
         "type first (float16: the zero point converted to float16 too), where (x - zero_point) is exact.",
         "OpenVINO 2026.4.1's CPU plugin (issue 20's probe: 0 mismatches over every uint8/int8/uint16/int16 code "
         "and five (zp, s) pairs); tenstorrent/tt-metal and XNNPACK fold the zero point into a bias the same way.",
         "DequantizeLinear uint8->float32, x=255, x_scale=0.1, x_zero_point=129: 12.6000004 expected, 12.5999994 given",
         DqFusedBias, lambda d: d.op == DQ and _dq_out(d) in (_F32, "float16"), ("precision", "random", "basic")),
    _dev("half-products-flushed", DQ,
         "Your DequantizeLinear flushes a float16/bfloat16 product that comes out subnormal to zero, though "
         "it reads a subnormal scale correctly (flush-to-zero without denormals-are-zero).",
         "IREE 3.13 in issue 20's run (DequantizeLinear-21 int16->float16, scale 2^-24, x - zero_point = 1: "
         "0 where 2^-24 is right, while x - zero_point = 32767 gives 32767 * 2^-24); compare "
         "flush-denormals, which also zeroes the subnormal scale.",
         "DequantizeLinear int16->float16, x=1, x_scale=2^-24: 2^-24 expected, 0 given",
         HalfProductsFlushed, lambda d: d.op == DQ and bool(set(_types(d)) & set(dtypes.having("is_half"))), ("specials",)),
    _dev("dq-minifloat-zero-point-ignored", DQ,
         "Your DequantizeLinear drops the zero point of a float8/float4/float6 x, where the spec's formula "
         "(x - x_zero_point) * x_scale 'remains the same for consistency'.",
         "onnx.reference 1.23.2 in this suite's fp8-nonzero-zero-point family (a float8 zero point of -0.5 "
         "and every float4e2m1 zero point ignored; a positive float8 one raises 'should be zero for float8 "
         "types'); onnx/onnx#5408 (the reference refused non-zero float8 zero points).",
         "DequantizeLinear float8e4m3fn->float32, x=0, x_scale=0.5, x_zero_point=-0.5: 0.25 expected, 0 given",
         DqMinifloatZeroPointIgnored,
         lambda d: d.op == DQ and len(d.inputs) > 2 and d.inputs[2] is not None and _minifloat(d.inputs[0].type)
         and bool(np.any(np.asarray(d.inputs[2].value).astype(np.float64) != 0)),
         ("fp8-nonzero-zero-point",)),
]

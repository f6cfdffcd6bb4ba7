"""The float8/float4/float6 (and bfloat16) encoders: the minifloat conversion of a result done another way.

Each model's mixin sits beside its declaration here; the bit-level arithmetic they apply (real
encoders' algorithms, roundings to a format's grid) is in ``encoding_arith``, testable on its own."""
from __future__ import annotations

import numpy as np

from qconform import dtypes
from qconform.oracle import floats
from qconform.oracle.arith import fl as _fl
from qconform.diagnosis.models.base import _dev, _fnuz_involved, _minifloat_out, _q_out
from qconform.diagnosis.models.common import Q, QLMM, _F32, _minifloat
from qconform.diagnosis.models.encoding_arith import (rocm_cast_to_f8, round_as_normal, sticky_lost, subnormal_path,
                                                      subnormal_quantum, ties_away_to_format, to_float32,
                                                      truncate_to_format, truncf_bit_emulation)


class E5m2OverflowToNan:
    def encode(self, v, t, **kw):
        code = super().encode(v, t, **kw)
        tt = dtypes.get(t)
        if tt.name != "float8e5m2" or kw.get("saturate", True):
            return code
        v = np.asarray(v, dtype=np.float64)
        fmt = tt.float_format
        with np.errstate(invalid="ignore"):
            r = floats.round_to_format(np.where(np.isfinite(v), v, 0.0), tt)
            # rounds up past the largest finite value but is below the next binade (2^(emax+1))
            over = np.isfinite(v) & (np.abs(r) > fmt.max_finite) & (np.abs(v) < 2.0 ** (fmt.emax + 1))
        nan = np.where(np.signbit(v), 0xFF, 0x7F)
        return np.where(over, nan, code).astype(code.dtype)


class SaturateIgnored:
    def encode(self, v, t, **kw):
        if _minifloat(t):
            kw["saturate"] = True
        return super().encode(v, t, **kw)


def _e4m3fn_unsaturated_to_max(code: np.ndarray, v, t, kw, band) -> np.ndarray:
    """float8e4m3fn codes with saturate=0, where ``band(|v|)`` holds, replaced by +-448 (0x7E/0xFE)."""
    if dtypes.get(t).name != "float8e4m3fn" or kw.get("saturate", True):
        return code
    with np.errstate(invalid="ignore"):
        hit = band(np.abs(np.asarray(v, dtype=np.float64)))
    return np.where(hit, (code & 0x80) | 0x7E, code).astype(code.dtype)


def _e4m3fn_unsaturated_out(d) -> bool:
    """QuantizeLinear to float8e4m3fn with saturate=0."""
    out = _q_out(d)
    return out is not None and out.name == "float8e4m3fn" and not d.attrs.get("saturate", 1)


class E4m3fnNanCodeToMax:
    """onnxruntime's Float8E4M3FN(float, saturate): a normal value whose truncated code is 0x7F (the
    NaN code, |v| in [480, 496)) is first changed to 0x7E (448), and the later overflow test only
    sees codes it would round up, so with saturate=0 these values give +-448 where NaN is right."""

    def encode(self, v, t, **kw):
        return _e4m3fn_unsaturated_to_max(super().encode(v, t, **kw), v, t, kw, lambda a: (a >= 480.0) & (a < 496.0))


class E4m3fnOverflowTestedBeforeRounding:
    """float8e4m3fn with saturate=0: NaN only where the unrounded |v| >= 480 (the value the NaN code
    0x7F would have), the rounding below it saturating, so 464 < |v| < 480 (which round to 480, NaN
    by the Cast table) give +-448."""

    def encode(self, v, t, **kw):
        return _e4m3fn_unsaturated_to_max(super().encode(v, t, **kw), v, t, kw, lambda a: (a > 464.0) & (a < 480.0))


class NeverSaturate:
    def encode(self, v, t, **kw):
        if _minifloat(t):
            kw["saturate"] = False
        return super().encode(v, t, **kw)


class FnuzInfOtherTable:
    def encode(self, v, t, **kw):
        if "fnuz_inf_saturates" in kw:
            kw["fnuz_inf_saturates"] = not kw["fnuz_inf_saturates"]
        return super().encode(v, t, **kw)


class MinifloatTruncation:
    def encode(self, v, t, **kw):
        if _minifloat(t):
            v = truncate_to_format(v, dtypes.get(t))
        return super().encode(v, t, **kw)


class FnuzNegativeZero:
    """fnuz: negatives that round to zero keep the sign bit -> 0x80, the NaN code."""

    def encode(self, v, t, **kw):
        code = super().encode(v, t, **kw)
        tt = dtypes.get(t)
        if tt.float_format is not None and tt.float_format.nan_style == "fnuz":
            with np.errstate(invalid="ignore"):
                neg_zero = (code == 0) & np.signbit(np.asarray(v, dtype=np.float64)) & ~np.isnan(v)
            code = np.where(neg_zero, np.asarray(1 << (tt.bits - 1), dtype=code.dtype), code).astype(code.dtype)
        return code


class Float8ConvertSaturatingNanToLowest:
    """OpenVINO's CPU Convert to f8e4m3/f8e5m2 after QuantizeLinear's multiply by the float32
    reciprocal of the scale (flushed to zero when subnormal): no zero-point add (so -0 stays -0),
    rounded through float16 (two roundings), always saturating, and NaN to the most negative finite
    code (0 * Inf from a subnormal scale's infinite reciprocal included)."""

    def division_readings(self, x_t, s_t, attrs):
        return [("division-in-float32", _F32)]

    def quotient(self, x, s, prec):  # x * (1 / s), the reciprocal flushed to zero when subnormal
        with np.errstate(all="ignore"):
            inv = self.fl(_F32, 1.0 / self.fl(_F32, s))
            inv = np.where(np.abs(inv) < np.finfo(np.float32).tiny, 0.0, inv)
            return self.fl(_F32, self.fl(_F32, x) * inv)

    def add_zero_float(self, q, zero, prec):
        return q

    def encode(self, v, t, **kw):
        if not _minifloat(t):
            return super().encode(v, t, **kw)
        kw["saturate"] = True
        v = np.asarray(v, dtype=np.float64)
        with np.errstate(all="ignore"):
            code = super().encode(_fl(dtypes.get("float16"), v), t, **kw)  # through float16: two roundings
        lowest = super().encode(np.full(v.shape, -dtypes.get(t).float_format.max_finite), t, **kw)
        return np.where(np.isnan(v), lowest, code).astype(code.dtype)


def _rounded_through(via: str, name: str) -> type:
    """A mixin whose float8/float4/float6 outputs are rounded to ``via`` first, then to the narrow
    type (two roundings); the one step it overrides is ``encode``."""

    def encode(self, v, t, **kw):
        if _minifloat(t):
            with np.errstate(all="ignore"):
                v = _fl(dtypes.get(via), v)
        return super(cls, self).encode(v, t, **kw)

    cls = type(name, (), {"encode": encode, "__doc__": f"float8/float4/float6 outputs rounded through {via} first."})
    return cls


MinifloatDoubleRounding = _rounded_through("float16", "MinifloatDoubleRounding")


MinifloatDoubleRoundingViaBfloat16 = _rounded_through("bfloat16", "MinifloatDoubleRoundingViaBfloat16")


class MinifloatTiesAway:
    """float8/float4/float6 outputs rounded to nearest with ties away from zero (a guard-bit-only
    round-up), not ties to even."""

    def encode(self, v, t, **kw):
        if _minifloat(t):
            v = ties_away_to_format(v, dtypes.get(t))
        return super().encode(v, t, **kw)


class TruncfBitEmulation:
    def encode(self, v, t, **kw):
        if not _minifloat(t) or dtypes.get(t).float_format.width != 8:
            return super().encode(v, t, **kw)
        tt = dtypes.get(t)
        return truncf_bit_emulation(np.asarray(v, dtype=np.float64), tt.float_format).astype(tt.bits_dtype)



# -- the edges of the encoders: far underflow, the subnormal rounding, overflow, NaN --------


def _subnormal_mixin(name: str, doc: str, magnitude) -> type:
    """A mixin whose float8/float4/float6 encoder computes a subnormal result's magnitude by
    ``magnitude(|v|, fmt)`` (a multiple of the subnormal quantum, up to 2^emin); normal results,
    zero, ±Inf and NaN keep the spec's encoding. The one step it overrides is ``encode``."""

    def encode(self, v, t, **kw):
        if not _minifloat(t):
            return super(cls, self).encode(v, t, **kw)
        fmt = dtypes.get(t).float_format
        v = np.asarray(v, dtype=np.float64)
        with np.errstate(all="ignore"):
            a, sub = subnormal_path(v, fmt)
            alt = np.copysign(magnitude(a, fmt), v)
        return super(cls, self).encode(np.where(sub, alt, v), t, **kw)

    cls = type(name, (), {"encode": encode, "__doc__": doc})
    return cls


MinifloatSubnormalRoundedOneBitLow = _subnormal_mixin(
    "MinifloatSubnormalRoundedOneBitLow",
    "A subnormal result rounded one bit too far right (to twice the subnormal quantum, then stored as "
    "a count of quanta): tt-metal's round_ties_even(mant >> shift, mant_width, 24) where 23 is right, "
    "so every subnormal comes out about half its value.",
    lambda a, fmt: np.rint(a / (2 * subnormal_quantum(fmt))) * subnormal_quantum(fmt))


MinifloatSubnormalStickyLost = _subnormal_mixin(
    "MinifloatSubnormalStickyLost",
    "A subnormal result rounded after the significand was shifted down to the subnormal binade: the "
    "bits shifted out are lost, so a value just above a midpoint whose lower neighbour is even rounds "
    "down (the tie rule sees an exact tie).", sticky_lost)


MinifloatSubnormalDoubleRounding = _subnormal_mixin(
    "MinifloatSubnormalDoubleRounding",
    "A subnormal result rounded twice: to the format's mantissa width as if it were normal, then again "
    "to the subnormal grid (ties to even both times).",
    lambda a, fmt: np.rint(round_as_normal(a, fmt) / subnormal_quantum(fmt)) * subnormal_quantum(fmt))


class MinifloatUnderflowShiftWraps:
    """float8 outputs from float32 quotients far below the smallest subnormal: the mantissa's right
    shift by the exponent gap (64 or more) wraps mod 64, so a non-zero code comes out where ±0 is right."""

    def encode(self, v, t, **kw):
        code = super().encode(v, t, **kw)
        if not _minifloat(t) or dtypes.get(t).float_format.width != 8:
            return code
        fmt = dtypes.get(t).float_format
        bits = to_float32(v).view(np.uint32).astype(np.int64)
        exponent = (bits >> 23) & 0xFF
        act = np.where(exponent == 0, -126, exponent - 127)
        wraps = (exponent != 0xFF) & ((bits & 0x7FFFFFFF) != 0) & ((1 - fmt.bias) - act >= 64)
        if not np.any(wraps):
            return code
        out = code.copy()
        for idx in zip(*np.nonzero(wraps)):
            out[idx] = rocm_cast_to_f8(int(bits[idx]), fmt)
        return out


class MinifloatOverflowBeforeRounding:
    """With saturate=0, overflow decided on the value before rounding (|v| > the largest finite) rather
    than on [v]: values in (max, max + half an ulp], which round to the largest finite, become Inf/NaN."""

    def encode(self, v, t, **kw):
        if _minifloat(t) and not kw.get("saturate", True):
            fmt = dtypes.get(t).float_format
            v = np.asarray(v, dtype=np.float64)
            with np.errstate(invalid="ignore"):
                v = np.where(np.isfinite(v) & (np.abs(v) > fmt.max_finite), np.copysign(np.inf, v), v)
        return super().encode(v, t, **kw)


class FnuzSaturateNanToMax:
    """fnuz outputs with saturate=1: the saturating branch tests the input's exponent field (all ones:
    ±Inf and NaN alike) and returns ±max by the sign bit, so NaN gives ±max where NaN (0x80) is right."""

    def encode(self, v, t, **kw):
        tt = dtypes.get(t)
        if tt.float_format is not None and tt.float_format.nan_style == "fnuz" and kw.get("saturate", True):
            v = np.asarray(v, dtype=np.float64)
            v = np.where(np.isnan(v), np.copysign(tt.float_format.max_finite, v), v)
        return super().encode(v, t, **kw)


class MinifloatQuotientRoundedToInteger:
    """float8/float4/float6 outputs from x / scale first rounded to an integer (half to even), the
    integer outputs' path, then converted."""

    def encode(self, v, t, **kw):
        if _minifloat(t):
            v = np.rint(np.asarray(v, dtype=np.float64))
        return super().encode(v, t, **kw)



#: The deviations of this step, each beside its mixin above (the registry's order: ``ORDER``).
class MinifloatCastWithoutNotes:
    """float4/float6 output converted as ml_dtypes does, without the types' notes: NaN becomes the zero
    whose sign is the NaN's inverted (+NaN -> -0, -NaN -> +0), and float6 keeps a -0 result."""

    def encode(self, v, t, **kw):
        tt = dtypes.get(t)
        if tt.float_format is None or tt.float_format.nan_style != "none":
            return super().encode(v, t, **kw)
        v = np.asarray(v, dtype=np.float64)
        code = floats.encode(v, tt, saturate=kw.get("saturate", True), notes=False)
        sign = 1 << (tt.float_format.width - 1)
        return np.where(np.isnan(v), np.where(np.signbit(v), 0, sign), code).astype(code.dtype)


def _float4_or_float6_out(d) -> bool:
    out = _q_out(d)
    return out is not None and out.float_format is not None and out.float_format.nan_style == "none"


DEVIATIONS = [
    _dev("float8e5m2-rounding-overflow-to-nan", Q,
         "Your float8e5m2 conversion with saturate=0 gives NaN for values that round up past the largest "
         "finite value (61440 <= |x| < 65536) instead of ±Inf; larger values do give ±Inf.",
         "onnxruntime 1.31.1 does this (qconform/docs/diagnosis.md): the mantissa carry out of the top binade is "
         "treated like e4m3fn's all-ones NaN pattern; the Cast table gives ±Inf for every [x] > FLT_MAX.",
         "QuantizeLinear float32->float8e5m2, saturate=0, x=61440, y_scale=1: +Inf (0x7C) expected, NaN given",
         E5m2OverflowToNan, lambda d: _q_out(d).name == "float8e5m2" and not d.attrs.get("saturate", 1),
         ("floatkinds",)),
    _dev("float8-saturate-ignored", Q,
         "Your float8 conversion always saturates: with saturate=0, overflow and ±Inf must give NaN "
         "(or ±Inf for e5m2) but you return ±max.",
         "apache/tvm#19993 (saturate=0 for float8 rejected as unsupported); microsoft/onnxruntime#14731 "
         "(review of the saturate attribute); the saturating convention of accelerators "
         "(jax-ml/ml_dtypes#400).",
         "QuantizeLinear float32->float8e4m3fn, saturate=0, x=1000, y_scale=1: NaN expected, 448 given",
         SaturateIgnored, lambda d: _minifloat_out(d) and not d.attrs.get("saturate", 1), ("floatkinds",)),
    _dev("float8e4m3fn-nan-code-to-max", Q,
         "Your float32-to-float8e4m3fn conversion with saturate=0 gives +-448 for 480 <= |x / scale| < 496, whose "
         "truncated code is the NaN code 0x7F: it is changed to 0x7E before the overflow test, which then "
         "sees no rounding up; NaN is right there.",
         "onnxruntime 1.32.0 (its fact for QuantizeLinear-*-float8e4m3fn saturate-0: 480 <= |x/s| < 496 gives "
         "+-448), from Float8E4M3FN(float, saturate) in onnxruntime/core/framework/float8.h, where "
         "'(val & 0x7F) == 0x7F' becomes 0x7E before the saturate branch.",
         "QuantizeLinear float32->float8e4m3fn, saturate=0, x=480, y_scale=1: NaN (0x7F) expected, 448 (0x7E) given",
         E4m3fnNanCodeToMax, _e4m3fn_unsaturated_out, ("floatkinds",)),
    _dev("float8e4m3fn-overflow-tested-before-rounding", Q,
         "Your float32-to-float8e4m3fn conversion with saturate=0 gives NaN only for |x / scale| >= 480 (the value "
         "of the NaN code) and rounds smaller values with saturation, so 464 < |x / scale| < 480, which round to "
         "480 and must give NaN, give +-448.",
         "Plausible rather than reported: the overflow test made on the unrounded value against 480 is "
         "c10/util/Float8_e4m3fn.h's fp8_max ('480.0f, which is the first value not representable', copied in "
         "chengchingwen/DLFP8Types.jl src/e4m3fn.jl), and a rounding branch that saturates its carry into "
         "0x7F to 0x7E is tile-ai/tilelang-metax#140's maca_fp8.h ('Saturate to max finite value'); "
         "pytorch/pytorch#178817 changed exactly this path ('Properly saturate E4M3 on finite-overflow').",
         "QuantizeLinear float32->float8e4m3fn, saturate=0, x=472, y_scale=1: NaN (0x7F) expected, 448 (0x7E) given",
         E4m3fnOverflowTestedBeforeRounding, _e4m3fn_unsaturated_out, ("floatkinds",)),
    _dev("float8-never-saturate", (Q, QLMM),
         "Your float8 conversion never saturates: with saturate=1 (the default) overflow must give ±max "
         "but you return NaN (e4m3fn, fnuz) or ±Inf (e5m2), as a plain non-saturating cast does.",
         "jax-ml/ml_dtypes#260 and #400 (ml_dtypes casts give NaN on overflow where onnxruntime saturates "
         "to 448); jax-ml/ml_dtypes#147.",
         "QuantizeLinear float32->float8e4m3fn, x=1000, y_scale=1: 448 expected, NaN given",
         NeverSaturate, lambda d: _minifloat_out(d) and d.attrs.get("saturate", 1), ("floatkinds", "basic")),
    _dev("fnuz-inf-wrong-table", (Q, QLMM),
         "Your float8 fnuz conversion applies the other opset's row for ±Inf with saturate=1: opsets 19-23 "
         "give NaN (0x80), opset 24+ gives ±max.",
         "onnx/onnx#6220 (onnx.reference cast ±Inf to ±FLT_MAX for e4m3fnuz where the opset-21 table says "
         "NaN; the table changed in opset 24).",
         "QuantizeLinear-21 float32->float8e4m3fnuz, x=+Inf, y_scale=1: NaN expected, 240 given",
         FnuzInfOtherTable, _fnuz_involved, ("floatkinds", "specials", "basic")),
    _dev("float8-round-toward-zero", (Q, QLMM),
         "Your float8/float4/float6 conversion truncates the mantissa (round toward zero) instead of "
         "rounding to nearest even.",
         "NVlabs/cutile-rs#250 (f8 constant encoder truncated the mantissa); JuliaMath/Float8s.jl#22; "
         "triton-lang/triton#6102 (wrong F16->F8E5M2 rounding bit twiddling); microsoft/onnxruntime#16938 "
         "(1.8131605 -> 1.75 where 1.875 is nearest: what truncation gives, though the thread names no cause).",
         "QuantizeLinear float32->float8e4m3fn, x=1.0625*1.9, y_scale=1 (above a midpoint)",
         MinifloatTruncation, _minifloat_out, ("floatkinds",)),
    _dev("fnuz-negative-zero", (Q, QLMM),
         "Your float8 fnuz conversion keeps the sign of negative values that round to zero, producing 0x80, "
         "which is NaN in the fnuz formats (they have no -0).",
         "microsoft/onnxruntime#18473 (near-zero negative values converted to NaN) and onnx/onnx#5764; "
         "openxla/xla#17487 (F16 -> F8e4m3b11fnuz gave -nan for small negatives).",
         "QuantizeLinear float32->float8e4m3fnuz, x=-1e-9 (and -0.0), y_scale=1: 0x00 expected, 0x80 given",
         FnuzNegativeZero, _fnuz_involved, ("floatkinds", "specials")),
    _dev("float8-convert-saturating-nan-to-lowest", Q,
         "Your QuantizeLinear to float8 divides in float32 and converts without adding the zero point (-0 "
         "stays -0), always saturating (saturate=0 ignored), and NaN becomes the most negative finite value.",
         "OpenVINO 2026.4.1's CPU Convert to f8e4m3/f8e5m2 (issue 20's probe: NaN gave 0xFE/0xFB in 396 cases, "
         "-0 kept in 378, saturate=0 ignored in 63); openvinotoolkit/openvino#21817 (fp8 conversion saturates).",
         "QuantizeLinear float16->float8e4m3fn, x=NaN, y_scale=1: NaN (0x7F) expected, -448 (0xFE) given",
         Float8ConvertSaturatingNanToLowest, _minifloat_out, ("specials", "floatkinds", "precision")),
    _dev("float8-truncf-bit-emulation", (Q, QLMM),
         "Your float32 -> float8 conversion is built from the float32 bit fields: it rounds to nearest even "
         "and never saturates (overflow gives NaN, or ±Inf for e5m2, whatever saturate says), a value that "
         "rounds from the subnormal range up to the smallest normal becomes 0 (the carry is masked off), and "
         "NaN becomes one positive NaN code (0x7F, fnuz 0x80), so a negative overflow with saturate=0 loses "
         "its sign.",
         "IREE 3.13's ConvertUnsupportedFloatArithPass (TruncFToSmallFloat: the rounded subnormal mantissa "
         "is and-ed with the mantissa mask; overflow selects the NaN or Inf code); issue 20's IREE run "
         "(0.0146484375 -> 0 where 2^-6 is right, -496 -> 0x7F); the emulation came with iree-org/iree#23119, "
         "whose review asked for exactly denormals and round-to-nearest-even; the same class: "
         "openvinotoolkit/openvino#30057 (f8e4m3 subnormals rounded twice).",
         "QuantizeLinear float32->float8e4m3fn, x=0.0146484375 (7.5 * 2^-9), y_scale=1: 0x08 (2^-6) "
         "expected, 0x00 given",
         TruncfBitEmulation, _minifloat_out, ("floatkinds", "specials")),
    _dev("minifloat-double-rounding", (Q, QLMM),
         "Your float8/float4/float6 conversion rounds to float16 first and then to the narrow type: two "
         "roundings, which move values just past a midpoint.",
         "triton-lang/triton#7382 and #10846 (AMD fp32 -> fp8 through an fp16 intermediate); "
         "flashinfer-ai/flashinfer#5128 (TensorRT-LLM's float2 -> fp8x2 cast through bf16); FlashML-org/FreeToken#85.",
         "QuantizeLinear float32->float8e4m3fn, x just above the midpoint 1.0625 by less than a float16 ulp",
         MinifloatDoubleRounding, _minifloat_out, ("floatkinds", "ties")),
    _dev("minifloat-ties-away", (Q, QLMM),
         "Your float8/float4/float6 conversion rounds a value exactly halfway between two representable "
         "values away from zero, where the spec's round to nearest even keeps the even one.",
         "triton-lang/triton#5925 and its fix #6102 (f16 -> f8e5m2 'rtne' rounds ties up on A100: 9 gives "
         "10, where 8 is right); triton-lang/triton#11753 (x.to(tl.float8e5, rtne): 1.125 gives 1.25, "
         "where 1.0 is right); OpenVINO 2026.4.1 in this suite's run (QLinearMatMul-21 to float8e4m3fn, "
         "QLinearMatMul-21/bfloat16-int8-float8e5m2-float8e4m3fn/basic/ordinary).",
         "QuantizeLinear float32->float8e5m2, x=1.125, y_scale=1: 1.0 expected, 1.25 given",
         MinifloatTiesAway, _minifloat_out, ("ties", "floatkinds")),
    _dev("minifloat-double-rounding-via-bfloat16", (Q, QLMM),
         "Your float8/float4/float6 conversion rounds to bfloat16 first and then to the narrow type: two "
         "roundings, which move values just past a midpoint.",
         "flashinfer-ai/flashinfer#5128 (TensorRT-LLM's cudaTypeUtils: __nv_fp8x2_e4m3(bf1622float2("
         "float22bf162(val))), float32 -> bfloat16 -> float8e4m3fn); OpenVINO 2026.4.1 in this suite's run: 11 "
         "QLinearMatMul-21 cases with a float8e4m3fn output.",
         "QuantizeLinear float32->float8e4m3fn, x = 1.0625 + 2^-10 (just above a midpoint, below "
         "bfloat16's half-ulp): 1.125 expected, 1.0 given",
         MinifloatDoubleRoundingViaBfloat16, _minifloat_out, ("floatkinds", "ties")),
    _dev("minifloat-underflow-shift-wraps", Q,
         "Your float32-to-float8 conversion shifts the significand right by the gap to the subnormal exponent "
         "without bounding it, and a 64-bit shift by 64 or more wraps mod 64: quotients around 2^-70 (e4m3fn) "
         "to 2^-82 (e5m2fnuz) come out as a non-zero code (up to the smallest normal) where ±0 is right.",
         "ROCm/rocm-systems#10591 and its fix #10593 (internal::cast_to_f8 in amd_hip_fp8.h, also rocBLAS's "
         "rocblas_hip_f8_impl.h: float 3.3e-24 -> e5m2 0x04 = 2^-14 where 0 is right; the shift count ends up "
         "taken mod 64).",
         "QuantizeLinear float32->float8e5m2, x=2^-78 (and 2^-79..2^-81), y_scale=1: 0x00 expected, 0x04 given",
         MinifloatUnderflowShiftWraps, lambda d: _q_out(d) is not None and _minifloat(_q_out(d))
         and _q_out(d).float_format.width == 8, ("codec-edges",)),
    _dev("minifloat-subnormal-rounded-one-bit-low", Q,
         "Your float8/float4/float6 conversion rounds a subnormal result one bit too far right (to twice the "
         "subnormal spacing), so every subnormal result comes out about half its value.",
         "tenstorrent/tt-metal#51971 root cause 1 and its fix #51975 (convert_to_mxfp_elem_bits: "
         "round_ties_even(mant >> shift, mant_width, 24) where the significand has 23 fraction bits; MXFP4 "
         "0.25000006 -> 0 where 0.5 is right).",
         "QuantizeLinear float32->float8e4m3fn, x=2^-8 (code 0x02), y_scale=1: 0x02 expected, 0x01 given",
         MinifloatSubnormalRoundedOneBitLow, lambda d: _q_out(d) is not None and _minifloat(_q_out(d)),
         ("codec-edges", "floatkinds")),
    _dev("minifloat-subnormal-sticky-lost", Q,
         "Your float8/float4/float6 conversion shifts a subnormal result's significand down before rounding "
         "and drops the bits shifted out, so a value just above a midpoint whose lower neighbour is even "
         "rounds down as if it were a tie.",
         "tenstorrent/tt-metal#51971 root cause 3 ('subnormal rounding drops sticky bits': mant_with_hb >> shift "
         "before round_ties_even); mattuna15/68881-fpga#73 (denormal results truncated again with no sticky bit).",
         "QuantizeLinear float32->float8e4m3fn, x=(2.5 + 2^-21) * 2^-9 (the set bit is shifted out), y_scale=1: 0x03 expected, 0x02 given",
         MinifloatSubnormalStickyLost, lambda d: _q_out(d) is not None and _minifloat(_q_out(d)),
         ("codec-edges", "floatkinds")),
    _dev("minifloat-subnormal-double-rounding", Q,
         "Your float8/float4/float6 conversion rounds a subnormal result twice: to the mantissa width as if "
         "it were normal, then again to the subnormal grid, which moves values near a subnormal midpoint.",
         "openvinotoolkit/openvino#30057 ('Fix excess rounding for f8e4m3 subnormal values': rounding should be "
         "done only once for normal values as well as for subnormal values separately); mattuna15/68881-fpga#73 "
         "(denormal results round twice: rounded to normal precision, then shifted to the denormal grid).",
         "QuantizeLinear float32->float8e4m3fn, x=(2.5 + 2^-4) * 2^-9, y_scale=1 (rounds as normal to the "
         "midpoint 2.5 * 2^-9, then ties to even): 0x03 expected, 0x02 given",
         MinifloatSubnormalDoubleRounding, lambda d: _q_out(d) is not None and _minifloat(_q_out(d)),
         ("codec-edges", "floatkinds")),
    _dev("minifloat-overflow-before-rounding", Q,
         "Your float8 conversion with saturate=0 decides overflow on the value before rounding: values just "
         "above the largest finite value, which round down to it, become Inf or NaN.",
         "libxsmm/libxsmm#814 ('Fixed mantissa threshold for hf8 overflow convert': the fp32 -> hf8 overflow "
         "test was m_f32 > 0x600000, i.e. above the largest finite 1.75 * 2^8, where 0x680000, its rounding "
         "threshold, is right).",
         "QuantizeLinear float32->float8e4m3fn, saturate=0, x=456, y_scale=1: 448 (0x7E) expected, NaN given",
         MinifloatOverflowBeforeRounding, lambda d: _q_out(d) is not None and _minifloat(_q_out(d))
         and not d.attrs.get("saturate", 1), ("codec-edges", "floatkinds")),
    _dev("fnuz-saturate-nan-to-max", Q,
         "Your float8 fnuz conversion with saturate=1 sends every input whose exponent field is all ones to "
         "±max by its sign bit, NaN included, where NaN (0x80) is right.",
         "Plausible, from a real code pattern: ROCm's cast_to_f8 (amd_hip_fp8.h) classifies Inf and NaN "
         "together with (x & 0x7F800000) == 0x7F800000 and returns 0x80 for both (the opset 19-23 row); "
         "moving that branch to opset 24's 'Inf -> ±FLT_MAX' row takes NaN with it (onnx/onnx#6220 on that row).",
         "QuantizeLinear float32->float8e4m3fnuz, x=NaN and -NaN, y_scale=1: NaN (0x80) expected, 240 and -240 given",
         FnuzSaturateNanToMax, lambda d: _q_out(d) is not None and _q_out(d).name.endswith("fnuz")
         and d.attrs.get("saturate", 1), ("codec-edges", "specials")),
    _dev("minifloat-quotient-rounded-to-integer", Q,
         "Your QuantizeLinear to a float8/float4/float6 type rounds x / scale to an integer first (the integer "
         "outputs' nearbyint), then converts: 0.3 becomes 0 and 2.5 becomes 2.",
         "ROCm/AMDMIGraphX#2661 ('Is nearbyint necessary for the FP8 quantizelinear?': MIGraphX applied "
         "nearbyint(x / scale) to FP8 outputs too); pytorch/pytorch#153601 (quantize ops rounded for every "
         "dtype; the patch rounds only for integers).",
         "QuantizeLinear float32->float8e4m3fn, x=0.3, y_scale=1: 0.3125 (0x2A) expected, 0 given",
         MinifloatQuotientRoundedToInteger, lambda d: _q_out(d) is not None and _minifloat(_q_out(d)),
         ("floatkinds", "codec-edges")),
    _dev("minifloat-cast-without-type-notes", Q,
         "Your QuantizeLinear to float4e2m1/float6 converts without the types' rules for NaN and -0: NaN becomes "
         "a zero (of the NaN's inverted sign) where +max is right, and float6 keeps a -0 result where +0 is right.",
         "onnx.reference 1.23.2 through ml_dtypes 0.6.0's cast (fact E175: 280 cases), against float4.md's "
         "'NaN | 6' and float6.md's '-0 saturates to 0' (qconform/docs/semantics.md#q-float4-float6); "
         "jax-ml/ml_dtypes#181 (the types' ml_dtypes definition: no NaN encoding, signed zeros).",
         "QuantizeLinear float32->float4e2m1, x=[NaN], y_scale=1: 6 (0x7) expected, -0 (0x8) given",
         MinifloatCastWithoutNotes, _float4_or_float6_out, ("floatkinds", "specials", "codec-edges")),
]

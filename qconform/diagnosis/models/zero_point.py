"""Adding the zero point (and converting to an integer around it) done another way."""
from __future__ import annotations

import numpy as np

from qconform import dtypes
from qconform.oracle import qlinear_matmul as qm
from qconform.diagnosis.models.base import _dev, _half_scale, _minifloat_out, _nonzero_zero_point, _q_int_or_dql, _q_out
from qconform.diagnosis.models.common import DQL, Q, _int32_cast


class ZeroPointBeforeRounding:
    def to_int(self, q, zero, t, prec):
        with np.errstate(all="ignore"):
            return self.saturate(self.round(self.fl(prec, q + zero)), t)


class Float8ZeroPointIgnored:
    def add_zero_float(self, q, zero, prec):
        return q


class ZeroPointSkippedWhereZero:
    """The addition skipped where the zero point is +0 (or absent), so a -0 quotient stays -0."""

    def add_zero_float(self, q, zero, prec):
        return np.where(np.asarray(zero) == 0, q, super().add_zero_float(q, zero, prec))


class Int32SaturatingCastThenZeroPoint:
    """A saturating float -> int32 conversion (WebAssembly i32.trunc_sat, ARM64 fcvtns: +-Inf and
    out-of-range to INT_MAX / INT_MIN, NaN to 0), then the zero point added in int32 (wrapping),
    then a saturating pack."""

    def to_int(self, q, zero, t, prec):
        t = dtypes.get(t)
        lo, hi = t.qrange
        with np.errstate(all="ignore"):
            nan = np.isnan(q)
            r = np.clip(np.where(nan, 0.0, self.round(q)), -(2.0 ** 31), 2.0 ** 31 - 1).astype(np.int64)
            s = qm.wrap_int32(r + np.asarray(zero, dtype=np.float64).astype(np.int64))
        return np.clip(s, lo, hi), nan


class Int64SaturatingCastThenZeroPoint:
    """A saturating float -> int64 conversion (AArch64 fcvtzs/fcvtns, WebAssembly i64.trunc_sat,
    Rust's ``as i64``: beyond-range and +-Inf to INT64_MAX / INT64_MIN, NaN to 0), the zero point
    added in int64 (wrapping), then a saturating pack: quotients of 2^63 and more (and +-Inf) wrap
    with a zero point of the same sign."""

    def to_int(self, q, zero, t, prec):
        t = dtypes.get(t)
        lo, hi = t.qrange
        with np.errstate(all="ignore"):
            nan = np.isnan(q)
            r = np.where(nan, 0.0, self.round(q))
            i = np.clip(r, -(2.0 ** 63), 2.0 ** 63 - 1024).astype(np.int64)
            i = np.where(r >= 2.0 ** 63, np.iinfo(np.int64).max, i)
            s = i + np.asarray(zero, dtype=np.float64).astype(np.int64)  # int64 arrays wrap
        return np.clip(s, lo, hi), nan


class Int32CastThenZeroPoint:
    """cvtps2dq, then the zero point added in int32 (wrapping), then a saturating pack."""

    def to_int(self, q, zero, t, prec):
        t = dtypes.get(t)
        lo, hi = t.qrange
        with np.errstate(all="ignore"):
            nan = np.isnan(q)
            i = _int32_cast(self.round(q)).astype(np.int64)  # NaN, ±Inf, out of range -> INT_MIN
            s = qm.wrap_int32(i + np.asarray(zero, dtype=np.float64).astype(np.int64))
        return np.clip(s, lo, hi), nan


class ZeroPointAddedInScaleType:
    """round(q) + zp computed in the division's precision P (float16 loses integers above 2048)."""

    def to_int(self, q, zero, t, prec):
        with np.errstate(all="ignore"):
            return self.saturate(self.fl(prec, self.round(q) + zero), t)


class NegativeInfinityToMax:
    """-Inf quantized to the type's maximum (an unsigned |x| path or a NaN-like branch)."""

    def to_int(self, q, zero, t, prec):
        with np.errstate(all="ignore"):
            return super().to_int(np.where(np.isneginf(q), np.inf, q), zero, t, prec)


class SaturateBeforeZeroPoint:
    """round(x / scale) clamped to the output type first, the zero point added after, then clamped
    again: a quotient past the type's range loses what the zero point would have brought back."""

    def to_int(self, q, zero, t, prec):
        with np.errstate(all="ignore"):
            r, nan = self.saturate(self.round(q), t)
            y, _ = self.saturate(r.astype(np.float64) + zero, t)
        return y, nan



#: The deviations of this step, each beside its mixin above (the registry's order: ``ORDER``).
DEVIATIONS = [
    _dev("zero-point-before-rounding", (Q, DQL),
         "Your kernel adds the zero point to x / scale in floating point before rounding "
         "(round(x / scale + zp)) instead of rounding first and adding the zero point exactly.",
         "webmachinelearning/webnn-baseline#101 (review: 'Round before adding'); onnx/onnx#4505 "
         "(function body Div -> Add -> Clip -> Cast); Xilinx/onnx-mlir#96 and microsoft/onnxruntime#25045 "
         "(OpenVINO FakeQuantize's round((x - low) / range * levels)).",
         "QuantizeLinear float32->uint8, zp=128 (or an odd zero point), x = (k+0.5)*s next to a tie: "
         "the float32 sum q + zp loses the bit that decides the tie",
         ZeroPointBeforeRounding, _q_int_or_dql, ("ties", "saturation")),
    _dev("int32-cast-then-zero-point", (Q, DQL),
         "Your kernel converts x / scale to int32 first (±Inf and values beyond the int32 range become "
         "INT_MIN) and adds the zero point in wrapping int32 arithmetic before clamping: +Inf gives qmin and "
         "INT_MIN plus a negative zero point wraps to qmax.",
         "onnxruntime 1.31.1 does this on the CPU (qconform/docs/diagnosis.md); pytorch/pytorch#60079 (overflow when "
         "zero_point is added to the rounded integer, fixed with __builtin_add_overflow); apache/tvm#9558 "
         "(+inf cast to int32 is INT_MIN on x86).",
         "QuantizeLinear float32->int8, x=[+Inf, -128], y_scale=2^-24, y_zero_point=-128: [127, -128] expected, "
         "[-128, 127] given",
         Int32CastThenZeroPoint, _q_int_or_dql, ("specials", "saturation")),
    _dev("float8-zero-point-ignored", Q,
         "Your QuantizeLinear to a float8 type ignores a non-zero float8 zero point (it returns "
         "convert(x / scale) instead of convert(x / scale + zero_point)).",
         "onnxruntime 1.31.1 does this (qconform/docs/diagnosis.md); onnx/onnx#5408 (the reference refused non-zero "
         "float8 zero points: 'x_zero_point is not null but should be for float 8 types'); onnx/onnx-mlir#2938 "
         "(an option to ignore the zero point).",
         "QuantizeLinear float32->float8e4m3fn, y_zero_point=1.0, x=-12, y_scale=1: -11 expected, -12 given",
         Float8ZeroPointIgnored, lambda d: _minifloat_out(d) and _nonzero_zero_point(d), ("floatkinds",)),
    _dev("zero-point-skipped", Q,
         "Your QuantizeLinear to a float8/float4/float6 type skips adding a zero point of +0 (or an absent "
         "one), so a quotient of -0 stays -0: the formula adds it, and -0 + +0 is +0.",
         "onnxruntime and onnx.reference's float8 path do this (qconform/facts/onnxruntime.toml, "
         "onnx-reference.toml: the reading this suite permitted until the open reading Q5 was decided, "
         "qconform/docs/semantics.md#q-float8-zero-point); the ONNX node test test_quantizelinear_float4e2m1 "
         "expects +0.",
         "QuantizeLinear float32->float8e4m3fn, x=-0.0, y_scale=1, no zero point: 0x00 (+0) expected, 0x80 given",
         ZeroPointSkippedWhereZero, _minifloat_out, ("signed-zero",)),
    _dev("zero-point-added-in-scale-type", Q,
         "Your kernel adds the zero point to round(x / scale) in the division's float16/bfloat16 precision: "
         "16-bit results above 2048 (float16) or 256 (bfloat16) are rounded before saturation.",
         "Plausible, and the reading issue 21 finding 5 argues the text does not permit "
         "(qconform/docs/semantics.md#q-zero-point): a half-precision kernel that keeps the sum in its compute "
         "type.",
         "QuantizeLinear-23 float16->uint16, x=2047, y_scale=1, y_zero_point=3: 2050 expected, 2048 given",
         ZeroPointAddedInScaleType, lambda d: _half_scale(d) and _q_out(d).is_integer and _q_out(d).bits == 16,
         ("basic", "saturation")),
    _dev("int32-saturating-cast-then-zero-point", (Q, DQL),
         "Your QuantizeLinear converts round(x / y_scale) to int32 with saturation (+-Inf and beyond-range to "
         "INT_MAX / INT_MIN, NaN to 0) and then adds the zero point in int32, which wraps: +Inf with "
         "y_zero_point=127 gives -128, -Inf with y_zero_point=-128 gives 127.",
         "onnxruntime-web 1.30.0 (WASM, i32.trunc_sat_f32_s) in issue 20's run: 18 float16 QuantizeLinear "
         "specials cases; the same int32 path as onnxruntime's E23 (fixed in 1.32), there with x86's "
         "non-saturating cvtps2dq (int32-cast-then-zero-point).",
         "QuantizeLinear float16->int8, x=-inf, y_scale=6e-8, y_zero_point=-128: -128 expected, 127 given",
         Int32SaturatingCastThenZeroPoint, _q_int_or_dql, ("specials", "saturation")),
    _dev("negative-infinity-to-max", (Q, DQL),
         "Your QuantizeLinear maps -Inf to the type's maximum instead of its minimum.",
         "Reported in issue 21 (onnxruntime 1.30, float16 QuantizeLinear); pytorch/pytorch#155109 and #133557 "
         "(inf and -inf quantized to the same bound).",
         "QuantizeLinear float16->int8, x=-inf, y_scale=1: -128 expected, 127 given",
         NegativeInfinityToMax, _q_int_or_dql, ("specials",)),
    _dev("saturate-before-zero-point", (Q, DQL),
         "Your kernel clamps round(x / scale) to the output type and adds the zero point afterwards, where "
         "the spec saturates round(x / scale) + zero_point: a quotient past the type's range keeps the "
         "bound, and the zero point then moves it.",
         "llvm/torch-mlir#4487 (TOSA lowering: 3.4501 / (1/66.933334) = 231 cast to int8 clamps to 127, plus "
         "zero point -128 gives -1 where 103 is right); Xilinx/onnx-mlir#96 and #138 (saturate(x/scale) + zp "
         "changed to saturate(x/scale + zp)).",
         "QuantizeLinear float32->int8, x=231, y_scale=1, y_zero_point=-128: 103 expected, -1 given",
         SaturateBeforeZeroPoint, _q_int_or_dql, ("zero-point-ties", "specials", "basic")),
    _dev("int64-saturating-cast-then-zero-point", Q,
         "Your QuantizeLinear converts round(x / y_scale) to int64 with saturation (+-Inf and beyond-range to "
         "INT64_MAX / INT64_MIN) and adds the zero point in int64, which wraps: a quotient of 2^63 or more (or "
         "+Inf) with y_zero_point=127 gives -128, where quotients below 2^63 are right.",
         "pytorch/pytorch#129127 and #167306 (fixing #111471: 'The static_cast<int64_t> can overflow for large "
         "float values and/or a small scale (e.g. 9.2e14 & 1e-4)', the zero point then added in int64); AArch64's "
         "fcvtzs saturates that cast to INT64_MAX; pytorch/pytorch#60079 (the zero-point addition overflowing "
         "after the cast, in int32).",
         "QuantizeLinear float32->int8, x=[3e9, 1e19], y_scale=1, y_zero_point=127: [127, 127] expected, "
         "[127, -128] given",
         Int64SaturatingCastThenZeroPoint, lambda d: _q_int_or_dql(d) and d.op == Q and _nonzero_zero_point(d),
         ("saturation", "specials")),
]

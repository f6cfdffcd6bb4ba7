"""The accumulating operators' sums and requantisation done another way: QLinearMatMul's, and
QLinearConv's, ConvInteger's and MatMulInteger's (each a mixin over one step of the oracle or of
the integer body, ``qconform/oracle/integer.py``)."""
from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from qconform import dtypes
from qconform.oracle.arith import round_fraction
from qconform.diagnosis.models.base import _dev, _int_rounding, _qlmm_int, _qlmm_per_column, _qlmm_u8s8
from qconform.diagnosis.models.common import CONVI, MMI, QLCONV, QLMM, _F32
from qconform.oracle.integer import INT32_MAX, INT32_MIN, conv_accumulate, conv_sums


class QlmmAccumulateInFloat32:
    """The integer accumulator carried in float32, one product added at a time: exact only while
    the partial sums stay below 2^24."""

    def accumulate(self, da, db, raw, zeros, types):
        a, b = np.asarray(da, np.float64), np.asarray(db, np.float64)
        products = (a[..., :, :, None] * b[..., None, :, :]).astype(np.float32)  # [..., M, K, N], each exact
        return np.add.accumulate(products, axis=-2, dtype=np.float32)[..., -1, :].astype(np.int64)


def _quantize_multiplier(m: float) -> tuple[int, int]:
    """TFLite QuantizeMultiplier: m = q * 2^(shift - 31), q in [2^30, 2^31) rounded half away."""
    if m == 0:
        return 0, 0
    frac, shift = math.frexp(m)
    q = int(round_fraction(Fraction(frac) * (1 << 31), "half-away"))
    if q == 1 << 31:
        q //= 2
        shift += 1
    return q, shift


def _fixed_point_multiply(x: int, q: int, shift: int) -> int:
    """gemmlowp SaturatingRoundingDoublingHighMul + RoundingDivideByPOT (TFLite MultiplyByQuantizedMultiplier)."""
    left, right = max(shift, 0), max(-shift, 0)
    a = max(-(2**31), min(2**31 - 1, x * (1 << left)))
    if a == q == -(2**31):
        high = 2**31 - 1
    else:
        ab = a * q
        nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
        t = ab + nudge
        high = abs(t) // (1 << 31) * (1 if t >= 0 else -1)  # C division truncates toward zero
    if right == 0:
        return high
    mask = (1 << right) - 1
    remainder = high & mask
    threshold = (mask >> 1) + (1 if high < 0 else 0)
    return (high >> right) + (1 if remainder > threshold else 0)


class QlmmFixedPointMultiplier:
    def requantisations(self, scale_t):
        return ["fixed-point-multiplier"]

    def requantise(self, req, acc, e, scales, yz, out_t, scale_t):
        if req != "fixed-point-multiplier" or not out_t.is_integer:
            return super().requantise("multiplier-float64", acc, e, scales, yz, out_t, scale_t)
        a_s, b_s, ysc = scales
        shape = acc.shape
        sa, sb = np.broadcast_to(a_s, shape).ravel(), np.broadcast_to(b_s, shape).ravel()
        out = np.empty(acc.size, dtype=np.float64)
        cache: dict[tuple[float, float], tuple[int, int]] = {}
        for i, c in enumerate(np.asarray(acc).ravel()):
            key = (float(sa[i]), float(sb[i]))
            if key not in cache:
                cache[key] = _quantize_multiplier(key[0] * key[1] / float(ysc))  # in double, as TFLite
            q, shift = cache[key]
            out[i] = _fixed_point_multiply(int(c), q, shift) + float(yz)
        return {True: out.reshape(shape)}


class QlmmU8S8PairSaturation:
    """x86 VPMADDUBSW: u8 x s8 products summed in adjacent pairs with int16 saturation."""

    def accumulate(self, da, db, raw, zeros, types):
        ta, tb = types
        if not (ta.name == "uint8" and tb.name == "int8"):
            return super().accumulate(da, db, raw, zeros, types)
        av, bv = (r.astype(np.int64) for r in raw)
        az, bz = (np.asarray(z, dtype=np.float64).astype(np.int64) for z in zeros)
        k = av.shape[-1]
        if k % 2:
            av = np.concatenate([av, np.zeros(av.shape[:-1] + (1,), np.int64)], axis=-1)
            bv = np.concatenate([bv, np.zeros(bv.shape[:-2] + (1,) + bv.shape[-1:], np.int64)], axis=-2)
        prod = av[..., :, :, None] * bv[..., None, :, :]  # [..., M, K, N]
        pairs = np.clip(prod[..., 0::2, :] + prod[..., 1::2, :], -(2**15), 2**15 - 1)
        raw_sum = pairs.sum(axis=-2)
        rows = av.sum(axis=-1, keepdims=True)
        cols = bv.sum(axis=-2, keepdims=True)
        return raw_sum - rows * bz - az * cols + k * az * bz


class QlmmColumnScaleByRow:
    def b_scale(self, bsc, out_shape):
        full = np.broadcast_to(bsc, out_shape)
        if out_shape[-1] != out_shape[-2] or bsc.ndim == 0 or bsc.shape[-1] == 1:
            return full
        return np.swapaxes(full, -1, -2)


class QlmmZeroPointBeforeRounding:
    """QLinearMatMul requantised as rint(fl32(acc * M) + y_zp) in float32 (M = fl32(a_s b_s) / y_s)."""

    def requantise(self, req, acc, e, scales, zp, out_t, scale_t):
        if not out_t.is_integer or req == "exact-rational" or acc.dtype == object:
            return super().requantise(req, acc, e, scales, zp, out_t, scale_t)
        a_s, b_s, y_s = scales
        f = functools.partial(self.fl, _F32)
        with np.errstate(all="ignore"):
            m = f(f(a_s * b_s) / y_s)
            return {True: self.round(f(f(f(acc.astype(np.float64)) * m) + zp))}


class ZeroPointBeforeRoundingFloat64:
    """Requantised as numpy does int32 · float32: round(fl64(acc · m) + y_zp), m = fl32(fl32(x_s·w_s)/y_s)
    (onnx.reference's op_qlinear_conv.py: ``R = res * (x_scale * w_scale / y_scale); R += y_zero_point``)."""

    def requantise(self, req, acc, e, scales, zp, out_t, scale_t):
        if not out_t.is_integer or req == "exact-rational" or acc.dtype == object:
            return super().requantise(req, acc, e, scales, zp, out_t, scale_t)
        a_s, b_s, y_s = scales
        f = functools.partial(self.fl, _F32)
        with np.errstate(all="ignore"):
            m = f(f(a_s * b_s) / y_s)
            return {True: self.round(acc.astype(np.float64) * m + zp)}


class QlmmRequantiseInHalf:
    """QLinearMatMul requantised left to right in the scales' float16/bfloat16 type:
    round(T(T(acc) * T(a_s b_s)) / y_s) + y_zp, each step rounded to T (an accumulator beyond 65504
    is Inf in float16), then clamped and cast."""

    def requantise(self, req, acc, e, scales, zp, out_t, scale_t):
        if scale_t not in dtypes.having("is_half") or not out_t.is_integer or acc.dtype == object:
            return super().requantise(req, acc, e, scales, zp, out_t, scale_t)
        a_s, b_s, y_s = scales
        f = functools.partial(self.fl, scale_t)
        with np.errstate(all="ignore"):
            v = f(f(f(acc.astype(np.float64)) * f(a_s * b_s)) / y_s)
            return {True: f(self.round(v) + zp)}


class QlmmZeroPointsIgnored:
    """The integer product a @ b accumulated from the codes as stored, the zero points never
    subtracted."""

    def accumulate(self, da, db, raw, zeros, types):
        av, bv = (np.asarray(r).astype(np.int64) for r in raw)
        return np.matmul(av, bv)



#: The deviations of this step, each beside its mixin above (the registry's order: ``ORDER``).
class QlmmFloat8InputsTruncated:
    """float8 a, b and their zero points converted to integers by truncation (numpy's astype(int32) of
    an ml_dtypes array) before the integer matmul; NaN and Inf stay what they are (don't-care)."""

    def data(self, arg):
        v = super().data(arg)
        return np.trunc(v) if dtypes.get(arg.type).is_float8 else v

    def param(self, arg):
        v = super().param(arg)
        return np.trunc(v) if dtypes.get(arg.type).is_float8 else v


def _qlmm_float8_in(d) -> bool:
    return d.op == QLMM and any(dtypes.get(a.type).is_float8 for a in (d.inputs[0], d.inputs[3]))


class ConvPadWithCodeZero:
    """Padded pixels hold code 0 instead of x's zero point, so each contributes (0 − x_zp)·(w − w_zp)."""

    def conv_sums(self, x, x_zp, w, w_zp, attrs):
        return conv_sums(x, x_zp, w, w_zp, attrs, pad_code=0)


class IntegerZeroPointsIgnored:
    """The stored codes multiplied as they are, the zero points never subtracted."""

    def conv_sums(self, x, x_zp, w, w_zp, attrs):
        return conv_accumulate(x, w, attrs)

    def matmul_sums(self, a, a_zp, b, b_zp):
        return np.matmul(a, b)


class Int32AccumulatorSaturates:
    """An int32 accumulator that clamps (x86 VPDPBUSDS, saturating DSP MACs) instead of wrapping."""

    def int32_result(self, exact):
        return np.clip(exact, INT32_MIN, INT32_MAX).astype(np.int32)


def _pads_with_nonzero_zero_point(d) -> bool:
    zp = d.inputs[2] if d.op == QLCONV else (d.inputs[2] if len(d.inputs) > 2 else None)
    pads = any(d.attrs.get("pads", [0])) or d.attrs.get("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER")
    return pads and zp is not None and bool(np.any(np.asarray(zp.value) != 0))


def _nonzero_zero_points(d) -> bool:
    return any(a is not None and a.name.endswith("zero_point") and a.name[0] in "xwab" and np.any(a.value != 0)
               for a in d.inputs if a is not None and a.name != "y_zero_point")


def _wide_sums(d) -> bool:
    """Sums that can leave int32: K · 255² beyond 2^31 − 1."""
    k = int(np.prod(d.inputs[1].value.shape[1:])) if d.op == CONVI else int(d.inputs[0].value.shape[-1])
    return k * 255 * 255 > INT32_MAX


DEVIATIONS = [
    _dev("qlinearmatmul-fixed-point-multiplier", QLMM,
         "Your QLinearMatMul requantises with a 32-bit fixed-point multiplier and shift (gemmlowp/TFLite "
         "style, rounding twice) instead of multiplying by a_scale * b_scale / y_scale and rounding once.",
         "tensorflow/tensorflow#25087 (two roundings in MultiplyByQuantizedMultiplier); "
         "google-ai-edge/LiteRT#8567; apache/tvm#3531 (QNN requantize in fixed point).",
         "QLinearMatMul uint8, acc=7984, multiplier 0.0014402703931141053: 11 expected, 12 given",
         QlmmFixedPointMultiplier, _qlmm_int, ("readings", "zero-points", "k-sizes")),
    _dev("qlinearmatmul-u8s8-pair-saturation", QLMM,
         "Your uint8 x int8 QLinearMatMul sums adjacent products in int16 with saturation (x86 "
         "VPMADDUBSW) before accumulating in int32.",
         "Plausible: VPMADDUBSW saturates pairs of u8*s8 products to int16 (255*127*2 = 64770 > 32767); "
         "the reason for onnxruntime's reduce_range quantization option on AVX2 without VNNI.",
         "QLinearMatMul a uint8 [[255, 255]], b int8 [[127], [127]], scales 1: 64770 expected before requantisation",
         QlmmU8S8PairSaturation, _qlmm_u8s8, ("accumulator", "k-sizes")),
    _dev("qlinearmatmul-column-scale-by-row", QLMM,
         "Your QLinearMatMul applies b's per-column scale by output row instead of by output column.",
         "Plausible: kernels that support per-row (a) scaling route b's per-column vector through the same "
         "path; with M == N no shape check catches it.",
         "QLinearMatMul 2x2 @ 2x2 with b_scale=[[1, 2]] (per column) and distinct rows",
         QlmmColumnScaleByRow, _qlmm_per_column, ("per-row-column",)),
    _dev("qlinearmatmul-zero-point-before-rounding", QLMM,
         "Your QLinearMatMul adds y_zero_point before rounding: rint(acc * M + y_zp) in float32.",
         "OpenVINO 2026.4.1's int8 brgemm requantisation (issue 20's probe: 44 of 94 unexplained int8/uint8 "
         "QLinearMatMul failures).",
         "QLinearMatMul int8, a_scale=1, b_scale=0.5, y_scale=3, y_zero_point=3, a=-123, b=1: -17 expected, -18 given",
         QlmmZeroPointBeforeRounding, lambda d: d.op == QLMM, ("readings", "ties", "zero-points")),
    _dev("qlinearmatmul-requantise-in-half", QLMM,
         "Your QLinearMatMul requantises in the scales' float16/bfloat16 type, left to right: "
         "round(T(acc) * T(a_scale * b_scale) / y_scale) + y_zero_point, each step rounded to T, so an "
         "accumulator beyond 65504 becomes Inf in float16 and the output saturates.",
         "tinygrad/nn/onnx.py _qlinearop_quantized ((out * prod(scales) / out_scale).round() + out_zero_point "
         "in the scales' dtype), tinygrad 0.14.0 in issue 20's probe (54 float16-scale cases).",
         "QLinearMatMul float16 scales, int8, a=b=127 (K=16, acc=258064): 68 expected, 127 given",
         QlmmRequantiseInHalf, lambda d: d.op == QLMM and d.inputs[1].type in dtypes.having("is_half"),
         ("zero-points", "k-sizes", "accumulator")),
    _dev("qlinearmatmul-zero-points-ignored", QLMM,
         "Your QLinearMatMul multiplies the stored codes of a and b without subtracting a_zero_point and "
         "b_zero_point.",
         "iree-org/iree#24583 (MatMulInteger, the integer core of QLinearMatMul, ignores its zero points in "
         "IREE's ONNX import: every output wrong, e.g. 1070901 where onnxruntime gives 58165); IREE 3.13.0 in "
         "this suite's run: the 3-D int8 ONNX node tests of QLinearMatMul-10 and -21.",
         "QLinearMatMul uint8, a=[[130]], a_zero_point=128, b=[[129]], b_zero_point=128, scales 1: "
         "2 expected, 16770 (saturated to 255) given",
         QlmmZeroPointsIgnored,
         lambda d: _qlmm_int(d) and any(bool(np.any(np.asarray(d.inputs[i].value) != 0)) for i in (2, 5)),
         ("zero-points", "basic")),
    _dev("qlinearmatmul-accumulate-in-float32", QLMM,
         "Your QLinearMatMul carries the integer accumulator in float32, so a partial sum beyond 2^24 loses "
         "its low bits.",
         "openvinotoolkit/openvino#37956 (int32 MatMul computed in float32 on the CPU plugin, exact only "
         "below 2^24, 2025.4 to 2026.4 on Apple M1); tract 0.23.9 in this suite's run: it reproduces all 16 "
         "QLinearMatMul accumulator/beyond-2^31 cases bit for bit, where an int32 accumulator, wrapping or "
         "saturating, reproduces neither of their two elements.",
         "QLinearMatMul uint8, K=515, a=b=255, zero points 0: the exact accumulator 33,487,875 is odd "
         "and above 2^24",
         QlmmAccumulateInFloat32, _qlmm_int, ("k-sizes",)),
    _dev("qlinearmatmul-float8-inputs-truncated", QLMM,
         "Your QLinearMatMul converts float8 a and b (and their zero points) to int32 by truncation before the "
         "integer matmul, so 0.5 becomes 0 and 1.75 becomes 1, where the float8 values are to be used exactly.",
         "onnx.reference's op_qlinear_matmul.py (`A = a.astype(np.int32)`, quoted in onnx/onnx#6169), which "
         "QLinearMatMul-21 reaches with float8 inputs: onnx.reference 1.23.2 here (fact E20).",
         "QLinearMatMul-21, a=[[0.5, 1.75]] (float8e4m3fn), b=[[2], [2]], scales 1: 4.5 -> 4 expected, 2 given",
         QlmmFloat8InputsTruncated, _qlmm_float8_in, ("basic", "readings")),
    _dev("conv-padding-with-code-zero", (QLCONV, CONVI),
         "Your convolution pads the quantized input with code 0 instead of its zero point, so each padded "
         "pixel adds (0 − x_zero_point)·(w − w_zero_point) to the sum where the text's padding adds nothing.",
         "apache/tvm#4807 and #11127 (QNN conv2d padded with 0, later with the input zero point); "
         "llvm/torch-mlir#3528 (ONNX ConvInteger/QLinearConv lowering padded with 0) — research/compute-ops-sources.md.",
         "ConvInteger uint8, x_zero_point 128, pads [1, 1, 1, 1], w = 1: border sums off by 128 per padded pixel",
         ConvPadWithCodeZero, _pads_with_nonzero_zero_point, ("zero-points", "attributes")),
    _dev("integer-zero-points-ignored", (QLCONV, CONVI, MMI),
         "Your kernel multiplies the stored codes without subtracting the input and weight zero points.",
         "iree-org/iree#24583 (MatMulInteger's zero points ignored in IREE's ONNX import: every output wrong).",
         "MatMulInteger uint8, A=[[130]], a_zero_point=128, B=[[129]], b_zero_point=128: 2 expected, 16770 given",
         IntegerZeroPointsIgnored, _nonzero_zero_points, ("zero-points", "basic")),
    _dev("int32-accumulator-saturates", (CONVI, MMI),
         "Your int32 accumulator saturates at ±2^31 instead of wrapping: \"The accumulation may overflow if and "
         "only if in 32 bits\" permits a 32-bit overflow, not a clamp.",
         "x86 VPDPBUSDS (the saturating form of AVX-VNNI's u8·s8 dot product, Intel SDM) and saturating DSP MAC "
         "units; onnxruntime#16105 shows the int16 form of the same clamp (VPMADDUBSW).",
         "MatMulInteger uint8, K = 33,100, A = 255, B = 255: the exact sum 2,152,327,500 wraps to -2,142,639,796; "
         "a saturating accumulator gives 2,147,483,647",
         Int32AccumulatorSaturates, _wide_sums, ("accumulator",)),
    _dev("qlinearconv-fixed-point-multiplier", QLCONV,
         "Your QLinearConv requantises with a 32-bit fixed-point multiplier and shift (gemmlowp/TFLite style, "
         "rounding twice) instead of multiplying by x_scale · w_scale / y_scale and rounding once.",
         "gemmlowp fixedpoint.h SaturatingRoundingDoublingHighMul + RoundingDivideByPOT; XNNPACK's gemmlowp "
         "requantisation; onnxruntime PR #3196 (its move from gemmlowp fixed point to the float32 path).",
         "QLinearConv with calibrated scales: results within one step of a tie round the other way",
         QlmmFixedPointMultiplier, _int_rounding, ("random", "basic")),
    _dev("qlinearconv-zero-point-before-rounding-float64", QLCONV,
         "Your QLinearConv adds y_zero_point before rounding, in float64: round(acc · M + y_zp) with M formed in "
         "float32 and the product in float64.",
         "onnx.reference's op_qlinear_conv.py (R = res * (x_scale * w_scale / y_scale); R += y_zero_point; "
         "np.round), onnx 1.20 here.",
         "QLinearConv, multiplier 1/2, odd y_zero_point: a sum of 2k + 1 gives k + 1 + zp instead of k + zp (k even)",
         ZeroPointBeforeRoundingFloat64, _int_rounding, ("ties", "readings", "random")),
]

"""Reading the inputs and parameters (their codes, their layout, subnormal constants) another way."""
from __future__ import annotations

import numpy as np

from qconform import dtypes
from qconform.diagnosis.models.base import _dev, _has_subnormal_scale, _packed_io, _q_out
from qconform.diagnosis.models.common import DQ, Q, _minifloat, swap_slots
from qconform.diagnosis.models.division import FlushDenormals
from qconform.oracle.arith import as_float64, pack_output


class ConstantSubnormalsFlushed:
    """Subnormal scale (and zero point) values read as zero, the data and the result left alone: a
    runtime that flushes denormals in its constant tensors when it loads them (OpenVINO's CPU plugin
    does, for the speed of denormal-free arithmetic), so the arithmetic itself keeps subnormals."""

    def param(self, arg):
        v = super().param(arg)
        return FlushDenormals._flush(v, arg.type) if arg.type in dtypes.having("is_arithmetic") else v


class HighNibbleFirst:
    def layout(self, out, t):
        return swap_slots(out, t)

    def read_layout(self, arr, t):
        return swap_slots(arr, t)


def _minifloat_codes(arg):
    t = dtypes.get(arg.type)
    fmt = t.float_format
    if fmt is None or fmt.width > 8 or fmt.nan_style == "e8m0":
        return None, t
    return t.to_bits(arg.value).astype(np.int64), t


class MinifloatInputSubnormalsFlushed:
    def data(self, arg):
        v = super().data(arg)
        codes, t = _minifloat_codes(arg)
        if codes is None:
            return v
        tiny = 2.0 ** t.float_format.emin
        with np.errstate(invalid="ignore"):
            return np.where(np.abs(v) < tiny, np.copysign(0.0, v), v)


class MinifloatInputNanAsFinite:
    """float8/float4/float6 NaN and Inf codes decoded by the bit formula, as if they were finite."""

    def data(self, arg):
        v = super().data(arg)
        codes, t = _minifloat_codes(arg)
        if codes is None:
            return v
        fmt = t.float_format
        sign = (codes >> (fmt.ebits + fmt.mbits)) & 1 if fmt.sign_bit else np.zeros_like(codes)
        e = (codes >> fmt.mbits) & ((1 << fmt.ebits) - 1)
        m = codes & ((1 << fmt.mbits) - 1)
        bias = 1 - fmt.emin
        mag = np.where(e == 0, m * 2.0 ** (fmt.emin - fmt.mbits), (1 + m / 2.0**fmt.mbits) * 2.0 ** (e - bias))
        formula = np.where(sign == 1, -mag, mag)
        return np.where(np.isfinite(v), v, formula)


class ExtfBitEmulation(MinifloatInputNanAsFinite):
    """float8 decoded from its bit fields where only the one code 0x7F is e4m3fn's NaN: the negative
    NaN 0xFF goes through the normal-number formula (-480)."""

    def data(self, arg):
        plain = super(MinifloatInputNanAsFinite, self).data(arg)  # the correct decoding
        codes, t = _minifloat_codes(arg)
        if codes is None or t.float_format.nan_style != "fn":
            return plain
        return np.where(codes == (1 << t.bits) - 1, super().data(arg), plain)


class FnuzNanCodeAsNegativeZero:
    def data(self, arg):
        v = super().data(arg)
        codes, t = _minifloat_codes(arg)
        if codes is None or t.float_format.nan_style != "fnuz":
            return v
        return np.where(codes == 0x80, -0.0, v)


class SubByteZeroExtended:
    """int4/int2 data read without sign extension (as uint4/uint2)."""

    def data(self, arg):
        v = super().data(arg)
        t = dtypes.get(arg.type)
        if not (t.is_integer and t.packed and t.signed):
            return v
        return np.where(v < 0, v + (1 << t.bits), v)


class UnsignedZeroPointReadAsSigned:
    """A uint8/uint16 zero point read as the signed type of its width (200 -> -56)."""

    def param(self, arg):
        v = super().param(arg)
        t = dtypes.get(arg.type)
        if t.is_integer and not t.signed and t.bits in (8, 16):
            v = np.where(v >= 2 ** (t.bits - 1), v - 2 ** t.bits, v)
        return v



class Float4SignedCodeSubnormalTest:
    """float4e2m1 data decoded from the code sign-extended to int8 (``s = (int8_t)(c << 4) >> 4``),
    with the subnormal test ``s < 2`` written for the exponent field: every negative code passes it, so
    a negative code decodes as ±0.5 * its mantissa bit (-1.0 -> -0, -6 -> -0.5); positive codes and
    -0.5 are right."""

    def data(self, arg):
        v = super().data(arg)
        if arg.type != "float4e2m1":
            return v
        codes = dtypes.get(arg.type).to_bits(arg.value).astype(np.int64)
        wrong = np.copysign((codes & 1) * 0.5, -1.0)
        return np.where(codes >= 8, wrong, v)


class Int4ReadAsOffsetBinary:
    """int4 data read as offset binary with a bias of 7: the nibble as an unsigned number minus 7
    (0x0 -> -7, 0x7 -> 0, 0x8 -> 1, 0xF -> 8), tilelang's decode_i4s_to_i8s."""

    def data(self, arg):
        v = super().data(arg)
        if arg.type != "int4":
            return v
        return np.where(v < 0, v + 16, v) - 7


class Int4PackSaturatingNarrow:
    """int4 output packed two elements per 16-bit lane as (odd << 4) | (even & 0xF), the odd element
    sign-extended, and narrowed to a byte with unsigned saturation (x86 packus, NEON vqmovun): a
    negative odd element makes the lane negative, so the whole byte becomes 0x00."""

    def layout(self, out, t):
        out = super().layout(out, t)
        tt = dtypes.get(t)
        if tt.name != "int4":
            return out
        vals = as_float64(out, tt).reshape(-1).copy()
        n = vals.size - vals.size % 2
        pairs = vals[:n].reshape(-1, 2)
        neg_odd = pairs[:, 1] < 0
        pairs[neg_odd] = 0
        vals[:n] = pairs.reshape(-1)
        return pack_output(vals.astype(np.int64), tt).reshape(np.shape(out))



#: The deviations of this step, each beside its mixin above (the registry's order: ``ORDER``).
DEVIATIONS = [
    _dev("sub-byte-high-nibble-first", (Q, DQ),
         "Your int4/uint4/int2/uint2 packing puts the first element in the most significant bits of each "
         "byte; ONNX stores it in the least significant bits.",
         "onnx/onnx#5811 (LSB-first chosen to match torch quint4x2; the survey in review); amd/Quark#30 "
         "(linear vs interleaved nibble layouts scrambled); 1bit-MONSTER/1bit-MONSTER#1873 (lane order).",
         "QuantizeLinear float32->int4, x=[1, 2, 3], y_scale=1: [1, 2, 3] expected, [2, 1, 0] read back",
         HighNibbleFirst, _packed_io, ("packing", "basic")),
    _dev("constant-subnormals-flushed", (Q, DQ),
         "Your runtime reads a subnormal scale as zero (it flushes denormals in constant tensors when it "
         "loads them) while its arithmetic keeps subnormal data and results.",
         "OpenVINO 2026.4.1's CPU plugin (issue 20's probe: DequantizeLinear-19/float8e4m3fn-float32/specials/"
         "extremes gives 0 for x_scale = 2^-149 but keeps the subnormal products of x_scale = 2^-126); its "
         "CPU_DENORMALS_OPTIMIZATION flushes constant inputs.",
         "DequantizeLinear float8e4m3fn->float32, x=1, x_scale=2^-149: 2^-149 expected, 0 given",
         ConstantSubnormalsFlushed, lambda d: d.op in (Q, DQ) and _has_subnormal_scale(d), ("specials",)),
    _dev("minifloat-input-subnormals-flushed", DQ,
         "Your DequantizeLinear flushes subnormal float8/float4/float6 inputs to zero.",
         "Reported in issue 20's probe of IREE 3.13 (float8 subnormals flushed to zero).",
         "DequantizeLinear float8e4m3fn->float32, x=0x01 (2^-9), x_scale=1: 2^-9 expected, 0 given",
         MinifloatInputSubnormalsFlushed, lambda d: d.op == DQ and _minifloat(d.inputs[0].type), ("floatkinds",)),
    _dev("minifloat-input-nan-as-finite", DQ,
         "Your DequantizeLinear decodes float8 NaN/Inf codes with the plain bit formula, as finite values "
         "(e4m3fn 0x7F becomes 480).",
         "Plausible (issue 21 finding 15): a float8 decoder written from the bit formula alone; the special "
         "codes are where hand-written decoders go wrong (triton-lang/triton#10745 decoded fnuz NaN as -0).",
         "DequantizeLinear float8e4m3fn->float32, x=0x7F, x_scale=1: NaN expected, 480 given",
         MinifloatInputNanAsFinite, lambda d: d.op == DQ and _minifloat(d.inputs[0].type)
         and not d.inputs[0].type.endswith("fnuz"), ("floatkinds", "specials")),
    _dev("float8-extf-bit-emulation", DQ,
         "Your float8e4m3fn decoder tests for NaN by comparing the code with 0x7F only, so the negative NaN "
         "0xFF is decoded by the normal-number formula as -480.",
         "IREE 3.13's ConvertUnsupportedFloatArithPass (ExtFFromSmallFloat: for FN types isNaN is "
         "code == 0x7F, since iree-org/iree#23119); issue 20's IREE run (DequantizeLinear float8e4m3fn, x=0xFF, "
         "scale 2: -960).",
         "DequantizeLinear float8e4m3fn->float32, x=0xFF, x_scale=1: NaN expected, -480 given",
         ExtfBitEmulation, lambda d: d.op == DQ and d.inputs[0].type == "float8e4m3fn", ("floatkinds", "basic")),
    _dev("fnuz-nan-code-as-negative-zero", DQ,
         "Your DequantizeLinear reads the fnuz NaN code 0x80 as -0 (a sign bit over zero), so NaN inputs "
         "come out as -0.",
         "triton-lang/triton#10745 and its fix #10778 (AMD: e4m3fnuz/e5m2fnuz 0x80 upcast to fp16/bf16 gave "
         "-0.0 instead of NaN).",
         "DequantizeLinear float8e4m3fnuz->float32, x=0x80, x_scale=1: NaN expected, -0 given",
         FnuzNanCodeAsNegativeZero, lambda d: d.op == DQ and d.inputs[0].type.endswith("fnuz"),
         ("floatkinds", "specials")),
    _dev("sub-byte-zero-extended", DQ,
         "Your DequantizeLinear reads int4/int2 without sign extension: -1 (0xF) becomes 15.",
         "onnxruntime/onnxruntime-qnn#728 (folding a constant int4 DequantizeLinear zero-extended the nibbles); "
         "jax-ml/jax#17672 (an int4 array cast to int8 zero-extends).",
         "DequantizeLinear int4->float32, x=-1, x_scale=1: -1 expected, 15 given",
         SubByteZeroExtended, lambda d: d.op == DQ and d.inputs[0].type in ("int4", "int2"), ("packing", "basic")),
    _dev("unsigned-zero-point-read-as-signed", (Q, DQ),
         "Your kernel reads a uint8/uint16 zero point as the signed type of the same width: a zero point of "
         "128 or more becomes zero_point - 256 (or - 65536).",
         "llvm/torch-mlir#3009 (DynamicQuantizeLinear -> QuantizeLinear on IREE llvm-cpu: uint8 zero points "
         ">= 128 came out as zp - 256, and QuantizeLinear uint8 outputs were all zeros; fixed with #3018).",
         "DequantizeLinear uint8->float32, x=200, x_scale=1, x_zero_point=200: 0 expected, 256 given",
         UnsignedZeroPointReadAsSigned,
         lambda d: len(d.inputs) > 2 and d.inputs[2] is not None and d.inputs[2].type in ("uint8", "uint16")
         and bool(np.any(np.asarray(d.inputs[2].value).astype(np.int64) >= 2 ** (dtypes.get(d.inputs[2].type).bits - 1))),
         ("basic", "zero-point-ties")),
    _dev("float4-signed-code-subnormal-test", DQ,
         "Your float4e2m1 decoder tests for a subnormal with 'code < 2' on the code sign-extended to a signed "
         "integer, so every negative code is taken as subnormal: -1 decodes as -0, -1.5, -3 and -6 as -0.5.",
         "Plausible, from the code pattern (the 4-bit code sign-extended as int4 data is, then the exponent "
         "test written as a compare on the whole code); the exponent-zero test is where float4 decoders go "
         "wrong (tile-ai/tilelang#2704: _tir_u8_to_f4_to_bf16 decoded the exponent-zero codes 0x0, 0x1, 0x8, "
         "0x9 as normal).",
         "DequantizeLinear float4e2m1->float32, x=-1.0 (code 0xA), x_scale=1: -1 expected, -0 given",
         Float4SignedCodeSubnormalTest, lambda d: d.op == DQ and d.inputs[0].type == "float4e2m1",
         ("floatkinds", "packing")),
    _dev("int4-read-as-offset-binary", DQ,
         "Your DequantizeLinear reads each int4 nibble as offset binary with a bias of 7 (the unsigned nibble "
         "minus 7) instead of two's complement: 0 becomes -7, -1 (0xF) becomes 8.",
         "tile-ai/tilelang#2477 and its fix #2490 (decode_i4s_to_i8s decoded signed int4 as nibble - 7, range "
         "[-7, 8], where the scalar path sign-extends; the same file's decode_i4b_to_f16 subtracts 8).",
         "DequantizeLinear int4->float32, x=[0, -1, 7], x_scale=1: [0, -1, 7] expected, [-7, 8, 0] given",
         Int4ReadAsOffsetBinary, lambda d: d.op == DQ and d.inputs[0].type == "int4", ("packing", "basic")),
    _dev("int4-pack-saturating-narrow", Q,
         "Your int4 QuantizeLinear packs each pair as (odd << 4) | (even & 0xF) in a signed 16-bit lane and "
         "narrows it to a byte with unsigned saturation, so a negative odd-index element zeroes its whole "
         "byte (both elements read back 0).",
         "Plausible, from the SIMD pattern (x86 _mm_packus_epi16 / NEON vqmovun_s16 saturate signed lanes to "
         "unsigned bytes); the signed high-nibble shift is the known hazard of int4 packing "
         "(vllm-project/compressed-tensors#518 review: mask the high nibble before shifting).",
         "QuantizeLinear float32->int4, x=[3, -2], y_scale=1: bytes 0xE3 expected, 0x00 given (read back [0, 0])",
         Int4PackSaturatingNarrow, lambda d: d.op == Q and _q_out(d) is not None and _q_out(d).name == "int4",
         ("packing", "basic")),
]

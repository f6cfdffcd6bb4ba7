"""The arithmetic of the encoding models (``encoding``): float8/float4/float6 codes computed as real
encoders compute them, and the roundings to a format's grid the models apply before the spec's
encoder. Pure functions over arrays, kept apart from the mixins and their declarations so that a
model reads as one step done another way and the bit-level arithmetic reads (and is tested) on its own."""
from __future__ import annotations

import numpy as np

from qconform import dtypes
from qconform.oracle import floats
from qconform.oracle.arith import pack_output


def _quantum_exponent(a: np.ndarray, fmt) -> np.ndarray:
    _, e = np.frexp(a)
    return np.maximum(e.astype(np.int64) - 1, fmt.emin) - fmt.mbits


def truncate_to_format(x: np.ndarray, t: dtypes.ElemType) -> np.ndarray:
    """Round toward zero to t's precision (exponent range unbounded above, as floats.round_to_format)."""
    fmt = t.float_format
    x = np.asarray(x, dtype=np.float64)
    ok = np.isfinite(x) & (x != 0)
    a = np.where(ok, np.abs(x), 1.0)
    q = _quantum_exponent(a, fmt)
    r = np.ldexp(np.trunc(np.ldexp(a, -q)), q)
    return np.where(ok, np.copysign(r, x), x)


def to_float32(v) -> np.ndarray:
    """v rounded to float32, as the float32 array whose bit fields the emulated encoders read."""
    f32 = dtypes.get("float32")
    return pack_output(floats.encode(np.asarray(v, dtype=np.float64), f32, saturate=False), "float32")


def ties_away_to_format(x: np.ndarray, t: dtypes.ElemType) -> np.ndarray:
    """x moved to t's neighbour of larger magnitude where x is exactly halfway between two of t's
    values; every other x unchanged (the encoder's round to nearest then decides it alone)."""
    fmt = t.float_format
    x = np.asarray(x, dtype=np.float64)
    ok = np.isfinite(x) & (x != 0)
    a = np.where(ok, np.abs(x), 1.0)
    q = _quantum_exponent(a, fmt)
    scaled = np.ldexp(a, -q)
    tie = ok & (scaled - np.floor(scaled) == 0.5)
    return np.where(tie, np.copysign(np.ldexp(np.floor(scaled) + 1, q), x), x)


def truncf_bit_emulation(v: np.ndarray, fmt: dtypes.FloatFormat) -> np.ndarray:
    """float32 -> float8 codes the way IREE's ``TruncFToSmallFloat`` (ConvertUnsupportedFloatArithPass,
    after runtime/src/iree/base/internal/math.h) builds them from the float32 fields: round to nearest
    even, but a subnormal whose rounding carries into the smallest normal loses the carry to the
    mantissa mask (0); overflow past the top exponent gives ±Inf (e5m2) or the one NaN code 0x7F /
    0x80, never a saturated value; a NaN input gives that positive NaN code; a value whose rounded
    code is e4m3fn's 0x7F/0xFF keeps it (NaN, with the sign)."""
    b = to_float32(v).view(np.uint32).astype(np.int64)
    m, e, bias = fmt.mbits, fmt.ebits, fmt.bias
    sign = (b >> 31) << (e + m)
    bexp, mant = (b >> 23) & 0xFF, b & 0x7FFFFF
    fnuz = fmt.nan_style == "fnuz"
    top = (1 << e) - 1
    max_normal_exp = top - 1 if fmt.has_inf else top
    nan_code = (1 << (e + m)) if fnuz else ((top << m) | ((1 << m) - 1))

    def rne(x, shift):  # math.h's bias_to_nearest_even
        even = np.left_shift(1, shift)
        odd = even >> 1
        return x + np.where((x & even) != 0, odd, odd - 1)

    aexp = bexp - 127
    dexp = aexp + bias
    overflow = dexp > max_normal_exp
    underflow = dexp <= 0
    shift = 23 - m
    rounded = rne(mant, shift)
    carry = rounded > 0x7FFFFF
    dexp = np.where(carry, dexp + 1, dexp)
    rounded = np.where(carry, 0, rounded)
    overflow |= dexp > max_normal_exp
    normal = sign | (np.clip(dexp, 0, top) << m) | ((rounded >> shift) & ((1 << m) - 1))
    sub_shift = np.clip((23 - m) - (aexp - (1 - bias)), 0, 40)
    sub = (rne(mant | (1 << 23), sub_shift) >> sub_shift) & ((1 << m) - 1)  # the carry masked off
    zero = 0 if fnuz else sign
    sub = np.where(sub_shift > 24, zero, sign | sub)
    out = np.where(underflow, sub, normal)
    out = np.where(bexp == 0, zero, out)
    if fnuz:
        out = np.where(out == (1 << (e + m)), 0, out)
    big = (sign | (top << m)) if fmt.has_inf else np.full_like(out, nan_code)
    out = np.where(overflow | ((bexp == 0xFF) & (mant == 0)), big, out)
    return np.where((bexp == 0xFF) & (mant != 0), nan_code, out)


def subnormal_path(v: np.ndarray, fmt) -> tuple[np.ndarray, np.ndarray]:
    """(|v|, where a bit-field encoder takes its subnormal branch): finite, non-zero and below the
    smallest normal once rounded to the format's precision as if it were normal (a value that rounds
    up to 2^emin leaves through the normal branch, as it does in every encoder quoted here)."""
    v = np.asarray(v, dtype=np.float64)
    ok = np.isfinite(v) & (v != 0)
    a = np.where(ok, np.abs(v), 1.0)
    return a, ok & (round_as_normal(a, fmt) < 2.0 ** fmt.emin)


def round_as_normal(a: np.ndarray, fmt) -> np.ndarray:
    """|v| rounded to nearest even at the format's mantissa width, exponent range unbounded below."""
    _, e = np.frexp(a)
    q = e.astype(np.int64) - 1 - fmt.mbits
    return np.ldexp(np.rint(np.ldexp(a, -q)), q)


def subnormal_quantum(fmt) -> float:
    """The spacing of the format's subnormals (its smallest positive value)."""
    return 2.0 ** (fmt.emin - fmt.mbits)


def sticky_lost(a, fmt):
    """The float32 significand shifted right to the subnormal binade first (the bits shifted out are
    dropped), then rounded to nearest even at the format's mantissa width from the bits that are left."""
    u = subnormal_quantum(fmt)
    pre = np.floor(a * 2.0 ** (23 - fmt.emin))  # mant_with_hidden_bit >> (emin - E): 23 fraction bits of 2^emin
    return np.rint(np.ldexp(pre, -(23 - fmt.mbits))) * u


def rocm_cast_to_f8(bits: int, fmt) -> int:
    """ROCm's internal::cast_to_f8 (amd_hip_fp8.h, rocBLAS's rocblas_hip_f8_impl.h; float input,
    round to nearest even, no stochastic rounding) for a finite non-zero float32 whose exponent gap
    to the float8 subnormal exponent reaches 64, with x86-64's shift semantics: a 64-bit shift count
    is taken mod 64, a 32-bit ``1 << n`` mod 32."""
    wm, nz = fmt.mbits, fmt.nan_style == "fnuz"
    m64 = (1 << 64) - 1
    sign, exponent, mantissa = bits >> 31, (bits >> 23) & 0xFF, bits & 0x7FFFFF
    den = 1 - fmt.bias
    if exponent == 0:
        act = 1 - 127
        diff = den - act
    else:
        act = exponent - 127
        diff = den - act if act <= den else 0
        mantissa += 1 << 23

    def int_shl(n):  # the int (32-bit) 1 << n on x86: count mod 32, two's complement
        r = (1 << (n & 31)) & 0xFFFFFFFF
        return r - (1 << 32) if r >= 1 << 31 else r

    sh = 23 - wm + diff
    mask = (((int_shl(sh) - 1 + (1 << 31)) % (1 << 32)) - (1 << 31)) & m64
    midpoint = (mantissa & mask) == (int_shl(sh - 1) & 0xFFFFFFFF)
    if diff > 0:
        mantissa >>= diff & 63
    implicit_one = bool(mantissa & (1 << 23))
    f8_exp = act + diff + fmt.bias - (0 if implicit_one else 1)
    drop = (1 << (23 - wm)) - 1
    odd = bool(mantissa & (1 << (23 - wm)))
    mantissa += ((mantissa if odd else (mantissa - 1) & m64) if midpoint else mantissa) & drop
    if f8_exp == 0:
        if mantissa & (1 << 23):
            f8_exp = 1
    elif mantissa & (1 << 24):
        mantissa >>= 1
        f8_exp += 1
    mantissa >>= 23 - wm
    if f8_exp == 0 and mantissa == 0:
        return 0 if nz else sign << 7
    return ((sign << 7) | (f8_exp << wm) | (mantissa & ((1 << wm) - 1))) & 0xFF


__all__ = ["rocm_cast_to_f8", "round_as_normal", "sticky_lost", "subnormal_path", "subnormal_quantum",
           "ties_away_to_format", "to_float32", "truncate_to_format", "truncf_bit_emulation"]

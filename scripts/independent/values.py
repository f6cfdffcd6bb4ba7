"""Exact values, the number formats from their definitions, codecs and output encoders.

Nothing here comes from qconform: values are exact rationals (fractions.Fraction) with the sign
carried beside them, formats are written from IEEE 754 and the ONNX float8/float4/float6 notes and
Cast tables, and corpus arrays are read through numpy views of their raw bytes (never cast).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

# ------------------------------------------------------------------------------------------------
# Values: (kind, neg, mag). kind 0 finite (mag a Fraction >= 0; mag 0 is a zero signed by neg),
# 1 infinity, 2 NaN. Exact rationals carry no sign of zero, so the sign travels beside them.
# ------------------------------------------------------------------------------------------------
FIN, INF, NAN = 0, 1, 2
NAN_V = (NAN, False, Fraction(0))
ZERO = Fraction(0)


def fin(x: Fraction, neg_zero: bool = False):
    if x == 0:
        return (FIN, neg_zero, ZERO)
    return (FIN, x < 0, abs(x))


def signed(v) -> Fraction:
    return -v[2] if v[1] else v[2]


def v_div(a, b):
    if a[0] == NAN or b[0] == NAN:
        return NAN_V
    neg = a[1] != b[1]
    if a[0] == INF:
        return NAN_V if b[0] == INF else (INF, neg, ZERO)
    if b[0] == INF:
        return (FIN, neg, ZERO)
    if b[2] == 0:
        return NAN_V if a[2] == 0 else (INF, neg, ZERO)
    return (FIN, neg, a[2] / b[2])


def v_mul(a, b):
    if a[0] == NAN or b[0] == NAN:
        return NAN_V
    neg = a[1] != b[1]
    if a[0] == INF or b[0] == INF:
        if (a[0] == FIN and a[2] == 0) or (b[0] == FIN and b[2] == 0):
            return NAN_V
        return (INF, neg, ZERO)
    return (FIN, neg, a[2] * b[2])


def v_add(a, b):
    """Exact IEEE addition (round-to-nearest mode: an exact zero sum of non-zero terms is +0)."""
    if a[0] == NAN or b[0] == NAN:
        return NAN_V
    if a[0] == INF and b[0] == INF:
        return a if a[1] == b[1] else NAN_V
    if a[0] == INF:
        return a
    if b[0] == INF:
        return b
    s = signed(a) + signed(b)
    if s == 0:
        return (FIN, a[1] and b[1] if a[2] == 0 and b[2] == 0 else False, ZERO)
    return (FIN, s < 0, abs(s))


def v_neg(a):
    return a if a[0] == NAN else (a[0], not a[1], a[2])


def rne_int(x: Fraction) -> int:
    """Nearest integer, ties to even."""
    fl = x.numerator // x.denominator
    r = x - fl
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and fl % 2):
        fl += 1
    return fl


def floor_log2(m: Fraction) -> int:
    n, d = m.numerator, m.denominator
    e = n.bit_length() - d.bit_length()
    if (e >= 0 and n < d << e) or (e < 0 and n << -e < d):
        e -= 1
    return e


def round_mag(m: Fraction, mbits: int, emin: int) -> Fraction:
    """m > 0 rounded to nearest-even on the grid of a binary format with mbits fraction bits and
    smallest normal exponent emin (subnormals included), exponent unbounded above: Cast's [x]."""
    e = max(floor_log2(m), emin)
    qe = e - mbits
    n, d = m.numerator, m.denominator
    num, den = (n, d << qe) if qe >= 0 else (n << -qe, d)
    k, r = divmod(num, den)
    if 2 * r > den or (2 * r == den and k & 1):
        k += 1
    return Fraction(k << qe) if qe >= 0 else Fraction(k, 1 << -qe)


# ------------------------------------------------------------------------------------------------
# Formats, from their definitions
# ------------------------------------------------------------------------------------------------
class Fmt:
    """A binary float format. style: 'ieee' (all-ones exponent is Inf/NaN), 'fn' (E4M3FN: only
    S.1111.111 is NaN, no Inf), 'fnuz' (0x80 is the only NaN, no Inf, no -0), 'plain' (float4/6:
    every code is a number)."""

    def __init__(self, name, ebits, mbits, bias, style):
        self.name, self.ebits, self.mbits, self.bias, self.style = name, ebits, mbits, bias, style
        self.width = 1 + ebits + mbits
        self.emin = 1 - bias
        top = (1 << ebits) - 1
        if style == "ieee":
            self.emax, mmax = top - 1 - bias, (1 << mbits) - 1
        elif style == "fn":
            self.emax, mmax = top - bias, (1 << mbits) - 2
        else:
            self.emax, mmax = top - bias, (1 << mbits) - 1
        self.max = Fraction(2) ** self.emax * (1 + Fraction(mmax, 1 << mbits))
        self._dec: dict[int, tuple] = {}

    def decode(self, bits: int):
        if self.width > 16:
            return self._decode(bits)
        v = self._dec.get(bits)
        if v is None:
            v = self._dec[bits] = self._decode(bits)
        return v

    def _decode(self, bits):
        neg = bool(bits >> (self.width - 1) & 1)
        e = bits >> self.mbits & ((1 << self.ebits) - 1)
        m = bits & ((1 << self.mbits) - 1)
        top = (1 << self.ebits) - 1
        if self.style == "ieee" and e == top:
            return NAN_V if m else (INF, neg, ZERO)
        if self.style == "fn" and e == top and m == (1 << self.mbits) - 1:
            return NAN_V
        if self.style == "fnuz" and bits == 1 << (self.width - 1):
            return NAN_V
        if e == 0:
            mag = Fraction(m, 1 << self.mbits) * Fraction(2) ** self.emin
        else:
            mag = (1 + Fraction(m, 1 << self.mbits)) * Fraction(2) ** (e - self.bias)
        return (FIN, neg, mag)

    def bits(self, v) -> int:
        """Code of a value the format represents exactly (NaN: a canonical NaN code)."""
        sign = 1 << (self.width - 1)
        top = (1 << self.ebits) - 1
        if v[0] == NAN:
            if self.style == "ieee":
                return top << self.mbits | 1 << (self.mbits - 1)
            if self.style == "fn":
                return (1 << (self.width - 1)) - 1
            if self.style == "fnuz":
                return sign
            raise ValueError(f"{self.name} has no NaN")
        s = sign if v[1] else 0
        if v[0] == INF:
            assert self.style == "ieee"
            return s | top << self.mbits
        m = v[2]
        if m == 0:
            return 0 if self.style == "fnuz" else s
        e = floor_log2(m)
        if e < self.emin:
            k = m / Fraction(2) ** (self.emin - self.mbits)
            assert k.denominator == 1, (self.name, v)
            return s | int(k)
        k = m / Fraction(2) ** (e - self.mbits) - (1 << self.mbits)
        assert k.denominator == 1 and e <= self.emax, (self.name, v)
        return s | (e + self.bias) << self.mbits | int(k)

    def fl(self, v):
        """IEEE conversion of a value into this format: round to nearest even, overflow to Inf."""
        if v[0] != FIN or v[2] == 0:
            return v
        r = round_mag(v[2], self.mbits, self.emin)
        if r > self.max:
            return (INF, v[1], ZERO)
        return (FIN, v[1], r)


F32 = Fmt("float32", 8, 23, 127, "ieee")
F16 = Fmt("float16", 5, 10, 15, "ieee")
BF16 = Fmt("bfloat16", 8, 7, 127, "ieee")
F64 = Fmt("float64", 11, 52, 1023, "ieee")
FLOATS = {f.name: f for f in (
    F32, F16, BF16,
    Fmt("float8e4m3fn", 4, 3, 7, "fn"), Fmt("float8e4m3fnuz", 4, 3, 8, "fnuz"),
    Fmt("float8e5m2", 5, 2, 15, "ieee"), Fmt("float8e5m2fnuz", 5, 2, 16, "fnuz"),
    Fmt("float4e2m1", 2, 1, 1, "plain"), Fmt("float6e2m3", 2, 3, 1, "plain"),
    Fmt("float6e3m2", 3, 2, 3, "plain"))}
INTS = {"int2": (2, True), "uint2": (2, False), "int4": (4, True), "uint4": (4, False),
        "int8": (8, True), "uint8": (8, False), "int16": (16, True), "uint16": (16, False),
        "int32": (32, True)}
FLOAT8 = ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz")
WIDTH = {**{n: f.width for n, f in FLOATS.items()}, **{n: w for n, (w, _) in INTS.items()}, "float8e8m0": 8}
# ONNX TensorProto.DataType codes (onnx.proto)
ONNX_CODE = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 10: "float16",
             16: "bfloat16", 17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2",
             20: "float8e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4e2m1", 24: "float8e8m0",
             25: "uint2", 26: "int2", 27: "float6e2m3", 28: "float6e3m2"}
# numpy / ml_dtypes dtype names of the corpus arrays (read by name, never cast through)
DTYPE_NAME = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "int32": "int32",
              "int16": "int16", "uint16": "uint16", "int8": "int8", "uint8": "uint8", "int4": "int4",
              "uint4": "uint4", "int2": "int2", "uint2": "uint2", "float8_e4m3fn": "float8e4m3fn",
              "float8_e4m3fnuz": "float8e4m3fnuz", "float8_e5m2": "float8e5m2",
              "float8_e5m2fnuz": "float8e5m2fnuz", "float4_e2m1fn": "float4e2m1",
              "float6_e2m3fn": "float6e2m3", "float6_e3m2fn": "float6e3m2", "float8_e8m0fnu": "float8e8m0"}


def raw_bits(arr: np.ndarray) -> np.ndarray:
    """The raw codes of an array, from a view of its bytes, masked to the type's width."""
    a = np.ascontiguousarray(arr)
    view = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    t = DTYPE_NAME[a.dtype.name]
    return (a.view(view).astype(np.uint64) & np.uint64((1 << WIDTH[t]) - 1)).reshape(a.shape)


def decode(t: str, bits: int):
    if t in FLOATS:
        return FLOATS[t].decode(bits)
    if t == "float8e8m0":
        return NAN_V if bits == 0xFF else (FIN, False, Fraction(2) ** (bits - 127))
    w, sgn = INTS[t]
    if sgn and bits >> (w - 1):
        bits -= 1 << w
    return fin(Fraction(bits))


def is_nan_code(t: str, bits: int) -> bool:
    return t in FLOATS and FLOATS[t].style != "plain" and FLOATS[t].decode(bits)[0] == NAN


# ------------------------------------------------------------------------------------------------
# Output encoders
# ------------------------------------------------------------------------------------------------
UNDEF = None  # the reading leaves the element undefined (don't-care)


def clamp_int(t: str, q, zp: int):
    """y = clamp(RNE(q) + zp): NaN undefined, +-Inf saturate."""
    w, sgn = INTS[t]
    lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if sgn else (0, (1 << w) - 1)
    if q[0] == NAN:
        return UNDEF
    if q[0] == INF:
        y = lo if q[1] else hi
    else:
        y = min(max(rne_int(signed(q)) + zp, lo), hi)
    return y & ((1 << w) - 1)


def cast_small_float(t: str, v, opset: int, saturate: int):
    """Cast table of float8 (Cast-N at the op's opset), float4e2m1 (float4.md) and float6
    (float6.md): code of v, or UNDEF."""
    f = FLOATS[t]
    sign = 1 << (f.width - 1)
    if t in FLOAT8:
        fnuz = f.style == "fnuz"
        if v[0] == NAN:
            return f.bits(NAN_V)
        if v[0] == INF:
            if saturate:
                if fnuz and opset <= 23:
                    return f.bits(NAN_V)
                return f.bits((FIN, v[1], f.max))
            return f.bits((INF, v[1], ZERO)) if t == "float8e5m2" else (
                f.bits(NAN_V) | (sign if t == "float8e4m3fn" and v[1] else 0))
        if v[2] == 0:
            return f.bits(v)
        r = round_mag(v[2], f.mbits, f.emin)
        if r > f.max:
            if saturate:
                return f.bits((FIN, v[1], f.max))
            if t == "float8e5m2":
                return f.bits((INF, v[1], ZERO))
            return f.bits(NAN_V) | (sign if t == "float8e4m3fn" and v[1] else 0)
        return f.bits((FIN, v[1], r))
    # float4e2m1, float6: saturate to +-max whatever `saturate`; zeros keep their sign
    if v[0] == NAN:
        return f.bits((FIN, False, f.max)) if t == "float4e2m1" else UNDEF
    if v[0] == INF:
        return f.bits((FIN, v[1], f.max))
    if v[2] == 0:
        return f.bits(v)
    r = min(round_mag(v[2], f.mbits, f.emin), f.max)
    return f.bits((FIN, v[1], r))



def same(t: str, mine, golden: int) -> bool:
    """The comparison rule: raw bits equal, or both NaN (any sign, any payload)."""
    if mine == golden:
        return True
    return is_nan_code(t, mine) and is_nan_code(t, golden)


def hexcode(t: str, v) -> str:
    if v is UNDEF:
        return "undefined"
    return f"0x{int(v):0{(WIDTH[t] + 3) // 4}x}"


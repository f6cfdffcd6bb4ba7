#!/usr/bin/env python3
"""An independent oracle for the QuantizeLinear / DequantizeLinear cases of the golden corpus.

Why it exists: the corpus's expected outputs come from qconform.oracle, which shares codecs
(ml_dtypes) and arithmetic (numpy) with the runtimes it judges. This script recomputes every
reading of every single-node Q/DQ case from the case's inputs alone, with its own exact
arithmetic (fractions.Fraction) and its own encoders and decoders of every format, written from
the format definitions (IEEE 754 binary32/16, bfloat16, the ONNX float8/float4/float6 notes and
Cast tables), and compares bit for bit. It reads cases through qconform.corpus and nothing else
of qconform: no oracle, no dtypes conversion helper, no ml_dtypes cast (arrays are read through
numpy views of their raw bytes).

A reading is computed from its NAME, as qconform/docs/semantics.md defines it. Comparison rule
for NaN (semantics.md, "principles"): any NaN matches any NaN (any sign, any payload); every
other element must be equal in its raw bits, masked to the type's width.

Usage: python scripts/independent_oracle.py [--case GLOB] [-j 2] [--md research/independent-oracle.md]
"""
from __future__ import annotations

import argparse
import datetime
import fnmatch
import subprocess
import sys
from collections import defaultdict
from fractions import Fraction
from multiprocessing import Pool
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from qconform import corpus  # noqa: E402  (only to read the cases)

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


# ------------------------------------------------------------------------------------------------
# QuantizeLinear: the division readings (semantics.md q-division, q-division-half, q-int32-input)
# ------------------------------------------------------------------------------------------------
PFMT = {"float32": F32, "float16": F16, "bfloat16": BF16, "float64": F64}
INT_DIV = ("operands-rounded-to-int32", "quotient-rounded-once-to-int32")


def to_int_value(q):
    """An integer quotient: +-Inf and NaN stay as they are, a finite value rounds (ties to even)
    to an integer, which has no -0."""
    return fin(Fraction(rne_int(signed(q)))) if q[0] == FIN else q


def quotient(comp: str, xv, sv):
    """q for one division reading, from x and the scale as given."""
    if comp in ("float32-quotient", "int32-via-float32"):
        return F32.fl(v_div(F32.fl(xv), F32.fl(sv)))
    if comp in ("int32-via-float64", "division-in-float64"):
        return F64.fl(v_div(xv, sv))
    if comp == "quotient-exact":
        return v_div(xv, sv)
    if comp.startswith("quotient-in-"):
        return PFMT[comp[len("quotient-in-"):]].fl(v_div(xv, sv))
    if comp == "operands-rounded-to-int32":
        return to_int_value(v_div(to_int_value(xv), sv))
    if comp == "quotient-rounded-once-to-int32":
        return to_int_value(v_div(xv, sv))
    for pre in ("operands-rounded-to-", "division-in-"):
        if comp.startswith(pre):
            p = PFMT[comp[len(pre):]]
            return p.fl(v_div(p.fl(xv), p.fl(sv)))
    if comp.startswith("quotient-rounded-once-to-"):
        return PFMT[comp[len("quotient-rounded-once-to-"):]].fl(v_div(xv, sv))
    raise KeyError(comp)


def ql_divisions(opset: int, domain: str, tx: str, ts: str, prec: int) -> list[str]:
    """The division readings semantics.md permits for this case, first one first."""
    half = tx in ("float16", "bfloat16")
    if domain == "com.microsoft":
        return ["quotient-in-float16", "quotient-in-float32"] if ts == "float16" else ["float32-quotient"]
    if opset in (10, 13):
        return ["int32-via-float32", "int32-via-float64"] if tx == "int32" else ["float32-quotient", "quotient-exact"]
    if opset in (19, 21):
        if ts == "int32":
            return ["division-in-float32", "division-in-float64"]
        if ts == "float32":
            return ["float32-quotient", "quotient-exact"]
        if ts == "float16":
            return ["quotient-in-float16", "quotient-in-float32"]
        return ["quotient-in-bfloat16", "quotient-in-float32", "quotient-exact"]
    if prec:
        p = ONNX_CODE[prec]
        return [f"operands-rounded-to-{p}", f"quotient-rounded-once-to-{p}"]
    if ts in PFMT:
        return [f"operands-rounded-to-{ts}", f"quotient-rounded-once-to-{ts}"]
    out = ["division-in-float32"] + ([f"division-in-{tx}"] if half else []) + ["division-in-float64"]
    return out + (list(INT_DIV) if ts == "int32" else [])


ZP_READINGS = ("zero-point-added", "zero-point-skipped")


def division_precision(comp: str):
    """The precision a float division reading computes q in (None: exact, or an integer quotient)."""
    if comp == "float32-quotient":
        return F32
    for pre in ("quotient-in-", "operands-rounded-to-", "quotient-rounded-once-to-", "division-in-"):
        if comp.startswith(pre):
            return PFMT.get(comp[len(pre):])
    return None


def parse_reading(name: str, first: list[str]) -> tuple[str, str]:
    """(division, zero-point) components of a reading name; 'spec' and omitted parts are first."""
    div, zp = first[0], ZP_READINGS[0]
    if name != "spec":
        for part in name.split("+"):
            if part in ZP_READINGS:
                zp = part
            else:
                div = part
    return div, zp


# ------------------------------------------------------------------------------------------------
# One case
# ------------------------------------------------------------------------------------------------
def scale_index(xshape, sshape, axis: int, block: int) -> np.ndarray:
    """Flat index into the scale for every element of x (semantics.md granularity-*)."""
    n = int(np.prod(xshape, dtype=np.int64))
    if len(sshape) == 0 or int(np.prod(sshape)) == 1 and not (block and len(sshape) == len(xshape)):
        return np.zeros(n, dtype=np.int64)
    a = axis + len(xshape) if axis < 0 else axis
    idx = np.indices(xshape).reshape(len(xshape), -1)
    if block and len(sshape) == len(xshape):
        idx = idx.copy()
        idx[a] //= block
        return np.ravel_multi_index(tuple(idx), sshape)
    return idx[a]


def flat_bits(arg) -> tuple[str, np.ndarray]:
    return arg.type, raw_bits(arg.value).ravel()


class Computed:
    """Per element codes of one reading (or UNDEF), plus what (a) needs: where an integer
    quotient is 0, and what (f) needs: elements where q + zp rounded in P converts otherwise."""

    def __init__(self, codes, int_zero=None):
        self.codes, self.int_zero, self.rounded_sum = codes, int_zero, 0


def operands(case, absent_zp_type: str):
    """x, scale and zero point as raw codes and decoded values, and each element's scale index.
    An absent zero point is 0 of absent_zp_type."""
    x, s, zp = (list(case.inputs) + [None, None])[:3]
    attrs = case.attrs
    tx, xb = flat_bits(x)
    ts, sb = flat_bits(s)
    if zp is not None:
        tz, zb = flat_bits(zp)
    else:
        tz, zb = absent_zp_type, np.zeros(max(len(sb), 1), dtype=np.uint64)
    sidx = scale_index(x.value.shape, s.value.shape, attrs.get("axis", 1), attrs.get("block_size", 0))
    values = ([decode(tx, int(b)) for b in xb], [decode(ts, int(b)) for b in sb], [decode(tz, int(b)) for b in zb])
    return (xb, tx, sb, ts, zb, tz, sidx), values


def compute_ql(case, out_t: str):
    raw, (xs, ss, zs) = operands(case, out_t)
    _, tx, _, ts, _, _, sidx = raw
    opset, sat = case.opset, case.attrs.get("saturate", 1)
    divs = ql_divisions(opset, case.domain, tx, ts, case.attrs.get("precision", 0))
    is_int = out_t in INTS

    cache: dict[str, list] = {}

    def qs(div):
        if div not in cache:
            cache[div] = [quotient(div, xs[i], ss[si]) for i, si in enumerate(sidx)]
        return cache[div]

    def reading(div: str, zpc: str) -> Computed:
        q = qs(div)
        p = division_precision(div)
        codes, rounded_sum = [], 0
        for i, si in enumerate(sidx):
            z = zs[si]
            if is_int:
                codes.append(clamp_int(out_t, q[i], int(signed(z))))
                continue
            if zpc == "zero-point-skipped" and z[0] == FIN and z[2] == 0 and not z[1]:
                v = q[i]
            else:
                v = v_add(q[i], z)
            codes.append(cast_small_float(out_t, v, opset, sat))
            # semantics.md q-float8: "+ zp" is an IEEE addition in P, and generators keep only
            # inputs where that and the exact sum convert alike; this counts where they do not
            if p is not None and codes[-1] is not UNDEF and not (z[0] == FIN and z[2] == 0) and \
                    cast_small_float(out_t, p.fl(v), opset, sat) != codes[-1]:
                rounded_sum += 1
        iz = [qi[0] == FIN and qi[2] == 0 for qi in q] if div in INT_DIV else None
        c = Computed(codes, iz)
        c.rounded_sum = rounded_sum
        return c

    alternatives = [(d, z) for d in divs for z in (ZP_READINGS if not is_int else ZP_READINGS[:1])]
    return divs, reading, alternatives, ("quotient-exact", "zero-point-added"), raw


DQ_READINGS = ("multiply-in-output-type", "multiply-in-float32-then-round", "multiply-exact-then-round")


def compute_dq(case, out_t: str):
    raw, (xs, ss, zs) = operands(case, case.inputs[0].type)
    tx, sidx = raw[1], raw[6]
    T = PFMT[out_t]
    ds = [v_add(xs[i], v_neg(zs[si])) if tx in FLOATS else fin(signed(xs[i]) - signed(zs[si]))
          for i, si in enumerate(sidx)]

    def reading(comp: str, _zp: str = "") -> Computed:
        out = []
        for i, si in enumerate(sidx):
            d, sv = ds[i], ss[si]
            if comp == "multiply-in-output-type":
                y = T.fl(v_mul(T.fl(d), T.fl(sv)))
            elif comp == "multiply-in-float32-then-round":
                y = T.fl(F32.fl(v_mul(F32.fl(d), F32.fl(sv))))
            elif comp == "multiply-exact-then-round":
                y = T.fl(v_mul(d, sv))
            else:
                raise KeyError(comp)
            out.append(T.bits(y))
        return Computed(out)

    comps = list(DQ_READINGS if out_t in ("float16", "bfloat16") else (DQ_READINGS[0], DQ_READINGS[2]))
    return comps, reading, [(c, "") for c in comps], ("multiply-exact-then-round", ""), raw


def output_type(case) -> str:
    x, s, zp = (list(case.inputs) + [None, None])[:3]
    od = case.attrs.get("output_dtype", 0)
    if case.op == "QuantizeLinear":
        if od and case.opset >= 21:
            return ONNX_CODE[od]
        return zp.type if zp is not None else "uint8"
    if case.opset in (10, 13) and case.domain == "":
        return "float32"
    if od and case.opset >= 23:
        return ONNX_CODE[od]
    return s.type


def same(t: str, mine, golden: int) -> bool:
    """The comparison rule: raw bits equal, or both NaN (any sign, any payload)."""
    if mine == golden:
        return True
    return is_nan_code(t, mine) and is_nan_code(t, golden)


def hexcode(t: str, v) -> str:
    if v is UNDEF:
        return "undefined"
    return f"0x{int(v):0{(WIDTH[t] + 3) // 4}x}"


def empty_result(cid: str, skipped: tuple = ()) -> dict:
    return {"id": cid, "rows": [], "dis": [], "a": [], "b": [], "b2": [], "c": None, "d": [], "e": [],
            "f": [], "nan_bits": 0, "skipped": list(skipped)}


def check_case(case) -> dict:
    """Every reading of one case: counts, disagreements and the side reports (a)-(f)."""
    res = empty_result(case.id)
    out_t = output_type(case)
    golden_types = {DTYPE_NAME.get(r.outputs[0].dtype.name, r.outputs[0].dtype.name) for r in case.readings}
    if golden_types != {out_t}:
        res["dis"].append((case.id, "*", "output type", f"golden {sorted(golden_types)}", f"mine {out_t}"))
        return res
    xshape = case.inputs[0].value.shape
    if any(r.outputs[0].shape != xshape for r in case.readings):
        res["dis"].append((case.id, "*", "output shape", "golden differs", f"x {xshape}"))
        return res
    compute = compute_ql if case.op == "QuantizeLinear" else compute_dq
    firsts, reading, alternatives, plain_key, raw = compute(case, out_t)
    xb, tx, sb, ts, zb, tz, sidx = raw
    memo: dict[tuple, Computed] = {}

    def get(key) -> Computed:
        if key not in memo:
            memo[key] = reading(*key)
        return memo[key]

    def inputs_text(i):
        si = sidx[i]
        return (f"x={hexcode(tx, xb[i])}({tx}) s={hexcode(ts, sb[si])}({ts}) "
                f"zp={hexcode(tz, zb[si]) if case.inputs[2:3] and case.inputs[2] is not None else 'absent'}")

    goldens = []
    first_key = (firsts[0], ZP_READINGS[0] if alternatives[0][1] else "")
    for n, r in enumerate(case.readings):
        gbits = raw_bits(r.outputs[0]).ravel()
        gmask = (np.zeros(len(gbits), dtype=bool) if r.dont_care[0] is None
                 else np.asarray(r.dont_care[0]).ravel().astype(bool))
        goldens.append((r.name, gbits, gmask))
        if case.op == "QuantizeLinear":
            key = parse_reading(r.name, firsts)
        else:
            key = (firsts[0] if r.name == "spec" else r.name, "")
        key = (key[0], key[1] if alternatives[0][1] else "")
        if key not in alternatives:
            res["e"].append((case.id, r.name, "not a reading semantics.md permits for this case"))
        if n == 0 and key != first_key:
            strict = "+".join(k for k in first_key if k)
            res["e"].append((case.id, r.name, f"readings[0] is not the strict reading {strict}"))
        try:
            mine = get(key)
        except KeyError:
            res["skipped"].append((case.id, r.name, "reading not implemented"))
            continue
        checked = bad = 0
        for i, g in enumerate(gbits):
            m = mine.codes[i]
            if gmask[i]:
                if m is not UNDEF:
                    res["b"].append((case.id, r.name, i, hexcode(out_t, m)))
                continue
            if m is UNDEF:
                res["b2"].append((case.id, r.name, i, hexcode(out_t, g)))
                continue
            checked += 1
            if m != int(g) and is_nan_code(out_t, m) and is_nan_code(out_t, int(g)):
                res["nan_bits"] += 1
                res.setdefault("nan_kinds", defaultdict(int))[(out_t, hexcode(out_t, g), hexcode(out_t, m))] += 1
            if not same(out_t, m, int(g)):
                bad += 1
                res["dis"].append((case.id, r.name, i, inputs_text(i),
                                   f"golden {hexcode(out_t, g)} mine {hexcode(out_t, m)}"))
            if mine.int_zero is not None and mine.int_zero[i] and out_t in FLOATS and int(g) == 1 << (WIDTH[out_t] - 1):
                res["a"].append((case.id, r.name, i))
        res["rows"].append((f"{case.draft.id.split('/')[0]}", r.name, checked, bad))
        if mine.rounded_sum:
            res["f"].append((case.id, r.name, mine.rounded_sum))

    # (c) does some reading equal the text's plain reading on its unmasked elements?
    plain = get(plain_key).codes

    def equals(codes, gbits, gmask):
        return all(gmask[i] or codes[i] is UNDEF or same(out_t, codes[i], int(g)) for i, g in enumerate(gbits))

    if not any(equals(plain, g, m) for _, g, m in goldens):
        res["c"] = (case.id, firsts[0])
    # (d) every permitted reading's result must be among the case's readings
    for key in alternatives:
        codes = get(key).codes
        if not any(equals(codes, g, m) for _, g, m in goldens):
            res["d"].append((case.id, "+".join(k for k in key if k)))
    return res


# ------------------------------------------------------------------------------------------------
# Driver
# ------------------------------------------------------------------------------------------------
_IDX = None


def _work(ids: list[str]) -> list[dict]:
    global _IDX
    if _IDX is None:
        _IDX = corpus.index(corpus.DEFAULT_ROOT)
    out = []
    for cid in ids:
        case = _IDX.case(cid)
        if case.information:
            out.append(empty_result(cid, ((cid, "*", "information case"),)))
            continue
        try:
            out.append(check_case(case))
        except Exception as exc:  # a crash is reported, never counted as agreement
            out.append(empty_result(cid, ((cid, "*", f"crash: {type(exc).__name__}: {exc}"),)))
    return out


def in_scope(ref) -> tuple[bool, str]:
    if ref.domain == "qdq":
        return False, "graph case (qdq.*)"
    if ref.op not in ("QuantizeLinear", "DequantizeLinear"):
        return False, f"{ref.op} (out of scope)"
    return True, ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="*", help="glob over case ids")
    ap.add_argument("-j", type=int, default=1, help="worker processes (2 at most on a shared machine)")
    ap.add_argument("--md", help="also write the whole output to this markdown file")
    ap.add_argument("--examples", type=int, default=5, help="disagreements shown per (op version, reading)")
    args = ap.parse_args(argv)

    idx = corpus.index(corpus.DEFAULT_ROOT)
    lines: list[str] = []

    def say(text=""):
        print(text)
        lines.append(text)

    # information cases are known only from the case itself; the index says nothing of them
    out_scope: dict[str, int] = defaultdict(int)
    ids = []
    for ref in idx.refs:
        if not fnmatch.fnmatchcase(ref.id, args.case):
            continue
        ok, why = in_scope(ref)
        if ok:
            ids.append(ref.id)
        else:
            out_scope[why] += 1
    chunks = [ids[i:i + 40] for i in range(0, len(ids), 40)]
    results = []
    if args.j > 1:
        with Pool(args.j) as pool:
            for part in pool.imap(_work, chunks):
                results.extend(part)
    else:
        for c in chunks:
            results.extend(_work(c))
    return report(idx, results, out_scope, args, say, lines)


def report(idx, results, out_scope, args, say, lines) -> int:
    rows: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # cases, elements, bad cases, bad elements
    for r in results:
        for grp, name, checked, bad in r["rows"]:
            row = rows[(grp, name)]
            row[0] += 1
            row[1] += checked
            row[2] += bool(bad)
            row[3] += bad
    say("| op version | reading | cases | elements checked | cases disagreeing | elements disagreeing |")
    say("|---|---|---|---|---|---|")
    for (grp, name), (nc, ne, bc, be) in sorted(rows.items()):
        say(f"| {grp} | {name} | {nc} | {ne} | {bc} | {be} |")
    dis = [d for r in results for d in r["dis"]]
    say()
    say(f"## Disagreements ({len(dis)} elements)")
    shown: dict[tuple, int] = defaultdict(int)
    for d in dis:
        k = (d[0].split("/")[0], d[1])
        shown[k] += 1
        if shown[k] <= args.examples:
            say(f"- `{d[0]}` reading `{d[1]}` [{d[2]}]: {d[3]}: {d[4]}")
    for k, n in sorted(shown.items()):
        if n > args.examples:
            say(f"- … {n - args.examples} more in {k[0]} `{k[1]}`")
    sections = [
        ("a", "(a) integer-quotient readings whose golden float result is -0 where the int32 quotient is 0",
         lambda e: f"`{e[0]}` `{e[1]}` [{e[2]}]"),
        ("b", "(b) elements masked don't-care in a reading whose own arithmetic defines them",
         lambda e: f"`{e[0]}` `{e[1]}` [{e[2]}]: mine {e[3]}"),
        ("b2", "(b') elements the golden checks where the reading leaves them undefined",
         lambda e: f"`{e[0]}` `{e[1]}` [{e[2]}]: golden {e[3]}"),
    ]
    for key, title, fmt in sections:
        items = [e for r in results for e in r[key]]
        cases = {e[0] for e in items}
        say()
        say(f"## {title}: {len(items)} elements in {len(cases)} cases")
        for e in items[:args.examples * 2]:
            say(f"- {fmt(e)}")
    def grouped(title: str, pairs: list[tuple[str, str]], what: str) -> None:
        say()
        say(f"## {title}: {len(pairs)} in {len({cid for cid, _ in pairs})} cases")
        by: dict[tuple, list[str]] = defaultdict(list)
        for cid, name in pairs:
            by[(cid.split("/")[0], name)].append(cid)
        for (grp, name), cids in sorted(by.items()):
            say(f"- {grp}, {what} `{name}`: {len(cids)} cases, e.g. `{cids[0]}`")

    grouped("(c) cases where no reading equals the text's plain reading (exact quotient or product, rounded "
            "once, zero point added, saturate as the text says)", [r["c"] for r in results if r["c"]],
            "first division/multiplication reading")
    grouped("(d) permitted readings (semantics.md) whose result no reading of the case carries",
            [e for r in results for e in r["d"]], "reading")
    es = [e for r in results for e in r["e"]]
    say()
    say(f"## (e) readings the case carries that semantics.md does not permit, or a first reading that is "
        f"not the strict one: {len(es)}")
    for e in es[:args.examples * 4]:
        say(f"- `{e[0]}` `{e[1]}`: {e[2]}")
    fs = [e for r in results for e in r["f"]]
    say()
    say(f"## (f) readings where q + zp rounded in the reading's precision P converts to another code than "
        f"the exact sum (semantics.md q-float8 says generators avoid this): {sum(e[2] for e in fs)} elements "
        f"in {len({e[0] for e in fs})} cases")
    for e in fs[:args.examples * 2]:
        say(f"- `{e[0]}` `{e[1]}`: {e[2]} elements")
    say()
    say(f"NaN rule applied: any NaN matches any NaN (semantics.md, principles). Elements where both are NaN "
        f"but the codes differ: {sum(r['nan_bits'] for r in results)} (output type, golden code, this "
        f"script's canonical code: count):")
    kinds: dict[tuple, int] = defaultdict(int)
    for r in results:
        for k, n in r.get("nan_kinds", {}).items():
            kinds[k] += n
    for (t, g, mcode), n in sorted(kinds.items()):
        say(f"- {t} golden {g}, mine {mcode}: {n}")
    skipped = [e for r in results for e in r["skipped"]]
    reasons: dict[str, int] = defaultdict(int)
    for _, _, why in skipped:
        reasons[why.split(":")[0] if why.startswith("crash") else why] += 1
    for why, n in out_scope.items():
        reasons[why] += n
    say()
    say("## Skipped")
    for e in skipped[:20]:
        say(f"- `{e[0]}` `{e[1]}`: {e[2]}")
    n_read = sum(len(r["rows"]) for r in results)
    n_cases = sum(1 for r in results if r["rows"])
    nd = sum(len(r["dis"]) for r in results)
    reason_text = ", ".join(f"{n} {w}" for w, n in sorted(reasons.items())) or "none"
    say()
    say(f"independent oracle: {n_cases} cases, {n_read} readings checked, {nd} disagreements, "
        f"{sum(reasons.values())} skipped ({reason_text})")
    if args.md:
        def git(*a):
            root = Path(__file__).resolve().parent.parent
            return subprocess.run(["git", *a], capture_output=True, text=True, cwd=root).stdout.strip()
        golden = git("log", "-1", "--format=%H", "--", "qconform/golden")
        head = ["# Independent oracle: QuantizeLinear / DequantizeLinear", "",
                f"Run {datetime.date.today().isoformat()} with `python scripts/independent_oracle.py "
                f"--case '{args.case}' -j {args.j}` at commit `{git('rev-parse', 'HEAD')}`; corpus digest "
                f"`{idx.digest}`, the corpus of commit `{golden}` (the last commit that changed "
                f"qconform/golden).", ""]
        Path(args.md).write_text("\n".join(head + lines) + "\n")
    return 1 if nd else 0


if __name__ == "__main__":
    sys.exit(main())

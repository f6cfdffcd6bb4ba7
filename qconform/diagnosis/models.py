"""Deviation models: the oracle with one step done the way a real implementation got it wrong.

How a model is built
--------------------
The oracle's op classes (``qconform.oracle``) compute each op in one ``evaluate`` body, and every
step that implementations differ on -- reading the data, broadcasting parameters, the division, the
rounding, the zero-point addition, the saturation, the minifloat encoding, rounding to an
intermediate float type, the element order of packed types -- is a method of
``qconform.oracle.steps.Steps`` (or of the op's own class) whose default is the spec.

A deviation is a small mixin class overriding one step (``RoundHalfAway.rounding``,
``ReciprocalMultiply.quotient``...). ``Deviation.evaluate(draft)`` composes ``(mixin, version
class)``: the version's facts (axis or not, which Cast table, which division readings) and its
arithmetic come from the oracle itself, the one deviating step from the mixin. There is no second
copy of the arithmetic. The result is an ``Evaluation`` with one output per reading of the spec,
each computed the deviating way: a runtime that computes the quotient in float32 *and* rounds half
away from zero is recognised whichever reading it follows.

Every model carries ``name`` (kebab-case), ``ops``, ``explanation`` (one sentence for a vendor),
``evidence`` (where it was seen, or why it is plausible) and ``witness`` (an input that exposes it,
also a ready-made case for a generator family). ``MODELS`` is the explicit registry.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable

import numpy as np

from qconform import dtypes
from qconform.case import Draft
from qconform.oracle import floats, granularity
from qconform.oracle import qlinear_matmul as qm
from qconform.oracle.arith import FLOAT64, as_float64, exact_fma, pack_output, round_fraction, round_with
from qconform.oracle.arith import fl as _fl
from qconform.oracle.base import Evaluation, OpOracle, oracle_for
from qconform.oracle.quantize import HALF_KINDS, ONCE

IEEE_KINDS = ("float16", "bfloat16", "float32")
Q, DQ, DQL, QLMM = "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearMatMul"


# --------------------------------------------------------------------------------------------
# exact helpers
# --------------------------------------------------------------------------------------------


def swap_slots(arr: np.ndarray, t: dtypes.ElemType | str) -> np.ndarray:
    """What a correct (LSB-first) reader sees of data packed most-significant slot first.

    Byte j of the buffer holds elements k*j .. k*j+k-1 (k = 8 // bits) in reverse slot order, the
    final partial byte padded with zero codes; the result has arr's shape and type."""
    t = dtypes.get(t)
    if not t.packed:
        return arr
    k = 8 // t.bits
    codes = t.to_bits(arr).reshape(-1)
    n = codes.size
    padded = np.concatenate([codes, np.zeros((-n) % k, dtype=codes.dtype)])
    perm = padded.reshape(-1, k)[:, ::-1].reshape(-1)[:n]
    return t.from_bits(perm).reshape(np.shape(arr))


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


def _f32(v) -> np.ndarray:
    f32 = dtypes.get("float32")
    return pack_output(floats.encode(np.asarray(v, dtype=np.float64), f32, saturate=False), "float32")



class Spec:
    """The empty deviation: composed with a version class it is the oracle itself."""


@functools.cache
def compose(mixin: type, version_cls: type) -> type:
    """(mixin, the oracle's version class): facts and arithmetic from the version, one step from the
    mixin."""
    if mixin is Spec:
        return version_cls
    cls = type(f"{mixin.__name__}·{version_cls.__name__}", (mixin, version_cls), {})
    per_tensor = getattr(version_cls, "per_tensor", None)  # com.microsoft ops without axis
    if isinstance(per_tensor, OpOracle):
        cls.per_tensor = compose(mixin, type(per_tensor))()
    return cls


@functools.cache
def _instance(mixin: type, domain: str, op: str, opset: int) -> OpOracle:
    return compose(mixin, type(oracle_for(domain, op, opset)))()


def deviating_oracle(draft: Draft, mixin: type = Spec) -> OpOracle:
    """The oracle of the draft's op version with one step replaced by ``mixin``'s."""
    return _instance(mixin, draft.domain, draft.op, draft.opset)


# --------------------------------------------------------------------------------------------
# the deviation mixins
# --------------------------------------------------------------------------------------------


class RoundHalfAway:
    rounding = "half-away"


class RoundHalfUp:
    rounding = "half-up"


class RoundTowardZero:
    rounding = "toward-zero"


class ReciprocalMultiply:
    def quotient(self, x, s, prec):
        with np.errstate(all="ignore"):
            inv = self.fl(prec, 1.0 / self.fl(prec, s))
            return self.fl(prec, self.fl(prec, x) * inv)

    def quotient_once(self, x, s, prec):  # the deviating division under the exact-quotient reading too
        return self.quotient(x, s, prec)


class ZeroPointBeforeRounding:
    def to_int(self, q, zero, t, prec):
        with np.errstate(all="ignore"):
            return self.saturate(self.round(self.fl(prec, q + zero)), t)


class DivideInFloat64:
    def quotient(self, x, s, prec):
        with np.errstate(all="ignore"):
            return self.fl(prec, x) / self.fl(prec, s)  # float64 division, never rounded to prec

    def quotient_once(self, x, s, prec):
        with np.errstate(all="ignore"):
            return np.asarray(x, np.float64) / s

    def add_zero_float(self, q, zero, prec):
        return q + zero


class Float8ZeroPointIgnored:
    def add_zero_float(self, q, zero, prec):
        return q


class ScalarAs1D:
    """A rank-0 data input comes back as a one-element 1-D tensor."""

    def evaluate(self, draft, primary_only: bool = False):
        ev = super().evaluate(draft, primary_only)
        x = draft.inputs[0] if draft.inputs else None
        if x is None or x.value.ndim != 0:
            return ev
        ev.readings = [(n, (outs[0].reshape(1),) + tuple(outs[1:])) for n, outs in ev.readings]
        if ev.dont_care and ev.dont_care[0] is not None:
            ev.dont_care[0] = np.reshape(ev.dont_care[0], (1,))
        return ev


class QuotientInFloat32:
    def division_readings(self, x_t, s_t, attrs):
        out = []
        for name, prec in super().division_readings(x_t, s_t, attrs):
            if prec.removeprefix(ONCE) in HALF_KINDS:
                name, prec = "quotient-in-float32", "float32"
            if all(p != prec for _, p in out):
                out.append((name, prec))
        return out


class QuotientInInputType:
    """The scale converted to x's float16/bfloat16 type and the division done there: the precision
    taken from x, not from y_scale or the 'precision' attribute."""

    def division_readings(self, x_t, s_t, attrs):
        if x_t in HALF_KINDS and s_t != x_t:  # and whatever 'precision' says
            return [(f"quotient-in-{x_t}", x_t)]
        return super().division_readings(x_t, s_t, attrs)


def _int32_cast(v: np.ndarray) -> np.ndarray:
    """x86 cvttsd2si / np.astype(int32): NaN, ±Inf and out-of-range -> INT_MIN; else the value."""
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(v) & (v >= -(2.0**31)) & (v < 2.0**31)
    return np.where(ok, v, -(2.0**31))


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


def _minifloat(t) -> bool:
    fmt = dtypes.get(t).float_format
    return fmt is not None and fmt.width <= 8 and fmt.nan_style != "e8m0"


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


class E4m3fnNanCodeToMax:
    """onnxruntime's Float8E4M3FN(float, saturate): a normal value whose truncated code is 0x7F (the
    NaN code, |v| in [480, 496)) is first changed to 0x7E (448), and the later overflow test only
    sees codes it would round up, so with saturate=0 these values give +-448 where NaN is right."""

    def encode(self, v, t, **kw):
        code = super().encode(v, t, **kw)
        if dtypes.get(t).name != "float8e4m3fn" or kw.get("saturate", True):
            return code
        with np.errstate(invalid="ignore"):
            a = np.abs(np.asarray(v, dtype=np.float64))
            hit = (a >= 480.0) & (a < 496.0)
        return np.where(hit, (code & 0x80) | 0x7E, code).astype(code.dtype)


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


def _bfloat16_from_float32_bits(v: np.ndarray, top: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """v rounded to float32, then to bfloat16 by ``top`` (float32 bits, uint64 -> the kept upper 16
    bits): the bit-level conversions hand-written kernels use. NaN keeps its float32 bits."""
    f32 = dtypes.get("float32")
    v32 = _fl(f32, v)
    bits = floats.encode(v32, f32, saturate=False).astype(np.uint64)
    kept = (top(bits) << np.uint64(16)) & np.uint64(0xFFFFFFFF)
    return floats.decode(np.where(np.isnan(v32), bits, kept), f32)


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
        if t == FLOAT64 or dtypes.get(t).name not in IEEE_KINDS:
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


class HalfProductsFlushed:
    """A float16/bfloat16 product that comes out subnormal is flushed to zero, while subnormal
    operands (a scale of 2^-24) are read as they are: flush-to-zero without denormals-are-zero."""

    def dq_value(self, xv, zero, scale, x_t, prec, out_t):
        v = super().dq_value(xv, zero, scale, x_t, prec, out_t)
        t = prec or out_t
        return FlushDenormals._flush(v, t) if t in HALF_KINDS else v


class ConstantSubnormalsFlushed:
    """Subnormal scale (and zero point) values read as zero, the data and the result left alone: a
    runtime that flushes denormals in its constant tensors when it loads them (OpenVINO's CPU plugin
    does, for the speed of denormal-free arithmetic), so the arithmetic itself keeps subnormals."""

    def param(self, arg):
        v = super().param(arg)
        return FlushDenormals._flush(v, arg.type) if arg.type in IEEE_KINDS else v


class PerAxisFirstScale:
    def expand(self, p, shape, axis, block):
        if p.size > 1:
            return np.broadcast_to(p.reshape(-1)[0], shape)
        return super().expand(p, shape, axis, block)


class BlockedInterleaved:
    def expand(self, p, shape, axis, block):
        full = super().expand(p, shape, axis, block)  # validates; the spec's mapping
        if not block or granularity.granularity(shape, p.shape, axis, block) != "blocked":
            return full
        ax = axis % len(shape)
        return np.take(p, np.arange(shape[ax]) % p.shape[ax], axis=ax)


class NegativeAxisOffByOne:
    def axis(self, attrs, rank):
        a = super().axis(attrs, rank)
        return a + rank - 1 if a is not None and a < 0 else a


class HighNibbleFirst:
    def layout(self, out, t):
        return swap_slots(out, t)

    def read_layout(self, arr, t):
        return swap_slots(arr, t)


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


class QlmmAccumulateInFloat32:
    """The integer accumulator carried in float32, one product added at a time: exact only while
    the partial sums stay below 2^24."""

    def accumulate(self, da, db, raw, zeros, types):
        a, b = np.asarray(da, np.float64), np.asarray(db, np.float64)
        products = (a[..., :, :, None] * b[..., None, :, :]).astype(np.float32)  # [..., M, K, N], each exact
        return np.add.accumulate(products, axis=-2, dtype=np.float32)[..., -1, :].astype(np.int64)


class DqMinifloatZeroPointIgnored:
    """A float8/float4/float6 x read without its zero point (integer x keep theirs)."""

    def subtract(self, xv, zero, x_t, prec):
        return xv if _minifloat(x_t) else super().subtract(xv, zero, x_t, prec)


class DqlRangeExcludesZero:
    def dql_range(self, xv):
        if not xv.size:
            return 0.0, 0.0
        return float(xv.max()), float(xv.min())


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


class ZeroPointAddedInScaleType:
    """round(q) + zp computed in the division's precision P (float16 loses integers above 2048)."""

    def to_int(self, q, zero, t, prec):
        with np.errstate(all="ignore"):
            return self.saturate(self.fl(prec, self.round(q) + zero), t)


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
        return scale_t if scale_t in IEEE_KINDS else out_t


_F32 = "float32"


class FakeQuantize:
    """OpenVINO's ONNX frontend: QuantizeLinear to an integer type becomes FakeQuantize(x, il, ih,
    qmin, qmax) and a Convert; the CPU plugin computes, in float32, il = s(qmin - zp),
    ih = s(qmax - zp), isc = (qmax - qmin) / (ih - il) and y = rint(clamp(x, il, ih) * isc - il * isc)
    + qmin (with zp = 0 and 8 bits: rint(clamp(x, il, ih) * isc)). The offset zp - qmin is added
    before rounding and the reciprocal is rounded. A NaN x takes the lower bound; a NaN from the folded
    constants (ih - il = 0 or Inf: a subnormal or huge scale) gives qmin in the fused 8-bit kernel
    (cvtps2dq's 0x80000000, packed with saturation) and 0 elsewhere, where a separate Convert maps NaN to 0."""

    def quantize_int(self, xv, scale, q, zero, out_t, prec):
        lo, hi = dtypes.get(out_t).qrange
        f = functools.partial(self.fl, _F32)
        # float16 x and scale: FakeQuantize's input_low/input_high are float16 tensors (they overflow
        # to +-Inf there); the arithmetic on them is float32
        g = functools.partial(self.fl, "float16" if prec == "float16" else _F32)
        with np.errstate(all="ignore"):
            x, sc, zp = np.broadcast_arrays(f(xv), f(scale), f(zero))
            il, ih = g(sc * f(lo - zp)), g(sc * f(hi - zp))
            isc = f((hi - lo) / f(ih - il))
            low, high = np.minimum(il, ih), np.maximum(il, ih)  # a negative scale swaps them
            c = np.where(x > low, x, low)  # x86 maxps/minps: a NaN x takes the bound
            c = np.where(c < high, c, high)
            if dtypes.get(out_t).bits == 8 and not np.any(zp != 0):
                # the offset term il * isc is -qmin here, but still computed: NaN when il overflowed
                y = np.where(np.isnan(f(il * isc)), np.nan, np.rint(f(c * isc)))
            else:
                y = np.rint(f(f(c * isc) - f(il * isc))) + lo
            broken = np.isnan(y)  # NaN from the folded constants wins over the bounds below
            # FakeQuantize's definition: x <= min(il, ih) gives qmin, x > max(il, ih) gives qmax
            y = np.where(x <= low, lo, np.where(x > high, hi, y))
            nan_to = lo if dtypes.get(out_t).bits == 8 else 0
            y = np.where(broken | np.isnan(y), nan_to, np.clip(y, lo, hi))
        return y.astype(np.int64), np.isnan(np.asarray(q))


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


#: tinygrad's QuantizeLinear "rounding" constant (nn/onnx.py)
_JUST_UNDER_HALF = 0.4999999


def _truncate_into(v: np.ndarray, out_t: str) -> np.ndarray:
    """A truncating C cast to int32 (NaN read as 0), clamped to out_t's range, as int64."""
    lo, hi = dtypes.get(out_t).qrange
    return np.clip(_int32_cast(np.trunc(np.where(np.isnan(v), 0.0, v))), lo, hi).astype(np.int64)


class AddJustUnderHalfThenTruncate:
    """tinygrad: y = clamp(int(x / s + 0.4999999 + zp)) for uint8, in the quotient's type: the zero
    point added before rounding, and 'rounding' by a constant just under one half (absorbed by
    float32 once |x / s| >= 1, and 0.5 itself in float16/bfloat16) and a truncating cast. Its
    rewriter gathers constants last (seen in its DEBUG=4 kernels): a one-element zero point is a
    constant, folded with 0.4999999 first (q + (c + zp)); a per-axis one is added first ((q + zp) + c).
    Which of the two depends on the zero point's tensor, which only output_type (called first by
    every evaluation) sees: it notes it for this evaluation."""

    def output_type(self, draft, zp):
        self._constant_zp = zp is None or zp.value.size == 1
        return super().output_type(draft, zp)

    def quantize_int(self, xv, scale, q, zero, out_t, prec):
        f = functools.partial(self.fl, prec)
        with np.errstate(all="ignore"):
            c = f(np.float64(_JUST_UNDER_HALF))
            v = f(q + f(c + zero)) if self._constant_zp else f(f(q + zero) + c)
        return _truncate_into(v, out_t), np.isnan(np.asarray(q))


class AddJustUnderHalfFusedReciprocal(AddJustUnderHalfThenTruncate):
    """The same tinygrad kernel as its C compiler builds it: x / s becomes x * (1 / s) with the
    reciprocal folded, and clang contracts the multiply with the first addition into one fma
    (fma(x, 1/s, c + zp) for a constant zero point, fma(x, 1/s, zp) + c for a per-axis one), so the
    product is never rounded on its own: -759 * fl(1/6) + 128.5 is 1.9999962, truncated to 1."""

    def quantize_int(self, xv, scale, q, zero, out_t, prec):
        if prec != _F32:
            return super().quantize_int(xv, scale, q, zero, out_t, prec)
        f = functools.partial(self.fl, _F32)
        with np.errstate(all="ignore"):
            x, inv = f(xv), f(1.0 / f(scale))
            c = f(np.float64(_JUST_UNDER_HALF))
            v = exact_fma(_F32, x, inv, f(c + zero)) if self._constant_zp else f(exact_fma(_F32, x, inv, zero) + c)
        return _truncate_into(v, out_t), np.isnan(np.asarray(q))


class ClampAndCastInQuotientType:
    """tinygrad: cast(clamp(round(x / s) + zp, qmin, qmax)) with its round, the sum and the clamp
    bounds in the quotient's float16/bfloat16 type, then a C cast (Inf and NaN cast to INT_MIN's low
    bits). The bound 32767 (int16) rounds to 32768 in float16/bfloat16, and 65535 (uint16) to 65536 in
    bfloat16: casting that to the 16-bit type is undefined behaviour in C, and tinygrad's kernels give
    either answer by element position (vectorised lanes saturate, scalar lanes wrap), so those elements
    are left undefined (don't-care) rather than guessed."""

    def quantize_int(self, xv, scale, q, zero, out_t, prec):
        t = dtypes.get(out_t)
        lo, hi = t.qrange
        f = functools.partial(self.fl, prec)
        with np.errstate(all="ignore"):
            # tinygrad's Tensor.round, each step in the quotient's type: half to even through
            # ceil(q - 0.5) / floor(q + 0.5), whose +-0.5 rounds in float16/bfloat16
            whole = np.trunc(q)
            even = np.trunc(whole / 2) == whole / 2
            r = np.where((q > 0) == even, np.ceil(f(q - 0.5)), np.floor(f(q + 0.5)))
            v = f(r + zero)
            v = np.clip(v, f(np.float64(lo)), f(np.float64(hi)))
            i = _int32_cast(v).astype(np.int64) & ((1 << t.bits) - 1)
            if lo < 0:
                i = np.where(i >= 1 << (t.bits - 1), i - (1 << t.bits), i)
            out_of_range = (v > hi) | (v < lo)  # the clamp bound itself, rounded past the type's range
        return i, np.isnan(np.asarray(q)) | out_of_range


class DqlScaleReciprocal:
    """y_scale = range * fl32(1 / 255): a division by a constant rewritten as a multiplication."""

    def dql_scale(self, rng):
        with np.errstate(all="ignore"):
            return float(self.fl(_F32, rng * self.fl(_F32, np.float64(1.0) / 255.0)))


class DqOutputDtypeIgnored:
    """DequantizeLinear-23+: output_dtype ignored, the output has the scale's type."""

    def output_type(self, draft, scale_t):
        if scale_t == "float8e8m0":
            raise granularity.InvalidModel("a float8e8m0 scale needs output_dtype")
        return scale_t


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


class QOutputDtypeIgnoredWithoutZeroPoint:
    """QuantizeLinear-21+ without a zero point: output_dtype ignored, uint8 returned."""

    def output_type(self, draft, zp):
        return zp.type if zp is not None else "uint8"


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


class QlmmRequantiseInHalf:
    """QLinearMatMul requantised left to right in the scales' float16/bfloat16 type:
    round(T(T(acc) * T(a_s b_s)) / y_s) + y_zp, each step rounded to T (an accumulator beyond 65504
    is Inf in float16), then clamped and cast."""

    def requantise(self, req, acc, e, scales, zp, out_t, scale_t):
        if scale_t not in HALF_KINDS or not out_t.is_integer or acc.dtype == object:
            return super().requantise(req, acc, e, scales, zp, out_t, scale_t)
        a_s, b_s, y_s = scales
        f = functools.partial(self.fl, scale_t)
        with np.errstate(all="ignore"):
            v = f(f(f(acc.astype(np.float64)) * f(a_s * b_s)) / y_s)
            return {True: f(self.round(v) + zp)}


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


class NegativeInfinityToMax:
    """-Inf quantized to the type's maximum (an unsigned |x| path or a NaN-like branch)."""

    def to_int(self, q, zero, t, prec):
        with np.errstate(all="ignore"):
            return super().to_int(np.where(np.isneginf(q), np.inf, q), zero, t, prec)


class PerAxisWrongAxis:
    """A per-axis scale applied along another axis of the same length (the first one found)."""

    def expand(self, p, shape, axis, block):
        if block or p.ndim != 1 or p.size <= 1 or axis is None:
            return super().expand(p, shape, axis, block)
        a = axis % len(shape)
        other = [i for i, n in enumerate(shape) if n == p.size and i != a]
        return super().expand(p, shape, other[0] if other else axis, block)


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


class SaturateBeforeZeroPoint:
    """round(x / scale) clamped to the output type first, the zero point added after, then clamped
    again: a quotient past the type's range loses what the zero point would have brought back."""

    def to_int(self, q, zero, t, prec):
        with np.errstate(all="ignore"):
            r, nan = self.saturate(self.round(q), t)
            y, _ = self.saturate(r.astype(np.float64) + zero, t)
        return y, nan


class UnsignedZeroPointReadAsSigned:
    """A uint8/uint16 zero point read as the signed type of its width (200 -> -56)."""

    def param(self, arg):
        v = super().param(arg)
        t = dtypes.get(arg.type)
        if t.is_integer and not t.signed and t.bits in (8, 16):
            v = np.where(v >= 2 ** (t.bits - 1), v - 2 ** t.bits, v)
        return v


class QlmmZeroPointsIgnored:
    """The integer product a @ b accumulated from the codes as stored, the zero points never
    subtracted."""

    def accumulate(self, da, db, raw, zeros, types):
        av, bv = (np.asarray(r).astype(np.int64) for r in raw)
        return np.matmul(av, bv)


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


class MinifloatTiesAway:
    """float8/float4/float6 outputs rounded to nearest with ties away from zero (a guard-bit-only
    round-up), not ties to even."""

    def encode(self, v, t, **kw):
        if _minifloat(t):
            v = ties_away_to_format(v, dtypes.get(t))
        return super().encode(v, t, **kw)


class BlockedIndexPerElement:
    """Blocked parameters of a 1-D x read at the element's own index (i, not i // block_size); a
    read past the end of the parameter tensor gives 0. Higher ranks were right in the report."""

    def expand(self, p, shape, axis, block):
        if not block or np.ndim(p) != 1 or len(shape) != 1:
            return super().expand(p, shape, axis, block)
        idx = np.arange(shape[0])
        return np.where(idx < p.size, p[np.minimum(idx, p.size - 1)], 0.0)


def truncf_bit_emulation(v: np.ndarray, fmt: dtypes.FloatFormat) -> np.ndarray:
    """float32 -> float8 codes the way IREE's ``TruncFToSmallFloat`` (ConvertUnsupportedFloatArithPass,
    after runtime/src/iree/base/internal/math.h) builds them from the float32 fields: round to nearest
    even, but a subnormal whose rounding carries into the smallest normal loses the carry to the
    mantissa mask (0); overflow past the top exponent gives ±Inf (e5m2) or the one NaN code 0x7F /
    0x80, never a saturated value; a NaN input gives that positive NaN code; a value whose rounded
    code is e4m3fn's 0x7F/0xFF keeps it (NaN, with the sign)."""
    b = _f32(v).view(np.uint32).astype(np.int64)
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


class TruncfBitEmulation:
    def encode(self, v, t, **kw):
        if not _minifloat(t) or dtypes.get(t).float_format.width != 8:
            return super().encode(v, t, **kw)
        tt = dtypes.get(t)
        return truncf_bit_emulation(np.asarray(v, dtype=np.float64), tt.float_format).astype(tt.bits_dtype)


# --------------------------------------------------------------------------------------------
# the registry
# --------------------------------------------------------------------------------------------


def _dq_out(draft: Draft) -> str | None:
    """DequantizeLinear's output type (None for other ops or a model it rejects)."""
    if draft.op != DQ:
        return None
    try:
        return oracle_for(draft.domain, draft.op, draft.opset).output_type(draft, draft.inputs[1].type)
    except (LookupError, granularity.InvalidModel):
        return None


def _has_subnormal_scale(draft: Draft) -> bool:
    s = draft.inputs[1]
    if s.type not in IEEE_KINDS:
        return False
    v = np.abs(as_float64(s.value, s.type))
    return bool(np.any((v > 0) & (v < 2.0 ** dtypes.get(s.type).float_format.emin)))


def _types(draft: Draft) -> list[str]:
    return [a.type for a in draft.inputs if a is not None]


def _q_out(draft: Draft) -> dtypes.ElemType | None:
    """QuantizeLinear's output type (None for other ops)."""
    if draft.op != Q:
        return None
    x, s, zp = (list(draft.inputs) + [None])[:3]
    if zp is not None:
        return dtypes.get(zp.type)
    code = draft.attrs.get("output_dtype", 0)
    return dtypes.get(code) if code else dtypes.get("uint8")


def _int_rounding(d: Draft) -> bool:
    """Ops whose result goes through a round-to-integer."""
    if d.op == Q:
        return _q_out(d).is_integer
    if d.op == QLMM:
        out = d.inputs[7].type if len(d.inputs) > 7 and d.inputs[7] is not None else d.inputs[0].type
        return dtypes.get(out).is_integer
    return d.op == DQL


def _int_saturation(d: Draft) -> bool:
    return _int_rounding(d)


def _signed_int_out(d: Draft) -> bool:
    if d.op == Q:
        return _q_out(d).is_integer and _q_out(d).signed
    if d.op == QLMM and _int_rounding(d):
        out = d.inputs[7].type if len(d.inputs) > 7 and d.inputs[7] is not None else d.inputs[0].type
        return dtypes.get(out).signed
    return False


def _minifloat_out(d: Draft) -> bool:
    if d.op == Q:
        return _minifloat(_q_out(d))
    if d.op == QLMM:
        return not _int_rounding(d)
    return False


def _fnuz_involved(d: Draft) -> bool:
    if d.op == Q:
        return _q_out(d).name in ("float8e4m3fnuz", "float8e5m2fnuz")
    return d.op == QLMM and any(t.endswith("fnuz") for t in _types(d))


def _nonzero_zero_point(d: Draft) -> bool:
    zp = d.inputs[2] if len(d.inputs) > 2 else None
    return zp is not None and bool(np.any(as_float64(zp.value, zp.type) != 0))


def _half_scale(d: Draft) -> bool:
    """QuantizeLinear whose spec precision can be float16/bfloat16 (a half scale, or ``precision``)."""
    if d.op != Q:
        return False
    prec = d.attrs.get("precision", 0)
    return any(t in HALF_KINDS for t in _types(d)[:2]) or (bool(prec) and dtypes.get(prec).name in HALF_KINDS)


def _involves(*names: str) -> Callable[[Draft], bool]:
    return lambda d: any(t in names for t in _types(d)) or (
        d.op == DQ and d.attrs.get("output_dtype") and dtypes.get(d.attrs["output_dtype"]).name in names)


def _ieee_involved(d: Draft) -> bool:
    if d.op == DQ:
        return True  # the output is always float16/bfloat16/float32
    return any(t in IEEE_KINDS for t in _types(d))


def _nonscalar_params(d: Draft) -> bool:
    return d.op in (Q, DQ) and any(a is not None and a.value.size > 1 for a in d.inputs[1:3])


def _blocked(d: Draft) -> bool:
    return d.op in (Q, DQ) and bool(d.attrs.get("block_size", 0))


def _negative_axis(d: Draft) -> bool:
    return d.op in (Q, DQ) and d.attrs.get("axis", 0) < 0


def _packed_io(d: Draft) -> bool:
    if d.op == Q:
        return _q_out(d).packed
    return d.op == DQ and dtypes.get(d.inputs[0].type).packed


def _dq_with_zero_point(d: Draft) -> bool:
    """DequantizeLinear with a zero point that is not zero somewhere."""
    if d.op != DQ or len(d.inputs) < 3 or d.inputs[2] is None:
        return False
    zp = d.inputs[2]
    return bool(np.any(as_float64(zp.value, zp.type) != 0))


def _dq_int_zero_point(d: Draft) -> bool:
    x = dtypes.get(d.inputs[0].type)
    return _dq_with_zero_point(d) and x.is_integer and x.bits <= 16


def _dq_integer_wide_to_narrow(d: Draft) -> bool:
    return d.op == DQ and dtypes.get(d.inputs[0].type).is_integer


def _q_int_or_dql(d: Draft) -> bool:
    return (d.op == Q and _q_out(d).is_integer) or d.op == DQL


def _q_or_dql(d: Draft) -> bool:
    return d.op in (Q, DQL)


def _qlmm_u8s8(d: Draft) -> bool:
    return d.op == QLMM and d.inputs[0].type == "uint8" and d.inputs[3].type == "int8"


def _qlmm_per_column(d: Draft) -> bool:
    return d.op == QLMM and d.inputs[4].value.size > 1 and d.inputs[0].value.ndim >= 2 and d.inputs[3].value.ndim >= 2


def _qlmm_int(d: Draft) -> bool:
    return d.op == QLMM and _int_rounding(d)


@dataclass(frozen=True)
class Deviation:
    """One realistic implementation choice or bug, as a variant of the oracle."""

    name: str
    ops: frozenset[str]
    explanation: str
    evidence: str
    witness: str
    mixin: type
    applies_to: Callable[[Draft], bool] = field(default=lambda d: True, repr=False, compare=False)
    #: generator families most likely to expose it (the acceptance test looks there first)
    families: tuple[str, ...] = ()

    def applies(self, draft: Draft) -> bool:
        """Whether the deviation can change this draft's outputs at all (a cheap filter)."""
        try:
            return draft.op in self.ops and bool(self.applies_to(draft))
        except Exception:
            return False

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        """Outputs under every reading of the spec, each computed the deviating way.
        Raises InvalidModel (or another exception) where such a kernel would reject the model."""
        return deviating_oracle(draft, self.mixin).evaluate(draft, primary_only)

    def outputs(self, draft: Draft) -> tuple[np.ndarray, ...]:
        """What a runtime with this deviation returns: the first reading (the latest spec text's),
        computed alone."""
        return self.evaluate(draft, primary_only=True).readings[0][1]


def _dev(name, ops, explanation, evidence, witness, mixin, applies=lambda d: True, families=()):
    ops = frozenset([ops] if isinstance(ops, str) else ops)
    return Deviation(name, ops, explanation, evidence, witness, mixin, applies, tuple(families))


_ALL_ROUNDING = (Q, DQL, QLMM)

_MODELS = [
    _dev("round-half-away", _ALL_ROUNDING,
         "Your kernel rounds x / scale half away from zero (C round(), Rust f32::round) instead of half to even: "
         "2.5 becomes 3 and -2.5 becomes -3 where the spec gives 2 and -2.",
         "sonos/tract#2850 (QuantizeLinear used f32::round) and sonos/tract#2672 (DynamicQuantizeLinear, "
         "value and zero point); OpenVINO EP rounds half away (microsoft/onnxruntime#25045); "
         "tenstorrent/tt-metal#56525 (SFPU 'round even' mode is ties-away); blue-oil/blueoil#397 (roundf).",
         "QuantizeLinear float32->int8, x=[2.5, -2.5, 0.5], y_scale=1 (ties with an even integer part)",
         RoundHalfAway, _int_rounding, ("ties", "zero-point-ties", "basic")),
    _dev("round-half-up", _ALL_ROUNDING,
         "Your kernel rounds with floor(x / scale + 0.5): ties go up, so -2.5 becomes -2 and 2.5 becomes 3.",
         "tenstorrent/tt-metal#56525 (int8/uint8 ties rounded toward +inf); the floor(x + 0.5) idiom of "
         "hand-written kernels (nfrechette/acl#368 quantizes with floor(v * n) + mid).",
         "QuantizeLinear float32->int8, x=[-2.5, 2.5, -0.5], y_scale=1 (negative and positive ties)",
         RoundHalfUp, _int_rounding, ("ties", "basic")),
    _dev("round-toward-zero", _ALL_ROUNDING,
         "Your kernel truncates x / scale toward zero (a plain float-to-int cast) instead of rounding to "
         "nearest: 0.7 becomes 0 and -1.6 becomes -1.",
         "microsoft/onnxruntime#18576 and its fix microsoft/onnxruntime#32452 (float16 QuantizeLinear used "
         "static_cast<int32_t>, 2,041 of 4,096 float16 values wrong).",
         "QuantizeLinear float32->int8, x=[0.75, -1.75], y_scale=1",
         RoundTowardZero, _int_rounding, ("basic", "ties")),
    _dev("reciprocal-multiply", (Q, DQL),
         "Your kernel multiplies x by a precomputed 1/scale instead of dividing by scale; the reciprocal's "
         "rounding error moves quotients that sit on or next to a rounding boundary.",
         "apache/tvm#17998 (Reciprocal causing TVM/ORT mismatch); pytorch/pytorch#87093 and #41342 "
         "(inv_scale = 1/scale then round(x * inv_scale)); tenstorrent/tt-metal#56525 (x * (1/scale) in one "
         "SFPMAD); arch-hdl-lang/arch-com#905 (294 of 6,174 boundary values diverge).",
         "QuantizeLinear float32->int8, y_scale=6, x = 6*(k+0.5) and its float32 neighbours",
         ReciprocalMultiply, lambda d: _q_int_or_dql(d) or (d.op == Q and _minifloat(_q_out(d))),
         ("ties", "basic")),
    _dev("zero-point-before-rounding", (Q, DQL),
         "Your kernel adds the zero point to x / scale in floating point before rounding "
         "(round(x / scale + zp)) instead of rounding first and adding the zero point exactly.",
         "webmachinelearning/webnn-baseline#101 (review: 'Round before adding'); onnx/onnx#4505 "
         "(function body Div -> Add -> Clip -> Cast); Xilinx/onnx-mlir#96 and microsoft/onnxruntime#25045 "
         "(OpenVINO FakeQuantize's round((x - low) / range * levels)).",
         "QuantizeLinear float32->uint8, zp=128 (or an odd zero point), x = (k+0.5)*s next to a tie: "
         "the float32 sum q + zp loses the bit that decides the tie",
         ZeroPointBeforeRounding, _q_int_or_dql, ("ties", "saturation")),
    _dev("divide-in-float64", (Q, DQL),
         "Your kernel computes x / scale in double precision and rounds that, instead of rounding the "
         "quotient to the scale's precision first.",
         "Plausible: Python/numpy reference code and constant folders compute in float64 "
         "(onnx/onnx#6169 shows the reference's C * (a_scale * b_scale / y_scale) in numpy); a float32 "
         "quotient that lands exactly on k + 0.5 is not a tie in double.",
         "QuantizeLinear float32->int8, y_scale=6, x = the float32 neighbours of 6*(k+0.5)",
         DivideInFloat64, _q_or_dql, ("ties", "floatkinds")),
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
         E4m3fnNanCodeToMax, lambda d: _q_out(d) is not None and _q_out(d).name == "float8e4m3fn"
         and not d.attrs.get("saturate", 1), ("floatkinds",)),
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
    _dev("quotient-in-float32", Q,
         "Your kernel computes x / scale in float32 where the spec rounds the quotient to float16/bfloat16: "
         "a float16/bfloat16 scale from opset 23 (the default of 'precision'), or precision=float16/bfloat16.",
         "rustnn/rustnn#30 ('Use float32 compute path for float16 quantization division'); onnxruntime "
         "1.31.1 does this (qconform/docs/diagnosis.md); onnx/onnx#6531 introduced the precision attribute.",
         "QuantizeLinear-23 float16->float8e5m2fnuz, x=65504, y_scale=0.5: the float16 quotient is +Inf "
         "(NaN), the float32 quotient 131008 saturates",
         QuotientInFloat32, _half_scale, ("basic", "ties", "specials")),
    _dev("float8-zero-point-ignored", Q,
         "Your QuantizeLinear to a float8 type ignores a non-zero float8 zero point (it returns "
         "convert(x / scale) instead of convert(x / scale + zero_point)).",
         "onnxruntime 1.31.1 does this (qconform/docs/diagnosis.md); onnx/onnx#5408 (the reference refused non-zero "
         "float8 zero points: 'x_zero_point is not null but should be for float 8 types'); onnx/onnx-mlir#2938 "
         "(an option to ignore the zero point).",
         "QuantizeLinear float32->float8e4m3fn, y_zero_point=1.0, x=-12, y_scale=1: -11 expected, -12 given",
         Float8ZeroPointIgnored, lambda d: _minifloat_out(d) and _nonzero_zero_point(d), ("floatkinds",)),
    _dev("scalar-as-1d", (Q, DQ, DQL),
         "Your kernel returns the result of a rank-0 (scalar) input as a one-element 1-D tensor of shape [1] "
         "instead of a scalar of shape [].",
         "qconform's own onnxruntime adapter did this until it was fixed: numpy.ascontiguousarray returns "
         "at least 1-D arrays, so a rank-0 input was fed as shape [1] (qconform/docs/diagnosis.md); "
         "openvinotoolkit/openvino#5260 and apache/tvm#20126 (scalar Q/DQ inputs reshaped or rejected).",
         "DequantizeLinear int8->float32, x=np.int8(5) of shape [], x_scale=2: shape [] expected, [1] given",
         ScalarAs1D, lambda d: d.inputs[0].value.ndim == 0, ("shapes",)),
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
    _dev("per-axis-first-scale", (Q, DQ),
         "Your kernel ignores per-axis and blocked parameters and uses the first scale and zero point for "
         "every element.",
         "sonos/tract#2849 (QuantizeLinear/DequantizeLinear read only as_slice()[0] and never read axis).",
         "DequantizeLinear int8->float32, x=[[1],[1]], x_scale=[1, 2], axis=0: [1, 2] expected, [1, 1] given",
         PerAxisFirstScale, _nonscalar_params, ("basic", "granularity")),
    _dev("blocked-interleaved", (Q, DQ),
         "Your blocked kernel assigns element j of the blocked axis to block j mod num_blocks instead of "
         "j div block_size (the data was reshaped as [block_size, num_blocks]).",
         "openvinotoolkit/openvino#32918 (DequantizeLinear-21 blocked: elements interleaved for axis 1).",
         "DequantizeLinear-21 int8->float32, x=[[9]*8], x_scale=[[1,2,3,4]], axis=1, block_size=2",
         BlockedInterleaved, _blocked, ("granularity",)),
    _dev("negative-axis-off-by-one", (Q, DQ),
         "Your kernel normalises a negative axis as axis + rank - 1 instead of axis + rank, so per-axis "
         "parameters land on the neighbouring dimension.",
         "apple/coreai-torch#24 (negative axis normalised as axis + rank - 1; wrong channel, silently, "
         "when neighbouring dims share a size); ROCm/AMDMIGraphX#703 (review: negative axis not handled).",
         "DequantizeLinear int8->float32, x of shape [3, 3], x_scale=[1, 2, 4], axis=-1 (equal neighbouring dims)",
         NegativeAxisOffByOne, _negative_axis, ("granularity",)),
    _dev("sub-byte-high-nibble-first", (Q, DQ),
         "Your int4/uint4/int2/uint2 packing puts the first element in the most significant bits of each "
         "byte; ONNX stores it in the least significant bits.",
         "onnx/onnx#5811 (LSB-first chosen to match torch quint4x2; the survey in review); amd/Quark#30 "
         "(linear vs interleaved nibble layouts scrambled); 1bit-MONSTER/1bit-MONSTER#1873 (lane order).",
         "QuantizeLinear float32->int4, x=[1, 2, 3], y_scale=1: [1, 2, 3] expected, [2, 1, 0] read back",
         HighNibbleFirst, _packed_io, ("packing", "basic")),
    _dev("scale-inverted", (Q, DQ),
         "Your kernel uses the reciprocal scale convention: QuantizeLinear multiplies by the scale and "
         "DequantizeLinear divides by it.",
         "sony/nnabla#674 (took the reciprocal of DequantizeLinear's scale for the ONNX-to-TensorRT path); "
         "frameworks that store an inverse scale (TF FakeQuant, OpenVINO FakeQuantize ranges).",
         "DequantizeLinear uint8->float32, x=[129], x_zero_point=128, x_scale=2: 2 expected, 0.5 given",
         ScaleInverted, lambda d: True, ("basic",)),
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
    _dev("dql-range-excludes-zero", DQL,
         "Your DynamicQuantizeLinear computes the scale from max(x) - min(x) without first widening the "
         "range to include 0.",
         "onnx/onnx#5597 (the spec text said (max(x) - min(x)) / 255 while the reference widens to 0); "
         "onnx/onnx-mlir#2129 (review of the zero-point formula).",
         "DynamicQuantizeLinear, x=[1, 2, 3, 4]: scale 4/255 expected, 3/255 given",
         DqlRangeExcludesZero, lambda d: True, ("dynamic-range", "ranges")),
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
]

_MODELS += [
    _dev("zero-point-added-in-scale-type", Q,
         "Your kernel adds the zero point to round(x / scale) in the division's float16/bfloat16 precision: "
         "16-bit results above 2048 (float16) or 256 (bfloat16) are rounded before saturation.",
         "Plausible, and the reading issue 21 finding 5 argues the text does not permit "
         "(qconform/docs/semantics.md#q-zero-point): a half-precision kernel that keeps the sum in its compute "
         "type.",
         "QuantizeLinear-23 float16->uint16, x=2047, y_scale=1, y_zero_point=3: 2050 expected, 2048 given",
         ZeroPointAddedInScaleType, lambda d: _half_scale(d) and _q_out(d).is_integer and _q_out(d).bits == 16,
         ("basic", "saturation")),
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
    _dev("fake-quantize", Q,
         "Your QuantizeLinear to an integer type is a FakeQuantize in float32: y = rint(clamp(x, il, ih) * isc "
         "- il * isc) + qmin with il = s(qmin - zp), ih = s(qmax - zp), isc = (qmax - qmin) / (ih - il): the "
         "offset zp - qmin is added before rounding and the reciprocal is rounded.",
         "OpenVINO 2026.4.1's ONNX frontend and CPU plugin (issue 20's probe, 1,128 of 1,450 unexplained "
         "integer QuantizeLinear failures reproduced); microsoft/onnxruntime#25045 (OpenVINO EP rounding).",
         "QuantizeLinear float32->int8, y_scale=2, y_zero_point=127, x=-3: 125 expected, 126 given",
         FakeQuantize, lambda d: _q_out(d) is not None and _q_out(d).is_integer, ("saturation", "ties", "random")),
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
    _dev("constant-subnormals-flushed", (Q, DQ),
         "Your runtime reads a subnormal scale as zero (it flushes denormals in constant tensors when it "
         "loads them) while its arithmetic keeps subnormal data and results.",
         "OpenVINO 2026.4.1's CPU plugin (issue 20's probe: DequantizeLinear-19/float8e4m3fn-float32/specials/"
         "extremes gives 0 for x_scale = 2^-149 but keeps the subnormal products of x_scale = 2^-126); its "
         "CPU_DENORMALS_OPTIMIZATION flushes constant inputs.",
         "DequantizeLinear float8e4m3fn->float32, x=1, x_scale=2^-149: 2^-149 expected, 0 given",
         ConstantSubnormalsFlushed, lambda d: d.op in (Q, DQ) and _has_subnormal_scale(d), ("specials",)),
    _dev("dq-fused-bias", DQ,
         "Your DequantizeLinear computes fma(x, scale, bias) with bias = -zero_point * scale rounded to the output "
         "type first (float16: the zero point converted to float16 too), where (x - zero_point) is exact.",
         "OpenVINO 2026.4.1's CPU plugin (issue 20's probe: 0 mismatches over every uint8/int8/uint16/int16 code "
         "and five (zp, s) pairs); tenstorrent/tt-metal and XNNPACK fold the zero point into a bias the same way.",
         "DequantizeLinear uint8->float32, x=255, x_scale=0.1, x_zero_point=129: 12.6000004 expected, 12.5999994 given",
         DqFusedBias, lambda d: d.op == DQ and _dq_out(d) in (_F32, "float16"), ("precision", "random", "basic")),
    _dev("add-just-under-half-then-truncate", Q,
         "Your QuantizeLinear to uint8 computes int(x / scale + 0.4999999 + zero_point) in the quotient's type: the "
         "zero point is added before rounding, and the truncation of a sum with a constant just under one half "
         "(0.5 itself in float16/bfloat16) rounds ties down below 128 and up above it.",
         "tinygrad/nn/onnx.py QuantizeLinear (\"this appears to work in practice, at least for uchar\"), tinygrad "
         "0.14.0 in issue 20's probe; the order of the additions read from its DEBUG=4 kernels.",
         "QuantizeLinear float32->uint8, y_scale=2, y_zero_point=128, x=1: 128 expected, 129 given",
         AddJustUnderHalfThenTruncate, lambda d: _q_out(d) is not None and _q_out(d).name == "uint8",
         ("ties", "basic", "random")),
    _dev("add-just-under-half-fused-reciprocal", Q,
         "Your QuantizeLinear to uint8 computes int(x * (1 / scale) + 0.4999999 + zero_point) with the multiply and "
         "the first addition fused into one fma, then truncates: the zero point is added before rounding and "
         "the product is never rounded on its own.",
         "tinygrad 0.14.0 in issue 20's probe (its division is a multiply by the folded reciprocal, and clang "
         "contracts a * b + c into an fma by default, -ffp-contract=on); tinygrad/nn/onnx.py QuantizeLinear.",
         "QuantizeLinear float32->uint8, y_scale=6, y_zero_point=128, x=-759: 2 expected, 1 given",
         AddJustUnderHalfFusedReciprocal,
         lambda d: _q_out(d) is not None and _q_out(d).name == "uint8" and d.inputs[0].type == _F32,
         ("ties", "basic", "random")),
    _dev("clamp-and-cast-in-quotient-type", Q,
         "Your QuantizeLinear adds the zero point and clamps in the quotient's float16/bfloat16 type, then casts "
         "with wrap-around: the clamp bounds round (int16 32767 becomes 32768 in bfloat16) and the cast wraps.",
         "tinygrad/nn/onnx.py QuantizeLinear (_clamp_cast((x / y_scale).round() + y_zero_point) in x's dtype), "
         "tinygrad 0.14.0 in issue 20's probe.",
         "QuantizeLinear bfloat16->int16, x=65536, y_scale=2: 32767 expected, -32768 given",
         ClampAndCastInQuotientType, lambda d: _q_out(d) is not None and _q_out(d).is_integer
         and any(t in HALF_KINDS for t in _types(d)[:2]), ("saturation", "random", "basic")),
    _dev("dql-scale-reciprocal", DQL,
         "Your DynamicQuantizeLinear computes y_scale as range * fl32(1/255) instead of range / 255: one ulp high "
         "for some ranges, and y follows.",
         "OpenVINO 2026.4.1 and tinygrad 0.14.0 (issue 20's probe: the same y_scale bits, 0x3AAB5602 for "
         "0x3AAB5601, in both); a division by a constant rewritten as a multiplication.",
         "DynamicQuantizeLinear, x = -1/3 spread: y_scale 0x3AAB5601 expected, 0x3AAB5602 given",
         DqlScaleReciprocal, lambda d: d.op == DQL, ("constant", "dynamic-range")),
    _dev("dq-output-dtype-ignored", DQ,
         "Your DequantizeLinear-23+ ignores output_dtype and returns the scale's type.",
         "tract 0.23.9 (issue 20's probe: 114 cases, e.g. DequantizeLinear-23/int16-float32-float16/basic/per-axis "
         "returns float32).",
         "DequantizeLinear-23 int8->float16 with a float32 scale: a float16 output expected, float32 given",
         DqOutputDtypeIgnored, lambda d: d.op == DQ and bool(d.attrs.get("output_dtype"))
         and dtypes.get(d.attrs["output_dtype"]).name != d.inputs[1].type, ("basic",)),
    _dev("qlinearmatmul-zero-point-before-rounding", QLMM,
         "Your QLinearMatMul adds y_zero_point before rounding: rint(acc * M + y_zp) in float32.",
         "OpenVINO 2026.4.1's int8 brgemm requantisation (issue 20's probe: 44 of 94 unexplained int8/uint8 "
         "QLinearMatMul failures).",
         "QLinearMatMul int8, a_scale=1, b_scale=0.5, y_scale=3, y_zero_point=3, a=-123, b=1: -17 expected, -18 given",
         QlmmZeroPointBeforeRounding, lambda d: d.op == QLMM, ("readings", "ties", "zero-points")),
    _dev("float8-convert-saturating-nan-to-lowest", Q,
         "Your QuantizeLinear to float8 divides in float32 and converts without adding the zero point (-0 "
         "stays -0), always saturating (saturate=0 ignored), and NaN becomes the most negative finite value.",
         "OpenVINO 2026.4.1's CPU Convert to f8e4m3/f8e5m2 (issue 20's probe: NaN gave 0xFE/0xFB in 396 cases, "
         "-0 kept in 378, saturate=0 ignored in 63); openvinotoolkit/openvino#21817 (fp8 conversion saturates).",
         "QuantizeLinear float16->float8e4m3fn, x=NaN, y_scale=1: NaN (0x7F) expected, -448 (0xFE) given",
         Float8ConvertSaturatingNanToLowest, _minifloat_out, ("specials", "floatkinds", "precision")),
    _dev("qlinearmatmul-requantise-in-half", QLMM,
         "Your QLinearMatMul requantises in the scales' float16/bfloat16 type, left to right: "
         "round(T(acc) * T(a_scale * b_scale) / y_scale) + y_zero_point, each step rounded to T, so an "
         "accumulator beyond 65504 becomes Inf in float16 and the output saturates.",
         "tinygrad/nn/onnx.py _qlinearop_quantized ((out * prod(scales) / out_scale).round() + out_zero_point "
         "in the scales' dtype), tinygrad 0.14.0 in issue 20's probe (54 float16-scale cases).",
         "QLinearMatMul float16 scales, int8, a=b=127 (K=16, acc=258064): 68 expected, 127 given",
         QlmmRequantiseInHalf, lambda d: d.op == QLMM and d.inputs[1].type in HALF_KINDS,
         ("zero-points", "k-sizes", "accumulator")),
    _dev("int32-saturating-cast-then-zero-point", (Q, DQL),
         "Your QuantizeLinear converts round(x / y_scale) to int32 with saturation (+-Inf and beyond-range to "
         "INT_MAX / INT_MIN, NaN to 0) and then adds the zero point in int32, which wraps: +Inf with "
         "y_zero_point=127 gives -128, -Inf with y_zero_point=-128 gives 127.",
         "onnxruntime-web 1.30.0 (WASM, i32.trunc_sat_f32_s) in issue 20's run: 18 float16 QuantizeLinear "
         "specials cases; the same int32 path as onnxruntime's E23 (fixed in 1.32), there with x86's "
         "non-saturating cvtps2dq (int32-cast-then-zero-point).",
         "QuantizeLinear float16->int8, x=-inf, y_scale=6e-8, y_zero_point=-128: -128 expected, 127 given",
         Int32SaturatingCastThenZeroPoint, _q_int_or_dql, ("specials", "saturation")),
    _dev("q-output-dtype-ignored-without-zero-point", Q,
         "Your QuantizeLinear ignores output_dtype when there is no zero point and returns uint8.",
         "tract 0.23.9 (issue 20's probe: QuantizeLinear-24+ without y_zero_point, e.g. "
         "QuantizeLinear-25/float32-int8/random/draw-000, returns uint8).",
         "QuantizeLinear-25 float32 with output_dtype=INT8 and no zero point: an int8 output expected, uint8 given",
         QOutputDtypeIgnoredWithoutZeroPoint, lambda d: d.op == Q and len(d.inputs) < 3
         and dtypes.get(d.attrs.get("output_dtype", 2) or 2).name != "uint8", ("random", "defaults")),
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
         and not d.inputs[0].type.endswith("fnuz"), ("floatkinds", "specials")),  # fnuz: the -0 model
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
    _dev("negative-infinity-to-max", (Q, DQL),
         "Your QuantizeLinear maps -Inf to the type's maximum instead of its minimum.",
         "Reported in issue 21 (onnxruntime 1.30, float16 QuantizeLinear); pytorch/pytorch#155109 and #133557 "
         "(inf and -inf quantized to the same bound).",
         "QuantizeLinear float16->int8, x=-inf, y_scale=1: -128 expected, 127 given",
         NegativeInfinityToMax, _q_int_or_dql, ("specials",)),
    _dev("per-axis-wrong-axis", (Q, DQ),
         "Your kernel applies the per-axis scale along another axis of the same length than the one "
         "'axis' names.",
         "NVIDIA/TensorRT#1694 (ConvTranspose INT8: the per-channel weight scale taken along the wrong axis).",
         "DequantizeLinear int8->float32, x of shape [3, 3], x_scale=[1, 2, 4], axis=0",
         PerAxisWrongAxis, _nonscalar_params, ("granularity", "specials")),
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
    _dev("quotient-in-input-type", Q,
         "Your QuantizeLinear converts the scale to x's float16/bfloat16 type and divides there, where the "
         "spec (23+) says the type of y_scale, or the 'precision' attribute, determines the precision of "
         "the division.",
         "IREE 3.13 in issue 20's run (QuantizeLinear-23 bfloat16 x, float16 scale 0.33325: 3.171875 gives 9, "
         "as 3.171875 / bf16(0.33325) = 9.497 does, where 3.171875 / 0.33325 = 9.518 gives 10).",
         "QuantizeLinear-23 bfloat16->int8, y_scale float16 0.33325, x=3.171875: 10 expected, 9 given",
         QuotientInInputType, lambda d: d.op == Q and d.inputs[0].type in HALF_KINDS
         and d.inputs[1].type != d.inputs[0].type, ("precision", "basic")),
    _dev("half-products-flushed", DQ,
         "Your DequantizeLinear flushes a float16/bfloat16 product that comes out subnormal to zero, though "
         "it reads a subnormal scale correctly (flush-to-zero without denormals-are-zero).",
         "IREE 3.13 in issue 20's run (DequantizeLinear-21 int16->float16, scale 2^-24, x - zero_point = 1: "
         "0 where 2^-24 is right, while x - zero_point = 32767 gives 32767 * 2^-24); compare "
         "flush-denormals, which also zeroes the subnormal scale.",
         "DequantizeLinear int16->float16, x=1, x_scale=2^-24: 2^-24 expected, 0 given",
         HalfProductsFlushed, lambda d: d.op == DQ and bool(set(_types(d)) & set(HALF_KINDS)), ("specials",)),
    _dev("minifloat-double-rounding", (Q, QLMM),
         "Your float8/float4/float6 conversion rounds to float16 first and then to the narrow type: two "
         "roundings, which move values just past a midpoint.",
         "triton-lang/triton#7382 and #10846 (AMD fp32 -> fp8 through an fp16 intermediate); "
         "flashinfer-ai/flashinfer#5128 (TensorRT-LLM's float2 -> fp8x2 cast through bf16); FlashML-org/FreeToken#85.",
         "QuantizeLinear float32->float8e4m3fn, x just above the midpoint 1.0625 by less than a float16 ulp",
         MinifloatDoubleRounding, _minifloat_out, ("floatkinds", "ties")),
    _dev("saturate-before-zero-point", (Q, DQL),
         "Your kernel clamps round(x / scale) to the output type and adds the zero point afterwards, where "
         "the spec saturates round(x / scale) + zero_point: a quotient past the type's range keeps the "
         "bound, and the zero point then moves it.",
         "llvm/torch-mlir#4487 (TOSA lowering: 3.4501 / (1/66.933334) = 231 cast to int8 clamps to 127, plus "
         "zero point -128 gives -1 where 103 is right); Xilinx/onnx-mlir#96 and #138 (saturate(x/scale) + zp "
         "changed to saturate(x/scale + zp)).",
         "QuantizeLinear float32->int8, x=231, y_scale=1, y_zero_point=-128: 103 expected, -1 given",
         SaturateBeforeZeroPoint, _q_int_or_dql, ("zero-point-ties", "specials", "basic")),
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
    _dev("minifloat-ties-away", (Q, QLMM),
         "Your float8/float4/float6 conversion rounds a value exactly halfway between two representable "
         "values away from zero, where the spec's round to nearest even keeps the even one.",
         "triton-lang/triton#5925 and its fix #6102 (f16 -> f8e5m2 'rtne' rounds ties up on A100: 9 gives "
         "10, where 8 is right); triton-lang/triton#11753 (x.to(tl.float8e5, rtne): 1.125 gives 1.25, "
         "where 1.0 is right); OpenVINO 2026.4.1 in this suite's run (QLinearMatMul-21 to float8e4m3fn, "
         "QLinearMatMul-21/bfloat16-int8-float8e5m2-float8e4m3fn/basic/ordinary).",
         "QuantizeLinear float32->float8e5m2, x=1.125, y_scale=1: 1.0 expected, 1.25 given",
         MinifloatTiesAway, _minifloat_out, ("ties", "floatkinds")),
    _dev("blocked-index-per-element", DQ,
         "Your blocked DequantizeLinear of a 1-D x reads the scale and zero point at the element's own "
         "index (i, not i // block_size), and a read past the end of the parameters gives 0.",
         "microsoft/onnxruntime#32730 (WebGPU EP 1.30.0: DequantizeLinear-21 int8, x=[10..80], block_size=4, "
         "scale=[0.5, 2], zero point [0, 10] gives [5, 20, 0, 0, 0, 0, 0, 0]; the wasm EP and the CPU are "
         "right).",
         "DequantizeLinear-21 int8->float32, x=[10, 20, ..., 80], axis=0, block_size=4, x_scale=[0.5, 2], "
         "x_zero_point=[0, 10]: [5, 10, 15, 20, 80, 100, 120, 140] expected, [5, 20, 0, 0, 0, 0, 0, 0] given",
         BlockedIndexPerElement, lambda d: _blocked(d) and d.op == DQ and d.inputs[0].value.ndim == 1,
         ("granularity-edges", "blocked")),
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
    _dev("minifloat-double-rounding-via-bfloat16", (Q, QLMM),
         "Your float8/float4/float6 conversion rounds to bfloat16 first and then to the narrow type: two "
         "roundings, which move values just past a midpoint.",
         "flashinfer-ai/flashinfer#5128 (TensorRT-LLM's cudaTypeUtils: __nv_fp8x2_e4m3(bf1622float2("
         "float22bf162(val))), float32 -> bfloat16 -> float8e4m3fn); OpenVINO 2026.4.1 in this suite's run: 11 "
         "QLinearMatMul-21 cases with a float8e4m3fn output.",
         "QuantizeLinear float32->float8e4m3fn, x = 1.0625 + 2^-10 (just above a midpoint, below "
         "bfloat16's half-ulp): 1.125 expected, 1.0 given",
         MinifloatDoubleRoundingViaBfloat16, _minifloat_out, ("floatkinds", "ties")),
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
]

MODELS: dict[str, Deviation] = {}
for _m in _MODELS:
    if _m.name in MODELS or "+" in _m.name:
        raise KeyError(f"deviation model {_m.name!r} registered twice or has a '+' (reserved for pairs)")
    MODELS[_m.name] = _m


def _hooks(mixin: type) -> set[str]:
    return {k for c in mixin.__mro__ if c is not object for k in vars(c) if not k.startswith("__")}


@functools.cache
def combine(a: str, b: str) -> Deviation | None:
    """Two deviations at once (``a+b``), when they change different steps; else None."""
    ma, mb = MODELS[a], MODELS[b]
    if _hooks(ma.mixin) & _hooks(mb.mixin) or not (ma.ops & mb.ops):
        return None
    mixin = type(f"{ma.mixin.__name__}+{mb.mixin.__name__}", (ma.mixin, mb.mixin), {})
    return Deviation(f"{a}+{b}", ma.ops & mb.ops, f"Two deviations at once. {ma.explanation} {mb.explanation}",
                     f"{a}: {ma.evidence} {b}: {mb.evidence}", f"{ma.witness}; {mb.witness}", mixin,
                     lambda d: ma.applies(d) and mb.applies(d), ma.families + mb.families)


def get(name: str) -> Deviation:
    """A registered model, or a pair written ``a+b``."""
    if name in MODELS:
        return MODELS[name]
    a, plus, b = name.partition("+")
    pair = combine(a, b) if plus and a in MODELS and b in MODELS else None
    if pair is None:
        raise KeyError(f"unknown deviation model {name!r}; known: {', '.join(MODELS)} (or a+b)")
    return pair


__all__ = ["Deviation", "MODELS", "Spec", "combine", "compose", "deviating_oracle", "get", "round_fraction",
           "round_with", "swap_slots"]

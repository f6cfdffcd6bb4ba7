"""Rounding to an integer done another way."""
from __future__ import annotations

import functools

import numpy as np

from qconform import dtypes
from qconform.oracle.arith import exact_fma, round_with
from qconform.diagnosis.models.base import _ALL_ROUNDING, _dev, _int_rounding, _q_out, _types
from qconform.diagnosis.models.common import Q, _F32, _int32_cast


class RoundHalfAway:
    rounding = "half-away"


class RoundHalfUp:
    rounding = "half-up"


class RoundTowardZero:
    rounding = "toward-zero"


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


#: Elements per vector of the position-dependent rounding model: 16 float32 lanes (AVX-512). The
#: family "tie-positions" (lengths 1..67) also separates widths 8 and 4; only 16 is registered.
VECTOR_WIDTH = 16


def _tail(v: np.ndarray) -> np.ndarray:
    """The elements a scalar loop after whole vectors of VECTOR_WIDTH handles (flattened order)."""
    n = v.size
    return (np.arange(n) >= n - n % VECTOR_WIDTH).reshape(v.shape)


class ScalarTailRoundsHalfAway:
    """A SIMD loop over whole vectors of VECTOR_WIDTH elements rounding ties to even, and a scalar
    loop over the last n mod VECTOR_WIDTH elements (in the flattened order) rounding them away
    from zero (std::round)."""

    def round(self, v):
        v = np.asarray(v, dtype=np.float64)
        return np.where(_tail(v), round_with(v, "half-away"), super().round(v))


class VectorBodyRoundsHalfAway:
    """The reverse split: the SIMD body rounds ties away from zero (a ties-away vector convert,
    AArch64 FCVTAS), the scalar tail to even (nearbyint)."""

    def round(self, v):
        v = np.asarray(v, dtype=np.float64)
        return np.where(_tail(v), super().round(v), round_with(v, "half-away"))


def _has_tail(d) -> bool:
    return d.op == Q and _q_out(d).is_integer and d.inputs[0].value.size % VECTOR_WIDTH != 0


#: The deviations of this step, each beside its mixin above (the registry's order: ``ORDER``).
DEVIATIONS = [
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
    _dev("fake-quantize", Q,
         "Your QuantizeLinear to an integer type is a FakeQuantize in float32: y = rint(clamp(x, il, ih) * isc "
         "- il * isc) + qmin with il = s(qmin - zp), ih = s(qmax - zp), isc = (qmax - qmin) / (ih - il): the "
         "offset zp - qmin is added before rounding and the reciprocal is rounded.",
         "OpenVINO 2026.4.1's ONNX frontend and CPU plugin (issue 20's probe, 1,128 of 1,450 unexplained "
         "integer QuantizeLinear failures reproduced); microsoft/onnxruntime#25045 (OpenVINO EP rounding).",
         "QuantizeLinear float32->int8, y_scale=2, y_zero_point=127, x=-3: 125 expected, 126 given",
         FakeQuantize, lambda d: _q_out(d) is not None and _q_out(d).is_integer, ("saturation", "ties", "random")),
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
         and any(t in dtypes.having("is_half") for t in _types(d)[:2]), ("saturation", "random", "basic")),
    _dev("scalar-tail-rounds-half-away", Q,
         f"Your QuantizeLinear rounds ties to even in its vector loop but away from zero in the scalar loop over the "
         f"last n mod {VECTOR_WIDTH} elements: x / scale = 2.5 gives 2 in the body and 3 in the tail.",
         "microsoft/onnxruntime#28606 (review: QuantizeRowToU8's AVX-512 body rounds to nearest even, 'but the "
         "scalar tail still uses std::round (ties away from zero)' for 'the last (len % 16) elements'); the same "
         "split in pytorch/FBGEMM#9 (vectorised _mm256_round_ps vs scalar std::round), servo/pathfinder#579 and "
         "imazen/archmage#20 (scalar fallbacks rounding ties away).",
         f"QuantizeLinear float32->uint8, x of length {VECTOR_WIDTH + 1}, every element a tie x / scale = 2k + 0.5: "
         "the last element rounded down to even expected, up given",
         ScalarTailRoundsHalfAway, _has_tail, ("tie-positions", "ties")),
    _dev("vector-body-rounds-half-away", Q,
         f"Your QuantizeLinear rounds ties away from zero in its vector loop but to even in the scalar loop over the "
         f"last n mod {VECTOR_WIDTH} elements: x / scale = 2.5 gives 3 in the body and 2 in the tail.",
         "Plausible, the reverse of microsoft/onnxruntime#28606's split: a vector path built on a ties-away "
         "convert (AArch64 FCVTAS / vcvtaq_s32_f32, or a SIMD round() fixed to match f32::round as in "
         "bitshifter/glam-rs#831) beside a scalar tail using nearbyint or rint.",
         f"QuantizeLinear float32->uint8, x of length {VECTOR_WIDTH + 1}, every element a tie x / scale = 2k + 0.5: "
         "the first element rounded down to even expected, up given",
         VectorBodyRoundsHalfAway, lambda d: d.op == Q and _q_out(d).is_integer and d.inputs[0].value.size >= VECTOR_WIDTH,
         ("tie-positions", "ties")),
]

"""What fused integer kernels compute for a QDQ pattern: the mixins of the fused-kernel models
(declared, with where each applies, in ``fused``), each overriding ``GraphOracle.fused``
(``qconform/oracle/graph.py``) -- given a pattern draft it returns the pattern's outputs computed the
kernel's way (one list per reading it can follow) -- and the one model that computes the pattern node
by node with another QuantizeLinear (``QuantizeNodesReciprocal``, over ``GraphOracle.node_oracle``).
The pattern's structure is read by ``fused_pattern``; the accumulating operators' integer path runs on
the oracle's shared integer body (``qconform/oracle/integer.py``).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from qconform import dtypes
from qconform.diagnosis.models.fused_pattern import (Pattern, chain, chain_source, fake_source, pattern, requant_chain,
                                                     requant_source)
from qconform.diagnosis.models.matmul import _fixed_point_multiply, _quantize_multiplier
from qconform.oracle import integer
from qconform.oracle.steps import Steps
from qconform.oracle.arith import as_float64, round_fraction


def _f32(v) -> np.ndarray:
    return np.asarray(v, np.float32)


def _saturate(v: np.ndarray, t: str) -> np.ndarray:
    lo, hi = dtypes.get(t).qrange
    return np.clip(v, lo, hi)


def _pack(v: np.ndarray, t: str) -> np.ndarray:
    et = dtypes.get(t)
    return et.from_bits(np.asarray(v, np.int64) & ((1 << et.bits) - 1))


def _exact_f32_fma(x, y, z) -> np.ndarray:
    """fl32(x*y + z), one rounding (a fused multiply-add in float32)."""
    from qconform.oracle.graph import _round_fraction_f32

    x, y, z = np.broadcast_arrays(_f32(x), _f32(y), _f32(z))
    out = [_round_fraction_f32(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)))
           for a, b, c in zip(x.ravel(), y.ravel(), z.ravel())]
    return np.asarray(out, np.float32).reshape(x.shape)


def _half_up(codes: np.ndarray, ratio: Fraction, bias: Fraction) -> np.ndarray:
    """floor(c·ratio + 1/2 + bias) per code c, exactly."""
    return np.asarray([int(round_fraction(Fraction(int(c)) * ratio + bias, "half-up")) for c in codes.ravel()],
                      np.int64).reshape(codes.shape)


def only_where(mixin: type, applies) -> type:
    """``mixin`` computing the pattern only where ``applies(draft)`` holds (where its model applies);
    elsewhere the graph, node by node: a runtime with that kernel runs other graphs as the text says."""
    def fused(self, draft, inputs):
        return mixin.fused(self, draft, inputs) if applies(draft) else None
    return type(mixin.__name__, (mixin,), {"fused": fused, "__doc__": mixin.__doc__})


# ----------------------------------------------------------------------------------------------
# Elementwise: onnxruntime's QLinearMul and QLinearAdd (MLAS)
# ----------------------------------------------------------------------------------------------
class QLinearMulFloatMultiplier:
    """onnxruntime MLAS qlmul.cpp (x86 SSE2 path): p = (a−za)(b−zb) exact; y = cvtps(fl32(fl32(p ·
    fl32(fl32(sa·sb)/sy)) + zy)), round half to even, saturated: one float32 multiplier where the
    graph rounds each DequantizeLinear, the product and the division."""

    def fused(self, draft, inputs):
        p = pattern(draft)
        a, b = p.operands
        ratio = _f32(_f32(_f32(a.scale) * _f32(b.scale)) / _f32(p.y_scale))
        prod = a.exact() * b.exact()
        v = _f32(_f32(prod.astype(np.float32) * ratio) + _f32(as_float64(p.y_zero, p.y_type)))
        return [("spec", [_pack(_saturate(np.rint(v).astype(np.int64), p.y_type), p.y_type)])]


class QLinearAddFma:
    """onnxruntime MLAS qladd_avx2.cpp: rA = fl32(sa/sy), rB = fl32(sb/sy), fixed = fl32(zy −
    fl32(fl32(rA·za) + fl32(rB·zb))); t = fma(b, rB, fixed); t = fma(a, rA, t); y = cvtps(t), half to
    even, saturated: the zero points folded into one float32 constant, two fused multiply-adds."""

    def fused(self, draft, inputs):
        p = pattern(draft)
        a, b = p.operands
        za, zb = (float(as_float64(o.zero, o.type)) for o in (a, b))
        zy = float(as_float64(p.y_zero, p.y_type))
        ra, rb = _f32(_f32(a.scale) / _f32(p.y_scale)), _f32(_f32(b.scale) / _f32(p.y_scale))
        fixed = _f32(_f32(zy) - _f32(_f32(ra * _f32(za)) + _f32(rb * _f32(zb))))
        qa = as_float64(a.codes, a.type).astype(np.float32)
        qb = as_float64(b.codes, b.type).astype(np.float32)
        t = _exact_f32_fma(qb, rb, fixed)
        t = _exact_f32_fma(qa, ra, t)
        return [("spec", [_pack(_saturate(np.rint(t).astype(np.int64), p.y_type), p.y_type)])]


# ----------------------------------------------------------------------------------------------
# MatMul, Gemm, Conv as one integer kernel (onnxruntime's fused integer kernels, OpenVINO LPT)
# ----------------------------------------------------------------------------------------------
#: The spec's steps (round half to even, IEEE float32): what a fused kernel's requantisation rounds with.
_SPEC_STEPS = Steps()


class FusedAccumulator:
    """The integer kernel a fusing runtime builds from DQ(x), DQ(w) [, DQ(bias)] → MatMul/Gemm/Conv →
    Q: the exact integer accumulator (or the x86 pair-saturated one), the bias added as its int32
    codes, requantised with a float32 multiplier fl32(fl32(sx·sw)/sy) per output channel, rounded half
    to even (MLAS MlasRequantizeOutput), the zero point added, saturated."""

    _pair_saturation: bool = False

    @staticmethod
    def _handles(p: Pattern) -> bool:
        """Whether this kernel computes the pattern's geometry: a 2-D MatMul, a Gemm with alpha = beta
        = 1, A not transposed and a 1-D dequantized bias (or none), a convolution of one group."""
        x, w = p.operands[0], p.operands[1]
        if p.op == "MatMul":
            return np.ndim(x.codes) == 2 and np.ndim(w.codes) == 2
        if p.op == "Gemm":
            bias = p.operands[2] if len(p.operands) > 2 else None
            other_c = len(p.others) > 2 and p.others[2] is not None
            return float(p.attrs.get("alpha", 1.0)) == 1.0 and float(p.attrs.get("beta", 1.0)) == 1.0 \
                and not p.attrs.get("transA", 0) and not other_c and (bias is None or np.ndim(bias.codes) == 1)
        return int(p.attrs.get("group", 1)) == 1

    def _pairs(self, p: Pattern) -> bool:
        """Whether the kernel adds its products in int16-saturated pairs."""
        return self._pair_saturation

    def fused(self, draft, inputs):
        p = pattern(draft)
        x, w = p.operands[0], p.operands[1]
        bias = p.operands[2] if len(p.operands) > 2 else None
        wd = w.exact()
        xq = as_float64(x.codes, x.type).astype(np.int64)
        wq = as_float64(w.codes, w.type).astype(np.int64)
        zx = int(np.asarray(as_float64(x.zero, x.type)).reshape(-1)[0])
        sw = np.asarray(w.scale, np.float64)
        if p.op == "Conv":  # the channels-last windows of the one integer body, padded with x's zero point
            cols, _ = integer.conv_windows(xq, wq.shape, p.attrs, pad_value=zx)  # (N, O.., K.., C)
            spatial = cols.shape[1:1 + xq.ndim - 2]
            a_raw = cols.reshape(-1, int(np.prod(cols.shape[1 + len(spatial):])))
            b_raw = np.moveaxis(wq, 1, -1).reshape(wq.shape[0], -1).T  # (K..·C, M)
            b_d = np.moveaxis(wd, 1, -1).reshape(wd.shape[0], -1).T
        else:
            a_raw, b_raw, b_d = xq, wq, wd
            if p.op == "Gemm" and p.attrs.get("transB", 0):
                b_raw, b_d = b_raw.T, b_d.T
        acc = self._accumulate(a_raw, b_raw, b_d, zx, self._pairs(p))
        if bias is not None:
            bcodes = as_float64(bias.codes, bias.type).astype(np.int64)
            acc = acc + bcodes[None, :]
        sx = float(np.asarray(x.scale).reshape(-1)[0])
        per_out = np.broadcast_to(sw.reshape(-1) if sw.size > 1 else sw.reshape(()), (acc.shape[1],))
        zy = float(as_float64(p.y_zero, p.y_type))
        y = _saturate(self._requantise_accumulator(acc, sx, per_out[None, :], float(p.y_scale), zy, p.y_type), p.y_type)
        if p.op == "Conv":
            y = np.moveaxis(y.reshape((x.codes.shape[0], *spatial, -1)), -1, 1)
        return [("spec", [_pack(y, p.y_type)])]

    def _requantise_accumulator(self, acc: np.ndarray, sx: float, sw: np.ndarray, sy: float, zy: float,
                               y_type: str) -> np.ndarray:
        """The exact integer accumulator to output codes before saturation: MLAS's float32 multiplier
        fl32(fl32(sx·sw)/sy), rounded half to even, the zero point added (the step the fixed-point
        models replace)."""
        v = integer.requantise(_SPEC_STEPS, "multiplier-float32", acc, 0, (sx, sw, sy), zy, dtypes.get(y_type),
                               "float32")[True]
        return v.astype(np.int64)

    def _accumulate(self, a_raw, b_raw, b_d, zx, pairs: bool):
        """(x − zx)·(w − zw) exactly, or (``pairs``) the raw products summed in int16-saturated pairs
        with the zero point folded out afterwards (weights symmetric, zero point 0)."""
        if not pairs:
            return (a_raw - zx) @ b_d
        k = a_raw.shape[1]
        if k % 2:
            a_raw = np.concatenate([a_raw, np.zeros((a_raw.shape[0], 1), np.int64)], axis=1)
            b_raw = np.concatenate([b_raw, np.zeros((1, b_raw.shape[1]), np.int64)], axis=0)
        prod = a_raw[:, :, None] * b_raw[None, :, :]
        pairs = np.clip(prod[:, 0::2, :] + prod[:, 1::2, :], -(2**15), 2**15 - 1)
        return pairs.sum(axis=1) - zx * b_raw.sum(axis=0)[None, :]


class FusedU8S8PairSaturation(FusedAccumulator):
    _pair_saturation = True


class FusedBiasCodes(FusedAccumulator):
    """The bias taken as codes without its own scale (onnxruntime's QDQ→QGemm action moves the int32
    bias in as is); on x86 the u8×s8 products are pair-saturated too, as the same kernel does."""

    def _pairs(self, p: Pattern) -> bool:
        return p.operands[0].type == "uint8" and p.operands[1].type == "int8"


# ----------------------------------------------------------------------------------------------
# Requantisation in an integer-only pipeline (gemmlowp / TFLite) and half up (Hexagon)
# ----------------------------------------------------------------------------------------------
class RequantiseHalfUp:
    """DQ → Q as one requantisation rounding half up: y = floor((x − z1)·s1/s2 + 1/2 + bias) + z2,
    exact, then saturated (Hexagon NN's ``roundf_u32``: add 0.5 and truncate); a chain of such
    requantisations (DQ → Q → DQ → Q …) stage by stage."""

    _bias = Fraction(0)

    def fused(self, draft, inputs):
        x, stages = requant_chain(draft)
        codes = as_float64(x.value, x.type).astype(np.int64)
        for s1, z1, s2, z2 in stages:
            xs = codes - int(as_float64(z1.value, z1.type))
            ratio = Fraction(float(s1.value)) / Fraction(float(s2.value))
            codes = _saturate(_half_up(xs, ratio, self._bias) + int(as_float64(z2.value, z2.type)), z2.type)
        return [("spec", [_pack(codes, stages[-1][3].type)])]


class RequantiseHalfUpBiased(RequantiseHalfUp):
    """The same, with QNN HTP's measured upward bias of 2^-7 code before the rounding."""

    _bias = Fraction(1, 128)


class RequantiseFixedPoint:
    """DQ → Q as integer-only requantisation (gemmlowp/TFLite): the ratio s1/s2 as a Q31 multiplier
    and a shift (QuantizeMultiplier, rounded half away), applied with SaturatingRoundingDoublingHighMul
    and RoundingDivideByPOT (two roundings: the first sends ties toward +∞, the second away from zero)."""

    def fused(self, draft, inputs):
        x, s1, z1, s2, z2 = requant_source(draft)
        xs = as_float64(x.value, x.type).astype(np.int64) - int(as_float64(z1.value, z1.type))
        q, shift = _quantize_multiplier(float(s1.value) / float(s2.value))
        out = [_fixed_point_multiply(int(v), q, shift) for v in xs.ravel()]
        y = _saturate(np.asarray(out, np.int64).reshape(xs.shape) + int(as_float64(z2.value, z2.type)), z2.type)
        return [("spec", [_pack(y, z2.type)])]


def _fake_quantize_range(s2, z2) -> tuple[np.float32, np.float32]:
    """The FakeQuantize OpenVINO's ONNX frontend makes of QuantizeLinear(s2, z2): its input range
    il = fl32(s2·(qmin − z2)), ih = fl32(s2·(qmax − z2))."""
    f = np.float32
    lo, hi = dtypes.get(z2.type).qrange
    zp = f(as_float64(z2.value, z2.type))
    return f(f(s2.value) * (f(lo) - zp)), f(f(s2.value) * (f(hi) - zp))


def _fake_quantize(v: np.ndarray, il, ih, t: str) -> np.ndarray:
    """float32 values through OpenVINO's decomposed FakeQuantize onto t's codes, every step in float32:
    clamp to [il, ih], isc = (qmax − qmin)/(ih − il), ish = il·isc, fl32(fl32(c·isc) − ish) rounded
    half to even, plus qmin."""
    f = np.float32
    lo, hi = dtypes.get(t).qrange
    isc = f(f(hi - lo) / f(ih - il))
    ish = f(il * isc)
    r = np.minimum(np.maximum(np.asarray(v, f), il), ih) * isc - ish  # float32 throughout, no FMA
    return _pack(_saturate(np.rint(r.astype(np.float64)).astype(np.int64) + lo, t), t)


def _shifted(x, z1) -> np.ndarray:
    """x − z1 as float32 (exact: 8-bit codes)."""
    return (as_float64(x.value, x.type) - as_float64(z1.value, z1.type)).astype(np.float32)


class RequantiseFakeQuantizeBounds:
    """DQ → Q as one FakeQuantize, every step in float32 (OpenVINO's CPU plugin): the Q node's input
    range il = s2·(qmin − z2), ih = s2·(qmax − z2), divided by s1 (the DequantizeLinear's Multiply
    folded into the range); the multiplier rebuilt from the range, isc = (qmax − qmin)/(ih − il), and
    ish = il·isc; then t = fl32(clamp(x − z1, il, ih)·isc) − ish rounded half to even, plus qmin: the
    zero point enters before the rounding, the ratio s1/s2 only through the range."""

    def fused(self, draft, inputs):
        x, s1, z1, s2, z2 = chain_source(draft)
        il, ih = _fake_quantize_range(s2, z2)
        s = np.float32(s1.value)
        return [("spec", [_fake_quantize(_shifted(x, z1), np.float32(il / s), np.float32(ih / s), z2.type)])]


class ReluFakeQuantizeBounds:
    """DQ → Relu → Q, OpenVINO's CPU plugin. Where il ≥ 0 (z2 = qmin) ReluFakeQuantizeFusion drops the
    Relu; where z1 = 0 (no Subtract) the low-precision transformations move the Multiply past it: both
    give the chain's FakeQuantize on max(x − z1, 0) with the range divided by s1. Otherwise (a Subtract
    in the dequantisation: LPT's ReluTransformation refuses it) the Relu stays in float between
    fl32(fl32(x − z1)·s1) and the FakeQuantize, whose range is then not divided."""

    def fused(self, draft, inputs):
        _, _, (x, s1, z1, s2, z2) = chain(draft)
        il, ih = _fake_quantize_range(s2, z2)
        f, s, v = np.float32, np.float32(s1.value), _shifted(x, z1)
        if il >= 0 or not np.any(as_float64(z1.value, z1.type)):
            return [("spec", [_fake_quantize(np.maximum(v, f(0)), f(il / s), f(ih / s), z2.type)])]
        return [("spec", [_fake_quantize(np.maximum(v * s, f(0)), il, ih, z2.type)])]


class ClipFakeQuantizeBounds:
    """DQ → Clip(lo, hi) → Q, OpenVINO's CPU plugin. A Clip whose bounds cover the FakeQuantize's range
    (lo ≤ il, hi ≥ ih) is dropped (FuseClampAndFakeQuantize): the chain's FakeQuantize. Otherwise the
    low-precision ClampTransformation moves the dequantisation past the Clip, its bounds rewritten in
    double as lo/s1 + z1 and hi/s1 + z1; the clamp then acts on the codes with those bounds truncated
    toward zero (measured: 249.99999833 clamps to 249 where a float32 bound would be 250), and the
    chain's FakeQuantize follows."""

    def fused(self, draft, inputs):
        _, (low, high), (x, s1, z1, s2, z2) = chain(draft)
        il, ih = _fake_quantize_range(s2, z2)
        f, s = np.float32, np.float32(s1.value)
        codes, z = as_float64(x.value, x.type), float(as_float64(z1.value, z1.type))
        lo, hi = f(low.value), f(high.value)
        if not (lo <= il and hi >= ih):
            codes = np.clip(codes, np.trunc(float(lo) / float(s) + z), np.trunc(float(hi) / float(s) + z))
        return [("spec", [_fake_quantize((codes - z).astype(f), f(il / s), f(ih / s), z2.type)])]


# ----------------------------------------------------------------------------------------------
# Fake quantisation: x → Q → DQ
# ----------------------------------------------------------------------------------------------
class QdqPairRemoved:
    """x → Q → DQ removed as an identity: y = x (the rounding and the saturation both gone)."""

    def fused(self, draft, inputs):
        x, _, _ = fake_source(draft)
        return [("spec", [np.array(x.value, copy=True)])]


class QdqPairAsClamp:
    """x → Q → DQ kept only as a clamp: y = clip(x, fl32((qmin − zp)·s), fl32((qmax − zp)·s)), the
    rounding to the grid gone (QNN HTP, measured bit for bit on uint8, int8, uint16 and int16)."""

    def fused(self, draft, inputs):
        x, s, z = fake_source(draft)
        lo, hi = dtypes.get(z.type).qrange
        zp = float(as_float64(z.value, z.type))
        sv = _f32(s.value)
        return [("spec", [np.clip(_f32(x.value), _f32((lo - zp) * sv), _f32((hi - zp) * sv)).astype(np.float32)])]


class InputQuantiseHalfUpFloat16:
    """A QuantizeLinear fed by a float graph input, quantised by the NPU's input stage: the quotient
    x/s rounded to float16, then half up (QNN HTP, measured bit for bit); the rest of the pattern
    (Relu on codes: max(q, zp)) requantised half up."""

    def fused(self, draft, inputs):
        nodes = draft.graph
        values = {a.name: a for a in draft.inputs}
        x, s1, z1 = (values[i] for i in nodes[0].inputs)
        s2, z2 = (values[i] for i in nodes[-1].inputs[1:3])
        zp1 = int(as_float64(z1.value, z1.type))
        q = (np.asarray(x.value, np.float64) / float(_f32(s1.value))).astype(np.float16).astype(np.float64)
        q1 = _saturate(np.floor(q + 0.5).astype(np.int64) + zp1, z1.type)
        r = np.maximum(q1, zp1) if nodes[2].op == "Relu" else q1
        ratio = Fraction(float(s1.value)) / Fraction(float(s2.value))
        zp2 = int(as_float64(z2.value, z2.type))
        return [("spec", [_pack(_saturate(_half_up(r - zp1, ratio, Fraction(0)) + zp2, z2.type), z2.type)])]


# ----------------------------------------------------------------------------------------------
# No fusion: node by node, with the runtime's own QuantizeLinear kernel in every QuantizeLinear node
# ----------------------------------------------------------------------------------------------
class QuantizeNodesReciprocal:
    """The pattern computed node by node, as the text says, except that each QuantizeLinear node
    multiplies by a precomputed 1/scale: the single-node reciprocal multiply (division.py) inside the graph."""

    def node_oracle(self, sub):
        if sub.op != "QuantizeLinear":
            return super().node_oracle(sub)
        from qconform.diagnosis.models.base import deviating_oracle
        from qconform.diagnosis.models.division import ReciprocalMultiply

        return deviating_oracle(sub, ReciprocalMultiply)


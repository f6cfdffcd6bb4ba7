"""What fused integer kernels do to a QDQ pattern: the graph computed as one kernel, not node by node.

Each model overrides ``GraphOracle.fused`` (``qconform/oracle/graph.py``): given a pattern draft it
returns the pattern's outputs computed the kernel's way (one list per reading it can follow). The
float operator's definition stays the oracle's: the kernels differ in how they requantise (a float32
multiplier, a fixed-point one, rounding half up), in how they accumulate (int16 pair saturation) and
in what they keep of the graph (a Q/DQ pair dropped, a bias scale ignored). Every mechanism is cited
from the kernel's public source or, for closed kernels (Qualcomm's QNN HTP), from measurements kept
in research/qdq-graphs.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np

from qconform.declarations import operators
from qconform import dtypes
from qconform.case import Draft
from qconform.diagnosis.models.base import Deviation
from qconform.diagnosis.models.matmul import _fixed_point_multiply, _quantize_multiplier
from qconform.oracle import integer
from qconform.oracle.steps import Steps
from qconform.oracle.arith import as_float64, round_fraction

#: A dequantized operand: its codes, scale and zero point (as given), the DequantizeLinear attributes.
@dataclass(frozen=True)
class Operand:
    codes: np.ndarray
    type: str
    scale: np.ndarray
    zero: np.ndarray
    attrs: dict

    def exact(self) -> np.ndarray:
        """(q - zp) as exact integers (int64), broadcast like DequantizeLinear (per tensor or per axis)."""
        q = as_float64(self.codes, self.type).astype(np.int64)
        z = np.asarray(as_float64(self.zero, self.type)).astype(np.int64)
        axis = self.attrs.get("axis", 1)
        if z.ndim == 1 and q.ndim > 1:
            shape = [1] * q.ndim
            shape[axis] = -1
            z = z.reshape(shape)
        return q - z


@dataclass(frozen=True)
class Pattern:
    """``DQ(inputs) → op → Q(y)``: the central op, its dequantized operands (None where an input is not
    a DequantizeLinear output), the output's scale, zero point and type."""

    op: str
    attrs: dict
    operands: tuple[Operand | None, ...]
    others: tuple[np.ndarray | None, ...]
    y_scale: np.ndarray
    y_zero: np.ndarray
    y_type: str


def pattern(draft: Draft) -> Pattern | None:
    """The pattern's structure read from its graph (None: not ``DQ… → op → Q``)."""
    nodes = draft.graph
    if len(nodes) < 3 or nodes[-1].op != "QuantizeLinear":
        return None
    values = {a.name: a for a in draft.inputs if a is not None}
    q = nodes[-1]
    producers = {o: n for n in nodes for o in n.outputs}
    central = producers.get(q.inputs[0])
    if central is None or central.op in operators.QDQ:
        return None
    operands, others = [], []
    for name in central.inputs:
        dq = producers.get(name)
        if dq is not None and dq.op == "DequantizeLinear" and all(i in values for i in dq.inputs if i):
            x, s, z = (values[i] for i in dq.inputs)
            operands.append(Operand(x.value, x.type, s.value, z.value, dict(dq.attrs)))
            others.append(None)
        else:
            operands.append(None)
            others.append(values[name].value if name in values else None)
    if not all(i in values for i in q.inputs[1:3]):
        return None
    ys, yz = values[q.inputs[1]], values[q.inputs[2]]
    return Pattern(central.op, dict(central.attrs), tuple(operands), tuple(others), ys.value, yz.value, yz.type)


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


def _integer(p: Pattern) -> bool:
    return all(o is None or dtypes.get(o.type).is_integer for o in p.operands) and dtypes.get(p.y_type).is_integer


def _per_tensor(p: Pattern) -> bool:
    return all(o is None or np.size(o.scale) == 1 for o in p.operands) and np.size(p.y_scale) == 1


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
        v = integer.requantise(_SPEC_STEPS, "multiplier-float32", acc, 0, (sx, per_out[None, :], float(p.y_scale)), zy,
                               dtypes.get(p.y_type), "float32")[True]
        y = _saturate(v.astype(np.int64), p.y_type)
        if p.op == "Conv":
            y = np.moveaxis(y.reshape((x.codes.shape[0], *spatial, -1)), -1, 1)
        return [("spec", [_pack(y, p.y_type)])]

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
#: What may stand between a chain's DequantizeLinear and its QuantizeLinear (``_chain``).
CHAIN_MIDDLE = ("Identity", "Relu", "Clip")


def _chain(draft: Draft):
    """DQ(x; s1, z1) → [Identity | Relu | Clip(lo, hi)] → Q(s2, z2): (the middle op, "" where there is
    none; its other inputs, Clip's (lo, hi); (x, s1, z1, s2, z2)), or None (another graph, or an input
    left out: a zero point, a Clip bound)."""
    nodes = draft.graph
    ops = [n.op for n in nodes]
    if not (ops[:1] == ["DequantizeLinear"] and ops[-1:] == ["QuantizeLinear"]
            and (len(ops) == 2 or (len(ops) == 3 and ops[1] in CHAIN_MIDDLE))):
        return None
    values = {a.name: a for a in draft.inputs if a is not None}
    names = (*nodes[0].inputs, *nodes[-1].inputs[1:])
    extra = nodes[1].inputs[1:] if len(ops) == 3 else ()
    if len(nodes[0].inputs) != 3 or len(nodes[-1].inputs) != 3 or not all(i in values for i in (*names, *extra)):
        return None
    return (ops[1] if len(ops) == 3 else ""), tuple(values[i] for i in extra), tuple(values[i] for i in names)


def _chain_source(draft: Draft):
    """DQ(x; s1, z1) → [Identity] → Q(s2, z2): the inputs (x, s1, z1, s2, z2), or None (another
    graph, or a zero point left out)."""
    chain = _chain(draft)
    return chain[2] if chain is not None and chain[0] in ("", "Identity") else None


def _requant_source(draft: Draft):
    """DQ(x; s1, z1) → Q(s2, z2): as ``_chain_source``, without an Identity between."""
    return _chain_source(draft) if len(draft.graph) == 2 else None


def _half_up(codes: np.ndarray, ratio: Fraction, bias: Fraction) -> np.ndarray:
    """floor(c·ratio + 1/2 + bias) per code c, exactly."""
    return np.asarray([int(round_fraction(Fraction(int(c)) * ratio + bias, "half-up")) for c in codes.ravel()],
                      np.int64).reshape(codes.shape)


class RequantiseHalfUp:
    """DQ → Q as one requantisation rounding half up: y = floor((x − z1)·s1/s2 + 1/2 + bias) + z2,
    exact, then saturated (Hexagon NN's ``roundf_u32``: add 0.5 and truncate)."""

    _bias = Fraction(0)

    def fused(self, draft, inputs):
        x, s1, z1, s2, z2 = _requant_source(draft)
        xs = as_float64(x.value, x.type).astype(np.int64) - int(as_float64(z1.value, z1.type))
        ratio = Fraction(float(s1.value)) / Fraction(float(s2.value))
        y = _saturate(_half_up(xs, ratio, self._bias) + int(as_float64(z2.value, z2.type)), z2.type)
        return [("spec", [_pack(y, z2.type)])]


class RequantiseHalfUpBiased(RequantiseHalfUp):
    """The same, with QNN HTP's measured upward bias of 2^-7 code before the rounding."""

    _bias = Fraction(1, 128)


class RequantiseFixedPoint:
    """DQ → Q as integer-only requantisation (gemmlowp/TFLite): the ratio s1/s2 as a Q31 multiplier
    and a shift (QuantizeMultiplier, rounded half away), applied with SaturatingRoundingDoublingHighMul
    and RoundingDivideByPOT (two roundings, half away from zero)."""

    def fused(self, draft, inputs):
        x, s1, z1, s2, z2 = _requant_source(draft)
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
        x, s1, z1, s2, z2 = _chain_source(draft)
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
        _, _, (x, s1, z1, s2, z2) = _chain(draft)
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
        _, (low, high), (x, s1, z1, s2, z2) = _chain(draft)
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
def _fake_source(draft: Draft):
    nodes = draft.graph
    if [n.op for n in nodes] != list(operators.QDQ):
        return None
    values = {a.name: a for a in draft.inputs}
    x, s, z = (values[i] for i in nodes[0].inputs)
    return x, s, z


class QdqPairRemoved:
    """x → Q → DQ removed as an identity: y = x (the rounding and the saturation both gone)."""

    def fused(self, draft, inputs):
        x, _, _ = _fake_source(draft)
        return [("spec", [np.array(x.value, copy=True)])]


class QdqPairAsClamp:
    """x → Q → DQ kept only as a clamp: y = clip(x, fl32((qmin − zp)·s), fl32((qmax − zp)·s)), the
    rounding to the grid gone (QNN HTP, measured bit for bit on uint8, int8, uint16 and int16)."""

    def fused(self, draft, inputs):
        x, s, z = _fake_source(draft)
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
# Where each applies
# ----------------------------------------------------------------------------------------------
def _is(op: str, *, eight_bit: bool = False) -> Callable[[Draft], bool]:
    def check(d: Draft) -> bool:
        p = pattern(d) if d.graph else None
        if p is None or p.op != op or not _integer(p) or not _per_tensor(p):
            return False
        return not eight_bit or all(o is None or dtypes.get(o.type).bits == 8 for o in p.operands)
    return check


def _weights_kernel(u8s8: bool = False, bias_mismatch: bool = False) -> Callable[[Draft], bool]:
    def check(d: Draft) -> bool:
        p = pattern(d) if d.graph else None
        if p is None or p.op not in ("MatMul", "Gemm", "Conv") or not _integer(p):
            return False
        x, w = p.operands[0], p.operands[1]
        if x is None or w is None or "block_size" in w.attrs or dtypes.get(w.type).bits != 8 or np.size(x.scale) != 1:
            return False
        if u8s8 and not (x.type == "uint8" and w.type == "int8"):
            return False
        bias = p.operands[2] if len(p.operands) > 2 else None
        if bias is not None:
            want = np.float32(np.asarray(x.scale, np.float32) * np.asarray(w.scale, np.float32))
            matches = np.array_equal(np.broadcast_to(want, np.shape(bias.scale)), np.asarray(bias.scale, np.float32))
            if matches == bias_mismatch:
                return False
        elif bias_mismatch:
            return False
        return True
    return check


def _requant(d: Draft) -> bool:
    src = _requant_source(d) if d.graph else None
    return src is not None and dtypes.get(src[0].type).is_integer and dtypes.get(src[4].type).is_integer \
        and np.size(src[1].value) == 1 and np.size(src[3].value) == 1


def _eight_bit_chain(middle: tuple[str, ...]) -> Callable[[Draft], bool]:
    """DQ → [middle] → Q between 8-bit integer codes, per tensor, positive float32 scales: where
    OpenVINO's low-precision transformations take the FakeQuantize (256 levels) apart; 16-bit ranges
    go another way, MulFakeQuantizeFusion leaves a Multiply narrower than float32 alone, and folds
    only a positive one. A Clip has both bounds, float32 scalars."""
    def check(d: Draft) -> bool:
        chain = _chain(d) if d.graph else None
        if chain is None or chain[0] not in middle:
            return False
        (x, s1, _, s2, z2), bounds = chain[2], chain[1]
        return len(bounds) == (2 if chain[0] == "Clip" else 0) and all(dtypes.get(a.type).is_integer and dtypes.get(a.type).bits == 8 for a in (x, z2)) \
            and all(a.type == "float32" and np.size(a.value) == 1 for a in (s1, s2, *bounds)) \
            and float(s1.value) > 0 and float(s2.value) > 0
    return check


def _fake(d: Draft) -> bool:
    src = _fake_source(d) if d.graph else None
    return src is not None and dtypes.get(src[2].type).is_integer and np.size(src[1].value) == 1


def _from_float_input(d: Draft) -> bool:
    g = d.graph
    return len(g) == 4 and [n.op for n in g] == [*operators.QDQ, "Relu", operators.QDQ[0]]


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


def _quantize_node_to_integer(d: Draft) -> bool:
    """A pattern with a QuantizeLinear node to an integer type (where a reciprocal moves a code)."""
    values = {a.name: a for a in d.inputs if a is not None}
    return any(n.op == "QuantizeLinear" and len(n.inputs) > 2 and n.inputs[2] in values
               and dtypes.get(values[n.inputs[2]].type).is_integer for n in d.graph)


#: Every pattern of the corpus's generator (qconform/generators/patterns.py) but MatMul, Gemm and
#: Conv, which are left to the fused models: on the one Gemm case tract fails, this model and
#: ``fused-integer-requantisation`` give the same bits, and no case of the corpus separates them yet.
NOT_INTEGER_KERNEL_PATTERNS = frozenset({"Add", "AveragePool", "Clip", "Concat", "FakeQuant", "Gather", "GlobalAveragePool",
                                         "Identity", "MaxPool", "Mul", "Relu", "Requant", "Reshape", "Resize", "Sigmoid",
                                         "Sub", "Transpose"})

ORT_MLAS = "onnxruntime's MLAS kernels the QDQ fusion selects (onnxruntime/core/mlas/lib)"

DEVIATIONS = [
    Deviation("fused-qlinear-mul-float-multiplier", frozenset({"Mul"}),
              "Your runtime computes DequantizeLinear, DequantizeLinear → Mul → QuantizeLinear as one integer kernel "
              "with a single float32 multiplier fl32(fl32(sa·sb)/sy) applied to the exact code product, where the "
              "graph rounds each dequantized value, their product and the division: results next to a rounding "
              "tie differ by one code.",
              f"onnxruntime ORT_ENABLE_ALL fuses the pattern into QLinearMul; {ORT_MLAS}/qlmul.cpp, SSE2 path: "
              "_mm_mul_ps then _mm_add_ps of the zero point, _mm_cvtps_epi32 (research/qdq-graphs.md §4 M1: 0 "
              "mismatches in 20,480 elements)",
              "uint8, sa = sb = 0.0510, sy = fl32(sa·sb)·2: codes whose exact product lands next to a tie",
              QLinearMulFloatMultiplier, _is("Mul", eight_bit=True), ("ties",)),
    Deviation("fused-qlinear-add-fma", frozenset({"Add"}),
              "Your runtime computes DequantizeLinear, DequantizeLinear → Add → QuantizeLinear as one kernel: the "
              "ratios sa/sy and sb/sy and a folded zero-point constant in float32, two fused multiply-adds on the "
              "codes, then round half to even; results next to a rounding tie differ by one code.",
              f"onnxruntime ORT_ENABLE_ALL fuses the pattern into QLinearAdd; {ORT_MLAS}/intrinsics/avx2/"
              "qladd_avx2.cpp (_mm256_fmadd_ps) (research/qdq-graphs.md §4 M2: 0 mismatches in 20,480 elements)",
              "uint8, sb = sa, sy = 2·sa: every sum of codes of odd parity is a tie",
              QLinearAddFma, _is("Add", eight_bit=True), ("ties", "zero-points")),
    Deviation("fused-integer-requantisation", frozenset({"MatMul", "Gemm", "Conv"}),
              "Your runtime computes DequantizeLinear(x), DequantizeLinear(w) → MatMul/Gemm/Conv → QuantizeLinear as "
              "one integer kernel: the exact integer accumulator times a float32 multiplier fl32(fl32(sx·sw)/sy), "
              "rounded half to even, where the graph divides the float result by sy: results next to a tie differ.",
              f"onnxruntime's QDQ fusion into QLinearMatMul/QGemm/QLinearConv; {ORT_MLAS}/quantize.cpp "
              "MlasRequantizeOutput; OpenVINO's low-precision transformations run the same integer form",
              "x uint8, w uint8 (no pair saturation), sy chosen so that acc·sx·sw/sy lands near k + 1/2",
              FusedAccumulator, _weights_kernel(), ("basic", "ties")),
    Deviation("fused-u8s8-pair-saturation", frozenset({"MatMul", "Gemm", "Conv"}),
              "Your runtime computes the DequantizeLinear → MatMul/Gemm/Conv → QuantizeLinear pattern with uint8 "
              "activations and int8 weights in an x86 integer kernel that adds adjacent products in pairs with "
              "int16 saturation (VPMADDUBSW, no VNNI): where two products together exceed 32,767 the accumulator "
              "is wrong, by up to tens of codes.",
              "onnxruntime ORT_ENABLE_ALL (QLinearMatMul/QGemm/QLinearConv, MLAS QGEMM on AVX2) and OpenVINO's LPT "
              "FullyConnected on the same CPU (research/qdq-graphs.md §4 M3); qconform's "
              "qlinearmatmul-u8s8-pair-saturation is the same mechanism in the single node",
              "x uint8 near 255, w int8 near ±127, K even: 255·127·2 = 64,770 > 32,767",
              FusedU8S8PairSaturation, _weights_kernel(u8s8=True), ("basic", "granularity")),
    Deviation("fused-bias-codes-without-scale", frozenset({"Gemm", "Conv"}),
              "Your runtime fuses DequantizeLinear(bias) into the integer kernel by adding the int32 bias codes to "
              "the accumulator as if the bias scale were sx·sw: a graph whose bias has another scale gets another "
              "bias (u8×s8 products pair-saturated too, as the same x86 kernel does).",
              "onnxruntime ORT_ENABLE_ALL's QDQ→QGemm action (onnxruntime/core/optimizer/qdq_transformer/"
              "selectors_actions/qdq_actions.cc) moves the bias initializer in without checking its scale "
              "(research/qdq-graphs.md §3.1: 62 of 64 elements wrong)",
              "Gemm with a bias DequantizeLinear whose scale is 0.75·sx·sw",
              FusedBiasCodes, _weights_kernel(bias_mismatch=True), ("basic",)),
    Deviation("quantize-nodes-reciprocal-multiply", NOT_INTEGER_KERNEL_PATTERNS,
              "Your runtime computes the pattern node by node, as the graph says, but each QuantizeLinear node "
              "multiplies by a precomputed 1/scale instead of dividing (its single-node reciprocal-multiply): "
              "codes next to a rounding tie differ by one.",
              "tract 0.23.9 here: every QDQ pattern case it fails but one (35 cases of Add, Clip, Identity, Mul, "
              "Relu, Requant, Sub; its one Gemm case gives the same bits, left to fused-integer-requantisation) is "
              "this model's output bit for bit, and no case it passes is changed; its "
              "single QuantizeLinear does the same (fact E51); the single-node model's reports: apache/tvm#17998, "
              "pytorch/pytorch#87093",
              "Requant int8, s2 = 2·s1: codes whose quotient by s2 is an exact tie, where fl32(1/s2) is inexact",
              QuantizeNodesReciprocal, _quantize_node_to_integer, ("ties", "zero-points")),
    Deviation("requantise-half-up", frozenset({"Requant"}),
              "Your runtime computes DequantizeLinear → QuantizeLinear as one requantisation that rounds half up "
              "(floor(v + 1/2)) instead of half to even: exact ties of (x − z1)·s1/s2 go up.",
              "Qualcomm QNN HTP's Convert (onnxruntime-qnn 2.7.0, measured: research/qdq-graphs.md §4 M10, which "
              "also measures a small upward bias this model leaves out); Hexagon NN's roundf_u32 adds 0.5 and "
              "truncates (XiaoMi/nnlib hexagon/include/quantize.h)",
              "uint8, s2 = s1·2: odd codes are exact ties",
              RequantiseHalfUp, _requant, ("ties",)),
    Deviation("requantise-half-up-biased", frozenset({"Requant"}),
              "Your runtime computes DequantizeLinear → QuantizeLinear as one requantisation that rounds half up "
              "after adding a small upward bias (about 2^-7 of a code): values just below a tie go up too.",
              "Qualcomm QNN HTP's Convert (onnxruntime-qnn 2.7.0): the reported uint8 0.0372/121 → 0.0291/3 "
              "requantisation gives 116 for x = 209 (exactly 115.4948…); measured over 151 parameter sets, "
              "research/qdq-graphs.md §4 M10 (an empirical fit of a closed kernel: 19 of 38,656 codes stay "
              "unexplained)",
              "uint8 0.0372/121 → 0.0291/3, x = 209",
              RequantiseHalfUpBiased, _requant, ("basic", "ties")),
    Deviation("requantise-through-fakequantize-bounds", frozenset({"Requant", "Identity"}),
              "Your runtime turns DequantizeLinear → QuantizeLinear into one FakeQuantize computed in float32: the "
              "output range s2·(qmin − z2) … s2·(qmax − z2) divided by s1 becomes the input range, the multiplier is "
              "rebuilt from that range as (qmax − qmin)/(high − low), and the zero point enters before the rounding "
              "(round(v + z2), where the graph rounds v, then adds z2): codes next to a rounding tie differ by one.",
              "OpenVINO 2026.4.1 CPU here: each of the 13 failing 8-bit Requant and Identity cases of the corpus is "
              "this model's output bit for bit, and no 8-bit case it passes is changed. Source (openvinotoolkit/"
              "openvino): the ONNX frontend's quantize_linear.cpp (input_low = y_scale·(output_low − zero_point), "
              "folded in f32, into FakeQuantize), MulFakeQuantizeFusion (the Multiply of DequantizeLinear folded as a "
              "Divide of the range), snippets fq_decomposition.cpp (isc = (levels − 1)/(ih − il), ish = il·isc, "
              "Round HALF_TO_EVEN); the OpenVINO EP's reported off-by-one, microsoft/onnxruntime#25045",
              "uint8, s2 = 2·s1, z2 odd: (x − z1)/2 ties where round(v) + z2 and round(v + z2) differ",
              RequantiseFakeQuantizeBounds, _eight_bit_chain(("", "Identity")), ("ties", "zero-points")),
    Deviation("relu-through-fakequantize-bounds", frozenset({"Relu"}),
              "Your runtime turns DequantizeLinear → Relu → QuantizeLinear into a FakeQuantize computed in float32 "
              "(the range rebuilt multiplier of requantise-through-fakequantize-bounds, the zero point added before "
              "the rounding): where z2 = qmin or z1 = 0 the Relu acts on the codes and s1 is folded into the range; "
              "otherwise the Relu stays in float after fl32((x − z1)·s1) and the range is s2's alone. Codes next to "
              "a rounding tie differ by one.",
              "OpenVINO 2026.4.1 CPU here: each of the 6 failing 8-bit Relu cases of the corpus is this model's "
              "output bit for bit, and none of the 4 DequantizeLinear-first ones it passes is changed (240 random "
              "probes of both patterns, all bit for bit: research/openvino-fakequantize.md §5). Source (openvinotoolkit/"
              "openvino): relu_fake_quantize_fusion.cpp (the Relu dropped where every input_low ≥ 0), the "
              "low-precision relu.cpp (no move through a dequantisation with a Subtract), network_helper.cpp (a zero "
              "Subtract removed), MulFakeQuantizeFusion and snippets fq_decomposition.cpp",
              "uint8, s2 = 2·s1, z1 and z2 both away from 0: the Relu kept in float, ties rounded from fl32 products",
              ReluFakeQuantizeBounds, _eight_bit_chain(("Relu",)), ("ties", "zero-points")),
    Deviation("clip-through-fakequantize-bounds", frozenset({"Clip"}),
              "Your runtime turns DequantizeLinear → Clip → QuantizeLinear into a clamp of the codes and a FakeQuantize "
              "computed in float32 (as requantise-through-fakequantize-bounds): a Clip that covers the output range "
              "is dropped; otherwise its bounds move to the codes as lo/s1 + z1 and hi/s1 + z1, computed in double "
              "and truncated toward zero. Codes next to a rounding tie, or at a bound just under an integer, differ by one.",
              "OpenVINO 2026.4.1 CPU here: each of the 6 failing 8-bit Clip cases of the corpus is this model's "
              "output bit for bit, and none of the 4 it passes is changed (research/openvino-fakequantize.md §5: "
              "120 random probes bit for bit, 90 of them with the bound rounded to float32 first). Source "
              "(openvinotoolkit/openvino): fuse_clamp_and_fake_quantize.cpp (the Clamp dropped where it covers the "
              "range), the low-precision clamp.cpp (min /= scale; min += shift, in double), MulFakeQuantizeFusion, "
              "snippets fq_decomposition.cpp; the truncation itself was measured, its code not found",
              "uint8, hi/s1 + z1 = 249.99999833: the codes clamp to 249, the graph's float bound lets 250 through",
              ClipFakeQuantizeBounds, _eight_bit_chain(("Clip",)), ("ties", "zero-points")),
    Deviation("requantise-fixed-point", frozenset({"Requant"}),
              "Your runtime requantises in integers only: s1/s2 as a Q31 multiplier with a shift, applied with "
              "SaturatingRoundingDoublingHighMul and RoundingDivideByPOT (two roundings, half away from zero), "
              "where the graph divides exactly once.",
              "gemmlowp fixedpoint/fixedpoint.h; TFLite quantization_util.cc QuantizeMultiplier and "
              "MultiplyByQuantizedMultiplier (common.h), the integer-only pipeline many NPU toolchains follow",
              "uint8, s1/s2 = 0.7: products whose Q31 rounding crosses a tie",
              RequantiseFixedPoint, _requant, ("basic", "ties")),
    Deviation("qdq-pair-removed", frozenset({"FakeQuant"}),
              "Your runtime removes QuantizeLinear → DequantizeLinear as an identity: y = x, where the graph "
              "rounds x to the quantization grid and saturates it to the type's range.",
              "the QNN EP's behaviour as first reported (issue report: 4,085 of 4,096 elements equal to x); any "
              "graph optimiser that folds a Q/DQ pair without a quantized op between",
              "x = 0.3·s: the graph gives 0, a removed pair x",
              QdqPairRemoved, _fake, ("basic", "ties")),
    Deviation("qdq-pair-as-clamp", frozenset({"FakeQuant"}),
              "Your runtime keeps QuantizeLinear → DequantizeLinear only as a clamp to [(qmin − zp)·s, (qmax − zp)·s]: "
              "the rounding to the grid is gone, the saturation kept.",
              "Qualcomm QNN HTP (onnxruntime-qnn 2.7.0, measured bit for bit for uint8, int8, uint16, int16: "
              "research/qdq-graphs.md §4 M9)",
              "x outside the type's range and x between grid points",
              QdqPairAsClamp, _fake, ("basic", "zero-points")),
    Deviation("input-quantise-float16-half-up", frozenset({"Relu"}),
              "Your runtime quantises a float graph input as an NPU's input stage does: x/s rounded to float16, "
              "then half up, and requantises the rest of the pattern half up.",
              "Qualcomm QNN HTP (onnxruntime-qnn 2.7.0, research/qdq-graphs.md §4 M8: 0 mismatches in 49,152 "
              "elements over 12 parameter sets)",
              "x/s = k + 1/2 + ε below float16's resolution",
              InputQuantiseHalfUpFloat16, _from_float_input, ("basic",)),
]

__all__ = ["DEVIATIONS", "Pattern", "pattern"]

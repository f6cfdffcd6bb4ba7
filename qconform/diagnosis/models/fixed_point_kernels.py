"""What the integer-kernel vocabulary's kernels compute (the mixins of ``fixed_point``'s models, and
where each applies): fixed-point requantisation of an accumulator on the shared integer body
(``qconform.oracle.integer``, through ``fused_kernels.FusedAccumulator``), an Add's operands rescaled
first, averages by a reciprocal, a pattern requantised once in exact arithmetic with each rounding,
and data movement on the codes. Declared, with their sources, in ``fixed_point``.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Callable

import numpy as np

from qconform import dtypes
from qconform.case import Draft
from qconform.declarations import operators
from qconform.diagnosis.models.fused_kernels import FusedAccumulator, _pack, _saturate
from qconform.diagnosis.models.fused_pattern import ACCUMULATING, float_ops_that, pattern
from qconform.diagnosis.models.matmul import _fixed_point_multiply, _quantize_multiplier
from qconform.oracle import integer
from qconform.oracle.arith import as_float64, round_fraction
from qconform.oracle.granularity import InvalidModel
from qconform.oracle.graph import float_ops

Q, DQ = operators.QDQ


# ----------------------------------------------------------------------------------------------
# The fixed-point primitives (gemmlowp fixedpoint.h, TFLite common.h, XNNPACK requantization)
# ----------------------------------------------------------------------------------------------
def single_rounding(x: int, q: int, shift: int) -> int:
    """TFLite MultiplyByQuantizedMultiplier with TFLITE_SINGLE_ROUNDING (TOSA apply_scale_32 with
    double_round false, XNNPACK rndnu): (x·q + 2^(n−1)) >> n, n = 31 − shift: one rounding, half up."""
    n = 31 - shift
    return (x * q + (1 << (n - 1))) >> n if n > 0 else x * q << -n


def _apply(acc: np.ndarray, m: np.ndarray, how: Callable[[int, float], int]) -> np.ndarray:
    ms = np.broadcast_to(m, acc.shape)
    return np.asarray([how(int(a), float(mm)) for a, mm in zip(acc.ravel(), ms.ravel())], np.int64).reshape(acc.shape)


# ----------------------------------------------------------------------------------------------
# MatMul, Gemm, Conv: the accumulator requantised in fixed point
# ----------------------------------------------------------------------------------------------
class _FixedPointAccumulator(FusedAccumulator):
    """The integer kernel's accumulator, requantised by ``_rescale(acc, m)`` with the real multiplier
    m = s_x·s_w/s_y (per output channel), the zero point added after."""

    def _rescale(self, acc: int, m: float) -> int:
        raise NotImplementedError

    def fused(self, draft, inputs):
        return super().fused(draft, inputs) if _accumulating(draft) else None  # elsewhere: the graph

    def _requantise_accumulator(self, acc, sx, sw, sy, zy, y_type):
        m = np.asarray(sx, np.float64) * np.asarray(sw, np.float64) / np.float64(sy)
        return _apply(np.asarray(acc, np.int64), m, self._rescale) + int(zy)


class RequantiseQ31DoubleRounding(_FixedPointAccumulator):
    """TFLite: QuantizeMultiplier(m) then SaturatingRoundingDoublingHighMul and RoundingDivideByPOT."""

    def _rescale(self, acc, m):
        return _fixed_point_multiply(acc, *_quantize_multiplier(m))


class RequantiseQ31SingleRounding(_FixedPointAccumulator):
    """TFLITE_SINGLE_ROUNDING / TOSA RESCALE single round: one rounding, half up."""

    def _rescale(self, acc, m):
        return single_rounding(acc, *_quantize_multiplier(m))


# ----------------------------------------------------------------------------------------------
# Add and Sub: each operand rescaled first (TFLite's quantized Add)
# ----------------------------------------------------------------------------------------------
def _shifted_codes(o) -> np.ndarray:
    return as_float64(o.codes, o.type).astype(np.int64) - int(np.asarray(as_float64(o.zero, o.type)).reshape(-1)[0])


class AddOperandsRescaledFirst:
    """TFLite reference_ops Add (8-bit: left_shift 20; 16-bit: 15): twice_max = 2·max(s_a, s_b); each
    operand (q − z)·2^left rescaled by s/twice_max (Q31, double rounding), the two summed (or
    subtracted), the sum rescaled by twice_max/(2^left·s_y), the zero point added, saturated."""

    def fused(self, draft, inputs):
        if not _binary(draft):
            return None  # the graph, node by node
        p = pattern(draft)
        a, b = p.operands
        sa, sb, sy = (float(np.asarray(v).reshape(-1)[0]) for v in (a.scale, b.scale, p.y_scale))
        left = 20 if dtypes.get(a.type).bits <= 8 else 15
        twice = 2 * max(sa, sb)
        qa, qb, qo = (_quantize_multiplier(r) for r in (sa / twice, sb / twice, twice / ((1 << left) * sy)))
        xa = [_fixed_point_multiply(int(v) << left, *qa) for v in _shifted_codes(a).ravel()]
        xb = [_fixed_point_multiply(int(v) << left, *qb) for v in _shifted_codes(b).ravel()]
        sign = -1 if p.op == "Sub" else 1
        raw = [_fixed_point_multiply(x + sign * y, *qo) for x, y in zip(xa, xb)]
        zy = int(as_float64(p.y_zero, p.y_type))
        y = _saturate(np.asarray(raw, np.int64).reshape(a.codes.shape) + zy, p.y_type)
        return [("spec", [_pack(y, p.y_type)])]


# ----------------------------------------------------------------------------------------------
# Averages: a multiply by the reciprocal of the count
# ----------------------------------------------------------------------------------------------
def _window_sums(p) -> tuple[np.ndarray, int]:
    """Σ (x − z_x) over each pooling window (int64, shape N, C, O..), and the count N per window."""
    x = p.operands[0]
    xd = _shifted_codes(x)
    if p.op == "GlobalAveragePool":
        axes = tuple(range(2, xd.ndim))
        return xd.sum(axis=axes, keepdims=True), int(np.prod(xd.shape[2:]))
    kernel = list(p.attrs["kernel_shape"])
    attrs = {k: v for k, v in p.attrs.items() if k in ("kernel_shape", "strides", "pads", "auto_pad", "dilations")}
    cols, _ = integer.conv_windows(xd, (xd.shape[1], xd.shape[1], *kernel), attrs)  # (N, O.., K.., C)
    n = xd.ndim - 2
    sums = cols.sum(axis=tuple(range(1 + n, 1 + 2 * n)))  # (N, O.., C)
    return np.moveaxis(sums, -1, 1), int(np.prod(kernel))


class AverageFloatReciprocal:
    """MLAS x86 QLinearGlobalAveragePool: the sum of (x − z_x) times fl32(fl32(s_x/N)/s_y), rounded
    half to even, the zero point added, saturated."""

    def fused(self, draft, inputs):
        if not _average(draft):
            return None
        p = pattern(draft)
        sums, count = _window_sums(p)
        f = np.float32
        scale = f(f(f(np.asarray(p.operands[0].scale).reshape(-1)[0]) / f(count)) / f(np.asarray(p.y_scale).reshape(-1)[0]))
        v = np.rint((sums.astype(np.float32) * scale).astype(np.float64)).astype(np.int64)
        y = _saturate(v + int(as_float64(p.y_zero, p.y_type)), p.y_type)
        return [("spec", [_pack(y, p.y_type)])]


class AverageFixedPointReciprocal:
    """MLAS NEON QLinearGlobalAveragePool: scale = fl32(s_x/(s_y·fl32(N))) as its 24-bit mantissa M
    and a shift; (Σ(x − z_x)·M + 2^(shift−1)) >> shift (one rounding, half up), the zero point added."""

    def fused(self, draft, inputs):
        if not _average(draft):
            return None
        p = pattern(draft)
        sums, count = _window_sums(p)
        f = np.float32
        scale = f(f(np.asarray(p.operands[0].scale).reshape(-1)[0]) / f(f(np.asarray(p.y_scale).reshape(-1)[0]) * f(count)))
        bits = int(scale.view(np.uint32))
        mult, shift = (bits & 0x7FFFFF) | 0x800000, 127 + 23 - (bits >> 23)
        v = np.asarray([(int(s) * mult + (1 << (shift - 1))) >> shift for s in sums.ravel()], np.int64).reshape(sums.shape)
        y = _saturate(v + int(as_float64(p.y_zero, p.y_type)), p.y_type)
        return [("spec", [_pack(y, p.y_type)])]


# ----------------------------------------------------------------------------------------------
# The whole pattern as one exact requantisation, rounded half up (QNN HTP)
# ----------------------------------------------------------------------------------------------
def _exact(o) -> np.ndarray:
    """A dequantized operand as exact rationals: (q − z)·s, per tensor or per axis."""
    d = o.exact()
    s = np.vectorize(Fraction, otypes=[object])(np.asarray(o.scale, np.float64))
    if s.size > 1:
        shape = [1] * d.ndim
        shape[o.attrs.get("axis", 1)] = -1
        s = s.reshape(shape)
    else:
        s = s.reshape(())
    return np.vectorize(lambda c: Fraction(int(c)), otypes=[object])(d) * s


#: The float op on exact rationals, for the ops whose value is exact in rationals (the text's real
#: arithmetic, ``FloatOp.exact``): (operands as Fraction arrays, other inputs, attributes) -> the value.
EXACT_OPS: dict[str, Callable] = {o.op: o.exact for o in float_ops() if o.exact is not None}


def _codes_through_op(p) -> np.ndarray:
    """The order-preserving op on the codes' differences (the graph oracle's float op), times the
    exact scale: the op on the exact dequantized values."""
    from qconform.case import Node
    from qconform.oracle.graph import ORACLE

    o = p.operands[0]
    ins = [o.exact().astype(np.float32)] + [None if v is None else np.asarray(v) for v in p.others[1:]]
    node = Node(p.op, tuple(f"in{i}" for i in range(len(ins))), ("out",), dict(p.attrs))
    moved = ORACLE.float_node(node, ins, "exact")[0][1][0]
    s = Fraction(float(np.asarray(o.scale, np.float64).reshape(-1)[0]))
    return np.vectorize(lambda c: Fraction(int(c)) * s, otypes=[object])(np.asarray(moved, np.float64))


class MovedCodesUnrequantised:
    """An order-preserving op on the codes themselves, the output's scale and zero point ignored:
    y = op(x), where the graph requantises (x − z_x)·s_x/s_y + z_y."""

    def fused(self, draft, inputs):
        if not _moved_unrequantised(draft):
            return None
        from qconform.case import Node
        from qconform.oracle.graph import ORACLE

        p = pattern(draft)
        x = p.operands[0]
        ins = [as_float64(x.codes, x.type).astype(np.float32)] + [None if v is None else np.asarray(v)
                                                                   for v in p.others[1:]]
        node = Node(p.op, tuple(f"in{i}" for i in range(len(ins))), ("out",), dict(p.attrs))
        moved = ORACLE.float_node(node, ins, "moved")[0][1][0]
        return [("spec", [_pack(np.asarray(moved, np.int64), p.y_type)])]


def _average_exact(p) -> np.ndarray:
    """AveragePool's exact mean: each window's sum of the codes' differences over the count the text
    states (the input elements, or with ``count_include_pad`` the stated padding too: the graph
    oracle's windows, ``pool_windows``), times s."""
    from qconform.oracle.graph_ops import pool_windows

    o = p.operands[0]
    windows, real, in_pads = pool_windows(o.exact().astype(np.float64), p.attrs, 0.0)
    include = bool(p.attrs.get("count_include_pad", 0))
    if include and not in_pads.all():
        raise InvalidModel("count_include_pad with ceil_mode's added positions: the count is open")
    counts = (in_pads if include else real).sum(axis=-1)
    sums = windows.sum(axis=-1)  # integers below 2^53: exact
    s = Fraction(float(np.asarray(o.scale, np.float64).reshape(-1)[0]))
    return np.vectorize(lambda t, n: Fraction(int(t), int(n)) * s, otypes=[object])(sums, counts)


def exact_value(p) -> np.ndarray:
    """The pattern's op on its exact dequantized operands (Fractions), for a pattern
    ``_exact_pattern`` accepts."""
    if _through_codes(p):
        return _codes_through_op(p)
    if p.op == "AveragePool":
        return _average_exact(p)
    vals = [None if o is None else _exact(o) for o in p.operands]
    return EXACT_OPS[p.op]([x for x in vals if x is not None], p.others, p.attrs)


class PatternExact:
    """The pattern as one requantisation in exact arithmetic: each operand (q − z)·s exactly, the float
    op on the exact values, divided by s_y exactly, rounded by ``round``, the zero point added."""

    def round(self, v: Fraction) -> int:
        raise NotImplementedError

    def fused(self, draft, inputs):
        if _split_parts(draft) is not None:
            return self._split(draft)
        if not _exact_pattern(draft):
            return None
        p = pattern(draft)
        v = exact_value(p)
        sy = Fraction(float(np.asarray(p.y_scale, np.float64).reshape(-1)[0]))
        q = np.vectorize(lambda x: self.round(x / sy), otypes=[object])(np.asarray(v, object))
        y = _saturate(np.asarray(q, np.int64) + int(as_float64(p.y_zero, p.y_type)), p.y_type)
        return [("spec", [_pack(y, p.y_type)])]


    def _split(self, draft):
        """DQ(x) → Split → Q per output: each part requantised exactly with its own output parameters."""
        x, parts = _split_parts(draft)
        sx = Fraction(float(np.asarray(x.scale, np.float64).reshape(-1)[0]))
        outs = []
        for codes, y_scale, y_zero, y_type in parts:
            sy = Fraction(float(np.asarray(y_scale, np.float64).reshape(-1)[0]))
            q = np.vectorize(lambda c: self.round(Fraction(int(c)) * sx / sy), otypes=[object])(codes)
            outs.append(_pack(_saturate(np.asarray(q, np.int64) + int(as_float64(y_zero, y_type)), y_type), y_type))
        return [("spec", outs)]


def _split_parts(draft):
    """DequantizeLinear(x) → Split → a QuantizeLinear to an integer type on every part, per tensor, each
    part a graph output: (x's operand, [(the part's codes' differences, s_y, z_y, y type)] in the order
    of the graph's outputs), or None (another graph)."""
    from qconform.oracle.graph import ORACLE, graph_outputs
    from qconform.diagnosis.models.fused_pattern import Operand

    nodes = draft.graph
    if not draft.graph or len(nodes) < 3 or nodes[0].op != DQ or nodes[1].op != "Split" \
            or any(n.op != Q for n in nodes[2:]) or nodes[1].inputs[0] != nodes[0].outputs[0]:
        return None
    values = {a.name: a for a in draft.inputs if a is not None}
    if not all(i in values for i in nodes[0].inputs) or any(len(n.inputs) < 3 or n.inputs[2] not in values
                                                            for n in nodes[2:]):
        return None
    x, s, z = (values[i] for i in nodes[0].inputs)
    if not dtypes.get(x.type).is_integer or np.size(s.value) != 1:
        return None
    operand = Operand(x.value, x.type, s.value, z.value, dict(nodes[0].attrs))
    ins = [operand.exact().astype(np.float32)] + [values[i].value if i in values else None for i in nodes[1].inputs[1:]]
    moved = dict(zip(nodes[1].outputs, ORACLE.float_node(nodes[1], ins, "split")[0][1]))
    by_out = {}
    for q in nodes[2:]:
        ys, yz = values[q.inputs[1]], values[q.inputs[2]]
        if q.inputs[0] not in moved or not dtypes.get(yz.type).is_integer or np.size(ys.value) != 1:
            return None
        by_out[q.outputs[0]] = (np.asarray(moved[q.inputs[0]], np.float64), ys.value, yz.value, yz.type)
    outs = graph_outputs(nodes)
    if set(outs) != set(by_out):
        return None
    return operand, [by_out[o] for o in outs]


class PatternExactHalfUp(PatternExact):
    """Rounded half up (toward +∞): floor(v + 1/2 + bias)."""

    _bias = Fraction(0)

    def round(self, v: Fraction) -> int:
        return (v + Fraction(1, 2) + self._bias).__floor__()


class PatternExactHalfUpBiased(PatternExactHalfUp):
    """The same, with QNN HTP's measured upward bias of 2^-7 code before the rounding."""

    _bias = Fraction(1, 128)


class PatternExactHalfAway(PatternExact):
    """Rounded half away from zero."""

    def round(self, v: Fraction) -> int:
        return int(round_fraction(v, "half-away"))


class PatternExactHalfEven(PatternExact):
    """Rounded half to even, as the text rounds, but from the exact value, not the graph's float32 one."""

    def round(self, v: Fraction) -> int:
        return int(round_fraction(v, "half-even"))


# ----------------------------------------------------------------------------------------------
# Where each applies
# ----------------------------------------------------------------------------------------------
def _integer_pattern(d: Draft, ops: frozenset[str], per_tensor: bool = True) -> bool:
    p = pattern(d) if d.graph else None
    if p is None or p.op not in ops or not dtypes.get(p.y_type).is_integer:
        return False
    operands = [o for o in p.operands if o is not None]
    return bool(operands) and all(dtypes.get(o.type).is_integer for o in operands) and \
        (not per_tensor or all(np.size(o.scale) == 1 for o in operands) and np.size(p.y_scale) == 1)


def _accumulating(d: Draft) -> bool:
    """DQ(x), DQ(w) [, DQ(bias)] → MatMul/Gemm/Conv → Q with 8-bit weights, per tensor or per channel."""
    p = pattern(d) if d.graph else None
    if p is None or p.op not in ACCUMULATING or not dtypes.get(p.y_type).is_integer or len(p.operands) < 2:
        return False
    x, w = p.operands[0], p.operands[1]
    return x is not None and w is not None and "block_size" not in w.attrs and dtypes.get(w.type).bits == 8 \
        and dtypes.get(x.type).is_integer and np.size(x.scale) == 1 and FusedAccumulator._handles(p)


def _binary(d: Draft) -> bool:
    return _integer_pattern(d, ADD_SUB) and all(o is not None for o in pattern(d).operands)


def _average(d: Draft) -> bool:
    if not _integer_pattern(d, AVERAGES):
        return False
    a = pattern(d).attrs
    return not a.get("ceil_mode", 0) and not a.get("count_include_pad", 0) and not any(a.get("pads", ())) \
        and a.get("auto_pad", "NOTSET") in ("NOTSET", b"NOTSET") and all(x == 1 for x in a.get("dilations", [1]))


def _exact_or_split(d: Draft) -> bool:
    """Where the exact-requantisation models apply: ``_exact_pattern``, or a Split's parts."""
    return _exact_pattern(d) or _split_parts(d) is not None


def _exact_pattern(d: Draft) -> bool:
    """An integer pattern whose exact value is computed here: an op of ``EXACT_OPS`` (weights per
    tensor or per axis, not blocked; pools without padding), or an order-preserving op on one
    dequantized operand per tensor (``ORDER_PRESERVING``)."""
    p = pattern(d) if d.graph else None
    if p is None or not dtypes.get(p.y_type).is_integer:
        return False
    if _through_codes(p):
        return True
    if not _integer_pattern(d, frozenset(EXACT_OPS), per_tensor=False):
        return False
    if any(o is not None and "block_size" in o.attrs for o in p.operands):
        return False
    data = p.operands[:1] if p.op in ONE_DATA_INPUT else p.operands
    if any(o is None for o in data) or (p.op in ONE_DATA_INPUT and any(o is not None for o in p.operands[1:])):
        return False
    if p.op == "AveragePool":  # any geometry, one operand per tensor (``_average_exact``)
        return np.size(p.operands[0].scale) == 1
    if p.op not in AVERAGES and p.op != "MaxPool":
        return True
    a = p.attrs
    return not a.get("ceil_mode", 0) and not any(a.get("pads", ())) and a.get("auto_pad", "NOTSET") in ("NOTSET", b"NOTSET") \
        and all(x == 1 for x in a.get("dilations", [1]))


def _through_codes(p) -> bool:
    """An order-preserving op on one dequantized integer operand, per tensor (a Pad's constant 0 or
    none, a Resize's nearest mode)."""
    o = p.operands[0] if p.operands else None
    if p.op not in ORDER_PRESERVING or o is None or any(x is not None for x in p.operands[1:]):
        return False
    if not dtypes.get(o.type).is_integer or np.size(o.scale) != 1 or float(np.asarray(o.scale).reshape(-1)[0]) <= 0:
        return False
    if p.op == "Resize" and str(p.attrs.get("mode", "nearest")).replace("b'", "").strip("'") != "nearest":
        # a weighted average: the graph oracle's value is exact (dyadic weights, sums exact in float32:
        # #qdq-sum-order) and stays exact on the codes where s_x is a power of two
        return float(np.frexp(float(np.asarray(o.scale).reshape(-1)[0]))[0]) == 0.5
    if p.op == "Pad":
        c = p.others[2] if len(p.others) > 2 else None
        return str(p.attrs.get("mode", "constant")).strip("b'") != "constant" or c is None or not np.any(np.asarray(c))
    return True


def _moved_unrequantised(d: Draft) -> bool:
    """An order-preserving op on one operand (``_through_codes``) whose output has the input's type
    and other quantisation parameters (where there is a requantisation to drop)."""
    p = pattern(d) if d.graph else None
    if p is None or not dtypes.get(p.y_type).is_integer or not _through_codes(p) or p.operands[0].type != p.y_type:
        return False
    if p.op == "Resize" and str(p.attrs.get("mode", "nearest")).replace("b'", "").strip("'") != "nearest":
        return False  # a weighted average computes: not a move
    x = p.operands[0]
    return not (np.array_equal(np.asarray(x.scale, np.float64).reshape(-1), np.asarray(p.y_scale, np.float64).reshape(-1))
                and np.array_equal(np.asarray(as_float64(x.zero, x.type)).reshape(-1),
                                   np.asarray(as_float64(p.y_zero, p.y_type)).reshape(-1)))


#: The ops with one dequantized input, the others given as they are (a shape, indices, bounds).
ONE_DATA_INPUT = float_ops_that("unary")
#: Ops that move, select or compare values and compute none: on one dequantized operand they commute
#: with the increasing map c -> c·s, so the pattern's exact value is the op on the codes' differences
#: (the graph oracle's own float op, exact on integers below 2^24) times s. Resize's linear and cubic
#: modes are linear maps whose weights the oracle keeps exact: the same holds for them where s is a
#: power of two (``_through_codes``).
ORDER_PRESERVING = float_ops_that("moves")
ADD_SUB = float_ops_that("adds")
EXACT_OR_MOVED = frozenset(EXACT_OPS) | ORDER_PRESERVING | {"Split"}
AVERAGES = float_ops_that("averages")


__all__ = ["ACCUMULATING", "ADD_SUB", "AVERAGES", "AddOperandsRescaledFirst", "AverageFixedPointReciprocal",
           "AverageFloatReciprocal", "EXACT_OPS", "EXACT_OR_MOVED", "MovedCodesUnrequantised", "ORDER_PRESERVING",
           "PatternExactHalfAway", "PatternExactHalfEven", "PatternExactHalfUp", "PatternExactHalfUpBiased",
           "RequantiseQ31DoubleRounding", "RequantiseQ31SingleRounding", "exact_value", "single_rounding"]

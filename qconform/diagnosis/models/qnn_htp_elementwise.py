"""What Qualcomm's QNN HTP computes for its elementwise QDQ patterns (Add, LeakyRelu, HardSwish), measured
on its simulator: the kernels are closed, so each model says what the output codes are, bit for bit,
not where in the kernel each step is. The QNN EP's translation is public
(onnxruntime/onnxruntime-qnn, ``core/providers/qnn/builder/opbuilder/simple_op_builder.cc``): Add is
QNN's ElementWiseAdd on the quantized tensors, LeakyRelu QNN's Prelu with alpha a static uint8
tensor, HardSwish QNN's HardSwish.

- ``htp-add-15-bit-common-shift``: each operand's ratio s_i/s_y becomes an integer multiplier over
  one power-of-two shift shared by both, the larger ratio kept to 15 bits; the products of the
  zero-point-free codes are summed and rounded half up. An operand that is itself the output of an
  accumulating pattern (a residual: DQ → Conv → Q → DQ → Add) is that pattern's codes as the HTP
  computes them (``qnn_htp_requant``).
- ``htp-leaky-relu-float32-ratio-half-even``: 8-bit LeakyRelu from the codes: alpha times the code
  difference in float32, times s_x/s_y computed once in float32, rounded half to even on the output
  code (z_y included), the way a lookup table over the 256 input codes would be filled.
- ``htp-leaky-relu-16-bit-floored-multipliers``: 16-bit LeakyRelu: s_x/s_y and alpha·s_x/s_y each floored
  to a multiple of 2^-n, n = 15 − max(0, ⌈log₂(s_x/s_y)⌉) (a 16-bit multiplier with as many integer bits
  as the ratio needs), times the code difference, rounded half up.
- ``htp-hard-swish-exact-half-even``: 8-bit HardSwish as its exact real value, rounded half to even
  on the output code (z_y included).
"""
from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np

from qconform import dtypes
from qconform.case import Draft
from qconform.diagnosis.models.base import Deviation
from qconform.diagnosis.models.fused_kernels import _pack, _saturate
from qconform.diagnosis.models.fused_pattern import Operand, pattern
from qconform.diagnosis.models.qnn_htp_requant import MEASURED, HtpPerAxisBias, HtpRequantise, HtpRequantise16
from qconform.oracle.arith import as_float64, round_fraction

#: The HTP's multiplier width for Add (measured: 15 bits fits every 16-bit case of the corpus, 16 does not).
ADD_BITS = 15


def _scalar(v) -> Fraction:
    return Fraction(float(np.asarray(v, np.float64).reshape(-1)[0]))


def _zero(o: Operand) -> int:
    return int(np.asarray(as_float64(o.zero, o.type)).reshape(-1)[0])


def _per_tensor_integer(o: Operand | None) -> bool:
    return o is not None and dtypes.get(o.type).is_integer and np.size(o.scale) == 1 and np.size(o.zero) == 1


def common_shift_multipliers(ratios: list[Fraction], bits: int = ADD_BITS) -> tuple[list[int], int]:
    """Integer multipliers m_i and one shift n with m_i/2^n ≈ ratio_i: n the largest with the largest
    ratio's multiplier below 2^bits, each m_i = ⌊ratio_i·2^n + 1/2⌋."""
    top = max(ratios)
    n = 0
    while (top * Fraction(2) ** (n + 1) + Fraction(1, 2)).__floor__() < 2 ** bits:
        n += 1
    while (top * Fraction(2) ** n + Fraction(1, 2)).__floor__() >= 2 ** bits:
        n -= 1
    return [int((r * Fraction(2) ** n + Fraction(1, 2)).__floor__()) for r in ratios], n


def add_codes(operands: list[Operand], y_scale, y_zero: int, y_type: str, bits: int = ADD_BITS) -> np.ndarray:
    """The HTP's Add: Σ m_i·(q_i − z_i) over the common shift 2^n, rounded half up, plus z_y, saturated."""
    ms, n = common_shift_multipliers([_scalar(o.scale) / _scalar(y_scale) for o in operands], bits)
    diffs = np.broadcast_arrays(*[np.asarray(as_float64(o.codes, o.type)).astype(np.int64) - _zero(o) for o in operands])
    acc = sum(m * d.astype(object) for m, d in zip(ms, diffs))
    half = Fraction(1, 2)
    q = np.vectorize(lambda a: int((Fraction(int(a)) / Fraction(2) ** n + half).__floor__()), otypes=[np.int64])(acc)
    return _saturate(q + y_zero, y_type)


_INNER = (HtpPerAxisBias, HtpRequantise16, HtpRequantise)


def _inner_operand(d: Draft, name: str) -> Operand | None:
    """The Add's input ``name`` where it is DQ(Q(an accumulating pattern)) with one scale and zero point
    on both sides: that pattern's codes as the HTP's requantisation models compute them."""
    producers = {o: n for n in d.graph for o in n.outputs}
    dq = producers.get(name)
    q = producers.get(dq.inputs[0]) if dq is not None and dq.op == "DequantizeLinear" else None
    if q is None or q.op != "QuantizeLinear" or tuple(dq.inputs[1:]) != tuple(q.inputs[1:]):
        return None
    needed, todo = set(), [q]
    while todo:
        n = todo.pop()
        if id(n) not in needed:
            needed.add(id(n))
            todo += [producers[i] for i in n.inputs if i in producers]
    sub = dataclasses.replace(d, graph=tuple(n for n in d.graph if id(n) in needed))
    codes = next((r for m in _INNER if (r := m().fused(sub, None)) is not None), None)
    if codes is None:
        return None
    values = {a.name: a for a in d.inputs if a is not None}
    s, z = values.get(q.inputs[1]), values.get(q.inputs[2]) if len(q.inputs) > 2 else None
    if s is None or z is None:
        return None
    return Operand(np.asarray(codes[0][1][0]), z.type, s.value, z.value, {})


def add_operands(d: Draft) -> list[Operand] | None:
    """DQ(a), DQ(b) → Add → Q between integers, per tensor, either input possibly an accumulating
    pattern's requantised output (``_inner_operand``); None elsewhere."""
    p = pattern(d) if d.graph else None
    if p is None or p.op != "Add" or len(p.operands) != 2 or not dtypes.get(p.y_type).is_integer \
            or np.size(p.y_scale) != 1:
        return None
    producers = {o: n for n in d.graph for o in n.outputs}
    central = producers[d.graph[-1].inputs[0]]
    ops = [o if o is not None else _inner_operand(d, name) for name, o in zip(central.inputs, p.operands)]
    return ops if all(_per_tensor_integer(o) for o in ops) else None


class HtpAddCommonShift:
    """DQ(a), DQ(b) → Add → Q as ``add_codes`` computes it."""

    def fused(self, draft, inputs):
        ops = add_operands(draft)
        if ops is None:
            return None
        p = pattern(draft)
        zy = int(np.asarray(as_float64(p.y_zero, p.y_type)).reshape(-1)[0])
        return [("spec", [_pack(add_codes(ops, p.y_scale, zy, p.y_type), p.y_type)])]


def _unary(op: str, bits: int = 8):
    """DQ(x) → op → Q between integers of ``bits`` bits, per tensor."""
    def check(d: Draft) -> bool:
        p = pattern(d) if d.graph else None
        return p is not None and p.op == op and len(p.operands) == 1 and _per_tensor_integer(p.operands[0]) \
            and dtypes.get(p.operands[0].type).bits == bits and dtypes.get(p.y_type).is_integer \
            and dtypes.get(p.y_type).bits == bits and np.size(p.y_scale) == 1 and float(np.asarray(p.y_scale).reshape(-1)[0]) > 0 \
            and float(np.asarray(p.operands[0].scale).reshape(-1)[0]) > 0
    return check


def _unary_codes(draft: Draft, value) -> list:
    """Each input code difference d through ``value(d, s_x, s_y)`` (an exact output-code offset, a
    Fraction), plus z_y, rounded half to even, saturated."""
    p = pattern(draft)
    x = p.operands[0]
    sx, sy = _scalar(x.scale), _scalar(p.y_scale)
    zy = int(np.asarray(as_float64(p.y_zero, p.y_type)).reshape(-1)[0])
    q = np.vectorize(lambda c: int(round_fraction(value(int(c), sx, sy) + zy, "half-even")), otypes=[np.int64])(x.exact())
    return [("spec", [_pack(_saturate(q, p.y_type), p.y_type)])]


def leaky_relu_code(d: int, alpha: float, sx: Fraction, sy: Fraction) -> Fraction:
    """t = d, or fl32(d·fl32(alpha)) for d < 0; then fl32(t·fl32(fl32(s_x)/fl32(s_y))) (exact value)."""
    f = np.float32
    t = f(d) if d >= 0 else f(f(d) * f(alpha))
    return Fraction(float(f(t * f(f(float(sx)) / f(float(sy))))))


def hard_swish_code(d: int, sx: Fraction, sy: Fraction) -> Fraction:
    """x·clamp(x + 3, 0, 6)/6 on x = d·s_x exactly, over s_y."""
    x = d * sx
    return x * min(max(x + 3, Fraction(0)), Fraction(6)) / 6 / sy


class HtpLeakyReluFloat32Ratio:
    """DQ(x) → LeakyRelu → Q (8-bit) as ``leaky_relu_code``, half to even on the code."""

    def fused(self, draft, inputs):
        if not _unary("LeakyRelu")(draft):
            return None
        alpha = float(pattern(draft).attrs.get("alpha", 0.01))
        return _unary_codes(draft, lambda d, sx, sy: leaky_relu_code(d, alpha, sx, sy))


def leaky_relu_16_multipliers(alpha: float, ratio: Fraction) -> tuple[Fraction, Fraction, int]:
    """(positive, negative multiplier, n): ⌊ratio·2^n⌋/2^n and ⌊fl32(alpha)·ratio·2^n⌋/2^n, n = 15 −
    max(0, ⌈log₂ ratio⌉)."""
    n = 15 - max(0, math.ceil(math.log2(ratio)))
    two = Fraction(2) ** n
    a = Fraction(float(np.float32(alpha)))
    return Fraction((ratio * two).__floor__()) / two, Fraction((a * ratio * two).__floor__()) / two, n


class HtpLeakyRelu16FlooredMultipliers:
    """DQ(x) → LeakyRelu → Q (16-bit) as ``leaky_relu_16_multipliers``: m·(x − z_x) rounded half up, plus
    z_y, saturated."""

    def fused(self, draft, inputs):
        if not _unary("LeakyRelu", 16)(draft):
            return None
        p = pattern(draft)
        x = p.operands[0]
        pos, neg, _ = leaky_relu_16_multipliers(float(p.attrs.get("alpha", 0.01)), _scalar(x.scale) / _scalar(p.y_scale))
        zy = int(np.asarray(as_float64(p.y_zero, p.y_type)).reshape(-1)[0])
        half = Fraction(1, 2)
        q = np.vectorize(lambda d: int(((pos if d >= 0 else neg) * int(d) + half).__floor__()), otypes=[np.int64])(x.exact())
        return [("spec", [_pack(_saturate(q + zy, p.y_type), p.y_type)])]


class HtpHardSwishExactHalfEven:
    """DQ(x) → HardSwish → Q (8-bit) as ``hard_swish_code``, half to even on the code."""

    def fused(self, draft, inputs):
        return _unary_codes(draft, hard_swish_code) if _unary("HardSwish")(draft) else None


def _add(d: Draft) -> bool:
    return add_operands(d) is not None


QNN_EP = "onnxruntime/onnxruntime-qnn onnxruntime/core/providers/qnn/builder/opbuilder/simple_op_builder.cc"

DEVIATIONS = [
    Deviation("htp-add-15-bit-common-shift", frozenset({"Add"}),
              "Your runtime adds two quantized tensors through integer multipliers: each ratio s_i/s_y is rounded "
              "to m_i/2^n with one shift n for both, chosen so that the larger multiplier has 15 bits; "
              "Σ m_i·(q_i − z_i)/2^n is rounded half up, plus z_y. The smaller ratio keeps fewer bits: 16-bit "
              "results are off by up to a few codes where the text adds the exact values and rounds half to even. "
              "A residual's convolution (DQ → Conv → Q → DQ → Add) is requantised as the HTP's convolution is.",
              f"{MEASURED}: every int16 and uint16 Add of the corpus it applies to is this model bit for bit (50 "
              "cases, 46 failing; uint16 draw-1, s_a/s_y = 0.254006, s_b/s_y = 5.137188, takes 1040/2^12 and "
              "21042/2^12; the residual-conv ones with the convolution's codes of htp-accumulator-low-byte-dropped), "
              "and 57 of the 66 8-bit ones: the other 9 have results a few hundredths of a code above a tie that "
              f"go down (an 8-bit arithmetic not found); {QNN_EP} maps Add to ElementWiseAdd",
              "uint16, s_a/s_y = 0.254006, s_b/s_y = 5.137188: multipliers 1040 and 21042 over 2^12; a − z_a = 10000, "
              "b − z_b = 0 gives 2539.06 → z_y + 2539, the text 2540.06 → z_y + 2540",
              HtpAddCommonShift, _add, ("basic", "residual-conv")),
    Deviation("htp-leaky-relu-float32-ratio-half-even", frozenset({"LeakyRelu"}),
              "Your runtime computes an 8-bit LeakyRelu on the code differences: alpha·(x − z_x) in float32, times "
              "s_x/s_y computed once in float32, plus z_y, rounded half to even on the output code; the text "
              "dequantizes, multiplies by alpha and divides by s_y in float32 and rounds half to even before z_y is "
              "added, so ties of an odd z_y and values the two float32 paths put on either side of a tie differ.",
              f"{MEASURED}: every uint8 LeakyRelu case of the corpus is this model bit for bit (30 cases; the ties "
              "family's zero-point-odd cases and alpha 0.1, 0.2 at 0.5-ties: −85·fl32(0.1) = −8.5 exactly in float32, "
              f"code 119.5 goes to 120); {QNN_EP} maps LeakyRelu to Prelu with alpha a static uint8 tensor",
              "uint8, z_x = 128, z_y = 129, s_y = 2·s_x, alpha 0.01, x − z_x = 55: 27.5 + 129 = 156.5 gives 156, "
              "the text 157",
              HtpLeakyReluFloat32Ratio, _unary("LeakyRelu"), ("ties", "fold")),
    Deviation("htp-leaky-relu-16-bit-floored-multipliers", frozenset({"LeakyRelu"}),
              "Your runtime computes a 16-bit LeakyRelu with two 16-bit multipliers floored on one grid 2^-n, n = 15 "
              "less the integer bits s_x/s_y needs: ⌊2^n·s_x/s_y⌋ for x ≥ z_x and ⌊2^n·alpha·s_x/s_y⌋ below, times "
              "x − z_x, rounded half up, plus z_y; the text multiplies exactly (in float32) and rounds half to even, "
              "so the negative side's slope is low by up to 2^-n and large differences lose codes.",
              f"{MEASURED}: every uint16 LeakyRelu case of the corpus is this model bit for bit (30 cases; fold "
              "alpha 0.01: ⌊0.01·2^15⌋ = 327, a slope of 0.009979); {QNN_EP} maps LeakyRelu to Prelu",
              "uint16, s_y = s_x, alpha 0.01, x − z_x = −31680: 327·(−31680)/2^15 = −316.1 gives z_y − 316, the "
              "text z_y − 317",
              HtpLeakyRelu16FlooredMultipliers, _unary("LeakyRelu", 16), ("basic", "fold", "ties")),
    Deviation("htp-hard-swish-exact-half-even", frozenset({"HardSwish"}),
              "Your runtime computes an 8-bit HardSwish exactly, x·clamp(x + 3, 0, 6)/6 on the exact dequantized "
              "value over s_y, plus z_y, rounded half to even on the output code; the text's float32 steps and its "
              "rounding before z_y is added put ties and near-ties elsewhere.",
              f"{MEASURED}: every int8 and uint8 HardSwish case of the corpus is this model bit for bit (24 cases); "
              "not the uint16 ones, which follow another kernel",
              "uint8, s_y = 2·s_x, z_y odd: an exact tie k + 1/2 + z_y goes to the even code",
              HtpHardSwishExactHalfEven, _unary("HardSwish"), ("ties",)),
]

__all__ = ["DEVIATIONS", "HtpAddCommonShift", "HtpHardSwishExactHalfEven", "HtpLeakyRelu16FlooredMultipliers",
           "HtpLeakyReluFloat32Ratio", "add_codes", "add_operands", "common_shift_multipliers", "hard_swish_code",
           "leaky_relu_16_multipliers", "leaky_relu_code"]

"""How Qualcomm's QNN HTP requantises its accumulating kernels (DQ(x), DQ(w) [, DQ(bias)] → Conv,
MatMul or Gemm → Q), measured on its simulator: the kernel's source is closed, so these models say
what its output codes are, bit for bit, not where in the kernel each step is.

Both widths compute the exact result r = Σ(x − z_x)·(w − z_w)·s_x·s_w (+ bias) on a fixed-point grid
G, floored, then multiply by G/s_y rounded to float16 and round half up; the output offset
o = (z_y − qmin)·s_y (the code z_y counted from the type's lowest code, as an unsigned kernel holds
it) rides on the same grid:

- 16-bit activations: G = 2^8·s_x·s_w per output channel (the accumulator without its low 8 bits),
  and the offset with the bias is floored on its own: t = ⌊r₀/G⌋ + ⌊(o + bias)/G⌋, r₀ without bias.
- 8-bit activations: G = 2^e accumulator units u = s_x·s_w, e = ⌊log₂(s_y/u)⌋ − 3 (the largest
  power-of-two multiple of u not above s_y/8: an eighth of the output scale's power of two where u is
  a power of two), and the offset with the bias is added in accumulator units rounded to one:
  t = ⌊(acc + round((o + bias)/u))/2^e⌋ (``requantise_on_accumulator_grid``).

y = ⌊fl16(G/s_y)·t + 1/2⌋ + qmin, saturated. With per-tensor weights the HTP reads a per-axis int32
bias's codes as real values (its scales not applied), a third model over the same requantisation.
"""
from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np

from qconform import dtypes
from qconform.case import Draft, Node
from qconform.diagnosis.models.base import Deviation
from qconform.diagnosis.models.fixed_point_kernels import EXACT_OPS, _exact
from qconform.diagnosis.models.fused import _requant_chain
from qconform.diagnosis.models.fused_kernels import _half_up, _pack, _saturate
from qconform.diagnosis.models.fused_pattern import ACCUMULATING, Operand, pattern, requant_chain
from qconform.oracle.arith import _round_fraction, as_float64, round_fraction

_FLOAT16 = dtypes.get("float16")


def _scalar(v) -> Fraction:
    return Fraction(float(np.asarray(v, np.float64).reshape(-1)[0]))


def float16_ratio(r: Fraction) -> Fraction:
    """r rounded once to float16 (nearest, ties to even): the HTP's requantisation multiplier."""
    return Fraction(_round_fraction(_FLOAT16, r))


def requantise(rest: Fraction, offset: Fraction, grid: Fraction, sy: Fraction, floors: int, qmin: int) -> int:
    """One output code before saturation: ``floors`` = 2 floors ``rest`` and ``offset`` (the output
    offset with the bias) on the grid apart, 1 floors their sum; times fl16(grid/s_y), half up."""
    t = (rest / grid).__floor__() + (offset / grid).__floor__() if floors == 2 else ((rest + offset) / grid).__floor__()
    return int(round_fraction(float16_ratio(grid / sy) * t, "half-up")) + qmin


def requantise_on_accumulator_grid(acc: int, bias: Fraction, u: Fraction, sy: Fraction, zy: int, lo: int, hi: int) -> int:
    """One 8-bit output code: on 2^e accumulator units (u = s_x·s_w of the channel, e = ⌊log₂(s_y/u)⌋ − 3,
    so the grid is at most s_y/8), the output offset (z_y − qmin)·s_y/u plus the bias (accumulator units)
    rounded to one integer, added to the accumulator, floored on the grid, times fl16(2^e·u/s_y), half
    up, + qmin, saturated."""
    e = math.floor(math.log2(sy / u)) - 3
    grid = Fraction(2) ** e
    t = ((acc + round((zy - lo) * sy / u + bias)) / grid).__floor__()
    return min(max(math.floor(float16_ratio(grid * u / sy) * t + Fraction(1, 2)) + lo, lo), hi)


def _bits(t: str) -> int:
    return dtypes.get(t).bits


def without_relu(d: Draft) -> Draft:
    """The draft with a Relu between the accumulating op and the output's QuantizeLinear taken out
    where z_y is the type's lowest code (the Relu then changes no code: the saturation at qmin clamps
    what it would), as the QNN EP fuses it into the op; else the draft itself."""
    nodes = d.graph
    if len(nodes) < 3 or nodes[-1].op != "QuantizeLinear":
        return d
    producers = {o: n for n in nodes for o in n.outputs}
    relu = producers.get(nodes[-1].inputs[0])
    op = producers.get(relu.inputs[0]) if relu is not None and relu.op == "Relu" else None
    if op is None or op.op not in ACCUMULATING:
        return d
    values = {a.name: a for a in d.inputs if a is not None}
    zy = values.get(nodes[-1].inputs[2]) if len(nodes[-1].inputs) > 2 else None
    if zy is None or int(np.asarray(as_float64(zy.value, zy.type)).reshape(-1)[0]) != dtypes.get(zy.type).qrange[0]:
        return d
    fused = Node(op.op, op.inputs, relu.outputs, op.attrs, op.domain)
    return dataclasses.replace(d, graph=tuple(fused if n is op else n for n in nodes if n is not relu))


def accumulating(d: Draft, bits: int, any_kernel: bool = False) -> bool:
    """DQ(x), DQ(w) [, DQ(bias)] → Conv/MatMul/Gemm → Q with x and y integers of ``bits`` bits, per
    tensor, weights of at most 8 bits per tensor or per channel (not blocked), a Gemm with
    alpha = beta = 1; not where another kernel runs (``_another_kernel``) unless ``any_kernel``."""
    p = pattern(without_relu(d)) if d.graph else None
    if p is None or p.op not in ACCUMULATING or len(p.operands) < 2 or not dtypes.get(p.y_type).is_integer:
        return False
    x, w = p.operands[0], p.operands[1]
    if x is None or w is None or any(o is None for o in p.operands[2:]) or any(v is not None for v in p.others[2:]):
        return False
    if p.op == "Gemm" and (float(p.attrs.get("alpha", 1.0)) != 1.0 or float(p.attrs.get("beta", 1.0)) != 1.0):
        return False
    return dtypes.get(x.type).is_integer and dtypes.get(w.type).is_integer and _bits(x.type) == bits \
        and _bits(p.y_type) == bits and _bits(w.type) <= 8 and "block_size" not in w.attrs \
        and np.size(x.scale) == 1 and np.size(p.y_scale) == 1 and (any_kernel or not _another_kernel(p))


def _another_kernel(p) -> bool:
    """Where the HTP's results follow neither model (measured): int8 activations with 4-bit weights,
    and a grouped convolution that is 3-D or strided (its depthwise 5×5 stride 2 and 3-D kernels)."""
    x, w = p.operands[0], p.operands[1]
    if dtypes.get(x.type).signed and _bits(x.type) == 8 and _bits(w.type) == 4:
        return True
    return p.op == "Conv" and int(p.attrs.get("group", 1)) > 1 \
        and (np.ndim(x.codes) > 4 or any(int(s) > 1 for s in p.attrs.get("strides", ())))


def per_axis_bias_on_per_tensor_weights(d: Draft) -> bool:
    """A dequantized bias with one scale per channel beside weights with one scale."""
    p = pattern(without_relu(d))
    return len(p.operands) > 2 and p.operands[2] is not None and np.size(p.operands[1].scale) == 1 \
        and np.size(p.operands[2].scale) > 1


def _channel_scales(p, shape: tuple[int, ...]) -> np.ndarray:
    """s_x·s_w per output element (Fractions): the weight's scale of each output channel (Conv's
    axis 1, the last axis of MatMul and Gemm)."""
    sx = _scalar(p.operands[0].scale)
    sw = np.asarray([sx * Fraction(float(s)) for s in np.asarray(p.operands[1].scale, np.float64).reshape(-1)], object)
    if sw.size == 1:
        return np.full(shape, sw[0], object)
    axis = 1 if p.op == "Conv" else len(shape) - 1
    view = [1] * len(shape)
    view[axis] = -1
    return np.broadcast_to(sw.reshape(view), shape)


def bias_as_folded(p) -> Operand:
    """The bias as the HTP adds it: its int32 codes at the scale s_x·s_w of each channel, its own
    scale and zero point not read (onnxruntime/onnxruntime-qnn#739: the HTP "folds an int32 conv bias
    into the accumulator at activation_scale × weight_scale and ignores the declared bias encoding").
    A Conv's bias whose scale differs from fl32(s_x·s_w) by more than 1e-5, or whose zero point is not
    0, the QNN EP requantises first (conv_op_builder.cc, qnn_utils.cc RequantizeBiasTensor): each
    code dequantized to float32, divided by fl32(s_x·s_w) in double and rounded half to even
    (nearbyint)."""
    x, w, b = p.operands[:3]
    sx = np.float32(np.asarray(x.scale).reshape(-1)[0])
    acc_scale = (sx * np.asarray(w.scale, np.float32).reshape(-1)).astype(np.float32)  # per channel, float32 products
    shape = np.shape(b.codes)
    codes = np.asarray(as_float64(b.codes, b.type)).astype(np.int64)
    if p.op == "Conv":  # 1-D, one code per output channel
        n = codes.size
        per = np.broadcast_to(acc_scale, (n,))
        sb = np.broadcast_to(np.asarray(b.scale, np.float32).reshape(-1), (n,))
        zb = np.broadcast_to(np.asarray(as_float64(b.zero, b.type)).astype(np.int64).reshape(-1), (n,))
        if any(z != 0 for z in zb) or any(abs(float(s) - float(a)) > float(np.float32(1e-5)) for s, a in zip(sb, per)):
            real = np.asarray([np.float32((int(c) - int(z)) * float(s)) for c, z, s in zip(codes.reshape(-1), zb, sb)])
            codes = np.rint(real.astype(np.float64) / per.astype(np.float64)).astype(np.int64).reshape(shape)
    scale = acc_scale if acc_scale.size > 1 else acc_scale.reshape(())
    return Operand(codes.astype(np.int32), "int32", scale, np.zeros((), np.int32), dict(b.attrs, axis=max(len(shape) - 1, 0)))


class HtpRequantise:
    """The pattern's exact value (``EXACT_OPS``: the op on the exact dequantized operands), split into
    the bias and the rest, requantised for the activation width: ``requantise_on_accumulator_grid`` (8-bit),
    ``requantise`` with the offset floored apart (16-bit)."""

    _widths: tuple[int, ...] = (8,)
    _bias_codes_as_reals = False

    def fused(self, draft, inputs):
        bits = next((b for b in self._widths if accumulating(draft, b, self._bias_codes_as_reals)), None)
        if bits is None or (self._bias_codes_as_reals and not per_axis_bias_on_per_tensor_weights(draft)):
            return None
        p = pattern(without_relu(draft))
        v = [_exact(o) for o in p.operands]
        if len(v) > 2 and self._bias_codes_as_reals:
            b = p.operands[2]
            v[2] = _exact(Operand(b.codes, b.type, np.ones(np.shape(b.scale), np.float32), b.zero, b.attrs))
        elif len(v) > 2:
            v[2] = _exact(bias_as_folded(p))
        rest = np.asarray(EXACT_OPS[p.op](v[:2], p.others, p.attrs), object)
        bias = np.asarray(EXACT_OPS[p.op](v, p.others, p.attrs), object) - rest
        sy = _scalar(p.y_scale)
        lo, hi = dtypes.get(p.y_type).qrange
        zy = int(np.asarray(as_float64(p.y_zero, p.y_type)).reshape(-1)[0])
        scales = _channel_scales(p, rest.shape)
        if bits == 8:
            y = np.vectorize(lambda r, b, s: requantise_on_accumulator_grid(int(r / s), b / s, s, sy, zy, lo, hi),
                             otypes=[np.int64])(rest, bias, scales)
        else:
            y = np.vectorize(lambda r, b, s: requantise(r, (zy - lo) * sy + b, 256 * s, sy, 2, lo),
                             otypes=[np.int64])(rest, bias, scales)
        return [("spec", [_pack(np.clip(y, lo, hi), p.y_type)])]


class HtpRequantise16(HtpRequantise):
    """16-bit activations: the grid 2^8·s_x·s_w of each output channel, the offset floored apart."""

    _widths = (16,)


class HtpPerAxisBias(HtpRequantise):
    """Either width, a per-axis bias beside per-tensor weights read as real values."""

    _widths = (16, 8)
    _bias_codes_as_reals = True


def _mixed_widths(stage) -> bool:
    s1, z1, s2, z2 = stage
    return dtypes.get(z1.type).bits != dtypes.get(z2.type).bits


def _mixed_convert(d: Draft) -> bool:
    """DQ → Q (or a chain of them) between integers with a stage from an 8-bit to a 16-bit type or back."""
    return _requant_chain(d) and any(_mixed_widths(st) for st in requant_chain(d)[1])


class ConvertMixedWidthHalfDown:
    """DQ → Q as the HTP's Convert: each stage (x − z1)·s1/s2 exactly, rounded half down (toward −∞)
    where one side is 8-bit and the other 16-bit, half up where both have one width, plus z2,
    saturated."""

    def fused(self, draft, inputs):
        if not _mixed_convert(draft):
            return None
        x, stages = requant_chain(draft)
        codes = as_float64(x.value, x.type).astype(np.int64)
        for st in stages:
            s1, z1, s2, z2 = st
            xs = codes - int(as_float64(z1.value, z1.type))
            ratio = Fraction(float(s1.value)) / Fraction(float(s2.value))
            q = -_half_up(-xs, ratio, Fraction(0)) if _mixed_widths(st) else _half_up(xs, ratio, Fraction(0))
            codes = _saturate(q + int(as_float64(z2.value, z2.type)), z2.type)
        return [("spec", [_pack(codes, stages[-1][3].type)])]


def _width(bits: int):
    return lambda d: accumulating(d, bits)


def _per_axis_bias(d: Draft) -> bool:
    return (accumulating(d, 16, True) or accumulating(d, 8, True)) and per_axis_bias_on_per_tensor_weights(d)


MEASURED = "Qualcomm QNN HTP (onnxruntime-qnn 2.7.0, QNN SDK 2.51.0, the HTP simulator) measured here; the kernel's source " \
           "is not public, so this is measured only"
_FAMILIES = ("basic", "geometry", "geometry-per-tensor", "granularity", "large-accumulator", "shapes", "ties")

DEVIATIONS = [
    Deviation("htp-accumulator-low-byte-dropped", ACCUMULATING,
              "Your runtime requantises a convolution or matmul of 16-bit activations from its accumulator without its "
              "low 8 bits: ⌊acc/2^8⌋, plus the output offset (z_y − qmin)·s_y/(s_x·s_w) and the bias floored on their "
              "own in the same units, times 2^8·s_x·s_w/s_y rounded to float16, rounded half up; the text requantises "
              "the whole accumulator once.",
              f"{MEASURED}: 217 of the 235 failing int16 and uint16 Conv, MatMul and Gemm cases of the corpus it applies "
              "to are this model bit for bit, fused Relu (z_y = qmin) and a Gemm bias of another scale included (QDQ "
              "Conv int16 ties, m = 1, z_y = 1: y is 256·⌊acc/256⌋, the zero point and the low byte lost); the bias "
              "folded as onnxruntime/onnxruntime-qnn#739 says (int32 codes at s_x·s_w, its own encoding ignored)",
              "int16 Conv, s_x·s_w/s_y = 1, z_y = 1, acc = 19: the text gives 20, this model 0",
              HtpRequantise16, _width(16), _FAMILIES),
    Deviation("htp-eighth-code-intermediate", ACCUMULATING,
              "Your runtime requantises a convolution or matmul of 8-bit activations through a fixed-point "
              "intermediate on a grid of 2^e accumulator units (u = s_x·s_w, e = ⌊log₂(s_y/u)⌋ − 3, at most an eighth "
              "of a code): the accumulator plus the output offset (z_y − qmin)·s_y/u and the bias rounded to one unit, "
              "floored to the grid, times 2^e·u/s_y rounded to float16, rounded half up; results within about an eighth "
              "of a code of a tie, or off it by the float16 multiplier's error, round the other way.",
              f"{MEASURED}: 347 of the 410 failing uint8 and int8 Conv, MatMul and Gemm cases of the corpus it applies to "
              "whose outputs were captured, and 95 of the 96 passing ones, are this model bit for bit (fused Relu with "
              "z_y = qmin, the bias folded as onnxruntime/onnxruntime-qnn#739 says); with the grid in output units "
              "(2^(⌊log₂ s_y⌋ − 3), equal where s_x·s_w is a power of two) and the offset exact, 19 fewer, those where "
              "s_x·s_w is not; it misses some uint8 × 4-bit weight cases. "
              "Not applied to int8 activations with 4-bit weights, nor to strided or 3-D grouped convolutions, whose "
              "results follow neither model",
              "uint8 Conv, s_y = 1.145, z_y = 127, exact value 132.5166: the text gives 133, this model 132",
              HtpRequantise, _width(8), _FAMILIES),
    Deviation("htp-per-axis-bias-codes-as-reals", ACCUMULATING,
              "Your runtime adds a per-channel int32 bias to a convolution with per-tensor weights as if its codes were "
              "real values (its scales, here s_x·s_w = 2^-11, not applied): the bias is 1/(s_x·s_w) times too large "
              "and most outputs saturate toward its sign; the requantisation is the HTP's (the low-byte or the "
              "eighth-code model by the activation width).",
              f"{MEASURED}: 72 of the 75 corpus Conv cases with per-tensor weights and a per-axis bias (scales all "
              "s_x·s_w) are this model bit for bit; the QNN EP passes such a bias unchanged (onnxruntime/onnxruntime-qnn "
              "onnxruntime/core/providers/qnn/builder/opbuilder/conv_op_builder.cc: scales that match s_x·s_w need "
              "no requantisation)",
              "int8 Conv, per-tensor weights, bias codes [819, −148] per channel: channel 0 all 127, channel 1 all −128",
              HtpPerAxisBias, _per_axis_bias, ("basic", "geometry-per-tensor")),
    Deviation("htp-convert-mixed-width-half-down", frozenset({"Requant"}),
              "Your runtime requantises DequantizeLinear → QuantizeLinear between an 8-bit and a 16-bit type (either "
              "way) rounding exact ties half down, toward −∞: (x − z1)·s1/s2 = k + 1/2 gives k; between types of one "
              "width it rounds them half up; the text rounds half to even.",
              f"{MEASURED}: the three uint8 → uint16 ties cases (s2 = 2^j·s1: every tie goes down) and the two "
              "uint16 → uint8 → uint16 chains whose first stage halves are this model bit for bit, where its int16 → "
              "int16 and uint16 → uint16 ties go up; not the 13 other mixed-width chains and the uint8 → uint16 draw of "
              "the corpus, off by more than ties",
              "uint8 → uint16, s2 = 2·s1, x − z1 = 3: 1.5 gives 1 here, 2 by the text",
              ConvertMixedWidthHalfDown, _mixed_convert, ("ties", "chain")),
]

__all__ = ["DEVIATIONS", "ConvertMixedWidthHalfDown", "HtpPerAxisBias", "HtpRequantise", "HtpRequantise16", "accumulating", "float16_ratio",
           "requantise", "requantise_on_accumulator_grid"]

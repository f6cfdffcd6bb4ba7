"""What Qualcomm's QNN HTP computes where the QNN execution provider hands it a QDQ pattern as one of
QNN's own operators whose parameters are not ONNX's: each model reads the EP's translation from its
public source (onnxruntime/onnxruntime-qnn, ``core/providers/qnn/builder/opbuilder``) and computes
the QNN operator as its public definition states, on the pattern's codes.

- ``resize-nearest-neighbor-flags-only``: a rank-4 nearest Resize becomes QNN's
  ``ResizeNearestNeighbor`` with two flags (``align_corners``, ``half_pixel_centers``), the
  operator TensorFlow defines: ``nearest_mode`` is dropped and ``pytorch_half_pixel`` keeps neither
  flag. The codes moved are requantised as ``requantise_codes`` says.
- ``max-pool-pads-read-as-zero``: a MaxPool's ``pads`` go to QNN's ``PoolMax2d`` as ``pad_amount``,
  an operator with no pad value; the HTP's padded positions hold the zero point (the real value 0),
  not −∞ as the ONNX text's padding is (measured on its 16-bit kernels, where a window of negative
  values then gives 0).
- ``cubic-resize-exclude-outside-ignored``: a cubic Resize with ``exclude_outside = 1`` computed as if
  it were 0 (measured: the EP passes the parameter to QNN's Resize, the HTP's result is the text's
  with the outside weights kept), requantised as ``requantise_codes`` says.
- ``resize-requantised-through-float16``: an 8-bit linear or cubic Resize whose output has other
  quantisation parameters than its input: its exact value in output codes rounded to float16, then
  half away from zero (``requantise_codes``).
- ``linear-resize-codes-exact-half-up``: a linear Resize whose output has the input's scale and zero
  point (nothing to requantise) is the weighted average of the codes, exact (its weights are dyadic),
  rounded half up (measured; where the output's parameters differ the HTP rounds otherwise: the ties
  family's s_y = 2·s_x goes half away from zero, the exact half-away model's rounding).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from qconform import dtypes
from qconform.case import Draft, Node
from qconform.diagnosis.models.base import Deviation
from qconform.diagnosis.models.fused_kernels import _pack, _saturate
from qconform.diagnosis.models.fused_pattern import pattern
from qconform.diagnosis.models.fixed_point_kernels import PatternExactHalfUp
from qconform.diagnosis.models.qnn_htp_requant import float16_ratio
from qconform.oracle.arith import as_float64, round_fraction


def requantise_codes(v: Fraction, y_type: str) -> int:
    """An exact value in output codes (z_y not yet added) as the HTP's Resize kernels round it
    (measured): to float16 first (nearest, ties to even) where the output is 8-bit, then half away
    from zero; a 16-bit output's exactly, half away from zero."""
    return int(round_fraction(float16_ratio(v) if dtypes.get(y_type).bits <= 8 else v, "half-away"))


def _attr(attrs, name: str, default: str) -> str:
    v = attrs.get(name, default)
    return v.decode() if isinstance(v, bytes) else str(v)


def nearest_neighbor_indices(n_in: int, n_out: int, align_corners: bool, half_pixel_centers: bool) -> list[int]:
    """The source index of each output position along one axis, as TensorFlow's ResizeNearestNeighbor
    computes it (tensorflow/core/kernels/image/resize_nearest_neighbor_op.cc): the scale in float32
    (``CalculateResizeScale``: (in − 1)/(out − 1) with align_corners and out > 1, else in/out), the
    position y·scale or (y + 0.5)·scale in float32, then roundf (half away) with align_corners or floorf
    without, at most in − 1 (and at least 0 with half-pixel centres)."""
    f = np.float32
    scale = f(n_in - 1) / f(n_out - 1) if align_corners and n_out > 1 else f(n_in) / f(n_out)
    out = []
    for y in range(n_out):
        v = float((f(y) + f(0.5)) * f(scale) if half_pixel_centers else f(y) * f(scale))
        i = math.floor(v + 0.5) if align_corners else math.floor(v)  # v >= 0: roundf is half up
        out.append(max(0, min(i, n_in - 1)))
    return out


def _nearest_rank4(d: Draft) -> bool:
    """DQ(x) → Resize(mode nearest) → Q on a 4-D integer tensor, per tensor on both sides: what the QNN
    EP translates to ResizeNearestNeighbor on the HTP (resize_op_builder.cc: input rank 4, nearest)."""
    p = pattern(d) if d.graph else None
    if p is None or p.op != "Resize" or not p.operands or p.operands[0] is None:
        return False
    x = p.operands[0]
    if any(o is not None for o in p.operands[1:]) or _attr(p.attrs, "mode", "nearest") != "nearest":
        return False
    return np.ndim(x.codes) == 4 and dtypes.get(x.type).is_integer and dtypes.get(p.y_type).is_integer \
        and np.size(x.scale) == 1 and np.size(p.y_scale) == 1


class ResizeNearestNeighborFlagsOnly:
    """DQ(x) → Resize(nearest, rank 4) → Q as QNN's ResizeNearestNeighbor: the output shape the text
    gives (the oracle's own Resize), each output pixel the input code TensorFlow's index rule picks
    with align_corners = (coordinate_transformation_mode == align_corners) and half_pixel_centers =
    (== half_pixel); then (x − z_x)·s_x/s_y exactly, rounded by ``requantise_codes``, plus z_y, saturated."""

    def fused(self, draft, inputs):
        if not _nearest_rank4(draft):
            return None
        from qconform.oracle.graph import ORACLE

        p = pattern(draft)
        x = p.operands[0]
        codes = np.asarray(as_float64(x.codes, x.type)).astype(np.int64)
        ins = [codes.astype(np.float32)] + [None if v is None else np.asarray(v) for v in p.others[1:]]
        node = Node(p.op, tuple(f"in{i}" for i in range(len(ins))), ("out",), dict(p.attrs))
        shape = np.shape(ORACLE.float_node(node, ins, "shape")[0][1][0])  # the text's output shape
        mode = _attr(p.attrs, "coordinate_transformation_mode", "half_pixel")
        ac, hp = mode == "align_corners", mode == "half_pixel"
        rows = nearest_neighbor_indices(codes.shape[2], shape[2], ac, hp)
        cols = nearest_neighbor_indices(codes.shape[3], shape[3], ac, hp)
        moved = codes[:, :, rows][:, :, :, cols]
        zx = int(np.asarray(as_float64(x.zero, x.type)).reshape(-1)[0])
        ratio = Fraction(float(np.asarray(x.scale, np.float64).reshape(-1)[0])) \
            / Fraction(float(np.asarray(p.y_scale, np.float64).reshape(-1)[0]))
        q = np.vectorize(lambda c: requantise_codes((int(c) - zx) * ratio, p.y_type), otypes=[np.int64])(moved)
        y = _saturate(q + int(as_float64(p.y_zero, p.y_type)), p.y_type)
        return [("spec", [_pack(y, p.y_type)])]


def _max_pool(d: Draft) -> bool:
    """DQ(x) → MaxPool → Q between 16-bit integer codes, per tensor, with padding or ceil_mode (a window
    that can read outside the input); the 8-bit kernels are qnn_htp_pools' (other padding, float16)."""
    p = pattern(d) if d.graph else None
    if p is None or p.op != "MaxPool" or not p.operands or p.operands[0] is None:
        return False
    x, a = p.operands[0], p.attrs
    padded = any(a.get("pads", ())) or bool(a.get("ceil_mode", 0)) or _attr(a, "auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER")
    return padded and dtypes.get(x.type).is_integer and dtypes.get(p.y_type).is_integer \
        and dtypes.get(x.type).bits == 16 and dtypes.get(p.y_type).bits == 16 \
        and np.size(x.scale) == 1 and np.size(p.y_scale) == 1 and float(np.asarray(x.scale).reshape(-1)[0]) > 0


class MaxPoolPadsReadAsZero:
    """DQ(x) → MaxPool → Q with every position outside the input (stated pads, SAME padding,
    ceil_mode's added positions) holding x's zero point, the code of the real value 0; the window's
    maximum code requantised once, exactly, rounded half away from zero, plus z_y, saturated."""

    def fused(self, draft, inputs):
        if not _max_pool(draft):
            return None
        from qconform.oracle.graph_ops import pool_windows

        p = pattern(draft)
        x = p.operands[0]
        zx = int(np.asarray(as_float64(x.zero, x.type)).reshape(-1)[0])
        windows, _, _ = pool_windows(np.asarray(as_float64(x.codes, x.type)), p.attrs, float(zx))
        top = windows.max(axis=-1).astype(np.int64)
        ratio = Fraction(float(np.asarray(x.scale, np.float64).reshape(-1)[0])) \
            / Fraction(float(np.asarray(p.y_scale, np.float64).reshape(-1)[0]))
        q = np.vectorize(lambda c: round_fraction((int(c) - zx) * ratio, "half-away"), otypes=[np.int64])(top)
        y = _saturate(q + int(as_float64(p.y_zero, p.y_type)), p.y_type)
        return [("spec", [_pack(y, p.y_type)])]


def _cubic_excluding(d: Draft) -> bool:
    """DQ(x) → Resize(mode cubic, exclude_outside 1) → Q between integer codes, per tensor."""
    p = _weighted_resize(d, ("cubic",))
    return p is not None and int(p.attrs.get("exclude_outside", 0)) == 1


def _resize_on_codes(p, attrs: dict) -> np.ndarray:
    """The oracle's own Resize (with ``attrs``) on the code differences x − z_x, as float32 (exact for a
    linear Resize: small integers, dyadic weights; a cubic one's weights are rounded to float32)."""
    from qconform.oracle.graph import ORACLE

    x = p.operands[0]
    ins = [x.exact().astype(np.float32)] + [None if v is None else np.asarray(v) for v in p.others[1:]]
    node = Node(p.op, tuple(f"in{i}" for i in range(len(ins))), ("out",), dict(attrs))
    return np.asarray(ORACLE.float_node(node, ins, "codes")[0][1][0], np.float64)


def _requantised(p, v: np.ndarray, rounding) -> list:
    """Each value of ``v`` (in input codes) times s_x/s_y exactly, rounded by ``rounding(value, y_type)``,
    plus z_y, saturated: the pattern's one output."""
    x = p.operands[0]
    ratio = Fraction(float(np.asarray(x.scale, np.float64).reshape(-1)[0])) \
        / Fraction(float(np.asarray(p.y_scale, np.float64).reshape(-1)[0]))
    q = np.vectorize(lambda t: rounding(Fraction(float(t)) * ratio, p.y_type), otypes=[np.int64])(v)
    return [("spec", [_pack(_saturate(q + int(as_float64(p.y_zero, p.y_type)), p.y_type), p.y_type)])]


class CubicResizeExcludeOutsideIgnored:
    """DQ(x) → Resize(cubic, exclude_outside 1) → Q computed with exclude_outside 0 (``_resize_on_codes``
    with that one attribute changed), requantised by ``requantise_codes``."""

    def fused(self, draft, inputs):
        if not _cubic_excluding(draft):
            return None
        p = pattern(draft)
        return _requantised(p, _resize_on_codes(p, {**p.attrs, "exclude_outside": 0}), requantise_codes)


def _same_parameters(x, p) -> bool:
    return x.type == p.y_type and float(np.asarray(x.scale).reshape(-1)[0]) == float(np.asarray(p.y_scale).reshape(-1)[0]) \
        and np.array_equal(np.asarray(as_float64(x.zero, x.type)).reshape(-1), np.asarray(as_float64(p.y_zero, p.y_type)).reshape(-1))


def _weighted_resize(d: Draft, modes: tuple[str, ...]):
    """The pattern of DQ(x) → Resize(mode in ``modes``) → Q between integer codes, per tensor; else None."""
    p = pattern(d) if d.graph else None
    if p is None or p.op != "Resize" or not p.operands or p.operands[0] is None:
        return None
    x = p.operands[0]
    ok = _attr(p.attrs, "mode", "nearest") in modes and dtypes.get(x.type).is_integer \
        and dtypes.get(p.y_type).is_integer and np.size(x.scale) == 1 and np.size(p.y_scale) == 1
    return p if ok else None


def _requantised_8_bit(d: Draft) -> bool:
    """DQ(x) → Resize(linear, or cubic with exclude_outside 0) → Q between 8-bit codes whose output has
    other quantisation parameters than its input."""
    p = _weighted_resize(d, ("linear", "cubic"))
    return p is not None and not _same_parameters(p.operands[0], p) and int(p.attrs.get("exclude_outside", 0)) == 0 \
        and dtypes.get(p.operands[0].type).bits == 8 and dtypes.get(p.y_type).bits == 8


class ResizeRequantisedThroughFloat16:
    """DQ(x) → Resize(linear or cubic) → Q, 8-bit, requantised: ``_resize_on_codes`` requantised by
    ``requantise_codes`` (through float16, half away from zero)."""

    def fused(self, draft, inputs):
        if not _requantised_8_bit(draft):
            return None
        p = pattern(draft)
        return _requantised(p, _resize_on_codes(p, p.attrs), requantise_codes)


def _linear_resize(d: Draft) -> bool:
    """DQ(x) → Resize(mode linear) → Q between integer codes, per tensor, the output's scale and zero point
    the input's (no requantisation)."""
    p = _weighted_resize(d, ("linear",))
    return p is not None and _same_parameters(p.operands[0], p)


class LinearResizeCodesHalfUp(PatternExactHalfUp):
    """DQ(x) → Resize(linear) → Q with s_y = s_x, z_y = z_x: the oracle's own Resize on the code
    differences (x − z_x) as float32 (exact: small integers, dyadic weights), rounded half up
    (``PatternExactHalfUp``'s rounding), plus z_y, saturated."""

    def fused(self, draft, inputs):
        if not _linear_resize(draft):
            return None
        p = pattern(draft)
        return _requantised(p, _resize_on_codes(p, p.attrs), lambda v, t: self.round(v))


QNN_EP = "onnxruntime/onnxruntime-qnn onnxruntime/core/providers/qnn/builder/opbuilder"

DEVIATIONS = [
    Deviation("resize-nearest-neighbor-flags-only", frozenset({"Resize"}),
              "Your runtime runs a 4-D nearest Resize as a ResizeNearestNeighbor with only align_corners and "
              "half_pixel_centers: nearest_mode is ignored (the source index is floor((y + 0.5)·in/out) for "
              "half_pixel, floor(y·in/out) for asymmetric and pytorch_half_pixel, round(y·(in − 1)/(out − 1)) for "
              "align_corners), where the text rounds the mapped coordinate as nearest_mode says; the codes moved "
              "are requantised through float16 (8-bit outputs) and rounded half away from zero.",
              f"Qualcomm QNN HTP (onnxruntime-qnn 2.7.0, QNN SDK 2.51.0) measured here: {QNN_EP}/resize_op_builder.cc "
              "translates every rank-4 nearest Resize on the NPU to QNN's ResizeNearestNeighbor with the parameters "
              "align_corners (mode == align_corners) and half_pixel_centers (mode == half_pixel) and no nearest_mode; "
              "the index rule is TensorFlow's ResizeNearestNeighbor (tensorflow/core/kernels/image/"
              "resize_nearest_neighbor_op.cc: HalfPixelScalerForNN, floorf or roundf, clamped); 71 of the 77 failing "
              "nearest Resize cases of the corpus are this model bit for bit (the requantisation as "
              "resize-requantised-through-float16 measures it)",
              "nearest_mode = ceil, half_pixel, 4 → 8: output 1 reads input 1 by the text, input 0 here",
              ResizeNearestNeighborFlagsOnly, _nearest_rank4, ("basic", "fold", "ties")),
    Deviation("max-pool-pads-read-as-zero", frozenset({"MaxPool"}),
              "Your runtime pads a quantized MaxPool with the zero point, the code of the real value 0, where "
              "the text's padding never wins a maximum: a window of negative values that reaches into the padding "
              "gives 0; the maximum is requantised rounding half away from zero.",
              f"Qualcomm QNN HTP (onnxruntime-qnn 2.7.0, QNN SDK 2.51.0) measured here on its 16-bit kernels: "
              f"{QNN_EP}/pool_op_builder.cc passes ONNX's pads to QNN's PoolMax2d as pad_amount, an operator with no "
              "pad value, and every int16 and uint16 MaxPool case of the corpus with padding it fails but the "
              "same-lower ones is this model bit for bit (38 cases; int16 1d-k2-pads: y = −19414 by the text, the code of 0 here)",
              "int16, kernel 2, pads 1, a row of negative values: the first window is [pad, x0] and gives 0",
              MaxPoolPadsReadAsZero, _max_pool, ("geometry", "ties")),
    Deviation("cubic-resize-exclude-outside-ignored", frozenset({"Resize"}),
              "Your runtime ignores exclude_outside = 1 in a cubic Resize: the weights of sampling positions outside "
              "the input are kept (the edge values repeated) instead of set to 0 and the rest renormalised; the "
              "result is requantised through float16 (8-bit outputs) and rounded half away from zero.",
              f"Qualcomm QNN HTP (onnxruntime-qnn 2.7.0, QNN SDK 2.51.0) measured here: {QNN_EP}/resize_op_builder.cc "
              "passes exclude_outside to QNN's Resize as QNN_OP_RESIZE_PARAM_EXCLUDE_OUTSIDE, and 12 of the 16 failing "
              "int8 and uint8 cubic cases with exclude_outside = 1 (cubic_coeff_a −8.0 and 4.0, asymmetric) are this "
              "model bit for bit; not the 4 of the equal-parameter fold family",
              "cubic_coeff_a = −8.0, exclude_outside = 1, asymmetric 4 → 8: the last outputs differ by tens of codes",
              CubicResizeExcludeOutsideIgnored, _cubic_excluding, ("basic", "ties")),
    Deviation("linear-resize-codes-exact-half-up", frozenset({"Resize"}),
              "Your runtime computes a linear Resize whose output has the input's scale and zero point on the codes: "
              "the weighted average of the codes exactly, rounded half up; the text averages the float32 dequantized "
              "values and rounds half to even, so exact ties (the mean of an odd and an even code) go up here.",
              f"Qualcomm QNN HTP (onnxruntime-qnn 2.7.0, QNN SDK 2.51.0) measured here: {QNN_EP}/resize_op_builder.cc "
              "translates a quantized linear Resize to QNN's Resize (interpolation linear, the coordinate mode kept); "
              "every int8 and uint8 linear Resize of the corpus with s_y = s_x and z_y = z_x is this model bit for bit "
              "(18 cases); with s_y = 2·s_x its ties go half away from zero instead, as the exact half-away model rounds",
              "uint8, s_y = s_x, asymmetric 4 → 8: (x0 + x1)/2 with x0 + x1 odd, a tie: up here, to even by the text",
              LinearResizeCodesHalfUp, _linear_resize, ("fold",)),
    Deviation("resize-requantised-through-float16", frozenset({"Resize"}),
              "Your runtime requantises an 8-bit linear or cubic Resize through float16: the interpolated value in "
              "output codes, (Σ w·(x − z_x))·s_x/s_y, is rounded to float16 (11 significant bits) and then half away "
              "from zero, plus z_y; the text rounds the float32 value half to even, so values within a float16 ulp "
              "of a tie (a few hundredths of a code above 32) go to the tie's far side.",
              f"Qualcomm QNN HTP (onnxruntime-qnn 2.7.0, QNN SDK 2.51.0) measured here; the kernel is closed, "
              f"{QNN_EP}/resize_op_builder.cc maps the Resize to QNN's Resize: every int8 and uint8 linear and "
              "cubic (exclude_outside 0) Resize of the corpus whose output parameters differ from its input's is "
              "this model bit for bit (128 cases, 86 failing); its nearest Resize (ResizeNearestNeighbor) rounds "
              "the same way",
              "uint8, s_x/s_y = 1.6523564, a value 59 codes below z_x: −97.489 exactly, −97.5 in float16, so −98 here "
              "where the text gives −97",
              ResizeRequantisedThroughFloat16, _requantised_8_bit, ("basic", "ties")),
]

__all__ = ["CubicResizeExcludeOutsideIgnored", "DEVIATIONS", "LinearResizeCodesHalfUp", "MaxPoolPadsReadAsZero", "ResizeNearestNeighborFlagsOnly",
           "ResizeRequantisedThroughFloat16", "nearest_neighbor_indices", "requantise_codes"]

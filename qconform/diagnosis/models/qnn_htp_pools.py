"""What Qualcomm's QNN HTP computes for an 8-bit MaxPool pattern (DQ(x) → MaxPool → Q), measured on its
simulator: the QNN EP hands the pattern to QNN's PoolMax2d as one quantized operator (onnxruntime/
onnxruntime-qnn onnxruntime/core/providers/qnn/builder/opbuilder/pool_op_builder.cc: ``pads`` as
``pad_amount``, ``ceil_mode`` as ``rounding_mode``, rank 3 reshaped to a 4-D input of height 1, no
PoolMax3d on the NPU); the HTP kernels are closed, so these models say what their output codes are,
bit for bit, each regime measured on hand-built inputs (every code 0..255 through one window).

Every 8-bit MaxPool requantises the window's maximum through float16: d = max − z_x, then
y = half_away(fl16(d·s_x/s_y)) + z_y (fl16 rounding to nearest even; values within float16's spacing
of a tie land on it). Which windows it reads depends on the kernel the HTP picks:

- an input of height at most 8 (1-D inputs included) with padding at an end of an axis or ceil_mode
  on, and s_x ≠ s_y: the text's windows (padding never wins), but every maximum with d a non-zero
  multiple of 4 is read as d + 1 (``htp-max-pool-small-padded-code-bump``);
- taller inputs with padding: the padding holds z_x, as the 16-bit kernels' (max-pool-pads-read-as-zero);
- otherwise (no padding, padding at the beginnings only, or s_x = s_y): the text's windows.

Its AveragePool over windows that do not overlap (every stride its kernel size, no padding) and its
GlobalAveragePool, 8- and 16-bit, multiply the window's sum S = Σ(x − z_x) by a 15-bit multiplier,
M·2^-s = s_x/(s_y·N) with M rounded to nearest in [2^14, 2^15), add a constant and round half up:
y = ⌊S·M·2^-s + 2^-16 + 1/2⌋ + z_y; for 2×2 windows (N = 4) with s_x/s_y < 2 the constant is
2^(⌊log₂(s_x/s_y)⌋ − 5) (``htp-average-15-bit-reciprocal``; measured on every code sum of windows of
1×2, 2×1, 2×2, 2×3 and 3×3 at 4 to 22 ratios; its overlapping and padded windows follow other kernels).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from qconform import dtypes
from qconform.case import Draft
from qconform.diagnosis.models.base import Deviation
from qconform.diagnosis.models.fused_kernels import _pack, _saturate
from qconform.diagnosis.models.fused_pattern import float_ops_that, pattern
from qconform.diagnosis.models.qnn_htp_requant import float16_ratio
from qconform.oracle.arith import as_float64

#: float16's largest finite value: a requantised value past it is saturated by the output type anyway.
_F16_MAX = Fraction(65504)
#: The tallest input (NCHW height) the HTP's small padded MaxPool kernel takes (measured: 8 yes, 9 no).
SMALL_HEIGHT = 8
#: the pools that average (``FloatOp.averages``: AveragePool, GlobalAveragePool)
AVERAGING = float_ops_that("averages")


def _scalar(v) -> Fraction:
    return Fraction(float(np.asarray(v, np.float64).reshape(-1)[0]))


def half_away_float16(d: int, ratio: Fraction) -> int:
    """d·ratio rounded to float16 (nearest, ties to even), then to an integer half away from zero."""
    v = Fraction(d) * ratio
    if abs(v) > _F16_MAX:
        return int(math.copysign(2 ** 17, v))  # past float16's range: beyond every 8-bit code
    h = float16_ratio(v) if v else Fraction(0)
    return math.floor(abs(h) + Fraction(1, 2)) * (1 if h >= 0 else -1)


def _eight_bit_max_pool(d: Draft) -> bool:
    """DQ(x) → MaxPool → Q between 8-bit integers, per tensor, rank 3 or 4 (what the HTP runs)."""
    p = pattern(d) if d.graph else None
    if p is None or p.op != "MaxPool" or not p.operands or p.operands[0] is None:
        return False
    x = p.operands[0]
    tx, ty = dtypes.get(x.type), dtypes.get(p.y_type)
    return tx.is_integer and ty.is_integer and tx.bits == 8 and ty.bits == 8 and np.ndim(x.codes) in (3, 4) \
        and np.size(x.scale) == 1 and np.size(p.y_scale) == 1 and float(np.asarray(x.scale).reshape(-1)[0]) > 0


def _padding(p) -> tuple[bool, bool]:
    """(any padding or ceil_mode, padding at an end of an axis or ceil_mode on) as the EP passes them."""
    from qconform.oracle.graph_ops import pool_geometry

    _, _, _, begin, end, _ = pool_geometry(np.shape(p.operands[0].codes), p.attrs)
    ceil = bool(p.attrs.get("ceil_mode", 0))
    return any(begin) or any(end) or ceil, any(end) or ceil


def _small_end_padded(p) -> bool:
    """The HTP's small padded kernel: height ≤ 8, an end padded or ceil_mode, scales that differ."""
    x = p.operands[0]
    height = np.shape(x.codes)[2] if np.ndim(x.codes) == 4 else 1
    scales_differ = np.float32(np.asarray(x.scale).reshape(-1)[0]) != np.float32(np.asarray(p.y_scale).reshape(-1)[0])
    return height <= SMALL_HEIGHT and _padding(p)[1] and bool(scales_differ)


def _bumped(d: Draft) -> bool:
    return _eight_bit_max_pool(d) and _small_end_padded(pattern(d))


def _plain(d: Draft) -> bool:
    return _eight_bit_max_pool(d) and not _small_end_padded(pattern(d))


class HtpMaxPoolHalf:
    """DQ(x) → MaxPool → Q (8-bit) as the HTP's kernels: the maximum of each window (the text's, or
    padding holding z_x on inputs taller than 8), requantised through float16 (``half_away_float16``)."""

    _bump = False

    def fused(self, draft, inputs):
        if not (_bumped(draft) if self._bump else _plain(draft)):
            return None
        from qconform.oracle.graph_ops import pool_windows

        p = pattern(draft)
        x = p.operands[0]
        zx = int(np.asarray(as_float64(x.zero, x.type)).reshape(-1)[0])
        codes = np.asarray(as_float64(x.codes, x.type))
        height = codes.shape[2] if codes.ndim == 4 else 1
        fill = float(zx) if _padding(p)[0] and height > SMALL_HEIGHT else -np.inf
        windows, _, _ = pool_windows(codes, p.attrs, fill)
        top = windows.max(axis=-1).astype(np.int64) - zx
        if self._bump:
            top = np.where((top % 4 == 0) & (top != 0), top + 1, top)
        ratio = _scalar(x.scale) / _scalar(p.y_scale)
        q = np.vectorize(lambda t: half_away_float16(int(t), ratio), otypes=[np.int64])(top)
        y = _saturate(q + int(as_float64(p.y_zero, p.y_type)), p.y_type)
        return [("spec", [_pack(y, p.y_type)])]


class HtpMaxPoolSmallPaddedBump(HtpMaxPoolHalf):
    """The small padded kernel: the text's windows, a maximum d ≡ 0 (mod 4), d ≠ 0, read as d + 1."""

    _bump = True


def reciprocal_15_bit(k: Fraction) -> Fraction:
    """k as the HTP's average holds it: M·2^-s with M = k·2^s rounded to nearest, 2^14 ≤ M < 2^15."""
    s = 14 - math.floor(math.log2(k))
    m = math.floor(k * 2 ** s + Fraction(1, 2))
    return Fraction(m // 2, 2 ** (s - 1)) if m >= 2 ** 15 else Fraction(m, 2 ** s)


def average_code(total: int, n: int, ratio: Fraction) -> int:
    """One output code before z_y: the sum of n codes (z_x taken off) averaged as the HTP's kernel does."""
    bias = Fraction(2) ** (math.floor(math.log2(ratio)) - 5) if n == 4 and ratio < 2 else Fraction(1, 2 ** 16)
    return math.floor(total * reciprocal_15_bit(ratio / n) + bias + Fraction(1, 2))


def _non_overlapping_average(d: Draft) -> bool:
    """DQ(x) → GlobalAveragePool, or AveragePool with windows that tile the input (strides equal to the
    kernel, no padding, no ceil_mode, no dilation) → Q, 8- or 16-bit integers, per tensor, rank 3 or 4."""
    p = pattern(d) if d.graph else None
    if p is None or p.op not in AVERAGING or not p.operands or p.operands[0] is None:
        return False
    x = p.operands[0]
    tx, ty = dtypes.get(x.type), dtypes.get(p.y_type)
    if not (tx.is_integer and ty.is_integer and tx.bits in (8, 16) and ty.bits in (8, 16) and np.ndim(x.codes) in (3, 4)
            and np.size(x.scale) == 1 and np.size(p.y_scale) == 1 and float(np.asarray(x.scale).reshape(-1)[0]) > 0
            and float(np.asarray(p.y_scale).reshape(-1)[0]) > 0):
        return False
    if p.op == "GlobalAveragePool":
        return True
    from qconform.oracle.graph_ops import pool_geometry

    kernel, strides, dil, begin, end, extra = pool_geometry(np.shape(x.codes), p.attrs)
    return list(kernel) == list(strides) and not any(begin) and not any(end) and not any(extra) \
        and all(v == 1 for v in dil) and not p.attrs.get("ceil_mode", 0)


class HtpAverage15BitReciprocal:
    """DQ(x) → AveragePool (tiling windows) or GlobalAveragePool → Q as ``average_code`` per window."""

    def fused(self, draft, inputs):
        if not _non_overlapping_average(draft):
            return None
        p = pattern(draft)
        x = p.operands[0]
        zx = int(np.asarray(as_float64(x.zero, x.type)).reshape(-1)[0])
        d = np.asarray(as_float64(x.codes, x.type)).astype(np.int64) - zx
        if p.op == "GlobalAveragePool":
            sums = d.reshape(d.shape[:2] + (-1,)).sum(-1).reshape(d.shape[:2] + (1,) * (d.ndim - 2))
            n = int(np.prod(d.shape[2:]))
        else:
            from qconform.oracle.graph_ops import pool_windows

            windows, _, _ = pool_windows(d.astype(np.float64), p.attrs, 0.0)
            sums, n = windows.sum(axis=-1).astype(np.int64), windows.shape[-1]
        ratio = _scalar(x.scale) / _scalar(p.y_scale)
        q = np.vectorize(lambda t: average_code(int(t), n, ratio), otypes=[np.int64])(sums)
        y = _saturate(q + int(as_float64(p.y_zero, p.y_type)), p.y_type)
        return [("spec", [_pack(y, p.y_type)])]


MEASURED = "Qualcomm QNN HTP (onnxruntime-qnn 2.7.0, QNN SDK 2.51.0, the HTP simulator) measured here; the kernels' " \
           "source is not public, so this is measured only"
POOL_EP = "onnxruntime/onnxruntime-qnn onnxruntime/core/providers/qnn/builder/opbuilder/pool_op_builder.cc"

DEVIATIONS = [
    Deviation("htp-max-pool-float16-requant", frozenset({"MaxPool"}),
              "Your runtime requantises an 8-bit MaxPool's maximum through float16: (max − z_x)·s_x/s_y rounded to "
              "float16, then half away from zero, plus z_y; values within float16's spacing of a tie (1/16 of a code "
              "near 100) round as the tie does. On inputs taller than 8 with padding the padding holds z_x.",
              f"{MEASURED}: {POOL_EP} passes the pattern to QNN's PoolMax2d; every code 0..255 through one window "
              "(s_x/s_y = 0.9039 and 1.5343, five zero-point pairs) and the corpus's 8-bit MaxPool cases without "
              "padding, or padded at the beginnings only, are this model bit for bit",
              "uint8, s_x/s_y = 0.9039, z_x = 128, z_y = 129, maximum 227: exactly 218.483, float16 218.5, "
              "code 219 (the text's 218)",
              HtpMaxPoolHalf, _plain, ("basic", "geometry", "ties")),
    Deviation("htp-max-pool-small-padded-code-bump", frozenset({"MaxPool"}),
              "Your runtime, on an 8-bit MaxPool of an input at most 8 high that is padded at an end (or has "
              "ceil_mode) and whose scales differ, reads every window maximum that is a non-zero multiple of 4 codes "
              "from z_x as one code higher, then requantises through float16 (half away from zero); its padding "
              "never wins, as the text's.",
              f"{MEASURED}: {POOL_EP} passes pads as pad_amount and ceil_mode as rounding_mode to PoolMax2d; a single "
              "code per window over 256 channels shows the bump at heights 1..8 with an end pad or ceil_mode (not "
              "with beginning pads only, not at height 9 or more, not where s_x = s_y, whatever z_x), and every "
              "int8 and uint8 padded MaxPool case of the corpus is this model bit for bit",
              "uint8, s_y = 2·s_x, z_x = z_y = 128, 3×3, pads 1, 6×6: a maximum of 212 (d = 84) gives 171, "
              "the text's 170",
              HtpMaxPoolSmallPaddedBump, _bumped, ("geometry", "ties")),
    Deviation("htp-average-15-bit-reciprocal", AVERAGING,
              "Your runtime averages a quantized window that does not overlap its neighbours (GlobalAveragePool, or an "
              "AveragePool whose strides equal its kernel, unpadded) as Σ(x − z_x) times s_x/(s_y·N) held as a 15-bit "
              "multiplier M·2^-s, plus 2^-16 (for a 2×2 window with s_x/s_y < 2: plus 2^(⌊log₂(s_x/s_y)⌋ − 5)), rounded "
              "half up; the text rounds the exact mean half to even.",
              f"{MEASURED}: {POOL_EP} passes the window to QNN's PoolAvg2d (GlobalAveragePool: the whole input as one "
              "window); every code sum of 1×2, 2×1, 2×2, 2×3 and 3×3 windows at 4 to 22 ratios s_x/s_y, and every "
              "int8, uint8 and uint16 AveragePool and GlobalAveragePool case of the corpus of rank 3 or 4 with such "
              "windows, failing or passing, is this model bit for bit; not its 3-D kernels",
              "uint8, 2×3 windows, s_y = 2·s_x: a sum of 18 (1.5 exactly) gives 1 (the multiplier is 2^-16 low), "
              "a sum of −90 (−7.5) gives −7",
              HtpAverage15BitReciprocal, _non_overlapping_average, ("basic", "fold", "geometry", "ties")),
]

__all__ = ["DEVIATIONS", "HtpAverage15BitReciprocal", "HtpMaxPoolHalf", "HtpMaxPoolSmallPaddedBump", "average_code",
           "half_away_float16", "reciprocal_15_bit"]

"""What Qualcomm's QNN HTP computes for a single ONNX QLinear conv or matmul node, measured on its
simulator (the kernel is closed): the QNN EP hands it the node as one Conv2d/Conv3d/DepthWiseConv2d
or MatMul with the node's own scales and zero points on its tensors
(onnxruntime/onnxruntime-qnn ``builder/opbuilder/qlinear_conv_op_builder.cc`` and
``qlinear_matmul_op_builder.cc``: "QNN encodes quant params in tensor metadata"; the bias gets
scale x_scale·w_scale, offset 0, its codes unchanged).

Two measured steps:

- **Weights that leave int8.** An output channel whose weight codes minus zero point all fit int8
  is used as it is; another (uint8 with zero point 0, int8 with zero point ±127: differences up to
  ±255) is requantised to symmetric int8, scale s'_c = s_w·max(M⁺/127, M⁻/128) (M⁺, M⁻ the
  channel's largest positive and negative difference), codes ⌊(w − z_w)·s_w/s'_c + 1/2⌋.
- **The requantisation on the accumulator's own grid.** With u_c = s_x·s'_c, the grid is 2^e
  accumulator units, e = ⌊log₂(s_y/u_c)⌋ − 3 (the largest power-of-two multiple of u_c not above
  s_y/8); the output offset (z_y − qmin)·s_y/u_c and the bias (in the same units) are added as one
  integer, rounded to nearest: t = ⌊(acc + B)/2^e⌋, y = ⌊fl16(2^e·u_c/s_y)·t + 1/2⌋ + qmin,
  saturated: the QDQ patterns' 8-bit requantisation (``qnn_htp_requant.requantise_on_accumulator_grid``),
  on the held weights' scale.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from qconform import dtypes
from qconform.case import Draft
from qconform.declarations import operators
from qconform.diagnosis.models.base import Deviation
from qconform.diagnosis.models.qnn_htp_requant import MEASURED, requantise_on_accumulator_grid
from qconform.oracle import integer

#: the ONNX operators that requantise an accumulator (QLinearConv and the QLinear matmul), read from
#: their declarations: their inputs' names, and how each contracts ("conv" or "matmul")
_DECLARED = {o.op: o for o in operators.OPERATORS
             if o.kind is operators.Kind.REQUANTIZE and o.domain == operators.ONNX_DOMAIN}
OPS = frozenset(_DECLARED)
_NAMES = {op: tuple(i.name for i in o.inputs) for op, o in _DECLARED.items()}
_CONV, _MATMUL = ({op for op, o in _DECLARED.items() if o.contraction == c}.pop() for c in ("conv", "matmul"))


def symmetric_int8(diffs: np.ndarray, scales: list[Fraction]) -> tuple[np.ndarray, list[Fraction]]:
    """Weights (w − z_w, output channels on axis 0) as the HTP holds them: a channel whose differences
    fit int8 unchanged, another as symmetric int8 at s'_c = s_w·max(M⁺/127, M⁻/128), rounded half up."""
    codes = diffs.copy()
    held = []
    for c in range(diffs.shape[0]):
        d = diffs[c]
        ratio = max(Fraction(1), Fraction(max(int(d.max()), 0), 127), Fraction(max(-int(d.min()), 0), 128))
        if ratio > 1:
            codes[c] = np.vectorize(lambda v: math.floor(Fraction(int(v)) / ratio + Fraction(1, 2)), otypes=[np.int64])(d)
        held.append(scales[c] * ratio)
    return codes, held


def _inputs(d: Draft) -> dict:
    return {n: a for n, a in zip(_NAMES[d.op], d.inputs) if a is not None}


def applies(d: Draft) -> bool:
    """An 8-bit node of ``OPS`` with per-tensor activation and output parameters, positive scales and
    weights per tensor or (the conv) per output channel, as the QNN EP accepts them."""
    if d.op not in OPS:
        return False
    v = _inputs(d)
    names = _NAMES[d.op]
    if any(n not in v for n in names[:8]) or any(dtypes.get(v[n].type).bits != 8 or not dtypes.get(v[n].type).is_integer
                                                 for n in (names[0], names[3], names[7])):
        return False
    per_tensor = (names[1], names[2], names[6], names[7]) + ((names[4], names[5]) if d.op == _MATMUL else ())
    if any(np.size(v[n].value) != 1 for n in per_tensor):
        return False
    scales = [np.asarray(v[n].value, np.float64) for n in (names[1], names[4], names[6])]
    return all(np.all(np.isfinite(s) & (s > 0)) for s in scales) and np.ndim(v[names[0]].value) >= 1 \
        and np.ndim(v[names[3]].value) >= 1


class HtpQLinearSymmetricWeights:
    """The node as the HTP runs it: the accumulator over the weights ``symmetric_int8`` holds (the conv's
    ``conv_sums``, the matmul's ``accumulate``; their per-channel scale ratios kept for the
    requantisation), then ``requantise_on_accumulator_grid`` on each element, the bias (the exact sum
    less that accumulator) in the held weights' units: one reading, the runtime's."""

    _held: np.ndarray | None = None

    def _hold(self, diffs: np.ndarray) -> np.ndarray:
        """``symmetric_int8`` of (channels first) differences; the ratios s'_c/s_w kept."""
        codes, ratios = symmetric_int8(diffs, [Fraction(1)] * diffs.shape[0])
        self._held = np.asarray(ratios, object)
        return codes

    def conv_sums(self, x, x_zp, w, w_zp, attrs):
        wz = np.asarray(w_zp, np.int64)
        codes = self._hold(np.asarray(w, np.int64) - (wz.reshape((-1,) + (1,) * (w.ndim - 1)) if wz.size > 1 else wz.reshape(())))
        self._held = self._held.reshape((1, -1) + (1,) * (w.ndim - 2))
        self._acc = integer.conv_sums(x, x_zp, codes, np.zeros(codes.shape[0], np.int64), attrs)
        return self._acc

    def accumulate(self, da, db, raw, zeros, types):
        codes = np.moveaxis(self._hold(np.moveaxis(np.asarray(db, np.int64), -1, 0)), 0, -1)  # columns over every batch
        self._acc = np.matmul(np.asarray(da, np.int64), codes)
        return self._acc

    def add_readings(self, ev, accs, e, scales, yz, out_t, scale_t, touched, out_shape):
        if self._held is None or not out_t.is_integer or out_t.bits != 8:
            return super().add_readings(ev, accs, e, scales, yz, out_t, scale_t, touched, out_shape)
        exact = np.broadcast_to(accs[-1][1], out_shape)
        acc = np.broadcast_to(self._acc, out_shape)
        held = np.broadcast_to(self._held, out_shape)
        sx = np.broadcast_to(scales[0], out_shape)
        sw = np.broadcast_to(scales[1], out_shape)
        sy, lo, hi = Fraction(float(scales[2])), *out_t.qrange
        y = np.empty(out_shape, np.float64)
        for i, a in np.ndenumerate(acc):
            u = Fraction(float(sx[i])) * Fraction(float(sw[i])) * held[i]
            y[i] = requantise_on_accumulator_grid(int(a), Fraction(int(exact[i]) - int(a)) / held[i], u, sy, int(yz), lo, hi)
        self._held = None
        out, undefined = self.encode_output(y, out_t)
        ev.add("spec", (out,), (undefined,))


DEVIATIONS = [
    Deviation("htp-qlinear-weights-symmetric-int8", OPS,
              f"Your runtime runs an 8-bit {_CONV} or {_MATMUL} with each output channel whose weight codes "
              "minus zero point leave int8 (uint8 with zero point 0, int8 with zero point ±127) requantised to "
              "symmetric int8 (s_w·max(M⁺/127, M⁻/128), half up), and requantises the accumulator on a grid of 2^e accumulator "
              "units (e = ⌊log₂(s_y/(s_x·s_w))⌋ − 3) with the output offset rounded to an accumulator unit, times "
              "the multiplier rounded to float16, half up; the text multiplies the exact sum by s_x·s_w/s_y once.",
              f"{MEASURED}: the QNN EP builds these nodes into HTP Conv2d/MatMul ops with the node's scales and zero "
              "points on the tensors and the bias at x_scale·w_scale (onnxruntime/onnxruntime-qnn builder/opbuilder/"
              f"qlinear_conv_op_builder.cc, qlinear_matmul_op_builder.cc); 77 of the 144 failing {_CONV} cases no "
              "other model named (the 22 with weights kept but for int32-extremes bias, 55 of the 120 with weights "
              f"requantised) and 66 of the 78 such {_MATMUL} cases (all 15 kept, 51 of 63 requantised) are this "
              "model bit for bit; not the int32-extremes bias cases (the HTP saturates where the exact value is in "
              f"range), sums beyond 2^31, nor 63 {_CONV} and 8 {_MATMUL} cases with requantised weights, off by "
              "one code in 1 to 21 elements (the conversion's details not pinned down)",
              f"{_CONV} uint8, w_zero_point 0, a channel w = [100, 140, 18], s_x = s_w = 1, s_y = 512, z_y = 128: "
              "held as [91, 127, 16] at 140/127, x − z_x = [2, 115, −95] (exact 156.496) gives 157, the text 156",
              HtpQLinearSymmetricWeights, applies, ("attributes", "zero-points", "random", "tails")),
]

__all__ = ["DEVIATIONS", "HtpQLinearSymmetricWeights", "applies", "symmetric_int8"]

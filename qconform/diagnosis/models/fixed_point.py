"""The integer-kernel vocabulary (issue 64): how kernels requantise with fixed-point multipliers and
shifts instead of the graph's float division, each on the oracle's shared integer body.

- Q31 multipliers (TFLite ``QuantizeMultiplier``: the real multiplier as q·2^(shift−31), q rounded
  half away) applied with two roundings (gemmlowp ``SaturatingRoundingDoublingHighMul``, its ties
  toward +∞ -- the nudge 1 − 2^30 of a negative product truncates toward zero --, then
  ``RoundingDivideByPOT``, its ties away from zero) or one (``TFLITE_SINGLE_ROUNDING``, TOSA
  RESCALE ``double_round = false``, XNNPACK ``rndnu``: (acc·q + 2^(n−1)) >> n, half up);
- an Add whose operands are each rescaled to a common scale first, in fixed point, then summed and
  rescaled again (TFLite's quantized ``Add``), against the graph's one rounding of the sum;
- averages as a multiply by a precomputed reciprocal: a float32 fl32(fl32(s_x/N)/s_y) (MLAS x86) or
  a 24-bit fixed-point one rounded half up (MLAS NEON ``MlasCalculateParametersForGloabalAveragePool``);
- the whole pattern as one exact requantisation rounded half up (Qualcomm QNN HTP, measured here).

The accumulating patterns (MatMul, Gemm, Conv) reuse ``FusedAccumulator``'s integer accumulator
(``fused_kernels``, on ``qconform.oracle.integer``) and replace only its requantisation step.
"""
from __future__ import annotations

from qconform.diagnosis.models.base import Deviation
from qconform.diagnosis.models.fixed_point_kernels import (
    ACCUMULATING, ADD_SUB, AVERAGES, EXACT_OR_MOVED, ORDER_PRESERVING, AddOperandsRescaledFirst,
    AverageFixedPointReciprocal, AverageFloatReciprocal, MovedCodesUnrequantised, PatternExactHalfAway,
    PatternExactHalfEven, PatternExactHalfUp, PatternExactHalfUpBiased, RequantiseQ31DoubleRounding,
    RequantiseQ31SingleRounding, _accumulating, _average, _binary, _exact_or_split, _moved_unrequantised)

TFLITE = ("TFLite tensorflow/lite/kernels/internal/quantization_util.cc QuantizeMultiplier and common.h "
          "MultiplyByQuantizedMultiplier; gemmlowp fixedpoint/fixedpoint.h")

DEVIATIONS = [
    Deviation("fused-requantise-q31-double-rounding", ACCUMULATING,
              "Your runtime computes DequantizeLinear(x), DequantizeLinear(w) → MatMul/Gemm/Conv → QuantizeLinear as "
              "one integer kernel requantising with a Q31 multiplier and a shift: SaturatingRoundingDoublingHighMul "
              "(its ties toward +∞), then RoundingDivideByPOT (its ties away from zero) — two roundings where the "
              "graph divides once and rounds half to even.",
              f"{TFLITE} (the reference kernels' requantisation, and gemmlowp's output stage)",
              "acc·m within 2^-31 of a tie after the high multiply, or an exact tie of a negative value",
              RequantiseQ31DoubleRounding, _accumulating, ("ties", "basic")),
    Deviation("fused-requantise-q31-single-rounding", ACCUMULATING,
              "Your runtime requantises the integer accumulator of MatMul/Gemm/Conv with a Q31 multiplier q and one "
              "rounding shift, (acc·q + 2^(n−1)) >> n: exact ties round up (toward +∞), where the graph rounds half "
              "to even.",
              "TFLite common.h MultiplyByQuantizedMultiplier under TFLITE_SINGLE_ROUNDING; TOSA RESCALE with "
              "double_round = false (apply_scale_32); XNNPACK src/qs8-requantization rndnu",
              "s_y = s_x·s_w·2^k: accumulators whose quotient is an exact tie with an odd floor",
              RequantiseQ31SingleRounding, _accumulating, ("ties",)),
    Deviation("fused-add-operands-rescaled-first", ADD_SUB,
              "Your runtime computes DequantizeLinear, DequantizeLinear → Add/Sub → QuantizeLinear in fixed point, "
              "rescaling each operand to a common scale 2·max(s_a, s_b) first (Q31 multipliers, 20 bits of headroom "
              "for 8-bit codes, two roundings each), then the sum to s_y: three roundings where the graph has one.",
              "TFLite tensorflow/lite/kernels/internal/reference/add.h (AddElementwise: left_shift, "
              "input1_multiplier, MultiplyByQuantizedMultiplierSmallerThanOneExp) and add.cc's parameter setup",
              "s_b = 2·s_a, s_y = s_a: operands rounded once each before their sum",
              AddOperandsRescaledFirst, _binary, ("ties", "basic")),
    Deviation("average-float-reciprocal", AVERAGES,
              "Your runtime averages the quantized window as Σ(x − z_x) times a float32 multiplier "
              "fl32(fl32(s_x/N)/s_y), rounded half to even: a reciprocal of the count and of s_y precomputed, "
              "where the graph divides the float mean by s_y once.",
              "onnxruntime onnxruntime/core/mlas/lib/qlgavgpool.cpp MlasQLinearGlobalAveragePool (x86: "
              "ScaleInput / ImageSize / ScaleOutput broadcast and multiplied)",
              "a 3×3 window (N = 9): fl32(s_x/9) inexact, quotients near a tie",
              AverageFloatReciprocal, _average, ("basic", "ties")),
    Deviation("average-fixed-point-reciprocal", AVERAGES,
              "Your runtime averages the quantized window in integers: Σ(x − z_x) times the 24-bit mantissa of "
              "fl32(s_x/(s_y·N)), shifted right with one rounding half up, where the graph rounds the mean's "
              "quotient half to even.",
              "onnxruntime onnxruntime/core/mlas/lib/qlgavgpool.cpp (NEON) "
              "MlasCalculateParametersForGloabalAveragePool: Multiplier = mantissa | 0x00800000, "
              "Shift = 127 + 23 − exponent, Rounding = 1 << (Shift − 1)",
              "s_y = 2·s_x, a 2×2 window: sums ≡ 4 (mod 8) are exact ties, rounded up",
              AverageFixedPointReciprocal, _average, ("ties", "basic")),
    Deviation("pattern-exact-half-up", EXACT_OR_MOVED,
              "Your runtime computes DequantizeLinear … → op → QuantizeLinear as one requantisation in exact "
              "(integer) arithmetic — the codes times the exact ratios s/s_y, no float32 rounding of the "
              "dequantized values or of the op's result — and rounds half up (floor(v + 1/2)) where the graph "
              "rounds its float32 value half to even: exact ties go up, and values the graph's float32 steps "
              "move across a tie round the other way.",
              "Qualcomm QNN HTP (onnxruntime-qnn 2.7.0, QNN SDK 2.51.0) measured here: every tie-rich and "
              "zero-point case of Add and Sub it fails is this model bit for bit (0 of 256 elements differ), "
              "as its DequantizeLinear → QuantizeLinear Convert is (requantise-half-up, research/qdq-graphs.md §4 "
              "M10); Hexagon NN's roundf_u32 adds 0.5 and truncates (XiaoMi/nnlib hexagon/include/quantize.h)",
              "Add, s_b = s_a·2^j, s_y = s_a·2^k: sums of odd parity are exact ties in exact arithmetic",
              PatternExactHalfUp, _exact_or_split, ("ties", "zero-points")),
    Deviation("moved-codes-unrequantised", ORDER_PRESERVING,
              "Your runtime runs DequantizeLinear → a data-movement op (DepthToSpace, Pad, nearest Resize, …) → "
              "QuantizeLinear on the codes alone: it moves the input codes as they are and ignores the output's "
              "scale and zero point, where the graph requantises (x − z_x)·s_x/s_y + z_y.",
              "Qualcomm QNN HTP (onnxruntime-qnn 2.7.0, QNN SDK 2.51.0) measured here: every DepthToSpace case and "
              "the Pad and nearest-Resize cases whose output quantisation differs from the input's are this model "
              "bit for bit (the QNN EP folds the DequantizeLinear/QuantizeLinear pair around a data-movement node "
              "into one quantized tensor; QAIRT's quantization guidance 'Handle data movement ops' expects the "
              "tool to give both sides one encoding)",
              "DepthToSpace int8, s_y = 3·s_x: the graph divides the codes by 3, this model keeps them",
              MovedCodesUnrequantised, _moved_unrequantised, ("basic", "ties")),
    Deviation("pattern-exact-half-up-biased", EXACT_OR_MOVED,
              "Your runtime computes the pattern as one exact requantisation (pattern-exact-half-up) and adds a small "
              "upward bias (about 2^-7 of a code) before rounding half up: values just below a tie go up too.",
              "Qualcomm QNN HTP (onnxruntime-qnn 2.7.0, QNN SDK 2.51.0) measured here on the random draws of its "
              "data-movement, Add, Sub and accumulating patterns; the same bias as its Convert "
              "(requantise-half-up-biased, research/qdq-graphs.md §4 M10: the reported 0.0372/121 → 0.0291/3 "
              "requantisation gives 116 for 115.4948…)",
              "Identity uint8 0.0372/121 → 0.0291/3, x = 209: exactly 115.4948…, the bias makes it 116",
              PatternExactHalfUpBiased, _exact_or_split, ("basic",)),
    Deviation("pattern-exact-half-away", EXACT_OR_MOVED,
              "Your runtime computes the pattern as one requantisation in exact (integer) arithmetic and rounds "
              "half away from zero, where the graph rounds its float32 value half to even: exact ties of negative "
              "values go down, of positive ones up.",
              "Qualcomm QNN HTP (onnxruntime-qnn 2.7.0, QNN SDK 2.51.0) measured here: its 8-bit DequantizeLinear → "
              "Identity → QuantizeLinear cases with s_y = 2^k·s_x are this model bit for bit (x = 5, z = 128, "
              "s_y = 2·s_x: −61.5 gives code 66, not 67); TFLite's and gemmlowp's rounding (RoundingDivideByPOT)",
              "uint8, z_x = z_y = 128, s_y = 2·s_x: codes below the zero point of odd distance are negative ties",
              PatternExactHalfAway, _exact_or_split, ("ties",)),
    Deviation("pattern-exact-half-even", EXACT_OR_MOVED,
              "Your runtime computes the pattern as one requantisation in exact (integer) arithmetic, rounded half "
              "to even as the text rounds, but from the exact value: where the graph's float32 dequantized values "
              "or float op result move a value onto or off a tie, the code differs by one.",
              "Qualcomm QNN HTP (onnxruntime-qnn 2.7.0, QNN SDK 2.51.0) measured here: its uint8 DequantizeLinear → "
              "Relu → QuantizeLinear cases with s_y = 2^k·s_x are this model bit for bit; any integer-only kernel "
              "with an exact multiplier (an integer shift for power-of-two ratios) computes this",
              "s_y = 2·s_x with s_x not a power of two: fl32((x − z)·s_x)/s_y is not the exact tie (x − z)/2",
              PatternExactHalfEven, _exact_or_split, ("ties",)),
]

#: AverageFloatReciprocal and AverageFixedPointReciprocal are also the contrib ops' (contrib_qlinear).
__all__ = ["AverageFixedPointReciprocal", "AverageFloatReciprocal", "DEVIATIONS"]

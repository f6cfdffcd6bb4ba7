"""onnxruntime's QOperator-format com.microsoft ops done the way onnxruntime's CPU kernels (MLAS) do
them, one mechanism per model, each over the oracle's own steps (qconform/docs/semantics.md#ms-qlinear):

- QLinearAdd on x86 (``qladd_avx2.cpp``): the scale ratios A_s/C_s and B_s/C_s formed in float32, the
  zero points folded into one float32 constant, two fused multiply-adds on the raw codes, then
  ``cvtps`` (ties to even) — the zero point is inside the rounded value;
- the same without FMA (``qladd.cpp``, SSE2), and the portable kernel (``MlasQLinearAddKernelRawHelper``,
  the WebAssembly build): the formula in float32, the zero point added before rounding;
- QLinearAdd on Arm (``qladd.cpp``, NEON): the ratios as 22-bit integer multipliers
  ``lrintf(ratio·2^(21−e))`` sharing one right shift, rounded half away from zero;
- QLinearMul on x86 (``qlmul.cpp``): the product times fl32(fl32(A_s·B_s)/C_s), plus C_zp in float32,
  then rounded — the quantized matmul's zero-point-before-rounding mixin, on QLinearMul;
- QLinearSigmoid (``qlinear_lookup_table.cc``, ``logistic.cpp``): the 256-entry table's float function
  is MLAS's rational logistic approximation (Eigen's coefficients, inputs clamped to ±18,
  p/q + 1/2 with fused multiply-adds; without them in the generic kernel, the WebAssembly build's);
- QLinearAveragePool (``qlinear_pool.cc``): ``nearbyintf(y / y_scale + y_zero_point)``: the zero
  point added to the float32 quotient before rounding;
- QLinearGlobalAveragePool (``qlgavgpool.cpp``): Σ(x − z_x) times a float32 reciprocal — the patterns'
  average models, on the op's own graph;
- QLinearSoftmax (``qlinear_softmax.cc``): quantized with ``floor(1 / y_scale)`` in place of
  ``1 / y_scale``; its int8 kernel clamped at 255 as the uint8 one (onnxruntime#29727, fixed).
QLinearLeakyRelu's table holds the spec's own values (alpha·x in float32, then MlasQuantizeLinear),
and QLinearConcat, QGemm (MLAS's float requantisation, ``multiplier-float32``) follow the spec: no
model for them.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from qconform.declarations import contrib_qlinear as decl
from qconform.diagnosis.models.base import _dev, deviating_oracle
from qconform.diagnosis.models.fixed_point import AverageFixedPointReciprocal, AverageFloatReciprocal
from qconform.diagnosis.models.matmul import QlmmZeroPointBeforeRounding
from qconform.diagnosis.models.zero_point import ZeroPointBeforeRounding
from qconform.oracle.graph import FloatOp, _round_fraction_f32

ADD, MUL, SIGMOID = decl.QLINEAR_ADD.op, decl.QLINEAR_MUL.op, decl.QLINEAR_SIGMOID.op
POOL, GLOBAL_POOL, SOFTMAX = decl.QLINEAR_AVERAGE_POOL.op, decl.QLINEAR_GLOBAL_AVERAGE_POOL.op, decl.QLINEAR_SOFTMAX.op
_F32 = "float32"


def _f32(v) -> float:
    return float(np.float32(v))


def _fma(a: float, b: float, c: float) -> float:
    """a·b + c rounded once to float32 (a fused multiply-add)."""
    return _round_fraction_f32(Fraction(a) * Fraction(b) + Fraction(c))


# -- QLinearAdd ------------------------------------------------------------------------------------------
def _mul_add(a: float, b: float, c: float) -> float:
    """a·b + c as two float32 operations (a multiply rounded, then an add rounded)."""
    return _f32(np.float32(np.float32(a) * np.float32(b)) + np.float32(c))


class AddFloatRatios:
    """MLAS x86 QLinearAdd (AVX2): r_a = fl32(A_s/C_s), r_b = fl32(B_s/C_s), F = fl32(C_zp −
    fl32(fl32(r_a·A_zp) + fl32(r_b·B_zp))); y = RNE(fma(A, r_a, fma(B, r_b, F))) on the raw codes
    (``cvtps``: a value beyond int32 converts to INT32_MIN), saturated."""

    _fused = staticmethod(_fma)

    def add_results(self, a, b, zps, scales, czp):
        a_s, b_s, c_s = scales
        ra, rb = _f32(np.float32(a_s) / np.float32(c_s)), _f32(np.float32(b_s) / np.float32(c_s))
        fixed = _f32(np.float32(czp) - np.float32(np.float32(ra * zps[0]) + np.float32(rb * zps[1])))
        f = self._fused
        v = np.rint([f(float(x), ra, f(float(y), rb, fixed)) for x, y in zip(a.ravel(), b.ravel())])
        v = np.where(np.abs(v) < 2.0**31, v, -(2.0**31))  # cvtps: out of int32's range, 0x80000000
        return [("exact-rational", np.asarray(v, np.float64).reshape(a.shape))]


class AddFloatRatiosUnfused(AddFloatRatios):
    """MLAS QLinearAdd without FMA (SSE2, and the WebAssembly build): the same ratios and constant, each
    product and sum rounded on its own: RNE((F + fl32(A·r_a)) + fl32(B·r_b))."""

    @staticmethod
    def _fused(x: float, r: float, acc: float) -> float:
        return _mul_add(x, r, acc)


class AddFloatFormula:
    """MLAS's portable QLinearAdd (MlasQLinearAddKernelRawHelper: the WebAssembly build, and the
    fallback of the Arm path): fl32(fl32(fl32(A_s·(A − A_zp)) + fl32(B_s·(B − B_zp))) / C_s), then
    nearbyintf of that plus C_zp in float32: the text's formula in float32, the zero point added before
    rounding."""

    def add_results(self, a, b, zps, scales, czp):
        a_s, b_s, c_s = (np.float32(s) for s in scales)
        da, db = (a - zps[0]).astype(np.float32), (b - zps[1]).astype(np.float32)
        with np.errstate(all="ignore"):
            v = np.float32(np.float32(a_s * da) + np.float32(b_s * db)) / c_s
            return [("exact-rational", np.rint(np.float32(v + np.float32(czp))).astype(np.float64))]


def add_fixed_point_parameters(ra: float, rb: float) -> tuple[int, int, int] | None:
    """MlasCalcQLinearAddParameters: (shift, multiplier a, multiplier b), or None (the float fallback)."""
    if not all(2.0**-14 <= r < 256.0 for r in (ra, rb)):
        return None
    exponent = int((np.float32(max(ra, rb)).view(np.uint32) >> 23)) - 127
    shift = 21 - exponent
    if not 13 <= shift <= 31:
        return None
    unit = 2.0**shift
    ma, mb = int(np.rint(np.float32(ra * unit))), int(np.rint(np.float32(rb * unit)))
    if not (ma < 0x400000 and mb < 0x400000 and (ma >= 0x200000 or mb >= 0x200000)):
        return None
    return shift, ma, mb


class AddFixedPoint:
    """MLAS Arm QLinearAdd (NEON): acc = (A − A_zp)·M_a + (B − B_zp)·M_b in int32, shifted right with
    rounding half away from zero (``vsraq`` of the sign, then ``vrshlq``), narrowed to int16 with
    saturation, C_zp added with saturation, narrowed; the float fallback where the multipliers do
    not fit: fl32(fl32(fl32(A_s·a) + fl32(B_s·b))/C_s) clamped, then nearbyint(v + C_zp)."""

    def add_results(self, a, b, zps, scales, czp):
        a_s, b_s, c_s = (np.float32(s) for s in scales)
        da, db = (a - zps[0]).astype(np.int64), (b - zps[1]).astype(np.int64)
        params = add_fixed_point_parameters(_f32(a_s / c_s), _f32(b_s / c_s))
        if params is None:
            return AddFloatFormula.add_results(self, a, b, zps, scales, czp)
        shift, ma, mb = params
        acc = da * ma + db * mb
        acc = acc + (acc >> 63)  # vsraq_n_s32(acc, acc, 31): minus one where negative
        acc = (acc + (1 << (shift - 1))) >> shift  # vrshlq: a rounding shift right
        acc = np.clip(np.clip(acc, -32768, 32767) + czp, -32768, 32767)
        return [("exact-rational", acc.astype(np.float64))]


# -- the composed ops ------------------------------------------------------------------------------------------
def _mlas_logistic(x: float, fma=_fma) -> float:
    """MLAS's logistic kernel: x clamped to [−18, 18], p(x)/q(x) + 1/2 with Eigen's coefficients,
    every multiply-add fused (FMA3) or rounded twice (``fma=_mul_add``: the generic kernel), clamped
    to [0, 1]."""
    c = [_f32(v) for v in (4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05,
                           8.51377133304701e-03, 2.48287947061529e-01, 6.10247389755681e-13,
                           5.76102136993427e-09, 6.29106785017040e-06, 1.70198817374094e-03,
                           1.16817656904453e-01, 9.93151921023180e-01)]
    v = min(max(_f32(x), -18.0), 18.0)
    v2 = _f32(v * v)
    p = fma(v2, c[0], c[1])
    for k in c[2:5]:
        p = fma(p, v2, k)
    p = _f32(p * v)
    q = fma(v2, c[5], c[6])
    for k in c[7:]:
        q = fma(q, v2, k)
    return min(max(_f32(_f32(np.float32(p) / np.float32(q)) + 0.5), 0.0), 1.0)


SIGMOID_NODE = "Sigmoid"  # the float node of QLinearSigmoid's graph (qconform/oracle/qlinear_composed.py)


def _logistic_table(fma) -> FloatOp:
    """The graph's Sigmoid node as MLAS's logistic approximation with ``fma`` (a float op of the
    registry's kind, which the graph's ``float_oracle`` step hands its Sigmoid node to)."""
    def values(node, ins, where):
        x = ins[0]
        return [np.asarray([_mlas_logistic(float(v), fma) for v in x.ravel()], np.float32).reshape(x.shape)]
    return FloatOp(SIGMOID_NODE, values)


_FMA_TABLE, _UNFUSED_TABLE = _logistic_table(_fma), _logistic_table(_mul_add)


class SigmoidTableMlasLogistic:
    """QLinearSigmoid's table built by MLAS's logistic approximation (``MlasComputeLogistic``)."""

    def float_oracle(self, node):
        return _FMA_TABLE if node.op == SIGMOID_NODE else None


class SigmoidTableMlasLogisticUnfused:
    """QLinearSigmoid's table by MLAS's generic logistic kernel (no FMA: the WebAssembly build)."""

    def float_oracle(self, node):
        return _UNFUSED_TABLE if node.op == SIGMOID_NODE else None


class QuantizeZeroPointBeforeRounding:
    """The graph's QuantizeLinear node as ``nearbyintf(y / y_scale + y_zero_point)`` in float32."""

    def node_oracle(self, sub):
        return deviating_oracle(sub, ZeroPointBeforeRounding) if sub.op == "QuantizeLinear" else None


class FloorReciprocalQuotient:
    """QuantizeLinear's quotient as y · floor(1 / y_scale) in float32."""

    def quotient(self, x, s, prec):
        with np.errstate(all="ignore"):
            return self.fl(_F32, np.asarray(x, np.float64) * np.floor(self.fl(_F32, 1.0 / np.asarray(s, np.float64))))


class Int8SaturatesAt255:
    """QuantizeLinear's saturation with uint8's upper bound for an int8 output: 128 … 255 wrap around."""

    def saturate(self, v, t):
        y, nan = super().saturate(v, t)
        if getattr(t, "name", t) != "int8":
            return y, nan
        wide = np.where(nan, 0.0, np.minimum(np.asarray(v, np.float64), 255.0))
        return np.where(wide > 127, wide - 256, y).astype(np.int64), nan


class SoftmaxInt8SaturationWraps:
    """QLinearSoftmax's int8 kernel clamps at 255, as the uint8 one does, then casts to int8."""

    def node_oracle(self, sub):
        return deviating_oracle(sub, Int8SaturatesAt255) if sub.op == "QuantizeLinear" else None


class SoftmaxFloorReciprocalScale:
    """QLinearSoftmax's output quantized with floor(1 / y_scale) (an integer) in place of 1 / y_scale."""

    def node_oracle(self, sub):
        return deviating_oracle(sub, FloorReciprocalQuotient) if sub.op == "QuantizeLinear" else None


#: The deviations of this step, each beside its mixin above (the registry's order: ``ORDER``).
DEVIATIONS = [
    _dev("qlinear-add-float-ratios", ADD,
         "Your QLinearAdd multiplies the raw codes by float32 ratios A_scale/C_scale and B_scale/C_scale with "
         "fused multiply-adds onto a float32 constant holding every zero point, and rounds that: the zero "
         "point is inside the rounded value and the ratios round where the formula has none.",
         "onnxruntime onnxruntime/core/mlas/lib/intrinsics/avx2/qladd_avx2.cpp MlasQLinearAddKernelAvx2Helper "
         "(VectorFixedPart, _mm256_fmadd_ps, _mm256_cvtps_epi32); microsoft/onnxruntime#25512 (QLinearAdd gives "
         "-112 where the formula's value is -112.50000794); onnxruntime 1.32.0 on x86 in this suite: the ties, "
         "zero-points and large-scales cases of QLinearAdd",
         "QLinearAdd int8, A=-127, A_scale=0.5, B=92, B_scale=0.25, B_zero_point=3, C_scale=0.5, C_zero_point=1: "
         "(−63.5 + 22.25)/0.5 = −82.5 → −82 + 1 = −81 expected, −82 given",
         AddFloatRatios, families=("ties", "zero-points", "saturation")),
    _dev("qlinear-add-float-ratios-unfused", ADD,
         "Your QLinearAdd multiplies the raw codes by float32 ratios A_scale/C_scale and B_scale/C_scale and adds "
         "them onto a float32 constant holding every zero point, each product and sum rounded on its own, then "
         "rounds: the zero point is inside the rounded value.",
         "onnxruntime onnxruntime/core/mlas/lib/qladd.cpp MlasQLinearAddKernelHelper (SSE2: VectorFixedPart, "
         "_mm_mul_ps, _mm_add_ps, _mm_cvtps_epi32), the x86 kernel without AVX2",
         "QLinearAdd uint8, A_scale = B_scale = 1/3, C_scale = 2/3: (F + fl32(A·r)) + fl32(B·r) rounds where the "
         "fused form does not",
         AddFloatRatiosUnfused, families=("readings", "random", "ties")),
    _dev("qlinear-add-float-formula", ADD,
         "Your QLinearAdd evaluates the formula in float32 — fl32(fl32(A_s·(A − A_zp)) + fl32(B_s·(B − B_zp))) / "
         "C_s — and rounds it with C_zero_point already added: rint(v + C_zp).",
         "onnxruntime onnxruntime/core/mlas/lib/qladd.cpp MlasQLinearAddKernelRawHelper (the portable kernel); "
         "onnxruntime-web 1.25 (WebAssembly) in this suite: every failing QLinearAdd case bit for bit",
         "QLinearAdd uint8, A_scale = B_scale = fl32(1/3), C_scale = fl32(2/3), A=2, B=247, zero points 128: the "
         "float32 formula gives −3.0000002 where the exact value is −3.5, and C_zp added first: 125",
         AddFloatFormula, families=("readings", "ties", "zero-points")),
    _dev("qlinear-add-fixed-point", ADD,
         "Your QLinearAdd scales both operands by 22-bit integer multipliers lrintf(ratio·2^(21−e)) sharing one "
         "right shift, rounded half away from zero, then adds C_zero_point with saturation.",
         "onnxruntime onnxruntime/core/mlas/lib/qladd.cpp MlasCalcQLinearAddParameters and the NEON "
         "MlasQLinearAddKernelHelper (vmlaq_s32, vsraq_n_s32, vrshlq_s32, vqaddq_s16)",
         "QLinearAdd uint8, A_scale = B_scale = 1, C_scale = 2, zero points 0, A=1, B=4: 2.5 → 2 expected, "
         "3 given",
         AddFixedPoint, families=("ties", "readings", "random")),
    _dev("qlinear-mul-zero-point-before-rounding", MUL,
         "Your QLinearMul adds C_zero_point to the float32 product before rounding: "
         "rint(fl32(fl32(p)·fl32(fl32(A_s·B_s)/C_s)) + C_zp).",
         "onnxruntime onnxruntime/core/mlas/lib/qlmul.cpp MlasQLinearMulVectorS16 (SSE2: _mm_add_ps of "
         "VectorZeroPointC, then _mm_cvtps_epi32); onnxruntime 1.32.0 on x86 in this suite: the ties and "
         "saturation cases of QLinearMul",
         "QLinearMul int8, A=-5, B=-42, B_zero_point=3, scales 1, 1, C_scale=2, C_zero_point=1: 112.5 → 112 + 1 = "
         "113 expected, 114 given",
         QlmmZeroPointBeforeRounding, families=("ties", "saturation", "readings")),
    _dev("sigmoid-table-mlas-logistic", SIGMOID,
         "Your QLinearSigmoid's table holds MLAS's rational approximation of the logistic function "
         "(x clamped to ±18, p/q + 1/2), whose cancellation against 1/2 loses sigmoid's small values.",
         "onnxruntime onnxruntime/contrib_ops/cpu/quantization/qlinear_lookup_table.cc QlinearBuildLookupTable "
         "and onnxruntime/core/mlas/lib/logistic.cpp (Eigen's coefficients, FMA3 kernel on x86); "
         "microsoft/onnxruntime#22557 (the same kernel's Sigmoid(-18) = -5.96e-8: the cancellation against 1/2); "
         "onnxruntime 1.32.0 in this suite: the fine-output-grid cases",
         "QLinearSigmoid uint8, x_scale 1/8, x_zero_point 255, y_scale 2^-24: sigmoid(−17.75) = 1.96e-8 is code 0 "
         "(0.33 of 2^-24), the approximation gives code 1",
         SigmoidTableMlasLogistic, families=("exhaustive",)),
    _dev("sigmoid-table-mlas-logistic-unfused", SIGMOID,
         "Your QLinearSigmoid's table holds MLAS's rational approximation of the logistic function computed "
         "without fused multiply-adds (x clamped to ±18, p/q + 1/2), whose cancellation against 1/2 loses "
         "sigmoid's small values.",
         "onnxruntime onnxruntime/core/mlas/lib/logistic.cpp MlasLogisticKernel (the generic kernel: separate "
         "multiplies and adds); microsoft/onnxruntime#22557; onnxruntime-web 1.25 (WebAssembly) in this suite: "
         "the fine-output-grid cases bit for bit",
         "QLinearSigmoid uint8, x_scale 1/8, x_zero_point 255, y_scale 2^-24: sigmoid's tail below x = −11",
         SigmoidTableMlasLogisticUnfused, families=("exhaustive",)),
    _dev("average-pool-zero-point-before-rounding", POOL,
         "Your QLinearAveragePool quantizes the float32 average as nearbyintf(y / y_scale + y_zero_point): the "
         "zero point is added before rounding.",
         "onnxruntime onnxruntime/contrib_ops/cpu/quantization/qlinear_pool.cc quantize_value; onnxruntime "
         "1.32.0 in this suite: the ties and attributes cases of QLinearAveragePool",
         "QLinearAveragePool int8, scales 1, x_zero_point 0, y_zero_point 1, a window [−128, −127] (kernel 1×2): "
         "−127.5 → −128 + 1 = −127 expected, −126 given",
         QuantizeZeroPointBeforeRounding, families=("ties", "zero-points", "attributes")),
    _dev("global-average-pool-float-reciprocal", GLOBAL_POOL,
         "Your QLinearGlobalAveragePool multiplies Σ(x − x_zero_point) by a float32 fl32(fl32(x_scale/N)/y_scale) "
         "and rounds that, where the text divides the mean by y_scale once.",
         "onnxruntime onnxruntime/core/mlas/lib/qlgavgpool.cpp MlasQLinearGlobalAveragePoolNchw (x86), as the "
         "patterns' average-float-reciprocal",
         "QLinearGlobalAveragePool int8, 2×2 window, x_scale 0.5, y_scale 0.3: a mean one float32 rounding "
         "from a tie lands on its other side",
         AverageFloatReciprocal, families=("attributes", "basic", "random")),
    _dev("global-average-pool-fixed-point-reciprocal", GLOBAL_POOL,
         "Your QLinearGlobalAveragePool multiplies Σ(x − x_zero_point) by the 24-bit mantissa of "
         "fl32(x_scale/(y_scale·N)) and shifts right, rounding half up.",
         "onnxruntime onnxruntime/core/mlas/lib/qlgavgpool.cpp MlasQLinearGlobalAveragePoolNchw (NEON), as the "
         "patterns' average-fixed-point-reciprocal",
         "QLinearGlobalAveragePool, scales 1, a mean of two codes k + 1/2 with k even: k expected, k + 1 given",
         AverageFixedPointReciprocal, families=("ties", "basic")),
    _dev("softmax-floor-reciprocal-scale", SOFTMAX,
         "Your QLinearSoftmax quantizes with floor(1 / y_scale), an integer, in place of 1 / y_scale: exact only "
         "where 1 / y_scale is an integer (1/256).",
         "onnxruntime onnxruntime/contrib_ops/cpu/quantization/qlinear_softmax.cc QLinearSoftmax::ComputeInternal "
         "(Y_scale = std::floor(1.0F / y_scale)); onnxruntime 1.32.0 in this suite: the scales cases with "
         "y_scale 1/255, 0.004 and 0.0039",
         "QLinearSoftmax uint8, y_scale 1/255: floor(254.99998) = 254 in place of 255, a code lower near the top",
         SoftmaxFloorReciprocalScale, families=("scales",)),
    _dev("softmax-int8-saturation-wraps", SOFTMAX,
         "Your int8 QLinearSoftmax clamps its result at 255, as the uint8 kernel does, and casts to int8: results "
         "above 127 wrap around to negative codes instead of saturating.",
         "microsoft/onnxruntime#29727 (int8 QLinearSoftmax outputs that should saturate to 127 wrap to -128: the "
         "uint8 kernel's clamp copied, qlinear_softmax.cc), fixed by microsoft/onnxruntime#29728",
         "QLinearSoftmax int8, y_scale 1/256, y_zero_point -128, a row of one element: softmax 1 is 256 codes up, "
         "127 expected, -128 given",
         SoftmaxInt8SaturationWraps, lambda d: d.inputs[0].type == "int8", families=("saturation",)),
]

"""What fused integer kernels do to a QDQ pattern: the graph computed as one kernel, not node by node.

Each model overrides ``GraphOracle.fused`` (``qconform/oracle/graph.py``): given a pattern draft it
returns the pattern's outputs computed the kernel's way (one list per reading it can follow). The
float operator's definition stays the oracle's: the kernels differ in how they requantise (a float32
multiplier, a fixed-point one, rounding half up), in how they accumulate (int16 pair saturation) and
in what they keep of the graph (a Q/DQ pair dropped, a bias scale ignored). Every mechanism is cited
from the kernel's public source or, for closed kernels (Qualcomm's QNN HTP), from measurements kept
in research/qdq-graphs.md.

The models are declared here (``DEVIATIONS``), each with where it applies; the pattern is read by
``fused_pattern``, and what each kernel computes (the mixins) is ``fused_kernels``.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from qconform.declarations import operators
from qconform import dtypes
from qconform.case import Draft
from qconform.diagnosis.models.base import Deviation
from qconform.diagnosis.models.fused_kernels import (
    ClipFakeQuantizeBounds, FusedAccumulator, FusedBiasCodes, FusedU8S8PairSaturation, InputQuantiseHalfUpFloat16,
    QdqPairAsClamp, QdqPairRemoved, QLinearAddFma, QLinearMulFloatMultiplier, QuantizeNodesReciprocal,
    ReluFakeQuantizeBounds, RequantiseFakeQuantizeBounds, RequantiseFixedPoint, RequantiseHalfUp, RequantiseHalfUpBiased,
    only_where)
from qconform.diagnosis.models.fused_pattern import (ACCUMULATING, Pattern, chain, fake_source, float_ops_that, pattern,
                                                     requant_chain, requant_source)


# ----------------------------------------------------------------------------------------------
# Where each applies
# ----------------------------------------------------------------------------------------------
#: The accumulating float ops that add a bias operand (``FloatOp.bias``).
WITH_BIAS = float_ops_that("accumulates", "bias")


def _integer(p: Pattern) -> bool:
    return all(o is None or dtypes.get(o.type).is_integer for o in p.operands) and dtypes.get(p.y_type).is_integer


def _per_tensor(p: Pattern) -> bool:
    return all(o is None or np.size(o.scale) == 1 for o in p.operands) and np.size(p.y_scale) == 1


def _is(op: str, *, eight_bit: bool = False) -> Callable[[Draft], bool]:
    def check(d: Draft) -> bool:
        p = pattern(d) if d.graph else None
        if p is None or p.op != op or not _integer(p) or not _per_tensor(p) or any(o is None for o in p.operands):
            return False  # a residual Add (one operand a Conv's float output) is not QLinearAdd's
        return not eight_bit or all(o is None or dtypes.get(o.type).bits == 8 for o in p.operands)
    return check


def _weights_kernel(u8s8: bool = False, bias_mismatch: bool = False) -> Callable[[Draft], bool]:
    def check(d: Draft) -> bool:
        p = pattern(d) if d.graph else None
        if p is None or p.op not in ACCUMULATING or not _integer(p):
            return False
        x, w = p.operands[0], p.operands[1]
        if x is None or w is None or "block_size" in w.attrs or dtypes.get(w.type).bits != 8 or np.size(x.scale) != 1:
            return False
        if not FusedAccumulator._handles(p):
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
    src = requant_source(d) if d.graph else None
    return src is not None and dtypes.get(src[0].type).is_integer and dtypes.get(src[4].type).is_integer \
        and np.size(src[1].value) == 1 and np.size(src[3].value) == 1


def _requant_chain(d: Draft) -> bool:
    """DQ → Q, or a chain of them, between integer codes, per tensor."""
    found = requant_chain(d) if d.graph else None
    return found is not None and dtypes.get(found[0].type).is_integer and all(
        dtypes.get(z.type).is_integer and np.size(s.value) == 1 for stage in found[1] for s, z in (stage[:2], stage[2:]))


def _eight_bit_chain(middle: tuple[str, ...]) -> Callable[[Draft], bool]:
    """DQ → [middle] → Q between 8-bit integer codes, per tensor, positive float32 scales: where
    OpenVINO's low-precision transformations take the FakeQuantize (256 levels) apart; 16-bit ranges
    go another way, MulFakeQuantizeFusion leaves a Multiply narrower than float32 alone, and folds
    only a positive one. A Clip has both bounds, float32 scalars."""
    def check(d: Draft) -> bool:
        found = chain(d) if d.graph else None
        if found is None or found[0] not in middle:
            return False
        (x, s1, _, s2, z2), bounds = found[2], found[1]
        return len(bounds) == (2 if found[0] == "Clip" else 0) and all(dtypes.get(a.type).is_integer and dtypes.get(a.type).bits == 8 for a in (x, z2)) \
            and all(a.type == "float32" and np.size(a.value) == 1 for a in (s1, s2, *bounds)) \
            and float(s1.value) > 0 and float(s2.value) > 0
    return check


def _fake(d: Draft) -> bool:
    src = fake_source(d) if d.graph else None
    return src is not None and dtypes.get(src[2].type).is_integer and np.size(src[1].value) == 1


def _from_float_input(d: Draft) -> bool:
    g = d.graph
    return len(g) == 4 and [n.op for n in g] == [*operators.QDQ, "Relu", operators.QDQ[0]]


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
    Deviation("fused-integer-requantisation", ACCUMULATING,
              "Your runtime computes DequantizeLinear(x), DequantizeLinear(w) → MatMul/Gemm/Conv → QuantizeLinear as "
              "one integer kernel: the exact integer accumulator times a float32 multiplier fl32(fl32(sx·sw)/sy), "
              "rounded half to even, where the graph divides the float result by sy: results next to a tie differ.",
              f"onnxruntime's QDQ fusion into QLinearMatMul/QGemm/QLinearConv; {ORT_MLAS}/quantize.cpp "
              "MlasRequantizeOutput; OpenVINO's low-precision transformations run the same integer form",
              "x uint8, w uint8 (no pair saturation), sy chosen so that acc·sx·sw/sy lands near k + 1/2",
              only_where(FusedAccumulator, _weights_kernel()), _weights_kernel(), ("basic", "ties")),
    Deviation("fused-u8s8-pair-saturation", ACCUMULATING,
              "Your runtime computes the DequantizeLinear → MatMul/Gemm/Conv → QuantizeLinear pattern with uint8 "
              "activations and int8 weights in an x86 integer kernel that adds adjacent products in pairs with "
              "int16 saturation (VPMADDUBSW, no VNNI): where two products together exceed 32,767 the accumulator "
              "is wrong, by up to tens of codes.",
              "onnxruntime ORT_ENABLE_ALL (QLinearMatMul/QGemm/QLinearConv, MLAS QGEMM on AVX2) and OpenVINO's LPT "
              "FullyConnected on the same CPU (research/qdq-graphs.md §4 M3); qconform's "
              "qlinearmatmul-u8s8-pair-saturation is the same mechanism in the single node",
              "x uint8 near 255, w int8 near ±127, K even: 255·127·2 = 64,770 > 32,767",
              only_where(FusedU8S8PairSaturation, _weights_kernel(u8s8=True)), _weights_kernel(u8s8=True), ("basic", "granularity")),
    Deviation("fused-bias-codes-without-scale", WITH_BIAS,
              "Your runtime fuses DequantizeLinear(bias) into the integer kernel by adding the int32 bias codes to "
              "the accumulator as if the bias scale were sx·sw: a graph whose bias has another scale gets another "
              "bias (u8×s8 products pair-saturated too, as the same x86 kernel does).",
              "onnxruntime ORT_ENABLE_ALL's QDQ→QGemm action (onnxruntime/core/optimizer/qdq_transformer/"
              "selectors_actions/qdq_actions.cc) moves the bias initializer in without checking its scale "
              "(research/qdq-graphs.md §3.1: 62 of 64 elements wrong)",
              "Gemm with a bias DequantizeLinear whose scale is 0.75·sx·sw",
              only_where(FusedBiasCodes, _weights_kernel(bias_mismatch=True)), _weights_kernel(bias_mismatch=True), ("basic",)),
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
              only_where(RequantiseHalfUp, _requant_chain), _requant_chain, ("ties",)),
    Deviation("requantise-half-up-biased", frozenset({"Requant"}),
              "Your runtime computes DequantizeLinear → QuantizeLinear as one requantisation that rounds half up "
              "after adding a small upward bias (about 2^-7 of a code): values just below a tie go up too.",
              "Qualcomm QNN HTP's Convert (onnxruntime-qnn 2.7.0): the reported uint8 0.0372/121 → 0.0291/3 "
              "requantisation gives 116 for x = 209 (exactly 115.4948…); measured over 151 parameter sets, "
              "research/qdq-graphs.md §4 M10 (an empirical fit of a closed kernel: 19 of 38,656 codes stay "
              "unexplained)",
              "uint8 0.0372/121 → 0.0291/3, x = 209",
              only_where(RequantiseHalfUpBiased, _requant_chain), _requant_chain, ("basic", "ties")),
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
              "SaturatingRoundingDoublingHighMul and RoundingDivideByPOT (two roundings: ties toward +∞, then away from zero), "
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

__all__ = ["DEVIATIONS"]

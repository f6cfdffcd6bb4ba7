"""Single deviation models and the helpers they rest on, on the values that exposed them: the
rounding modes, high-nibble-first packing, OpenVINO's bfloat16 rounding, IREE's float8 bit emulation,
the exact fused multiply-add, OpenVINO's FakeQuantize requantisation and its bfloat16 dequantization.
The models as a whole (every one fails the corpus and is named first): tests/test_diagnosis.py."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from qconform.diagnosis.models import MODELS, round_fraction, round_with, swap_slots


@pytest.mark.parametrize("mode, expected", [
    ("half-even", [-2, -2, -0.0, 0, 2, 2, 3]),
    ("half-away", [-3, -2, -1, 1, 2, 3, 3]),
    ("half-up", [-2, -1, -0.0, 1, 2, 3, 3]),
    ("toward-zero", [-2, -1, -0.0, 0, 1, 2, 2]),
])
def test_round_with(mode, expected):
    v = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.75])
    assert round_with(v, mode).tolist() == expected
    assert [round_fraction(Fraction(x), mode) for x in v] == [int(e) for e in expected]
    assert np.isnan(round_with(np.array([np.nan]), mode)[0])
    assert round_with(np.array([np.inf, -np.inf]), mode).tolist() == [np.inf, -np.inf]


def test_swap_slots_reads_high_nibble_first_packing():
    from qconform import dtypes

    t = dtypes.get("uint4")
    x = t.from_bits(np.array([1, 2, 3], dtype=np.uint8))
    # bytes written MSB-first: 0x12, 0x30 -> read LSB-first: 2, 1, 0
    assert t.to_bits(swap_slots(x, t)).tolist() == [2, 1, 0]
    assert t.to_bits(swap_slots(swap_slots(x[:2], t), t)).tolist() == [1, 2]


def test_bfloat16_half_up_if_odd_truncates_below_an_even_last_bit():
    """OpenVINO's ov::bfloat16 rounding, on the values that exposed it."""
    from qconform.diagnosis.models import bfloat16_half_up_if_odd

    v = np.array([12.91259765625, 387.0, 385.0, -24401.0, 115.09375, np.inf, 3.4028234663852886e38])
    # even kept bit: truncated, even above half (12.875, 384, -24320, 115); odd kept bit: half up (388);
    # FLT_MAX carries into the exponent: inf
    assert bfloat16_half_up_if_odd(v).tolist() == [12.875, 388.0, 384.0, -24320.0, 115.0, np.inf, np.inf]
    assert np.isnan(bfloat16_half_up_if_odd(np.array([np.nan]))[0])


def test_truncf_bit_emulation_differs_from_the_cast_only_where_iree_does():
    """IREE's float32 -> float8 bit emulation against the saturate=0 cast over a million draws: every
    difference is one the model names: a subnormal that rounds up to the
    smallest normal gives 0, or a NaN comes out as the one positive NaN code (e4m3fn, fnuz)."""
    from qconform import dtypes
    from qconform.diagnosis.models import truncf_bit_emulation
    from qconform.oracle import floats

    rng = np.random.default_rng(21)
    v = (rng.standard_normal(1 << 20) * 2.0 ** rng.integers(-30, 20, 1 << 20)).astype(np.float32).astype(np.float64)
    for name in ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz"):
        t = dtypes.get(name)
        fmt = t.float_format
        got = truncf_bit_emulation(v, fmt)
        spec = floats.encode(v, t, saturate=False).astype(np.int64)
        differ = got != spec
        magnitude = (1 << (fmt.ebits + fmt.mbits)) - 1
        carry_lost = (np.abs(v) < 2.0 ** (1 - fmt.bias)) & ((spec & magnitude) == 1 << fmt.mbits) & ((got & magnitude) == 0)
        nan_code = 0x80 if fmt.nan_style == "fnuz" else 0x7F
        one_nan = t.is_nan_bits(spec.astype(np.uint8)) & (got == nan_code)
        assert carry_lost.any() and not (differ & ~carry_lost & ~one_nan).any(), name
    e4 = dtypes.get("float8e4m3fn").float_format
    # the IREE run's elements: 7.5 * 2^-9 -> 0 (not 2^-6); -496 overflows -> 0x7F; -480 is 0xFF, kept
    assert truncf_bit_emulation(np.array([0.0146484375, -496.0, -480.0, np.nan]), e4).tolist() == [0, 0x7F, 0xFF, 0x7F]


def test_exact_fma_gives_an_exact_zero_sum_ieee_sign():
    """-0 only when a * b and c are both -0 (the fused-bias models rest on it)."""
    from qconform.oracle.arith import exact_fma

    a = np.array([-1.0, -1.0, 1.0, 3.0])
    b = np.array([0.0, 0.0, -0.0, 2.0])
    c = np.array([-0.0, 0.0, -0.0, -6.0])
    assert np.signbit(exact_fma("float32", a, b, c)).tolist() == [True, False, True, False]


def _requant(x: list[int], s1, z1, s2, z2, scale_type: str = "float32", middle: str = "", bounds=()) -> "Draft":
    """DQ(x; s1[, z1]) → [middle(bounds)] → Q(s2[, z2]) between uint8 codes (a zero point None is left
    out): the Requant pattern, or with ``middle`` the Relu or Clip one (``bounds``: Clip's lo, hi)."""
    from qconform.case import PATTERN_DOMAIN, Arg, Draft, Node

    st = np.dtype(np.float16 if scale_type == "float16" else np.float32)
    args = [Arg("x", "uint8", np.array(x, np.uint8)), Arg("s1", scale_type, st.type(s1), True),
            Arg("s2", scale_type, st.type(s2), True)]
    dq, q = ["x", "s1"], ["g" if middle else "y", "s2"]
    for name, z, ins in (("z1", z1, dq), ("z2", z2, q)):
        if z is not None:
            args.append(Arg(name, "uint8", np.uint8(z), True))
            ins.append(name)
    args += [Arg(n, "float32", np.float32(b), True) for n, b in zip(("lo", "hi"), bounds)]
    between = (Node(middle, ("y", *("lo", "hi")[:len(bounds)]), ("g",)),) if middle else ()
    return Draft(middle or "Requant", 21, "uint8-uint8", "t", "t", tuple(args), domain=PATTERN_DOMAIN,
                 graph=(Node("DequantizeLinear", tuple(dq), ("y",)), *between, Node("QuantizeLinear", tuple(q), ("out",))))


def test_openvinos_fakequantize_adds_the_zero_point_before_rounding():
    """requantise-through-fakequantize-bounds: x = 1, s1 = 0.5, s2 = 0.2, z2 = 5 is the tie 2.5 + 5:
    the graph rounds 2.5 to 2 and adds 5 (7); the FakeQuantize rounds 7.5 (8). The model applies
    only where OpenVINO's low-precision transformations fold it so: both zero points given (a chain
    without them is passed over, not an error), float32 scales, 8-bit codes."""
    from qconform.oracle.base import evaluate

    model = MODELS["requantise-through-fakequantize-bounds"]
    draft = _requant([1], 0.5, 0, 0.2, 5)
    assert model.applies(draft)
    assert evaluate(draft).expected[0].tolist() == [7] and model.outputs(draft)[0].tolist() == [8]
    assert not model.applies(_requant([1], 0.5, 0, 0.2, 5, "float16"))
    no_zero_points = _requant([1], 0.5, None, 0.2, None)  # every Requant model's predicate reads it without raising
    assert not [m.name for m in MODELS.values() if m.applies(no_zero_points) and m.name.startswith("requantise")]


def test_openvinos_relu_and_clip_around_its_fakequantize():
    """relu- and clip-through-fakequantize-bounds (research/openvino-fakequantize.md §5), each branch
    (the expected codes from the research's own implementation of the formula, a separate script):
    - Relu with z1 = 3, z2 = 7 (a Subtract in the dequantisation, z2 above qmin) stays in float before
      a FakeQuantize on s2's range alone: x = 132 gives 72 (folding s1 into the range would give 71,
      as the graph does); with z1 = 0 the Relu acts on the codes and s1 is folded: the zero point
      before the rounding, x = 3 is 1.5 + 1 = 2.5, rounded to 2 where the graph gives 2 + 1;
    - Clip: s1 = fl32(0.1), hi = 5, z1 = 100: hi/s1 + z1 = 149.99999925 in double, truncated to 149,
      so x = 150 and above clamp to code 149 (y = 149), where the graph's float bound lets 150 through;
      a Clip that covers the output range is dropped (the chain's FakeQuantize alone)."""
    from qconform.oracle.base import evaluate

    relu, clip = MODELS["relu-through-fakequantize-bounds"], MODELS["clip-through-fakequantize-bounds"]
    kept = _requant([132, 0, 50], 0.1, 3, 0.2, 7, middle="Relu")
    assert relu.applies(kept) and not clip.applies(kept)
    assert evaluate(kept).expected[0].tolist() == [71, 7, 31] and relu.outputs(kept)[0].tolist() == [72, 7, 30]
    folded = _requant([53, 3, 5], 0.1, 0, 0.2, 1, middle="Relu")
    assert evaluate(folded).expected[0].tolist() == [27, 3, 3] and relu.outputs(folded)[0].tolist() == [28, 2, 4]

    clipped = _requant([150, 149, 200, 10], 0.1, 100, 0.1, 100, middle="Clip", bounds=(-100.0, 5.0))
    assert clip.applies(clipped) and not relu.applies(clipped)
    assert evaluate(clipped).expected[0].tolist() == [150, 149, 150, 10]
    assert clip.outputs(clipped)[0].tolist() == [149, 149, 149, 10]
    covering = [_requant([150, 149, 200, 10], 0.5, 0, 0.2, 5, middle=m, bounds=b) for m, b in (("Clip", (-1e3, 1e3)), ("", ()))]
    assert clip.outputs(covering[0])[0].tolist() == MODELS["requantise-through-fakequantize-bounds"].outputs(
        covering[1])[0].tolist() == [255, 255, 255, 30]
    assert not clip.applies(_requant([1], 0.1, 100, 0.1, 100, middle="Clip", bounds=(-1.0,)))  # a bound left out


def _dq_bfloat16(x_type: str, x, scale_bits, zero_point=None, out: str = "bfloat16") -> "Draft":
    """DequantizeLinear-21 of ``x_type`` codes with a bfloat16 scale given by its bits (the output is the
    scale's type), per tensor, or per axis 0 when ``scale_bits`` is a list; ``out`` other than
    bfloat16: DequantizeLinear-23 with that output_dtype."""
    from onnx import TensorProto

    from qconform import dtypes
    from qconform.case import Arg, Draft

    t = dtypes.get(x_type).dtype
    args = [Arg("x", x_type, np.array(x, t)),
            Arg("s", "bfloat16", np.array(scale_bits, np.uint16).view(dtypes.get("bfloat16").dtype), True)]
    if zero_point is not None:
        args.append(Arg("zp", x_type, np.array(zero_point, t), True))
    if out == "bfloat16":
        return Draft("DequantizeLinear", 21, f"{x_type}-bfloat16", "t", "t", tuple(args), {"axis": 0})
    return Draft("DequantizeLinear", 23, f"{x_type}-bfloat16-{out}", "t", "t", tuple(args),
                 {"axis": 0, "output_dtype": {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}[out]})


def test_openvinos_bfloat16_dequantize_without_bfloat16_hardware():
    """bfloat16-emulated-half-up-if-odd (research/openvino-bfloat16.md), step by step on inputs whose
    outputs OpenVINO 2026.4.1 gave under ONEDNN_MAX_CPU_ISA=AVX2 (the probe's bits; checked by hand):
    - the zero point is rounded to bfloat16 while x stays exact: uint16 65535, 65533, 257 with zero
      point 65535 (-> 65536) and scale 1 give -1, -3 and fma = -65279 = 0xC77EFF00 (kept bit even:
      truncated to -65024, 0xC77E), where the spec gives 0, -2, -65280 (0xC77F);
    - the result is stored half up only when the kept last bit is odd: int16 -32767 * 1.0078125 =
      -33022.9921875 = 0xC700FEFE gives -32768 (0xC700), the spec -33024 (0xC701); -697 * 1.0078125 =
      -702.4453125 = 0xC42F9C80 gives -704 (0xC430), the spec -700 (x rounded to -696 first, 0xC42F);
    - an infinite bias is clamped to -FLT_MAX: uint8 1 with zero point 128 and scale bfloat16-max
      (0x7F7F) is fma = -(2^120 - 2^104) = 0xFB7FFF00, odd kept bit, -2^120 (0xFB80), where the spec
      gives -inf; 254 overflows to +inf as the spec does;
    - a per-axis scale holding a subnormal is flushed while the bias folded from it is not: int16 with
      zero points -32768 and scales 2^-133 (0x0001) gives 32768 * 2^-133 = 2^-118 (0x0480) for every x,
      where the spec gives 2^-133 for x = -32767 and 65535 * 2^-133 = 2^-118 * (2 - 2^-15), rounded up
      to 2^-117 (0x0500), for x = 32767; a single-element scale is not flushed: the spec's bits;
    - a single zero zero point is removed, a per-axis one kept as a bias of +0: x = 0 with scale -1
      gives -0 (0 * -1) and +0 (-0 + (-0 * -1)) respectively."""
    from qconform.oracle.base import evaluate

    model = MODELS["bfloat16-emulated-half-up-if-odd"]
    bits = lambda a: np.asarray(a).view(np.uint16).reshape(-1).tolist()
    cases = [  # draft, OpenVINO's bits (AVX2), the spec's bits
        (_dq_bfloat16("uint16", [65535, 65533, 257], 0x3F80, 65535), [0xBF80, 0xC040, 0xC77E], [0x0000, 0xC000, 0xC77F]),
        (_dq_bfloat16("int16", [-32767, -697], 0x3F81), [0xC700, 0xC430], [0xC701, 0xC42F]),
        (_dq_bfloat16("uint8", [1, 254], 0x7F7F, 128), [0xFB80, 0x7F80], [0xFF80, 0x7F80]),
        (_dq_bfloat16("int16", [[-32767, 32767]] * 2, [0x0001] * 2, [-32768] * 2), [0x0480] * 4, [0x0001, 0x0500] * 2),
        (_dq_bfloat16("int16", [-32767, 32767], 0x0001, -32768), [0x0001, 0x0500], [0x0001, 0x0500]),
        (_dq_bfloat16("int8", [0, 1], 0xBF80, 0), [0x8000, 0xBF80], [0x8000, 0xBF80]),
        (_dq_bfloat16("int8", [[0, 1]] * 2, [0xBF80] * 2, [0, 0]), [0x0000, 0xBF80] * 2, [0x8000, 0xBF80] * 2),
    ]
    for draft, given, spec in cases:
        assert model.applies(draft)
        assert bits(model.outputs(draft)[0]) == given, draft.inputs
        assert bits(evaluate(draft).expected[0]) == spec, draft.inputs
    # the native path's model (x rounded to bfloat16, hardware round-to-nearest-even) gives other bits
    native = MODELS["bfloat16-half-up-if-odd"]
    assert bits(native.outputs(cases[0][0])[0])[0] == 0x0000
    assert bits(native.outputs(cases[1][0])[0]) == [0xC701, 0xC42F]
    # only a bfloat16 output goes through the emulation
    assert not model.applies(_dq_bfloat16("uint8", [1], 0x3F80, 128, out="float32"))

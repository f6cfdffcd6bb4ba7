"""No reading the text forbids, and decisions with their sentence: each test
pins one decision of qconform/docs/semantics.md on the corpus case (or a small draft) that shows it."""
from __future__ import annotations

import numpy as np
import pytest

from qconform import dtypes, schemas
from qconform.case import Arg, Draft
from qconform.oracle import evaluate
from qconform.oracle.arith import as_float64
from qconform.oracle.base import oracle_for

QUANTIZE_23 = oracle_for("", "QuantizeLinear", 23)

DOC = (__import__("pathlib").Path(__file__).resolve().parents[1] / "qconform" / "docs" / "semantics.md").read_text()


def _q(opset: int, x: tuple[str, list], s: tuple[str, float], zp: tuple[str, float] | None, **attrs) -> Draft:
    def arg(name, t, v, init):
        et = dtypes.get(t)
        from qconform.generators.common import array

        return Arg(name, t, array(t, np.asarray(v, np.float64 if et.is_float else np.int64)), init)

    inputs = (arg("x", *x, False), arg("y_scale", *s, True)) + ((arg("y_zero_point", *zp, True),) if zp else ())
    return Draft("QuantizeLinear", opset, "test", "test", "t", inputs, attrs)


@pytest.fixture(scope="module")
def cases(corpus) -> dict:
    return {c.id: c for c in corpus.cases}


def _bits(a: np.ndarray) -> np.ndarray:
    return dtypes.get(a.dtype).to_bits(a)


# 1 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [10, 19, 23, 25])
@pytest.mark.parametrize("which", ["scale-neg-zero", "scale-pos-zero"])
def test_a_zero_product_keeps_its_ieee_sign_in_every_reading(cases, opset, which):
    """semantics.md#dq-precision (signed zero): int32 x up to +-2^31 times a +-0 scale."""
    case = cases[f"DequantizeLinear-{opset}/int32-float32/special-scales/{which}"]
    x = as_float64(case.inputs[0].value, "int32")
    s = as_float64(case.inputs[1].value, "float32")
    assert np.abs(x).max() > 2.0 ** 29  # the exact-product path is the one exercised
    want = np.signbit(x) ^ np.signbit(s)
    for r in case.readings:
        y = r.outputs[0]
        assert not y.any() and np.array_equal(np.signbit(y), want), r.name


# 2 -------------------------------------------------------------------------------------------
def test_a_reading_whose_chain_overflows_is_not_offered(corpus, cases):
    """semantics.md#qlmm-requant (overflow): exact 77824 - 28672 = 49152, code 0x7e, whatever the reading."""
    case = cases["QLinearMatMul-21/float16-int8-int8-float8e5m2fnuz/saturation/y-zero-point-minus-half-max"]
    assert all("multiplier-in-scale-type" not in r.name for r in case.readings)
    assert {int(_bits(r.outputs[0]).ravel()[0]) for r in case.readings} == {0x7E}
    overflowing = [c for c in corpus.cases if c.op == "QLinearMatMul" and c.family == "saturation"
                   and any("multiplier-in-scale-type" in r.name for r in c.readings)]
    for c in overflowing:  # where the reading is kept, it gives no NaN the exact value lacks
        exact = next(r for r in c.readings if r.name.startswith("exact-rational") or r.name == c.readings[0].name)
        for r in c.readings:
            nan = dtypes.get(r.outputs[0].dtype).is_nan_bits(_bits(r.outputs[0]))
            assert not (nan & ~dtypes.get(exact.outputs[0].dtype).is_nan_bits(_bits(exact.outputs[0]))).any()


# 3 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, minus", [("constant/zeros", False), ("constant/single-zero", False),
                                         ("constant/negative-zeros", True), ("constant/signed-zeros", True),
                                         ("shapes/empty-1d", False), ("shapes/empty-2x0", False)])
def test_a_zero_range_has_the_formulas_scale_and_leaves_0_over_0_undefined(cases, name, minus):
    """semantics.md#dql-zero-input: y_scale +0 (or -0 where x holds a -0); y and the zero point 0/0."""
    case = cases[f"DynamicQuantizeLinear-11/float32-uint8-float32/{name}"]
    scales = [(float(r.outputs[1]), bool(np.signbit(r.outputs[1]))) for r in case.readings]
    assert scales == ([(0.0, False), (0.0, True)] if minus else [(0.0, False)])
    y_care, s_care, zp_care = case.readings[0].dont_care
    assert y_care is None or y_care.all()  # every y element is 0/0 (an empty y has none)
    assert s_care is None and zp_care is not None and zp_care.all()


# 4 -------------------------------------------------------------------------------------------
def test_an_int32_scale_at_23_carries_the_integer_division_readings():
    """semantics.md#q-division (int32 scale at 23+, the open reading Q2): x = 1.5, s = 3, zp = 128.
    The precision is the scale's, int32: the two integer readings and no float division."""
    case = evaluate(_q(23, ("float32", [1.5]), ("int32", 3), ("uint8", 128)))
    got = {r.name: int(r.outputs[0][0]) for r in case.readings}
    # operands: round(1.5) = 2, 2/3 -> 1; once: 1.5/3 = 0.5 -> 0 (ties to even)
    assert got == {"operands-rounded-to-int32": 129, "quotient-rounded-once-to-int32": 128}
    # with precision = float, the float readings
    case = evaluate(_q(23, ("float32", [1.5]), ("int32", 3), ("uint8", 128), precision=1))
    assert not any("int32" in r.name for r in case.readings)
    # below 23 the sentence is not there: no integer reading
    case = evaluate(Draft("QuantizeLinear", 21, "test", "test", "t", (
        Arg("x", "int32", np.array([3], np.int32)), Arg("y_scale", "int32", np.array(2, np.int32), True)), {}))
    assert not any("int32" in r.name for r in case.readings)


# 5 -------------------------------------------------------------------------------------------
def test_nan_into_float4_saturates_to_max():
    """semantics.md#q-float4-float6: float4.md "NaN | 6"."""
    case = evaluate(_q(28, ("float32", [np.nan, -np.nan]), ("float32", 1.0), ("float4e2m1", 0.0)))
    for r in case.readings:
        assert r.dont_care == (None,) and _bits(r.outputs[0]).tolist() == [0x7, 0x7], r.name


@pytest.mark.parametrize("t", ["float6e2m3", "float6e3m2"])
def test_nan_into_float6_is_unspecified(t):
    """semantics.md#q-float4-float6: float6.md "nan | -0.0 (unspecified; ...)": a don't-care in every
    reading, and only there."""
    case = evaluate(_q(28, ("float32", [np.nan, -np.nan, 1.0]), ("float32", 1.0), (t, 0.0)))
    for r in case.readings:
        assert r.dont_care[0].tolist() == [True, True, False], r.name
        assert _bits(r.outputs[0])[2] == (0x08 if t == "float6e2m3" else 0x0C), r.name


@pytest.mark.parametrize("t, minus", [("float6e2m3", 0x20), ("float6e3m2", 0x20), ("float4e2m1", 0x8)])
def test_float6_keeps_the_sign_of_zero_as_float4_does(t, minus):
    """semantics.md#q-float4-float6: "+/-0: 0x00 / 0x20" and "-0.0 | -0.0 | -0.0" (float6.md): a
    negative value that rounds to zero gives -0; a -0 quotient plus the +0 zero point is +0 (the open
    reading Q5: the formula adds it)."""
    tiny = -(2.0 ** -40)
    case = evaluate(_q(28, ("float32", [-0.0, tiny]), ("float32", 1.0), (t, 0.0)))
    assert [r.name for r in case.readings] == ["spec"]
    assert _bits(case.readings[0].outputs[0]).tolist() == [0, minus]


def test_a_negative_float6_result_that_rounds_to_zero_is_negative_zero(cases):
    """semantics.md#q-float4-float6: x = -0.25, s = 4: -0.0625 ties to even zero, negative: 0x20."""
    case = cases["QuantizeLinear-28/bfloat16-float16-float6e2m3/basic/per-axis"]
    x = as_float64(case.inputs[0].value, "bfloat16")
    assert x[1, 6] == -0.25 and as_float64(case.inputs[1].value, "float16")[1] == 4
    assert {int(_bits(r.outputs[0])[1, 6]) for r in case.readings} == {0x20}


@pytest.mark.parametrize("opset, want", [(19, [0x80, 0x80]), (21, [0x80, 0x80]), (23, [0x80, 0x80]),
                                         (24, [0x7F, 0xFF])])
def test_fnuz_infinities_follow_their_own_versions_cast_table(opset, want):
    """semantics.md#q-float8-fnuz-inf: Cast-19/21/23 "Inf | NaN"; Cast-24+ "Inf | FLT_MAX"."""
    case = evaluate(_q(opset, ("float32", [np.inf, -np.inf]), ("float32", 1.0), ("float8e4m3fnuz", 0.0)))
    assert [r.name for r in case.readings] == ["spec"]
    assert _bits(case.readings[0].outputs[0]).tolist() == want


def test_float32_operands_below_23_carry_the_exact_quotient(cases):
    """semantics.md#q-division (float32 operands below 23): x/s = 64.5 + 1/16908286 exactly."""
    case = cases["QuantizeLinear-21/float32-uint8/random/draw-000"]
    assert [r.name for r in case.readings] == ["spec", "quotient-exact"]
    first, exact = (r.outputs[0].astype(int) for r in case.readings)
    diff = exact - first
    assert diff.any() and set(np.unique(diff)) <= {-1, 0, 1}  # one rounding step apart where they part


def test_a_scalar_scale_with_a_block_size_is_per_tensor_and_normative(corpus):
    """semantics.md#granularity-per-tensor: granularity is "determined by the shape of y_scale"."""
    found = [c for c in corpus.cases if c.id.split("/")[-1].startswith("scalar-scale-with-block-size")]
    assert found and all(not c.information and c.inputs[1].value.ndim == 0 and c.attrs["block_size"] > 0
                         for c in found)
    assert "which a scalar does not have, so it does not apply" in DOC


# 6 -------------------------------------------------------------------------------------------
def test_reduce_min_and_max_11_say_what_an_empty_reduction_gives():
    """semantics.md#dql-zero-input quotes ReduceMin-11/ReduceMax-11, and onnx's own text carries it."""
    onnx_defs = pytest.importorskip("onnx.defs")
    for op, sentence in (("ReduceMin", "Reduction over an empty set of values yields plus infinity"),
                         ("ReduceMax", "Reduction over an empty set of values yields minus infinity")):
        assert sentence in onnx_defs.get_schema(op, 11).doc
        assert f"{sentence} (if supported by the datatype)" in DOC
    assert "say nothing about empty inputs" not in DOC
    assert schemas.get("DynamicQuantizeLinear", 11)


# Integer division, masks per reading, the exact quotient of bfloat16 -----------------------------
def test_an_integer_quotient_of_zero_is_positive_zero(cases):
    """semantics.md#q-division (int32 scale at 23+): x = -1, s = 3: the int32 quotient is 0, and an
    int32 has no -0; the float32 division would give -1/3, float4e2m1 -0.5 (0x9), and is no reading."""
    case = cases["QuantizeLinear-23/bfloat16-int32-float4e2m1/basic/per-tensor"]
    assert as_float64(case.inputs[0].value, "bfloat16")[6] == -1 and int(case.inputs[1].value) == 3
    got = {r.name: int(_bits(r.outputs[0])[6]) for r in case.readings}
    assert got == {"spec": 0x0}
    x = np.array([-1.0, -0.0, -0.4, 0.4, 1.0, -np.inf, np.nan])
    for once in (False, True):
        q = QUANTIZE_23.integer_quotient(x, np.full(x.shape, 3.0), once=once)
        assert not np.signbit(q[q == 0]).any() and np.isnan(q[-1]) and q[-2] == -np.inf


def test_no_integer_reading_gives_negative_zero(corpus):
    """semantics.md#q-division: every output element of an int32-quotient reading, over the corpus, is
    a code other than -0 (its quotient is an integer, and a zero point on the output's grid keeps a
    non-zero sum away from zero)."""
    seen = 0
    for c in corpus.cases:
        t = dtypes.get(c.output_types[0]) if c.op == "QuantizeLinear" and not c.domain else None
        if t is None or not t.is_float or t.float_format.nan_style == "fnuz":
            continue
        if c.opset < 23 or c.inputs[1].type != "int32" or c.draft.attrs.get("precision", 0):
            continue  # at 23+ an int32 scale without precision makes every reading an integer one (Q2)
        minus_zero = 1 << (t.bits - 1)
        for r in c.readings:
            seen += 1
            assert not (_bits(r.outputs[0]) == minus_zero).any(), (c.id, r.name)
    assert seen > 300


def test_an_element_only_another_reading_leaves_undefined_is_checked(cases):
    """semantics.md#principles: don't-care masks belong to a reading. x = 0, s = 2^-127 (float8e8m0):
    q = 0 exactly, y = 128 (#q-division, e8m0 scale); only the float16 division makes it 0/0."""
    case = cases["QuantizeLinear-24/float16-float8e8m0-uint8/floatkinds/e8m0-scales"]
    assert as_float64(case.inputs[0].value, "float16")[0, 0] == 0
    assert as_float64(case.inputs[1].value, "float8e8m0")[0] == 2.0 ** -127
    first, half = case.readings
    assert (first.name, half.name) == ("division-in-float32", "division-in-float16")
    assert int(first.outputs[0][0, 0]) == 128 and not first.dont_care[0][0, 0] and half.dont_care[0][0, 0]
    from qconform.compare import compare

    wrong = first.outputs[0].copy()
    wrong[0, 0] = 0
    assert compare(case, [wrong], profile="strict").mismatch_count == 1


def test_the_first_readings_masks_are_its_own(corpus):
    """No don't-care element the first reading defines: over every corpus case with a mask in any
    reading, the first reading computed alone has the very masks (and bits) the case gives it."""
    checked = 0
    for c in corpus.cases:
        if c.information or all(m is None for r in c.readings for m in r.dont_care):
            continue
        alone = evaluate(c.draft, primary_only=True).readings[0]
        first = c.readings[0]
        for i, (m, a) in enumerate(zip(first.dont_care, alone.dont_care)):
            assert (m is None) == (a is None) and (m is None or np.array_equal(m, a)), (c.id, i)
            assert np.array_equal(_bits(first.outputs[i]), _bits(alone.outputs[i])), (c.id, i)
        checked += 1
    assert checked > 500


@pytest.mark.parametrize("opset", [19, 21])
def test_bfloat16_operands_below_23_carry_the_exact_quotient(cases, opset):
    """semantics.md#q-division-half: x = 1, s = 2^-133 (bfloat16): the bfloat16 and float32 quotients
    overflow to +Inf (NaN under Cast-19/21's fnuz table); the exact 2^133 saturates to 240 (0x7f)."""
    case = cases[f"QuantizeLinear-{opset}/bfloat16-float8e4m3fnuz/specials/extremes"]
    x, s = as_float64(case.inputs[0].value, "bfloat16"), as_float64(case.inputs[1].value, "bfloat16")
    assert x.reshape(-1)[55] == 1 and s[np.unravel_index(55, x.shape)[0]] == 2.0 ** -133
    got = {r.name: int(_bits(r.outputs[0]).reshape(-1)[55]) for r in case.readings}
    assert got == {"quotient-in-bfloat16": 0x80, "quotient-exact": 0x7F}
    # float16 operands cannot leave float32's range: no third reading (#q-division-half, underflow)
    half = [c for c in cases.values() if c.op == "QuantizeLinear" and c.opset in (19, 21) and c.types.startswith("float16")]
    assert half and not any("quotient-exact" in r.name for c in half for r in c.readings)

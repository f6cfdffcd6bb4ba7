"""onnxruntime's QOperator-format com.microsoft ops (issue 65): the stored schemas are onnxruntime's,
and each decision of qconform/docs/semantics.md#ms-qlinear holds in the oracle."""
from __future__ import annotations

import numpy as np
import pytest

from qconform import dtypes, schemas
from qconform.case import MS_DOMAIN
from qconform.declarations import operators
from qconform.generators.common import draft
from qconform.oracle.base import evaluate
from qconform.oracle.granularity import InvalidModel

MS_DECLARATIONS = [o for o in operators.OPERATORS if o.domain == MS_DOMAIN]


def _registered(op: str):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime missing: pip install -e '.[onnxruntime]'")
    from onnxruntime.capi.onnxruntime_pybind11_state import get_all_operator_schema

    found = [s for s in get_all_operator_schema() if s.domain == MS_DOMAIN and s.name == op]
    assert found, f"onnxruntime {ort.__version__} registers no com.microsoft {op}"
    return max(found, key=lambda s: s.since_version)


def _type_name(type_str: str) -> str:
    return dtypes.get(type_str).name


@pytest.mark.parametrize("op", MS_DECLARATIONS, ids=lambda o: o.label)
def test_the_stored_schema_is_onnxruntimes(op):
    """Version, inputs (name, type, optional, variadic), outputs, attributes and their defaults, and
    type constraints: the declaration's table equals what the installed onnxruntime registers."""
    import onnx
    from onnx import helper

    s = _registered(op.op)
    table = op.schema
    assert s.since_version == op.versions[-1]
    option = {"Single": False, "Optional": True, "Variadic": False}
    assert [(i.name, i.typeStr, option[i.option.name]) for i in s.inputs] == [tuple(i) for i in table["inputs"]]
    variadic = tuple(i.name for i in s.inputs if i.option.name == "Variadic")
    assert variadic == tuple(table.get("variadic", ()))
    assert [(o.name, o.typeStr) for o in s.outputs] == [tuple(o) for o in table["outputs"]]
    attrs = {}
    for name, a in s.attributes.items():
        proto = onnx.AttributeProto.FromString(a._default_value)
        value = helper.get_attribute_value(proto) if proto.name else None
        attrs[name] = value.decode() if isinstance(value, bytes) else value
    assert attrs == dict(table["attrs"])
    constraints = {t.type_param_str: set(map(_type_name, t.allowed_type_strs)) for t in s.type_constraints}
    assert constraints == {k: set(v) for k, v in table["types"].items() if not k.startswith("tensor(")}
    fixed = {i.typeStr for i in s.inputs if i.typeStr.startswith("tensor(")}
    assert {k: (_type_name(k),) for k in fixed} == {k: tuple(v) for k, v in table["types"].items()
                                                    if k.startswith("tensor(")}


def _spec(op: str):
    return schemas.get(op, 1, MS_DOMAIN)


def _case(op: str, types: dict, values: dict, attrs: dict | None = None):
    return evaluate(draft(_spec(op), types, "t", "t", values, attrs or {}))


U8 = {"T": "uint8", "tensor(float)": "float32"}
I8 = {"T": "int8", "tensor(float)": "float32"}


# -- ms-qlinear: per-tensor parameters, absent zero points, QuantizeLinear's rounding ---------------------
def test_parameters_are_per_tensor():
    with pytest.raises(InvalidModel):
        _case("QLinearAdd", U8, {"A": [1, 2], "A_scale": [0.5, 0.5], "B": [1, 2], "B_scale": 0.5, "C_scale": 1.0})


def test_one_reading_of_scalar_for_every_contrib_op():
    """"It's a scalar": a 0-d or 1-element 1-D tensor (read as shape ()); where an op also admits one
    element per column, exactly that shape; anything else refused with the caller's words."""
    from qconform.oracle.contrib_qlinear import per_tensor_or

    for v in (np.float32(2.0), np.array([2.0], np.float32)):
        assert per_tensor_or(np.asarray(v), None, "no").shape == ()
        assert per_tensor_or(np.asarray(v), (1,), "no").shape == ()
    assert per_tensor_or(np.arange(3), (3,), "no").tolist() == [0, 1, 2]
    for v, shape in ((np.zeros((1, 1)), None), (np.zeros((1, 1)), (1,)), (np.arange(3), (4,)),
                     (np.zeros((3, 1)), (3,)), (np.arange(2), None)):
        with pytest.raises(InvalidModel, match="^the words$"):
            per_tensor_or(v, shape, "the words")


def test_an_absent_zero_point_is_zero():
    a = _case("QLinearAdd", I8, {"A": [3, -4], "A_scale": 1.0, "B": [5, 6], "B_scale": 1.0, "C_scale": 1.0})
    b = _case("QLinearAdd", I8, {"A": [3, -4], "A_scale": 1.0, "A_zero_point": 0, "B": [5, 6], "B_scale": 1.0,
                                 "B_zero_point": 0, "C_scale": 1.0, "C_zero_point": 0})
    assert a.expected[0].tolist() == b.expected[0].tolist() == [8, 2]


def test_the_quotient_is_rounded_before_the_zero_point_is_added():
    """(1 + 2)/2 = 1.5 rounds to 2 (even), then + 1 = 3; rounding after the zero point gives 2.5 → 2."""
    c = _case("QLinearAdd", U8, {"A": [1], "A_scale": 1.0, "B": [2], "B_scale": 1.0, "C_scale": 2.0,
                                 "C_zero_point": 1})
    assert [r.name for r in c.readings] == ["spec"] and c.expected[0].tolist() == [3]


# -- ms-qlinear-add ------------------------------------------------------------------------------------------
def test_add_broadcasts_as_numpy():
    c = _case("QLinearAdd", U8, {"A": np.arange(3, dtype=np.uint8).reshape(3, 1), "A_scale": 1.0,
                                 "B": np.arange(4, dtype=np.uint8), "B_scale": 1.0, "C_scale": 1.0})
    assert c.expected[0].shape == (3, 4)
    with pytest.raises(InvalidModel):
        _case("QLinearAdd", U8, {"A": [1, 2, 3], "A_scale": 1.0, "B": [1, 2], "B_scale": 1.0, "C_scale": 1.0})


def test_add_exact_and_float32_readings_part_where_float32_moves_a_tie():
    """A_s = B_s = fl32(1/3), C_s = fl32(2/3) = 2·A_s: (−126 + 119)·A_s / C_s is exactly −3.5 (→ −4),
    but fl32(−126·A_s) + fl32(119·A_s) is not exactly −7·A_s, and the float32 formula gives −3."""
    third = float(np.float32(1 / 3))
    c = _case("QLinearAdd", U8, {"A": [2], "A_scale": third, "A_zero_point": 128, "B": [247], "B_scale": third,
                                 "B_zero_point": 128, "C_scale": 2 * third, "C_zero_point": 128})
    assert [(r.name, r.outputs[0].tolist()) for r in c.readings] == [("exact-rational", [124]),
                                                                      ("formula-float32", [125])]


# -- ms-qlinear-mul ------------------------------------------------------------------------------------------
def test_mul_is_the_matmul_requantisation_with_one_product():
    c = _case("QLinearMul", I8, {"A": [-5], "A_scale": 1.0, "B": [-45], "B_scale": 1.0, "C_scale": 2.0,
                                 "C_zero_point": 1})
    assert c.expected[0].tolist() == [113]  # 225/2 = 112.5 → 112 (even), + 1


# -- ms-qgemm ------------------------------------------------------------------------------------------------
G = {"T": "float32", "TA": "uint8", "TB": "int8", "TC": "int32", "TYZ": "uint8", "TY": "uint8"}


def _gemm(values, attrs=None, types=G):
    base = {"A": np.asarray([[130, 140]], np.uint8), "a_scale": 0.5, "a_zero_point": 128,
            "B": np.asarray([[1, 2], [3, 4]], np.int8), "b_scale": 1.0, "b_zero_point": 0, "y_scale": 1.0,
            "y_zero_point": 100}
    base.update(values)
    return _case("QGemm", types, base, attrs)


def test_qgemm_alpha_transposes_and_c():
    # A' = [2, 12] (differences), B' = [[1, 2], [3, 4]]: acc = [38, 52]; a_s = 0.5
    assert _gemm({}).expected[0].tolist() == [[119, 126]]
    assert _gemm({}, {"alpha": 2.0}).expected[0].tolist() == [[138, 152]]
    assert _gemm({"C": np.asarray([2, -4], np.int32)}).expected[0].tolist() == [[120, 124]]
    bt = np.asarray([[1, 3], [2, 4]], np.int8)
    assert _gemm({"B": bt}, {"transB": 1}).expected[0].tolist() == [[119, 126]]
    assert _gemm({"A": np.asarray([[130], [140]], np.uint8)}, {"transA": 1}).expected[0].tolist() == [[119, 126]]


def test_qgemm_per_column_b_and_float_output():
    f = dict(G, TY="float32")
    y = _gemm({"b_scale": np.asarray([0.5, 0.25], np.float32), "b_zero_point": np.asarray([0, 1], np.int8),
               "y_scale": None, "y_zero_point": None}, types=f).expected[0]
    # acc = [2·1 + 12·3, 2·1 + 12·3] = [38, 38] with b_zp [0, 1]: columns [1, 3] and [1, 3]
    assert y.dtype == np.float32 and y.tolist() == [[38 * 0.5 * 0.5, 38 * 0.5 * 0.25]]


def test_qgemm_one_of_y_scale_and_y_zero_point_is_invalid():
    with pytest.raises(InvalidModel):
        _gemm({"y_zero_point": None})


# -- ms-qlinear-composed, -pool, -softmax, -concat -----------------------------------------------------------
def test_leaky_relu_is_dequantize_alpha_quantize():
    c = _case("QLinearLeakyRelu", I8, {"X": [-3, -1, 4], "X_scale": 1.0, "Y_scale": 1.0}, {"alpha": 0.5})
    assert c.expected[0].tolist() == [-2, 0, 4]  # -1.5 → -2, -0.5 → -0 (ties to even)


def test_average_pool_counts_pads_only_when_told():
    x = np.asarray([[[[4, 8], [12, 16]]]], np.uint8)
    v = {"X": x, "x_scale": 1.0, "y_scale": 1.0}
    attrs = {"kernel_shape": [2, 2], "pads": [1, 1, 0, 0]}
    assert _case("QLinearAveragePool", U8, v, attrs).expected[0].ravel().tolist() == [4, 6, 8, 10]
    incl = _case("QLinearAveragePool", U8, v, {**attrs, "count_include_pad": 1}).expected[0].ravel().tolist()
    assert incl == [1, 3, 4, 10]  # 4/4, 12/4, 16/4, 40/4


def test_average_pool_leaves_ceil_mode_positions_with_count_include_pad_out():
    x = np.zeros((1, 1, 5, 5), np.uint8)
    with pytest.raises(InvalidModel, match="count is open"):
        _case("QLinearAveragePool", U8, {"X": x, "x_scale": 1.0, "y_scale": 1.0},
              {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1, "count_include_pad": 1})


def test_global_average_pool_channels_last():
    x = np.arange(12, dtype=np.uint8).reshape(1, 2, 2, 3)
    c = _case("QLinearGlobalAveragePool", U8, {"X": x, "x_scale": 1.0, "x_zero_point": 0, "y_scale": 1.0,
                                               "y_zero_point": 0}, {"channels_last": 1})
    assert c.expected[0].shape == (1, 1, 1, 3) and c.expected[0].ravel().tolist() == [4, 6, 6]  # 4.5, 5.5, 6.5: even


def test_softmax_opset_forms_of_axis():
    x = np.asarray([[[0, 10], [20, 30]]], np.uint8)
    v = {"X": x, "X_scale": 0.1, "x_zero_point": 0, "y_scale": 1 / 256, "y_zero_point": 0}
    along = _case("QLinearSoftmax", U8, v, {"opset": 13, "axis": 1}).expected[0]
    coerced = _case("QLinearSoftmax", U8, v, {"opset": 11, "axis": 1}).expected[0]
    assert along.shape == coerced.shape == x.shape
    assert not np.array_equal(along, coerced)  # over axis 1 alone, or over axes 1 and 2


def test_concat_copies_an_input_quantized_as_y():
    from qconform.generators import contrib_qlinear as gen

    c = evaluate(next(d for d in gen.generate("basic") if d.op == "QLinearConcat" and d.name == "same-parameters"))
    xs = [a.value for a in c.inputs[2::3]]
    assert np.array_equal(c.expected[0], np.concatenate(xs, axis=1))


def test_concat_requantises_each_input_with_its_own_parameters():
    """dequantize(x_i) with x_i's scale and zero point, then quantize with Y's: 0.5·[1, 2, 3] is
    [0.5, 1, 1.5], rounded half to even [0, 1, 2]; the second input, quantized as Y, is copied."""
    from qconform.case import Arg, Draft

    f, u = np.float32, np.uint8
    args = (Arg("Y_scale", "float32", np.asarray(f(1.0)), True), Arg("Y_zero_point", "uint8", np.asarray(u(0)), True),
            Arg("X0", "uint8", np.asarray([1, 2, 3], u)), Arg("X0_scale", "float32", np.asarray(f(0.5)), True),
            Arg("X0_zero_point", "uint8", np.asarray(u(0)), True), Arg("X1", "uint8", np.asarray([7], u)),
            Arg("X1_scale", "float32", np.asarray(f(1.0)), True), Arg("X1_zero_point", "uint8", np.asarray(u(0)), True))
    d = Draft(op="QLinearConcat", opset=1, types="uint8-float32-uint8", family="t", name="t", inputs=args,
              attrs={"axis": 0}, domain=MS_DOMAIN)
    assert evaluate(d).expected[0].tolist() == [0, 1, 2, 7]


def test_sigmoid_is_the_patterns_sigmoid_quantized():
    """sigmoid(0) = 1/2 exactly: 128 codes of 1/256; sigmoid(−1.25) rounded once to float32, then
    divided by 1/256 and rounded half to even."""
    import math

    c = _case("QLinearSigmoid", U8, {"X": [128, 103], "X_scale": 0.05, "X_zero_point": 128, "Y_scale": 1 / 256})
    assert c.expected[0].tolist() == [128, round(float(np.float32(1 / (1 + math.exp(1.25)))) * 256)]


def test_leaky_relu_default_alpha_is_float32s_one_hundredth():
    c = _case("QLinearLeakyRelu", I8, {"X": [-100], "X_scale": 1.0, "Y_scale": 0.01})
    assert c.expected[0].tolist() == [-100]  # fl32(0.01·−100) / 0.01 = −100 (fl32(0.01) > 0.01 does not move it)


def test_qgemm_float_output_carries_the_matmul_readings():
    f = dict(G, TY="float32")
    c = _gemm({"a_scale": 0.1, "b_scale": np.asarray([0.3, 0.7], np.float32), "b_zero_point": np.asarray([0, 0], np.int8),
               "y_scale": None, "y_zero_point": None}, types=f)
    assert {r.name for r in c.readings} <= {"spec", "multiplier-float32", "multiplier-float64", "exact-rational",
                                            "multiplier-float32-product-float64"}
    assert c.expected[0].dtype == np.float32


# -- diagnosis models: each, run as a runtime, fails these cases and is named first ---------------------------
@pytest.fixture(scope="module")
def contrib_groups():
    from qconform.generators import contrib_qlinear as gen
    from test_diagnosis import group_cases

    return group_cases([evaluate(d) for d in gen.generate()])


def _model_names():
    from qconform.diagnosis.models import contrib_qlinear as models

    return [m.name for m in models.DEVIATIONS]


@pytest.mark.parametrize("name", _model_names())
def test_each_onnxruntime_mechanism_fails_and_is_named_first(name, contrib_groups):
    """guide-diagnosis-model.md's acceptance on the cases of these ops (the bundled corpus holds them
    once the lead regenerates it; tests/test_diagnosis.py then runs the same check there)."""
    from qconform.diagnosis import diagnose as dg
    from qconform.diagnosis.models import MODELS
    from test_diagnosis import scan

    found, _ = scan(MODELS[name], contrib_groups)
    assert found, f"{name} passes every case: {MODELS[name].witness}"
    for g in found:
        me = next((c for c in g.candidates if c.model == name), None)
        assert me is not None and me.rank == 1 and me.explains_all, (
            f"{g.label}: {name} is not ranked first:\n" + "\n".join(c.summary() for c in g.candidates))
    top = dg.overall(found)
    assert top[0].model == name and not [o for o in top[1:] if o.key() == top[0].key()], [o.model for o in top[:3]]


def test_no_softmax_case_leaves_axis_out_below_opset_13():
    """semantics 9.4.5: below 13 the registered default (−1) and the corresponding Softmax's (1) differ."""
    from qconform.generators import contrib_qlinear as gen

    drafts = [d for d in gen.generate() if d.op == "QLinearSoftmax"]
    assert drafts and all("axis" in d.attrs for d in drafts if d.attrs["opset"] < 13)

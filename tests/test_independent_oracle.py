"""The independent oracle's compute ops (scripts/independent/): exact accumulation checked against
plain Python loops written from the Conv / numpy.matmul texts and against onnx.reference where it
agrees with the text, the requantisation readings on hand-made values, and the whole check on a
handful of corpus cases. Fast (a few seconds)."""
from __future__ import annotations

import itertools
import sys
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

from independent import compute, linalg  # noqa: E402
from independent.check import check_case  # noqa: E402


# ------------------------------------------------------------------------------------------------
# Fake cases (the corpus's layout: positional inputs with .name/.type/.value, attrs, readings)
# ------------------------------------------------------------------------------------------------
def arg(name, t, value):
    return None if value is None else SimpleNamespace(name=name, type=t, value=np.asarray(value, dtype=t))


def case(op, inputs, attrs=None, readings=(), opset=10):
    cid = f"{op}-{opset}/x/fake/case"
    return SimpleNamespace(op=op, opset=opset, domain="", inputs=tuple(inputs), attrs=attrs or {},
                           readings=tuple(readings), id=cid, draft=SimpleNamespace(id=cid), information=None)


def reading(name, arr):
    return SimpleNamespace(name=name, outputs=(arr,), dont_care=(None,))


# ------------------------------------------------------------------------------------------------
# Direct loops, from the texts
# ------------------------------------------------------------------------------------------------
def conv_loop(x, w, xzp, wzp, attrs):
    """Σ over the group's input channels and the kernel window of (x − x_zp)(w − w_zp[m]);
    positions outside x contribute 0. Explicit pads only (NOTSET)."""
    n_, c = x.shape[:2]
    m_, cg = w.shape[:2]
    nd = x.ndim - 2
    k = w.shape[2:]
    s = attrs.get("strides", [1] * nd)
    d = attrs.get("dilations", [1] * nd)
    p = attrs.get("pads", [0] * 2 * nd)
    g = attrs.get("group", 1)
    out = [(x.shape[2 + i] + p[i] + p[nd + i] - (d[i] * (k[i] - 1) + 1)) // s[i] + 1 for i in range(nd)]
    wz = np.broadcast_to(np.asarray(wzp).reshape(-1), (m_,))
    y = np.zeros((n_, m_, *out), dtype=object)
    for n in range(n_):
        for m in range(m_):
            grp = m // (m_ // g)
            for o in itertools.product(*(range(v) for v in out)):
                acc = 0
                for ci in range(cg):
                    for kk in itertools.product(*(range(v) for v in k)):
                        pos = [o[i] * s[i] - p[i] + kk[i] * d[i] for i in range(nd)]
                        if all(0 <= pos[i] < x.shape[2 + i] for i in range(nd)):
                            xv = int(x[(n, grp * cg + ci, *pos)]) - int(xzp)
                            acc += xv * (int(w[(m, ci, *kk)]) - int(wz[m]))
                y[(n, m, *o)] = acc
    return y


def int32s(codes):
    """int32 output codes (raw 32-bit patterns) as values."""
    return np.array(codes, dtype=np.uint64).astype(np.uint32).view(np.int32)


def wrap(a):
    return np.vectorize(lambda v: (int(v) + 2**31) % 2**32 - 2**31, otypes=[np.int64])(a).astype(np.int32)


CONV_GEOMETRIES = [
    dict(),
    dict(strides=[2, 1], pads=[1, 0, 2, 1]),
    dict(dilations=[2, 2], pads=[2, 1, 0, 1], strides=[1, 2]),
    dict(group=2, pads=[1, 1, 1, 1]),
]


@pytest.mark.parametrize("attrs", CONV_GEOMETRIES)
def test_conv_acc_matches_direct_loop(attrs):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (2, 4, 5, 6)).astype(np.uint8)
    w = rng.integers(-128, 128, (4, 4 // attrs.get("group", 1), 3, 2)).astype(np.int8)
    xzp, wzp = np.uint8(131), rng.integers(-128, 128, 4).astype(np.int8)
    want = conv_loop(x, w, xzp, wzp, attrs)
    c = case("ConvInteger", [arg("x", "uint8", x), arg("w", "int8", w), arg("x_zero_point", "uint8", xzp),
                             arg("w_zero_point", "int8", wzp)], attrs)
    model = compute.conv_integer_model(c)
    assert model.shape == want.shape
    got = np.array(model.get(("spec",)).codes, dtype=np.uint64).astype(np.uint32).view(np.int32)
    assert np.array_equal(got.reshape(want.shape), wrap(want))


def test_conv_1d_and_3d():
    rng = np.random.default_rng(2)
    for xs, ws, attrs in [((1, 2, 7), (3, 2, 3), dict(strides=[2], pads=[1, 2])),
                          ((1, 1, 3, 4, 3), (2, 1, 2, 2, 2), dict(pads=[0, 1, 1, 1, 0, 0]))]:
        x = rng.integers(-128, 128, xs).astype(np.int8)
        w = rng.integers(-128, 128, ws).astype(np.int8)
        want = conv_loop(x, w, 3, 0, attrs)
        got = linalg.conv_acc(x.astype(np.int64) - 3, w.astype(np.int64), attrs)
        assert np.array_equal(got.astype(np.int64), want.astype(np.int64))


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_auto_pad_as_explicit_pads(auto_pad):
    """SAME_*: output ceil(in/stride), total padding split, the odd one at the end (UPPER) or the
    beginning (LOWER); VALID: no padding."""
    out, begin, *_ = linalg.conv_geometry((1, 1, 7, 6), (1, 1, 4, 3), {"auto_pad": auto_pad, "strides": [2, 1]})
    if auto_pad == "VALID":
        assert out == (2, 4) and begin == (0, 0)
    else:
        # axis 0: out 4, total = 3*2 + 4 - 7 = 3; axis 1: out 6, total = 5 + 3 - 6 = 2
        assert out == (4, 6)
        assert begin == ((1, 1) if auto_pad == "SAME_UPPER" else (2, 1))


def test_conv_integer_against_onnx_reference():
    from onnx.reference.ops.op_conv_integer import ConvInteger  # noqa: F401 (the op exists)
    import onnx
    from onnx import helper
    from onnx.reference import ReferenceEvaluator
    rng = np.random.default_rng(3)
    for attrs in CONV_GEOMETRIES[:3]:
        x = rng.integers(0, 256, (1, 4, 5, 6)).astype(np.uint8)
        w = rng.integers(0, 256, (2, 4, 3, 2)).astype(np.uint8)
        node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], **attrs)
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, onnx.TensorProto.UINT8, None)
                                                for n in ("x", "w", "xz", "wz")],
                                  [helper.make_tensor_value_info("y", onnx.TensorProto.INT32, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
        ref = ReferenceEvaluator(model).run(None, {"x": x, "w": w, "xz": np.uint8(7), "wz": np.uint8(200)})[0]
        c = case("ConvInteger", [arg("x", "uint8", x), arg("w", "uint8", w), arg("xz", "uint8", np.uint8(7)),
                                 arg("wz", "uint8", np.uint8(200))], attrs)
        m = compute.conv_integer_model(c)
        got = np.array(m.get(("spec",)).codes, dtype=np.uint64).astype(np.uint32).view(np.int32).reshape(m.shape)
        assert np.array_equal(got, ref)


def test_matmul_integer_shapes_and_per_row_zero_points():
    rng = np.random.default_rng(4)
    a = rng.integers(-128, 128, (2, 3, 4)).astype(np.int8)
    b = rng.integers(0, 256, (4, 5)).astype(np.uint8)
    azp = rng.integers(-128, 128, (2, 3, 1)).astype(np.int8)
    bzp = rng.integers(0, 256, 5).astype(np.uint8)
    want = np.zeros((2, 3, 5), dtype=np.int64)
    for i, r, col in itertools.product(range(2), range(3), range(5)):
        want[i, r, col] = sum((int(a[i, r, k]) - int(azp[i, r, 0])) * (int(b[k, col]) - int(bzp[col])) for k in range(4))
    c = case("MatMulInteger", [arg("A", "int8", a), arg("B", "uint8", b), arg("a_zp", "int8", azp),
                               arg("b_zp", "uint8", bzp)])
    m = compute.matmul_integer_model(c)
    assert m.shape == (2, 3, 5)
    got = np.array(m.get(("spec",)).codes, dtype=np.uint64).astype(np.uint32).view(np.int32).reshape(m.shape)
    assert np.array_equal(got, want)
    # 2-D a with an M-vector zero point; 1-D operands
    a2, azp2 = a[0], azp[0, :, 0]
    c = case("MatMulInteger", [arg("A", "int8", a2), arg("B", "uint8", b), arg("a_zp", "int8", azp2), None])
    got = int32s(compute.matmul_integer_model(c).get(("spec",)).codes).reshape(3, 5)
    assert np.array_equal(got, (a2.astype(np.int64) - azp2[:, None]) @ b.astype(np.int64))
    c = case("MatMulInteger", [arg("A", "int8", a2[0]), arg("B", "uint8", b[:, 0]), None, None])
    m = compute.matmul_integer_model(c)
    assert m.shape == () and list(int32s(m.get(("spec",)).codes)) == [a2[0].astype(np.int64) @ b[:, 0].astype(np.int64)]


def test_int32_wrap():
    """K·127·128 beyond 2^31: the exact sum reduced mod 2^32 (two's complement)."""
    k = 140000
    c = case("MatMulInteger", [arg("A", "int8", np.full((1, k), -128)), arg("B", "int8", np.full((k, 1), -128)),
                               None, None])
    (code,) = compute.matmul_integer_model(c).get(("spec",)).codes
    assert code == (k * 16384) % 2**32


# ------------------------------------------------------------------------------------------------
# Requantisation readings and the whole check
# ------------------------------------------------------------------------------------------------
def qlconv_case(x, w, xs, ws, ys, yzp, bias=None, attrs=None, readings=()):
    return case("QLinearConv", [arg("x", "uint8", x), arg("x_scale", "float32", xs), arg("x_zero_point", "uint8", 0),
                                arg("w", "int8", w), arg("w_scale", "float32", ws), arg("w_zero_point", "int8", 0),
                                arg("y_scale", "float32", ys), arg("y_zero_point", "uint8", yzp),
                                arg("B", "int32", bias)], attrs, readings)


def test_qlinear_conv_ties_and_bias():
    """acc = 3j with multiplier 1/6 (x_s 1, w_s 1/2, y_s 3): exact j/2, a tie for odd j that
    exact-rational rounds to even; fl32(1/6) is above 1/6, and the float32 chain moves some off the tie."""
    x = np.arange(1, 256, dtype=np.uint8).reshape(1, 1, 1, 255)
    w = np.full((1, 1, 1, 1), 3, dtype=np.int8)
    c = qlconv_case(x, w, 1.0, 0.5, 3.0, 10)
    m = compute.qlinear_conv_model(c)
    exact = m.get(("exact-rational", "accumulator-int32-wrap", "")).codes
    f32 = m.get(("multiplier-float32", "accumulator-int32-wrap", "")).codes
    assert exact == [10 + round(Fraction(j, 2)) for j in range(1, 256)]  # Python round: ties to even
    mult = np.float32(np.float32(np.float32(1.0) * np.float32(0.5)) / np.float32(3.0))  # numpy's float32 as a check
    assert f32 == [10 + int(np.rint(np.float32(np.float32(3 * j) * mult))) for j in range(1, 256)]
    # the bias adds to the accumulator before requantisation: B = 3 shifts every result by 1/2
    mb = compute.qlinear_conv_model(qlconv_case(x, w, 1.0, 0.5, 3.0, 10, bias=np.array([3], dtype=np.int32)))
    assert mb.get(("exact-rational", "accumulator-exact", "")).codes == [10 + round(Fraction(j + 1, 2))
                                                                          for j in range(1, 256)]


def test_check_case_finds_a_wrong_golden_and_accepts_a_right_one():
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (1, 2, 4, 4)).astype(np.uint8)
    w = rng.integers(-128, 128, (3, 2, 3, 3)).astype(np.int8)
    ws = np.array([0.01, 0.02, 0.005], dtype=np.float32)
    c = qlconv_case(x, w, 0.03, ws, 0.5, 128, attrs={"pads": [1, 1, 1, 1]})
    m = compute.qlinear_conv_model(c)
    spec = np.array(m.get(m.alternatives[0]).codes, dtype=np.uint8).reshape(m.shape)
    ok = check_case(qlconv_case(x, w, 0.03, ws, 0.5, 128, attrs={"pads": [1, 1, 1, 1]},
                                readings=[reading("spec", spec)]), compute.MODELS["QLinearConv"])
    assert not ok["dis"] and not ok["e"] and ok["rows"][0][2] == spec.size
    bad = spec.copy()
    bad[0, 1, 0, 0] ^= 1
    res = check_case(qlconv_case(x, w, 0.03, ws, 0.5, 128, attrs={"pads": [1, 1, 1, 1]},
                                 readings=[reading("spec", bad)]), compute.MODELS["QLinearConv"])
    assert len(res["dis"]) == 1 and res["dis"][0][2] == 16


def _oracle_main(*args: str) -> int:
    """The script's entry point on the bundled corpus (its exit status: 0 when nothing disagrees)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("independent_oracle", REPO / "scripts" / "independent_oracle.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main(list(args))


def test_corpus_qlinear_matmul_sample():
    """A few corpus cases end to end (the script's entry point): 0 disagreements."""
    assert _oracle_main("--case", "QLinearMatMul-10/*/readings/*") == 0


def test_int32_scale_at_23_is_an_integer_division():
    """semantics.md Q2: QuantizeLinear-23+ with an int32 scale and no ``precision`` divides in int32
    (two integer readings, no float division), and the corpus's such cases agree with it."""
    from independent import qdq
    assert qdq.ql_divisions(23, "", "float32", "int32", 0) == list(qdq.INT_DIV)
    assert "division-in-float32" in qdq.ql_divisions(21, "", "int32", "int32", 0)
    assert _oracle_main("--case", "QuantizeLinear-23/bfloat16-int32-float4e2m1/basic/*") == 0

"""QLinearMatMul-10/-21: the oracle against hand-checked values and ONNX's node tests, the
cross-checks against onnx.reference and onnxruntime, and wrong implementations the families catch
(qconform/docs/semantics.md#qlmm-formula .. #qlmm-shapes)."""
from __future__ import annotations

import importlib.util
from unittest import mock

import numpy as np
import pytest
from onnx import numpy_helper

from qconform import dtypes, schemas
from qconform.case import Case
from qconform.compare import compare
from qconform.generators import qlinear_matmul as gen
from qconform.generators.common import draft
from qconform.model import build_model
from qconform.oracle import InvalidModel, evaluate
from qconform.oracle.qlinear_matmul import wrap_int32
from qconform.runner import BaseRunner, resolve
from qconform.runners.cpu_ref import CpuRefRunner
from support import require_fact, require_measured, unexplained

F32 = np.float32


def combo(version: int, a: str, b: str, y: str, s: str = "float32") -> dict[str, str]:
    c = {"T1": a, "T2": b, "T3": y}
    c["TS" if version == 21 else "tensor(float)"] = s
    return c


def case(version: int, types: dict[str, str], values: dict, name: str = "t", family: str = "test") -> Case:
    return evaluate(draft(schemas.get("QLinearMatMul", version), types, family, name, values))


def values(a, b, a_s=1.0, a_zp=0, b_s=1.0, b_zp=0, y_s=1.0, y_zp=0) -> dict:
    return {"a": a, "a_scale": a_s, "a_zero_point": a_zp, "b": b, "b_scale": b_s, "b_zero_point": b_zp,
            "y_scale": y_s, "y_zero_point": y_zp}


SEED_2D = values([[208, 236, 0, 238], [3, 214, 255, 29]],
                 [[152, 51, 244], [60, 26, 255], [0, 127, 246], [127, 254, 247]],
                 0.0066, 113, 0.00705, 114, 0.0107, 118)


# ------------------------------------------------------------------------------------------------
# hand-checked values
# ------------------------------------------------------------------------------------------------
def test_seed_004_examples():
    u8 = combo(10, "uint8", "uint8", "uint8")
    c = case(10, u8, SEED_2D)
    assert [r.name for r in c.readings] == ["spec"]
    assert c.expected[0].tolist() == [[168, 115, 255], [1, 66, 151]]
    three = dict(SEED_2D, a=[SEED_2D["a"]] * 2, b=[SEED_2D["b"]] * 2)
    assert case(10, u8, three).expected[0].tolist() == [[[168, 115, 255], [1, 66, 151]]] * 2


def test_requantisation_rounds_before_the_zero_point():
    # acc = 1, multiplier 1/2: v = 0.5 -> RNE 0, then + 3 (rounding after the zero point gives 4)
    c = case(10, combo(10, "int8", "int8", "int8"), values([[1], [3], [-1]], [[1]], a_s=0.5, y_zp=3))
    assert c.expected[0].ravel().tolist() == [3, 5, 3]


def test_accumulation_wraps_at_32_bits_with_an_exact_reading():
    k = 33_026  # 33 026 * 255 * 255 = 2 147 515 650 > 2^31
    c = case(10, combo(10, "uint8", "uint8", "int8"),
             values(np.full((1, k), 255), np.full((k, 1), 255), a_s=2.0 ** -12, b_s=2.0 ** -13, y_s=1.0))
    exact = k * 255 * 255
    assert wrap_int32(np.array(exact)) == exact - 2 ** 32
    assert [r.name for r in c.readings] == ["multiplier-float32+accumulator-int32-wrap",
                                            "multiplier-float32+accumulator-exact"]
    assert int(c.readings[0].outputs[0][0, 0]) == round((exact - 2 ** 32) / 2 ** 25)  # -64
    assert int(c.readings[1].outputs[0][0, 0]) == 64


def test_readings_at_a_tie_with_an_inexact_multiplier():
    # multiplier 1/6, acc = 3: exact 0.5 -> 0; fl32(1/6) > 1/6 and a float64 product keeps it: 1
    c = case(10, combo(10, "uint8", "uint8", "uint8"), values([[131]], [[1]], a_zp=128, y_s=6.0, y_zp=128))
    got = {r.name: int(r.outputs[0][0, 0]) - 128 for r in c.readings}
    assert got == {"multiplier-float32+accumulator-int32-wrap": 0,
                   "multiplier-float32-product-float64+accumulator-int32-wrap": 1}


def test_accumulator_above_2_24_readings():
    # acc = 2^24 + 2^17 + 1, multiplier 2^-18: exact 64.5000038 -> 65; fl32(acc) = 2^24 + 2^17 -> 64.5 -> 64
    acc = 2 ** 24 + 2 ** 17 + 1
    q, r = divmod(acc, 255)  # a . b with b = [255, ..., 255, 1]
    row = [255] * (q // 255) + [q % 255, r]
    bcol = [[255]] * (len(row) - 1) + [[1]]
    c = case(10, combo(10, "uint8", "uint8", "uint8"), values([row], bcol, a_s=2.0 ** -9, b_s=2.0 ** -9, y_zp=0))
    got = {r.name.split("+")[0]: int(r.outputs[0][0, 0]) for r in c.readings}
    assert got == {"multiplier-float32": 64, "multiplier-float64": 65}  # exact-rational collapses into float64


def test_per_row_and_per_column_parameters():
    a = [[1, 2], [3, 4]]
    b = [[1, 0, 1], [0, 1, 1]]
    c = case(10, combo(10, "uint8", "uint8", "uint8"),
             values(a, b, a_s=[[1.0], [2.0]], a_zp=[[0], [1]], b_s=[[1.0, 0.5, 4.0]], b_zp=[[0, 0, 0]]))
    # row 1 uses a - 1 = [2, 3] and scale 2; column n uses b_s[n]
    acc = np.array([[1, 2, 3], [2, 3, 5]])
    expect = np.rint(acc * np.array([[1.0], [2.0]]) * np.array([[1.0, 0.5, 4.0]]))
    assert c.expected[0].tolist() == expect.tolist()


def test_numpy_matmul_shapes():
    u8 = combo(10, "uint8", "uint8", "uint8")
    assert case(10, u8, values([1, 2, 3], [[1], [1], [1]])).expected[0].tolist() == [6]
    assert case(10, u8, values([[1, 2, 3]], [1, 1, 1])).expected[0].tolist() == [6]
    assert case(10, u8, values([1, 2, 3], [1, 1, 2])).expected[0].shape == ()
    c = case(10, u8, values(np.ones((2, 1, 2, 3)), np.ones((3, 3, 2))))
    assert c.expected[0].shape == (2, 3, 2, 2) and (c.expected[0] == 3).all()


@pytest.mark.parametrize("bad", [
    {"a_scale": [1.0, 1.0, 1.0], "a_zero_point": [0, 0, 0]},  # a vector, but not M (= 2) long
    {"b_scale": [[1.0, 1.0]], "b_zero_point": [0, 0]},  # scale and zero point of different shapes
    {"y_scale": [1.0, 2.0], "y_zero_point": [0, 0]},  # y is per-tensor only
])
def test_invalid_parameter_shapes(bad):
    v = dict(values([[1, 2], [3, 4]], [[1, 0], [0, 1]]), **bad)
    with pytest.raises(InvalidModel):
        case(10, combo(10, "uint8", "uint8", "uint8"), v)


def test_float8_inputs_decode_exactly_and_requantise_with_saturation():
    t = combo(21, "float8e4m3fn", "float8e4m3fn", "float8e4m3fn")
    c = case(21, t, values([[1.5, -2.0]], [[2.0], [0.125]]))
    assert c.expected[0].astype(np.float64).tolist() == [[2.75]]  # 3 - 0.25, exact
    c = case(21, t, values([[448.0, 448.0]], [[1.0], [1.0]]))  # 896 -> saturate=1 -> 448
    assert c.expected[0].astype(np.float64).tolist() == [[448.0]]
    c = case(21, combo(21, "float8e5m2", "int8", "uint8"), values([[0.5, 0.25]], [[3], [1]], y_zp=10))
    assert c.expected[0].tolist() == [[12]]  # 1.75 -> 2, + 10
    # every finite e4m3fnuz value through an identity product
    vals = [v for v in np.unique(np.abs(dtypes.get("float8e4m3fnuz").all_values().astype(np.float64)))
            if np.isfinite(v)]
    t = combo(21, "float8e4m3fnuz", "float8e4m3fnuz", "float8e4m3fnuz")
    c = case(21, t, values([[v] for v in vals], [[1.0]]))
    assert c.expected[0].astype(np.float64).ravel().tolist() == vals


def _onnx_node_tests():
    import onnx.backend.test.case.node as node_pkg

    found = []

    def expect(node, inputs, outputs, name, **kw):
        if node.op_type == "QLinearMatMul":
            found.append((name, list(inputs), list(outputs)))

    spec = importlib.util.find_spec("onnx.backend.test.case.node.qlinearmatmul")
    code = compile(spec.loader.get_source(spec.name), spec.origin, "exec")
    with mock.patch.object(node_pkg, "expect", expect):
        exec(code, {"__name__": "qconform_probe_qlinearmatmul"})
    return found


def test_onnx_node_tests():
    tests = _onnx_node_tests()
    assert len(tests) == 8
    names = set()
    for name, ins, (y,) in tests:
        t = dtypes.get(ins[0].dtype).name
        s = dtypes.get(ins[1].dtype).name
        for version in (10, 21) if s == "float32" else (21,):
            v = dict(zip(["a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point"],
                         ins))
            c = case(version, combo(version, t, t, t, s), v, name)
            assert [r.name for r in c.readings] == ["spec"], name
            assert np.array_equal(c.expected[0], y), f"{name} at {version}: {c.expected[0].tolist()} != {y.tolist()}"
        names.add(name)
    generated = {d.name for c in gen.combos() if c.a == c.b == c.y for d in gen._basic(c)}
    assert {f"onnx-node-{n}" for n in names} <= generated


# ------------------------------------------------------------------------------------------------
# cross-checks on ordinary ranges
# ------------------------------------------------------------------------------------------------
def _ordinary(version: int, types: dict[str, str], n: int, seed: int):
    rng = np.random.default_rng(seed)
    ta, tb, ty = (dtypes.get(types[k]) for k in ("T1", "T2", "T3"))
    for i in range(n):
        m, k, nn = (int(v) for v in rng.integers(1, 6, size=3))
        batch = [(), (2,), (2, 3)][i % 3]
        a = rng.integers(*ta.qrange, endpoint=True, size=batch + (m, k))
        b = rng.integers(*tb.qrange, endpoint=True, size=(k, nn) if i % 2 else batch + (k, nn))
        zps = [int(rng.integers(*t.qrange, endpoint=True)) for t in (ta, tb, ty)]
        scales = [float(F32(10.0 ** rng.uniform(-3, -1))) for _ in range(2)]
        acc_scale = max(1.0, float(np.abs(np.matmul(a - zps[0], b - zps[1])).max()))
        y_s = float(F32(acc_scale * scales[0] * scales[1] / 120.0))
        yield case(version, types, values(a, b, scales[0], zps[0], scales[1], zps[1], y_s, zps[2]), f"ordinary-{i}",
                   family="cross-check")


def _integer_types():
    for v in (10, 21):
        for a in ("uint8", "int8"):
            for b in ("uint8", "int8"):
                for y in ("uint8", "int8"):
                    yield v, combo(v, a, b, y)


@pytest.mark.parametrize("runner_name", ["onnx-reference", "onnxruntime"])
def test_cross_check_on_ordinary_ranges(runner_name):
    """Ordinary inputs pass, except where a fact applying here says otherwise (onnxruntime's u8×s8
    saturation on AVX2 without VNNI: E46)."""
    cases = [c for i, (v, types) in enumerate(_integer_types()) for c in _ordinary(v, types, 8, seed=1000 + i)]
    bad, ran = unexplained(runner_name, resolve(runner_name), cases)
    assert ran >= 32 and not bad, "\n".join(bad[:3])


def _family_case(family: str, name: str, version: int, types: dict[str, str]) -> Case:
    c = gen.Combo(schemas.get("QLinearMatMul", version), types)
    return evaluate(next(d for d in gen._FAMILY_GEN[family](c) if d.name == name))


def test_readings_followed_by_reference_and_onnxruntime():
    require_measured("onnxruntime")
    require_measured("onnx-reference")
    u8 = combo(10, "uint8", "uint8", "uint8")
    thirds = _family_case("readings", "thirds", 10, u8)
    wrap = _family_case("accumulator", "beyond-2^31", 10, u8)
    followed = {}
    for name in ("onnx-reference", "onnxruntime"):
        runner = resolve(name)
        followed[name] = [compare(c, runner.run(build_model(c), c.feeds)).reading for c in (thirds, wrap)]
    assert followed == {
        "onnx-reference": ["multiplier-float32-product-float64+accumulator-int32-wrap",
                           "multiplier-float32+accumulator-int32-wrap"],
        "onnxruntime": ["multiplier-float32+accumulator-int32-wrap", "multiplier-float32+accumulator-int32-wrap"],
    }


def test_errata_reference_rounds_after_adding_the_zero_point():
    require_fact("E18")
    c = _family_case("ties", "half-multiplier", 10, combo(10, "int8", "int8", "int8"))
    out = resolve("onnx-reference").run(build_model(c), c.feeds)
    o = compare(c, out)
    assert o.verdict == "fail"
    # a = -127 (a_zp = -128): acc = 1, v = 0.5, y_zp = 3: rint(3.5) = 4 instead of RNE(0.5) + 3 = 3
    assert (int(out[0][1, 0]), int(c.expected[0][1, 0])) == (4, 3)


def test_errata_reference_half_scales():
    require_fact("E21")
    c = _family_case("readings", "thirds", 21, combo(21, "uint8", "uint8", "uint8", "float16"))
    out = resolve("onnx-reference").run(build_model(c), c.feeds)
    assert compare(c, out).verdict == "fail"
    row = int(np.flatnonzero(c.inputs[0].value.ravel() == 11)[0])  # a = 11: acc = -117, exact -19.5 -> 108
    assert (int(out[0][row, 0]), int(c.expected[0][row, 0])) == (109, 108)


def test_errata_reference_float8():
    require_fact("E19", "E20")
    c = next(evaluate(d) for d in gen._basic(gen.Combo(schemas.get("QLinearMatMul", 21),
                                                       combo(21, "float8e4m3fn", "float8e4m3fn", "int8"))))
    out = resolve("onnx-reference").run(build_model(c), c.feeds)
    assert compare(c, out).verdict == "fail"
    c = next(evaluate(d) for d in gen._basic(gen.Combo(schemas.get("QLinearMatMul", 21),
                                                       combo(21, "float8e4m3fn", "float8e4m3fn", "float8e4m3fn"))))
    with pytest.raises(ValueError, match="Invalid integer data type"):
        resolve("onnx-reference").run(build_model(c), c.feeds)


def test_errata_onnxruntime_refuses_per_row_a():
    require_fact("E38")
    c = _family_case("per-row-column", "per-row-a", 10, combo(10, "uint8", "uint8", "uint8"))
    with pytest.raises(Exception, match="input zero point must be a scalar"):
        resolve("onnxruntime").run(build_model(c), c.feeds)
    c = _family_case("per-row-column", "per-column-b", 10, combo(10, "uint8", "uint8", "uint8"))
    assert compare(c, resolve("onnxruntime").run(build_model(c), c.feeds)).verdict == "pass"


# ------------------------------------------------------------------------------------------------
# acceptance 4: wrong implementations caught by the families
# ------------------------------------------------------------------------------------------------
class NumpyQLinearMatMul(BaseRunner):
    """onnxruntime's arithmetic in plain numpy (float32 multiplier and product, int32 wrap) for
    integer a, b and y; subclasses break one step."""

    name = "numpy-qlinearmatmul"

    def accumulate(self, acc: np.ndarray) -> np.ndarray:
        return wrap_int32(acc)

    def multiplier(self, a_s, b_s, y_s) -> np.ndarray:
        return (a_s.astype(F32) * b_s.astype(F32)) / y_s.astype(F32)

    def rnd(self, v: np.ndarray) -> np.ndarray:
        return np.rint(v)

    def run(self, model, inputs):
        inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = (inits[n] if n in inits else np.asarray(inputs[n])
                                                 for n in model.graph.node[0].input)
        if a.ndim == 2 and a_s.ndim == 1 and a_s.size > 1:  # the text's "M element vector" per row
            a_s, a_zp = a_s.reshape(-1, 1), a_zp.reshape(-1, 1)
        acc = np.matmul(a.astype(np.int64) - a_zp.astype(np.int64), b.astype(np.int64) - b_zp.astype(np.int64))
        v = self.accumulate(acc).astype(F32) * self.multiplier(a_s, b_s, y_s)
        info = np.iinfo(y_zp.dtype)
        return [np.asarray(np.clip(self.rnd(v) + y_zp.astype(np.int64), info.min, info.max)).astype(y_zp.dtype)]


class SaturatingAccumulator(NumpyQLinearMatMul):
    def accumulate(self, acc):
        return np.clip(acc, -(2 ** 31), 2 ** 31 - 1)


class HalfPrecisionMultiplier(NumpyQLinearMatMul):
    def multiplier(self, a_s, b_s, y_s):
        return super().multiplier(a_s, b_s, y_s).astype(np.float16).astype(F32)


class PerColumnScaleAppliedPerRow(NumpyQLinearMatMul):
    def multiplier(self, a_s, b_s, y_s):
        if b_s.ndim == 1 and b_s.size > 1:  # a per-column vector read as one scale per row of the output
            return super().multiplier(a_s, b_s[: a_s.shape[0] if a_s.ndim else b_s.size].reshape(-1, 1), y_s)
        return super().multiplier(a_s, np.swapaxes(b_s, -1, -2) if b_s.ndim >= 2 else b_s, y_s)


class RoundHalfAway(NumpyQLinearMatMul):
    def rnd(self, v):
        return np.sign(v) * np.floor(np.abs(v) + 0.5)


@pytest.fixture(scope="module")
def family_cases() -> list[Case]:
    """Every family's cases for the integer combinations with float32 scales (versions 10 and 21)."""
    out = []
    for c in gen.combos():
        if c.integer_inputs and c.y.is_integer and c.s == "float32":
            for fam in gen.FAMILIES:
                if gen._RULES[fam](c):
                    out.extend(evaluate(d) for d in gen._FAMILY_GEN[fam](c))
    return out


def failing(runner, cases) -> list[str]:
    out = []
    for c in cases:
        with np.errstate(all="ignore"):
            o = compare(c, runner.run(build_model(c), c.feeds))
        if o.verdict != "pass":
            out.append(c.id)
    return out


def test_numpy_baseline_and_cpu_ref_pass_every_family_case(family_cases):
    assert len(family_cases) > 300
    assert failing(CpuRefRunner(), family_cases) == []
    assert failing(NumpyQLinearMatMul(), family_cases) == []


@pytest.mark.parametrize("wrong, family", [
    (SaturatingAccumulator, "accumulator"),
    (HalfPrecisionMultiplier, "readings"),
    (PerColumnScaleAppliedPerRow, "per-row-column"),
    (RoundHalfAway, "ties"),
])
def test_wrong_implementation_is_caught(family_cases, wrong, family):
    caught = failing(wrong(), family_cases)
    assert caught, f"{wrong.__name__} passes every case"
    assert any(f"/{family}/" in cid for cid in caught), f"{wrong.__name__} not caught by {family}: {caught[:5]}"

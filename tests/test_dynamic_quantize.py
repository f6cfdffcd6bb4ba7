"""DynamicQuantizeLinear-11: the oracle against hand-checked values and ONNX's node tests, the
cross-checks against onnx.reference and onnxruntime, and wrong implementations the families catch
(qconform/docs/semantics.md#dql-formula .. #dql-inf)."""
from __future__ import annotations

import importlib.util
from unittest import mock

import numpy as np
import pytest

from qconform import schemas
from qconform.case import Case
from qconform.compare import compare
from qconform.generators import dynamic_quantize
from qconform.generators.common import draft
from qconform.model import build_model
from qconform.oracle import evaluate
from qconform.runner import BaseRunner
from qconform.runners.cpu_ref import CpuRefRunner
from support import failing, require_fact, unexplained

SPEC = schemas.get("DynamicQuantizeLinear", 11)
COMBO = SPEC.combinations()[0]
F32 = np.float32


def case(x, name="t") -> Case:
    return evaluate(draft(SPEC, COMBO, "test", name, {"x": np.asarray(x, dtype=np.float64)}))


def outputs(c: Case, reading: int = 0):
    y, s, zp = c.readings[reading].outputs
    return y.tolist(), float(s), int(zp)


@pytest.fixture(scope="module")
def family_cases() -> list[Case]:
    return [evaluate(d) for d in dynamic_quantize.generate()]


# ------------------------------------------------------------------------------------------------
# hand-checked values
# ------------------------------------------------------------------------------------------------
def test_zero_point_tie_rounds_to_even():
    # range 255, scale 1, intermediate zero point 2.5: ties to 2 (half away would give 3)
    assert outputs(case([-2.5, 252.5])) == ([0, 254], 1.0, 2)
    # intermediate zero point 3.5 -> 4
    assert outputs(case([-3.5, 251.5]))[2] == 4


def test_y_ties_round_to_even_before_the_zero_point():
    y, s, zp = outputs(case([-2.5, 252.5, 0.5, 1.5, 2.5, -1.5]))
    assert (s, zp) == (1.0, 2)
    assert y == [0, 254, 2, 4, 4, 0]  # RNE(0.5)=0, RNE(1.5)=2, RNE(2.5)=2, RNE(-1.5)=-2, then + 2


def test_scale_is_computed_in_float32():
    # 3e38 - (-3e38) overflows float32: scale +Inf, zp 0, y 0 (float64 would give zp 128)
    y, s, zp = outputs(case([3e38, -3e38, 1e36]))
    assert (y, s, zp) == ([0, 0, 0], float("inf"), 0)
    # an ordinary value: scale = fl32(fl32(hi - lo) / 255)
    x = np.array([-1.0, 0.3, 2.7], dtype=F32)
    expect = F32(F32(F32(2.7) - F32(-1.0)) / F32(255))
    assert outputs(case(x))[1] == float(expect)


def test_zero_range_has_the_formulas_scale_and_dont_care_y_and_zero_point():
    for x, names in (([0.0, 0.0], ["spec"]), ([-0.0, -0.0], ["scale-plus-zero", "scale-minus-zero"]),
                     (np.zeros((0,)), ["spec"]), (np.zeros((2, 0)), ["spec"])):
        c = case(x)
        assert [r.name for r in c.readings] == names
        assert [(float(r.outputs[1]), bool(np.signbit(r.outputs[1]))) for r in c.readings] == \
            [(0.0, False), (0.0, True)][:len(names)]
        y_care, s_care, zp_care = c.readings[0].dont_care
        assert (y_care is None and not np.size(x)) or y_care.all()
        assert s_care is None and zp_care.all()
        for r in c.readings:
            assert r.outputs[0].shape == np.shape(x) and r.outputs[1].shape == () and r.outputs[2].shape == ()


def test_nan_makes_every_output_dont_care():
    c = case([np.nan, 1.0, -2.0])
    assert [bool(m.all()) for m in c.readings[0].dont_care] == [True, True, True]
    assert c.clause == "dql-nan"


def test_inf_gives_infinite_scale_and_dont_care_nan_elements():
    c = case([1.0, np.inf, -3.0])
    y, s, zp = outputs(c)
    assert (s, zp) == (float("inf"), 0)
    assert c.readings[0].dont_care[0].tolist() == [False, True, False] and c.readings[0].dont_care[1] is None and c.readings[0].dont_care[2] is None
    assert [y[0], y[2]] == [0, 0]
    c = case([-np.inf, 1.0, 2.0])  # -Inf / Inf: the zero point is undefined, and every y with it
    assert float(c.expected[1]) == float("inf")
    assert bool(c.readings[0].dont_care[2]) and c.readings[0].dont_care[0].all()


def test_underflowing_scale_follows_ieee():
    y, s, zp = outputs(case([2.0 ** -149, -(2.0 ** -149), 0.0]))
    assert (s, zp) == (0.0, 255) and y[:2] == [255, 0]
    c = case([2.0 ** -149, 0.0])  # zp = 0/0; y[0] = +Inf + zp saturates whatever zp is
    assert c.expected[0][0] == 255 and not c.readings[0].dont_care[0][0] and c.readings[0].dont_care[0][1] and bool(c.readings[0].dont_care[2])


def _onnx_node_tests(module: str, op: str):
    """ONNX's own node-test cases, read from onnx/backend/test/case/node/<module>.py without the
    global collection (its ``expect`` is replaced while the module's exporters run)."""
    import onnx.backend.test.case.node as node_pkg

    found = []

    def expect(node, inputs, outputs, name, **kw):
        if node.op_type == op:
            found.append((name, list(inputs), list(outputs)))

    spec = importlib.util.find_spec(f"onnx.backend.test.case.node.{module}")
    code = compile(spec.loader.get_source(spec.name), spec.origin, "exec")
    with mock.patch.object(node_pkg, "expect", expect):
        exec(code, {"__name__": f"qconform_probe_{module}"})
    return found


def test_onnx_node_tests():
    """onnx's own expected outputs are the first reading's (the float32 quotient). Its first test's
    0.5 / fl32(5/255) is the float32 tie 25.5 while the exact quotient is 25.4999991: that case also
    carries ``quotient-exact`` (y[5] = 178 instead of 179), qconform/docs/semantics.md#dql-formula."""
    tests = _onnx_node_tests("dynamicquantizelinear", "DynamicQuantizeLinear")
    assert len(tests) == 3
    for name, (x,), (y, s, zp) in tests:
        c = case(x, name)
        assert [r.name for r in c.readings] == (["spec", "quotient-exact"] if name == "test_dynamicquantizelinear"
                                                else ["spec"]), name
        if len(c.readings) == 2:
            assert list(c.readings[1].outputs[0]) == [153, 255, 0, 26, 221, 178]
        got_y, got_s, got_zp = c.expected
        assert np.array_equal(got_y, y) and got_s.tobytes() == np.asarray(s, F32).tobytes() and got_zp == zp, name


def test_node_test_inputs_are_cases():
    names = {d.name for d in dynamic_quantize.generate("ranges")}
    for name, *_ in _onnx_node_tests("dynamicquantizelinear", "DynamicQuantizeLinear"):
        assert f"onnx-node-{name}" in names


# ------------------------------------------------------------------------------------------------
# cross-checks on ordinary ranges
# ------------------------------------------------------------------------------------------------
def _ordinary_inputs(n: int = 60):
    rng = np.random.default_rng(20251122)
    for i in range(n):
        size = int(rng.integers(1, 40))
        x = (rng.standard_normal(size) * 10.0 ** rng.integers(-4, 5)).astype(F32)
        if i % 3 == 0:
            x = np.abs(x)
        elif i % 3 == 1:
            x = -np.abs(x)
        yield case(x.astype(np.float64), f"ordinary-{i}")


@pytest.mark.parametrize("runner_name", ["onnx-reference", "onnxruntime"])
def test_cross_check_on_ordinary_ranges(runner_name):
    """Ordinary inputs pass, except where a fact applying here says otherwise."""
    from qconform.runner import resolve

    bad, ran = unexplained(runner_name, resolve(runner_name), list(_ordinary_inputs()))
    assert ran and not bad, "\n".join(bad[:3])


def test_zero_range_scales_of_reference_and_onnxruntime_are_deviations():
    """onnx.reference's 1/255 and onnxruntime's 1.0 are not the formula's 0 (semantics.md#dql-zero-input)."""
    from qconform.runner import resolve

    require_fact("E15", "E37")
    c = case([0.0, -0.0, 0.0])
    for name, scale in (("onnx-reference", float(F32(1) / F32(255))), ("onnxruntime", 1.0)):
        got = resolve(name).run(build_model(c), c.feeds)
        assert float(got[1]) == scale and compare(c, got).verdict == "fail"
    c = case(np.zeros((0,)))
    assert compare(c, resolve("onnxruntime").run(build_model(c), c.feeds)).verdict == "fail"


def test_errata_reference_fails_on_empty_input():
    from qconform.runner import resolve

    require_fact("E16")
    c = case(np.zeros((0,)))
    with pytest.raises(ValueError, match="zero-size array"):
        resolve("onnx-reference").run(build_model(c), c.feeds)


# ------------------------------------------------------------------------------------------------
# acceptance 4: wrong implementations caught by the families
# ------------------------------------------------------------------------------------------------
class NumpyDQL(BaseRunner):
    """A plain float32 numpy DynamicQuantizeLinear (the text's formula: a zero range gives scale +0, then
    0/0); subclasses break one step."""

    name = "numpy-dql"

    def scale(self, hi: F32, lo: F32) -> F32:
        return F32(F32(hi - lo) / F32(255))

    def zero_point(self, z: F32) -> float:
        return float(np.rint(z))

    def quantize(self, x: np.ndarray, scale: F32) -> np.ndarray:
        return np.rint(x / scale)

    def run(self, model, inputs):
        x = np.asarray(inputs["x"], dtype=F32)
        with np.errstate(all="ignore"):
            hi = F32(max(0.0, float(x.max()))) if x.size else F32(0)
            lo = F32(min(0.0, float(x.min()))) if x.size else F32(0)
            s = self.scale(hi, lo)
            z = F32(0) - F32(lo / s)
            zp = self.zero_point(F32(np.clip(z, 0, 255)))
            zp = 0.0 if np.isnan(zp) else zp
            y = np.clip(np.nan_to_num(self.quantize(x, s) + zp, nan=0.0), 0, 255)
        return [np.asarray(y).astype(np.uint8), np.asarray(s, F32), np.asarray(zp, np.uint8)]


class ZeroPointHalfAway(NumpyDQL):
    def zero_point(self, z):
        return float(np.floor(z + 0.5))


class ScaleInFloat64(NumpyDQL):
    def scale(self, hi, lo):
        return F32(1.0) if hi == lo else np.float64(np.float64(hi) - np.float64(lo)) / 255.0

    def quantize(self, x, scale):
        return np.rint(x.astype(np.float64) / scale)


class MultiplyByReciprocal(NumpyDQL):
    def quantize(self, x, scale):
        return np.rint(x * (F32(1) / scale))


def test_numpy_baseline_and_cpu_ref_pass_every_family_case(family_cases):
    assert failing(NumpyDQL(), family_cases) == []
    assert failing(CpuRefRunner(), family_cases) == []


@pytest.mark.parametrize("wrong, family", [(ZeroPointHalfAway, "zero-point-ties"), (ScaleInFloat64, "dynamic-range"),
                                           (MultiplyByReciprocal, "ties")])
def test_wrong_implementation_is_caught(family_cases, wrong, family):
    caught = failing(wrong(), family_cases)
    assert caught, f"{wrong.__name__} passes every case"
    assert any(f"/{family}/" in cid for cid in caught), f"{wrong.__name__} not caught by {family}: {caught[:5]}"

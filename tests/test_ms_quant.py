"""com.microsoft QuantizeLinear-1 / DequantizeLinear-1: the schema table against the schemas
onnxruntime registers, the oracle against hand-checked values and the seed page's examples, the
cross-check against onnxruntime, and wrong implementations the families catch
(qconform/docs/semantics.md#ms-quantize, #ms-dequantize)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

from qconform import dtypes, schemas
from qconform.case import MS_DOMAIN, Case
from qconform.compare import compare
from qconform.generators import ms_quant
from qconform.generators.common import draft
from qconform.model import build_model
from qconform.oracle import InvalidModel, evaluate
from qconform.runner import BaseRunner, Unsupported, resolve
from qconform.runners.cpu_ref import CpuRefRunner
from support import failing, require_fact, require_measured, unexplained

Q = schemas.get("QuantizeLinear", 1, MS_DOMAIN)
DQ = schemas.get("DequantizeLinear", 1, MS_DOMAIN)


def q(x, s, zp, t="uint8", f="float32", attrs=None) -> Case:
    return evaluate(draft(Q, {"T1": f, "T2": t}, "test", "t", {"x": x, "y_scale": s, "y_zero_point": zp}, attrs=attrs))


def dq(x, s, zp, t="uint8", f="float32", attrs=None) -> Case:
    return evaluate(draft(DQ, {"T1": t, "T2": f}, "test", "t", {"x": x, "x_scale": s, "x_zero_point": zp}, attrs=attrs))


def test_schema_table_matches_onnxruntime():
    """MS_SPECS is the one table; it must say what onnxruntime's registered schema says (for the
    versions whose facts are measured: a new release may change its contrib schema)."""
    require_measured("onnxruntime")
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_state

    registered = {s.name: s for s in ort_state.get_all_operator_schema()
                  if s.domain == MS_DOMAIN and s.name in ("QuantizeLinear", "DequantizeLinear")}
    for name in registered:  # the contrib ops' tables: tests/test_contrib_qlinear.py
        spec, ort = schemas.MS_SPECS[name], registered[name]
        assert ort.since_version == spec.since
        assert [(i.name, i.typeStr) for i in ort.inputs] == [(f.name, f.type_param) for f in spec.inputs]
        assert [i.option == type(i.option).Optional for i in ort.inputs] == [f.optional for f in spec.inputs]
        assert [(o.name, o.typeStr) for o in ort.outputs] == [(f.name, f.type_param) for f in spec.outputs]
        assert set(ort.attributes) == set(spec.attrs) == {"axis"}
        for tc in ort.type_constraints:
            want = sorted(spec.type_params[tc.type_param_str])
            assert sorted(dtypes.get(t).name for t in tc.allowed_type_strs) == want


# ------------------------------------------------------------------------------------------------
# hand-checked values
# ------------------------------------------------------------------------------------------------
def test_seed_002_examples():
    assert dq([0, 3, 128, 255], 2.0, 128).expected[0].tolist() == [-256.0, -250.0, 0.0, 254.0]
    x = [[[[3, 89], [34, 200], [74, 59]], [[5, 24], [24, 87], [32, 13]], [[245, 99], [4, 142], [121, 102]]]]
    y = dq(x, [2.0, 4.0, 5.0], [84, 24, 196], attrs={"axis": 1}).expected[0]
    want = (np.array(x, np.float32) - np.array([84, 24, 196], np.float32).reshape(1, 3, 1, 1)) * np.array(
        [2, 4, 5], np.float32).reshape(1, 3, 1, 1)
    assert np.array_equal(y, want)
    names = {d.name for d in ms_quant.generate("basic") if d.op == "DequantizeLinear"}
    assert {"seed-002-default", "seed-002-axis"} <= names


def test_quantize_rounds_half_to_even_and_saturates_per_type():
    assert q([0, 1, 3, 5, -1, -3], 2.0, 128).expected[0].tolist() == [128, 128, 130, 130, 128, 126]
    assert q([-20, -17, 14, 15, 16], 1.0, 0, t="int4").expected[0].astype(int).tolist() == [-8, -8, 7, 7, 7]
    assert q([-1, 0, 15, 16, 99], 1.0, 0, t="uint4").expected[0].astype(int).tolist() == [0, 0, 15, 15, 15]
    assert q([-40000, 40000], 1.0, 0, t="int16").expected[0].tolist() == [-32768, 32767]
    c = evaluate(draft(Q, {"T1": "float32", "T2": "uint8"}, "t", "t", {"x": [3.0, -2.0], "y_scale": 1.0}))
    assert c.expected[0].dtype == np.uint8 and c.expected[0].tolist() == [3, 0]  # no zero point: uint8, 0


def test_axis_rules():
    x = np.arange(6.0).reshape(2, 3)
    assert q(x, [1.0, 2.0, 4.0], [0, 0, 0], attrs={"axis": 1}).expected[0].tolist() == [[0, 0, 0], [3, 2, 1]]
    assert q(x, [1.0, 2.0], [0, 0], attrs={"axis": -2}).expected[0].tolist() == [[0, 1, 2], [2, 2, 2]]
    with pytest.raises(InvalidModel):  # no axis: per-tensor only (onnxruntime would use axis 1)
        q(x, [1.0, 2.0, 4.0], [0, 0, 0])
    with pytest.raises(InvalidModel):  # axis given: 1-D scale and zero point
        q(x, 2.0, 0, attrs={"axis": 1})
    with pytest.raises(InvalidModel):  # the only attribute is axis
        q(x, 2.0, 0, attrs={"saturate": 1})
    with pytest.raises(InvalidModel):
        dq([1, 2], 2.0, 1, t="int32")  # a non-zero int32 zero point is not a conformance case


def test_float16_readings():
    c = q([458.0], 2.4296875, 0, t="int16", f="float16")
    assert {r.name: int(r.outputs[0][0]) for r in c.readings} == {"quotient-in-float16": 188,
                                                                     "quotient-in-float32": 189}
    c = dq([65535], 1.0, 0, t="uint16", f="float16")  # 65535 rounds to 65536 > float16 max: +Inf
    assert np.isinf(c.expected[0][0].astype(np.float64))


# ------------------------------------------------------------------------------------------------
# cross-checks
# ------------------------------------------------------------------------------------------------
def test_reference_has_no_com_microsoft_implementation():
    require_fact("E22")
    c = dq([1, 2], 2.0, 1)
    with pytest.raises(Unsupported):
        resolve("onnx-reference").run(build_model(c), c.feeds)


def _ordinary(rng: np.random.Generator):
    for spec in (Q, DQ):
        for types in spec.combinations():
            is_q = spec is Q
            qt = dtypes.get(types["T2" if is_q else "T1"])
            lo, hi = qt.qrange
            for axis in (None, 0, -1):
                shape = (3, 4)
                n = shape[axis] if axis is not None else 1
                scales = [float(np.float16(v)) for v in rng.uniform(0.01, 4.0, size=n)]
                zps = [0 if qt.name == "int32" else int(v) for v in rng.integers(max(lo, -100), min(hi, 100), size=n,
                                                                                 endpoint=True)]
                s, zp = (scales, zps) if axis is not None else (scales[0], zps[0])
                attrs = {"axis": axis} if axis is not None else None
                if is_q:
                    x = rng.uniform(-300, 300, size=shape).astype(np.float16).astype(np.float64)
                    yield q(x, s, zp, t=qt.name, f=types["T1"], attrs=attrs)
                else:
                    x = rng.integers(max(lo, -5000), min(hi, 5000), size=shape, endpoint=True)
                    yield dq(x, s, zp, t=qt.name, f=types["T2"], attrs=attrs)


def test_cross_check_onnxruntime_on_ordinary_ranges():
    """Ordinary inputs pass, except where a fact applying here says otherwise."""
    bad, ran = unexplained("onnxruntime", resolve("onnxruntime"), list(_ordinary(np.random.default_rng(7))))
    assert ran >= 60 and not bad, "\n".join(bad[:3])


def test_onnxruntime_readings():
    require_fact("E39", "E40")
    runner = resolve("onnxruntime")
    c = dq([1, 2, 40001, 65535], 0.1, 0, t="uint16", f="float16")
    assert len(c.readings) == 2
    assert compare(c, runner.run(build_model(c), c.feeds)).reading == "multiply-in-float32-then-round"
    c = next(evaluate(d) for d in ms_quant.generate("ties")
             if d.name == "quotient-precision" and d.types == "float16-int16")
    assert compare(c, runner.run(build_model(c), c.feeds)).reading == "quotient-in-float32"


# ------------------------------------------------------------------------------------------------
# acceptance 4: wrong implementations caught by the families
# ------------------------------------------------------------------------------------------------
class NumpyMsQuant(BaseRunner):
    """Both contrib ops in plain float32 numpy (onnxruntime's arithmetic); subclasses break one step."""

    name = "numpy-ms-quant"

    def rnd(self, v):
        return np.rint(v)

    def qrange(self, t: dtypes.ElemType) -> tuple[int, int]:
        return t.qrange

    def zero_point(self, zp: np.ndarray) -> np.ndarray:
        return zp

    def run(self, model, inputs):
        node = model.graph.node[0]
        inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        args = [inits[n] if n in inits else np.asarray(inputs[n]) for n in node.input if n]
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        x, s = args[0], args[1]
        zp = self.zero_point(args[2]) if len(args) > 2 else None
        axis = attrs.get("axis")
        shape = [1] * x.ndim
        if axis is not None and s.size > 1:
            shape[axis] = -1
        s32 = np.asarray(s, dtype=np.float32).reshape(shape if s.size > 1 else ())
        z = (np.asarray(zp).astype(np.int64).reshape(shape if zp.size > 1 else ()) if zp is not None else 0)
        if node.op_type == "QuantizeLinear":
            t = dtypes.get(zp.dtype) if zp is not None else dtypes.get("uint8")
            lo, hi = self.qrange(t)
            with np.errstate(all="ignore"):
                y = np.clip(np.nan_to_num(self.rnd(x.astype(np.float32) / s32), nan=0.0) + z, lo, hi)
            return [np.asarray(y).astype(np.int64).astype(t.dtype)]
        y = (x.astype(np.int64) - z).astype(np.float32) * s32
        with np.errstate(over="ignore"):
            return [np.asarray(y).astype(s.dtype)]


class RoundHalfAway(NumpyMsQuant):
    def rnd(self, v):
        return np.sign(v) * np.floor(np.abs(v) + 0.5)


class SymmetricInt4(NumpyMsQuant):
    """Clamps int4 to [-7, 7] (a symmetric range), a common accelerator shortcut."""

    def qrange(self, t):
        return (-7, 7) if t.name == "int4" else t.qrange


class FirstZeroPointOnly(NumpyMsQuant):
    """Applies the per-axis scales but the first zero point to every channel."""

    def zero_point(self, zp):
        return zp.reshape(-1)[:1].reshape(())


@pytest.fixture(scope="module")
def family_cases() -> list[Case]:
    return [evaluate(d) for d in ms_quant.generate()]


def test_numpy_baseline_and_cpu_ref_pass_every_family_case(family_cases):
    assert failing(CpuRefRunner(), family_cases) == []
    assert failing(NumpyMsQuant(), family_cases) == []


@pytest.mark.parametrize("wrong, family", [(RoundHalfAway, "ties"), (SymmetricInt4, "saturation"),
                                           (FirstZeroPointOnly, "per-axis")])
def test_wrong_implementation_is_caught(family_cases, wrong, family):
    caught = failing(wrong(), family_cases)
    assert caught, f"{wrong.__name__} passes every case"
    assert any(f"/{family}/" in cid for cid in caught), f"{wrong.__name__} not caught by {family}: {caught[:5]}"

"""The onnxruntime runner's I/O adapter is bit-exact for every type it adapts, and the runner's
Unsupported / option handling behave.

Each adapted type T (every registry type whose arrays are ml_dtypes arrays) is checked with
every encoding of T through a real ORT kernel that copies T to T ("carrier": Identity, or Cast
to T itself where ORT has no Identity kernel for T), compared on raw bits (NaN payloads
included). A carrier alone cannot catch an adapter whose packing is wrong the same way in both
directions, so the element order and packing are pinned independently: in the same session a
Cast T -> float32/int32 (decode, checked against ml_dtypes), and a separate Cast float32/int32
-> T (encode, checked against the registry's bits).

ORT 1.31.1 and 1.32.0 (CPU EP) have no kernel that consumes or produces float4e2m1, so that type is only
checked through a graph whose input is its output (ORT hands the input buffer back unchanged):
this proves the adapter's round trip and ORT's byte-size accounting, not the nibble order, and
no ORT result can depend on the latter. float6e2m3/float6e3m2 have no ORT tensor type at all:
models using them are Unsupported.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from qconform import dtypes
from qconform.runner import RunnerError, Unsupported, prepare, resolve
from qconform.runners.onnxruntime_runner import _ADAPTED, OnnxRuntimeRunner, _ort_has_type

ADAPTED = sorted(t.name for t in _ADAPTED.values())
IN_ORT = [n for n in ADAPTED if _ort_has_type(dtypes.get(n).onnx)]
NOT_IN_ORT = [n for n in ADAPTED if n not in IN_ORT]
PACKED = [n for n in IN_ORT if dtypes.get(n).packed]

#: T -> (op copying T to T that ORT 1.31.1 has a CPU kernel for, lowest opset where it does).
CARRIER = {
    "bfloat16": ("Identity", 21),
    "float8e4m3fn": ("Identity", 21),
    "float8e4m3fnuz": ("Identity", 21),
    "float8e5m2": ("Identity", 21),
    "float8e5m2fnuz": ("Identity", 21),
    "int4": ("Cast", 21),
    "uint4": ("Cast", 21),
    "float8e8m0": ("Cast", 24),
    "int2": ("Cast", 25),
    "uint2": ("Cast", 25),
    "float4e2m1": (None, 25),  # no ORT kernel: graph input == graph output
}


@pytest.fixture(scope="module")
def runner() -> OnnxRuntimeRunner:
    return OnnxRuntimeRunner()


def _ir(opset: int) -> int:
    return next(ir for _r, ir, ai, *_ in helper.VERSION_TABLE if ai >= opset)


def _model(nodes, inputs, outputs, opset, inits=(), ir=None) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "t", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir or _ir(opset))


def _wide(t: dtypes.ElemType) -> dtypes.ElemType:
    """A numpy type every value of ``t`` converts to exactly."""
    return dtypes.get("float32" if t.is_float else "int32")


def _shape(rank: int) -> list:
    return [f"d{i}" for i in range(rank)]


def _carrier_model(t: dtypes.ElemType, rank: int) -> onnx.ModelProto:
    """x:T -> y:T (carrier) and x -> z:wide (Cast, pins the decode)."""
    op, opset = CARRIER[t.name]
    x = helper.make_tensor_value_info("x", t.onnx, _shape(rank))
    if op is None:
        m = _model([], [x], [helper.make_tensor_value_info("x", t.onnx, _shape(rank))], opset)
        onnx.checker.check_model(m, full_check=True)
        return m
    wide = _wide(t)
    nodes = [
        helper.make_node(op, ["x"], ["y"], **({"to": t.onnx} if op == "Cast" else {})),
        helper.make_node("Cast", ["x"], ["z"], to=wide.onnx),
    ]
    outs = [helper.make_tensor_value_info("y", t.onnx, _shape(rank)), helper.make_tensor_value_info("z", wide.onnx, _shape(rank))]
    m = _model(nodes, [x], outs, opset)
    onnx.checker.check_model(m, full_check=True)
    return m


def _assert_same_bits(t: dtypes.ElemType, got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == t.dtype, (got.dtype, t.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    gb, wb = t.to_bits(got), t.to_bits(want)
    bad = np.flatnonzero(gb.reshape(-1) != wb.reshape(-1))
    assert bad.size == 0, f"{t.name}: {bad.size} codes differ, first {[(hex(wb.flat[i]), hex(gb.flat[i])) for i in bad[:5]]}"


def _check_carried(t: dtypes.ElemType, x: np.ndarray, outs: list[np.ndarray]) -> None:
    _assert_same_bits(t, outs[0], x)
    if len(outs) > 1:  # the decode pin: ORT's view of each element equals ml_dtypes' view
        wide = _wide(t)
        z = outs[1]
        assert z.dtype == wide.dtype and z.shape == x.shape
        np.testing.assert_array_equal(z, x.astype(wide.dtype))  # NaN == NaN here


def _all_codes(t: dtypes.ElemType) -> np.ndarray:
    return t.all_values()


# ------------------------------------------------------------------------------------------------
# Exhaustive bit-exactness
# ------------------------------------------------------------------------------------------------
def test_every_adapted_type_has_a_carrier():
    assert set(IN_ORT) == set(CARRIER), "a new ml_dtypes type in the registry needs a carrier here"
    assert set(NOT_IN_ORT) == {"float6e2m3", "float6e3m2"}


@pytest.mark.parametrize("name", IN_ORT)
def test_all_codes_round_trip(runner, name):
    """Every encoding (NaN payloads, -0 included), forward, reversed, and one short (odd count)."""
    t = dtypes.get(name)
    codes = _all_codes(t)
    run = runner.prepare(_carrier_model(t, 1))
    for x in (codes, codes[::-1].copy(), codes[1:].copy()):
        _check_carried(t, x, run({"x": x}))


@pytest.mark.parametrize("name", IN_ORT)
def test_all_codes_encode_pin(runner, name):
    """ORT writes T (Cast wide -> T) and the adapter reads back exactly the expected codes."""
    t = dtypes.get(name)
    if CARRIER[name][0] is None:
        pytest.skip(f"onnxruntime has no kernel producing {name}")
    wide = _wide(t)
    codes = _all_codes(t)
    codes = codes[~t.is_nan_bits(t.to_bits(codes))]  # Cast canonicalises NaN: values only
    src = codes.astype(wide.dtype)
    opset = CARRIER[name][1]
    attrs = {"saturate": 0} if name in dtypes.FLOAT8 else {}  # saturate=1 would map +-Inf to +-max
    m = _model(
        [helper.make_node("Cast", ["w"], ["y"], to=t.onnx, **attrs)],
        [helper.make_tensor_value_info("w", wide.onnx, [src.size])],
        [helper.make_tensor_value_info("y", t.onnx, [src.size])],
        opset,
    )
    (y,) = runner.run(m, {"w": src})
    _assert_same_bits(t, y, codes)


SHAPES = {
    0: [()],
    1: [(1,), (3,), (5,), (7,), (0,), (16,), (9,)],
    2: [(1, 1), (3, 5), (2, 7), (5, 3), (1, 0)],
    3: [(1, 1, 1), (2, 3, 5), (3, 1, 7), (2, 0, 3), (1, 3, 3)],
}


@pytest.mark.parametrize("rank", sorted(SHAPES), ids=lambda r: f"rank{r}")
@pytest.mark.parametrize("name", IN_ORT)
def test_shapes_and_odd_counts(runner, name, rank):
    """Sub-byte packing with partial last bytes, empty tensors, scalars; one session per rank."""
    t = dtypes.get(name)
    rng = np.random.default_rng([rank, t.onnx])
    run = prepare(runner, _carrier_model(t, rank))
    for shape in SHAPES[rank]:
        x = t.from_bits(rng.integers(0, 1 << t.bits, size=shape, dtype=np.uint64))
        outs = run({"x": x})
        _check_carried(t, x, outs)


@pytest.mark.parametrize("name", NOT_IN_ORT)
def test_types_without_ort_tensor_type_are_unsupported(runner, name):
    t = dtypes.get(name)
    x = helper.make_tensor_value_info("x", t.onnx, [3])
    m = _model([], [x], [helper.make_tensor_value_info("x", t.onnx, [3])], 25)
    with pytest.raises(Unsupported, match=f"no tensor type {name}"):
        runner.run(m, {"x": t.from_bits(np.arange(3))})


def test_model_is_not_modified(runner):
    t = dtypes.get("int4")
    m = _carrier_model(t, 1)
    before = m.SerializeToString()
    runner.run(m, {"x": _all_codes(t)})
    assert m.SerializeToString() == before


# ------------------------------------------------------------------------------------------------
# Real quantisation kernels through the adapter
# ------------------------------------------------------------------------------------------------
def _quantize_model(out_type: str, scale: float, zp, opset: int = 21, n: int = 9, in_type: str = "float32", ir=None):
    q, f = dtypes.get(out_type), dtypes.get(in_type)
    inits = [
        numpy_helper.from_array(np.array(scale, dtype=f.dtype), "s"),
        numpy_helper.from_array(np.array(zp, dtype=q.dtype), "z"),
    ]
    return _model(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])],
        [helper.make_tensor_value_info("x", f.onnx, [n])],
        [helper.make_tensor_value_info("y", q.onnx, [n])],
        opset,
        inits,
        ir=ir,
    )


def test_quantize_linear_int4(runner):
    x = np.array([0.0, 0.25, 0.75, 1.25, -3.0, -4.5, 3.4, 100.0, -100.0], dtype=np.float32)
    (y,) = runner.run(_quantize_model("int4", 0.5, 1), {"x": x})
    # round-half-even(x / 0.5) + 1, saturated to [-8, 7]
    want = np.array([1, 1, 3, 3, -5, -8, 8, 7, -8]).clip(-8, 7)
    assert y.dtype == dtypes.get("int4").dtype and y.shape == (9,)
    np.testing.assert_array_equal(y.astype(np.int32), want)


def test_quantize_linear_float8e5m2(runner):
    t = dtypes.get("float8e5m2")
    x = np.array([0.0, -0.0, 1.0, 1.125, 1.375, -3.0, 57344.0, 1e6, -1e6], dtype=np.float32)
    (y,) = runner.run(_quantize_model("float8e5m2", 1.0, 0.0), {"x": x})
    # saturate=1: RNE to e5m2, out of range clamps to +-57344
    want = np.clip(x, -57344.0, 57344.0).astype(t.dtype)
    assert y.dtype == t.dtype
    _assert_same_bits(t, y, want)
    assert t.to_bits(y)[1] == 0x80  # -0 survives


def test_dequantize_linear_uint2(runner):
    t = dtypes.get("uint2")
    m = _model(
        [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"])],
        [helper.make_tensor_value_info("x", t.onnx, [5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5])],
        25,
        [numpy_helper.from_array(np.array(2.0, np.float32), "s"), numpy_helper.from_array(np.array(1, t.dtype), "z")],
    )
    x = t.from_bits(np.array([0, 1, 2, 3, 2]))
    (y,) = runner.run(m, {"x": x})
    np.testing.assert_array_equal(y, np.array([-2.0, 0.0, 2.0, 4.0, 2.0], np.float32))


# ------------------------------------------------------------------------------------------------
# Unsupported vs. real failures
# ------------------------------------------------------------------------------------------------
def _ms_quantize(out_type: str):
    m = _quantize_model(out_type, 1.0, 0, opset=21)
    m.graph.node[0].domain = "com.microsoft"
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return m


UNSUPPORTED = {
    "opset28-ir13": lambda: _quantize_model("uint8", 1.0, 0, opset=28, ir=13),
    "ir14": lambda: _quantize_model("uint8", 1.0, 0, opset=28),
    "opset27": lambda: _quantize_model("int8", 1.0, 0, opset=27),
    "float4e2m1-no-kernel": lambda: _quantize_model("float4e2m1", 1.0, 0.0, opset=23),
    "bfloat16-input-no-kernel": lambda: _quantize_model("int8", 1.0, 0, opset=21, in_type="bfloat16"),
    "float6-no-type": lambda: _quantize_model("float6e2m3", 1.0, 0.0, opset=25),
    "ms-float8-type": lambda: _ms_quantize("float8e4m3fn"),
}


@pytest.mark.parametrize("case", list(UNSUPPORTED))
def test_what_onnxruntime_refuses_is_one_clean_unsupported_line(runner, case):
    """Which of these models a release refuses is a fact about the release (E33, E34, E44, E45 in
    qconform/docs/facts.md, checked by tests/test_facts.py); whatever it refuses must come out as Unsupported,
    on one line, without ORT's status prefix or C++ location."""
    try:
        runner.prepare(UNSUPPORTED[case]())
    except Unsupported as exc:
        msg = str(exc)
        assert msg and "\n" not in msg and "[ONNXRuntimeError]" not in msg and "onnxruntime_src" not in msg, msg


_MS = "[ONNXRuntimeError] : 1 : FAIL : /onnxruntime_src/onnxruntime/core/graph/model_load_utils.h:46 void " \
      "onnxruntime::model_load_utils::ValidateOpsetForDomain(const std::unordered_map<std::__cxx11::basic_string<char>, " \
      "int>&, const onnxruntime::logging::Logger&, bool, const std::string&, int) ONNX Runtime only *guarantees* " \
      "support for models stamped with official released onnx opset versions. Opset {n} is under development and " \
      "support for this is limited. The operator schemas and or other functionality may change before next ONNX " \
      "release and in this case ONNX Runtime will not guarantee backward compatibility. Current official support for " \
      "domain ai.onnx is till opset 26.\n"
#: Refusal texts recorded from the measured releases (exception class, text, reason the runner must give):
#: the classification is qconform's code, so it is checked for every measured release whatever is installed.
RECORDED_REFUSALS = {
    "1.31.1-opset27": ("Fail", _MS.format(n=27), r"^onnxruntime [\d.]+ supports domain ai\.onnx up to opset 26, "
                                                 r"model uses opset 27$"),
    "1.31.1-ir14": ("Fail", "[ONNXRuntimeError] : 1 : FAIL : /onnxruntime_src/onnxruntime/core/graph/model.cc:256 "
                            "onnxruntime::Model::Model(onnx::ModelProto&&, const onnxruntime::PathString&, const "
                            "onnxruntime::IOnnxRuntimeOpSchemaRegistryList*, const onnxruntime::logging::Logger&, const "
                            "onnxruntime::ModelOptions&) Unsupported model IR version: 14, max supported IR version: 13\n",
                    r"^Unsupported model IR version: 14, max supported IR version: 13$"),
    "1.32.0-opset28": ("NotImplemented", "[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation "
                                         "for QuantizeLinear(28) node with name ''",
                       r"^Could not find an implementation for QuantizeLinear\(28\) node with name ''$"),
    "1.32.0-precision": ("Fail", "[ONNXRuntimeError] : 1 : FAIL : Exception during initialization: /onnxruntime_src/"
                                 "onnxruntime/core/providers/cpu/quantization/quantize_linear.cc:58 onnxruntime::"
                                 "QuantizeLinear<T>::QuantizeLinear(const onnxruntime::OpKernelInfo&) [with T = signed "
                                 "char] precision_ == 0 || precision_ == ONNX_NAMESPACE::TensorProto::FLOAT || precision_ "
                                 "== ONNX_NAMESPACE::TensorProto::FLOAT16 was false. CPU QuantizeLinear only supports "
                                 "precision 0 (use scale type), FLOAT, and FLOAT16.\n",
                         r"CPU QuantizeLinear only supports precision 0 \(use scale type\), FLOAT, and FLOAT16\.$"),
}


@pytest.mark.parametrize("name", list(RECORDED_REFUSALS))
def test_recorded_refusals_of_measured_releases_are_classified_unsupported(name):
    import re

    from onnxruntime.capi import onnxruntime_pybind11_state as state

    from qconform.runners.onnxruntime_runner import _unsupported_reason

    cls, text, want = RECORDED_REFUSALS[name]
    reason = _unsupported_reason(getattr(state, cls)(text), _quantize_model("int8", 1.0, 0, opset=25))
    assert reason is not None and re.search(want, reason), reason


def test_a_run_time_failure_is_not_a_refusal():
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    from qconform.runners.onnxruntime_runner import _unsupported_reason

    text = ("[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running QLinearMatMul node. "
            "QLinearMatmul : input zero point must be a scalar or 1D tensor of size 1")
    assert _unsupported_reason(state.Fail(text), _quantize_model("int8", 1.0, 0, opset=21)) is None


def test_invalid_model_is_an_error_not_unsupported(runner):
    # Identity has no int2 before opset 25: the model itself is wrong, which must not read as "unsupported".
    t = dtypes.get("int2")
    m = _model(
        [helper.make_node("Identity", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", t.onnx, [3])],
        [helper.make_tensor_value_info("y", t.onnx, [3])],
        21,
    )
    with pytest.raises(Exception) as info:
        runner.prepare(m)
    assert not isinstance(info.value, Unsupported)


def test_missing_input_is_an_error(runner):
    run = runner.prepare(_quantize_model("int4", 1.0, 0))
    with pytest.raises(KeyError, match="missing model input"):
        run({})


def test_native_types_pass_straight_through(runner):
    m = _quantize_model("uint8", 0.5, 128, n=4)
    (y,) = runner.run(m, {"x": np.array([0.0, 1.0, -1.0, 200.0], np.float32)})
    assert y.dtype == np.uint8
    np.testing.assert_array_equal(y, [128, 130, 126, 255])


# ------------------------------------------------------------------------------------------------
# Options and describe()
# ------------------------------------------------------------------------------------------------
def test_describe_defaults():
    import onnxruntime as ort

    info = OnnxRuntimeRunner().describe()
    assert info["name"] == "onnxruntime"
    assert info["version"] == ort.__version__
    assert info["device"] == "cpu"
    assert info["providers"] == ["CPUExecutionProvider"]
    assert info["options"]["optimize"] == "ORT_DISABLE_ALL"
    assert info["options"]["intra_op_threads"] == 1


def test_options_reach_the_session():
    import onnxruntime as ort

    so = OnnxRuntimeRunner(optimize="1", threads="3")._session_options()
    assert so.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert so.intra_op_num_threads == 3
    so = OnnxRuntimeRunner()._session_options()
    assert so.graph_optimization_level == ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    assert so.intra_op_num_threads == 1
    # optimisation on still runs the same kernel and gives the same bits
    x = np.linspace(-5, 5, 9, dtype=np.float32)
    m = _quantize_model("int4", 0.5, 1)
    a = OnnxRuntimeRunner(optimize="1", threads="0").run(m, {"x": x})[0]
    b = OnnxRuntimeRunner().run(m, {"x": x})[0]
    _assert_same_bits(dtypes.get("int4"), a, b)


def test_resolve_and_options():
    r = resolve("onnxruntime", {"providers": "CPUExecutionProvider", "optimize": "0", "threads": "2"})
    assert isinstance(r, OnnxRuntimeRunner) and r.threads == 2
    with pytest.raises(RunnerError, match="unknown option.*bogus"):
        resolve("onnxruntime", {"bogus": "1"})
    with pytest.raises(RunnerError, match="optimize='2'"):
        resolve("onnxruntime", {"optimize": "2"})
    with pytest.raises(RunnerError, match="threads='many'"):
        resolve("onnxruntime", {"threads": "many"})
    with pytest.raises(RunnerError, match="unknown execution provider.*NoSuchExecutionProvider"):
        resolve("onnxruntime", {"providers": "NoSuchExecutionProvider"})
    with pytest.raises(RunnerError, match=r"CPUExecutionProvidr \(did you mean CPUExecutionProvider\?\); "
                                          r"available in this build: .*CPUExecutionProvider"):
        resolve("onnxruntime", {"providers": "CPUExecutionProvidr"})


def test_cuda_provider_when_absent_or_present():
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():
        r = resolve("onnxruntime", {"providers": "CUDAExecutionProvider,CPUExecutionProvider"})
        assert r.describe()["device"] == "cuda"
        (y,) = r.run(_quantize_model("int4", 0.5, 1), {"x": np.zeros(9, np.float32)})
        assert y.dtype == dtypes.get("int4").dtype
    else:
        with pytest.raises(RunnerError, match="cannot start here.*CUDAExecutionProvider"):
            resolve("onnxruntime", {"providers": "CUDAExecutionProvider"})

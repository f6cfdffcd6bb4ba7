"""The bundled runners are real: each runs the spine, and a deliberately wrong runner fails on named cases."""
from __future__ import annotations

import numpy as np
import pytest

from support import require_fact
from conftest import run_pytest
from qconform.compare import compare
from qconform.model import build_model
from qconform.runner import prepare, resolve
from qconform.runners.cpu_ref import CpuRefRunner


class RoundHalfAway(CpuRefRunner):
    """A plausible bug: ties rounded away from zero (C's round()) instead of to even."""

    name = "round-half-away"

    def prepare(self, model):
        node = model.graph.node[0]
        inits = {t.name: t for t in model.graph.initializer}
        from onnx import numpy_helper

        def run(feeds):
            x = feeds[node.input[0]].astype(np.float64)
            s = numpy_helper.to_array(inits[node.input[1]]).astype(np.float64)
            zp = numpy_helper.to_array(inits[node.input[2]])
            q = np.sign(x / s) * np.floor(np.abs(x / s) + 0.5) + zp.astype(np.int64)
            info = np.iinfo(zp.dtype)
            return [np.clip(q, info.min, info.max).astype(zp.dtype)]
        return run


@pytest.mark.slow  # the default run: cpu-ref passes opset 10, 13 and 21 (test_each_bundled_runner_runs_the_suite)
def test_cpu_ref_passes_the_whole_corpus(corpus):
    runner = CpuRefRunner()
    failures = [c.id for c in corpus.cases if compare(c, prepare(runner, build_model(c))(c.feeds)).verdict != "pass"]
    assert failures == []


def test_wrong_runner_fails_on_named_cases(tmp_path):
    r = run_pytest(f"--runner={__file__}:RoundHalfAway", "-m", "op_QuantizeLinear and opset_13", "-q")
    assert r.returncode == 1
    # x/s = -0.5 is a tie: to even gives 0, half away from zero gives -1.
    assert "QuantizeLinear-13/float32-int8/basic/per-tensor" in r.stdout
    assert "=0xff (-1), but should be 0x00 (0) [x=-1.0, y_scale=2.0, y_zero_point=0]" in r.stdout


@pytest.mark.parametrize("name", ["onnxruntime", "onnx-reference", "cpu-ref"])
def test_each_bundled_runner_runs_the_suite(name):
    r = run_pytest(f"--runner={name}", "-m", "opset_10 or opset_13", "-q", "-rs")  # the whole corpus: test_facts
    assert "qconform summary" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
    assert " passed" in r.stdout
    if name == "cpu-ref":
        assert r.returncode == 0 and " failed" not in r.stdout


def test_ort_missing_kernel_is_unsupported():
    require_fact("E33")  # onnxruntime has no bfloat16 QuantizeLinear kernel (a fact of the measured releases)
    r = run_pytest("--runner=onnxruntime", "-m", "opset_21 and types_bfloat16_int8", "-q", "-rs")
    assert "unsupported:" in r.stdout and "skipped" in r.stdout, r.stdout[-3000:]


def test_describe_identifies_each_runner():
    for name in ("onnxruntime", "onnx-reference", "cpu-ref"):
        info = resolve(name).describe()
        assert info["name"] == name and info["version"]


@pytest.mark.needs("onnxruntime")
@pytest.mark.parametrize("providers, verdict, says", [
    ("AzureExecutionProvider", "unsupported", "fallback to CPU EP has been explicitly disabled"),
    ("AzureExecutionProvider,CPUExecutionProvider", "unsupported",
     "ran on CPUExecutionProvider (CPU fallback), not on AzureExecutionProvider"),
    ("CPUExecutionProvider", "pass", ""),
])
def test_work_the_cpu_fallback_did_is_never_credited_to_the_provider_under_test(providers, verdict, says):
    """onnxruntime runs every node an execution provider does not claim on its CPU EP. The Azure EP
    (in every onnxruntime wheel) claims none: with fallback off the session is refused with ORT's
    reason, with fallback on the case is unsupported, never a pass of the Azure EP."""
    import onnxruntime as ort

    from qconform import corpus as corpus_mod
    from qconform.execution import judge
    from qconform.runners.onnxruntime_runner import OnnxRuntimeRunner

    if "AzureExecutionProvider" not in ort.get_available_providers():
        pytest.skip("this onnxruntime build has no AzureExecutionProvider")
    index = corpus_mod.index(corpus_mod.DEFAULT_ROOT)
    case = index.case(next(r.id for r in index.refs if r.group == "QuantizeLinear-13"))
    runner = OnnxRuntimeRunner(providers=providers)
    res = judge(runner, case)
    assert res.verdict == verdict and says in (res.record.problem or ""), res.record
    assert runner.describe()["options"].get("fallback_credited", False) is False


@pytest.mark.needs("onnxruntime")
@pytest.mark.parametrize("providers", ["AzureExecutionProvider", "AzureExecutionProvider,CPUExecutionProvider"])
def test_constant_folding_is_never_credited_to_the_provider_under_test(providers):
    """At ``optimize=1`` onnxruntime computes a node whose inputs are all constants on the CPU while it
    builds the session, before any EP sees the graph: no node runs, so no profile shows it. The case
    is the EP's only if ORT assigned its node to it; a node assigned nowhere makes it unsupported
    (a QuantizeLinear of constants gave a pass of the Azure EP, which claims no node, before)."""
    import onnxruntime as ort

    from qconform import corpus as corpus_mod
    from qconform.execution import judge
    from qconform.runners.onnxruntime_runner import OnnxRuntimeRunner

    if "AzureExecutionProvider" not in ort.get_available_providers():
        pytest.skip("this onnxruntime build has no AzureExecutionProvider")
    index = corpus_mod.index(corpus_mod.DEFAULT_ROOT)
    case = index.case("QuantizeLinear-10/float32-uint8/constant-operand/x-constant-basic-per-tensor")
    assert judge(OnnxRuntimeRunner(optimize="1"), case).verdict == "pass"  # the CPU EP's own pass stays one
    res = judge(OnnxRuntimeRunner(providers=providers, optimize="1"), case)
    assert res.verdict == "unsupported", res.record
    assert "computed by onnxruntime before AzureExecutionProvider saw the graph" in (res.record.problem or "")


def test_an_ep_option_reaches_a_built_in_execution_provider():
    """``ep.KEY`` goes to the provider under test, a built-in one's too (the certificate names the
    device from it): the session is made with (name, options)."""
    from qconform.runners.onnxruntime_runner import OnnxRuntimeRunner

    ort = pytest.importorskip("onnxruntime")
    if "AzureExecutionProvider" not in ort.get_available_providers():
        pytest.skip("this onnxruntime build has no AzureExecutionProvider")
    runner = OnnxRuntimeRunner(providers="AzureExecutionProvider,CPUExecutionProvider", **{"ep.device_type": "GPU.0"})
    assert runner._provider_list() == [("AzureExecutionProvider", {"device_type": "GPU.0"}), "CPUExecutionProvider"]
    assert OnnxRuntimeRunner()._provider_list() == ["CPUExecutionProvider"]


def test_an_onnxruntime_variant_is_named_by_its_provider_and_never_taken_for_the_cpu_ep() -> None:
    """``--runner onnxruntime-openvino`` is the onnxruntime runner on OpenVINO's EP alone; a report's
    identity names that variant (facts, findings and the scoreboard key on it), an undeclared provider
    keeps its own name, and where the variant's wheel is missing the runner says so in one line."""
    from qconform.runner import RunnerError, runtime_name

    cpu = {"name": "onnxruntime", "providers": ["CPUExecutionProvider"]}
    assert runtime_name(cpu) == "onnxruntime" and runtime_name({"name": "tract"}) == "tract"
    assert runtime_name({"name": "onnxruntime", "providers": ["OpenVINOExecutionProvider"]}) == "onnxruntime-openvino"
    assert runtime_name({"name": "onnxruntime", "providers": ["CUDAExecutionProvider"]}) == \
        "onnxruntime[CUDAExecutionProvider]"
    onnxruntime = pytest.importorskip("onnxruntime")
    if "OpenVINOExecutionProvider" not in onnxruntime.get_available_providers():
        with pytest.raises(RunnerError) as err:
            resolve("onnxruntime-openvino")
        assert "\n" not in str(err.value) and "OpenVINOExecutionProvider not available" in str(err.value)

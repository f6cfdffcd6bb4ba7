"""Qualcomm's QNN EP on its HTP simulator (``--runner onnxruntime-qnn``) and onnxruntime at its
default optimisation level (``--runner onnxruntime-optimized``): the fusing runtimes the QDQ patterns
exist for. Real runtimes, no mock: the QNN tests need the onnxruntime-qnn wheel (the qnn extra)."""
from __future__ import annotations

import json

import pytest

from qconform import cli

#: The deviations measured on QNN HTP when the patterns were added (the issue's list), by case.
MEASURED = {
    "qdq.FakeQuant-21/float32-uint8/basic/uniform": "qdq-pair-as-clamp",
    "qdq.Requant-21/uint8-uint8/basic/reported-0.0372-121-to-0.0291-3": "requantise-half-up-biased",
    "qdq.Relu-21/float32-uint8/basic/from-float-input": "input-quantise-float16-half-up",
    "qdq.Add-21/uint8-uint8-uint8/ties/scale-relation-0-1": None,  # unexplained: QNN's adder is closed
    "qdq.Mul-21/uint8-uint8-uint8/ties/scale-relation-0-1": None,
    "QLinearMatMul-21/float32-int8-int8-int8/basic/ordinary": None,
}


@pytest.fixture(scope="module")
def qnn_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("qnn")
    cases = [w for c in [*MEASURED, "qdq.Transpose-21/uint8-uint8/basic/same-qparams",
                         "QuantizeLinear-21/float32-uint8/basic/per-tensor", "QLinearMatMul-10/*/basic/*"]
             for w in ("--case", c)]
    status = cli.main(["certify", "--runner", "onnxruntime-qnn", "-j", "1", "--report", str(out), *cases])
    return status, json.loads((out / "report.json").read_text())


@pytest.mark.needs("onnxruntime_qnn")
def test_qnn_runs_on_the_htp_simulator_without_cpu_fallback(qnn_report):
    status, report = qnn_report
    ident = report["runner"]
    assert ident["providers"] == ["QNNExecutionProvider"] and ident["options"]["cpu_fallback"] is False
    ep = ident["execution_provider"]
    assert ep["package"] == "onnxruntime-qnn" and ep["version"] and ep["sdk"] and ident["device"] == "htp"
    from qconform.report.certificate import certified

    assert certified(ident).startswith("onnxruntime-qnn ") and "QNNExecutionProvider" in certified(ident)
    assert status == 1 and report["complete"]


@pytest.mark.needs("onnxruntime_qnn")
def test_a_node_the_ep_refuses_is_unsupported_with_its_own_reason(qnn_report):
    _, report = qnn_report
    verdicts = {c["id"]: c for c in report["cases"]}
    single = verdicts["QuantizeLinear-21/float32-uint8/basic/per-tensor"]
    transpose = verdicts["qdq.Transpose-21/uint8-uint8/basic/same-qparams"]
    assert single["verdict"] == transpose["verdict"] == "unsupported"
    reasons = [r["text"] for r in report["reasons"]]
    assert "QNN EP does not support a single Quantize/Dequantize node in a partition." in reasons[single["reason"]]
    assert "backendValidateOpConfig" in reasons[transpose["reason"]] or "Transpose" in reasons[transpose["reason"]]
    assert not any(c["verdict"] == "error" and "fallback" in (f.get("problem") or "")
                   for c in report["cases"] for f in report["failures"] if f["id"] == c["id"])


@pytest.mark.needs("onnxruntime_qnn")
def test_the_measured_qnn_deviations_are_failures_named_or_shown_with_their_evidence(qnn_report):
    _, report = qnn_report
    failures = {f["id"]: f for f in report["failures"]}
    qlmm = [f for f in failures.values() if f["id"].startswith("QLinearMatMul-10/")]
    assert qlmm, "QNN's single QLinearMatMul deviations (by one code) are among its failures"
    for cid, model in MEASURED.items():
        f = failures[cid]
        assert f["verdict"] == "fail" and f["first_mismatches"], cid
        named = list(f.get("diagnosis") or [])
        if model:
            assert named and named[0] == model, (cid, named)
        else:
            assert f.get("evidence_file") or f["first_mismatches"], cid


@pytest.mark.needs("onnxruntime_qnn")
def test_qnn_is_certified_on_its_declared_scope_said_once(tmp_path):
    """Without --case the QNN row covers the patterns and every operator but the single Q/DQ nodes
    (the compute ops it runs, QLinearConv among them, and those it refuses, each refusal a verdict) and
    says once why the single-node QuantizeLinear/DequantizeLinear cases are not run (not 23,000
    unsupported cases)."""
    from qconform.runner import declared_scope, identity, resolve

    scope = declared_scope(identity(resolve("onnxruntime-qnn"), "onnxruntime-qnn"))  # what certify reads: the runner's file too
    assert scope and scope["cases"][0] == "qdq.*"
    assert {"QLinearMatMul-*", "QLinearConv-*", "com.microsoft.QLinearAdd-*"} <= set(scope["cases"])
    assert not {g for g in scope["cases"] if g.removeprefix("com.microsoft.").startswith(("QuantizeLinear",
                                                                                         "DequantizeLinear"))}
    assert "does not support a single Quantize/Dequantize node" in scope["why"]


@pytest.mark.needs("onnxruntime")
def test_onnxruntime_at_its_default_level_shows_the_mul_fusion_named(tmp_path):
    case = "qdq.Mul-21/uint8-uint8-uint8/ties/scale-relation-0-1"
    assert cli.main(["certify", "--runner", "onnxruntime-optimized", "--case", case, "--case",
                     "qdq.Gemm-21/uint8-uint8-uint8/ties/requantisation-near-tie", "--report", str(tmp_path)]) == 1
    report = json.loads((tmp_path / "report.json").read_text())
    named = {f["id"]: list(f.get("diagnosis") or []) for f in report["failures"]}
    assert named[case][:1] == ["fused-qlinear-mul-float-multiplier"]
    assert named["qdq.Gemm-21/uint8-uint8-uint8/ties/requantisation-near-tie"][:1] == ["fused-integer-requantisation"]
    assert report["runner"]["options"]["optimize"] == "ORT_ENABLE_ALL"
    from qconform.report.certificate import certified

    assert certified(report["runner"]).startswith("onnxruntime-optimized (onnxruntime ")


def _folded_branch_model():
    """x -> DQ -> Add <- DQ <- Q <- Neg <- DQ <- constant: at ORT_ENABLE_ALL onnxruntime folds the constant
    branch on the CPU before the EP sees the graph; the rest is a QDQ Add the EP runs."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    node = helper.make_node
    nodes = [node("DequantizeLinear", ["cq", "s", "z"], ["cf"], name="n0_DequantizeLinear"),
             node("Neg", ["cf"], ["c"], name="n1_Neg"),
             node("QuantizeLinear", ["c", "s", "z"], ["cq2"], name="n2_QuantizeLinear"),
             node("DequantizeLinear", ["cq2", "s", "z"], ["c2"], name="n3_DequantizeLinear"),
             node("DequantizeLinear", ["xq", "s", "z"], ["xf"], name="n4_DequantizeLinear"),
             node("Add", ["xf", "c2"], ["a"], name="n5_Add"),
             node("QuantizeLinear", ["a", "s", "z"], ["yq"], name="n6_QuantizeLinear")]
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "s"),
             numpy_helper.from_array(np.array(128, np.uint8), "z"),
             numpy_helper.from_array(np.full((3, 4), 120, np.uint8), "cq")]
    graph = helper.make_graph(nodes, "folded", [helper.make_tensor_value_info("xq", TensorProto.UINT8, [3, 4])],
                              [helper.make_tensor_value_info("yq", TensorProto.UINT8, [3, 4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


@pytest.mark.needs("onnxruntime_qnn")
def test_optimize_1_never_credits_a_constant_folded_node_to_the_ep():
    """The same model: with optimisations off every node runs on the EP; at optimize=1 the folded
    branch was computed by onnxruntime's CPU, so the case is unsupported on the EP, never a pass."""
    import numpy as np

    from qconform.runner import Unsupported, resolve

    x = {"xq": np.arange(130, 142, dtype=np.uint8).reshape(3, 4)}
    off = resolve("onnxruntime-qnn", {"optimize": "0"}).prepare(_folded_branch_model())
    assert off(x)[0].shape == (3, 4)
    with pytest.raises(Unsupported, match=r"n0_DequantizeLinear, n1_Neg, n2_QuantizeLinear were computed by "
                                          r"onnxruntime before QNNExecutionProvider saw the graph"):
        resolve("onnxruntime-qnn", {"optimize": "1"}).prepare(_folded_branch_model())(x)

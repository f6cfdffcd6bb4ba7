"""``qconform certify --model FILE``: a user's own quantized model certified group by group.

A tiny CNN is built here (seeded float weights), quantized by onnxruntime's own quantize_static in
the QDQ and the QOperator format (nothing fetched), and certified through onnxruntime and
onnx.reference; a deviation model planted as the runner must be named by the group's nodes; hostile
model files must each cost one line on stderr, exit status 2 and nothing written.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install onnxruntime)")

from qconform import cli  # noqa: E402
from qconform.verdicts import FAIL  # noqa: E402


def _tiny_cnn(path: Path) -> None:
    rng = np.random.default_rng(7)
    arrays = {"w1": rng.normal(0, 0.3, (4, 2, 3, 3)), "b1": rng.normal(0, 0.1, 4), "w2": rng.normal(0, 0.3, (4, 4, 3, 3)),
              "b2": rng.normal(0, 0.1, 4), "wm": rng.normal(0, 0.3, (4, 3))}
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in arrays.items()]
    inits.append(numpy_helper.from_array(np.array([1, 4], np.int64), "shape"))
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["a"], name="add"),
             helper.make_node("AveragePool", ["a"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
             helper.make_node("Reshape", ["g", "shape"], ["f"], name="flat"),
             helper.make_node("MatMul", ["f", "wm"], ["y"], name="fc")]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def _quantized(folder: Path, fmt_name: str) -> Path:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(3)
            self.items = iter([{"x": rng.normal(0, 1, (1, 2, 8, 8)).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.items, None)

    src, out = folder / "float.onnx", folder / f"{fmt_name}.onnx"
    if not src.exists():
        _tiny_cnn(src)
    quantize_static(str(src), str(out), Reader(), quant_format=getattr(QuantFormat, fmt_name),
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True)
    return out


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    return {f: _quantized(folder, f) for f in ("QDQ", "QOperator")}


def _certify(capsys, *words: str) -> tuple[int, str, str]:
    status = cli.main(["certify", *words])
    got = capsys.readouterr()
    return status, got.out, got.err


def _check_groups(model: Path, report: Path, err: str) -> str:
    text = (report / "groups.md").read_text()
    for node in onnx.load(str(model)).graph.node:  # every node of the model is in a group
        assert f"{node.name} ({node.op_type})" in text, node.name
    rows = [r for r in text.splitlines() if r.startswith("| ") and not r.startswith("| group")]
    assert rows and all(r.rstrip(" |").split("| ")[-1].strip() for r in rows)  # each with a verdict or a reason
    said = [line for line in err.splitlines() if "not judged:" in line]
    assert len(said) == len(set(said)) == text.count("not judged:")  # each group without one said once
    return text


@pytest.mark.parametrize("runner", ["onnxruntime", "onnx-reference"])
def test_qdq_model_every_group_listed(models, tmp_path, capsys, runner):
    report = tmp_path / "report"
    status, out, err = _certify(capsys, "--model", str(models["QDQ"]), "--runner", runner, "--report", str(report),
                                "-j", "1")
    assert status in (0, 1), err
    text = _check_groups(models["QDQ"], report, err)
    add_row = next(r for r in text.splitlines() if r.startswith("| add | qdq |"))
    assert "not judged" not in add_row  # the QDQ Add group is judged through the graph oracle
    data = json.loads((report / "report.json").read_text())
    ids = [c["id"] for c in data["cases"]]
    assert any(i.startswith("qdq.Add-17/") and "/model/add." in i for i in ids)
    assert any("/model/x_QuantizeLinear." in i for i in ids)
    assert (report / "model-corpus" / "MANIFEST").is_file()
    # one model's groups certify no op version: every statement says so, none says conformant
    for text in (out, (report / "summary.md").read_text(), (report / "certificate.json").read_text()):
        assert "one model's node groups" in text and "no conformance is stated" in text
        assert "conformant" not in text and "conforms bit-exactly" not in text


def test_qoperator_model(models, tmp_path, capsys):
    report = tmp_path / "report"
    status, out, err = _certify(capsys, "--model", str(models["QOperator"]), "--runner", "onnxruntime",
                                "--report", str(report), "-j", "1")
    assert status in (0, 1), err
    text = _check_groups(models["QOperator"], report, err)
    assert "conv1_quant (QLinearConv) | pass" in text and "fc_quant (QLinearMatMul) | pass" in text
    assert sum("add_quant (QLinearAdd)" in line for line in err.splitlines()) == 1  # said once


def test_calibration_inputs(models, tmp_path, capsys):
    feeds = tmp_path / "x.npz"
    np.savez(feeds, x=np.random.default_rng(5).normal(0, 1, (1, 2, 8, 8)).astype(np.float32))
    report = tmp_path / "report"
    status, out, err = _certify(capsys, "--model", str(models["QDQ"]), "--inputs", str(feeds), "--runner",
                                "onnxruntime", "--report", str(report), "-j", "1")
    assert status in (0, 1), err
    ids = [c["id"] for c in json.loads((report / "report.json").read_text())["cases"]]
    assert any(i.endswith("/model/add.calibration") for i in ids)
    assert any(i.endswith("/model/x_QuantizeLinear.calibration") for i in ids)


def test_planted_deviation_named_by_its_nodes(models, tmp_path, capsys):
    report = tmp_path / "report"
    status, out, err = _certify(capsys, "--model", str(models["QDQ"]), "--runner",
                                "qconform.diagnosis.runner:DeviationRunner", "--runner-opt", "model=round-half-away",
                                "--report", str(report), "-j", "1")
    assert status == 1, err
    data = json.loads((report / "report.json").read_text())
    failing = {c["id"].rsplit("/", 1)[-1].rsplit(".", 1)[0] for c in data["cases"] if c["verdict"] == FAIL}
    assert "x_QuantizeLinear" in failing  # the deviating group, named by its node
    rows = {r.split(" | ")[0].strip("| "): r for r in (report / "groups.md").read_text().splitlines()}
    assert FAIL in rows["x_QuantizeLinear"]


# ----------------------------------------------------------------------------------------------
# hostile model files
# ----------------------------------------------------------------------------------------------
def _q_model(shape=(1, 4), opset=21, extra_nodes=(), x="x") -> onnx.ModelProto:
    nodes = [*extra_nodes, helper.make_node("QuantizeLinear", [x, "s", "z"], ["y"], name="q")]
    graph = helper.make_graph(nodes, "q", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, list(shape))],
                              [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
                               numpy_helper.from_array(np.array(128, np.uint8), "z")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def _hostile(kind: str, folder: Path) -> Path:
    path = folder / "model.onnx"
    if kind == "truncated":
        data = _q_model().SerializeToString()
        path.write_bytes(data[: len(data) // 2])
        return path
    if kind == "opset":
        model = _q_model(opset=99)
    elif kind == "external":
        model = _q_model()
        s = model.graph.initializer[0]
        s.ClearField("raw_data")
        s.ClearField("float_data")
        s.data_location = TensorProto.EXTERNAL
        s.external_data.add(key="location", value="../outside.bin")
        (folder.parent / "outside.bin").write_bytes(np.float32(0.5).tobytes())
    elif kind == "absurd":
        model = _q_model(shape=(100000, 100000))
    elif kind == "cycle":
        model = _q_model(x="b", extra_nodes=[helper.make_node("Add", ["x", "b"], ["a"], name="add1"),
                                             helper.make_node("Relu", ["a"], ["b"], name="relu1")])
    elif kind == "dangling":
        model = _q_model(x="a", extra_nodes=[helper.make_node("Add", ["x", "nowhere"], ["a"], name="add1")])
    path.write_bytes(model.SerializeToString())
    return path


def _tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")}


@pytest.mark.parametrize("kind,words", [("truncated", "not a readable ONNX model"), ("opset", "opset 99 is newer"),
                                        ("external", "leaves the model's directory"),
                                        ("absurd", "more than 10,000,000 elements"), ("cycle", "has a cycle"),
                                        ("dangling", "produced by no node")])
def test_hostile_model_refused(tmp_path, capsys, kind, words):
    folder = tmp_path / "in"
    folder.mkdir()
    model = _hostile(kind, folder)
    before = _tree(tmp_path)
    report = tmp_path / "report"
    status, out, err = _certify(capsys, "--model", str(model), "--runner", "onnxruntime", "--report", str(report))
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2 and len(lines) == 1 and lines[0].startswith("qconform certify: "), err
    assert str(model) in lines[0] and words in lines[0]
    after = _tree(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("report")} == before
    assert not report.exists() or not any(report.iterdir())

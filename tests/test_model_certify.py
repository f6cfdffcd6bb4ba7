"""``qconform certify --model FILE``: a user's own quantized model certified group by group.

A tiny CNN (``model_builders``: seeded float weights), quantized by onnxruntime's own quantize_static
in the QDQ and the QOperator format (nothing fetched), is certified through onnxruntime and
onnx.reference; a deviation model planted as the runner must be named by the group's nodes; hostile
model files must each cost one line on stderr, exit status 2, nothing written and nothing read
outside the model's folder.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install onnxruntime)")

from model_builders import quantized, tiny_cnn  # noqa: E402
from qconform import cli  # noqa: E402
from qconform.verdicts import FAIL  # noqa: E402


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    return {f: quantized(folder, tiny_cnn, f) for f in ("QDQ", "QOperator")}


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


@pytest.mark.parametrize("runner", ["onnxruntime", "onnxruntime-optimized", "onnx-reference"])
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
    _no_conformance_stated(report, out)


def _no_conformance_stated(report: Path, out: str) -> None:
    """stdout, certificate.json and summary.md, of a passing or a failing run alike, state the model's
    scope and no conformance: not 'conformant', nor summary.md's line for another corpus."""
    summary = (report / "summary.md").read_text()
    for text in (out, (report / "certificate.json").read_text(), summary):
        assert "one model's node groups" in text and "no conformance is stated" in text
        assert "conformant" not in text and "conforms bit-exactly" not in text
    assert "**A user's model**: one model's node groups (" in summary
    assert "conformance is claimed only against that corpus" not in summary


def test_qoperator_model(models, tmp_path, capsys):
    report = tmp_path / "report"
    status, out, err = _certify(capsys, "--model", str(models["QOperator"]), "--runner", "onnxruntime",
                                "--report", str(report), "-j", "1")
    assert status in (0, 1), err
    text = _check_groups(models["QOperator"], report, err)
    assert "conv1_quant (QLinearConv) | pass" in text and "fc_quant (QLinearMatMul) | pass" in text
    assert "add_quant (QLinearAdd) | " in text  # com.microsoft QLinearAdd: judged where its oracle is declared
    for line in err.splitlines():  # a group without an oracle is said once, and is listed so
        if "not judged:" in line:
            node = line.split("not judged: ", 1)[1].split(":", 1)[0]
            assert sum(node in other for other in err.splitlines()) == 1, node


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
    _no_conformance_stated(report, out)  # a failing model run's summary.md states the model's scope too
    assert (report / "summary.md").read_text().splitlines()[0].endswith("❌ failed")
    data = json.loads((report / "report.json").read_text())
    failing = {c["id"].rsplit("/", 1)[-1].rsplit(".", 1)[0] for c in data["cases"] if c["verdict"] == FAIL}
    assert "x_QuantizeLinear" in failing  # the deviating group, named by its node
    rows = {r.split(" | ")[0].strip("| "): r for r in (report / "groups.md").read_text().splitlines()}
    assert FAIL in rows["x_QuantizeLinear"]
    # its reproducer: its first failing case alone, with the spec's outputs, listed in SHA256SUMS
    first = next(c["id"] for c in data["cases"] if c["verdict"] == FAIL and "/x_QuantizeLinear." in c["id"])
    stem = f"model-check/{first.rsplit('/', 1)[-1]}"
    assert f"reproducer: {stem}.onnx ({first})" in rows["x_QuantizeLinear"]
    assert "diagnosis: round-half-away" in rows["x_QuantizeLinear"]  # the deviation model that reproduces it
    sums = (report / "SHA256SUMS").read_text()
    assert all(f"  {stem}.{leaf}\n" in sums for leaf in ("onnx", "input_0.pb", "expected_0.pb"))
    from onnx import numpy_helper as nh
    from onnxruntime import InferenceSession

    got = InferenceSession(str(report / f"{stem}.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"x": nh.to_array(onnx.load_tensor(str(report / f"{stem}.input_0.pb")))})[0]
    assert np.array_equal(got, nh.to_array(onnx.load_tensor(str(report / f"{stem}.expected_0.pb"))))


def test_declared_scope_narrows_no_model(models, tmp_path, capsys):
    """cpu-kernel declares a scope of qconform's corpus (the quantization ops its kernels implement):
    a model's groups are their own scope, so neither front-end narrows them by it -- every case of the
    model is collected, its QDQ groups (outside that scope) too, and no report names a scope."""
    from fnmatch import fnmatchcase

    from conftest import run_pytest
    from qconform.runner import Unsupported, declared_scope, identity, resolve

    try:
        scope = declared_scope(identity(resolve("cpu-kernel"), "cpu-kernel"))
    except Unsupported as exc:  # a machine without a C compiler
        pytest.skip(str(exc))
    assert scope and scope["cases"]  # the runtime does declare one
    a, b = tmp_path / "certify", tmp_path / "pytest"
    status, out, err = _certify(capsys, "--model", str(models["QDQ"]), "--runner", "cpu-kernel", "--report", str(a),
                                "-j", "1")
    assert status in (0, 1), err
    assert scope["why"] not in err
    r = run_pytest("--runner=cpu-kernel", f"--model={models['QDQ']}", f"--report={b}", "-q", "--runner-workers=1")
    assert r.returncode in (0, 1), r.stdout + r.stderr
    from qconform.gating import model_cases

    drafted = {c.id for c in model_cases.build(models["QDQ"]).cases}
    outside = {i for i in drafted if not any(fnmatchcase(i, g) for g in scope["cases"])}
    assert outside  # the model holds groups the declared scope would leave out
    for report in (a, b):
        data = json.loads((report / "report.json").read_text())
        assert "scope" not in data["invocation"] and "scope" not in data["invocation"]["filters"]
        assert {c["id"] for c in data["cases"]} == drafted


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


def _external(model: onnx.ModelProto, location: str, **extra: str) -> onnx.ModelProto:
    """The model's scale initializer moved to external data at ``location``."""
    s = model.graph.initializer[0]
    s.ClearField("raw_data")
    s.ClearField("float_data")
    s.data_location = TensorProto.EXTERNAL
    s.external_data.add(key="location", value=location)
    for k, v in extra.items():
        s.external_data.add(key=k, value=v)
    return model


def _hostile(kind: str, folder: Path) -> Path:
    """A model file of one hostile kind in ``folder``; ``outside.bin`` beside the folder is what an
    escaping external-data path would read."""
    path = folder / "model.onnx"
    outside = folder.parent / "outside.bin"
    outside.write_bytes(np.float32(0.5).tobytes())
    if kind == "truncated":
        data = _q_model().SerializeToString()
        path.write_bytes(data[: len(data) // 2])
        return path
    if kind == "malformed":  # not protobuf at all
        path.write_bytes(bytes(range(256)) * 8)
        return path
    if kind == "too-big":  # a sparse file larger than one protobuf message can be: never read
        with open(path, "wb") as f:
            f.truncate(2**31 + 8)
        return path
    if kind == "opset":
        model = _q_model(opset=99)
    elif kind == "external":
        model = _external(_q_model(), "../outside.bin")
    elif kind == "external-absolute":
        model = _external(_q_model(), str(outside))
    elif kind == "external-symlink":  # a link inside the folder that points out of it
        (folder / "weights.bin").symlink_to(outside)
        model = _external(_q_model(), "weights.bin")
    elif kind == "external-range":  # inside the folder, but a range past the file's end
        (folder / "weights.bin").write_bytes(np.float32(0.5).tobytes())
        model = _external(_q_model(), "weights.bin", offset="2", length="4096")
    elif kind == "absurd":
        model = _q_model(shape=(100000, 100000))
    elif kind == "absurd-initializer":  # a constant claiming 10^10 elements and holding none
        model = _q_model()
        del model.graph.initializer[0].dims[:]
        model.graph.initializer[0].dims.extend([100000, 100000])
        model.graph.initializer[0].ClearField("raw_data")
    elif kind == "cycle":
        model = _q_model(x="b", extra_nodes=[helper.make_node("Add", ["x", "b"], ["a"], name="add1"),
                                             helper.make_node("Relu", ["a"], ["b"], name="relu1")])
    elif kind == "dangling":  # an input no node, initializer or graph input holds (a missing initializer)
        model = _q_model(x="a", extra_nodes=[helper.make_node("Add", ["x", "nowhere"], ["a"], name="add1")])
    path.write_bytes(model.SerializeToString())
    return path


def _tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")}


#: Every file this process opened while an ``_opened`` block was watching (``sys.addaudithook``:
#: Python's own "open" audit event, which every open() and io.open_code raises).
_OPENS: list[str] = []
_WATCHING: list[bool] = []


def _audit(event: str, args: tuple) -> None:
    if _WATCHING and event == "open" and args and isinstance(args[0], (str, bytes, Path)):
        _OPENS.append(str(Path(args[0] if not isinstance(args[0], bytes) else args[0].decode(errors="replace"))))


sys.addaudithook(_audit)  # a hook cannot be removed: it records only while a test watches


HOSTILE = [("truncated", "not a readable ONNX model"), ("malformed", "truncated or malformed"),
           ("too-big", "more than one ONNX model can hold"), ("opset", "opset 99 is newer"),
           ("external", "leaves the model's directory"), ("external-absolute", "leaves the model's directory"),
           ("external-symlink", "leaves the model's directory"), ("external-range", "is outside 'weights.bin'"),
           ("absurd", "more than 10,000,000 elements"), ("absurd-initializer", "more than 10,000,000 elements"),
           ("cycle", "has a cycle"), ("dangling", "produced by no node")]


@pytest.mark.parametrize("kind,words", HOSTILE, ids=[k for k, _ in HOSTILE])
def test_hostile_model_refused(tmp_path, capsys, kind, words):
    """One line, exit status 2, nothing written anywhere (the report directory stays empty), and no
    file outside the model's folder opened (the escaping targets least of all)."""
    folder = tmp_path / "in"
    folder.mkdir()
    model = _hostile(kind, folder)
    before = _tree(tmp_path)
    report = tmp_path / "report"
    _OPENS.clear()
    _WATCHING.append(True)
    try:
        status, out, err = _certify(capsys, "--model", str(model), "--runner", "onnxruntime", "--report", str(report))
    finally:
        _WATCHING.clear()
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2 and len(lines) == 1 and lines[0].startswith("qconform certify: "), err
    assert str(model) in lines[0] and words in lines[0], lines[0]
    after = _tree(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("report")} == before
    assert not report.exists() or not any(report.iterdir())
    read = [Path(p) for p in _OPENS if Path(p).is_absolute() and Path(p).resolve().is_relative_to(tmp_path.resolve())]
    assert all(p.resolve().is_relative_to(folder.resolve()) and p.resolve() != (tmp_path / "outside.bin").resolve()
               for p in read), read
    assert (tmp_path / "outside.bin").resolve() not in {p.resolve() for p in read}


def test_sparse_sets_where_dense_sums_are_refused(models):
    """A reducing group whose dense sums the oracle refuses (not exact in float32 for every order at
    the model's scales) is tried on sparse sets: its data input at the code that stands for 0 but at
    one element, so each sum holds at most one term. The tiny CNN's pools are judged so."""
    from qconform.gating import model_cases

    built = model_cases.build(models["QDQ"])
    gap = next(g for g in built.groups if g.label == "gap")
    sets = model_cases.sparse_sets(built.info, gap)
    assert [name for name, _ in sets] == [f"sparse-{k}" for k in range(model_cases.SPARSE_SETS)]
    data = next(s for s in gap.slots if s.value is None)
    zp = int(next(s for s in gap.slots if s.local.endswith("zero_point") and s.value is not None).value)
    for _, values in sets:
        assert int((values[data.local] != zp).sum()) == 1
    assert not gap.reason
    assert any(c.id.endswith("/model/gap.sparse-0") for c in built.cases)


def test_only_the_float_ops_that_sum_are_bounded(models, monkeypatch):
    """A group is refused as too large for the exact oracle by the terms its float op sums (the
    registration's ``FloatOp.terms``: a filter, K, a window), never for an op that sums nothing."""
    from qconform.gating import model_cases
    from qconform.oracle.graph import float_ops

    monkeypatch.setattr(model_cases, "MAX_WORK", 10)
    built = model_cases.build(models["QDQ"])
    sums = {o.op for o in float_ops() if o.terms is not None}
    too_large = {g.label: g.reason for g in built.groups if g.reason.startswith("too large")}
    assert too_large == {"conv1": "too large for the exact oracle (4,608 products, at most 10)",
                         "conv2": "too large for the exact oracle (9,216 products, at most 10)",
                         "pool": "too large for the exact oracle (16,384 products, at most 10)",
                         "gap": "too large for the exact oracle (256 products, at most 10)",
                         "fc": "too large for the exact oracle (12 products, at most 10)"}
    assert all(g.op in sums for g in built.groups if g.label in too_large)
    assert not any(g.reason for g in built.groups if g.op not in sums)

"""The whole-model check and the pytest front-end of ``--model``.

A runner that is onnxruntime with one node's output planted wrong (``model_runners.PlantedRunner``:
code + 1 after that node, inserted into the model it runs; every output still comes from onnxruntime)
must be named by the whole-model check at the group holding that node, first, by both front-ends;
``pytest --runner NAME --model FILE`` must judge the same cases with the same verdicts as ``qconform
certify --model``; groups.md and the reproducers are listed in SHA256SUMS.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install onnxruntime)")

from conftest import run_pytest  # noqa: E402
from model_builders import group_stack, quantized, tiny_cnn  # noqa: E402
from qconform import cli  # noqa: E402
from qconform.gating import model_cases, model_check  # noqa: E402
from qconform.report import certificate  # noqa: E402
from qconform.report.certificate import verify  # noqa: E402
from qconform.runner import resolve  # noqa: E402
from qconform.verdicts import DEVIATING, FAIL  # noqa: E402

PLANTED = f"{Path(__file__).with_name('model_runners.py')}:PlantedRunner"


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    return {"cnn": quantized(folder, tiny_cnn, "QDQ"), "stack": quantized(folder, group_stack, "QDQ")}


def _certify(capsys, *words: str) -> tuple[int, str, str]:
    status = cli.main(["certify", *words])
    got = capsys.readouterr()
    return status, got.out, got.err


def _group_of(model: Path, node: str) -> str:
    """The label of the judged group that holds ``node`` (as groups.md names it)."""
    built = model_cases.build(model)
    index = next(i for i, n in enumerate(built.info.nodes) if n.name == node)
    return next(g.label for g in built.judged if index in g.members)


@pytest.mark.parametrize("nodes", ["t4_QuantizeLinear", "t11_QuantizeLinear", "t15_QuantizeLinear,t7_QuantizeLinear"])
def test_whole_model_names_the_planted_group_first(models, nodes):
    """Planted after a group's QuantizeLinear down a stack of 20 quantized groups (or after two: the
    earlier in the graph is named, whatever the order they are planted in): every group's own cases
    pass (their models name their nodes n<i>_<op>, so nothing is planted there), and the check names
    that group, first, with the runner's inputs as a reproducer."""
    model = models["stack"]
    built = model_cases.build(model)
    check = model_check.check(built, resolve(PLANTED, {"node": nodes}))
    assert check.first is not None and check.first.verdict == FAIL
    first = min(nodes.split(","), key=lambda n: int(n[1:].split("_")[0]))
    assert check.first.group.label == _group_of(model, first)
    assert not check.uncovered or all("Identity" in u for u in check.uncovered)
    files = model_check.reproducer(check.first)
    stem = f"{model_check.CHECK_DIR}/{check.first.group.label}.{check.first.set_name}"
    assert {f"{stem}.onnx", f"{stem}.input_0.pb", f"{stem}.expected_0.pb"} <= set(files)
    clean = model_check.check(built, resolve("onnxruntime"))  # the same model, nothing planted
    assert clean.first is None and clean.judged > 20 and not clean.why


def test_a_group_is_held_to_the_readings_of_the_inputs_it_received(models):
    """semantics.md#model-group: planted after one group's QuantizeLinear down the 20-group stack, the
    groups after it read other values than in the clean run (the difference propagates) and are each
    judged on what the runner fed them: every one passes, only the planted group deviates."""
    from onnxruntime import InferenceSession

    from model_runners import planted

    model = models["stack"]
    built = model_cases.build(model)
    check = model_check.check(built, resolve(PLANTED, {"node": "t4_QuantizeLinear"}), every=True)
    group = _group_of(model, "t4_QuantizeLinear")
    assert check.first is not None and check.first.group.label == group
    deviating = {label for label, by_set in check.verdicts.items() if any(v in DEVIATING for v in by_set.values())}
    assert deviating == {group}
    info = built.info
    at = check.first.group.position(info)
    later = [g for g in built.judged if g.position(info) > at and g.label in check.verdicts]
    assert len(later) > 10 and all(set(check.verdicts[g.label]) == set(check.sets) for g in later)
    # what they read: the exposed model on onnxruntime, clean and planted, on the check's first input set
    whole = model_check.exposed(info, [g for g in built.judged if model_check.quiet(info, g)])
    names = [o.name for o in whole.graph.output]
    feeds = model_check.input_feeds(built)[0][1]
    runs = [dict(zip(names, InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)))
            for m in (whole, planted(whole, "t4_QuantizeLinear"))]
    read = [s.name for g in later for s in g.slots if s.value is None]
    differ = [n for n in read if not np.array_equal(runs[0][n], runs[1][n])]
    assert read[0] in differ and len(differ) >= 3  # the next group reads the planted codes, and on down the stack


def _report_says_it_failed(report: Path, group: str) -> None:
    """A model whose whole-model check names a group: report.json, certificate.json and summary.md say
    what the exit status (1) says -- the gate failed on it, the group named, no conformance stated."""
    data = json.loads((report / "report.json").read_text())
    assert data["exit_status"] == 1 and data["gate"]["passed"] is False
    said = f"the model run whole leaves the permitted readings first at group {group} ("
    assert [m for m in data["gate"]["messages"] if m.startswith(f"whole-model check: {said}")]
    whole = data["invocation"]["model"]["whole"]
    assert whole["made"] and whole["first"]["group"] == group and whole["first"]["verdict"] == FAIL
    import jsonschema

    from qconform.report import model as report_model

    jsonschema.Draft202012Validator(report_model.schema()).validate(data)  # the schema describes it
    # certificate.json where the front-end writes one (certify); its statement, overall(), for pytest's
    cert = report / "certificate.json"
    overall = json.loads(cert.read_text())["overall"] if cert.is_file() else certificate.overall(data)
    summary = (report / "summary.md").read_text()
    assert said in overall and "no conformance is stated" in overall
    assert "❌ failed" in summary.splitlines()[0] and said in summary
    for text in (overall, summary):
        assert "one model's node groups" in text and "conformant" not in text
    assert verify(report) == []


def test_certify_model_whole_check_and_sums(models, tmp_path, capsys):
    model, report = models["cnn"], tmp_path / "report"
    status, out, err = _certify(capsys, "--model", str(model), "--runner", PLANTED, "--runner-opt",
                                "node=a_QuantizeLinear", "--report", str(report), "-j", "1")
    assert status == 1, err  # every group's own cases pass; the model run whole deviates
    data = json.loads((report / "report.json").read_text())
    assert all(c["verdict"] == "pass" for c in data["cases"])
    _report_says_it_failed(report, "add")  # the check ran before the report was written
    first = [line for line in out.splitlines() if "the first group whose output leaves" in line]
    assert len(first) == 1 and ": add (" in first[0] and "reproducer: model-check/add.whole-" in first[0]
    stem = first[0].split("reproducer: model-check/", 1)[1].removesuffix(".onnx")
    text = (report / "groups.md").read_text()
    assert "## The whole model" in text and "first group whose output leaves the permitted readings: add (" in text
    sums = (report / "SHA256SUMS").read_text()
    for name in ("report.json", "groups.md", f"model-check/{stem}.onnx", f"model-check/{stem}.input_0.pb",
                 f"model-check/{stem}.expected_0.pb"):
        assert f"  {name}\n" in sums
    assert verify(report) == []
    (report / "groups.md").write_text(text.replace("add (", "other ("))
    assert any("groups.md: edited" in p for p in verify(report))
    reproducer = onnx.load(str(report / "model-check" / f"{stem}.onnx"))  # the group alone, checkable
    onnx.checker.check_model(reproducer)
    assert [n.op_type for n in reproducer.graph.node][-2:] == ["Add", "QuantizeLinear"]


def test_pytest_front_end_same_cases_and_check(models, tmp_path, capsys):
    """pytest --runner NAME --model FILE: the same cases and verdicts as certify --model, the same
    whole-model finding, groups.md in SHA256SUMS, and no conformance stated."""
    model = models["cnn"]
    a, b = tmp_path / "certify", tmp_path / "pytest"
    status, _, err = _certify(capsys, "--model", str(model), "--runner", PLANTED, "--runner-opt",
                              "node=a_QuantizeLinear", "--report", str(a), "-j", "1")
    assert status == 1, err
    r = run_pytest(f"--runner={PLANTED}", "--runner-opt", "node=a_QuantizeLinear", f"--model={model}",
                   f"--report={b}", "-q", "--runner-workers=1")
    assert r.returncode == 1, r.stdout + r.stderr  # every case passes; the model run whole deviates
    assert "whole-model check: the first group whose output leaves the permitted readings: add (" in r.stdout
    assert "qconform model" in r.stdout and r.stdout.count("not judged: ") == (a / "groups.md").read_text().count(
        "not judged: ")
    cases = [{c["id"]: c["verdict"] for c in json.loads((d / "report.json").read_text())["cases"]} for d in (a, b)]
    assert cases[0] == cases[1] and len(cases[0]) > 100
    assert verify(b) == [] and "  groups.md\n" in (b / "SHA256SUMS").read_text()
    summary = (b / "summary.md").read_text()
    assert "one model's node groups" in summary and "no conformance is stated" in summary
    assert "conformant" not in summary
    _report_says_it_failed(b, "add")  # pytest's report says what its exit status says, as certify's


def test_pytest_model_refusals_are_one_line(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00" * 16)
    r = run_pytest("--runner=onnxruntime", f"--model={bad}", "-q")
    assert r.returncode == 4 and "Traceback" not in r.stdout + r.stderr
    assert f"{bad}: not an ONNX model" in r.stderr or f"{bad}: not a readable ONNX model" in r.stderr
    r = run_pytest(f"--model={bad}", "-q")
    assert r.returncode == 4 and "--model needs --runner" in r.stderr
    r = run_pytest("--runner=onnxruntime", f"--model-inputs={bad}", "-q")
    assert r.returncode == 4 and "--model-inputs FILE.npz needs --model FILE" in r.stderr
    r = run_pytest("--runner=onnxruntime", f"--model={bad}", f"--golden={tmp_path}", "-q")
    assert r.returncode == 4 and "--model makes its own corpus: it takes no --golden" in r.stderr
    assert not any(tmp_path.glob("qconform-model-*"))


def test_calibration_input_runs_the_whole_model(models, tmp_path):
    feeds = tmp_path / "x.npz"
    np.savez(feeds, x=np.random.default_rng(5).normal(0, 1, (1, 2, 8, 8)).astype(np.float32))
    built = model_cases.build(models["cnn"], feeds)
    check = model_check.check(built, resolve("onnxruntime-optimized"))
    assert "whole-calibration" in check.sets and check.first is None and not check.why


def test_only_quantized_tensors_are_exposed(models):
    """The whole model runs with quantized tensors exposed and no float tensor between two nodes (one
    would stop onnxruntime fusing its QDQ groups): a group that reads or writes one is said, not run."""
    built = model_cases.build(models["cnn"])
    info = built.info
    model = model_check.exposed(info, [g for g in built.judged if model_check.quiet(info, g)])
    own = {o.name for o in info.model.graph.output}
    added = [o for o in model.graph.output if o.name not in own]
    assert added and all(o.type.tensor_type.elem_type in (onnx.TensorProto.UINT8, onnx.TensorProto.INT8) for o in added)
    check = model_check.check(built, resolve("onnxruntime"))
    assert "add" not in check.unexposed and "x_DequantizeLinear" in check.unexposed
    assert any("not checked whole: " in line for line in check.lines(info))


def test_every_node_covered_checks_the_model_end_to_end(tmp_path):
    """A QOperator-format model of convolutions has every node in a judged group: the whole-model check
    says so, and its last group's output is the model's own output, judged."""
    from functools import partial

    from model_builders import conv_stack

    builder = partial(conv_stack, groups=3)
    builder.__name__ = "conv3"  # type: ignore[attr-defined]
    built = model_cases.build(quantized(tmp_path, builder, "QOperator"))
    check = model_check.check(built, resolve("onnxruntime-optimized"))
    assert check.uncovered == [] and not check.unexposed and not check.why
    assert "every node is in a judged group" in check.lines(built.info)[0]
    assert check.first is None and check.judged == len(check.sets) * len(built.judged)
    assert built.info.model.graph.output[0].name in built.judged[-1].outputs

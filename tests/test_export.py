"""--export-failures: each deviating case as an ONNX node test directory a vendor can use alone.

The reproducers are read back with onnx only (``onnx.load``, ``onnx.checker``, ``TensorProto``),
never with qconform, then fed to onnxruntime directly: a plain ``InferenceSession`` must show the
very mismatch the suite reported (same elements, same bits). A wrong runner's export is checked
against the runner's recorded actual bits the same way.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from qconform import corpus as corpus_mod
from qconform import dtypes
from qconform.plugin import default_golden
from support import SUPPORT, FlipInt8Runner, copy_group, require_measured  # noqa: F401

pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve()
FAST = ("-p", "no:randomly", "--isolate=off")
#: Output types a plain InferenceSession hands back as numpy arrays with their true bits.
NUMPY_NATIVE = {"int8", "uint8", "int16", "uint16", "int32", "float16", "float32"}


@pytest.fixture(scope="module")
def golden(tmp_path_factory) -> Path:
    return copy_group(tmp_path_factory.mktemp("golden"))


def read_tensor(path: Path) -> tuple[str, np.ndarray]:
    t = onnx.TensorProto()
    t.ParseFromString(path.read_bytes())
    return t.name, numpy_helper.to_array(t)


def read_case(d: Path) -> tuple[onnx.ModelProto, dict[str, np.ndarray], list[np.ndarray], list, dict]:
    """A node test directory read with onnx alone: model, named inputs, expected outputs,
    don't-care masks (None where the output has none), metadata."""
    model = onnx.load(d / "model.onnx")
    onnx.checker.check_model(model, full_check=True)
    data = d / "test_data_set_0"
    inputs = dict(read_tensor(data / f"input_{n}.pb") for n in range(len(model.graph.input)))
    assert list(inputs) == [vi.name for vi in model.graph.input]
    expected = [read_tensor(data / f"output_{n}.pb")[1] for n in range(len(model.graph.output))]
    masks = [read_tensor(p)[1] if (p := d / f"dont_care.output_{n}.pb").exists() else None
             for n in range(len(expected))]
    meta = json.loads((d / "qconform.json").read_text())
    assert [0 if m is None else int(m.sum()) for m in masks] == meta["dont_care"]
    # onnxruntime's onnx_test_runner takes every subdirectory for a data set: only the one
    assert [p.name for p in d.iterdir() if p.is_dir()] == ["test_data_set_0"]
    for name, files in meta["reading_files"].items():  # the other readings: complete output sets
        assert name in meta["readings"][1:]
        assert [read_tensor(d / f)[1].shape for f in files] == [e.shape for e in expected]
        own = [d / f.replace("output_", "dont_care.output_") for f in files]  # each reading's own masks
        assert [int(read_tensor(m)[1].sum()) if m.exists() else 0 for m in own] == meta["reading_dont_care"][name]
    return model, inputs, expected, masks, meta


def mismatches(expected: np.ndarray, actual: np.ndarray, dont_care=None) -> list[tuple[tuple[int, ...], int, int]]:
    """(index, expected bits, actual bits) of every element whose bits differ, in C order,
    skipping don't-care elements."""
    t = dtypes.get(expected.dtype)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    eb, ab = t.to_bits(expected), t.to_bits(actual)
    differ = eb != ab if dont_care is None else (eb != ab) & ~dont_care
    return [(tuple(int(i) for i in idx), int(eb[tuple(idx)]), int(ab[tuple(idx)])) for idx in np.argwhere(differ)]


def same_mismatch(failure: dict, found: list) -> None:
    """The reproducer's mismatch is the one the suite reported: count, elements and bits."""
    assert len(found) == failure["mismatches"], failure["id"]
    shown = [(tuple(m["index"]), m["expected_bits"], m["actual_bits"]) for m in failure["first_mismatches"]]
    assert found[: len(shown)] == shown, failure["id"]


def export_run(pytester, golden, runner, *args):
    out, rep = pytester.path / "repro", pytester.path / "report"
    result = pytester.runpytest(f"--runner={runner}", f"--golden={golden}", f"--export-failures={out}",
                                f"--report={rep}", *FAST, *args)
    report = json.loads((rep / "report.json").read_text())
    return result, report, out


#: Output types a plain InferenceSession hands back with their true bits (float8e4m3fn as raw uint8).
ORT_READABLE = NUMPY_NATIVE | {"float8e4m3fn"}


def _onnxruntime_example():
    """A corpus case onnxruntime gets wrong here, from the facts that apply to the installed release on
    this platform (which cases those are changes with the release and the CPU)."""
    from qconform import facts

    require_measured("onnxruntime")
    cases = {c.id: c for c in corpus_mod.load(default_golden()).cases}
    for f in facts.load("onnxruntime").active(facts.SOURCES["onnxruntime"].version()):
        c = cases.get(f.example)
        if f.kind == "erratum" and c is not None and set(c.output_types) <= ORT_READABLE:
            return f, c
    pytest.skip("no onnxruntime erratum with outputs a plain InferenceSession returns applies here")


def test_onnxruntime_reproducers_show_the_same_mismatch(pytester, tmp_path):
    from qconform.plugin import marker_name

    fact, case = _onnxruntime_example()
    golden = copy_group(tmp_path / "golden", case.group)
    select = f"{marker_name('family', case.family)} and {marker_name('types', case.types)}"
    result, report, out = export_run(pytester, golden, "onnxruntime", "-m", select)
    failures = {f["id"]: f for f in report["failures"]}
    index = json.loads((out / "index.json").read_text())
    assert {e["id"] for e in index} == set(failures) and case.id in failures, f"{fact.id}: {case.id}"
    result.stdout.fnmatch_lines([f"*exported {len(failures)} failing case(s) to {out}*"])

    checked = []
    for entry in index:
        model, inputs, expected, masks, meta = read_case(out / entry["dir"])
        failure = failures[meta["id"]]
        assert meta["verdict"] == failure["verdict"] and meta["clause"] == failure["clause"]
        out_types = [dtypes.get(e.dtype).name for e in expected]
        if failure["verdict"] != "fail" or failure["problem"] or not set(out_types) <= ORT_READABLE:
            continue
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        actual = [a.view(e.dtype) if a.dtype != e.dtype else a for e, a in zip(expected, session.run(None, inputs))]
        same_mismatch(failure, [m for e, a, k in zip(expected, actual, masks) for m in mismatches(e, a, k)])
        checked.append(meta["id"])
    assert case.id in checked, f"{fact.id}: {case.id} did not fail by value ({failures[case.id]['verdict']})"


def test_wrong_runner_reproducers(pytester, golden):
    result, report, out = export_run(pytester, golden, f"{SUPPORT}:FlipInt8Runner", "-m", "family_specials")
    cases = {c.id: c for c in corpus_mod.load(golden).cases}
    failures = report["failures"]
    assert failures and all(f["verdict"] == "fail" for f in failures)
    for entry in json.loads((out / "index.json").read_text()):
        model, inputs, expected, masks, meta = read_case(out / entry["dir"])
        case = cases[meta["id"]]
        # Expected outputs are the case's first reading, bit for bit; inputs are the case's feeds.
        assert meta["expected_reading"] == case.readings[0].name
        for e, g in zip(expected, case.readings[0].outputs):
            assert mismatches(g, e) == []
        for name, value in case.feeds.items():
            assert mismatches(value, inputs[name]) == []
        # The runner fed the reproducer alone shows exactly the mismatch the suite recorded.
        actual = FlipInt8Runner().prepare(model)(inputs)
        failure = next(f for f in failures if f["id"] == meta["id"])
        same_mismatch(failure, [m for e, a, k in zip(expected, actual, masks) for m in mismatches(e, a, k)])
        assert meta["first_mismatches"] == failure["first_mismatches"]

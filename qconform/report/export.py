"""``--export-failures=DIR``: each deviating case as an ONNX node test directory.

A vendor reproduces a deviation with their own tools (onnxruntime's ``onnx_test_runner``, onnx's
backend test loader) without qconform, so the layout is ONNX's own::

    DIR/<case>/model.onnx                      the exact model the suite ran
    DIR/<case>/test_data_set_0/input_N.pb      graph inputs, in graph order (TensorProto)
    DIR/<case>/test_data_set_0/output_N.pb     expected outputs, the case's first reading
    DIR/<case>/qconform.json                   id, verdict, clause, the suite's first mismatches
    DIR/<case>/reading.<name>.output_N.pb      other permitted readings, if the case has any
    DIR/<case>/dont_care.output_N.pb           bool mask of the elements the first reading leaves undefined
    DIR/<case>/reading.<name>.dont_care.output_N.pb   the same for another reading, where it has any

test_data_set_0 is the case directory's only subdirectory: onnxruntime's onnx_test_runner takes
every subdirectory of a test case for a data set (OnnxTestCase::SetModelPath), so the extras are
plain files beside the model. Each other reading is a complete set of expected outputs for the
same inputs; ``qconform export backend-test`` gives each its own test directory instead.

Tensors are written with onnx's own TensorProto serialisation (``numpy_helper.from_array``), which
encodes every element type natively, sub-byte packing included. Don't-care elements (e.g. NaN
quantized to an integer) still hold a value in output_N.pb; a tool comparing every element, such
as onnx_test_runner, may report them too: the mask says which ones qconform skipped.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import onnx

from qconform.case import Case, Reading
from qconform.model import DATA_SET, build_model, tensor_bytes


def dirname(case_id: str) -> str:
    """A portable directory name for a case id (``/`` and other punctuation become ``_``)."""
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", case_id).strip("_")


# The pieces of a node-test directory, shared with ``backend_export`` (``qconform export backend-test``).


def write_tensor(path: Path, arr: np.ndarray, name: str) -> None:
    """One tensor as a serialised TensorProto (``qconform.model.tensor_bytes``)."""
    path.write_bytes(tensor_bytes(arr, name))


def write_model(d: Path, case: Case, model: onnx.ModelProto | None = None) -> onnx.ModelProto:
    """``d/model.onnx``: the exact model the suite runs (deterministic bytes); returns it.
    ``model``: the case's model when already built."""
    model = build_model(case) if model is None else model
    d.mkdir(parents=True, exist_ok=True)
    (d / "model.onnx").write_bytes(model.SerializeToString(deterministic=True))
    return model


def write_inputs(data: Path, model: onnx.ModelProto, case: Case) -> None:
    """``data/input_N.pb``: the case's feeds in graph-input order (initializers live in the model)."""
    data.mkdir(parents=True, exist_ok=True)
    feeds = case.feeds
    for n, vi in enumerate(model.graph.input):
        write_tensor(data / f"input_{n}.pb", feeds[vi.name], vi.name)


def write_outputs(d: Path, case: Case, reading: Reading, prefix: str = "") -> None:
    """``d/<prefix>output_N.pb``: one reading's outputs, named after the graph outputs."""
    d.mkdir(parents=True, exist_ok=True)
    for n, (name, arr) in enumerate(zip(case.output_names, reading.outputs)):
        write_tensor(d / f"{prefix}output_{n}.pb", arr, name)


def reading_prefix(reading: str) -> str:
    """The file prefix of another permitted reading's outputs, beside the model (not in a subdirectory)."""
    return f"reading.{dirname(reading)}."


def write_dont_care(case: Case, reading: Reading, path_of: Callable[[int], Path]) -> None:
    """Each output's don't-care mask under ``reading`` (bool TensorProto, True = left undefined by
    that reading) at ``path_of(N)``; outputs without one get no file."""
    for n, mask in enumerate(reading.dont_care):
        if mask is not None:
            path = path_of(n)
            path.parent.mkdir(parents=True, exist_ok=True)
            write_tensor(path, np.asarray(mask, dtype=bool), case.output_names[n])


def dont_care_counts(reading: Reading) -> list[int]:
    return [0 if m is None else int(m.sum()) for m in reading.dont_care]


def write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def export_case(case: Case, failure: dict, root: Path, runner: dict | None = None) -> Path:
    d = root / dirname(case.id)
    if d.exists() and (d / "qconform.json").is_file() and \
            json.loads((d / "qconform.json").read_text()).get("id") != case.id:
        d = root / f"{dirname(case.id)}-{hashlib.sha256(case.id.encode()).hexdigest()[:8]}"
    data = d / DATA_SET
    model = write_model(d, case)
    write_inputs(data, model, case)
    write_outputs(data, case, case.readings[0])
    for reading in case.readings[1:]:
        write_outputs(d, case, reading, reading_prefix(reading.name))
        write_dont_care(case, reading, lambda n, r=reading: d / f"{reading_prefix(r.name)}dont_care.output_{n}.pb")
    write_dont_care(case, case.readings[0], lambda n: d / f"dont_care.output_{n}.pb")
    meta = {
        "id": case.id, "verdict": failure.get("verdict"), "clause": case.clause,
        "clause_url": f"qconform/docs/semantics.md#{case.clause}", "runner": runner or {},
        "expected_reading": case.readings[0].name, "readings": [r.name for r in case.readings],
        "reading_files": {r.name: [f"{reading_prefix(r.name)}output_{n}.pb" for n in range(len(case.output_names))]
                          for r in case.readings[1:]},
        "dont_care": dont_care_counts(case.readings[0]),
        "reading_dont_care": {r.name: dont_care_counts(r) for r in case.readings[1:]},
        "mismatches": failure.get("mismatches", 0), "problem": failure.get("problem", ""),
        "first_mismatches": failure.get("first_mismatches", []),
        "inputs": [vi.name for vi in model.graph.input], "outputs": list(case.output_names),
    }
    write_json(d / "qconform.json", meta)
    return d


def export(failures: Iterable[tuple[Case, dict]], root: Path, runner: dict | None = None) -> list[Path]:
    """Write every (case, failure entry of report.json) pair; returns the case directories."""
    root.mkdir(parents=True, exist_ok=True)
    pairs = list(failures)
    dirs = [export_case(case, failure, root, runner) for case, failure in pairs]
    index = [{"id": case.id, "verdict": failure.get("verdict"), "dir": d.name}
             for (case, failure), d in zip(pairs, dirs)]
    (root / "index.json").write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")
    return dirs

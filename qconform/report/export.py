"""``--export-failures=DIR``: each deviating case as an ONNX node test directory.

A vendor reproduces a deviation with their own tools (onnxruntime's ``onnx_test_runner``, onnx's
backend test loader) without qconform, so the layout is ONNX's own::

    DIR/<case>/model.onnx                      the exact model the suite ran
    DIR/<case>/test_data_set_0/input_N.pb      graph inputs, in graph order (TensorProto)
    DIR/<case>/test_data_set_0/output_N.pb     expected outputs, the case's first reading
    DIR/<case>/qconform.json                   id, verdict, clause, the suite's first mismatches
    DIR/<case>/readings/<name>/output_N.pb     other permitted readings, if the case has any
    DIR/<case>/dont_care/output_N.pb           bool mask of elements the spec leaves undefined

Tensors are written with onnx's own TensorProto serialisation (``numpy_helper.from_array``), which
encodes every element type natively, sub-byte packing included. Don't-care elements (e.g. NaN
quantized to an integer) still hold a value in output_N.pb; a tool comparing every element, such
as onnx_test_runner, may report them too: the mask says which ones qconform skipped.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from qconform.case import Case
from qconform.model import build_model


def dirname(case_id: str) -> str:
    """A portable directory name for a case id (``/`` and other punctuation become ``_``)."""
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", case_id).strip("_")


def _write_tensor(path: Path, arr: np.ndarray, name: str) -> None:
    path.write_bytes(numpy_helper.from_array(np.ascontiguousarray(arr), name).SerializeToString())


def export_case(case: Case, failure: dict, root: Path, runner: dict | None = None) -> Path:
    d = root / dirname(case.id)
    if d.exists() and (d / "qconform.json").is_file() and \
            json.loads((d / "qconform.json").read_text()).get("id") != case.id:
        d = root / f"{dirname(case.id)}-{hashlib.sha256(case.id.encode()).hexdigest()[:8]}"
    data = d / "test_data_set_0"
    data.mkdir(parents=True, exist_ok=True)
    model = build_model(case)
    onnx.save(model, d / "model.onnx")
    feeds = case.feeds
    for n, vi in enumerate(model.graph.input):
        _write_tensor(data / f"input_{n}.pb", feeds[vi.name], vi.name)
    for n, (name, arr) in enumerate(zip(case.output_names, case.readings[0].outputs)):
        _write_tensor(data / f"output_{n}.pb", arr, name)
    for reading in case.readings[1:]:
        rdir = d / "readings" / dirname(reading.name)
        rdir.mkdir(parents=True, exist_ok=True)
        for n, (name, arr) in enumerate(zip(case.output_names, reading.outputs)):
            _write_tensor(rdir / f"output_{n}.pb", arr, name)
    for n, mask in enumerate(case.dont_care):
        if mask is not None:
            (d / "dont_care").mkdir(exist_ok=True)
            _write_tensor(d / "dont_care" / f"output_{n}.pb", np.asarray(mask, dtype=bool), case.output_names[n])
    meta = {
        "id": case.id, "verdict": failure.get("verdict"), "clause": case.clause,
        "clause_url": f"qconform/docs/semantics.md#{case.clause}", "runner": runner or {},
        "expected_reading": case.readings[0].name, "readings": [r.name for r in case.readings],
        "dont_care": [0 if m is None else int(m.sum()) for m in case.dont_care],
        "mismatches": failure.get("mismatches", 0), "problem": failure.get("problem", ""),
        "first_mismatches": failure.get("first_mismatches", []),
        "inputs": [vi.name for vi in model.graph.input], "outputs": list(case.output_names),
    }
    (d / "qconform.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
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

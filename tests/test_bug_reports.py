"""Real bug reports, replayed: the numbers a report gives, fed to the suite as a case.

For each report below (research/bug_reports.md, by its number there) the inputs are the report's
own and ``given`` is what the buggy runtime returned, as the report states it. Two questions, as
the question is: would a case with these inputs fail (the golden differs from ``given``), and
does the diagnosis name the mechanism (the model the report maps to reproduces ``given`` exactly)?
The models' own witnesses are checked against the whole corpus in tests/test_diagnosis.py; these
tests tie each model to the numbers of the report it cites, not to numbers of our own.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from qconform import schemas
from qconform.case import Draft
from qconform.compare import compare
from qconform.diagnosis import diagnose as dg
from qconform.diagnosis.models import MODELS
from qconform.generators.common import array, draft
from qconform.oracle.base import evaluate


@dataclass(frozen=True)
class Replay:
    number: int  # the entry's number in research/bug_reports.md
    report: str  # owner/repo#N as the model's evidence cites it
    model: str
    draft: Draft
    given: tuple[np.ndarray, ...]
    #: "strict" where the default profile permits the report's output as a reading (say which in
    #: ``why_strict``): the case fails only under --profile=strict
    profile: str = "default"
    why_strict: str = ""


def case(op: str, opset: int, attrs: dict | None = None, **inputs: tuple[str, object]) -> Draft:
    """The report's inputs, each ``name=(type, values)``, as a draft built the way the generators
    build theirs (``generators.common.draft``: the schema's types, the project's own codec)."""
    spec = schemas.get(op, opset)
    combo = {k: v[0] for k, v in spec.type_params.items() if len(v) == 1}
    combo.update({f.type_param: inputs[f.name][0] for f in spec.inputs if f.name in inputs})
    return draft(spec, combo, "report", "report", {n: v for n, (_, v) in inputs.items()}, attrs)


Q, DQ, NAN, INF = "QuantizeLinear", "DequantizeLinear", float("nan"), float("inf")

REPLAYS = [
    Replay(1, "microsoft/onnxruntime#18576", "round-toward-zero",
           case(Q, 19, x=("float16", [0.050018310546875, -0.050018310546875]), y_scale=("float16", 0.0999755859375),
                y_zero_point=("int8", 0)),
           (array("int8", [0, 0]),)),
    Replay(2, "microsoft/onnxruntime#3442", "narrow-signed-range",
           case(Q, 10, x=("float32", [-129.0, -128.0]), y_scale=("float32", 1.0), y_zero_point=("int8", 0)),
           (array("int8", [-127, -127]),)),
    Replay(3, "microsoft/onnxruntime#16938", "float8-round-toward-zero",
           case(Q, 19, x=("float32", [1.8131605]), y_scale=("float32", 1.0), y_zero_point=("float8e4m3fn", 0)),
           (array("float8e4m3fn", [1.75]),)),
    Replay(4, "microsoft/onnxruntime#18473", "fnuz-negative-zero",
           case(Q, 19, x=("float32", [-0.0000001]), y_scale=("float32", 1.0), y_zero_point=("float8e4m3fnuz", 0)),
           (array("float8e4m3fnuz", [NAN]),)),  # the code 0x80: fnuz's NaN, where -0 was meant
    Replay(8, "microsoft/onnxruntime#32730", "blocked-index-per-element",
           case(DQ, 21, {"axis": 0, "block_size": 4}, x=("int8", [10, 20, 30, 40, 50, 60, 70, 80]),
                x_scale=("float32", [0.5, 2.0]), x_zero_point=("int8", [0, 10])),
           (array("float32", [5, 20, 0, 0, 0, 0, 0, 0]),)),
    Replay(11, "onnx/onnx#7835", "wrap-around",
           case("QLinearMatMul", 10, a=("uint8", [[100]]), a_scale=("float32", 1.0), a_zero_point=("uint8", 0),
                b=("uint8", [[100]]), b_scale=("float32", 1.0), b_zero_point=("uint8", 0),
                y_scale=("float32", 0.2), y_zero_point=("uint8", 0)),
           (array("uint8", [[80]]),)),
    Replay(12, "onnx/onnx#6220", "fnuz-inf-wrong-table",
           case(Q, 21, x=("float32", [INF, -INF]), y_scale=("float32", 1.0), y_zero_point=("float8e4m3fnuz", 0)),
           (array("float8e4m3fnuz", [240.0, -240.0]),)),  # Cast-21's table: ±Inf -> NaN (semantics.md#q-float8-fnuz-inf)
    Replay(24, "apache/tvm#9558", "cast-before-clip",
           case(Q, 13, x=("float32", [INF]), y_scale=("float32", 1.0), y_zero_point=("int8", 0)),
           (array("int8", [-128]),)),
    Replay(34, "pytorch/executorch#20655", "dq-subtract-wraps",
           case(DQ, 13, x=("int8", [-128]), x_scale=("float32", 1.0), x_zero_point=("int8", 100)),
           (array("float32", [28.0]),)),
    Replay(45, "jax-ml/ml_dtypes#260", "float8-never-saturate",
           case(Q, 19, x=("float32", [500.0]), y_scale=("float32", 1.0), y_zero_point=("float8e4m3fn", 0)),
           (array("float8e4m3fn", [NAN]),)),
    Replay(46, "triton-lang/triton#5925", "minifloat-ties-away",
           case(Q, 19, x=("float16", [9.0]), y_scale=("float16", 1.0), y_zero_point=("float8e5m2", 0)),
           (array("float8e5m2", [10.0]),)),
    Replay(47, "triton-lang/triton#11753", "minifloat-ties-away",
           case(Q, 19, x=("float32", [1.125]), y_scale=("float32", 1.0), y_zero_point=("float8e5m2", 0)),
           (array("float8e5m2", [1.25]),)),
    Replay(49, "triton-lang/triton#10745", "fnuz-nan-code-as-negative-zero",
           case(DQ, 19, x=("float8e4m3fnuz", [NAN]), x_scale=("float32", 1.0)),
           (array("float32", [-0.0]),)),
    Replay(54, "llvm/torch-mlir#4487", "saturate-before-zero-point",
           case(Q, 19, x=("float32", [3.4501]), y_scale=("float32", float(np.float32(1) / np.float32(66.933334))),
                y_zero_point=("int8", -128)),
           (array("int8", [-1]),)),
    Replay(55, "llvm/torch-mlir#3009", "unsigned-zero-point-read-as-signed",
           case(Q, 19, x=("float32", [1.0, 2.0, 3.0]), y_scale=("float32", 1.0), y_zero_point=("uint8", 200)),
           (array("uint8", [0, 0, 0]),)),
]


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.dtype.itemsize}")


@pytest.mark.parametrize("r", REPLAYS, ids=lambda r: f"{r.number}-{r.model}")
def test_report_example_fails_and_is_named(r: Replay):
    case = evaluate(r.draft)
    outcome = compare(case, r.given, profile=r.profile)
    assert outcome.verdict == "fail", f"#{r.number}: the report's output passes as {outcome}"
    if r.profile != "default":  # the default profile accepts it as a reading, and says which
        assert compare(case, r.given).verdict == "pass" and r.why_strict
    named = [d.model for d in dg.diagnose_case(case, r.given, profile=r.profile)]
    assert r.model in named, f"#{r.number}: the diagnosis names {named}, not {r.model}"
    # the model reproduces the report's bits, not merely values close to them
    out = MODELS[r.model].outputs(r.draft)
    assert all(np.array_equal(_bits(a), _bits(np.asarray(b))) for a, b in zip(out, r.given))


@pytest.mark.parametrize("r", REPLAYS, ids=lambda r: f"{r.number}-{r.model}")
def test_the_model_cites_the_report(r: Replay):
    """Traceability: a model named for a report says so in its evidence."""
    assert r.report in MODELS[r.model].evidence, f"{r.model}'s evidence does not cite {r.report}"


def test_nan_to_an_integer_is_information_not_a_failure():
    """#57 (ROCm/AMDMIGraphX#4914): NaN -> 127 in one runtime, -128 in another. The text leaves NaN to
    an integer type undefined (onnx/onnx#5879), so the suite passes both and fails neither."""
    c = evaluate(case(Q, 19, x=("float32", [NAN, 1.0]), y_scale=("float32", 1.0), y_zero_point=("int8", 0)))
    assert c.readings[0].dont_care[0] is not None and c.readings[0].dont_care[0].tolist() == [True, False]
    for nan_as in (127, -128, 0):
        assert compare(c, (array("int8", [nan_as, 1]),)).verdict == "pass"
    assert compare(c, (array("int8", [127, 2]),)).verdict == "fail"


def _status_rows() -> list[list[str]]:
    text = (Path(__file__).resolve().parent.parent / "research" / "bug_reports.md").read_text(encoding="utf-8")
    section = text.split("## Where each report stands", 1)[1].split("\n## ", 1)[0]
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in section.splitlines() if re.match(r"^\| \d+ \|", line)]


def test_the_status_table_matches_the_models_and_replays():
    """research/bug_reports.md says, per report, whether a case fails and which model names it; that
    table must not name a model that does not exist or claim a replay that is not here."""
    rows = _status_rows()
    assert [int(r[0]) for r in rows] == list(range(1, len(rows) + 1)) and len(rows) >= 59
    replayed = {r.number for r in REPLAYS}
    for number, report, fails, named, shown in rows:
        models = re.findall(r"`([a-z0-9-]+)`", named)
        unknown = [m for m in models if m not in MODELS]
        assert not unknown, f"#{number}: {unknown} are not deviation models"
        if shown.startswith("replay") and "test_nan" not in shown:
            assert int(number) in replayed, f"#{number} claims a replay that tests/test_bug_reports.py lacks"
        if shown == "model":
            assert models, f"#{number}: 'model' shown, but no model named"
        if fails.startswith("yes") and not models:
            assert shown == "—" and ("no" in named or "only" in named), f"#{number}: a failing report without a model says why"
    claimed = {int(r[0]) for r in rows if r[4].startswith("replay") and "test_nan" not in r[4]}
    assert replayed == claimed, f"replays not in the table: {sorted(replayed - claimed)}"
    for r in REPLAYS:  # a replay's model is the one its row names
        row = rows[r.number - 1]
        assert f"`{r.model}`" in row[3], f"#{r.number}: the table does not name {r.model}"

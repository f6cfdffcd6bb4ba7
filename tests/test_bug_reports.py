"""Real bug reports, replayed: the numbers a report gives, fed to the suite as a case.

For each report below (research/bug_reports.md, by its number there) the inputs are the report's
own and ``given`` is what the buggy runtime returned, as the report states it. Two questions, as
issue 21 asks them: would a case with these inputs fail (the golden differs from ``given``), and
does the diagnosis name the mechanism (the model the report maps to reproduces ``given`` exactly)?
The models' own witnesses are checked against the whole corpus in tests/test_diagnosis.py; these
tests tie each model to the numbers of the report it cites, not to numbers of our own.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from qconform.case import Arg, Draft
from qconform.compare import compare
from qconform.diagnosis import diagnose as dg
from qconform.diagnosis.models import MODELS
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


def _q(opset, types, x, s, zp=None, **attrs) -> Draft:
    ins = (x, s) + ((zp,) if zp is not None else ())
    return Draft("QuantizeLinear", opset, types, "report", "report", ins, attrs)


def _dq(opset, types, x, s, zp=None, **attrs) -> Draft:
    ins = (x, s) + ((zp,) if zp is not None else ())
    return Draft("DequantizeLinear", opset, types, "report", "report", ins, attrs)


def _qlmm(a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp, types: str) -> Draft:
    u8, f32 = np.uint8, np.float32
    ins = (Arg("a", "uint8", np.array(a, u8)), p("a_scale", "float32", a_s, f32), p("a_zero_point", "uint8", a_zp, u8),
           Arg("b", "uint8", np.array(b, u8)), p("b_scale", "float32", b_s, f32), p("b_zero_point", "uint8", b_zp, u8),
           p("y_scale", "float32", y_s, f32), p("y_zero_point", "uint8", y_zp, u8))
    return Draft("QLinearMatMul", 10, types, "report", "report", ins)


def x(t, v, dtype):
    return Arg("x", t, np.array(v, dtype=dtype))


def p(name, t, v, dtype):
    return Arg(name, t, np.array(v, dtype=dtype), True)


def f8(v, dtype):
    return np.array(v, dtype=np.uint8).view(dtype)


F16, E4, E4Z, E5 = np.float16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2

REPLAYS = [
    Replay(1, "microsoft/onnxruntime#18576", "round-toward-zero",
           _q(19, "float16-int8", x("float16", [0.050018310546875, -0.050018310546875], F16),
              p("y_scale", "float16", 0.0999755859375, F16), p("y_zero_point", "int8", 0, np.int8)),
           (np.array([0, 0], np.int8),)),
    Replay(2, "microsoft/onnxruntime#3442", "narrow-signed-range",
           _q(10, "float32-int8", x("float32", [-129.0, -128.0], np.float32), p("y_scale", "float32", 1.0, np.float32),
              p("y_zero_point", "int8", 0, np.int8)),
           (np.array([-127, -127], np.int8),)),
    Replay(3, "microsoft/onnxruntime#16938", "float8-round-toward-zero",
           _q(19, "float32-float8e4m3fn", x("float32", [1.8131605], np.float32), p("y_scale", "float32", 1.0, np.float32),
              p("y_zero_point", "float8e4m3fn", 0, E4)),
           (np.array([1.75], E4),)),
    Replay(4, "microsoft/onnxruntime#18473", "fnuz-negative-zero",
           _q(19, "float32-float8e4m3fnuz", x("float32", [-0.0000001], np.float32),
              p("y_scale", "float32", 1.0, np.float32), p("y_zero_point", "float8e4m3fnuz", 0, E4Z)),
           (f8([0x80], E4Z),)),
    Replay(8, "microsoft/onnxruntime#32730", "blocked-index-per-element",
           _dq(21, "int8-float32", x("int8", [10, 20, 30, 40, 50, 60, 70, 80], np.int8),
               p("x_scale", "float32", [0.5, 2.0], np.float32), p("x_zero_point", "int8", [0, 10], np.int8),
               axis=0, block_size=4),
           (np.array([5, 20, 0, 0, 0, 0, 0, 0], np.float32),)),
    Replay(11, "onnx/onnx#7835", "wrap-around",
           _qlmm([[100]], 1.0, 0, [[100]], 1.0, 0, 0.2, 0, "uint8-uint8-uint8-float32"),
           (np.array([[80]], np.uint8),)),
    Replay(12, "onnx/onnx#6220", "fnuz-inf-wrong-table",
           _q(21, "float32-float8e4m3fnuz", x("float32", [np.inf, -np.inf], np.float32),
              p("y_scale", "float32", 1.0, np.float32), p("y_zero_point", "float8e4m3fnuz", 0, E4Z)),
           (np.array([240.0, -240.0], E4Z),), "strict",
           "±Inf -> ±max is the 24+ table, permitted before 24 in the default profile (semantics.md#q-float8-fnuz-inf)"),
    Replay(24, "apache/tvm#9558", "cast-before-clip",
           _q(13, "float32-int8", x("float32", [np.inf], np.float32), p("y_scale", "float32", 1.0, np.float32),
              p("y_zero_point", "int8", 0, np.int8)),
           (np.array([-128], np.int8),)),
    Replay(34, "pytorch/executorch#20655", "dq-subtract-wraps",
           _dq(13, "int8-float32", x("int8", [-128], np.int8), p("x_scale", "float32", 1.0, np.float32),
               p("x_zero_point", "int8", 100, np.int8)),
           (np.array([28.0], np.float32),)),
    Replay(45, "jax-ml/ml_dtypes#260", "float8-never-saturate",
           _q(19, "float32-float8e4m3fn", x("float32", [500.0], np.float32), p("y_scale", "float32", 1.0, np.float32),
              p("y_zero_point", "float8e4m3fn", 0, E4)),
           (f8([0x7F], E4),)),
    Replay(46, "triton-lang/triton#5925", "minifloat-ties-away",
           _q(19, "float16-float8e5m2", x("float16", [9.0], F16), p("y_scale", "float16", 1.0, F16),
              p("y_zero_point", "float8e5m2", 0, E5)),
           (np.array([10.0], E5),)),
    Replay(47, "triton-lang/triton#11753", "minifloat-ties-away",
           _q(19, "float32-float8e5m2", x("float32", [1.125], np.float32), p("y_scale", "float32", 1.0, np.float32),
              p("y_zero_point", "float8e5m2", 0, E5)),
           (np.array([1.25], E5),)),
    Replay(49, "triton-lang/triton#10745", "fnuz-nan-code-as-negative-zero",
           _dq(19, "float8e4m3fnuz-float32", Arg("x", "float8e4m3fnuz", f8([0x80], E4Z)),
               p("x_scale", "float32", 1.0, np.float32)),
           (np.array([-0.0], np.float32),)),
    Replay(54, "llvm/torch-mlir#4487", "saturate-before-zero-point",
           _q(19, "float32-int8", x("float32", [3.4501], np.float32),
              p("y_scale", "float32", np.float32(1) / np.float32(66.933334), np.float32),
              p("y_zero_point", "int8", -128, np.int8)),
           (np.array([-1], np.int8),)),
    Replay(55, "llvm/torch-mlir#3009", "unsigned-zero-point-read-as-signed",
           _q(19, "float32-uint8", x("float32", [1.0, 2.0, 3.0], np.float32), p("y_scale", "float32", 1.0, np.float32),
              p("y_zero_point", "uint8", 200, np.uint8)),
           (np.array([0, 0, 0], np.uint8),)),
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
    d = _q(19, "float32-int8", x("float32", [np.nan, 1.0], np.float32), p("y_scale", "float32", 1.0, np.float32),
           p("y_zero_point", "int8", 0, np.int8))
    case = evaluate(d)
    assert case.dont_care[0] is not None and case.dont_care[0].tolist() == [True, False]
    for nan_as in (127, -128, 0):
        assert compare(case, (np.array([nan_as, 1], np.int8),)).verdict == "pass"
    assert compare(case, (np.array([127, 2], np.int8),)).verdict == "fail"


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

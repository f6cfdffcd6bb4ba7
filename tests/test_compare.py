"""The comparison rules: raw bits, −0 ≠ +0, NaN as a class unless strict, dtype, shape, masks, readings."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from qconform.case import Arg, Case, Draft, Reading
from qconform.compare import compare


def make_case(expected, *, mask=None, alt=None) -> Case:
    x = Arg("x", "float32", np.zeros(np.shape(expected), np.float32))
    d = Draft("QuantizeLinear", 19, "float32-float8e4m3fn", "unit", "c", (x,))
    readings = [Reading("spec", (expected,))] + ([Reading("other", (alt,))] if alt is not None else [])
    return Case(d, ("y",), tuple(readings), (mask,), "principles")


F8 = ml_dtypes.float8_e4m3fn


def f8(bits):
    return np.array(bits, dtype=np.uint8).view(F8)


def test_identical_bits_pass():
    assert compare(make_case(f8([0x10, 0x7E])), [f8([0x10, 0x7E])]).verdict == "pass"


def test_negative_zero_is_not_positive_zero():
    out = compare(make_case(f8([0x00])), [f8([0x80])])
    assert out.verdict == "fail" and out.mismatch_count == 1
    assert out.mismatches[0].expected_value == "0.0" and out.mismatches[0].actual_value == "-0.0"


def test_any_nan_matches_any_nan_unless_strict():
    case = make_case(f8([0x7F]))
    assert compare(case, [f8([0xFF])]).verdict == "pass"
    assert compare(case, [f8([0xFF])], strict_nan=True).verdict == "fail"
    assert compare(case, [f8([0x7E])]).verdict == "fail"


def test_float32_nan_payloads():
    x = Arg("x", "float32", np.zeros(1, np.float32))
    d = Draft("DequantizeLinear", 19, "int8-float32", "unit", "c", (x,))
    exp = np.array([0x7FC00000], np.uint32).view(np.float32)
    case = Case(d, ("y",), (Reading("spec", (exp,)),), (None,), "principles")
    other = np.array([0xFFC00001], np.uint32).view(np.float32)
    assert compare(case, [other]).verdict == "pass"
    assert compare(case, [other], strict_nan=True).verdict == "fail"


def test_dtype_and_shape_must_match_exactly():
    case = make_case(f8([0x10, 0x11]))
    wrong_type = compare(case, [np.array([0x10, 0x11], np.uint8)])
    assert wrong_type.verdict == "fail" and "element type uint8, expected float8e4m3fn" in wrong_type.problem
    wrong_shape = compare(case, [f8([[0x10, 0x11]])])
    assert wrong_shape.verdict == "fail" and "shape (1, 2), expected (2,)" in wrong_shape.problem


def test_masked_elements_are_skipped_but_counted():
    case = make_case(f8([0x10, 0x11, 0x12]), mask=np.array([False, True, False]))
    out = compare(case, [f8([0x10, 0x55, 0x12])])
    assert out.verdict == "pass" and out.masked == 1
    assert compare(case, [f8([0x10, 0x55, 0x13])]).verdict == "fail"


def test_any_permitted_reading_passes_unless_strict_profile():
    case = make_case(f8([0x00]), alt=f8([0x80]))
    out = compare(case, [f8([0x80])])
    assert out.verdict == "pass" and out.reading == "other"
    assert compare(case, [f8([0x80])], profile="strict").verdict == "fail"


@pytest.mark.parametrize("bad, problem", [
    (None, "not a list"), ([], "returned 0 output(s)"), ([[1, 2]], "not a numpy array"),
])
def test_malformed_results_are_errors(bad, problem):
    out = compare(make_case(f8([0x10, 0x11])), bad)
    assert out.verdict == "error" and problem in out.problem


def test_failure_message_grammar():
    x = Arg("x", "float32", np.array([470.0], np.float32))
    s = Arg("y_scale", "float32", np.array(1.0, np.float32), initializer=True)
    d = Draft("QuantizeLinear", 19, "float32-float8e4m3fn", "float8", "overflow", (x, s), {"saturate": 0})
    case = Case(d, ("y",), (Reading("spec", (f8([0x7F]),)),), (None,), "q-float8")
    msg = compare(case, [f8([0x7E])]).message(case)
    assert "QuantizeLinear-19/float32-float8e4m3fn/float8/overflow" in msg
    assert "qconform/docs/semantics.md#q-float8" in msg
    assert "y[0]=0x7e (448.0), but should be 0x7f (nan) [x=470.0, y_scale=1.0]" in msg

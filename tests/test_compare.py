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
    readings = [Reading("spec", (expected,), (mask,))] + ([Reading("other", (alt,), (mask,))] if alt is not None else [])
    return Case(d, ("y",), tuple(readings), "principles")


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
    case = Case(d, ("y",), (Reading("spec", (exp,)),), "principles")
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


def test_two_runs_agree_outside_what_every_reading_leaves_undefined():
    """``agree`` (what the packing measurement asks of packed and single runs): bytes may differ only
    in elements every reading leaves undefined; an element one reading checks, a type or a shape
    decides."""
    from qconform.compare import agree

    first = np.array([False, True, True, False])
    case = Case(make_case(f8([0x10, 0x11, 0x12, 0x13])).draft, ("y",),
                (Reading("spec", (f8([0x10, 0x11, 0x12, 0x13]),), (first,)),
                 Reading("other", (f8([0x10, 0x11, 0x22, 0x13]),), (np.array([False, True, False, False]),))),
                "principles")
    run = [f8([0x10, 0x11, 0x12, 0x13])]
    assert agree(case, run, [f8([0x10, 0x7E, 0x12, 0x13])])  # undefined in both readings
    assert not agree(case, run, [f8([0x10, 0x11, 0x7E, 0x13])])  # undefined in one: it can decide which matches
    assert not agree(case, run, [f8([0x11, 0x11, 0x12, 0x13])])
    assert not agree(case, run, [np.array([0x10, 0x11, 0x12, 0x13], np.uint8)])
    assert not agree(case, run, [f8([[0x10, 0x11, 0x12, 0x13]])])
    assert not agree(case, run, [])
    unmasked = make_case(f8([0x10, 0x11]))
    assert agree(unmasked, [f8([0x10, 0x11])], [f8([0x10, 0x11])])
    assert not agree(unmasked, [f8([0x10, 0x11])], [f8([0x10, 0x91])])
    wide = Case(make_case(f8([0])).draft, ("y",), (Reading("spec", (np.zeros(2, np.float32),),
                                                             (np.array([True, False]),)),), "principles")
    assert agree(wide, [np.array([1.0, 2.0], np.float32)], [np.array([-7.0, 2.0], np.float32)])
    assert not agree(wide, [np.array([1.0, 2.0], np.float32)], [np.array([1.0, 2.5], np.float32)])
    assert not agree(wide, [np.array([1.0, 2.0], np.float32)], [[1.0, 2.0]])  # not an array: compare rejects it
    objects = np.array([1, "a"], dtype=object)
    assert not agree(wide, [objects], [np.array([2, "a"], dtype=object)])


def test_two_runs_agree_on_an_empty_input_s_undefined_zero_point():
    """The case that motivated ``agree``: DynamicQuantizeLinear over an empty input leaves y_zero_point
    (rank 0) undefined in every reading, y_scale not (OpenVINO writes uninitialised memory there)."""
    from qconform import corpus
    from qconform.compare import agree

    cid = "DynamicQuantizeLinear-11/float32-uint8-float32/shapes/empty-1d"
    case = corpus.index(corpus.DEFAULT_ROOT).cases_of([cid])[cid]
    y, scale, zp = case.expected
    assert zp.shape == () and compare(case, [y, scale, np.array(0x6A, zp.dtype)]).verdict == "pass"
    assert agree(case, [y, scale, np.array(0x6A, zp.dtype)], [y, scale, np.array(0xB3, zp.dtype)])
    assert not agree(case, [y, scale, zp], [y, np.array(1.0, scale.dtype), zp])


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
    case = Case(d, ("y",), (Reading("spec", (f8([0x7F]),)),), "q-float8")
    msg = compare(case, [f8([0x7E])]).message(case)
    assert "QuantizeLinear-19/float32-float8e4m3fn/float8/overflow" in msg
    assert "qconform/docs/semantics.md#q-float8" in msg
    assert "y[0]=0x7e (448.0), but should be 0x7f (nan) [x=470.0, y_scale=1.0]" in msg


# ----------------------------------------------------------------------------------------------
# One rule: every caller that asks "are these the case's bits?" gets the same answer
# ----------------------------------------------------------------------------------------------
def _variants(case: Case) -> list[list[np.ndarray]]:
    """Each reading's outputs, and each with one element changed: a bit flipped, a NaN made another
    NaN, a don't-care element changed (the rule passes the last two, fails the first)."""
    from qconform import dtypes

    out = []
    for r in case.readings:
        out.append(list(r.outputs))
        for i, o in enumerate(r.outputs):
            t = dtypes.get(o.dtype)
            bits = t.to_bits(o).reshape(-1)
            changes = [0] if bits.size else []
            nan = np.flatnonzero(t.is_nan_bits(bits))
            masked = np.flatnonzero(r.dont_care[i]) if r.dont_care[i] is not None else []
            changes += [int(j) for j in nan[:1]] + [int(j) for j in masked[:1]]
            for j in changes:
                flipped = bits.copy()
                flipped[j] ^= 1
                outs = list(r.outputs)
                outs[i] = t.from_bits(flipped).reshape(o.shape)
                out.append(outs)
    return out


def _cases() -> list[Case]:
    """Hand-made cases (NaN classes, a mask, two readings) and corpus cases with several readings,
    don't-care masks and several outputs."""
    from qconform import corpus as corpus_mod

    nan = f8([0x7F, 0x10, 0x00, 0x7E])
    made = [make_case(nan), make_case(nan, mask=np.array([False, True, False, False])),
            make_case(nan, alt=f8([0x7F, 0x11, 0x80, 0x7E]))]
    index = corpus_mod.index(corpus_mod.DEFAULT_ROOT)
    wanted, picked = ("QuantizeLinear-21/float32-float8e4m3fn/", "QuantizeLinear-19/float32-int8/",
                      "DynamicQuantizeLinear-11/", "DequantizeLinear-21/int4-float32/"), []
    for prefix in wanted:
        ids = [r.id for r in index.refs if r.id.startswith(prefix)]
        cases = index.cases_of(ids)
        picked += sorted((c for c in cases.values()
                          if len(c.readings) > 1 or any(m is not None for r in c.readings for m in r.dont_care)),
                         key=lambda c: c.id)[:6] or [cases[ids[0]]]
    return made + picked


def test_every_caller_of_the_rule_gives_one_answer():
    """The verdict, the diagnosis (a model reproducing the outputs; a model the case would fail), the
    findings' closest reading and skip mask, the evidence, the oracle's de-duplication of readings
    and a sweep's mismatch text: the same arrays, one answer (they once had a copy each)."""
    from qconform import dtypes
    from qconform.adapt import NUMPY_NATIVE
    from qconform.apps.findings import closest_reading, skip_mask
    from qconform.compare import differing, evidence, masks, passes
    from qconform.diagnosis import diagnose as dg
    from qconform.oracle.base import Evaluation, _same_bits, union
    from qconform.sweep.units import describe_mismatches

    class Returns:  # a deviation model whose outputs are exactly ``outs``
        name, explanation = "returns", "returns the given outputs"

        def __init__(self, outs):
            self.outs = outs

        def applies(self, draft):
            return True

        def evaluate(self, draft):
            return Evaluation(readings=[Reading("r", tuple(self.outs))])

    sweep_like = type("S", (), {})
    checked = passed = 0
    for case in _cases():
        # the diagnosis holds a model to no element any reading of the case leaves undefined
        any_masks = [union(*(r.dont_care[i] for r in case.readings)) for i in range(len(case.output_names))]
        for actual in _variants(case):
            verdict = compare(case, actual)
            ok = verdict.verdict == "pass"
            assert passes(case, actual) == ok, case.id
            assert dg.same_outputs(case.readings[0].outputs, actual, case.readings[0].dont_care) == (
                differing(case.readings[0].outputs, actual, masks(case, case.readings[0])) == 0)
            assert any(_same_bits(Reading("a", tuple(actual), r.dont_care), r) for r in case.readings) == ok, case.id
            assert dg._would_fail(Returns(actual), case, strict_nan=False) == (not ok), case.id
            assert (dg.reproduces(Returns(case.readings[0].outputs), case, actual) is not None) == (
                differing(case.readings[0].outputs, actual, any_masks) == 0), case.id
            closest = closest_reading(case, actual)
            assert (differing(closest.outputs, actual, masks(case, closest)) == 0) == ok, case.id
            if not ok:
                rows = evidence(case, actual, verdict)
                assert len(rows) == verdict.mismatch_count > 0, case.id
                chosen = next(r for r in case.readings if r.name == verdict.reading)
                skip = skip_mask(case, actual, chosen)
                for name, e, a in zip(case.output_names, chosen.outputs, actual):
                    t = dtypes.get(e.dtype)
                    if t.onnx in NUMPY_NATIVE:
                        continue
                    shown = (t.to_bits(e) != t.to_bits(a)) & ~skip.get(name, np.zeros(e.shape, bool))
                    assert np.array_equal(shown, t.differs(e, a, chosen.dont_care[case.output_names.index(name)])), case.id
                if len(case.output_names) == 1:
                    s = sweep_like()
                    s.out_type, s.x_type = case.output_types[0], case.inputs[0].type
                    text = describe_mismatches(s, case, case.inputs[0].value, actual[0], verdict)
                    assert text.startswith(f"{verdict.mismatch_count} of "), (case.id, text)
            checked += 1
            passed += ok
    assert checked > 60 and 0 < passed < checked


def test_a_failing_case_is_compared_once_and_its_masks_travel_with_the_outcome(corpus, monkeypatch):
    """One comparison per reading: the outcome carries the failure's difference masks, and the
    evidence and the localisation read them instead of diffing again (issue 62, "compare once")."""
    import qconform.compare as cmp
    from qconform import dtypes
    from qconform.diagnosis.diagnose import localise

    case = next(c for c in corpus.cases if len(c.readings) == 1 and c.expected[0].size > 1
                and dtypes.get(c.expected[0].dtype).is_integer and c.readings[0].dont_care == (None,) * len(c.expected))
    actual = [np.array(e, copy=True) for e in case.expected]
    flat = actual[0].reshape(-1)
    t = dtypes.get(flat.dtype)
    flat[0] = flat[0] + 1 if flat[0] < t.qrange[1] else flat[0] - 1
    calls = []
    real = cmp.differences
    monkeypatch.setattr(cmp, "differences", lambda *a, **k: calls.append(1) or real(*a, **k))
    outcome = cmp.compare(case, actual)
    assert outcome.verdict == "fail" and len(calls) == 1
    assert [d.sum() for d in outcome.differences] == [1] + [0] * (len(actual) - 1)
    assert len(cmp.evidence(case, actual, outcome)) == outcome.mismatch_count == 1
    localise(case, actual, outcome)
    assert len(calls) == 1  # neither evidence nor localisation compared again

"""Invalid-by-text cases are information, valid forms are accepted, the
readings the text permits are offered, and every clause has a case (qconform/docs/semantics.md)."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from qconform.case import Arg, Draft
from qconform.oracle import evaluate
from qconform.oracle.granularity import InvalidModel


def _by_id(corpus, cid):
    return next(c for c in corpus.cases if c.id == cid)


def test_scale_shape_1_on_a_longer_axis_is_information_never_pass_or_fail(corpus):
    """Finding 1: x [2,3,5], axis 1, scale [1] is invalid by the text ("a 1-D tensor of length Di")."""
    info = [c for c in corpus.cases if c.information and not c.domain]  # com.microsoft's: their own tests
    assert len(info) == 224 and {c.name for c in (c.draft for c in info)} == {"scale-shape-1"}
    assert all("1-D tensor of length Di" in c.information for c in info)
    valid = [c for c in corpus.cases if c.draft.name == "scale-shape-1-axis-length-1"]
    assert valid and not any(c.information for c in valid)


def test_an_information_case_gets_the_info_verdict_whatever_the_runner_does(corpus):
    from qconform.execution import Options, Pipeline
    from qconform.isolation import CallResult

    case = next(c for c in corpus.cases if c.information)
    pipe = Pipeline(Options(golden="", runner=""), runner=None, cases={case.id: case})
    ran = pipe._finish(case, CallResult("ok", outputs=list(case.expected)))
    assert ran.verdict == "info" and "ran it; the outputs match reading 'spec'" in ran.record.problem
    flipped = case.expected[0].view(np.uint8) ^ np.uint8(1) if case.expected[0].dtype.itemsize == 1 else None
    wrong = pipe._finish(case, CallResult("ok", outputs=[flipped.view(case.expected[0].dtype) if flipped is not None
                                                           else np.zeros_like(case.expected[0])]))
    assert wrong.verdict == "info" and "differ" in wrong.record.problem
    refused = pipe._finish(case, CallResult("error", message="axis length mismatch\nmore"))
    assert refused.verdict == "info" and "rejected it (error: axis length mismatch)" in refused.record.problem


def test_qlinearmatmul_vector_parameters_are_valid_per_row_and_per_column(corpus):
    """Finding 2: "an M element vector ... for per row quantization" (and one per column of b)."""
    for name in ("per-row-a-vector", "per-column-b-vector"):
        cases = [c for c in corpus.cases if c.op == "QLinearMatMul" and c.draft.name == name]
        assert cases and all(len(c.expected[0].shape) == 2 for c in cases)
    c = next(c for c in corpus.cases if c.op == "QLinearMatMul" and c.draft.name == "per-column-b-vector")
    per_col = dict(zip(("a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point"), c.inputs))
    assert per_col["b_scale"].value.shape == (3,)
    # the same case written in the N-D form [1, N] gives the same bits
    nd = [a if a is None or a.name not in ("b_scale", "b_zero_point") else Arg(a.name, a.type, a.value.reshape(1, 3), True)
          for a in c.inputs]
    assert np.array_equal(evaluate(Draft(**{**c.draft.__dict__, "inputs": tuple(nd)})).expected[0], c.expected[0])


def test_a_scalar_scale_with_block_size_is_per_tensor(corpus):
    """Finding 3: granularity is "determined by the shape of y_scale"."""
    c = next(c for c in corpus.cases if c.id == "QuantizeLinear-21/float32-int8/granularity-edges/scalar-scale-with-block-size")
    assert c.attrs["block_size"] == 2 and c.inputs[1].value.shape == ()
    ref = evaluate(Draft(**{**c.draft.__dict__, "attrs": {"axis": 1}}))
    assert np.array_equal(ref.expected[0], c.expected[0])


def test_the_exact_quotient_rounded_once_is_a_permitted_reading_at_23():
    """Finding 4: x=65536 (bfloat16), s=65504 (float16): operands rounded to float16 overflow and
    saturate to 127; the exact quotient 1.0005 rounds to 1."""
    d = Draft("QuantizeLinear", 23, "bfloat16-float16-int8", "t", "t",
              (Arg("x", "bfloat16", np.array([65536.0], dtype=__import__("ml_dtypes").bfloat16)),
               Arg("y_scale", "float16", np.array(65504.0, np.float16), True),
               Arg("y_zero_point", "int8", np.array(0, np.int8), True)))
    c = evaluate(d)
    assert {r.name: int(r.outputs[0][0]) for r in c.readings} == {
        "operands-rounded-to-float16": 127, "quotient-rounded-once-to-float16": 1}


def test_the_readings_of_4_attach_to_the_corpus_and_keep_the_first_reading(corpus):
    both = [c for c in corpus.cases
            if any("quotient-rounded-once" in r.name and "-int32" not in r.name for r in c.readings)]
    assert len(both) >= 600 and all(c.opset >= 23 and c.op == "QuantizeLinear" for c in both)
    assert all("operands-rounded-to" in c.readings[0].name for c in both)


def test_no_precision_reading_for_the_integer_zero_point_or_the_dq_subtraction():
    """Finding 5: not permitted (docs/semantics.md); the diagnosis names them instead."""
    from qconform.diagnosis.models import MODELS

    assert "zero-point-added-in-scale-type" in MODELS and "dq-subtract-in-output-type" in MODELS
    d = Draft("QuantizeLinear", 23, "float16-uint16", "t", "t",
              (Arg("x", "float16", np.array([2049.0], np.float16)), Arg("y_scale", "float16", np.array(1.0, np.float16), True),
               Arg("y_zero_point", "uint16", np.array(1, np.uint16), True)))
    c = evaluate(d)  # 2049 is not a float16: x itself reads 2048, and 2048 + 1 is added exactly
    assert [r.name for r in c.readings] == ["spec"] and int(c.expected[0][0]) == 2049
    with open(__import__("qconform").__path__[0] + "/docs/semantics.md") as f:
        doc = f.read()
    assert "no reading: the precision of `+ y_zero_point`" in doc and "no reading: the precision of `x − x_zero_point`" in doc


def test_dynamic_quantize_zero_range_requires_only_what_the_formula_gives(corpus):
    """Finding 6, as semantics.md decides it: y_scale is the formula's +0 (or -0), y and zp are 0/0."""
    zero = [c for c in corpus.cases if c.clause == "dql-zero-input"]
    assert zero and all(c.readings[0].name in ("spec", "scale-plus-zero") and c.readings[0].dont_care[2].all() for c in zero)


@pytest.mark.parametrize("family, clause, ops", [
    ("defaults", {"q-output-type", "dq-formula"}, {"QuantizeLinear", "DequantizeLinear"}),  # 7
    ("special-scales", {"q-division", "dq-formula"}, {"QuantizeLinear", "DequantizeLinear"}),  # 8
    ("fp8-nonzero-zero-point", {"dq-float8"}, {"DequantizeLinear"}),  # 9
    ("ignored-attributes", {"q-saturation-int", "granularity-per-axis"}, {"QuantizeLinear", "DequantizeLinear"}),  # 9
    ("granularity-edges", {"granularity-per-tensor", "granularity-blocked"}, {"QuantizeLinear", "DequantizeLinear"}),  # 10
    ("constant-operand", None, {"QuantizeLinear", "DequantizeLinear", "QLinearMatMul", "DynamicQuantizeLinear"}),  # 11
    ("signed-zero", {"q-float8-zero-point"}, {"QuantizeLinear"}),  # 12
    ("code-classes", {"input-codes"}, {"QuantizeLinear", "DequantizeLinear"}),
    ("block-sizes", {"granularity-block-sizes"}, {"QuantizeLinear", "DequantizeLinear"}),
])
def test_each_new_family_is_in_the_corpus_with_its_clause(corpus, family, clause, ops):
    cases = [c for c in corpus.cases if c.family == family and not c.domain]  # com.microsoft ops reuse names
    assert {c.op for c in cases} == ops
    if clause is not None:
        assert {c.clause for c in cases} == clause


def test_defaults_cover_every_version(corpus):
    """Finding 7: QuantizeLinear without zero point or output_dtype, DequantizeLinear without zero point."""
    from qconform import schemas

    got = Counter((c.op, c.opset) for c in corpus.cases if c.family == "defaults")
    for op in ("QuantizeLinear", "DequantizeLinear"):
        for v in schemas.IN_SCOPE[("", op)]:
            assert got[(op, v)], f"{op}-{v} has no defaults case"
    for c in corpus.cases:
        if c.family == "defaults" and c.op == "QuantizeLinear":
            assert len(c.inputs) == 2 and "output_dtype" not in c.attrs and c.output_types == ("uint8",)


def test_special_scales_cover_every_special(corpus):
    """Finding 8."""
    names = {c.draft.name for c in corpus.cases if c.family == "special-scales"}
    assert names >= {"scale-pos-zero", "scale-neg-zero", "scale-negative", "scale-pos-inf", "scale-neg-inf",
                     "scale-nan", "scale-e8m0-nan-code"}


def test_blocked_ranks_1_and_2_with_a_positive_axis(corpus):
    """Finding 10."""
    shapes = {(c.draft.name, c.inputs[0].value.ndim, c.attrs.get("axis")) for c in corpus.cases
              if c.family == "granularity-edges" and "blocked" in c.draft.name}
    assert ("blocked-rank1", 1, 0) in shapes and ("blocked-rank2-axis1", 2, 1) in shapes


def test_constant_operand_covers_every_op_version_with_the_data_as_an_initializer(corpus):
    """Finding 11: the quantized input (x; QLinearMatMul's b) is an initializer, compared the same way."""
    from qconform import schemas
    from qconform.model import build_model

    from qconform.declarations import operators
    from qconform.declarations.operator import Role

    cases = [c for c in corpus.cases if c.family == "constant-operand"]
    versions = {(c.op, c.opset) for c in cases}
    for (domain, op), vs in schemas.IN_SCOPE.items():
        if not domain:
            weights = operators.get(domain, op).of_role(Role.WEIGHT)
            if weights:  # a filter or B: a quantized input every case already holds as an initializer
                held = [c for c in corpus.cases if c.op == op and not c.domain and not c.is_graph]
                assert held and all(c.inputs[operators.get(domain, op).index(w.name)].initializer
                                    for c in held for w in weights), op
                continue
            assert all((op, v) in versions for v in vs), op
    for c in cases:
        data = c.inputs[3] if c.op == "QLinearMatMul" else c.inputs[0]
        assert data.initializer and data.name not in c.feeds
        names = {i.name for i in build_model(c, check=False).graph.initializer}
        assert data.name in names


def test_negative_zero_into_minifloats_is_positive_zero(corpus):
    """Finding 12, decided (the open reading Q5, #q-float8-zero-point): (-0) + (+0) = +0; "the
    quantization formula remains the same" has no step that skips the zero point."""
    c = _by_id(corpus, "QuantizeLinear-21/float32-float8e4m3fn/signed-zero/negative-zero-no-zero-point")
    assert [r.name for r in c.readings] == ["spec"]
    assert np.asarray(c.readings[0].outputs[0]).view(np.uint8)[0] == 0x00


def test_invalid_models_still_raise(corpus):
    d = _by_id(corpus, "QLinearMatMul-10/int8-int8-int8-float32/per-row-column/per-row-a-vector").draft
    bad = tuple(a if a is None or a.name != "a_scale" else Arg(a.name, a.type, np.resize(a.value, 4), True)
                for a in d.inputs)
    with pytest.raises(InvalidModel):
        evaluate(Draft(**{**d.__dict__, "inputs": bad}))

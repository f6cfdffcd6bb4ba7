"""QDQ patterns (qconform/docs/semantics.md#qdq-graph): graph cases computed node by node, the
decisions the text leaves to the suite, and the independent check against onnxruntime run node by
node. The QNN and default-optimisation rows: tests/test_qnn.py."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from qconform.case import Arg, Draft, Node, PATTERN_DOMAIN
from qconform.oracle.base import evaluate
from qconform.oracle.graph import NotExact, exact_sum

PATTERNS = "qdq."


@pytest.fixture(scope="module")
def patterns(corpus):
    cases = [c for c in corpus.cases if c.id.startswith(PATTERNS)]
    assert len(cases) > 300
    return cases


def _fake_quant(x: list[float], s: float, zp: int) -> Draft:
    return Draft("FakeQuant", 21, "float32-uint8", "t", "t",
                 (Arg("x", "float32", np.array(x, np.float32)), Arg("s", "float32", np.float32(s), True),
                  Arg("zp", "uint8", np.uint8(zp), True)),
                 domain=PATTERN_DOMAIN, graph=(Node("QuantizeLinear", ("x", "s", "zp"), ("q",)),
                                              Node("DequantizeLinear", ("q", "s", "zp"), ("y",))))


def test_a_graph_is_computed_node_by_node_and_a_qdq_pair_is_not_an_identity():
    """#qdq-graph: x → Q → DQ holds x rounded to the grid and saturated to the type's range."""
    case = evaluate(_fake_quant([0.3, 0.5, 1.5, 2.5, 300.0, -7.0], 1.0, 0))
    assert [r.name for r in case.readings] == ["spec"]
    assert case.expected[0].tolist() == [0.0, 0.0, 2.0, 2.0, 255.0, 0.0]


def test_the_pattern_readings_are_the_nodes_readings_combined():
    """#qdq-graph: QuantizeLinear-21's `quotient-exact` reading carries through a pattern; identical
    results collapse."""
    one = evaluate(_fake_quant([0.3], 0.1, 0))  # 0.3 / 0.1: no tie in either reading
    assert len(one.readings) == 1
    # fl32(0.35) / fl32(0.1) is 3.4999999 exactly and 3.5 in float32: 3 exactly, 4 (half to even) in float32
    two = evaluate(_fake_quant([0.35], 0.1, 0))
    assert [r.name for r in two.readings] == ["spec", "quotient-exact"]
    assert [float(r.outputs[0][0]) for r in two.readings] == [float(np.float32(4 * np.float32(0.1))),
                                                               float(np.float32(3 * np.float32(0.1)))]


def test_a_sum_whose_order_is_open_must_be_exact_in_float32():
    """#qdq-sum-order: exact_sum accepts terms on one power-of-two grid below 2^24 units, and refuses
    a sum that some order would round."""
    assert exact_sum([[Fraction(3, 8), Fraction(5, 16), Fraction(-1, 4)]], "t") == [Fraction(7, 16)]
    with pytest.raises(NotExact):
        exact_sum([[Fraction(2**24), Fraction(1)]], "t")  # 2^24 + 1 is not a float32
    with pytest.raises(NotExact):
        exact_sum([[Fraction(1, 3)]], "t")  # not a binary fraction at all


def test_every_sum_in_the_pattern_corpus_is_exact_for_every_order(patterns):
    """The generators keep MatMul, Gemm, Conv, the pools and Resize exact; a non-dyadic scale in such a
    pattern is refused rather than given an order's value."""
    sums = [c for c in patterns if c.clause == "qdq-sum-order"]
    assert len(sums) > 50 and all(len(c.readings) <= 2 for c in sums)
    case = next(c for c in sums if c.op == "MatMul" and c.types.startswith("uint8-int8"))
    args = [a if a.name != "sx" else Arg("sx", "float32", np.float32(0.0372), True) for a in case.inputs]
    with pytest.raises(NotExact):
        evaluate(Draft(**{**case.draft.__dict__, "inputs": tuple(args)}))


def test_sigmoid_is_the_correctly_rounded_function_with_no_band(patterns):
    """#qdq-sigmoid: one value, the exact sigmoid rounded once to float32, and no element left out:
    the text states no accuracy, so it permits no other value (the open reading Q4)."""
    sig = [c for c in patterns if c.op == "Sigmoid"]
    assert sig and all(c.clause == "qdq-sigmoid" and [r.name for r in c.readings] == ["spec"] for c in sig)
    assert all(m is None for c in sig for m in c.readings[0].dont_care)
    x = np.array([[-32768, -100, 0, 5, 32767]], np.int16)  # a 2^-24 grid: where a 2^-20 band held 16 codes
    draft = Draft("Sigmoid", 21, "int16-uint16", "t", "t",
                  (Arg("x", "int16", x), Arg("sx", "float32", np.float32(2.0**-11), True),
                   Arg("zx", "int16", np.int16(0), True), Arg("sy", "float32", np.float32(2.0**-24), True),
                   Arg("zy", "uint16", np.uint16(0), True)), domain=PATTERN_DOMAIN,
                  graph=(Node("DequantizeLinear", ("x", "sx", "zx"), ("f",)), Node("Sigmoid", ("f",), ("g",)),
                         Node("QuantizeLinear", ("g", "sy", "zy"), ("y",))))
    (only,) = evaluate(draft).readings
    # sigmoid(-16) = 1.1254e-7 = 1.888 codes -> 2; the rest saturates at 65535
    assert only.outputs[0].tolist() == [[2, 65535, 65535, 65535, 65535]] and only.dont_care == (None,)


def test_data_and_parameters_are_where_a_quantisation_tool_puts_them(patterns):
    """#qdq-graph: quantized data are graph inputs; scales, zero points, weights, shapes and indices
    initializers."""
    for c in patterns:
        data = {a.name for a in c.inputs if not a.initializer}
        consumed_by_first = {i for n in c.graph if n.op in ("DequantizeLinear", "QuantizeLinear") for i in n.inputs[:1]}
        # the weight-only pattern DQ(weight) -> MatMul takes its float activation as a graph input
        activation = {a.name for a in c.inputs if not a.initializer and a.type == "float32"} \
            if c.family == "blocked-weight" else set()
        assert data and data - activation <= consumed_by_first, c.id
        assert all(a.initializer for a in c.inputs if a.type == "int64"), c.id


@pytest.mark.needs("onnxruntime")
def test_onnxruntime_node_by_node_gives_a_permitted_reading_for_every_pattern(patterns):
    """The independent check: onnxruntime's CPU EP with graph optimisations off computes each node as
    its own kernel; for every pattern case it gives one of the case's readings (a difference would
    have to be an erratum in qconform/facts/onnxruntime.toml)."""
    import onnxruntime

    from qconform.execution import Pipeline
    from qconform.facts import FAILING_KINDS, load
    from qconform.runner import resolve

    pipe = Pipeline.local(resolve("onnxruntime"))
    rows = [f for f in load("onnxruntime").facts if f.kind in FAILING_KINDS and f.applies(onnxruntime.__version__)]
    bad = [(c.id, r.verdict) for c in patterns if (r := pipe.judge(c)).verdict != "pass"
           and not any(f.covers(c.id) for f in rows)]
    assert not bad, bad[:10]


def test_cpu_ref_runs_every_pattern_from_its_model_alone(patterns):
    from qconform.execution import Pipeline
    from qconform.runners.cpu_ref import CpuRefRunner

    pipe = Pipeline.local(CpuRefRunner())
    assert {pipe.judge(c).verdict for c in patterns} == {"pass"}

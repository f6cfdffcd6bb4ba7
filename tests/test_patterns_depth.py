"""QDQ patterns at the depth of the single ops (issue 64; qconform/docs/semantics.md#qdq-graph):
every attribute of every pattern op that changes its arithmetic has a case, read from the op's own
schema; the oracle's float ops follow the text at the points the corpus relies on."""
from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import numpy as np
import onnx.defs
import pytest
from onnx import helper

from qconform.case import Arg, Draft, Node, PATTERN_DOMAIN
from qconform.declarations import operators
from qconform.generators import patterns
from qconform.oracle.base import evaluate
from qconform.oracle.graph import NotExact, exact_sum, graph_outputs
from qconform.oracle.graph_ops import pool_geometry
from qconform.oracle.graph_sums import row_sums
from qconform.oracle.granularity import InvalidModel

#: Attributes of pattern ops that change no value the pattern computes, each with its reason.
NOT_ARITHMETIC = {
    ("MaxPool", "storage_order"): "the layout of the Indices output, which no pattern reads",
}


@lru_cache(maxsize=1)
def _drafts() -> tuple[Draft, ...]:
    return tuple(d for family in patterns.entries().values() for d in family())


def _default(schema, name: str):
    attr = schema.attributes[name]
    proto = attr.default_value
    return helper.get_attribute_value(proto) if proto.name else None


def _same(a, b) -> bool:
    if isinstance(a, bytes):
        a = a.decode()
    if isinstance(b, bytes):
        b = b.decode()
    if isinstance(a, float) or isinstance(b, float):
        return b is not None and a is not None and np.float32(a) == np.float32(b)
    return a == b


def uncovered(drafts) -> list[tuple[str, str]]:
    """(op, attribute) of every float op in the patterns whose schema (at the pattern's opset) has an
    attribute no case sets to a value other than its default, outside NOT_ARITHMETIC."""
    used: dict[str, dict[str, list]] = {}
    versions: dict[str, int] = {}
    for d in drafts:
        for n in d.graph:
            if n.op in operators.QDQ:
                continue
            versions[n.op] = max(versions.get(n.op, 0), d.opset)
            for k, v in n.attrs.items():
                used.setdefault(n.op, {}).setdefault(k, []).append(v)
            used.setdefault(n.op, {})
    missing = []
    for op, attrs in used.items():
        schema = onnx.defs.get_schema(op, versions[op])
        for name in schema.attributes:
            if (op, name) in NOT_ARITHMETIC:
                continue
            default = _default(schema, name)
            if not any(not _same(v, default) for v in attrs.get(name, [])):
                missing.append((op, name))
    return sorted(missing)


def test_every_arithmetic_attribute_of_a_pattern_op_has_a_case():
    """Each float op of the patterns, its schema read from onnx.defs: every attribute is set to
    something other than its default by some case, or is declared as changing no value."""
    assert uncovered(_drafts()) == []


def test_the_attribute_check_sees_a_missing_attribute():
    drafts = [d for d in _drafts() if not any(n.op == "Conv" and "group" in n.attrs for n in d.graph)]
    assert ("Conv", "group") in uncovered(drafts)


def test_the_quantization_operators_attributes_have_pattern_cases():
    """QuantizeLinear's and DequantizeLinear's own attributes inside patterns (axis, block_size,
    output_dtype, saturate): their arithmetic is the single-node corpus's, and the graph carries them."""
    for op in operators.QDQ:
        schema = onnx.defs.get_schema(op, patterns.OPSET)
        seen = {k for d in _drafts() for n in d.graph if n.op == op for k in n.attrs}
        assert set(schema.attributes) <= seen, (op, set(schema.attributes) - seen)


def test_three_thousand_pattern_cases_and_ties_on_both_zero_point_parities():
    drafts = _drafts()
    assert len(drafts) >= 3000
    assert len({d.id for d in drafts}) == len(drafts)
    ties = {}
    for d in drafts:
        if d.family == "ties" and "zero-point-" in d.name:
            ties.setdefault(d.op, set()).add("odd" if "zero-point-odd" in d.name else "even")
    central = {d.op for d in drafts if d.op not in ("FakeQuant", "Requant") and d.family != "dequantized-table"}
    without = sorted(op for op in central if ties.get(op) != {"odd", "even"}
                     and op not in ("Gather", "Split", "Sigmoid", "Softmax", "Squeeze", "Unsqueeze"))
    # the ops above have ties through _relations' names (scale-ratio-…-zero-point-…) or a fixed grid
    assert not without, without


def test_pattern_cases_stay_small_in_bytes():
    """Depth without bulk: no pattern case's inputs pass 40 KB (the longest weight-only MatMul, K = 3,075),
    all of them together 3 MB."""
    sizes = [sum(a.value.nbytes for a in d.inputs if a is not None) for d in _drafts()]
    assert max(sizes) <= 40_000 and sum(sizes) <= 3_000_000


def test_each_new_pattern_of_the_fusing_runtimes_is_there():
    """Fused activations, the residual Add, the weight-only blocked MatMul (16 … 2,048, with tails),
    DQ → Gather, chains of requantisations (semantics.md#qdq-graph)."""
    by = {}
    for d in _drafts():
        by.setdefault((d.op, d.family), []).append(d)
    assert ("Conv", "fused-activation") in by and ("Gemm", "fused-activation") in by
    assert ("Add", "residual-conv") in by and ("Requant", "chain") in by
    assert ("Gather", "dequantized-table") in by
    blocks = {n.attrs["block_size"] for d in by[("MatMul", "blocked-weight")] for n in d.graph if "block_size" in n.attrs}
    assert {16, 2048} <= blocks
    tails = [d for d in by[("MatMul", "blocked-weight")] if "tail" in d.name or d.inputs[0].value.shape[1] % 16]
    assert tails


# -- the oracle's float ops ------------------------------------------------------------------------
def test_row_sums_agrees_with_exact_sum_and_refuses_what_an_order_could_round():
    rng = np.random.default_rng(0)
    terms = (rng.integers(-2**10, 2**10, size=(50, 30)) * 2.0**-7).astype(np.float64)
    s = row_sums(terms)
    assert s.every_order.all()
    want = exact_sum([[Fraction(float(t)) for t in row] for row in terms], "t")
    assert list(s.exact) == want
    big = np.array([[2.0**24, 1.0], [2.0**23, 1.0]])
    assert row_sums(big).every_order.tolist() == [False, True]


def _graph(op: str, x: np.ndarray, attrs: dict, extra=(), ins=()) -> Draft:
    inputs = (Arg("x", "int8", x), Arg("s", "float32", np.float32(2.0**-2), True),
              Arg("z", "int8", np.int8(0), True), *extra)
    nodes = (Node("DequantizeLinear", ("x", "s", "z"), ("f",)), Node(op, ("f", *ins), ("g",), attrs),
             Node("QuantizeLinear", ("g", "s", "z"), ("y",)))
    return Draft(op, 21, "int8-int8", "t", "t", inputs, domain=PATTERN_DOMAIN, graph=nodes)


def test_average_pool_counts_the_stated_padding_only_with_count_include_pad():
    """#qdq-sum-order: padded positions add nothing; the count includes them only when asked."""
    x = np.full((1, 1, 2, 2), 8, np.int8)  # 2.0 everywhere
    base = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    without = evaluate(_graph("AveragePool", x, base)).expected[0]
    with_pad = evaluate(_graph("AveragePool", x, {**base, "count_include_pad": 1})).expected[0]
    assert without.tolist() == [[[[8, 8], [8, 8]]]]
    assert with_pad.tolist() == [[[[4, 4], [4, 4]]]]  # 4 elements of 9 positions: 8 / 9 -> 0.89 -> 4 codes


def test_ceil_mode_adds_positions_and_count_include_pad_there_is_refused():
    assert pool_geometry((1, 1, 6, 6), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1})[5] == [1, 1]
    x = np.ones((1, 1, 6, 6), np.int8)
    with pytest.raises(InvalidModel):
        evaluate(_graph("AveragePool", x, {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1,
                                           "count_include_pad": 1}))


def test_a_padded_strided_grouped_conv_is_the_integer_body_s_windows():
    rng = np.random.default_rng(1)
    x = rng.integers(-8, 8, size=(1, 4, 5, 5)).astype(np.int8)
    w = rng.integers(-8, 8, size=(4, 2, 3, 3)).astype(np.int8)
    attrs = {"kernel_shape": [3, 3], "pads": [1, 0, 0, 1], "strides": [2, 1], "dilations": [1, 2], "group": 2}
    draft = _graph("Conv", x, attrs, (Arg("w", "int8", w, True),), ("fw",))
    nodes = (draft.graph[0], Node("DequantizeLinear", ("w", "s", "z"), ("fw",))) + draft.graph[1:]
    case = evaluate(Draft(**{**draft.__dict__, "graph": nodes}))
    from qconform.oracle.integer import conv_sums

    acc = conv_sums(x, 0, w, 0, attrs) * 2.0**-4  # sums of the dequantized values, exact
    assert case.expected[0].tolist() == np.clip(np.rint(acc / 2.0**-2), -128, 127).astype(int).tolist()


def test_gemm_alpha_beta_are_terms_of_one_sum_and_a_rounding_alpha_is_refused():
    a = np.array([[1, 2], [3, 4]], np.int8)
    b = Arg("w", "int8", np.array([[1, 0], [0, 1]], np.int8), True)
    c = Arg("c", "float32", np.array([1.0, -1.0], np.float32), True)
    draft = _graph("Gemm", a, {"alpha": 0.75, "beta": 1.5}, (b, c), ("fw", "c"))
    nodes = (draft.graph[0], Node("DequantizeLinear", ("w", "s", "z"), ("fw",))) + draft.graph[1:]
    got = evaluate(Draft(**{**draft.__dict__, "graph": nodes})).expected[0]
    want = 0.75 * (a * 0.25) @ np.eye(2) * 0.25 + 1.5 * np.array([1.0, -1.0])
    assert got.tolist() == np.rint(want / 0.25).astype(int).tolist()
    draft = _graph("Gemm", a, {"alpha": 0.1}, (b,), ("fw",))
    with pytest.raises(NotExact):
        evaluate(Draft(**{**draft.__dict__, "graph": (draft.graph[0], nodes[1]) + draft.graph[1:]}))


def test_hardswish_has_the_formula_and_its_function_body():
    """#qdq-hardswish: two readings, the formula rounded once and HardSigmoid then Mul each rounded,
    and they differ in float32 for some inputs."""
    from qconform.oracle.graph import ORACLE

    x = (np.arange(-2048, 2048, dtype=np.float32) * np.float32(0.0371)).astype(np.float32)
    (n1, (once,)), (n2, (body,)) = ORACLE.float_node(Node("HardSwish", ("x",), ("y",)), [x], "t")
    assert (n1, n2) == ("spec", "function-body")
    assert np.any(once != body) and np.all(np.abs(once.astype(np.float64) - body) <= np.abs(once) * 2.0**-22)


def test_resize_refuses_a_coordinate_that_is_not_a_binary_fraction():
    """#qdq-resize: a weight an implementation's float evaluation would round makes no case."""
    x = np.arange(16, dtype=np.int8).reshape(1, 1, 4, 4)
    scales = Arg("sc", "float32", np.array([1, 1, 3, 3], np.float32), True)
    draft = _graph("Resize", x, {"mode": "linear"}, (scales,), ("", "sc"))
    with pytest.raises(InvalidModel):
        evaluate(draft)


def test_split_outputs_are_all_graph_outputs():
    nodes = (Node("DequantizeLinear", ("x", "s", "z"), ("f",)), Node("Split", ("f",), ("a", "b"), {"num_outputs": 2}),
             Node("QuantizeLinear", ("a", "s", "z"), ("ya",)), Node("QuantizeLinear", ("b", "s", "z"), ("yb",)))
    assert graph_outputs(nodes) == ("ya", "yb")
    x = np.arange(8, dtype=np.int8).reshape(2, 4)
    draft = Draft("Split", 21, "int8-int8", "t", "t", (Arg("x", "int8", x), Arg("s", "float32", np.float32(1), True),
                                                        Arg("z", "int8", np.int8(0), True)),
                  domain=PATTERN_DOMAIN, graph=nodes)
    case = evaluate(draft)
    assert case.output_names == ("ya", "yb") and [o.tolist() for o in case.expected] == [[[0, 1, 2, 3]],
                                                                                         [[4, 5, 6, 7]]]

"""What the characterisation sees of a pattern (qconform/diagnosis/probe.py): the Q/DQ node that
writes the output described, found by what it writes, not by its place in the graph."""
from __future__ import annotations

import numpy as np

from qconform import corpus as corpus_mod
from qconform.diagnosis.probe import final_node
from qconform.oracle import evaluate
from qconform.plugin import default_golden


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def _split_cases():
    index = corpus_mod.index(default_golden())
    return list(index.cases_of([r.id for r in index.refs if r.group == "qdq.Split-21"]).values())


def test_each_output_of_a_split_pattern_is_seen_through_its_own_node():
    """A Split pattern writes y0 and y1 through two QuantizeLinear nodes, the last one y1's: the view
    of y0 is the node that writes y0 (its one output is the pattern's y0, bit for bit)."""
    cases = _split_cases()
    checked = 0
    for case in cases[:12]:
        last = case.draft.graph[-1]
        assert case.output_names[0] not in last.outputs  # the case this is about
        for i, name in enumerate(case.output_names):
            node = final_node(case.draft, name)
            assert node is not None and node.op == "QuantizeLinear", case.id
            got = evaluate(node, primary_only=True).readings[0].outputs[0]
            want = case.readings[0].outputs[i]
            assert got.dtype == want.dtype and got.shape == want.shape and _bits(got) == _bits(want), (case.id, name)
            checked += 1
    assert checked >= 2


def test_an_output_no_q_or_dq_node_writes_has_no_view():
    case = _split_cases()[0]
    assert final_node(case.draft, "no-such-output") is None

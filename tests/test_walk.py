"""Every case is a graph (issue 62): a single-node case is a one-node graph, and one walk computes
every case node by node through one registry, in which the quantized ops' version classes and the
patterns' float ops stand side by side; nothing dispatches a float op by its name."""
from __future__ import annotations

import re

import numpy as np
from conftest import REPO

from qconform.case import PATTERN_DOMAIN, Arg, Draft, Node
from qconform.declarations import operators
from qconform.oracle import ORACLES
from qconform.oracle.base import Walk, evaluate, oracle_for
from qconform.oracle.graph import FloatOp

Q, DQ = operators.QDQ


def _single() -> Draft:
    x = Arg("x", "float32", np.asarray([0.5, 1.5, -2.5, 7.0], np.float32))
    s = Arg("y_scale", "float32", np.asarray(1.0, np.float32), initializer=True)
    z = Arg("y_zero_point", "uint8", np.asarray(3, np.uint8), initializer=True)
    return Draft(Q, 21, "float32-uint8", "walk", "single", (x, s, z))


def _pattern() -> Draft:
    args = (Arg("x", "uint8", np.asarray([0, 3, 7, 255], np.uint8)),
            Arg("sx", "float32", np.asarray(0.5, np.float32), initializer=True),
            Arg("zx", "uint8", np.asarray(4, np.uint8), initializer=True),
            Arg("sy", "float32", np.asarray(0.25, np.float32), initializer=True),
            Arg("zy", "uint8", np.asarray(1, np.uint8), initializer=True))
    nodes = (Node(DQ, ("x", "sx", "zx"), ("f",)), Node("Relu", ("f",), ("g",)), Node(Q, ("g", "sy", "zy"), ("y",)))
    return Draft("Relu", 21, "uint8-uint8", "walk", "pattern", args, domain=PATTERN_DOMAIN, graph=nodes)


def test_the_registry_holds_both_kinds_of_op():
    assert isinstance(oracle_for("", "Relu", 21), FloatOp)
    assert not isinstance(oracle_for("", Q, 21), FloatOp)
    kinds = {isinstance(o, FloatOp) for o in ORACLES.values()}
    assert kinds == {True, False}


def test_a_single_node_case_and_a_pattern_are_one_walk(monkeypatch):
    walked: list[tuple[str, ...]] = []
    run_nodes = Walk.run_nodes

    def recording(self, nodes, *args, **kw):
        walked.append(tuple(n.op for n in nodes))
        return run_nodes(self, nodes, *args, **kw)

    monkeypatch.setattr(Walk, "run_nodes", recording)
    single, pattern = evaluate(_single()), evaluate(_pattern())
    assert walked == [(Q,), (DQ, "Relu", Q)]
    assert single.nodes == (Node(Q, ("x", "y_scale", "y_zero_point"), ("y",)),)  # the one-node graph
    assert single.output_names == ("y",) and pattern.output_names == ("y",)
    np.testing.assert_array_equal(single.expected[0], np.asarray([3, 5, 1, 10], np.uint8))  # ties to even
    np.testing.assert_array_equal(pattern.expected[0], np.asarray([1, 1, 7, 255], np.uint8))  # 503 saturates
    assert pattern.clause == "qdq-graph" and single.clause != "qdq-graph"


def test_no_op_is_dispatched_by_its_name():
    """The walk reaches every op through the registry: no getattr on an ``op_<Name>`` and no
    string-keyed hook between the registry and the graph remain in the oracle."""
    for f in (REPO / "qconform" / "oracle").glob("*.py"):
        text = f.read_text(encoding="utf-8")
        assert not re.search(r"getattr\([^)]*op_", text), f.name
        assert "GRAPHS" not in text, f.name


def test_a_pattern_id_names_its_nodes():
    """Every pattern case's id names its pattern as ``pattern_name`` reads it off the nodes (the
    deviation runner and a user's model groups name their graphs the same way)."""
    import json

    from qconform.oracle.graph import pattern_name

    seen = 0
    for f in sorted((REPO / "qconform" / "golden" / "index").glob("qdq.*.jsonl")):
        for line in f.open(encoding="utf-8"):
            c = json.loads(line)
            nodes = tuple(Node(n["op"], tuple(n["in"]), tuple(n["out"]), n.get("attrs", {}), n.get("domain", ""))
                          for n in c["graph"])
            assert pattern_name(nodes) == c["id"].split("/")[0][len(PATTERN_DOMAIN) + 1:].rsplit("-", 1)[0], c["id"]
            seen += 1
    assert seen

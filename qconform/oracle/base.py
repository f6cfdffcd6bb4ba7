"""What every op oracle shares: the result type, the one registry, the walk, and ``evaluate`` (draft -> case).

Each op version is one small class over a common body, registered explicitly in ``ORACLES``
(as onnx's reference/ops does with QuantizeLinear_10/_19/_21...); the float ops inside the QDQ
patterns are registered there too (``FloatOp``, ``qconform/oracle/graph.py``). Every case is a graph:
a single-node case is a one-node graph (``case.one_node``), and ``evaluate`` walks the nodes of
either kind (``Walk``), each through its registered oracle. Readings: an oracle computes the
outputs under every permitted reading of the spec (qconform/docs/semantics.md#principles); readings that give
identical bits collapse, so a case carries more than one only where the readings really differ;
the readings of several nodes combine (every combination, identical results collapsed).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import Any, Callable, ClassVar, Mapping, Sequence

import numpy as np

from qconform import dtypes
from qconform.case import Arg, Case, Draft, Node, Reading, one_node
from qconform.oracle.granularity import InvalidModel
from qconform.declarations import operators
from qconform.oracle.steps import Steps


@dataclass
class Evaluation:
    """Per-reading outputs, each with the elements it leaves undefined, plus the don't-care elements
    common to every reading (``dont_care``: e.g. the dynamic quantizer's outputs on NaN input)."""

    readings: list[Reading] = field(default_factory=list)
    dont_care: list[np.ndarray | None] | None = None
    clause: str = ""
    #: Only the first (primary) reading is wanted: sweeps of 2^24 inputs a chunk and cpu-ref.
    primary_only: bool = False
    #: Non-empty: the model is invalid by the text although the outputs can be computed (why, in a
    #: sentence). The case is information, never pass or fail.
    information: str = ""
    #: The name a single remaining reading gets: "spec", unless the case's result rests on a reading
    #: the text does not state (qconform/docs/semantics.md#dql-zero-input).
    sole: str = "spec"

    def add(self, name: str, outputs: tuple[np.ndarray, ...], dont_care: Sequence[np.ndarray | None] = ()) -> None:
        """A reading's outputs and, per output, the elements it alone leaves undefined (NaN quantized
        to an integer under this reading's arithmetic)."""
        if not self.complete:
            self.readings.append(Reading(name, tuple(outputs), tuple(dont_care)))

    @property
    def complete(self) -> bool:
        """True once nothing more is wanted: oracles stop computing further readings then."""
        return self.primary_only and bool(self.readings)

    def masks(self, reading: Reading) -> tuple[np.ndarray | None, ...]:
        """A reading's don't-care elements, per output: its own and those of every reading; None
        where there are none."""
        common = self.dont_care or [None] * len(reading.outputs)
        return tuple(union(own, shared) for own, shared in zip(reading.dont_care, common))


def union(*masks: np.ndarray | None) -> np.ndarray | None:
    """The elements any of ``masks`` marks; None where none is marked (a mask of no element is no mask)."""
    marked = [np.asarray(m, bool) for m in masks if m is not None and np.any(m)]
    if not marked:
        return None
    return np.logical_or.reduce(np.broadcast_arrays(*marked)) if len(marked) > 1 else marked[0].copy()


def _same_bits(a: Reading, b: Reading) -> bool:
    """Whether two readings are one result under the comparison rule (``ElemType.differs``): the
    same don't-care elements and the same bits elsewhere. A case carries a second reading only where
    a runner could tell the two apart, or where one leaves undefined what the other defines."""
    for x, y, mx, my in zip(a.outputs, b.outputs, a.dont_care, b.dont_care):
        if x.dtype != y.dtype or x.shape != y.shape:
            return False
        if not np.array_equal(np.zeros(x.shape, bool) if mx is None else mx,
                              np.zeros(y.shape, bool) if my is None else my):
            return False
        if dtypes.get(x.dtype).differs(x, y, mx).any():
            return False
    return True


class OpOracle(Steps):
    """Base of every op-version oracle: its arithmetic goes through the steps of ``Steps``."""

    domain: ClassVar[str] = ""
    op: ClassVar[str]
    since: ClassVar[int]
    output_names: ClassVar[tuple[str, ...]]

    def attr(self, attrs: Mapping[str, Any], name: str, default: Any) -> Any:
        return attrs.get(name, default)

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        raise NotImplementedError

    def on_node(self, walk: "Walk", node: Node, sub: Callable[[], Draft], ins: list[np.ndarray | None], where: str,
                primary_only: bool) -> tuple[list[NodeResult], Evaluation]:
        """This op's node inside a walk: its own draft (``sub()``, ``node_draft``) evaluated by this
        version class, or by the oracle the walk's ``node_oracle`` step names (a deviation model's)."""
        d = sub()
        ev = settle(walk.node_oracle(d) or self, d, primary_only)
        return [(r.name, list(r.outputs), list(r.dont_care)) for r in ev.readings], ev


#: One reading of one node: (its name, its outputs, each output's don't-care mask or None).
NodeResult = tuple[str, list[np.ndarray], list[np.ndarray | None]]
ORACLES: dict[tuple[str, str, int], OpOracle] = {}


def register(*oracles: OpOracle) -> None:
    for o in oracles:
        key = (o.domain, o.op, o.since)
        if key in ORACLES:
            raise KeyError(f"oracle for {key} registered twice")
        ORACLES[key] = o


def oracle_for(domain: str, op: str, opset: int) -> OpOracle:
    """The oracle of the version of ``op`` that ``opset`` runs (``schemas.since_version``); an opset
    or a version the schemas do not know raises LookupError, never an older version's class. A float
    op of the patterns (no declaration names it): its newest registered class at or below ``opset``."""
    from qconform import schemas

    if operators.find(domain, op) is None:
        versions = [v for d, o, v in ORACLES if (d, o) == (domain, op) and v <= opset]
        if not versions:
            raise LookupError(f"{domain or 'ai.onnx'} {op} has no version in scope at opset {opset}, nor a float "
                              "op of the patterns")
        return ORACLES[(domain, op, max(versions))]
    key = (domain, op, schemas.since_version(domain, op, opset))
    if key not in ORACLES:
        raise LookupError(f"no oracle for {domain or 'ai.onnx'} {op}-{key[2]}")
    return ORACLES[key]


def output_type(draft: Draft) -> str:
    """The type of a QuantizeLinear or DequantizeLinear draft's output (either domain), by its
    version class's own ``output_type`` rule; only the draft's attributes and input types are read.
    The two classes' rules take different arguments (the zero point; the scale's type): this is the
    one place that knows which. Raises LookupError for an unknown version, InvalidModel where the
    rule rejects the node."""
    oracle = oracle_for(draft.domain, draft.op, draft.opset)
    _, scale, zero_point = (list(draft.inputs) + [None, None, None])[:3]
    if draft.op == "DequantizeLinear":
        return oracle.output_type(draft, scale.type)
    return oracle.output_type(draft, zero_point)


def settle(oracle: OpOracle, draft: Draft, primary_only: bool = False) -> Evaluation:
    """One node's draft evaluated by ``oracle``: its readings with their don't-care masks (their own
    and the common ones), readings one comparison cannot tell apart collapsed, a single one named
    ``sole`` (with ``primary_only``: the first alone, under its own name)."""
    with np.errstate(all="ignore"):  # IEEE specials (x/0, Inf-Inf) are the point, not accidents
        ev = oracle.evaluate(draft, primary_only)
    unique: list[Reading] = []
    for r in ev.readings:
        r = Reading(r.name, r.outputs, ev.masks(r))
        if not any(_same_bits(r, u) for u in unique):
            unique.append(r)
    if primary_only:
        unique = unique[:1]
    elif len(unique) == 1:
        unique = [replace(unique[0], name=ev.sole)]
    ev.readings, ev.dont_care = unique, None
    return ev


def node_draft(node: Node, opset: int, ins: list[np.ndarray | None], types: Mapping[str, str],
               given: Mapping[str, Arg] | None = None, like: Draft | None = None) -> Draft:
    """One node of a graph as a single-node draft on the tensors that reach it (what its op's own
    oracle, or a single-node deviation model, computes it from): a graph input or initializer as the
    case gives it (``given``), a tensor an earlier node computed as that value; the id of the case
    it belongs to (``like``). A one-node graph's node draft is the case's own draft."""
    given = given or {}
    args = tuple(None if v is None else given.get(name) or Arg(name, types[name], v, initializer=False)
                 for name, v in zip(node.inputs, ins))
    while args and args[-1] is None:
        args = args[:-1]
    return Draft(op=node.op, opset=opset, types=like.types if like else "", family=like.family if like else "",
                 name=like.name if like else "", inputs=args, attrs=dict(node.attrs), domain=node.domain)


def nodes_of(draft: Draft) -> tuple[Node, ...]:
    """Every case is a graph: a pattern's nodes, or a single-node draft's one node, its outputs named
    by its op version's oracle (LookupError: no oracle for that version, or an op no declaration
    names: a float op stands only inside a pattern's graph)."""
    if draft.graph:
        return draft.graph
    if operators.find(draft.domain, draft.op) is None:
        raise LookupError(f"{draft.domain or 'ai.onnx'} {draft.op} is not an operator in scope: a float op is "
                          "a node of a pattern's graph, never a case of its own")
    return (one_node(draft, oracle_for(draft.domain, draft.op, draft.opset).output_names),)


def graph_outputs(nodes: tuple[Node, ...]) -> tuple[str, ...]:
    """The graph's outputs: every node output no later node reads (the last node's alone in a
    chain; each QuantizeLinear's after a Split; every output of a single node)."""
    read = {i for n in nodes for i in n.inputs}
    return tuple(o for n in nodes for o in n.outputs if o and o not in read)


#: (reading name parts, tensor values by name, don't-care masks by name)
State = tuple[tuple[str, ...], dict[str, np.ndarray], dict[str, np.ndarray]]
#: The clause of a graph of several nodes: the graph rule (qconform/docs/semantics.md#qdq-graph).
GRAPH_CLAUSE = "qdq-graph"


class Walk:
    """A graph, node by node, every node through its oracle in ``ORACLES`` ("The values of node
    outputs are computed by the node's operator", IR.md). Three steps a deviation model overrides:
    ``fused`` (the whole graph as one kernel), ``node_oracle`` (a quantized node's oracle),
    ``float_oracle`` (a float node's)."""

    def fused(self, draft: Draft, inputs: Mapping[str, np.ndarray]) -> list[tuple[str, list[np.ndarray]]] | None:
        """The pattern computed as one fused kernel would, per reading (None: node by node, the spec)."""
        return None

    def node_oracle(self, sub: Draft) -> OpOracle | None:
        """The oracle a node of an op the oracle has is computed by (None: its op version's own): the
        step a deviation model replaces to run a single-node deviation inside the graph."""
        return None

    def float_oracle(self, node: Node) -> OpOracle | None:
        """The oracle a float node is computed by (None: its registered float op)."""
        return None

    def float_node(self, node: Node, ins: list[np.ndarray | None], where: str) -> list[tuple[str, list[np.ndarray]]]:
        """A float node's readings on ``ins`` (the registered float op, or this walk's replacement)."""
        try:
            op = self.float_oracle(node) or oracle_for(node.domain, node.op, onnx_newest())
        except LookupError:
            raise InvalidModel(f"{where}: no float semantics for {node.op} in a pattern") from None
        return op.values(node, ins, where)

    def run_nodes(self, nodes: tuple[Node, ...], opsets: Mapping[str, int], inputs: Mapping[str, np.ndarray],
                  where: str, primary_only: bool = False, like: Draft | None = None,
                  notes: list[Evaluation] | None = None) -> list[State]:
        """Every reading's tensors: (reading name parts, values by name, don't-care masks by name).
        ``like``: the case the nodes are (its inputs as it gives them); ``notes``: each node's
        evaluation (clause, information, sole) on the first path, appended."""
        given = {a.name: a for a in like.inputs if a is not None} if like is not None else {}
        types = {k: given[k].type if k in given else dtypes.get(v.dtype).name for k, v in inputs.items()}
        states: list[State] = [((), dict(inputs), {})]
        for node in nodes:
            opset = opsets.get(node.domain, opsets.get("", 0))
            try:
                oracle = oracle_for(node.domain, node.op, opset)
            except LookupError:
                raise InvalidModel(f"{where}: {node.op}: no float semantics for {node.op} in a pattern") from None
            nxt: list[State] = []
            for k, (parts, values, masks) in enumerate(states):
                ins = [values[i] if i else None for i in node.inputs]
                sub = functools.partial(node_draft, node, opset, ins, types, given, like)
                results, ev = oracle.on_node(self, node, sub, ins, where, primary_only)
                if ev.information and len(nodes) > 1:
                    raise InvalidModel(f"{where}: node {node.op}: {ev.information}")
                if notes is not None and k == 0:
                    notes.append(ev)
                if primary_only:
                    results = results[:1]
                for name, o, m in results:
                    label = () if name == "spec" else tuple(name.split("+"))
                    nv, nm = dict(values), dict(masks)
                    for out_name, arr, mask in zip(node.outputs, o, m):
                        nv[out_name] = arr
                        types[out_name] = "bool" if arr.dtype == np.bool_ else dtypes.get(arr.dtype).name
                        if mask is not None and np.any(mask):
                            nm[out_name] = mask
                    nxt.append((parts + label, nv, nm))
            states = nxt
        return states

    def walk(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        """Every reading's graph outputs, each with the don't-care masks its own path through the
        nodes gave them. A one-node graph is its node's evaluation (its clause, its information, the
        name of a sole reading); a graph of several rests on the graph rule, and a node whose model
        the text makes invalid refuses the graph (InvalidModel)."""
        nodes = nodes_of(draft)
        inputs = {a.name: a.value for a in draft.inputs if a is not None}
        outs = graph_outputs(nodes)
        fused = self.fused(draft, inputs)
        if fused is not None:
            readings = [Reading(name, tuple(o)) for name, o in fused][:1 if primary_only else None]
            return Evaluation(readings=readings, clause=GRAPH_CLAUSE, primary_only=primary_only)
        notes: list[Evaluation] = []
        with np.errstate(all="ignore"):
            states = self.run_nodes(nodes, {"": draft.opset, draft.domain: draft.opset}, inputs, draft.id,
                                    primary_only, draft, notes)
        readings = [Reading("+".join(parts) or "spec", tuple(values[o] for o in outs), tuple(masks.get(o) for o in outs))
                    for parts, values, masks in states]
        one = notes[0] if len(nodes) == 1 else Evaluation(clause=GRAPH_CLAUSE)
        return Evaluation(readings=readings, clause=one.clause, primary_only=primary_only,
                          information=one.information, sole=one.sole)

    def run(self, draft: Draft, primary_only: bool = False) -> list[Reading]:
        """Every reading's graph outputs (``walk``'s readings)."""
        return self.walk(draft, primary_only).readings


def onnx_newest() -> int:
    """The newest ai.onnx opset the schemas know: a float op looked up without a model's opset."""
    import onnx.defs

    return onnx.defs.onnx_opset_version()


#: The walk every case is evaluated by (a deviation model's is a subclass: ``diagnosis/models``).
WALK = Walk()


def evaluate(draft: Draft, primary_only: bool = False) -> Case:
    """Compute a draft's expected outputs under every permitted reading (or, with
    ``primary_only``, the first reading alone, under its own name): its nodes walked (a single-node
    draft is a one-node graph). Raises InvalidModel; LookupError for an op version without an oracle."""
    nodes = nodes_of(draft)
    ev = settle(_Walked(WALK), draft, primary_only)
    return Case(draft, graph_outputs(nodes), tuple(ev.readings), draft.clause or ev.clause, ev.information)


class _Walked(OpOracle):
    """A walk as an oracle (``settle`` takes one)."""

    def __init__(self, walk: Walk) -> None:
        self._walk = walk

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        return self._walk.walk(draft, primary_only)


__all__ = ["Evaluation", "GRAPH_CLAUSE", "InvalidModel", "NodeResult", "OpOracle", "ORACLES", "State", "WALK", "Walk",
           "evaluate", "graph_outputs", "node_draft", "nodes_of", "oracle_for", "output_type", "register", "settle",
           "union"]

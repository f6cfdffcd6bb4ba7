"""onnxruntime's com.microsoft ops whose text is ``quantize(f(dequantize(x)))`` — QLinearSigmoid,
QLinearLeakyRelu, QLinearAveragePool, QLinearGlobalAveragePool, QLinearSoftmax, QLinearConcat —
computed as that graph by the QDQ pattern oracle (``oracle/graph.py``), nothing of their arithmetic
written here (qconform/docs/semantics.md#ms-qlinear-composed):

- the op's oracle is itself a ``GraphOracle``: DequantizeLinear and QuantizeLinear by their own version classes at the ai.onnx opset the model
  imports beside com.microsoft (21), with their readings;
- the float function by the patterns' own float op (Sigmoid, LeakyRelu, Softmax, AveragePool,
  GlobalAveragePool, Concat): its value, its accuracy (#qdq-sigmoid, #qdq-softmax) and its sums
  (#qdq-sum-order: the pools' windows and counts) are decided once, there;
- what the contrib ops add is only layout, expressed as graph nodes: ``channels_last`` (a Transpose
  to N × C × D1… and back) and QLinearSoftmax's ``opset`` ≤ 12 form (Reshape to N × D, Softmax along
  the last axis, Reshape back: "the dimension coerced to NxD Matrix").
"""
from __future__ import annotations

import numpy as np

from qconform import dtypes
from qconform.case import MS_DOMAIN, PATTERN_DOMAIN, Arg, Draft, Node
from qconform.declarations import operators
from qconform.oracle.base import Evaluation, OpOracle
from qconform.oracle.graph import GraphOracle
from qconform.oracle.granularity import InvalidModel

Q, DQ = operators.QDQ


def _zero_point(arg: Arg | None, like: Arg, name: str) -> Arg:
    """An absent zero point: 0 of the data's type ("Default value is 0 if it's not specified")."""
    if arg is not None:
        return arg
    return Arg(name, like.type, np.zeros((), dtypes.get(like.type).dtype), initializer=True)


def run_graph(graph: GraphOracle, draft: Draft, args: tuple[Arg, ...], nodes: tuple[Node, ...],
              primary_only: bool, clause: str) -> Evaluation:
    """The readings of ``nodes`` on ``args`` by the graph oracle, with their don't-care masks."""
    g = Draft(op=draft.op, opset=operators.MS_COMPANION_OPSET, types=draft.types, family=draft.family, name=draft.name,
              inputs=args, attrs={}, domain=PATTERN_DOMAIN, graph=nodes)
    with np.errstate(all="ignore"):
        readings = graph.run(g, primary_only)
    return Evaluation(readings=readings, clause=clause, primary_only=primary_only)


def channels_last(op: str, attrs, rank: int, node_attrs: dict) -> tuple[list[Node], list[Arg]]:
    """The float op between two Transposes when ``channels_last`` = 1 (N × D1 … × C in, and out)."""
    if not attrs.get("channels_last", 0):
        return [Node(op, ("xf",), ("yf",), node_attrs)], []
    first = [0, rank - 1] + list(range(1, rank - 1))
    back = [int(i) for i in np.argsort(first)]
    return [Node("Transpose", ("xf",), ("xc",), {"perm": first}), Node(op, ("xc",), ("yc",), node_attrs),
            Node("Transpose", ("yc",), ("yf",), {"perm": back})], []


def coerced_softmax(attrs, shape: tuple[int, ...]) -> tuple[list[Node], list[Arg]]:
    """Softmax at ``opset`` ≥ 13 along ``axis``; at ≤ 12 over the input coerced to N × D at ``axis``."""
    axis = int(attrs.get("axis", -1))
    if not -len(shape) <= axis < len(shape):
        raise InvalidModel(f"axis {axis} of a rank-{len(shape)} input")
    if int(attrs["opset"]) >= 13:
        return [Node("Softmax", ("xf",), ("yf",), {"axis": axis})], []
    axis %= len(shape)
    lead = int(np.prod(shape[:axis], dtype=np.int64))
    flat = Arg("softmax_nxd", "int64", np.asarray([lead, -1], np.int64), initializer=True)
    back = Arg("softmax_shape", "int64", np.asarray(shape, np.int64), initializer=True)
    return [Node("Reshape", ("xf", flat.name), ("x2",)), Node("Softmax", ("x2",), ("y2",), {"axis": 1}),
            Node("Reshape", ("y2", back.name), ("yf",))], [flat, back]


class Composed(GraphOracle, OpOracle):
    """quantize(f(dequantize(x))) as a graph: the op's float function is the node ``float_op``. The op
    is its own graph oracle, so a deviation model replaces one of the graph's steps (a float op, the
    oracle of its QuantizeLinear node, ``fused``) and the graph runs it."""

    domain = MS_DOMAIN
    since = 1
    output_names = ("Y",)
    has_axis = False
    float_op: str
    #: The attributes of the op that are the float function's (the rest are not passed on).
    float_attrs: tuple[str, ...] = ()
    #: The semantics.md anchor of the op's decisions.
    clause: str = "ms-qlinear-composed"

    def float_nodes(self, draft: Draft, x: Arg) -> tuple[list[Node], list[Arg]]:
        """The nodes from the dequantized ``xf`` to the float result ``yf``, and their initializers."""
        node_attrs = {k: v for k, v in draft.attrs.items() if k in self.float_attrs}
        return channels_last(self.float_op, draft.attrs, x.value.ndim, node_attrs)

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        x, xs, xz, ys, yz = (list(draft.inputs) + [None] * 5)[:5]
        if x is None or xs is None or ys is None:
            raise InvalidModel(f"{self.op} needs X and the scales of X and Y")
        for arg in (xs, xz, ys, yz):
            if arg is not None and not (arg.value.size == 1 and arg.value.ndim <= 1):
                raise InvalidModel(f"{arg.name} of shape {arg.value.shape}: a scalar (per tensor) only")
        args = [x, xs, _zero_point(xz, x, "x_zp"), ys, _zero_point(yz, x, "y_zp")]
        middle, extra = self.float_nodes(draft, x)
        nodes = (Node(DQ, (args[0].name, args[1].name, args[2].name), ("xf",)), *middle,
                 Node(Q, ("yf", args[3].name, args[4].name), ("Y",)))
        return run_graph(self, draft, tuple(args + extra), nodes, primary_only, self.clause)


class SoftmaxComposed(Composed):
    """QLinearSoftmax: ``opset`` is required and picks the form of ``axis``."""

    def float_nodes(self, draft: Draft, x: Arg) -> tuple[list[Node], list[Arg]]:
        if "opset" not in draft.attrs:
            raise InvalidModel("QLinearSoftmax's opset attribute is required")
        return coerced_softmax(draft.attrs, x.value.shape)


class ConcatComposed(Composed):
    """QLinearConcat: each input's triple (tensor, scale, zero point) dequantized, the float tensors
    concatenated along ``axis``, the result quantized with Y's (#ms-qlinear-concat)."""

    clause = "ms-qlinear-concat"

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        ys, yz, *rest = draft.inputs
        if ys is None or yz is None or not rest or len(rest) % 3 or any(a is None for a in rest):
            raise InvalidModel("QLinearConcat takes Y_scale, Y_zero_point, then (tensor, scale, zero point) triples")
        if "axis" not in draft.attrs:
            raise InvalidModel("QLinearConcat's axis attribute is required")
        triples = [rest[i:i + 3] for i in range(0, len(rest), 3)]
        nodes = [Node(DQ, tuple(a.name for a in t), (f"f{i}",)) for i, t in enumerate(triples)]
        nodes.append(Node("Concat", tuple(f"f{i}" for i in range(len(triples))), ("yf",),
                          {"axis": draft.attrs["axis"]}))
        nodes.append(Node(Q, ("yf", ys.name, yz.name), ("Y",)))
        return run_graph(self, draft, tuple(draft.inputs), tuple(nodes), primary_only, self.clause)


__all__ = ["Composed", "ConcatComposed", "SoftmaxComposed", "channels_last", "coerced_softmax",
           "run_graph"]

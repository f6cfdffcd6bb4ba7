"""cpu-ref: the project's own numpy kernels (the oracle), reading the nodes from the model.

Every model is a graph to it, as every case is to the oracle: its nodes walked by the oracle's walk
(``oracle.base.Walk``), each through the one registry, on the model's initializers and the fed
inputs in their declared types; a single node is a one-node graph. It returns the reading the
latest spec text states (a case's first reading), so it passes the strict profile too. It never
looks at a case's goldens: it sees only the model and the inputs."""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

import qconform
from qconform import dtypes
from qconform.case import Arg, Draft
from qconform.declarations import operators
from qconform.oracle import InvalidModel, oracle_for
from qconform.runner import BaseRunner, Inputs, Outputs, Prepared, Unsupported


def draft_from_model(model: onnx.ModelProto, feeds: Inputs) -> Draft:
    """The single node of ``model`` with its initializers and the fed inputs, as a Draft."""
    if len(model.graph.node) != 1:
        raise Unsupported("single-node models only")
    node = model.graph.node[0]
    opset = next(o.version for o in model.opset_import if o.domain == node.domain)
    inits = {t.name: (dtypes.get(t.data_type).name, numpy_helper.to_array(t)) for t in model.graph.initializer}
    graph_types = {i.name: dtypes.get(i.type.tensor_type.elem_type).name for i in model.graph.input}
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    args: list[Arg | None] = []
    for name in node.input:
        if not name:
            args.append(None)
        elif name in inits:
            args.append(Arg(name, inits[name][0], inits[name][1], initializer=True))
        else:
            args.append(Arg(name, graph_types[name], np.asarray(feeds[name])))
    while args and args[-1] is None:
        args.pop()
    return Draft(node.op_type, opset, "", "", "", tuple(args), attrs, domain=node.domain)


def _attr(a: onnx.AttributeProto):
    v = helper.get_attribute_value(a)
    return v.decode() if isinstance(v, bytes) else v


def _graph(model: onnx.ModelProto, feeds: Inputs):
    """A model of several nodes: its nodes, every input value by name (initializers and feeds), and
    the initializers' names."""
    from qconform.case import Node

    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    graph_types = {i.name: dtypes.get(i.type.tensor_type.elem_type) for i in model.graph.input}
    values = {**inits, **{n: np.asarray(v, graph_types[n].dtype) for n, v in feeds.items()}}
    values = {k: np.asarray(v, dtypes.get(v.dtype).dtype) for k, v in values.items()}
    nodes = tuple(Node(n.op_type, tuple(n.input), tuple(n.output), {a.name: _attr(a) for a in n.attribute}, n.domain)
                  for n in model.graph.node)
    return nodes, values, set(inits)


def pattern_draft_from_model(model: onnx.ModelProto, feeds: Inputs) -> Draft:
    """A QDQ pattern's model with its inputs, as a graph Draft (what the deviation models read)."""
    from qconform.case import PATTERN_DOMAIN
    from qconform.oracle.graph import pattern_name

    nodes, values, inits = _graph(model, feeds)
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    args = tuple(Arg(k, dtypes.get(v.dtype).name, v, initializer=k in inits) for k, v in values.items())
    return Draft(pattern_name(nodes), opset, "", "", "", args, {}, domain=PATTERN_DOMAIN, graph=nodes)


def model_args(model: onnx.ModelProto, feeds: Inputs) -> tuple[Arg, ...]:
    """Every initializer and fed input of ``model`` as an Arg of its declared type."""
    inits = tuple(Arg(t.name, dtypes.get(t.data_type).name, numpy_helper.to_array(t), initializer=True)
                  for t in model.graph.initializer)
    names = {a.name for a in inits}
    fed = tuple(Arg(i.name, dtypes.get(i.type.tensor_type.elem_type).name,
                    np.asarray(feeds[i.name], dtypes.get(i.type.tensor_type.elem_type).dtype))
                for i in model.graph.input if i.name not in names)
    return inits + fed


def _walk_outputs(model: onnx.ModelProto, feeds: Inputs) -> Outputs:
    """The model's outputs, node by node through the oracle's walk (its first reading): a single
    node, a QDQ pattern or a packed model alike."""
    from qconform.case import Node
    from qconform.oracle.graph import ORACLE

    nodes = tuple(Node(n.op_type, tuple(n.input), tuple(n.output), {a.name: _attr(a) for a in n.attribute}, n.domain)
                  for n in model.graph.node)
    args = model_args(model, feeds)
    like = Draft("", 0, "", "", "", args)
    opsets = {o.domain: o.version for o in model.opset_import}
    try:
        with np.errstate(all="ignore"):
            states = ORACLE.run_nodes(nodes, opsets, {a.name: a.value for a in args}, model.graph.name,
                                      primary_only=True, like=like)
    except InvalidModel as exc:
        raise ValueError(f"invalid model: {exc}") from None
    return [np.array(states[0][1][o.name], copy=True) for o in model.graph.output]


def require_oracles(model: onnx.ModelProto, who: str) -> None:
    """Unsupported unless the oracle's registry has every node's op at the model's opset (an op
    version in scope, or a float op of the patterns)."""
    opsets = {o.domain: o.version for o in model.opset_import}
    for node in model.graph.node:
        try:
            oracle_for(node.domain, node.op_type, opsets.get(node.domain, opsets.get("", 0)))
        except LookupError as exc:
            raise Unsupported(f"{who}: {exc}") from None


def require_oracle_node(model: onnx.ModelProto, who: str) -> None:
    """Unsupported unless ``model`` is one node of an op version the oracle has (cpu-ref and the
    deviation runner both run the oracle on the node)."""
    if len(model.graph.node) != 1:
        raise Unsupported(f"{who} runs single-node models only")
    node = model.graph.node[0]
    if operators.find(node.domain, node.op_type) is None:
        raise Unsupported(f"{who} runs the declared operators' single-node models; {node.op_type} is not one")
    opset = next(o.version for o in model.opset_import if o.domain == node.domain)
    try:
        oracle_for(node.domain, node.op_type, opset)
    except LookupError as exc:
        raise Unsupported(str(exc)) from None


class CpuRefRunner(BaseRunner):
    name = "cpu-ref"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "version": qconform.__version__, "device": "cpu",
                "options": {}, "implementation": "qconform.oracle (numpy, exact arithmetic)"}

    def prepare(self, model: onnx.ModelProto) -> Prepared:
        require_oracles(model, "cpu-ref")
        return lambda feeds: _walk_outputs(model, feeds)

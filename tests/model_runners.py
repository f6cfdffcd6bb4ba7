"""A runner for the whole-model tests: onnxruntime itself, with one node's output planted wrong.

``PlantedRunner(node=NAME[,NAME...])`` runs every model on onnxruntime's CPU EP; in a model holding a
node named NAME (the user's model run whole: a group's own case names its nodes ``n<i>_<op>``, so it
runs untouched) that node's first output is recomputed as code + 1 (wrapping at the type's end) by
nodes inserted into the model right after it: the deviation propagates through the rest of the model
as a kernel bug in that node would. No mock: every output comes from onnxruntime.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from qconform.runner import BaseRunner, Prepared, resolve


class PlantedRunner(BaseRunner):
    name = "planted-onnxruntime"

    def __init__(self, node: str = "", optimize: str = "0") -> None:
        if not node:
            raise TypeError("node=NAME: the node whose output is planted wrong")
        self.nodes = [n for n in node.split(",") if n]
        self.inner = resolve("onnxruntime", {"optimize": optimize})

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "name": self.name, "planted": f"{','.join(self.nodes)}: code + 1"}

    def prepare(self, model: onnx.ModelProto) -> Prepared:
        for node in self.nodes:
            model = planted(model, node)
        return self.inner.prepare(model)


def _elem_type(model: onnx.ModelProto, name: str) -> int:
    for vi in [*model.graph.output, *model.graph.value_info]:
        if vi.name == name and vi.type.tensor_type.elem_type:
            return vi.type.tensor_type.elem_type
    return TensorProto.UINT8


def planted(model: onnx.ModelProto, node_name: str) -> onnx.ModelProto:
    """``model`` with ``node_name``'s first output replaced by (output + 1) in its own type."""
    at = next((i for i, n in enumerate(model.graph.node) if n.name == node_name), None)
    if at is None:
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    target = g.node[at].output[0]
    raw = f"{target}__planted_raw"
    g.node[at].output[0] = raw
    elem = _elem_type(model, target)
    g.initializer.append(numpy_helper.from_array(np.array(1, np.int32), f"{target}__planted_one"))
    added = [helper.make_node("Cast", [raw], [f"{raw}_i32"], to=TensorProto.INT32, name=f"{node_name}__planted_cast"),
             helper.make_node("Add", [f"{raw}_i32", f"{target}__planted_one"], [f"{raw}_plus"],
                              name=f"{node_name}__planted_add"),
             helper.make_node("Cast", [f"{raw}_plus"], [target], to=elem, name=f"{node_name}__planted_back")]
    nodes = list(g.node)
    del g.node[:]
    g.node.extend(nodes[:at + 1] + added + nodes[at + 1:])
    return out

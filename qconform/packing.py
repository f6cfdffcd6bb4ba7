"""Packing: many cases' models as independent parts of one model -- one session, one compile, one
round trip -- each part's outputs judged as its own case.

A runtime pays most of its per-case cost creating a session (onnxruntime), compiling (IREE, TVM), or
crossing a network (a device worker); a conformance case's node does almost no work. So the engine
(``Pipeline.judge_many``) may put the cases of one batch that share a *pack key* -- the same opset
imports and IR version, the same operators in the same order, the same input and output element
types: one op version and type signature -- side by side in one graph, every name of case ``i``
prefixed ``c<i>_`` so the parts share nothing, and split the outputs back. What it never does is let
a packed run decide anything but a pass: a packed model that errors (or is refused, crashes, hangs),
and every case whose packed outputs deviate, runs again alone, so a failure is always its own
single-node model's and its reproducer is the single case.

Packing is only used where it was measured to give the same outputs as single runs for that runtime,
version and platform (``qconform facts packing``, kept as a ``[[packing]]`` entry of the runtime's
facts file): a runtime could in principle treat a node differently in a larger graph.
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import onnx

#: The most cases in one packed model (a pool batch holds 64 at most by default).
MAX_PACK = 64
#: The fewest: a smaller part of a refused pack runs alone.
MIN_PACK = 2


def groups(cases: Sequence[Any]) -> list[list[tuple[int, onnx.ModelProto]]]:
    """The cases that may be packed together, as ``(position, model)`` lists in order, one per pack
    key. Never packed: an information case (a model the text makes invalid), a case whose model
    cannot be built (its error is its own), a model ``key`` keeps alone."""
    from qconform.model import build_model

    by_key: dict[tuple, list[tuple[int, onnx.ModelProto]]] = {}
    for i, case in enumerate(cases):
        if case.information:
            continue
        try:
            model = build_model(case, check=False)
        except Exception:  # noqa: BLE001 - judged alone, where the failure becomes its verdict
            continue
        k = key(model)
        if k is not None:
            by_key.setdefault(k, []).append((i, model))
    return list(by_key.values())


def named_parts(message: str, n: int) -> set[int]:
    """The parts of an ``n``-part pack a runtime's message names (its nodes are ``c<i>_...``)."""
    return {int(m) for m in re.findall(r"\bc(\d+)_", message) if int(m) < n}


def key(model: onnx.ModelProto) -> tuple | None:
    """What models must share to be packed together (None: this one is never packed): the opset
    imports and IR version, the operators in order with their domains, and every graph input's and
    output's element type. Models with functions, sparse initializers or subgraphs stay alone."""
    g = model.graph
    if model.functions or g.sparse_initializer or any(
            a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for n in g.node for a in n.attribute):
        return None
    return (model.ir_version, tuple(sorted((o.domain, o.version) for o in model.opset_import)),
            tuple((n.domain, n.op_type) for n in g.node),
            tuple(v.type.tensor_type.elem_type for v in g.input),
            tuple(t.data_type for t in g.initializer),
            tuple(v.type.tensor_type.elem_type for v in g.output))


def _renamed(names: Sequence[str], prefix: str) -> list[str]:
    return [f"{prefix}{n}" if n else "" for n in names]  # "" is an omitted optional input: it stays ""


def pack(models: Sequence[onnx.ModelProto]) -> onnx.ModelProto:
    """One model holding every model's graph, case ``i``'s names prefixed ``c<i>_``; its outputs are
    the models' outputs in order (``split`` cuts them back)."""
    first = models[0]
    out = onnx.ModelProto()
    out.ir_version = first.ir_version
    out.opset_import.extend(first.opset_import)
    g = out.graph
    g.name = f"packed_{len(models)}_{first.graph.name}"
    for i, m in enumerate(models):
        p = f"c{i}_"
        for src, dst in ((m.graph.input, g.input), (m.graph.output, g.output), (m.graph.value_info, g.value_info)):
            for v in src:
                w = dst.add()
                w.CopyFrom(v)
                w.name = p + v.name
        for t in m.graph.initializer:
            w = g.initializer.add()
            w.CopyFrom(t)
            w.name = p + t.name
        for n in m.graph.node:
            w = g.node.add()
            w.CopyFrom(n)
            w.name = p + n.name
            del w.input[:]
            w.input.extend(_renamed(n.input, p))
            del w.output[:]
            w.output.extend(_renamed(n.output, p))
    return out


def feeds(per_case: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The packed model's inputs: case ``i``'s feeds under their prefixed names."""
    return {f"c{i}_{name}": value for i, f in enumerate(per_case) for name, value in f.items()}


def split(outputs: Sequence[Any], counts: Sequence[int]) -> list[list[Any]]:
    """The packed model's outputs cut back into each case's (``counts``: outputs per case, in order)."""
    if len(outputs) != sum(counts):
        raise ValueError(f"the packed model gave {len(outputs)} outputs where its parts have {sum(counts)}")
    out, at = [], 0
    for n in counts:
        out.append(list(outputs[at:at + n]))
        at += n
    return out


__all__ = ["MAX_PACK", "MIN_PACK", "feeds", "groups", "key", "named_parts", "pack", "split"]

"""The one place an ONNX model is built for a case (every model passes onnx.checker).

Built field by field rather than through ``onnx.helper`` (whose value infos, graph copy and
``from_array`` were a fifth of a certification's own time): the bytes are the same as the helper
calls give (``tests/test_model.py`` compares them over the whole corpus).
"""
from __future__ import annotations

import functools

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qconform import dtypes
from qconform.case import Case, MS_DOMAIN
from qconform.declarations.operators import MS_COMPANION_OPSET


@functools.cache
def _ir_version(opset: int) -> int:
    """Lowest IR version that carries this opset (so older runtimes are not refused needlessly)."""
    for _release, ir, ai_onnx, *_ in helper.VERSION_TABLE:
        if ai_onnx >= opset:
            return ir
    return onnx.IR_VERSION


def _initializer(tensor: onnx.TensorProto, value: np.ndarray, name: str) -> None:
    """``numpy_helper.from_array(value, name)`` written into ``tensor`` (its fast path for plain types)."""
    code = dtypes.PLAIN_DTYPES.get(value.dtype)
    if code is None:
        tensor.CopyFrom(numpy_helper.from_array(value, name))
        return
    tensor.dims.extend(value.shape)
    tensor.name = name
    tensor.data_type = code
    tensor.raw_data = value.tobytes()


def _value_info(vi: onnx.ValueInfoProto, name: str, type_name: str, shape: tuple[int, ...]) -> None:
    """``helper.make_tensor_value_info(name, type, list(shape))`` written into ``vi``."""
    vi.name = name
    tt = vi.type.tensor_type
    tt.elem_type = dtypes.get(type_name).onnx
    tt.shape.SetInParent()  # a scalar keeps an empty shape (the helper's ``dim.extend([])``)
    for d in shape:
        tt.shape.dim.add().dim_value = d


def _attributes(node: onnx.NodeProto, attrs) -> None:
    node.attribute.extend(helper.make_attribute(k, v) for k, v in sorted(attrs.items()) if v is not None)


def build_model(case: Case, check: bool = True) -> onnx.ModelProto:
    """The case's model: its nodes (every case is a graph; a pattern's nodes are named ``n<i>_<op>``,
    so a runtime's message can name the one it refused). ``check``: run onnx.checker (the corpus's models all passed
    it when the corpus was written; a run skips it per case)."""
    model = onnx.ModelProto()
    g = model.graph
    for arg in case.inputs:
        if arg is None:
            continue
        if arg.initializer:
            _initializer(g.initializer.add(), arg.value, arg.name)
        else:
            _value_info(g.input.add(), arg.name, arg.type, arg.value.shape)
    for name, t, a in zip(case.output_names, case.output_types, case.expected):
        _value_info(g.output.add(), name, t, a.shape)
    named = len(case.nodes) > 1  # a lone node keeps the unnamed form every stored model and reproducer has
    for i, n in enumerate(case.nodes):
        node = g.node.add()
        if named:
            node.name = f"n{i}_{n.op}"
        node.op_type = n.op
        if n.domain:
            node.domain = n.domain
        node.input.extend(n.inputs)
        node.output.extend(n.outputs)
        _attributes(node, n.attrs)
    g.name = case.id.replace("/", "_")
    if case.domain == MS_DOMAIN:
        opsets = [("", MS_COMPANION_OPSET), (MS_DOMAIN, case.opset)]
        ir = _ir_version(MS_COMPANION_OPSET)
    else:
        opsets = [("", case.opset)]
        ir = _ir_version(case.opset)
    for domain, version in opsets:
        op = model.opset_import.add()
        op.domain, op.version = domain, version
    model.ir_version = ir
    model.producer_name = "qconform"
    if check and case.domain != MS_DOMAIN:
        onnx.checker.check_model(model, full_check=False)
    return model


#: The folder of a case's inputs and outputs in ONNX's backend-test layout (``model.onnx`` beside it).
DATA_SET = "test_data_set_0"


def tensor_bytes(arr: np.ndarray, name: str) -> bytes:
    """One tensor as a serialised TensorProto (onnx's own encoding of every type, sub-byte packing
    included). Rank 0 stays rank 0 (``np.ascontiguousarray`` alone makes a scalar shape [1])."""
    return numpy_helper.from_array(np.ascontiguousarray(arr).reshape(np.shape(arr)), name).SerializeToString()


def runnable_files(case: Case, model: onnx.ModelProto | None = None) -> dict[str, bytes]:
    """What a device runs of ``case`` in the backend-test layout, by relative path: ``model.onnx``
    (deterministic bytes) and ``DATA_SET/input_N.pb`` (graph-input order; initializers live in the
    model). One definition for the exports that write it and for ``qconform import-results``, which
    rebuilds these bytes to check that a device ran the corpus's model on the corpus's inputs.
    ``model``: the case's model when already built."""
    model = build_model(case, check=False) if model is None else model
    files = {"model.onnx": model.SerializeToString(deterministic=True)}
    feeds = case.feeds
    for n, vi in enumerate(model.graph.input):
        files[f"{DATA_SET}/input_{n}.pb"] = tensor_bytes(feeds[vi.name], vi.name)
    return files

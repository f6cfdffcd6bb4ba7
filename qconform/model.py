"""The one place an ONNX model is built for a case (every model passes onnx.checker)."""
from __future__ import annotations

import onnx
from onnx import helper, numpy_helper

from qconform import dtypes
from qconform.case import Case, MS_DOMAIN

#: ai.onnx opset imported beside com.microsoft ops (what onnxruntime's contrib ops are built against).
MS_COMPANION_OPSET = 21


def _ir_version(opset: int) -> int:
    """Lowest IR version that carries this opset (so older runtimes are not refused needlessly)."""
    for _release, ir, ai_onnx, *_ in helper.VERSION_TABLE:
        if ai_onnx >= opset:
            return ir
    return onnx.IR_VERSION


def build_model(case: Case, check: bool = True) -> onnx.ModelProto:
    """The case's single-node model. ``check``: run onnx.checker (the corpus's models all passed it
    when the corpus was written; a run skips it per case)."""
    node_inputs, graph_inputs, inits = [], [], []
    for arg in case.inputs:
        if arg is None:
            node_inputs.append("")
            continue
        node_inputs.append(arg.name)
        if arg.initializer:
            inits.append(numpy_helper.from_array(arg.value, arg.name))
        else:
            graph_inputs.append(
                helper.make_tensor_value_info(arg.name, dtypes.get(arg.type).onnx, list(arg.value.shape))
            )
    outputs = [
        helper.make_tensor_value_info(name, dtypes.get(t).onnx, list(a.shape))
        for name, t, a in zip(case.output_names, case.output_types, case.expected)
    ]
    node = helper.make_node(case.op, node_inputs, list(case.output_names), domain=case.domain or None, **case.attrs)
    graph = helper.make_graph([node], case.id.replace("/", "_"), graph_inputs, outputs, initializer=inits)
    if case.domain == MS_DOMAIN:
        opsets = [helper.make_opsetid("", MS_COMPANION_OPSET), helper.make_opsetid(MS_DOMAIN, case.opset)]
        ir = _ir_version(MS_COMPANION_OPSET)
    else:
        opsets = [helper.make_opsetid("", case.opset)]
        ir = _ir_version(case.opset)
    model = helper.make_model(graph, opset_imports=opsets, ir_version=ir, producer_name="qconform")
    if check and case.domain != MS_DOMAIN:
        onnx.checker.check_model(model, full_check=False)
    return model

"""The case's model and the corpus's arrays, built and read without onnx's general helpers, are
what those helpers give: the same model bytes and the same arrays for every case of the corpus
(``qconform.model`` and ``qconform.corpus._to_array`` take their fast paths for speed only)."""
from __future__ import annotations

import onnx
from onnx import helper, numpy_helper

from qconform import corpus as corpus_mod
from qconform import dtypes
from qconform.case import MS_DOMAIN
from qconform.declarations.operators import MS_COMPANION_OPSET
from qconform.model import _ir_version, build_model


def helper_model(case) -> onnx.ModelProto:
    """The case's model through ``onnx.helper`` and ``numpy_helper.from_array``: the reference."""
    node_inputs, graph_inputs, inits = [], [], []
    for arg in case.inputs:
        if arg is None:
            node_inputs.append("")
            continue
        node_inputs.append(arg.name)
        if arg.initializer:
            inits.append(numpy_helper.from_array(arg.value, arg.name))
        else:
            graph_inputs.append(helper.make_tensor_value_info(arg.name, dtypes.get(arg.type).onnx,
                                                             list(arg.value.shape)))
    outputs = [helper.make_tensor_value_info(name, dtypes.get(t).onnx, list(a.shape))
               for name, t, a in zip(case.output_names, case.output_types, case.expected)]
    if case.is_graph:  # a QDQ pattern: its nodes, named n<i>_<op>
        nodes = [helper.make_node(n.op, list(n.inputs), list(n.outputs), name=f"n{i}_{n.op}", domain=n.domain or None,
                                  **dict(n.attrs)) for i, n in enumerate(case.graph)]
    else:
        nodes = [helper.make_node(case.op, node_inputs, list(case.output_names), domain=case.domain or None,
                                  **case.attrs)]
    graph = helper.make_graph(nodes, case.id.replace("/", "_"), graph_inputs, outputs, initializer=inits)
    if case.domain == MS_DOMAIN:
        opsets = [helper.make_opsetid("", MS_COMPANION_OPSET), helper.make_opsetid(MS_DOMAIN, case.opset)]
        ir = _ir_version(MS_COMPANION_OPSET)
    else:
        opsets = [helper.make_opsetid("", case.opset)]
        ir = _ir_version(case.opset)
    return helper.make_model(graph, opset_imports=opsets, ir_version=ir, producer_name="qconform")


def test_every_case_model_is_the_helpers_model(corpus):
    differ = [c.id for c in corpus.cases
              if build_model(c, check=False).SerializeToString() != helper_model(c).SerializeToString()]
    assert not differ, f"{len(differ)} case model(s) differ from onnx.helper's, e.g. {differ[:3]}"


def test_every_corpus_tensor_reads_as_numpy_helper_reads_it():
    differ = []
    for path in sorted((corpus_mod.DEFAULT_ROOT / "data").glob("*.pb")):
        seq = onnx.SequenceProto()
        seq.ParseFromString(path.read_bytes())
        for t in seq.tensor_values:
            a, b = numpy_helper.to_array(t), corpus_mod._to_array(t)
            if (a.dtype, a.shape, a.flags.writeable) != (b.dtype, b.shape, b.flags.writeable) \
                    or a.tobytes() != b.tobytes():
                differ.append(t.name)
    assert not differ, f"{len(differ)} tensor(s) read differently, e.g. {differ[:3]}"

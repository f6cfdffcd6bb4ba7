"""Shared helpers for the QDQ-graph measurements (research only, not package code).

Builds small ONNX graphs and opens sessions on: onnxruntime CPU with optimisations off (the
node-by-node reference the issue uses), onnxruntime at its default level (ORT_ENABLE_ALL),
and the QNN EP's HTP backend (simulator on x86-64) with CPU fallback disabled.
"""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper
from onnx import numpy_helper as nh

_REGISTERED = False
LOG: list[tuple[int, str, str]] = []


def register_qnn() -> None:
    """Register the plugin EP once per process (a second registration raises)."""
    global _REGISTERED
    if _REGISTERED:
        return
    import onnxruntime_qnn

    ort.register_execution_provider_library("QNNExecutionProvider", onnxruntime_qnn.get_library_path())
    _REGISTERED = True


def capture_log(severity: int = 2) -> None:
    """Route ORT's (and the plugin EP's) log lines into LOG so refusal reasons can be read back."""

    def cb(sev, category, logid, where, message):
        LOG.append((sev, where, message))

    ort.set_default_logger_callback(cb, severity)


def vi(name: str, elem: int, shape) -> onnx.ValueInfoProto:
    """A value info; shape None: rank unknown (shape inference fills it in)."""
    v = helper.make_tensor_value_info(name, elem, shape)
    if shape is None:
        v.type.tensor_type.ClearField("shape")
    return v


def init(name: str, arr) -> onnx.TensorProto:
    return nh.from_array(np.asarray(arr), name)


def model(nodes, inputs, outputs, inits=(), opset: int = 21, check: bool = True) -> bytes:
    g = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    if any(not o.type.tensor_type.HasField("shape") for o in g.output):
        m = onnx.shape_inference.infer_shapes(m, strict_mode=True)  # fills the outputs' shapes
    if check:
        onnx.checker.check_model(m, full_check=True)
    return m.SerializeToString()


def cpu_session(mb: bytes, level=ort.GraphOptimizationLevel.ORT_DISABLE_ALL) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    so.log_severity_level = 3
    return ort.InferenceSession(mb, so, providers=["CPUExecutionProvider"])


def qnn_options(record: bool = True, **ep_opts) -> ort.SessionOptions:
    register_qnn()
    so = ort.SessionOptions()
    devs = [d for d in ort.get_ep_devices() if d.ep_name == "QNNExecutionProvider"]
    so.add_provider_for_devices(devs, {"backend_type": "htp", **ep_opts})
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    if record:
        so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    so.log_severity_level = 2
    return so


def qnn_session(mb: bytes, **ep_opts) -> ort.InferenceSession:
    return ort.InferenceSession(mb, qnn_options(**ep_opts))


def assignment(sess: ort.InferenceSession) -> list[tuple[str, list[tuple[str, str]]]]:
    """Which EP holds which original node: [(ep_name, [(op_type, node_name), ...]), ...]."""
    return [(sg.ep_name, [(n.op_type, n.name) for n in sg.get_nodes()])
            for sg in sess.get_provider_graph_assignment_info()]


def run1(sess, feeds: dict) -> list[np.ndarray]:
    return sess.run(None, feeds)


def bits_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise bit equality (float compare by bits so -0/NaN count)."""
    a = np.ascontiguousarray(a)
    b = np.ascontiguousarray(b)
    if a.dtype.kind == "f":
        u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
        return a.view(u) == b.view(u)
    return a == b


"""OpenVINO CPU: a 1×1 Conv with stride 2 and pads 1 behind a Relu gives the wrong output shape.
Needs numpy, onnx, onnxruntime, openvino."""
import numpy as np
import onnx
import onnx.helper as H
import onnx.numpy_helper as NH
import onnxruntime as ort
import openvino as ov

rng = np.random.default_rng(1)
x = rng.integers(-20, 20, (1, 3, 4, 5)).astype(np.float32)
w = rng.integers(-20, 20, (4, 3, 1, 1)).astype(np.float32)
for pads in ([1, 1, 1, 1], [0, 0, 0, 0]):
    g = H.make_graph(
        [H.make_node("Relu", ["x"], ["r"]),
         H.make_node("Conv", ["r", "w"], ["y"], kernel_shape=[1, 1], strides=[2, 2], pads=pads)],
        "g", [H.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [H.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], [NH.from_array(w, "w")])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 13)])
    m.ir_version = 8
    data = m.SerializeToString()
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    core = ov.Core()
    got = core.compile_model(core.read_model(data, b""), "CPU",
                             {"INFERENCE_PRECISION_HINT": "f32"})({"x": x})[0]
    same = got.shape == want.shape and np.array_equal(got, want)
    print(f"pads {pads}: openvino {got.shape}, onnxruntime {want.shape}: {'same' if same else 'DIFFERENT'}")

"""onnxruntime-openvino com.microsoft.QuantizeLinear-1: Your kernel adds the zero point to x / scale in floating point before rounding (round(x / scale + zp)) instead of rounding first and adding the zero point … (see README.md). Exit status 1 when the outputs differ from expected.npz."""
import os
import numpy as np
import onnxruntime as ort
import ctypes

os.chdir(os.path.dirname(os.path.abspath(__file__)))
inputs, expected = dict(np.load("inputs.npz")), dict(np.load("expected.npz"))
# uint4: numpy has no such type; these arrays hold each element's code (uint8)
CODES = {"y": 21}
TYPES = {"y": "uint4"}  # ONNX names
BITS = {"y": 4}
def to_bytes(k, v):  # element codes -> the ONNX layout (sub-byte types: packed, first element in the low bits)
    if k not in BITS: return v.tobytes()
    n = 8 // BITS[k]; c = np.concatenate([v.ravel(), np.zeros(-v.size % n, np.uint8)]).reshape(-1, n)
    return np.bitwise_or.reduce(c << (BITS[k] * np.arange(n, dtype=np.uint8)), axis=1).astype(np.uint8).tobytes()
def from_bytes(k, raw, shape):  # the ONNX layout -> element codes
    if k not in BITS: return np.frombuffer(raw, expected[k].dtype).reshape(shape)
    n, b = 8 // BITS[k], np.frombuffer(raw, np.uint8)
    c = (b[:, None] >> (BITS[k] * np.arange(n, dtype=np.uint8))) & np.uint8(2 ** BITS[k] - 1)
    return c.ravel()[: int(np.prod(shape))].reshape(shape)
def to_ort(k, v):  # an array of element codes -> an OrtValue of its ONNX type, the bytes copied as they are
    o = ort.OrtValue.ortvalue_from_shape_and_type(list(v.shape), CODES[k])
    ctypes.memmove(o.data_ptr(), to_bytes(k, v), o.tensor_size_in_bytes()); return o
def from_ort(k, o):  # an output OrtValue of a type numpy lacks -> its element codes
    return from_bytes(k, ctypes.string_at(o.data_ptr(), o.tensor_size_in_bytes()), o.shape())
print("onnxruntime-openvino", ort.__version__)
try:
    so = ort.SessionOptions(); so.log_severity_level = 4  # the error, if any, is raised below anyway
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")  # only the EP runs
    sess = ort.InferenceSession("model.onnx", so, providers=['OpenVINOExecutionProvider'])
    feeds = {k: to_ort(k, v) if k in CODES else ort.OrtValue.ortvalue_from_numpy(v) for k, v in inputs.items()}
    outs = dict(zip([o.name for o in sess.get_outputs()], sess.run_with_ort_values(None, feeds)))
    actual = {k: from_ort(k, o) if o.element_type() == CODES.get(k) else o.numpy() for k, o in outs.items()}
except Exception as exc:
    raise SystemExit(f"expected: {expected}\nMISMATCH: the run raised {type(exc).__name__}: {exc}")
bad = 0
for name, e in expected.items():
    a = np.asarray(actual[name])
    if (a.dtype, a.shape) != (e.dtype, e.shape):
        raise SystemExit(f"MISMATCH: {name}: expected {TYPES.get(name, e.dtype)}{list(e.shape)}, actual {a.dtype}{list(a.shape)}")
    differ = (a.view(f"u{a.itemsize}") != e.view(f"u{e.itemsize}")) & ~((a != a) & (e != e))
    fmt = (lambda v: f"{int(v):#x}") if name in CODES else str
    for i in np.argwhere(differ)[:8].tolist():
        print(f"{name}{i}: expected {fmt(e[tuple(i)])}, actual {fmt(a[tuple(i)])}")
    bad += int(differ.sum())
print(f"MISMATCH: {bad} element(s) differ" if bad else "OK: the outputs are the expected ones")
raise SystemExit(1 if bad else 0)

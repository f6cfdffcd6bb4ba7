"""onnxruntime QuantizeLinear-19 … -25, float8e5m2, saturate=0: 61440 ≤ |x/s| < 65536 (`[x]` = 65536) gives NaN (0x7F / 0xFF) (see README.md). Exit status 1 when the outputs differ from expected.npz."""
import os
import numpy as np
import onnxruntime as ort
import ctypes

os.chdir(os.path.dirname(os.path.abspath(__file__)))
inputs, expected = dict(np.load("inputs.npz")), dict(np.load("expected.npz"))
skip = dict(np.load("skip.npz"))  # not compared: don't-care elements, NaN in both
# float8e5m2: numpy has no such type; these arrays hold each element's code (uint8)
CODES = {"y": 19}
TYPES = {"y": "float8e5m2"}  # ONNX names
def to_bytes(k, v):  # element codes -> the ONNX layout
    return v.tobytes()
def from_bytes(k, raw, shape):  # the ONNX layout -> element codes
    return np.frombuffer(raw, expected[k].dtype).reshape(shape)
def to_ort(k, v):  # an array of element codes -> an OrtValue of its ONNX type, the bytes copied as they are
    o = ort.OrtValue.ortvalue_from_shape_and_type(list(v.shape), CODES[k])
    ctypes.memmove(o.data_ptr(), to_bytes(k, v), o.tensor_size_in_bytes()); return o
def from_ort(k, o):  # an output OrtValue of a type numpy lacks -> its element codes
    return from_bytes(k, ctypes.string_at(o.data_ptr(), o.tensor_size_in_bytes()), o.shape())
print("onnxruntime", ort.__version__)
try:
    so = ort.SessionOptions(); so.log_severity_level = 4  # the error, if any, is raised below anyway
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession("model.onnx", so, providers=['CPUExecutionProvider'])
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
    differ = (a.view(f"u{a.itemsize}") != e.view(f"u{e.itemsize}")) & ~((a != a) & (e != e)) & ~skip.get(name, False)
    fmt = (lambda v: f"{int(v):#x}") if name in CODES else str
    for i in np.argwhere(differ)[:8].tolist():
        print(f"{name}{i}: expected {fmt(e[tuple(i)])}, actual {fmt(a[tuple(i)])}")
    bad += int(differ.sum())
print(f"MISMATCH: {bad} element(s) differ" if bad else "OK: the outputs are the expected ones")
raise SystemExit(1 if bad else 0)

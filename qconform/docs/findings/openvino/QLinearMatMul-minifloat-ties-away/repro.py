"""openvino QLinearMatMul-21: Your float8/float4/float6 conversion rounds a value exactly halfway between two representable values away from zero, where the spec's round to nearest even … (see README.md). Exit status 1 when the outputs differ from expected.npz."""
import os
import numpy as np
import openvino as ov

os.chdir(os.path.dirname(os.path.abspath(__file__)))
inputs, expected = dict(np.load("inputs.npz")), dict(np.load("expected.npz"))
# float8e4m3fn, float8e5m2: numpy has no such type; these arrays hold each element's code (uint8)
CODES = {"b": ov.Type.f8e5m2, "y": ov.Type.f8e4m3}
TYPES = {"b": "float8e5m2", "y": "float8e4m3fn"}  # ONNX names
def to_bytes(k, v):  # element codes -> the ONNX layout
    return v.tobytes()
def from_bytes(k, raw, shape):  # the ONNX layout -> element codes
    return np.frombuffer(raw, expected[k].dtype).reshape(shape)
def to_ov(k, v):  # an array of element codes -> an ov.Tensor of its type, the bytes copied as they are
    t = ov.Tensor(CODES[k], list(v.shape))
    t.data.reshape(-1).view(np.uint8)[:] = np.frombuffer(to_bytes(k, v), np.uint8); return t
print("openvino", ov.__version__)
try:
    compiled = ov.Core().compile_model("model.onnx", "CPU", {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1})
    res = compiled({k: to_ov(k, v) if k in CODES else v for k, v in inputs.items()})
    actual = {o.get_any_name(): from_bytes(o.get_any_name(), np.asarray(res[o]).tobytes(), tuple(o.get_shape()))
              if o.get_element_type() == CODES.get(o.get_any_name()) else res[o] for o in compiled.outputs}
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

"""onnx-reference QuantizeLinear-23 … -28, float4e2m1 outputs: NaN gives −0 (0x8, ml_dtypes' cast) (see README.md). Exit status 1 when the outputs differ from expected.npz."""
import os
import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator
import ml_dtypes  # a dependency of onnx

os.chdir(os.path.dirname(os.path.abspath(__file__)))
inputs, expected = dict(np.load("inputs.npz")), dict(np.load("expected.npz"))
# bfloat16, float4e2m1: numpy has no such type; these arrays hold each element's code (uint16)
CODES = {"x": ml_dtypes.bfloat16, "y": ml_dtypes.float4_e2m1fn}
TYPES = {"x": "bfloat16", "y": "float4e2m1"}  # ONNX names
print("onnx-reference", onnx.__version__)
try:
    sess = ReferenceEvaluator("model.onnx")
    outs = sess.run(None, {k: v.view(CODES[k]) if k in CODES else v for k, v in inputs.items()})
    actual = {k: np.asarray(a).view(f"u{a.dtype.itemsize}") if a.dtype == CODES.get(k) else a
              for k, a in zip(sess.output_names, outs)}
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

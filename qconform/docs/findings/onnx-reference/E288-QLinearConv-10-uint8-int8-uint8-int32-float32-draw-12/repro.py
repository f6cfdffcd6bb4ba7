"""onnx-reference QLinearConv-10, random draws with calibrated scales: other codes than every permitted reading on some elements of a few random draws, no model reproducing every element (the float64 requantisation of E287, zero … (see README.md). Exit status 1 when the outputs differ from expected.npz."""
import os
import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

os.chdir(os.path.dirname(os.path.abspath(__file__)))
inputs, expected = dict(np.load("inputs.npz")), dict(np.load("expected.npz"))
print("onnx-reference", onnx.__version__)
try:
    sess = ReferenceEvaluator("model.onnx")
    actual = dict(zip(sess.output_names, sess.run(None, inputs)))
except Exception as exc:
    raise SystemExit(f"expected: {expected}\nMISMATCH: the run raised {type(exc).__name__}: {exc}")
bad = 0
for name, e in expected.items():
    a = np.asarray(actual[name])
    if (a.dtype, a.shape) != (e.dtype, e.shape):
        raise SystemExit(f"MISMATCH: {name}: expected {e.dtype}{list(e.shape)}, actual {a.dtype}{list(a.shape)}")
    differ = (a.view(f"u{a.itemsize}") != e.view(f"u{e.itemsize}")) & ~((a != a) & (e != e))
    for i in np.argwhere(differ)[:8].tolist():
        print(f"{name}{i}: expected {e[tuple(i)]}, actual {a[tuple(i)]}")
    bad += int(differ.sum())
print(f"MISMATCH: {bad} element(s) differ" if bad else "OK: the outputs are the expected ones")
raise SystemExit(1 if bad else 0)

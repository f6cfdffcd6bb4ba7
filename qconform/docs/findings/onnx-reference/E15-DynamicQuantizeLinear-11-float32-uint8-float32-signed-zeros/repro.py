"""onnx-reference DynamicQuantizeLinear-11, all-zero x: y_scale = 1/255 (range 1 when max = min) (see README.md). Exit status 1 when the outputs differ from expected.npz."""
import os
import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

os.chdir(os.path.dirname(os.path.abspath(__file__)))
inputs, expected = dict(np.load("inputs.npz")), dict(np.load("expected.npz"))
skip = dict(np.load("skip.npz"))  # not compared: don't-care elements, NaN in both
print("onnx-reference", onnx.__version__)
try:
    sess = ReferenceEvaluator("model.onnx")
    actual = dict(zip(sess.output_names, sess.run(None, inputs)))
except Exception as exc:
    raise SystemExit(f"expected: {expected}\nMISMATCH: the run raised {type(exc).__name__}: {exc}")
OTHERS = ['scale-minus-zero']  # the other readings the text permits (readings.npz)
readings = dict(np.load("readings.npz"))
for reading in OTHERS:
    keys = {name: f"{reading}/{name}" for name in expected}
    got = {name: np.asarray(actual[name]) for name in expected}
    if all((got[n].dtype, got[n].shape) == (readings[k].dtype, readings[k].shape) and not (
            (got[n].view(f"u{got[n].itemsize}") != readings[k].view(f"u{got[n].itemsize}"))
            & ~((got[n] != got[n]) & (readings[k] != readings[k])) & ~skip.get(k, False)).any()
           for n, k in keys.items()):
        print(f"OK: the outputs are reading '{reading}', which the text also permits (expected.npz holds another)")
        raise SystemExit(0)
bad = 0
for name, e in expected.items():
    a = np.asarray(actual[name])
    if (a.dtype, a.shape) != (e.dtype, e.shape):
        raise SystemExit(f"MISMATCH: {name}: expected {e.dtype}{list(e.shape)}, actual {a.dtype}{list(a.shape)}")
    differ = (a.view(f"u{a.itemsize}") != e.view(f"u{e.itemsize}")) & ~((a != a) & (e != e)) & ~skip.get(name, False)
    for i in np.argwhere(differ)[:8].tolist():
        print(f"{name}{i}: expected {e[tuple(i)]}, actual {a[tuple(i)]}")
    bad += int(differ.sum())
print(f"MISMATCH: {bad} element(s) differ" if bad else "OK: the outputs are the expected ones")
raise SystemExit(1 if bad else 0)

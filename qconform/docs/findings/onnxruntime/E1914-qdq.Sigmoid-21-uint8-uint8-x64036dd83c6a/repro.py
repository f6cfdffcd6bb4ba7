"""onnxruntime qdq.Sigmoid-21, outputs near a half: gives one code off on elements where the correctly rounded sigmoid, divided by the output scale, lies within a few float32 ulps of a half (see README.md). Exit status 1 when the outputs differ from expected.npz."""
import os
import numpy as np
import onnxruntime as ort

os.chdir(os.path.dirname(os.path.abspath(__file__)))
inputs, expected = dict(np.load("inputs.npz")), dict(np.load("expected.npz"))
print("onnxruntime", ort.__version__)
try:
    so = ort.SessionOptions(); so.log_severity_level = 4  # the error, if any, is raised below anyway
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession("model.onnx", so, providers=['CPUExecutionProvider'])
    actual = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, inputs)))
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

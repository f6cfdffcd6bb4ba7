"""onnx-reference QuantizeLinear-21 … -28, blocked: runs D = 4, S = 3, B = 2 without complaint (see README.md). Exit status 1 when the outputs differ from expected.npz."""
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
    print(f"OK: the model is rejected: {type(exc).__name__}: {exc}")
    raise SystemExit(0)
print("actual:", actual)
print("MISMATCH: the model ran; it is invalid and must be rejected: \"the accepted range is `[ceil(Di/Si), ceil(Di/(Si-1))-1]`\"")
raise SystemExit(1)

"""onnx-reference DequantizeLinear-24 … -28, e8m0 scale, no output_dtype: returns a float8e8m0 tensor (see README.md). Exit status 1 when the outputs differ from expected.npz."""
import os
import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator
import ml_dtypes  # a dependency of onnx

os.chdir(os.path.dirname(os.path.abspath(__file__)))
inputs, expected = dict(np.load("inputs.npz")), dict(np.load("expected.npz"))
# float8e8m0: numpy has no such type; these arrays hold each element's code (uint8)
CODES = {"y": ml_dtypes.float8_e8m0fnu}
TYPES = {"y": "float8e8m0"}  # ONNX names
print("onnx-reference", onnx.__version__)
try:
    sess = ReferenceEvaluator("model.onnx")
    outs = sess.run(None, {k: v.view(CODES[k]) if k in CODES else v for k, v in inputs.items()})
    actual = {k: np.asarray(a).view(f"u{a.dtype.itemsize}") if a.dtype == CODES.get(k) else a
              for k, a in zip(sess.output_names, outs)}
except Exception as exc:
    print(f"OK: the model is rejected: {type(exc).__name__}: {exc}")
    raise SystemExit(0)
print("actual:", actual)
print("MISMATCH: the model ran; it is invalid and must be rejected: \"If `output_dtype` is not supplied then the output type is the same as `x_scale`.\" T3 excludes float8e8m0")
raise SystemExit(1)

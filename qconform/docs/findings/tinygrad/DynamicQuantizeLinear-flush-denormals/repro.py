"""tinygrad DynamicQuantizeLinear-11: Your kernel flushes subnormal float16/bfloat16/float32 inputs and results to zero (FTZ/DAZ) (see README.md). Exit status 1 when the outputs differ from expected.npz."""
import os
import numpy as np
os.environ.setdefault("DEV", "CPU")  # tinygrad's CPU device
from importlib.metadata import version
from tinygrad import Tensor, dtypes  # noqa: F401 (bfloat16)
from tinygrad.nn.onnx import OnnxRunner

os.chdir(os.path.dirname(os.path.abspath(__file__)))
inputs, expected = dict(np.load("inputs.npz")), dict(np.load("expected.npz"))
skip = dict(np.load("skip.npz"))  # not compared: don't-care elements, NaN in both
print("tinygrad", version("tinygrad"))
try:
    res = OnnxRunner("model.onnx")({k: Tensor(v) for k, v in inputs.items()})
    actual = {k: res[k].numpy() for k in expected}
except Exception as exc:
    raise SystemExit(f"expected: {expected}\nMISMATCH: the run raised {type(exc).__name__}: {exc}")
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

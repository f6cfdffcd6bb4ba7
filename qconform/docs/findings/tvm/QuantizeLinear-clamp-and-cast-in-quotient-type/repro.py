"""tvm QuantizeLinear-21, -23, -24, -25, -28: Your QuantizeLinear adds the zero point and clamps in the quotient's float16/bfloat16 type, then casts with wrap-around (see README.md). Exit status 1 when the outputs differ from expected.npz."""
import os
import numpy as np
import onnx
import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

os.chdir(os.path.dirname(os.path.abspath(__file__)))
inputs, expected = dict(np.load("inputs.npz")), dict(np.load("expected.npz"))
skip = dict(np.load("skip.npz"))  # not compared: don't-care elements, NaN in both
print("tvm", tvm.__version__)
try:
    vm = relax.VirtualMachine(tvm.compile(from_onnx(onnx.load("model.onnx")), target="llvm"), tvm.cpu(0))
    res = vm["main"](*[tvm.runtime.tensor(v, tvm.cpu(0)) for v in inputs.values()])
    actual = dict(zip(expected, (r.numpy() for r in ([res] if isinstance(res, tvm.runtime.Tensor) else res))))
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

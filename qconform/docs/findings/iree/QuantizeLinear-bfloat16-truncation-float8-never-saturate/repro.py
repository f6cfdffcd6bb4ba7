"""iree QuantizeLinear-23, -24, -25, -28: Your kernel converts float32 intermediates to bfloat16 by dropping the low 16 bits (truncation) instead of rounding to nearest even (see README.md). Exit status 1 when the outputs differ from expected.npz."""
import os
import numpy as np
import subprocess
import sys
from importlib.metadata import version
import iree.compiler.tools as ireec
import iree.runtime as ireert
import ml_dtypes  # a dependency of iree-base-runtime

os.chdir(os.path.dirname(os.path.abspath(__file__)))
inputs, expected = dict(np.load("inputs.npz")), dict(np.load("expected.npz"))
# float8e5m2: numpy has no such type; these arrays hold each element's code (uint8)
CODES = {"y": ml_dtypes.float8_e5m2}
TYPES = {"y": "float8e5m2"}  # ONNX names
print("iree", version("iree-base-runtime"))
try:
    mlir = subprocess.run([sys.executable, "-m", "iree.compiler.tools.import_onnx", "model.onnx", "-o", "/dev/stdout"],
                          check=True, capture_output=True).stdout
    vmfb = ireec.compile_str(mlir, input_type="onnx", target_backends=["llvm-cpu"],
                             extra_args=["--iree-llvmcpu-target-cpu=generic"])
    module = ireert.load_vm_flatbuffer(vmfb, driver="local-sync")
    main = next(f for f in module.vm_module.function_names if not f.startswith("__") and not f.endswith("$async"))
    res = module[main](*(v.view(CODES[k]) if k in CODES else v for k, v in inputs.items()))
    def signless(r, e):  # IREE returns integers signless (uint8 as int8): their bits, read in the expected type
        return r.view(e.dtype) if r.dtype.kind in "iu" and e.dtype.kind in "iu" and r.itemsize == e.itemsize else r
    res = [np.asarray(r.to_host()) for r in (res if isinstance(res, (list, tuple)) else [res])]
    actual = {k: r.view(f"u{r.itemsize}") if r.dtype == CODES.get(k) else signless(r, e)
              for (k, e), r in zip(expected.items(), res)}
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

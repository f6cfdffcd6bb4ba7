"""iree QLinearMatMul-10, -21: Your QLinearMatMul multiplies the stored codes of a and b without subtracting a_zero_point and b_zero_point (see README.md). Exit status 1 when the outputs differ from expected.npz."""
import os
import numpy as np
import subprocess
import sys
from importlib.metadata import version
import iree.compiler.tools as ireec
import iree.runtime as ireert

os.chdir(os.path.dirname(os.path.abspath(__file__)))
inputs, expected = dict(np.load("inputs.npz")), dict(np.load("expected.npz"))
print("iree", version("iree-base-runtime"))
try:
    mlir = subprocess.run([sys.executable, "-m", "iree.compiler.tools.import_onnx", "model.onnx", "-o", "/dev/stdout"],
                          check=True, capture_output=True).stdout
    vmfb = ireec.compile_str(mlir, input_type="onnx", target_backends=["llvm-cpu"],
                             extra_args=["--iree-llvmcpu-target-cpu=generic"])
    module = ireert.load_vm_flatbuffer(vmfb, driver="local-sync")
    main = next(f for f in module.vm_module.function_names if not f.startswith("__") and not f.endswith("$async"))
    res = module[main](*inputs.values())
    def signless(r, e):  # IREE returns integers signless (uint8 as int8): their bits, read in the expected type
        return r.view(e.dtype) if r.dtype.kind in "iu" and e.dtype.kind in "iu" and r.itemsize == e.itemsize else r
    res = [np.asarray(r.to_host()) for r in (res if isinstance(res, (list, tuple)) else [res])]
    actual = {k: signless(r, e) for (k, e), r in zip(expected.items(), res)}
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

"""IREE, declared once (its runner ``runners.iree_runner``): its compiler's settings and flags, and its reproducer template."""
from __future__ import annotations

import json
from types import MappingProxyType

from qconform.declarations.runtime import Runtime, ml_dtype, with_template

IREE_SETTINGS = MappingProxyType({
    "input_type": "onnx", "target_backends": ("llvm-cpu",),
    "cpu": "generic",  # IREE warns without an explicit CPU; --runner-opt cpu=host: the host's ISA
    "driver": "local-sync",  # single-threaded; --runner-opt driver=local-task: the task system
})


def iree_flags(cpu: str = IREE_SETTINGS["cpu"]) -> list[str]:
    """iree-compile's extra flags for ``cpu``."""
    return [f"--iree-llvmcpu-target-cpu={cpu}"]


def _iree_module(args: str) -> str:
    """The IREE script's import, compile and call, with ``args`` the call's arguments."""
    s = IREE_SETTINGS
    return """\
mlir = subprocess.run([sys.executable, "-m", "iree.compiler.tools.import_onnx", "model.onnx", "-o", "/dev/stdout"],
                      check=True, capture_output=True).stdout
vmfb = ireec.compile_str(mlir, input_type={input_type}, target_backends={backends},
                         extra_args={flags})
module = ireert.load_vm_flatbuffer(vmfb, driver={driver})
main = next(f for f in module.vm_module.function_names if not f.startswith("__") and not f.endswith("$async"))
res = module[main](*{args})
""".format(input_type=json.dumps(s["input_type"]), backends=json.dumps(list(s["target_backends"])),
           flags=json.dumps(iree_flags()), driver=json.dumps(s["driver"]), args=args)


_IREE_SIGNLESS = '''\
def signless(r, e):  # IREE returns integers signless (uint8 as int8): their bits, read in the expected type
    return r.view(e.dtype) if r.dtype.kind in "iu" and e.dtype.kind in "iu" and r.itemsize == e.itemsize else r
'''

IREE = with_template(
    Runtime("iree", "qconform.runners.iree_runner:IreeRunner", dist="iree-base-runtime", extra="iree",
            module="iree.runtime", settings=IREE_SETTINGS, also=("iree-base-compiler",),
            # IREE compiles every model with iree-compile (about a quarter second each): a smaller slice
            check=("*-21/*/basic/per-tensor", "*-21/*/basic/per-axis", "*-21/*/specials/*")),
    "import subprocess\nimport sys\nfrom importlib.metadata import version\n"
    "import iree.compiler.tools as ireec\nimport iree.runtime as ireert",
    "version(\"iree-base-runtime\")",
    _iree_module("inputs.values()") + _IREE_SIGNLESS + """\
res = [np.asarray(r.to_host()) for r in (res if isinstance(res, (list, tuple)) else [res])]
actual = {k: signless(r, e) for (k, e), r in zip(expected.items(), res)}
""",
    codes=ml_dtype, codes_imports="import ml_dtypes  # a dependency of iree-base-runtime",
    run_codes=_iree_module("(v.view(CODES[k]) if k in CODES else v for k, v in inputs.items())")
    + _IREE_SIGNLESS + """\
res = [np.asarray(r.to_host()) for r in (res if isinstance(res, (list, tuple)) else [res])]
actual = {k: r.view(f"u{r.itemsize}") if r.dtype == CODES.get(k) else signless(r, e)
          for (k, e), r in zip(expected.items(), res)}
""",
    note="Needs `pip install iree-base-compiler[onnx] iree-base-runtime` (the ONNX importer uses the `onnx` "
         "package).")

__all__ = ["IREE", "IREE_SETTINGS", "iree_flags"]

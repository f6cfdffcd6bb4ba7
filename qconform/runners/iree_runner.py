"""IREE: the ONNX importer, ``iree-compile`` for llvm-cpu, the ``iree.runtime`` local HAL driver:
``pip install 'qconform[iree]'``.

The model goes through what ``iree-import-onnx`` does (``onnx.shape_inference.infer_shapes``,
which types a graph's intermediate values, then ``onnx_importer.ModelInfo`` /
``NodeImporter.define_function(...).import_all()`` / ``verify()``) in a fresh MLIR context, then
``iree.compiler.tools.compile_file`` (``--iree-input-type=onnx``, ``--iree-hal-target-backends=llvm-cpu``,
``--iree-llvmcpu-target-cpu=generic``: IREE warns without an explicit CPU; ``--runner-opt cpu=host``
compiles for the host's ISA) in a temporary directory removed afterwards; ``--runner-opt cache=DIR``
(or $QCONFORM_IREE_CACHE) keeps each module, keyed by its MLIR, the compiler's version and flags. iree-compile runs as a
subprocess, so a compiler crash cannot take qconform down. Each run loads the module into a new
``VmInstance`` / device / ``VmContext`` (nothing is cached across models) on the ``local-sync``
driver, single-threaded (``--runner-opt driver=local-task`` for the task system). These objects are
released in a fixed order: local-task segfaults when the device goes before what uses it.

I/O travels as raw ONNX-layout bytes (``qconform.adapt``) in ``HalBufferView``s of an explicit
``HalElementType``. The binding's numpy path cannot be used: its ABI types are signless, so it
returns uint8 results as int8. IREE's compiled functions return integers as *signless* ``INT_n``.
Those bits are read in the declared type when it is an integer of the same width (no bit changes),
otherwise as signed. Every other element type is returned as IREE reported it.

Unsupported when the importer refuses the model (its type table has no float4e2m1, float6,
float8e8m0 or int2: "Unknown ONNX tensor element type: N") or iree-compile fails. The reason is
iree-compile's ``error:`` lines on one line, e.g. "failed to legalize operation 'torch.operator'"
with the op's operand types, or a link error. A compiler crash is reported as "iree-compile
crashed (signal N) in <innermost frames>". A failing invocation is an error with IREE's full text."""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
from importlib.metadata import version as _pkg_version
from typing import Any

import iree.runtime as rt
import numpy as np
import onnx
from iree.compiler import ir
from iree.compiler import tools as ireec
from iree.compiler.extras import onnx_importer

from qconform import adapt, platform
from qconform.runner import BaseRunner, Inputs, Outputs, Prepared, Unsupported
from qconform.runners.common import joined_lines
from qconform.declarations.runtimes.iree import IREE, iree_flags

TP = onnx.TensorProto
H = rt.HalElementType
_HAL_OF_ONNX = {
    TP.FLOAT: H.FLOAT_32, TP.FLOAT16: H.FLOAT_16, TP.BFLOAT16: H.BFLOAT_16, TP.DOUBLE: H.FLOAT_64,
    TP.INT8: H.SINT_8, TP.UINT8: H.UINT_8, TP.INT16: H.SINT_16, TP.UINT16: H.UINT_16,
    TP.INT32: H.SINT_32, TP.UINT32: H.UINT_32, TP.INT64: H.SINT_64, TP.UINT64: H.UINT_64,
    TP.INT4: H.SINT_4, TP.UINT4: H.UINT_4,
    TP.FLOAT8E4M3FN: H.FLOAT_8_E4M3_FN, TP.FLOAT8E4M3FNUZ: H.FLOAT_8_E4M3_FNUZ,
    TP.FLOAT8E5M2: H.FLOAT_8_E5M2, TP.FLOAT8E5M2FNUZ: H.FLOAT_8_E5M2_FNUZ, TP.FLOAT8E8M0: H.FLOAT_8_E8M0_FNU,
}
_ONNX_OF_HAL = {int(v): k for k, v in _HAL_OF_ONNX.items()}
_SIGNLESS = {int(H.INT_4): 4, int(H.INT_8): 8, int(H.INT_16): 16, int(H.INT_32): 32, int(H.INT_64): 64}
_INT_BITS = {TP.INT4: 4, TP.UINT4: 4, TP.INT8: 8, TP.UINT8: 8, TP.INT16: 16, TP.UINT16: 16,
             TP.INT32: 32, TP.UINT32: 32, TP.INT64: 64, TP.UINT64: 64}
_SIGNED_OF_BITS = {4: TP.INT4, 8: TP.INT8, 16: TP.INT16, 32: TP.INT32, 64: TP.INT64}


def compile_errors(exc: BaseException) -> str:
    """iree-compile's error diagnostics on one line ("<stdin>:6:10: error: X" -> "X")."""
    text = str(exc)
    diag = text.split("Diagnostics:\n", 1)[-1].split("\n\nInvoked with:", 1)[0]
    errs = [re.sub(r"^\S*:\d+:\d+: error: ", "", ln.strip()) for ln in diag.splitlines() if " error: " in ln]
    errs = [re.sub(r" loc\(.*\)$", "", e) for e in errs]
    code = int(m.group(1)) if (m := re.search(r"Error code: (-?\d+)", text)) else None
    if code is not None and code < 0 and not errs:  # killed by a signal: the innermost frames of its stack dump
        found = re.findall(r"^\s*#\d+ 0x[0-9a-f]+ (\S.*?)(?: \S+:\d+:\d+)?$", diag, re.MULTILINE)
        frames = [f.split("(")[0] for f in found if not f.startswith(("llvm::sys::", "SignalHandler", "("))]
        return f"iree-compile crashed (signal {-code}) in " + " <- ".join(frames[:2] or ["?"])
    head = f"iree-compile exit {code}: " if code is not None else "iree-compile: "
    return head + (" | ".join(dict.fromkeys(errs)) or joined_lines(diag or text))


def _store(path: str, data: bytes) -> None:
    """Write a cache entry whole or not at all (another worker may be writing the same one)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".part-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


class IreeRunner(BaseRunner):
    name = "iree"

    def __init__(self, driver: str = IREE.settings["driver"], cpu: str = IREE.settings["cpu"], cache: str = ""):
        if driver not in ("local-sync", "local-task"):
            raise TypeError(f"driver must be local-sync or local-task, not {driver!r}")
        self.driver, self.cpu = driver, cpu
        self.flags = iree_flags(cpu)
        #: A directory of compiled modules (``--runner-opt cache=DIR`` or $QCONFORM_IREE_CACHE): a whole-corpus
        #: pass compiles ~23,000 models (49 min on 2 cores); after a corpus change only the changed ones.
        self.cache = cache or os.environ.get("QCONFORM_IREE_CACHE", "")

    def _cache_key(self, asm: str) -> str:
        """What determines iree-compile's output: the MLIR it is given, the compiler's version and flags."""
        what = [asm, _pkg_version("iree-base-compiler"), IREE.settings["input_type"],
                *IREE.settings["target_backends"], *self.flags]
        return hashlib.sha256("\0".join(what).encode()).hexdigest()

    def _compile(self, asm: str) -> bytes:
        """iree-compile, or the module (or the refusal) it gave for the same input before (``cache``)."""
        path = os.path.join(self.cache, self._cache_key(asm)) if self.cache else ""
        if path and os.path.exists(path + ".vmfb"):
            with open(path + ".vmfb", "rb") as f:
                return f.read()
        if path and os.path.exists(path + ".refused"):
            with open(path + ".refused", encoding="utf-8") as f:
                raise Unsupported(f.read())
        with tempfile.TemporaryDirectory(prefix="qconform-iree-") as tmp:
            src, out = os.path.join(tmp, "model.mlir"), os.path.join(tmp, "model.vmfb")
            with open(src, "w") as f:
                f.write(asm)
            try:
                ireec.compile_file(src, input_type=IREE.settings["input_type"],
                                   target_backends=list(IREE.settings["target_backends"]), extra_args=self.flags,
                                   output_file=out)
            except ireec.CompilerToolError as exc:
                why = compile_errors(exc)
                if path and "crashed" not in why:  # a crash may be the machine's, not the model's: never kept
                    _store(path + ".refused", why.encode())
                raise Unsupported(why) from None
            with open(out, "rb") as f:
                vmfb = f.read()
        if path:
            _store(path + ".vmfb", vmfb)
        return vmfb

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "version": _pkg_version(str(IREE.dist)), "device": f"cpu ({self.driver})",
                "options": {"compiler": _pkg_version("iree-base-compiler"), "input_type": IREE.settings["input_type"],
                            "target_backends": list(IREE.settings["target_backends"]), "driver": self.driver, "compile_flags": self.flags,
                            "importer": "iree.compiler.extras.onnx_importer (as iree-import-onnx)",
                            **({"compile_cache": "on (modules keyed by MLIR, compiler version and flags)"}
                               if self.cache else {})},
                "platform": platform.info()}

    def prepare(self, model: onnx.ModelProto) -> Prepared:
        try:
            # iree-import-onnx infers shapes first: without it an intermediate value of a graph (a QDQ
            # pattern's) has no type and imports as !torch.none, which no lowering takes
            model = onnx.shape_inference.infer_shapes(model)
            with ir.Context() as context:
                info = onnx_importer.ModelInfo(model)
                module = info.create_module(context=context).operation
                onnx_importer.NodeImporter.define_function(info.main_graph, module).import_all()
                module.verify()
                asm = module.get_asm(assume_verified=True)
        except Exception as exc:  # OnnxImportError ("Unknown ONNX tensor element type: 23"), ...
            raise Unsupported("import: " + joined_lines(exc, with_type=True)) from None
        vmfb = self._compile(asm)
        in_names = [i.name for i in model.graph.input]
        declared = [o.type.tensor_type.elem_type for o in model.graph.output]

        def run(inputs: Inputs) -> Outputs:
            instance = device = vm_module = context = args = rets = buf = view = None
            try:
                instance = rt.VmInstance()
                device = rt.get_driver(self.driver).create_default_device()
                vm_module = rt.VmModule.copy_buffer(instance, vmfb)
                context = rt.VmContext(instance, [rt.create_hal_module(instance, device), vm_module])
                entry = [f for f in vm_module.function_names if not f.startswith("__") and not f.endswith("$async")]
                if len(entry) != 1:
                    raise RuntimeError(f"IREE module exports {vm_module.function_names}, expected one entry function")
                args = rt.VmVariantList(len(in_names))
                for n in in_names:
                    arr, t = inputs[n], adapt.elem_type(inputs[n].dtype)
                    raw = np.frombuffer(adapt.to_bytes(arr), np.uint8).copy()
                    buf = device.allocator.allocate_buffer_copy(memory_type=rt.MemoryType.DEVICE_LOCAL,
                                                                allowed_usage=rt.BufferUsage.DEFAULT, device=device,
                                                                buffer=raw if raw.size else np.zeros(1, np.uint8))
                    args.push_ref(rt.HalBufferView(buf, list(arr.shape), _HAL_OF_ONNX[t]))
                rets = rt.VmVariantList(len(declared))
                try:
                    context.invoke(vm_module.lookup_function(entry[0]), args, rets)
                except Exception as exc:
                    raise RuntimeError(f"iree invoke: {type(exc).__name__}: {exc}") from None
                if len(rets) != len(declared):
                    raise RuntimeError(f"IREE returned {len(rets)} outputs, the model declares {len(declared)}")
                results = []
                for k in range(len(declared)):
                    view = rets.get_as_object(k, rt.HalBufferView)
                    size = view.byte_length
                    raw = view.map().asarray((size,), np.dtype(np.uint8)).copy() if size else np.zeros(0, np.uint8)
                    results.append((int(view.element_type), tuple(view.shape), raw))
            finally:  # released in this order: local-task segfaults when the device goes before its users
                view = buf = rets = args = context = vm_module = device = instance = None
            outs = []
            for k, ((et, shape, raw), decl) in enumerate(zip(results, declared)):
                if et in _SIGNLESS:  # signless bits: read in the declared type where it is an integer that wide
                    bits = _SIGNLESS[et]
                    onnx_t = decl if _INT_BITS.get(decl) == bits else _SIGNED_OF_BITS[bits]
                elif et in _ONNX_OF_HAL:
                    onnx_t = _ONNX_OF_HAL[et]
                else:
                    raise RuntimeError(f"output {k}: IREE element type {et:#x} has no ONNX counterpart here")
                outs.append(adapt.from_bytes(raw, onnx_t, shape))
            return outs

        return run

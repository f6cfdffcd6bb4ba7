"""Apache TVM's Relax ONNX frontend, LLVM CPU target: ``pip install 'qconform[tvm]'``.

``tvm.relax.frontend.onnx.from_onnx(model)`` (initializers folded in as constants, the frontend's
default), ``tvm.compile(mod, target="llvm")`` (no ``-mcpu``: LLVM's generic CPU for the host
triple) and ``relax.VirtualMachine(executable, tvm.cpu())``. ``TVM_NUM_THREADS=1`` (unless set; when the runner is chosen):
qconform already runs two workers, and TVM's pool would otherwise take every core.

Inputs travel as ``tvm.runtime.tensor(array)``, which takes numpy and the byte-wide ml_dtypes
(bfloat16, the float8 kinds, float8e8m0, float4e2m1 one element per byte) as they are; TVM keeps
int2/uint2/int4/uint4 and float6 packed and refuses an unpacked array of them. Unsupported: from_onnx
or tvm.compile refuses the model (an op the frontend lacks, "blocked quantization is not supported
yet", a dtype Relax's type inference rejects, ...), with TVM's own message on one line (the
"Error converting operator" line the frontend prints to stdout first is dropped); or, when TVM
accepted it, a graph input or output has one of those packed types. A failing
run is an error with TVM's full text. Outputs are ``Tensor.numpy()`` as TVM produced them: an
element type other than the declared one is the harness's to judge (a fail), never converted."""
from __future__ import annotations

import contextlib
import io
import os
from typing import Any

import numpy as np
import onnx

from qconform import platform
from qconform.runner import BaseRunner, Inputs, Outputs, Prepared, Unsupported
from qconform.runners.common import io_types, joined_lines
from qconform.declarations.runtimes.tvm import TVM

TP = onnx.TensorProto
#: Types TVM stores packed (sub-byte bit streams): ``tvm.runtime.tensor`` rejects the unpacked
#: ml_dtypes array ("TensorCopyFromBytes: size mismatch").
_PACKED = {TP.INT4, TP.UINT4, TP.INT2, TP.UINT2, TP.FLOAT6E2M3, TP.FLOAT6E3M2}
TARGET = TVM.settings["target"]


class TvmRunner(BaseRunner):
    name = "tvm"

    def __init__(self) -> None:
        # TVM_NUM_THREADS (unless set) before tvm is imported: here, when the runner is chosen, never
        # when this module is imported; the import here says a missing extra when the runner is chosen.
        for key, value in TVM.settings["env"].items():
            os.environ.setdefault(key, value)
        import tvm  # noqa: F401

    def describe(self) -> dict[str, Any]:
        import tvm

        return {"name": self.name, "version": tvm.__version__, "device": "cpu (tvm.cpu(0))",
                "options": {"target": TARGET,
                            "target_attrs": {str(k): str(v) for k, v in tvm.target.Target(TARGET).attrs.items()},
                            "TVM_NUM_THREADS": os.environ.get("TVM_NUM_THREADS"),
                            "frontend": "tvm.relax.frontend.onnx.from_onnx (params as constants)",
                            "executor": "relax.VirtualMachine"},
                "platform": platform.info()}

    def prepare(self, model: onnx.ModelProto) -> Prepared:
        import tvm
        from tvm import relax
        from tvm.relax.frontend.onnx import from_onnx

        packed = io_types(model, lambda t: t in _PACKED)
        stage = "from_onnx"
        try:
            # the frontend prints "Error converting operator ..." to stdout before re-raising
            with contextlib.redirect_stdout(io.StringIO()):
                mod = from_onnx(model)
            stage = "compile"
            executable = tvm.compile(mod, target=TARGET)
        except Exception as exc:  # OpNotImplemented, ValueError, TypeError from type inference, ...
            raise Unsupported(f"{stage}: {joined_lines(exc, with_type=True)}") from None
        if packed:  # compiled, but the graph I/O cannot travel
            raise Unsupported(f"tvm.runtime.tensor keeps {', '.join(packed)} packed and cannot carry "
                              f"one element per array element")
        names = [i.name for i in model.graph.input]
        n_out = len(model.graph.output)

        def run(inputs: Inputs) -> Outputs:
            dev = tvm.cpu(0)
            vm = relax.VirtualMachine(executable, dev)  # fresh per call: no state between calls
            args = [tvm.runtime.tensor(np.array(inputs[n], copy=True), dev) for n in names]
            try:
                res = vm["main"](*args)
            except Exception as exc:
                raise RuntimeError(f"tvm run: {type(exc).__name__}: {exc}") from None
            res = [res] if isinstance(res, tvm.runtime.Tensor) else list(res)
            if len(res) != n_out:
                raise RuntimeError(f"TVM returned {len(res)} outputs, the model declares {n_out}")
            return [np.array(t.numpy(), copy=True) for t in res]

        return run

"""cpu-kernel: qconform's own C kernels (qconform/kernels/qkernels.h) built with the host gcc.

The same header the GPU runner launches, compiled at first use (qconform/kernels/build.py:
-O2, vectorized, -ffp-contract=off, no fast-math) and cached. It reads the node like cpu-ref and computes the reading the latest spec
text states (so it passes the strict profile). Unsupported: ops other than ai.onnx
QuantizeLinear / DequantizeLinear, types or attributes the kernels do not cover, and machines
without a C compiler ("no C compiler: ...").
"""
from __future__ import annotations

import platform
from typing import Any

import numpy as np
import onnx

import qconform
from qconform import kernels as K
from qconform.kernels import build
from qconform.runner import BaseRunner, Prepared


def _ptr(a: np.ndarray | None) -> int | None:
    return None if a is None else a.ctypes.data


class CpuKernelRunner(BaseRunner):
    name = "cpu-kernel"

    def __init__(self, extra_cflags: tuple[str, ...] = ()) -> None:
        self.extra_cflags = tuple(extra_cflags)
        self.lib = build.load(self.extra_cflags)  # Unsupported("no C compiler: ...") where there is none

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "version": qconform.__version__, "device": "cpu",
                "options": {"cflags": " ".join(build.CFLAGS + self.extra_cflags)},
                "implementation": f"qconform/kernels/qkernels.h via {build.find_compiler()} "
                                  f"({platform.machine()})"}

    def launch(self, op: str, *, x, xk, s, sk, zp, ok, n, index, **q) -> np.ndarray:
        out_t = K.KINDS[ok]
        y = np.empty(n, dtype=K.storage_dtype(qconform.dtypes.get(out_t)))
        if n == 0:
            return y
        if op == "QuantizeLinear":
            rc = self.lib.qk_quantize(_ptr(x), xk, _ptr(s), sk, _ptr(zp), ok, q["prec"], q["saturate"],
                                      q["fnuz_inf_saturates"], n, *index.args, y.ctypes.data)
        else:
            rc = self.lib.qk_dequantize(_ptr(x), xk, _ptr(s), sk, _ptr(zp), ok, n, *index.args, y.ctypes.data)
        if rc != 0:
            raise RuntimeError(f"{op} kernel returned {rc}")
        return y

    def prepare(self, model: onnx.ModelProto) -> Prepared:
        plan = K.read_plan(model, self.name)
        return lambda feeds: K.run_plan(plan, feeds, self.launch)


__all__ = ["CpuKernelRunner"]

"""gpu-kernel: qconform's own kernels (qconform/kernels/qkernels.h) on a CUDA device via CuPy.

The same header the cpu-kernel runner builds with gcc, compiled by NVRTC through
``cupy.RawModule`` with the IEEE flags of qconform/kernels/ptx.py (``--fmad=false``, precise
division, no flush-to-zero) and launched as grid-stride loops. Where CuPy or a CUDA device is
missing the runner cannot start: constructing it raises ``Unsupported`` with the reason, e.g.
``no CUDA device (cupy: CUDARuntimeError: cudaErrorInsufficientDriver ...)`` (the CuPy import works
without a driver; nothing else does). Install with ``pip install 'qconform[gpu]'``.

Option: ``device`` (default 0).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx

import qconform
from qconform import dtypes
from qconform import kernels as K
from qconform.kernels import ptx
from qconform.kernels import HEADER
from qconform.runner import BaseRunner, Prepared, Unsupported

THREADS = 256


def _cupy():
    try:
        import cupy
    except Exception as exc:  # ImportError, or a CUDA library missing at import
        raise Unsupported(f"no CUDA device (cupy: {type(exc).__name__}: {exc}); pip install 'qconform[gpu]'") from None
    return cupy


class GpuKernelRunner(BaseRunner):
    name = "gpu-kernel"

    def __init__(self, device: str = "0") -> None:
        cp = _cupy()
        try:
            count = cp.cuda.runtime.getDeviceCount()
        except Exception as exc:
            raise Unsupported(f"no CUDA device (cupy: {type(exc).__name__}: {exc})") from None
        if count == 0:
            raise Unsupported("no CUDA device (cupy: 0 devices)")
        self.cp = cp
        self.device = int(device)
        if not 0 <= self.device < count:
            raise TypeError(f"device={device}: this machine has CUDA devices 0..{count - 1}")
        with cp.cuda.Device(self.device):
            props = cp.cuda.runtime.getDeviceProperties(self.device)
            self.device_name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
            self.module = cp.RawModule(code=HEADER.read_text(), options=tuple(ptx.FLAGS), backend="nvrtc")
            self.kernels = {"QuantizeLinear": self.module.get_function("qk_quantize_kernel"),
                            "DequantizeLinear": self.module.get_function("qk_dequantize_kernel")}

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "version": qconform.__version__, "device": f"cuda:{self.device}",
                "options": {"nvrtc": " ".join(ptx.FLAGS)},
                "implementation": f"qconform/kernels/qkernels.h via CuPy RawModule on {self.device_name}"}

    def launch(self, op: str, *, x, xk, s, sk, zp, ok, n, index, **q) -> np.ndarray:
        cp = self.cp
        out_t = dtypes.get(K.KINDS[ok])
        if n == 0:
            return np.empty(0, dtype=K.storage_dtype(out_t))
        if zp is None:  # a zero code per parameter: the same value as an absent zero point
            zp = np.zeros(s.size, dtype=K.storage_dtype(out_t if op == "QuantizeLinear" else dtypes.get(K.KINDS[xk])))
        i32, i64 = np.int32, np.int64
        with cp.cuda.Device(self.device):
            dx, ds, dz = cp.asarray(x), cp.asarray(s), cp.asarray(zp)
            dy = cp.empty(n, dtype=K.storage_dtype(out_t))
            idx = [i64(v) for v in index.args]
            if op == "QuantizeLinear":
                args = (dx, i32(xk), ds, i32(sk), dz, i32(ok), i32(q["prec"]), i32(q["saturate"]),
                        i32(q["fnuz_inf_saturates"]), i64(n), *idx, dy)
            else:
                args = (dx, i32(xk), ds, i32(sk), dz, i32(ok), i64(n), *idx, dy)
            blocks = int(min((n + THREADS - 1) // THREADS, 65535))
            self.kernels[op]((blocks,), (THREADS,), args)
            return cp.asnumpy(dy)

    def prepare(self, model: onnx.ModelProto) -> Prepared:
        plan = K.read_plan(model, self.name)
        return lambda feeds: K.run_plan(plan, feeds, self.launch)


__all__ = ["GpuKernelRunner"]

"""gpu-kernel: qconform's own kernels (qconform/kernels/qkernels.h) on a CUDA device via CuPy.

The same source the cpu-kernel runner builds with gcc (``qkernels.h`` and its parts), made into PTX by the one build of
qconform/kernels/ptx.py (NVRTC with ``--fmad=false``, precise division, no flush-to-zero; linted)
for the device's own architecture, and loaded from the file ``ptx.approved`` wrote after linting it
again: ``cupy.RawModule(path=...)``. The GPU therefore runs exactly the PTX the lint read; its
SHA-256 is in ``describe()``. (CuPy's own compile path, ``RawModule(code=...)``, is never used: it
once produced a module that flushed subnormals.) Launched as grid-stride loops, one thread per
output element; the node is read by the kernels' plan, as cpu-kernel reads it.

Where CuPy, a CUDA device or NVRTC is missing the runner cannot start: constructing it raises
``Unsupported`` with the reason, e.g. ``no CUDA device (cupy: CUDARuntimeError:
cudaErrorInsufficientDriver ...)`` (the CuPy import works without a driver; nothing else does).
Install with ``pip install 'qconform[gpu]'`` (CUDA 12) or ``'qconform[gpu-cu13]'`` (CUDA 13).

Option: ``device`` (default 0).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import onnx

import qconform
from qconform.kernels import ENTRY_POINTS, PARTS, SINGLE_BLOCK, Launch, ptx
from qconform.kernels.plan import read_plan
from qconform.runner import BaseRunner, Prepared, Unsupported

THREADS = 256
MAX_BLOCKS = 1 << 16  # grid-stride loops: more blocks than this only queue


def _cupy():
    try:
        import cupy
    except Exception as exc:  # ImportError, or a CUDA library missing at import
        raise Unsupported(f"no CUDA device (cupy: {type(exc).__name__}: {exc}); pip install 'qconform[gpu]' (CUDA 12) "
                          "or 'qconform[gpu-cu13]' (CUDA 13)") from None
    return cupy


@dataclass(frozen=True)
class ModuleSource:
    """What a device's module is loaded from: the build (text, digest, lint) and the approved file."""

    built: ptx.Ptx
    path: Path


def module_source(arch: str) -> ModuleSource:
    """The one build for ``arch``, then the file ``ptx.approved`` writes after linting the text
    again (PtxRefused: the module is never loaded)."""
    built = ptx.build(arch)
    return ModuleSource(built, ptx.approved(built.text))


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
            self.arch = f"sm_{props['major']}{props['minor']}"
            self.source = module_source(self.arch)  # NvrtcUnavailable (Unsupported) without NVRTC
            try:
                self.module = cp.RawModule(path=str(self.source.path))
                self.functions = {name: self.module.get_function(f"qk_{name}_kernel") for name in ENTRY_POINTS}
            except Exception as exc:  # e.g. a PTX ISA newer than the driver takes
                raise Unsupported(f"the CUDA driver refused the linted PTX ({self.source.built.nvrtc} NVRTC, "
                                  f"{self.arch}): {type(exc).__name__}: {exc}") from None

    def describe(self) -> dict[str, Any]:
        built = self.source.built
        return {"name": self.name, "version": qconform.__version__, "device": f"cuda:{self.device}",
                "options": {"nvrtc": " ".join(built.flags), "arch": self.arch, "nvrtc_version": built.nvrtc,
                            "ptx_sha256": built.digest},
                "implementation": f"qconform/kernels/qkernels.h, linted PTX {built.digest[:12]} "
                                  f"(NVRTC {built.nvrtc}, {self.arch}) on {self.device_name}"}

    def execute(self, launch: Launch) -> Mapping[str, np.ndarray]:
        """One entry point on the device: inputs copied over, outputs allocated there and copied back."""
        cp = self.cp
        with cp.cuda.Device(self.device):
            outs = {name: cp.empty(size, dtype=dt) for name, (dt, size) in launch.outputs.items()}
            argv: list[Any] = []
            for name, kind in ENTRY_POINTS[launch.entry]:
                value = launch.args.get(name)
                if kind == "out":
                    argv.append(outs[name])
                elif kind == "in":
                    argv.append(cp.asarray(np.ascontiguousarray(value)))
                else:
                    argv.append(np.int32(value) if kind == "i32" else np.int64(value))
            if launch.entry in SINGLE_BLOCK:
                self.functions[launch.entry]((1,), (SINGLE_BLOCK[launch.entry],), tuple(argv))
            elif launch.work:
                blocks = min((launch.work + THREADS - 1) // THREADS, MAX_BLOCKS)
                self.functions[launch.entry]((blocks,), (THREADS,), tuple(argv))
            return {name: cp.asnumpy(arr) for name, arr in outs.items()}

    def prepare(self, model: onnx.ModelProto) -> Prepared:
        plan = read_plan(model, self.name)
        return lambda feeds: plan.run(feeds, self.execute)


__all__ = ["GpuKernelRunner", "PARTS", "ModuleSource", "module_source"]

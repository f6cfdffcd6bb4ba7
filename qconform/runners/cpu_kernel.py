"""cpu-kernel: qconform's own C kernels (qconform/kernels/qkernels.h) built with the host gcc.

The same header the GPU runner launches, compiled at first use (qconform/kernels/build.py:
-O2, vectorized, -ffp-contract=off, no fast-math) and cached. It reads the node through the kernels'
plan (qconform/kernels/plan.py) and computes the reading the latest spec text states (so it passes
the strict profile): the operators whose declarations say the kernels implement them
(qconform/declarations/operators.py, ``kernel``). Unsupported: other ops, types or attributes the kernels do not cover, and
machines without a C compiler ("no C compiler: ...").
"""
from __future__ import annotations

import platform
from typing import Any, Mapping

import numpy as np
import onnx

import qconform
from qconform.kernels import ENTRY_POINTS, Launch, build
from qconform.kernels.plan import read_plan
from qconform.runner import BaseRunner, Prepared


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

    def execute(self, launch: Launch) -> Mapping[str, np.ndarray]:
        """One entry point on the host: arrays by pointer, scalars by value, outputs allocated here."""
        outs = {name: np.empty(size, dtype=dt) for name, (dt, size) in launch.outputs.items()}
        argv: list[Any] = []
        arrays = []  # alive until the call returns
        for name, kind in ENTRY_POINTS[launch.entry]:
            if kind in ("in", "out"):
                arrays.append(outs[name] if kind == "out" else np.ascontiguousarray(launch.args[name]))
                argv.append(arrays[-1].ctypes.data)
            else:
                argv.append(int(launch.args[name]))
        rc = getattr(self.lib, f"qk_{launch.entry}")(*argv)
        if rc != 0:
            raise RuntimeError(f"{launch.entry} kernel returned {rc}")
        return outs

    def prepare(self, model: onnx.ModelProto) -> Prepared:
        plan = read_plan(model, self.name)
        return lambda feeds: plan.run(feeds, self.execute)


__all__ = ["CpuKernelRunner"]

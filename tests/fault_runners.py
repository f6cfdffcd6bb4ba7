"""Runners that misbehave on purpose, one fault per chosen case, healthy (cpu-ref) elsewhere.

The fault is picked from the model's graph name (the case id), so the same case always gets the
same fault in whichever process runs it."""
from __future__ import annotations

import ctypes
import os
import time

import numpy as np

from qconform.runners.cpu_ref import CpuRefRunner

# case id -> fault. The ids are QuantizeLinear-13 / DequantizeLinear-13 cases of the basic family.
FAULTS = {
    "QuantizeLinear-13/float32-int8/basic/per-tensor": "segfault",
    "QuantizeLinear-13/float32-int8/basic/per-axis": "abort",
    "QuantizeLinear-13/float32-uint8/basic/per-tensor": "hang",
    "QuantizeLinear-13/float32-uint8/basic/per-axis": "memory",
    "QuantizeLinear-13/int32-float32-int8/basic/per-tensor": "exception",
    "QuantizeLinear-13/int32-float32-int8/basic/per-axis": "wrong-dtype",
    "QuantizeLinear-13/int32-float32-uint8/basic/per-tensor": "wrong-shape",
    "QuantizeLinear-13/int32-float32-uint8/basic/per-axis": "none",
    "DequantizeLinear-13/int8-float32/basic/per-tensor": "extra-output",
    "DequantizeLinear-13/int8-float32/basic/per-axis": "mutate-input",
    "DequantizeLinear-13/uint8-float32/basic/per-tensor": "exit",
}


class FaultRunner(CpuRefRunner):
    name = "faulty"

    def prepare(self, model):
        healthy = super().prepare(model)
        fault = next((f for cid, f in FAULTS.items() if cid.replace("/", "_") == model.graph.name), None)

        def run(feeds):
            if fault == "segfault":
                ctypes.string_at(0)
            if fault == "abort":
                os.abort()
            if fault == "exit":
                os._exit(3)
            if fault == "hang":
                time.sleep(3600)
            if fault == "memory":  # bounded by --worker-memory-mb
                np.ones(8 * 1024**3, dtype=np.uint8)
            if fault == "exception":
                raise RuntimeError("kernel exploded")
            out = healthy(feeds)
            if fault == "wrong-dtype":
                return [out[0].astype(np.int16)]
            if fault == "wrong-shape":
                return [out[0].reshape(1, -1)]
            if fault == "none":
                return None
            if fault == "extra-output":
                return out + [out[0]]
            if fault == "mutate-input":
                next(iter(feeds.values()))[...] = 0
            return out

        return run


class PackCrashRunner(CpuRefRunner):
    """Dies (a segfault) on any model of more than one node -- a packed model of single-node cases --
    and runs every single model healthily: a crash inside a packed run must never be any case's verdict."""

    name = "pack-crash"

    def prepare(self, model):
        healthy = super().prepare(model)

        def run(feeds):
            if len(model.graph.node) > 1 and model.graph.name.startswith("packed_"):
                ctypes.string_at(0)
            return healthy(feeds)

        return run


class PackDiffersRunner(CpuRefRunner):
    """Healthy alone; inside a packed model it flips the lowest bit of every integer output: what
    ``qconform facts packing`` must measure as differing."""

    name = "pack-differs"

    def prepare(self, model):
        healthy = super().prepare(model)
        packed = model.graph.name.startswith("packed_")

        def run(feeds):
            out = healthy(feeds)
            return [o ^ np.ones_like(o) if packed and o.dtype.kind in "iu" and o.dtype.itemsize <= 4 else o
                    for o in out]

        return run

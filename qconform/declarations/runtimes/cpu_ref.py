"""qconform's own cpu-ref runner, declared (its runner ``runners.cpu_ref``): a bundled runner, no runtime anyone ships."""
from __future__ import annotations

from qconform.declarations.runtime import Runtime

CPU_REF = Runtime("cpu-ref", "qconform.runners.cpu_ref:CpuRefRunner")

__all__ = ["CPU_REF"]

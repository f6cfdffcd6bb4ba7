"""qconform's own cpu-kernel runner, declared (its runner ``runners.cpu_kernel``): a bundled runner, no runtime anyone ships."""
from __future__ import annotations

from qconform.declarations.runtime import KERNEL_SCOPE, KERNEL_SCOPE_REASON, Runtime

CPU_KERNEL = Runtime("cpu-kernel", "qconform.runners.cpu_kernel:CpuKernelRunner", scope=KERNEL_SCOPE, scope_reason=KERNEL_SCOPE_REASON)

__all__ = ["CPU_KERNEL"]

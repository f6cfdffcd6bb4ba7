"""qconform's own gpu-kernel runner, declared (its runner ``runners.gpu_kernel``): a bundled runner, no runtime anyone ships."""
from __future__ import annotations

from qconform.declarations.runtime import KERNEL_SCOPE, KERNEL_SCOPE_REASON, Runtime

GPU_KERNEL = Runtime("gpu-kernel", "qconform.runners.gpu_kernel:GpuKernelRunner", also=("cupy-cuda12x",),
                    scope=KERNEL_SCOPE, scope_reason=KERNEL_SCOPE_REASON)

__all__ = ["GPU_KERNEL"]

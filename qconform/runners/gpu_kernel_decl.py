"""qconform's own gpu-kernel runner, declared (beside ``gpu_kernel``): a bundled runner, no runtime anyone ships."""
from __future__ import annotations

from qconform.runners.declaration import Runtime

GPU_KERNEL = Runtime("gpu-kernel", "qconform.runners.gpu_kernel:GpuKernelRunner", also=("cupy-cuda12x",))

__all__ = ["GPU_KERNEL"]

"""Each runtime qconform certifies, declared once, beside its runner
(``qconform/runners/<runner>_decl.py``: its ``--runner`` name and bundled runner, the distribution and
qconform extra that bring it, how to read its installed version, the settings its runner applies,
and the template of the standalone reproducer ``qconform findings`` writes for it); this module
collects them in the order every listing uses.

The runner registry (``qconform.runner``: ``BUNDLED``, ``EXTRAS``, ``VARIANTS``, ``resolve``), the
facts (``qconform.facts.SOURCES``), the findings (``qconform.apps.findings.TEMPLATES``) and the
scoreboard read these declarations; the runners read their settings from them, and so do their
reproducer templates, so a reproducer cannot drift from the run that found it. Importing this
module imports no runtime (``qconform.runners.declaration`` says why).
"""
from __future__ import annotations

from qconform.runners.cpu_kernel_decl import CPU_KERNEL
from qconform.runners.cpu_ref_decl import CPU_REF
from qconform.runners.declaration import ATTRIBUTE, METADATA, THIRD_PARTY_CHECK, Runtime, Template, ml_dtype
from qconform.runners.gpu_kernel_decl import GPU_KERNEL
from qconform.runners.iree_decl import IREE
from qconform.runners.onnx_reference_decl import ONNX_REFERENCE
from qconform.runners.onnxruntime_decl import ONNXRUNTIME, ORT_VARIANTS
from qconform.runners.openvino_decl import OPENVINO
from qconform.runners.ortweb_decl import ONNXRUNTIME_WEB
from qconform.runners.tinygrad_decl import TINYGRAD
from qconform.runners.tract_decl import TRACT
from qconform.runners.tvm_decl import TVM

#: Every runtime, by name, in the order of every listing (the scoreboard's tables, the findings
#: index): the bundled runners first, then the variants.
RUNTIMES: dict[str, Runtime] = {rt.name: rt for rt in (
    ONNXRUNTIME, ONNX_REFERENCE, CPU_REF, CPU_KERNEL, GPU_KERNEL,
    OPENVINO, TRACT, TINYGRAD, TVM, IREE, ONNXRUNTIME_WEB, *ORT_VARIANTS,
)}

__all__ = ["ATTRIBUTE", "METADATA", "RUNTIMES", "THIRD_PARTY_CHECK", "Runtime", "Template", "ml_dtype"]

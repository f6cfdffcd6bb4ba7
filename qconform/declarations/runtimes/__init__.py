"""Each runtime qconform certifies, declared once, in a module of this package named after its runner
(``qconform/declarations/runtimes/<runner>.py`` for ``qconform/runners/<runner>[_runner].py``: its
``--runner`` name and bundled runner, the distribution and qconform extra that bring it, how to read
its installed version, the settings its runner applies, and the template of the standalone
reproducer ``qconform findings`` writes for it); this package collects them in the order every
listing uses.

The runner registry (``qconform.runner``: ``BUNDLED``, ``EXTRAS``, ``VARIANTS``, ``resolve``), the
tools' availability lines (``qconform.tools``), the facts (``qconform.facts.SOURCES``), the findings
(``qconform.apps.findings.TEMPLATES``) and the scoreboard read these declarations; the runners read
their settings from them, and so do their reproducer templates, so a reproducer cannot drift from
the run that found it. A leaf: importing it imports no runtime and no runner
(``qconform.declarations.runtime`` says why), so every layer above the types may read it.
"""
from __future__ import annotations

from qconform.declarations.runtimes.cpu_kernel import CPU_KERNEL
from qconform.declarations.runtimes.cpu_ref import CPU_REF
from qconform.declarations.runtime import ATTRIBUTE, METADATA, THIRD_PARTY_CHECK, Runtime, Template, ml_dtype
from qconform.declarations.runtimes.gpu_kernel import GPU_KERNEL
from qconform.declarations.runtimes.iree import IREE
from qconform.declarations.runtimes.onnx_reference import ONNX_REFERENCE
from qconform.declarations.runtimes.onnxruntime import ONNXRUNTIME, ORT_VARIANTS
from qconform.declarations.runtimes.openvino import OPENVINO
from qconform.declarations.runtimes.ortweb import ONNXRUNTIME_WEB
from qconform.declarations.runtimes.tinygrad import TINYGRAD
from qconform.declarations.runtimes.tract import TRACT
from qconform.declarations.runtimes.tvm import TVM

#: Every runtime, by name, in the order of every listing (the scoreboard's tables, the findings
#: index): the bundled runners first, then the variants.
RUNTIMES: dict[str, Runtime] = {rt.name: rt for rt in (
    ONNXRUNTIME, ONNX_REFERENCE, CPU_REF, CPU_KERNEL, GPU_KERNEL,
    OPENVINO, TRACT, TINYGRAD, TVM, IREE, ONNXRUNTIME_WEB, *ORT_VARIANTS,
)}

__all__ = ["ATTRIBUTE", "METADATA", "RUNTIMES", "THIRD_PARTY_CHECK", "Runtime", "Template", "ml_dtype"]

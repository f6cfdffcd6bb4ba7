"""TVM, declared once (its runner ``runners.tvm_runner``): its runner's settings and its reproducer template."""
from __future__ import annotations

import json
from types import MappingProxyType

from qconform.declarations.runtime import THIRD_PARTY_CHECK, Runtime, with_template

TVM_SETTINGS = MappingProxyType({
    "target": "llvm",  # no -mcpu: LLVM's generic CPU for the host triple
    #: set (unless set) before tvm is imported, when the runner is chosen: qconform already runs two
    #: workers, and TVM's pool would otherwise take every core
    "env": MappingProxyType({"TVM_NUM_THREADS": "1"}),
})
TVM = with_template(
    Runtime("tvm", "qconform.runners.tvm_runner:TvmRunner", dist="apache-tvm", extra="tvm", module="tvm",
            settings=TVM_SETTINGS, check=THIRD_PARTY_CHECK),
    "import onnx\nimport tvm\nfrom tvm import relax\nfrom tvm.relax.frontend.onnx import from_onnx",
    "tvm.__version__",
    f"""\
vm = relax.VirtualMachine(tvm.compile(from_onnx(onnx.load("model.onnx")), target={json.dumps(TVM_SETTINGS["target"])}), tvm.cpu(0))
res = vm["main"](*[tvm.runtime.tensor(v, tvm.cpu(0)) for v in inputs.values()])
actual = dict(zip(expected, (r.numpy() for r in ([res] if isinstance(res, tvm.runtime.Tensor) else res))))
""")

__all__ = ["TVM", "TVM_SETTINGS"]

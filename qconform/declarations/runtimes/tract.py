"""tract, declared once (its runner ``runners.tract_runner``), with its reproducer template."""
from __future__ import annotations

from qconform.declarations.runtime import THIRD_PARTY_CHECK, Runtime, with_template

TRACT = with_template(
    Runtime("tract", "qconform.runners.tract_runner:TractRunner", dist="tract", extra="tract", module="tract",
            check=THIRD_PARTY_CHECK),
    "import tract", "tract.version()",
    """\
model = tract.onnx().load("model.onnx").into_model().into_runnable()
actual = dict(zip(expected, (t.to_numpy() for t in model.run(list(inputs.values())))))
""")

__all__ = ["TRACT"]

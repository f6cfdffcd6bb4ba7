"""onnx-reference: onnx's own ReferenceEvaluator, as shipped (not patched: its deviations are data)."""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

from qconform.runner import BaseRunner, Prepared, Unsupported


class OnnxReferenceRunner(BaseRunner):
    name = "onnx-reference"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "version": onnx.__version__, "device": "cpu", "options": {},
                "implementation": "onnx.reference.ReferenceEvaluator"}

    def prepare(self, model: onnx.ModelProto) -> Prepared:
        try:
            session = ReferenceEvaluator(model)
        except NotImplementedError as exc:
            raise Unsupported(f"onnx.reference: {exc}".splitlines()[0]) from None
        except Exception as exc:
            if "not implemented" in str(exc).lower() or "no implementation" in str(exc).lower():
                raise Unsupported(f"onnx.reference: {exc}".splitlines()[0]) from None
            raise

        def run(feeds):
            return [np.asarray(o) for o in session.run(None, dict(feeds))]

        return run

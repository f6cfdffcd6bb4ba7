"""deviation: the oracle with one known implementation deviation, run as if it were a runtime.

    pytest --runner=qconform.diagnosis.runner:DeviationRunner --runner-opt model=round-half-away

Like cpu-ref it reads the single node (or a QDQ pattern's graph) from the model and computes from the
inputs only (never the goldens); unlike cpu-ref it computes through ``qconform.diagnosis.models.get(model)``, so each
deviation model can be run against the corpus as a vendor runtime would be, and the report's
diagnosis can be checked to name it. ``--runner-opt model=spec`` runs the oracle's bodies with no
deviation (they must pass everything, like cpu-ref)."""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx

import qconform
from qconform.case import Draft
from qconform.diagnosis.models import MODELS, Deviation, Spec, deviating_oracle
from qconform.oracle import InvalidModel
from qconform.runner import BaseRunner, Inputs, Outputs, Prepared
from qconform.runners.cpu_ref import draft_from_model, pattern_draft_from_model, require_oracle_node


class DeviationRunner(BaseRunner):
    name = "deviation"

    def __init__(self, model: str = "") -> None:
        if model == "spec":
            self.model: Deviation | None = None
        elif model in MODELS:
            self.model = MODELS[model]
        else:
            raise TypeError(f"unknown deviation model {model!r} (--runner-opt model=NAME); "
                            f"known: spec, {', '.join(MODELS)}")
        self.name = f"deviation:{model}"

    def describe(self) -> dict[str, Any]:
        m = self.model
        return {"name": self.name, "version": qconform.__version__, "device": "cpu",
                "options": {"model": m.name if m else "spec"},
                "implementation": "qconform.diagnosis.models (the oracle with one deviating step)",
                "explanation": m.explanation if m else "no deviation"}

    def outputs(self, draft: Draft) -> tuple[np.ndarray, ...]:
        if self.model is None:
            return deviating_oracle(draft, Spec).evaluate(draft).readings[0].outputs
        return self.model.outputs(draft)

    def prepare(self, model: onnx.ModelProto) -> Prepared:
        graph = len(model.graph.node) > 1  # a QDQ pattern: the graph oracle and its fused-kernel models
        if not graph:
            require_oracle_node(model, "the deviation runner")

        def run(feeds: Inputs) -> Outputs:
            draft = pattern_draft_from_model(model, feeds) if graph else draft_from_model(model, feeds)
            if graph and self.model is not None and not self.model.applies(draft):
                return [np.array(o, copy=True) for o in deviating_oracle(draft, Spec).evaluate(draft).readings[0].outputs]
            try:
                outs = self.outputs(draft)
            except InvalidModel as exc:
                raise ValueError(f"invalid model: {exc}") from None
            return [np.array(o, copy=True) for o in outs]

        return run

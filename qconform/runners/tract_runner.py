"""tract (sonos/tract, the ``tract`` Python binding), CPU: ``pip install 'qconform[tract]'``.

``tract.onnx().load(path).into_model().into_runnable()``: the binding loads from a path only, and
``into_runnable`` runs tract's default (optimising) CPU runtime. Its tensors carry
bool/u8…u64/i8…i64/f16/f32/f64 only, so a model whose graph inputs or outputs have another
element type is Unsupported before tract sees it. Unsupported also when load / into_model /
into_runnable refuse the model, or a run fails with tract's "Unsupported type" (a kernel without
that element type, found only at run time). Other failures are errors with tract's full text.
Outputs are returned as tract produced them: another element type than the declared one is a
fail for the harness, never converted here."""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import tract

from qconform import adapt, platform
from qconform.runner import BaseRunner, Inputs, Outputs, Prepared, Unsupported
from qconform.runners.common import io_types, joined_lines, model_file



class TractRunner(BaseRunner):
    name = "tract"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "version": tract.version(), "device": "cpu",
                "options": {"path": "onnx().load().into_model().into_runnable() (default runtime)"},
                "platform": platform.info()}

    def prepare(self, model: onnx.ModelProto) -> Prepared:
        foreign = io_types(model, lambda t: t not in adapt.NUMPY_NATIVE)
        if foreign:
            raise Unsupported(f"tract's Python binding has no datum type for {', '.join(foreign)}")
        stage = "load"
        with model_file(model) as path:
            try:
                loaded = tract.onnx().load(path)
                stage = "into_model"
                typed = loaded.into_model()
                stage = "into_runnable"
                runnable = typed.into_runnable()
            except tract.TractError as exc:
                raise Unsupported(f"{stage}: {joined_lines(exc)}") from None
        names = [i.name for i in model.graph.input]
        n_out = len(model.graph.output)

        def run(inputs: Inputs) -> Outputs:
            arrays = [np.array(inputs[n], order="C", copy=True) for n in names]  # keeps 0-d arrays 0-d
            try:
                res = runnable.run(arrays)
            except tract.TractError as exc:
                text = str(exc)
                if "Unsupported type" in text:
                    cause = next(ln.strip() for ln in text.splitlines() if "Unsupported type" in ln)
                    raise Unsupported(f"run: {text.strip().splitlines()[0]}: {cause}") from None
                raise RuntimeError(f"tract run: {text}") from None
            if len(res) != n_out:
                raise RuntimeError(f"tract returned {len(res)} outputs, the model declares {n_out}")
            return [np.array(t.to_numpy(), copy=True) for t in res]

        return run

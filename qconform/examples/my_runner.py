"""A complete qconform runner, wrapping onnxruntime through its numpy binding.

    pytest --runner=qconform/examples/my_runner.py:MyRunner --runner-opt threads=2

Copy it (``qconform init-runner my_runner.py``) and replace the three onnxruntime calls with your
runtime's. The runner author's guide (qconform/docs/runners.md) explains each rule used here.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from qconform import BaseRunner, Unsupported, adapt


def _element_types(model: onnx.ModelProto) -> set[int]:
    """The element types that cross the binding: the graph's inputs and outputs."""
    return {v.type.tensor_type.elem_type for v in [*model.graph.input, *model.graph.output]}


class MyRunner(BaseRunner):
    name = "my-runtime"

    def __init__(self, threads: str = "1"):  # --runner-opt threads=4 arrives here, as a string
        # One thread by default: qconform already runs two runner workers on two cores.
        self.threads = int(threads)

    def describe(self) -> dict[str, Any]:  # called once, at the start: the report's identity
        return {"name": self.name, "version": ort.__version__, "device": "cpu",
                "options": {"threads": self.threads}}

    def prepare(self, model: onnx.ModelProto):
        # numpy has no int4, float8, bfloat16...: this runner's numpy binding cannot carry them, though
        # the runtime may well run them. Say so, as a limit of this file (unsupported, never passed):
        # a binding that speaks bytes carries every type with qconform.adapt (init-runner --bytes).
        foreign = sorted(onnx.TensorProto.DataType.Name(t) for t in _element_types(model) - adapt.NUMPY_NATIVE)
        if foreign:
            raise Unsupported(f"not tried: this runner passes numpy arrays, which cannot hold {', '.join(foreign)} "
                              "(a limit of the runner file, not of the runtime; qconform init-runner --bytes "
                              "writes one that carries every type)")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.threads
        opts.log_severity_level = 4  # the refusal is the verdict; no log line per refused model
        try:  # one session serves every case with the same model
            sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # no kernel, opset too new, type not registered: not run, so not passed
            raise Unsupported(str(exc).strip().splitlines()[0]) from None

        def run(inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
            try:
                outputs = sess.run(None, dict(inputs))
            except Exception as exc:
                text = " ".join(str(exc).split())
                # A kernel missing at run time, or one refusing inputs by a stated precondition
                # (e.g. a quantized matmul: "input zero point must be a scalar or 1D tensor of size 1").
                if isinstance(exc, ort.capi.onnxruntime_pybind11_state.NotImplemented) or " was false. " in text:
                    raise Unsupported(text.split(" was false. ")[-1]) from None
                raise  # anything else is an error for the case, with its traceback in the report
            return [np.asarray(y) for y in outputs]

        return run

"""A complete qconform runner: plug in with  pytest --runner=qconform/examples/my_runner.py:MyRunner"""
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from qconform import BaseRunner, Unsupported


class MyRunner(BaseRunner):
    name = "my-runtime"

    def __init__(self, threads: str = "1"):  # --runner-opt threads=4 arrives here
        self.threads = int(threads)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "version": ort.__version__, "device": "cpu",
                "options": {"threads": self.threads}}

    def prepare(self, model: onnx.ModelProto):
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.threads
        try:  # one session serves many input batches
            sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # no kernel for this op/type: reported as unsupported, never passed
            raise Unsupported(str(exc).splitlines()[0]) from None
        return lambda inputs: [np.asarray(y) for y in sess.run(None, dict(inputs))]

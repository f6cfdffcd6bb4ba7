"""A minimal runner for a runtime whose binding speaks bytes (buffer, element type, shape).

    pytest --runner=qconform/examples/bytes_runner.py:BytesRunner -m "op_DequantizeLinear and opset_21"

Here the "bytes binding" is onnxruntime's OrtValue (raw memory of a declared ONNX element type);
yours may be a C API, a device buffer or a file. ``qconform.adapt`` turns qconform's arrays into
the ONNX layout (packed int4/int2/float4, float8 codes, bfloat16) and back, bit-exactly, so every
type travels -- including those numpy lacks. Scaffold it with ``qconform init-runner PATH --bytes``.
"""
from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from qconform import BaseRunner, Unsupported, adapt


class BytesRunner(BaseRunner):
    name = "bytes-runtime"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "version": ort.__version__, "device": "cpu", "options": {}}

    def prepare(self, model: onnx.ModelProto):
        opts = ort.SessionOptions()
        opts.log_severity_level = 4
        opts.intra_op_num_threads = 1  # qconform runs two runner workers: spinning thread pools would fight
        try:
            sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # the runtime refuses the model: not run, so never passed
            raise Unsupported(" ".join(str(exc).split())[:200]) from None
        outputs = [o.name for o in sess.get_outputs()]

        def run(inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
            binding, keep = sess.io_binding(), []
            for name, arr in inputs.items():
                data = adapt.to_bytes(arr)  # the bytes the runtime wants ...
                value = ort.OrtValue.ortvalue_from_shape_and_type(list(arr.shape), adapt.elem_type(arr.dtype))
                if data:
                    ctypes.memmove(value.data_ptr(), data, len(data))  # ... copied into its buffer
                keep.append(value)
                binding.bind_ortvalue_input(name, value)
            for name in outputs:
                binding.bind_output(name, "cpu")
            sess.run_with_iobinding(binding)
            results = []
            for value in binding.get_outputs():  # buffer + element type + shape -> qconform array
                raw = ctypes.string_at(value.data_ptr(), value.tensor_size_in_bytes())
                results.append(adapt.from_bytes(raw, value.element_type(), value.shape()))
            return results

        return run

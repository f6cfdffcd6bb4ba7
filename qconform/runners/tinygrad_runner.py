"""tinygrad's ONNX frontend (``tinygrad.nn.onnx.OnnxRunner``) on its CPU device:
``pip install 'qconform[tinygrad]'``, and a clang on PATH (the CPU device compiles C with ``$CC``;
Debian's clang 14 rejects ``__bf16`` on x86-64, so ``qconform.tools`` picks the newest clang >= 15).

``THREADS=0``: one thread per kernel (qconform already runs two workers). The model is parsed from
a temporary file. Inputs: numpy-native arrays as they are; bfloat16 as its uint16 codes bitcast to
``dtypes.bfloat16`` (bit moves only). Unsupported: the parser cannot read the model (its type enum
lacks float8, int4, int2, float4, float6, float8e8m0: "N is not a valid OnnxDataType"; a bfloat16
initializer: "no fmt dtype"), an op has no implementation (``NotImplementedError``), or a graph I/O
type has no tinygrad dtype. Everything else is an error with tinygrad's full text. Outputs come back
in the dtype tinygrad produced (a mismatch with the declared type is a fail)."""
from __future__ import annotations

import os
from importlib.metadata import version as _pkg_version
from typing import Any

import numpy as np
import onnx

from qconform import adapt, platform, tools
from qconform.runner import BaseRunner, Inputs, Outputs, Prepared, Unsupported
from qconform.runners.common import io_types, joined_lines, model_file
from qconform.declarations.runtimes.tinygrad import TINYGRAD

TP = onnx.TensorProto


def compiler() -> str | None:
    """The C compiler tinygrad's CPU device is given as ``$CC`` (unless set), by name: the newest
    clang >= 15 (``qconform.tools``), None where there is none. The reproducer's run gets the same."""
    found = tools.find("clang")
    return os.path.basename(found) if found else None


class TinygradRunner(BaseRunner):
    name = "tinygrad"

    def __init__(self) -> None:
        # tinygrad reads DEV and THREADS when it is imported and $CC when it compiles: set them here,
        # when the runner is chosen, never when this module is imported.
        for key, value in TINYGRAD.settings["env"].items():
            os.environ.setdefault(key, value)
        import tinygrad  # noqa: F401  (here, so a missing extra is said when the runner is chosen)

        if os.environ["DEV"] == "CPU":
            why = tools.missing("clang")
            if why:
                raise Unsupported(f"tinygrad's CPU device compiles C with clang: {why}")
            os.environ.setdefault("CC", compiler() or "clang")

    def describe(self) -> dict[str, Any]:
        from tinygrad import Device
        return {"name": self.name, "version": _pkg_version("tinygrad"), "device": Device.DEFAULT,
                "options": {"DEV": os.environ.get("DEV"), "THREADS": os.environ.get("THREADS"), "CC": os.environ.get("CC"),
                            "frontend": "tinygrad.nn.onnx.OnnxRunner"},
                "platform": platform.info()}

    def prepare(self, model: onnx.ModelProto) -> Prepared:
        from tinygrad import Tensor, dtypes
        from tinygrad.nn.onnx import OnnxRunner

        foreign = io_types(model, lambda t: t not in adapt.NUMPY_NATIVE | {TP.BFLOAT16})
        with model_file(model) as path:
            try:
                runner = OnnxRunner(path)
            except Exception as exc:  # cannot load: "17 is not a valid OnnxDataType" (ValueError),
                # "no fmt dtype for dtypes.bfloat16" (AssertionError, a bfloat16 initializer), ...
                raise Unsupported("OnnxRunner parse: " + joined_lines(exc, with_type=True)) from None
        if foreign:  # parsed, but the graph I/O type cannot travel
            raise Unsupported(f"graph input/output type {', '.join(foreign)} has no tinygrad dtype")

        in_names = [i.name for i in model.graph.input]
        declared = [(o.name, o.type.tensor_type.elem_type) for o in model.graph.output]

        def to_tensor(arr: np.ndarray):
            t = adapt.elem_type(arr.dtype)
            if t == TP.BFLOAT16:
                codes = np.array(adapt.to_codes(arr), dtype=np.uint16, copy=True)
                return Tensor(codes, dtype=dtypes.uint16).bitcast(dtypes.bfloat16)
            return Tensor(np.array(arr, copy=True))

        def run(inputs: Inputs) -> Outputs:
            feed = {n: to_tensor(inputs[n]) for n in in_names}
            try:
                res = runner(feed)
            except NotImplementedError as exc:
                raise Unsupported(joined_lines(exc, with_type=True)) from None
            outs = []
            for oname, decl in declared:
                t = res[oname]
                if t.dtype == dtypes.bfloat16:  # numpy has no bfloat16: carry the bits, whatever was declared
                    codes = t.bitcast(dtypes.uint16).numpy()
                    outs.append(adapt.from_codes(codes, TP.BFLOAT16).reshape(tuple(t.shape)))
                    continue
                # Returned as tinygrad produced it: an element type other than the declared one is
                # the harness's to judge (a fail by dtype mismatch), never converted here.
                outs.append(np.array(t.numpy(), copy=True).reshape(tuple(t.shape)))
            return outs

        return run

"""What the third-party runners share: a runtime's message on one line, a model on disk for the
bindings that load from a path only (tract, tinygrad), and the graph's element types a binding
cannot carry."""
from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator

import onnx


def joined_lines(exc: BaseException, with_type: bool = False) -> str:
    """Every non-empty line of the message, joined with ' | ': the harness shows one line, and a
    runtime's real reason is often on its last."""
    lines = str(exc).splitlines()
    cut = next((i for i, ln in enumerate(lines) if ln.strip().startswith("Stack backtrace")), len(lines))
    text = " | ".join(ln.strip() for ln in lines[:cut] if ln.strip())  # a Rust backtrace is not a reason
    if with_type:
        return f"{type(exc).__name__}: {text}"
    return text or type(exc).__name__


@contextlib.contextmanager
def model_file(model: onnx.ModelProto) -> Iterator[str]:
    """The model written to a temporary .onnx file, removed afterwards whatever happens."""
    fd, path = tempfile.mkstemp(suffix=".onnx", prefix="qconform-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(model.SerializeToString())
        yield path
    finally:
        os.unlink(path)


def io_types(model: onnx.ModelProto, where: Callable[[int], bool]) -> list[str]:
    """The names of the graph input/output element types for which ``where`` holds, sorted: what a
    binding that cannot carry them reports as its Unsupported reason."""
    return sorted({onnx.TensorProto.DataType.Name(v.type.tensor_type.elem_type)
                   for v in [*model.graph.input, *model.graph.output] if where(v.type.tensor_type.elem_type)})

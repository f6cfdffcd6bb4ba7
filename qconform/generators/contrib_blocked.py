"""Cases of onnxruntime's weight-only and dynamic com.microsoft ops (MatMulNBits, GatherBlockQuantized, MatMulIntegerToFloat, DynamicQuantizeMatMul)."""
from __future__ import annotations

from typing import Callable, Iterator

from qconform.case import Draft


def entries() -> dict[str, Callable[[], Iterator[Draft]]]:
    return {}

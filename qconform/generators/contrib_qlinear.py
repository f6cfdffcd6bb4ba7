"""Cases of onnxruntime's QOperator-format com.microsoft ops (QLinearAdd, QLinearMul, the pools, QLinearConcat, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QGemm)."""
from __future__ import annotations

from typing import Callable, Iterator

from qconform.case import Draft


def entries() -> dict[str, Callable[[], Iterator[Draft]]]:
    return {}

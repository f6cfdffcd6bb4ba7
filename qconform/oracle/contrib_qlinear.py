"""The oracle of onnxruntime's QOperator-format com.microsoft ops (QLinearAdd, QLinearMul, the pools, QLinearConcat, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QGemm)."""
from __future__ import annotations

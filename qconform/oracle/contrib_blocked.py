"""The oracle of onnxruntime's weight-only and dynamic com.microsoft ops (MatMulNBits, GatherBlockQuantized, MatMulIntegerToFloat, DynamicQuantizeMatMul)."""
from __future__ import annotations

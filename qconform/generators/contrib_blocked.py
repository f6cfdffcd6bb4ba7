"""Cases of onnxruntime's weight-only and dynamic com.microsoft ops (MatMulNBits, GatherBlockQuantized, MatMulIntegerToFloat, DynamicQuantizeMatMul).

Each op's families live in a module of their own (``matmul_nbits``, ``gather_block_quantized``,
``scale_products``); this module joins their ``entries()`` for ``generators.FAMILIES``."""
from __future__ import annotations

from typing import Callable, Iterator

from qconform.case import Draft
from qconform.generators import gather_block_quantized, matmul_nbits, scale_products


def entries() -> dict[str, Callable[[], Iterator[Draft]]]:
    return {**matmul_nbits.entries(), **gather_block_quantized.entries(), **scale_products.entries()}

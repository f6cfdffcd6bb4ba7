"""Family "packing": 2- and 4-bit outputs (QuantizeLinear) and inputs (DequantizeLinear) with odd
and even element counts, odd last dimensions, rank 0 to 4, every value of the type in every slot
of a byte (qconform/docs/semantics.md#packing).

The values cycle with a period one longer than the type's value count, which is coprime with the
2 or 4 slots per byte, so each value visits every slot; swapped nibbles, a wrong final half byte
or row-wise padding give wrong elements. The float32 combinations of each type get every shape;
the others get the odd count and one more, rotated."""
from __future__ import annotations

import math
from typing import Iterator

import numpy as np

from qconform.case import Draft
from qconform.generators import qdq
from qconform.oracle.arith import as_float64
from qconform.schemas import OpSpec

FAMILY = "packing"


def applies(spec: OpSpec, combo: dict[str, str]) -> bool:
    return qdq.is_qdq(spec) and qdq.Combo(spec, combo).q.packed


def _values(c: qdq.Combo) -> np.ndarray:
    """Every value of the quantized type once plus the first again, repeated once per slot."""
    t = c.q
    vals = as_float64(t.all_values(), t)
    return np.tile(np.concatenate([vals, vals[:1]]), 8 // t.bits)


def _shapes(n: int) -> list[tuple[str, tuple[int, ...]]]:
    odd = lambda k: k if k % 2 else k + 1  # noqa: E731
    return [("rank0", ()), ("rank1-odd", (odd(n + 1),)), ("rank2-odd-last", (3, odd(math.ceil(n / 3)))),
            ("rank3-even", (2, 3, 2 * math.ceil(n / 12))), ("rank4", (1, 2, 3, odd(math.ceil(n / 6))))]


def generate() -> Iterator[Draft]:
    for c in qdq.combos():
        if not applies(c.spec, c.types):
            continue
        base = _values(c)
        zp = c.zero()
        shapes = _shapes(len(base))
        if not qdq.primary(c):  # the odd count always; one of the others, rotated over combinations
            shapes = shapes[1:2] + qdq.rotate(shapes[:1] + shapes[2:], c.prefix + "/" + FAMILY, 1)
        for name, shape in shapes:
            v = np.resize(base[::-1] if not shape else base, math.prod(shape)).reshape(shape)
            x = (v - zp) * 2.0 if c.quantize else v
            scale = 2.0
            yield c.draft(FAMILY, name, x, scale, zp, clause="packing",
                          note=f"every {c.q.name} value in every slot of a byte, shape {shape}")

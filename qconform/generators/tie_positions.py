"""Family "tie-positions": QuantizeLinear of vectors of every length from 1 to 67 whose every element
is a tie x / y_scale = 2k + 0.5 (signs alternating), so that a kernel rounding some positions
differently from others -- a SIMD body rounding ties to even and a scalar tail over the last
n mod W elements rounding them away from zero, or the reverse -- fails at exactly those positions
(qconform/docs/semantics.md#q-rounding). Lengths 1..67 cover every tail length for vector widths
16 (AVX-512 float32), 8 and 4, with zero to four whole vectors before it.

float32 data and scale only (the SIMD paths are float32), to one 8-bit integer type per version,
alternating uint8 and int8 over the versions so that both are covered."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from qconform.case import Draft
from qconform.generators import qdq
from qconform.schemas import OpSpec

FAMILY = "tie-positions"
LENGTHS = range(1, 68)
SCALE = 2.0


def _ties(n: int) -> np.ndarray:
    """2k + 0.5 with k = i mod 32, the sign alternating: ties to even give 2k, away 2k + 1."""
    i = np.arange(n)
    return np.where(i % 2 == 0, 1.0, -1.0) * (2.0 * (i % 32) + 0.5)


def applies(spec: OpSpec, combo: dict[str, str]) -> bool:
    if not qdq.is_qdq(spec):
        return False
    c = qdq.Combo(spec, combo)
    if not (c.quantize and c.x.name == "float32" and c.s.name == "float32"):
        return False
    want = ("uint8", "int8")[qdq.version_index(c.spec) % 2]
    return c.y.name == want


def generate() -> Iterator[Draft]:
    for c in qdq.combos(quantize=True):
        if not applies(c.spec, c.types):
            continue
        zp = c.zero()
        for n in LENGTHS:
            yield c.draft(FAMILY, f"length-{n:02d}", _ties(n) * SCALE, SCALE, zp, clause="q-rounding",
                          note=f"{n} elements, each a tie x / y_scale = 2k + 0.5")

"""Family "block-sizes": blocked quantization with the block sizes weights use in the field
(qconform/docs/semantics.md#granularity-block-sizes).

Families "granularity" and "granularity-edges" block by 1 to 7; blocked weights are stored with
blocks of 16, 32, 64, 128, 256 and more (MX formats 32, MatMulNBits 16 to 256, GGUF 32 and 256),
and kernels specialise on them: a vector loop per block, a tail for a partial last block. Each size
here blocks a rank-2 x on axis 0 and on axis 1, the axis a whole number of blocks long and one
with a partial last block (two blocks and a half and one element), element values and neighbouring
blocks' scales and zero points chosen as in family "granularity" so that an element read with
another block's parameters comes out wrong. The float32 combination of each quantized type gets an
equal share of the list in each version that has the type, in windows that together walk it (a type
of one version gets it whole)."""
from __future__ import annotations

from collections import defaultdict
from typing import Iterator

from qconform.case import Draft
from qconform.generators import granularity, qdq

FAMILY = "block-sizes"
CLAUSE = "granularity-block-sizes"
SIZES = (16, 32, 64, 128, 256, 1024)
OTHER = 2  # the length of the axis not blocked


def variants() -> list[tuple]:
    """(name, x shape, attributes, scale shape) for every size, axis and last block."""
    out = []
    for b in SIZES:
        for partial in (False, True):
            length = 2 * b + (b // 2 + 1 if partial else 0)
            blocks = -(-length // b)
            for axis in (0, 1):
                shape = (length, OTHER) if axis == 0 else (OTHER, length)
                s_shape = (blocks, OTHER) if axis == 0 else (OTHER, blocks)
                name = f"block-{b}-axis{axis}-{'partial' if partial else 'whole'}"
                out.append((name, shape, {"axis": axis, "block_size": b}, s_shape))
    return out


def generate() -> Iterator[Draft]:
    every = variants()
    by_type: dict[tuple[str, str], list[qdq.Combo]] = defaultdict(list)
    for c in qdq.combos():
        if c.has("block_size") and qdq.primary(c):
            by_type[(c.spec.op, c.q.name)].append(c)
    for combos in by_type.values():
        share = -(-len(every) // len(combos))
        for j, c in enumerate(combos):
            for k in range(share):
                name, shape, attrs, s_shape = every[(j * share + k) % len(every)]
                yield granularity._draft(c, name, shape, attrs, s_shape, family=FAMILY, clause=CLAUSE)

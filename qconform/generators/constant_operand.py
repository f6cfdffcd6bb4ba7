"""Family "constant-operand": the quantized input as a constant initializer instead of a graph input.

Runtimes take other code paths for constants: DequantizeLinear is constant-folded, a quantized matmul's
b is pre-packed once at load time, QuantizeLinear of a constant is folded by graph optimisers; bugs
live there that no graph-input case reaches. Each case is another family's case with its data input
turned into an initializer, compared the same way: for every op version and quantized type, the
first ``basic`` case of the float32 combination (QuantizeLinear/DequantizeLinear), the first
``ties`` case of each integer combination of the quantized matmul with b constant (and one with a
and b constant), and the first ``ties`` cases of the dynamic quantizer (qconform/docs/semantics.md#principles)."""
from __future__ import annotations

import dataclasses
from typing import Iterable, Iterator

from qconform.case import Draft
from qconform.generators import basic, dynamic_quantize, qdq, qlinear_matmul

FAMILY = "constant-operand"


def constant(d: Draft, names: Iterable[str]) -> Draft:
    """The draft with inputs ``names`` as initializers, in this family, named after its source."""
    names = set(names)
    inputs = tuple(a if a is None or a.name not in names else dataclasses.replace(a, initializer=True)
                   for a in d.inputs)
    tag = "-".join(sorted(names))
    return dataclasses.replace(d, family=FAMILY, name=f"{tag}-constant-{d.family}-{d.name}", inputs=inputs,
                               provenance=f"{FAMILY}:{d.id}", note=f"{d.note}; {tag} an initializer".lstrip("; "))


def _first_per_prefix(drafts: Iterable[Draft], keep=lambda d: True) -> Iterator[Draft]:
    seen: set[str] = set()
    for d in drafts:
        key = f"{d.op}-{d.opset}/{d.types}"
        if key not in seen and keep(d):
            seen.add(key)
            yield d


def generate() -> Iterator[Draft]:
    primary = {c.prefix for c in qdq.combos() if qdq.primary(c)}
    for d in _first_per_prefix(basic.generate(), lambda d: f"{d.op}-{d.opset}/{d.types}" in primary):
        yield constant(d, [d.inputs[0].name])
    for d in _first_per_prefix(qlinear_matmul.generate("ties")):
        yield constant(d, ["b"])
        if d.types.startswith("uint8-uint8"):
            yield constant(d, ["a", "b"])
    for d in list(dynamic_quantize.generate("ties"))[:2]:
        yield constant(d, ["x"])

"""Cases of onnxruntime's QOperator-format com.microsoft ops (QLinearAdd, QLinearMul, the pools, QLinearConcat, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QGemm).

The families of each op live beside their arithmetic: ``generators/qlinear_binary.py`` (QLinearAdd,
QLinearMul, QGemm) and ``generators/qlinear_composed.py`` (the ops defined as
quantize(f(dequantize(x)))); here the table of which op has which family, and the module contract
the coverage table reads: ``FAMILIES``, ``applies(spec, combo, family=None)``,
``generate(family=None)``, ``entries()``.
"""
from __future__ import annotations

from typing import Callable, Iterator, Mapping

from qconform.case import Draft
from qconform.declarations import contrib_qlinear as decl
from qconform.generators import qlinear_binary as binary
from qconform.generators import qlinear_composed as composed
from qconform.generators.common import ComboFamilies, family_entries
from qconform.generators.qlinear_common import Combo

Family = Callable[[Combo], Iterator[Draft]]

#: Each op's families (qconform/docs/semantics.md#ms-qlinear: what each reaches).
TABLE: dict[str, Mapping[str, Family]] = {
    decl.QLINEAR_ADD.op: binary.BINARY,
    decl.QLINEAR_MUL.op: binary.BINARY,
    decl.QGEMM.op: binary.GEMM,
    decl.QLINEAR_SIGMOID.op: composed.ELEMENTWISE,
    decl.QLINEAR_LEAKY_RELU.op: {**composed.ELEMENTWISE, **composed.LEAKY_ONLY},
    decl.QLINEAR_AVERAGE_POOL.op: composed.POOLS,
    decl.QLINEAR_GLOBAL_AVERAGE_POOL.op: composed.POOLS,
    decl.QLINEAR_SOFTMAX.op: composed.SOFTMAX,
    decl.QLINEAR_CONCAT.op: composed.CONCAT,
}
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(f for fams in TABLE.values() for f in fams))
_KEYS = {o.key for o in decl.OPERATORS}


def _applies(c: Combo, family: str) -> bool:
    fams = TABLE[c.op]
    if family not in fams:
        return False
    if c.op == decl.QGEMM.op:
        if not binary.gemm_valid(c):
            return False
        if family != "basic" and not binary.gemm_full(c):
            return False
        return not (family in binary.GEMM_QUANTIZED_ONLY and c.types["TY"] == "float32")
    if c.op == decl.QLINEAR_CONCAT.op:  # the variadic list holds T8 tensors (and their float scales)
        return c.types["TV"] == c.types["T8"]
    return True


_GENERATOR = ComboFamilies(_KEYS, FAMILIES, Combo, _applies, lambda c, fam: TABLE[c.op][fam](c))
combos, applies, generate = _GENERATOR.combos, _GENERATOR.applies, _GENERATOR.generate


def entries() -> dict[str, Callable[[], Iterator[Draft]]]:
    """One ``generators.FAMILIES`` entry per family, keyed "contrib_qlinear:<family>"."""
    return family_entries("contrib_qlinear", FAMILIES, generate)

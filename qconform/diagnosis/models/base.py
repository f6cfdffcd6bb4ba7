"""How a deviation is built and registered: the oracle with one step replaced (``compose``), the
``Deviation`` record, and the predicates that say where a deviation can change a draft's outputs."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from qconform import dtypes
from qconform.case import Draft
from qconform.oracle import granularity
from qconform.oracle.arith import as_float64
from qconform.oracle.base import Evaluation, OpOracle, oracle_for, output_type
from qconform.declarations import operators
from qconform.declarations.operator import Kind, Role
from qconform.diagnosis.models.common import DQ, DQL, Q, QLCONV, QLMM, _minifloat


class Spec:
    """The empty deviation: composed with a version class it is the oracle itself."""


@functools.cache
def compose(mixin: type, version_cls: type) -> type:
    """(mixin, the oracle's version class): facts and arithmetic from the version, one step from the
    mixin."""
    if mixin is Spec:
        return version_cls
    cls = type(f"{mixin.__name__}·{version_cls.__name__}", (mixin, version_cls), {})
    per_tensor = getattr(version_cls, "per_tensor", None)  # com.microsoft ops without axis
    if isinstance(per_tensor, OpOracle):
        cls.per_tensor = compose(mixin, type(per_tensor))()
    return cls


@functools.cache
def _instance(mixin: type, domain: str, op: str, opset: int) -> OpOracle:
    return compose(mixin, type(oracle_for(domain, op, opset)))()


@functools.cache
def _graph_instance(mixin: type):
    from qconform.oracle.graph import GraphOracle

    return compose(mixin, GraphOracle)()


def deviating_oracle(draft: Draft, mixin: type = Spec) -> OpOracle:
    """The oracle of the draft's op version (a pattern's: the graph oracle) with one step replaced by
    ``mixin``'s."""
    if draft.graph:
        return _graph_instance(mixin)
    return _instance(mixin, draft.domain, draft.op, draft.opset)


def _dq_out(draft: Draft) -> str | None:
    """DequantizeLinear's output type (None for other ops or a model it rejects)."""
    if draft.op != DQ:
        return None
    try:
        return output_type(draft)
    except (LookupError, granularity.InvalidModel):
        return None


def _has_subnormal_scale(draft: Draft) -> bool:
    s = draft.inputs[1]
    if not dtypes.get(s.type).is_arithmetic:
        return False
    v = np.abs(as_float64(s.value, s.type))
    return bool(np.any((v > 0) & (v < 2.0 ** dtypes.get(s.type).float_format.emin)))


def _types(draft: Draft) -> list[str]:
    return [a.type for a in draft.inputs if a is not None]


def _q_out(draft: Draft) -> dtypes.ElemType | None:
    """QuantizeLinear's output type (None for other ops), by its version class's own rule."""
    if draft.op != Q:
        return None
    return dtypes.get(output_type(draft))


def _requant_out(d: Draft) -> dtypes.ElemType | None:
    """A requantising op's output type (its declaration's ``output_like`` input, else its first
    data input's); None for other ops."""
    decl = operators.find(d.domain, d.op)
    if decl is None or decl.kind is not Kind.REQUANTIZE:
        return None
    like = decl.arg(d.inputs, decl.output_like)
    return dtypes.get(like.type if like is not None else d.inputs[0].type)


def _int_rounding(d: Draft) -> bool:
    """Ops whose result goes through a round-to-integer."""
    if d.op == Q:
        return _q_out(d).is_integer
    if _requant_out(d) is not None:
        return _requant_out(d).is_integer
    return d.op == DQL


def _int_saturation(d: Draft) -> bool:
    return _int_rounding(d)


def _signed_int_out(d: Draft) -> bool:
    if d.op == Q:
        return _q_out(d).is_integer and _q_out(d).signed
    if _requant_out(d) is not None and _int_rounding(d):
        return _requant_out(d).signed
    return False


def _minifloat_out(d: Draft) -> bool:
    if d.op == Q:
        return _minifloat(_q_out(d))
    if _requant_out(d) is not None:
        return not _int_rounding(d)
    return False


def _fnuz_involved(d: Draft) -> bool:
    if d.op == Q:
        return _q_out(d).name in ("float8e4m3fnuz", "float8e5m2fnuz")
    return d.op == QLMM and any(t.endswith("fnuz") for t in _types(d))


def _nonzero_zero_point(d: Draft) -> bool:
    """The first zero point of the op (Q/DQ: x's or y's; a matmul: a's) is not zero somewhere."""
    decl = operators.find(d.domain, d.op)
    zps = decl.of_role(Role.ZERO_POINT) if decl is not None else ()
    zp = decl.arg(d.inputs, zps[0].name) if zps else None
    return zp is not None and bool(np.any(as_float64(zp.value, zp.type) != 0))


def _half_scale(d: Draft) -> bool:
    """QuantizeLinear whose spec precision can be float16/bfloat16 (a half scale, or ``precision``)."""
    if d.op != Q:
        return False
    prec = d.attrs.get("precision", 0)
    return any(t in dtypes.having("is_half") for t in _types(d)[:2]) or (bool(prec) and dtypes.get(prec).is_half)


def _involves(*names: str) -> Callable[[Draft], bool]:
    return lambda d: any(t in names for t in _types(d)) or (
        d.op == DQ and d.attrs.get("output_dtype") and dtypes.get(d.attrs["output_dtype"]).name in names)


def _ieee_involved(d: Draft) -> bool:
    if d.op == DQ:
        return True  # the output is always float16/bfloat16/float32
    return any(t in dtypes.having("is_arithmetic") for t in _types(d))


def _nonscalar_params(d: Draft) -> bool:
    return d.op in (Q, DQ) and any(a is not None and a.value.size > 1 for a in d.inputs[1:3])


def _blocked(d: Draft) -> bool:
    return d.op in (Q, DQ) and bool(d.attrs.get("block_size", 0))


def _negative_axis(d: Draft) -> bool:
    return d.op in (Q, DQ) and d.attrs.get("axis", 0) < 0


def _packed_io(d: Draft) -> bool:
    if d.op == Q:
        return _q_out(d).packed
    return d.op == DQ and dtypes.get(d.inputs[0].type).packed


def _dq_with_zero_point(d: Draft) -> bool:
    """DequantizeLinear with a zero point that is not zero somewhere."""
    if d.op != DQ or len(d.inputs) < 3 or d.inputs[2] is None:
        return False
    zp = d.inputs[2]
    return bool(np.any(as_float64(zp.value, zp.type) != 0))


def _dq_int_zero_point(d: Draft) -> bool:
    x = dtypes.get(d.inputs[0].type)
    return _dq_with_zero_point(d) and x.is_integer and x.bits <= 16


def _dq_integer_wide_to_narrow(d: Draft) -> bool:
    return d.op == DQ and dtypes.get(d.inputs[0].type).is_integer


def _q_int_or_dql(d: Draft) -> bool:
    return (d.op == Q and _q_out(d).is_integer) or d.op == DQL


def _q_or_dql(d: Draft) -> bool:
    return d.op in (Q, DQL)


def _qlmm_u8s8(d: Draft) -> bool:
    """uint8 activations against int8 weights (the VNNI/VPMADDUBSW operand order)."""
    return d.op == QLMM and _arg(d, "a").type == "uint8" and _arg(d, "b").type == "int8"


def _qlmm_per_column(d: Draft) -> bool:
    return (d.op == QLMM and _arg(d, "b_scale").value.size > 1 and _arg(d, "a").value.ndim >= 2
            and _arg(d, "b").value.ndim >= 2)


def _arg(d: Draft, name: str):
    """The draft's input ``name``, by its operator's declaration (None where left out)."""
    return operators.get(d.domain, d.op).arg(d.inputs, name)


def _qlmm_int(d: Draft) -> bool:
    return d.op == QLMM and _int_rounding(d)


@dataclass(frozen=True)
class Deviation:
    """One realistic implementation choice or bug, as a variant of the oracle."""

    name: str
    ops: frozenset[str]
    explanation: str
    evidence: str
    witness: str
    mixin: type
    applies_to: Callable[[Draft], bool] = field(default=lambda d: True, repr=False, compare=False)
    #: generator families most likely to expose it (the acceptance test looks there first)
    families: tuple[str, ...] = ()

    def applies(self, draft: Draft) -> bool:
        """Whether the deviation can change this draft's outputs at all (a cheap filter). A predicate
        that raises is a bug of the model: it propagates (the diagnosis reports it, never silently off)."""
        return draft.op in self.ops and bool(self.applies_to(draft))

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        """Outputs under every reading of the spec, each computed the deviating way.
        Raises InvalidModel (or another exception) where such a kernel would reject the model."""
        return deviating_oracle(draft, self.mixin).evaluate(draft, primary_only)

    def outputs(self, draft: Draft) -> tuple[np.ndarray, ...]:
        """What a runtime with this deviation returns: the first reading (the latest spec text's),
        computed alone."""
        return self.evaluate(draft, primary_only=True).readings[0].outputs


def _dev(name, ops, explanation, evidence, witness, mixin, applies=lambda d: True, families=()):
    ops = frozenset([ops] if isinstance(ops, str) else ops)
    return Deviation(name, ops, explanation, evidence, witness, mixin, applies, tuple(families))


_ALL_ROUNDING = (Q, DQL, QLMM, QLCONV)

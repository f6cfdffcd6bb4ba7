"""A QDQ pattern read from its graph, for the fused-kernel models (``fused``, ``fused_kernels``): the
central operator with its dequantized operands and the output's quantisation (``pattern``), the
requantisation chains ``DQ → [Identity | Relu | Clip] → Q`` (``chain``) and the fake quantisation
``x → Q → DQ`` (``fake_source``). Reading only: what a kernel computes from it is ``fused_kernels``'s,
where each model applies ``fused``'s.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qconform.declarations import operators
from qconform.case import Draft
from qconform.oracle.arith import as_float64
from qconform.oracle.graph import float_ops

#: A dequantized operand: its codes, scale and zero point (as given), the DequantizeLinear attributes.
@dataclass(frozen=True)
class Operand:
    codes: np.ndarray
    type: str
    scale: np.ndarray
    zero: np.ndarray
    attrs: dict

    def exact(self) -> np.ndarray:
        """(q - zp) as exact integers (int64), broadcast like DequantizeLinear (per tensor or per axis)."""
        q = as_float64(self.codes, self.type).astype(np.int64)
        z = np.asarray(as_float64(self.zero, self.type)).astype(np.int64)
        axis = self.attrs.get("axis", 1)
        if z.ndim == 1 and q.ndim > 1:
            shape = [1] * q.ndim
            shape[axis] = -1
            z = z.reshape(shape)
        return q - z


@dataclass(frozen=True)
class Pattern:
    """``DQ(inputs) → op → Q(y)``: the central op, its dequantized operands (None where an input is not
    a DequantizeLinear output), the output's scale, zero point and type."""

    op: str
    attrs: dict
    operands: tuple[Operand | None, ...]
    others: tuple[np.ndarray | None, ...]
    y_scale: np.ndarray
    y_zero: np.ndarray
    y_type: str


def pattern(draft: Draft) -> Pattern | None:
    """The pattern's structure read from its graph (None: not ``DQ… → op → Q``)."""
    nodes = draft.graph
    if len(nodes) < 3 or nodes[-1].op != "QuantizeLinear":
        return None
    values = {a.name: a for a in draft.inputs if a is not None}
    q = nodes[-1]
    producers = {o: n for n in nodes for o in n.outputs}
    central = producers.get(q.inputs[0])
    if central is None or central.op in operators.QDQ:
        return None
    operands, others = [], []
    for name in central.inputs:
        dq = producers.get(name)
        if dq is not None and dq.op == "DequantizeLinear" and all(i in values for i in dq.inputs if i):
            x, s, z = (values[i] for i in dq.inputs)
            operands.append(Operand(x.value, x.type, s.value, z.value, dict(dq.attrs)))
            others.append(None)
        else:
            operands.append(None)
            others.append(values[name].value if name in values else None)
    if not all(i in values for i in q.inputs[1:3]):
        return None
    ys, yz = values[q.inputs[1]], values[q.inputs[2]]
    return Pattern(central.op, dict(central.attrs), tuple(operands), tuple(others), ys.value, yz.value, yz.type)


def float_ops_that(*traits: str) -> frozenset[str]:
    """The float ops whose registration (``FloatOp``, qconform/oracle/graph.py) has every one of
    ``traits``: a model's scope read from what the ops are, not from a list of their names."""
    return frozenset(o.op for o in float_ops() if all(getattr(o, t) for t in traits))


#: What may stand between a chain's DequantizeLinear and its QuantizeLinear (``chain``): the float ops
#: whose value is their input clamped (``FloatOp.clamps``), which a fused kernel folds into the Q's bounds.
CHAIN_MIDDLE = float_ops_that("clamps")
#: The float ops an integer kernel computes as one accumulator (``FloatOp.accumulates``).
ACCUMULATING = float_ops_that("accumulates")


def chain(draft: Draft):
    """DQ(x; s1, z1) → [Identity | Relu | Clip(lo, hi)] → Q(s2, z2): (the middle op, "" where there is
    none; its other inputs, Clip's (lo, hi); (x, s1, z1, s2, z2)), or None (another graph, or an input
    left out: a zero point, a Clip bound)."""
    nodes = draft.graph
    ops = [n.op for n in nodes]
    if not (ops[:1] == ["DequantizeLinear"] and ops[-1:] == ["QuantizeLinear"]
            and (len(ops) == 2 or (len(ops) == 3 and ops[1] in CHAIN_MIDDLE))):
        return None
    values = {a.name: a for a in draft.inputs if a is not None}
    names = (*nodes[0].inputs, *nodes[-1].inputs[1:])
    extra = nodes[1].inputs[1:] if len(ops) == 3 else ()
    if len(nodes[0].inputs) != 3 or len(nodes[-1].inputs) != 3 or not all(i in values for i in (*names, *extra)):
        return None
    return (ops[1] if len(ops) == 3 else ""), tuple(values[i] for i in extra), tuple(values[i] for i in names)


def chain_source(draft: Draft):
    """DQ(x; s1, z1) → [Identity] → Q(s2, z2): the inputs (x, s1, z1, s2, z2), or None (another
    graph, or a zero point left out)."""
    found = chain(draft)
    return found[2] if found is not None and found[0] in ("", "Identity") else None


def requant_source(draft: Draft):
    """DQ(x; s1, z1) → Q(s2, z2): as ``chain_source``, without an Identity between."""
    return chain_source(draft) if len(draft.graph) == 2 else None


def requant_chain(draft: Draft):
    """DQ(x; s1, z1) → Q(s2, z2) [→ DQ(s2, z2) → Q(s3, z3) …]: x and the stages' (s_in, z_in, s_out,
    z_out), each DequantizeLinear reading the previous QuantizeLinear's output with its parameters;
    None for another graph (or an input left out)."""
    nodes = draft.graph
    ops = [n.op for n in nodes]
    if len(ops) < 2 or len(ops) % 2 or ops != list(operators.QDQ[::-1]) * (len(ops) // 2):
        return None
    values = {a.name: a for a in draft.inputs if a is not None}
    if any(len(n.inputs) != 3 or not all(i in values for i in n.inputs[1:]) for n in nodes) \
            or nodes[0].inputs[0] not in values:
        return None
    stages = []
    for k in range(0, len(nodes), 2):
        dq, q = nodes[k], nodes[k + 1]
        if q.inputs[0] != dq.outputs[0] or (k and (dq.inputs[0] != nodes[k - 1].outputs[0]
                                                   or dq.inputs[1:] != nodes[k - 1].inputs[1:])):
            return None
        stages.append(tuple(values[i] for i in (*dq.inputs[1:], *q.inputs[1:])))
    return values[nodes[0].inputs[0]], stages


def fake_source(draft: Draft):
    """x → Q → DQ: the QuantizeLinear's inputs (x, s, z), or None (another graph)."""
    nodes = draft.graph
    if [n.op for n in nodes] != list(operators.QDQ):
        return None
    values = {a.name: a for a in draft.inputs if a is not None}
    if len(nodes[0].inputs) != 3 or not all(i in values for i in nodes[0].inputs):
        return None  # a zero point left out (the default), or an input computed
    x, s, z = (values[i] for i in nodes[0].inputs)
    return x, s, z


__all__ = ["ACCUMULATING", "CHAIN_MIDDLE", "Operand", "Pattern", "chain", "chain_source", "fake_source", "float_ops_that",
           "pattern", "requant_chain", "requant_source"]

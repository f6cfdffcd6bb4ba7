"""What the oracle's steps see of a case: each element's scale and zero point as broadcast, the value
the final rounding is applied to, the exact value before it.

A characterisation (``qconform.diagnosis.characterise``) describes where a deviation happens in the
terms the computation has -- "the quotient is a tie", "the product is in float16's subnormal
range" -- and those values exist in one place, the oracle's body. ``look(draft)`` composes a
recording mixin with the draft's version class the way a deviation model is composed
(``models.base.compose``): the body runs unchanged, each step hands its value back to the oracle
as before, and a copy is kept. Nothing here computes an op.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qconform import dtypes
from qconform.case import Draft
from qconform.diagnosis.models.base import deviating_oracle

#: The recording of the probe running now (the oracle is single-threaded within a process).
_SEEN: list[dict[str, list]] = []


def _note(key: str, value: Any) -> None:
    if _SEEN:
        _SEEN[-1].setdefault(key, []).append(value)


class Recording:
    """The oracle unchanged, noting what its steps are handed and return."""

    def data(self, arg):
        v = super().data(arg)
        _note("data", (arg.name, v))
        return v

    def expand(self, p, shape, axis, block):
        v = super().expand(p, shape, axis, block)
        _note("expand", (v, axis, block))
        return v

    def round(self, v):
        _note("round", np.asarray(v))
        return super().round(v)

    def subtract(self, xv, zero, x_t, prec):
        d = super().subtract(xv, zero, x_t, prec)
        _note("subtract", np.asarray(d))
        return d

    def requantise(self, req, acc, e, scales, zp, out_t, scale_t):
        _note("requantise", (acc, e, scales, zp))
        return super().requantise(req, acc, e, scales, zp, out_t, scale_t)

    def encode(self, v, t, **kw):
        _note("encode", np.asarray(v))
        return super().encode(v, t, **kw)


@dataclass
class Seen:
    """What one evaluation of the primary reading showed (empty fields: the op has no such step)."""

    data: dict[str, np.ndarray] = field(default_factory=dict)
    #: each broadcast parameter (QuantizeLinear, DequantizeLinear: the scale, then the zero point)
    params: list[np.ndarray] = field(default_factory=list)
    axis: int | None = None
    block: int = 0
    rounded: list[np.ndarray] = field(default_factory=list)  # what ``round`` was handed
    encoded: list[np.ndarray] = field(default_factory=list)  # what the float encoder was handed
    differences: list[np.ndarray] = field(default_factory=list)  # DequantizeLinear's x - zero_point
    requantised: tuple | None = None  # a requantising op: (accumulators, grid exponent, scales, zero point)


def look(draft: Draft) -> Seen | None:
    """The primary reading of ``draft`` computed once with the recording mixin; None where the
    oracle rejects the draft or the op has no steps to see (a graph case)."""
    if draft.graph:
        return None
    _SEEN.append({})
    try:
        with np.errstate(all="ignore"):
            deviating_oracle(draft, Recording).evaluate(draft, primary_only=True)
    except Exception:  # noqa: BLE001 - a description without the computation's values is still one
        return None
    finally:
        got = _SEEN.pop()
    seen = Seen(data=dict(got.get("data", ())))
    for v, axis, block in got.get("expand", ()):
        seen.params.append(np.asarray(v))
        seen.axis, seen.block = axis, block
    seen.rounded = got.get("round", [])
    seen.encoded = got.get("encode", [])
    seen.differences = got.get("subtract", [])
    req = got.get("requantise")
    seen.requantised = req[0] if req else None
    return seen


def final_node(draft: Draft, output: str) -> Draft | None:
    """The pattern's node that writes graph output ``output``, when it is a QuantizeLinear or
    DequantizeLinear, as a draft of its own with the values the graph computes for its inputs (the
    primary reading, node by node): its output is that one of the pattern's, element for element, so
    what it sees is what that output's last rounding sees. None otherwise. Found by what the node
    writes, not by its place: a Split pattern's last node writes its last output, not its first."""
    from qconform.case import Arg
    from qconform.oracle.graph import ORACLE, QDQ_OPS

    at = next((i for i, n in enumerate(draft.graph or ()) if output in n.outputs), None)
    last = draft.graph[at] if at is not None else None
    if last is None or last.op not in QDQ_OPS:
        return None
    inputs = {a.name: a.value for a in draft.inputs if a is not None}
    try:
        with np.errstate(all="ignore"):
            states = ORACLE.run_nodes(draft.graph[:at], {"": draft.opset}, inputs, draft.id, primary_only=True)
    except Exception:  # noqa: BLE001 - a pattern the graph oracle refuses has no last node to see
        return None
    values = states[0][1]
    args = tuple(Arg(n, dtypes.get(values[n].dtype).name, np.asarray(values[n]), initializer=n in inputs)
                 if n and n in values else None for n in last.inputs)
    while args and args[-1] is None:
        args = args[:-1]
    return Draft(last.op, draft.opset, "", draft.family, draft.name, args, dict(last.attrs), domain=last.domain)


def param_bits(arg, shape: tuple[int, ...], seen: Seen) -> np.ndarray | None:
    """A scale's or zero point's codes broadcast to the data's shape the way the oracle broadcast its
    values (per tensor, per axis or blocked), as int64; None where the oracle did not broadcast."""
    from qconform.oracle import granularity

    if arg is None or seen is None or not seen.params:
        return None
    bits = dtypes.get(arg.type).to_bits(arg.value).astype(np.int64)
    try:
        return np.asarray(granularity.expand(bits, shape, seen.axis, seen.block))
    except Exception:  # noqa: BLE001
        return None


__all__ = ["Recording", "Seen", "final_node", "look", "param_bits"]

"""What every op oracle shares: the result type, the registry, and ``evaluate`` (draft -> case).

Each op version is one small class over a common body, registered explicitly in ``ORACLES``
(as onnx's reference/ops does with QuantizeLinear_10/_19/_21...). Readings: an oracle computes the
outputs under every permitted reading of the spec (qconform/docs/semantics.md#principles); readings that give
identical bits collapse, so a case carries more than one only where the readings really differ.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from qconform import dtypes
from qconform.case import Case, Draft, Reading
from qconform.oracle.granularity import InvalidModel
from qconform.oracle.steps import Steps


@dataclass
class Evaluation:
    """Per-reading outputs, each with the elements it leaves undefined, plus the don't-care elements
    common to every reading (``dont_care``: e.g. the dynamic quantizer's outputs on NaN input)."""

    readings: list[Reading] = field(default_factory=list)
    dont_care: list[np.ndarray | None] | None = None
    clause: str = ""
    #: Only the first (primary) reading is wanted: sweeps of 2^24 inputs a chunk and cpu-ref.
    primary_only: bool = False
    #: Non-empty: the model is invalid by the text although the outputs can be computed (why, in a
    #: sentence). The case is information, never pass or fail.
    information: str = ""
    #: The name a single remaining reading gets: "spec", unless the case's result rests on a reading
    #: the text does not state (qconform/docs/semantics.md#dql-zero-input).
    sole: str = "spec"

    def add(self, name: str, outputs: tuple[np.ndarray, ...], dont_care: Sequence[np.ndarray | None] = ()) -> None:
        """A reading's outputs and, per output, the elements it alone leaves undefined (NaN quantized
        to an integer under this reading's arithmetic)."""
        if not self.complete:
            self.readings.append(Reading(name, tuple(outputs), tuple(dont_care)))

    @property
    def complete(self) -> bool:
        """True once nothing more is wanted: oracles stop computing further readings then."""
        return self.primary_only and bool(self.readings)

    def masks(self, reading: Reading) -> tuple[np.ndarray | None, ...]:
        """A reading's don't-care elements, per output: its own and those of every reading; None
        where there are none."""
        common = self.dont_care or [None] * len(reading.outputs)
        return tuple(union(own, shared) for own, shared in zip(reading.dont_care, common))


def union(*masks: np.ndarray | None) -> np.ndarray | None:
    """The elements any of ``masks`` marks; None where none is marked (a mask of no element is no mask)."""
    marked = [np.asarray(m, bool) for m in masks if m is not None and np.any(m)]
    if not marked:
        return None
    return np.logical_or.reduce(np.broadcast_arrays(*marked)) if len(marked) > 1 else marked[0].copy()


def _same_bits(a: Reading, b: Reading) -> bool:
    """Whether two readings are one result under the comparison rule (``ElemType.differs``): the
    same don't-care elements and the same bits elsewhere. A case carries a second reading only where
    a runner could tell the two apart, or where one leaves undefined what the other defines."""
    for x, y, mx, my in zip(a.outputs, b.outputs, a.dont_care, b.dont_care):
        if x.dtype != y.dtype or x.shape != y.shape:
            return False
        if not np.array_equal(np.zeros(x.shape, bool) if mx is None else mx,
                              np.zeros(y.shape, bool) if my is None else my):
            return False
        if dtypes.get(x.dtype).differs(x, y, mx).any():
            return False
    return True


class OpOracle(Steps):
    """Base of every op-version oracle: its arithmetic goes through the steps of ``Steps``."""

    domain: ClassVar[str] = ""
    op: ClassVar[str]
    since: ClassVar[int]
    output_names: ClassVar[tuple[str, ...]]

    def attr(self, attrs: Mapping[str, Any], name: str, default: Any) -> Any:
        return attrs.get(name, default)

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        raise NotImplementedError


ORACLES: dict[tuple[str, str, int], OpOracle] = {}
#: The evaluator of a QDQ pattern, registered by ``qconform.oracle.graph`` (which computes each node
#: through this module: registering, not importing, keeps the two out of an import circle).
GRAPHS: dict[str, Any] = {}


def register(*oracles: OpOracle) -> None:
    for o in oracles:
        key = (o.domain, o.op, o.since)
        if key in ORACLES:
            raise KeyError(f"oracle for {key} registered twice")
        ORACLES[key] = o


def oracle_for(domain: str, op: str, opset: int) -> OpOracle:
    """The oracle of the version of ``op`` that ``opset`` runs (``schemas.since_version``); an opset
    or a version the schemas do not know raises LookupError, never an older version's class."""
    from qconform import schemas

    key = (domain, op, schemas.since_version(domain, op, opset))
    if key not in ORACLES:
        raise LookupError(f"no oracle for {domain or 'ai.onnx'} {op}-{key[2]}")
    return ORACLES[key]


def output_type(draft: Draft) -> str:
    """The type of a QuantizeLinear or DequantizeLinear draft's output (either domain), by its
    version class's own ``output_type`` rule; only the draft's attributes and input types are read.
    The two classes' rules take different arguments (the zero point; the scale's type): this is the
    one place that knows which. Raises LookupError for an unknown version, InvalidModel where the
    rule rejects the node."""
    oracle = oracle_for(draft.domain, draft.op, draft.opset)
    _, scale, zero_point = (list(draft.inputs) + [None, None, None])[:3]
    if draft.op == "DequantizeLinear":
        return oracle.output_type(draft, scale.type)
    return oracle.output_type(draft, zero_point)


def evaluate(draft: Draft, primary_only: bool = False, oracle: OpOracle | None = None) -> Case:
    """Compute a draft's expected outputs under every permitted reading (or, with
    ``primary_only``, the first reading alone, under its own name). ``oracle``: a single-node
    draft's oracle where not its op version's own (a deviation model's, inside a graph). Raises
    InvalidModel."""
    if draft.graph:  # a QDQ pattern: node by node (qconform/oracle/graph.py registers GRAPHS)
        readings, names = GRAPHS["evaluate"](draft, primary_only)
        ev = Evaluation(readings=readings, clause="qdq-graph", primary_only=primary_only)
    else:
        oracle = oracle or oracle_for(draft.domain, draft.op, draft.opset)
        names = oracle.output_names
        with np.errstate(all="ignore"):  # IEEE specials (x/0, Inf-Inf) are the point, not accidents
            ev = oracle.evaluate(draft, primary_only)
    unique: list[Reading] = []
    for r in ev.readings:
        r = Reading(r.name, r.outputs, ev.masks(r))
        if not any(_same_bits(r, u) for u in unique):
            unique.append(r)
    if primary_only:
        unique = unique[:1]
    elif len(unique) == 1:
        unique = [replace(unique[0], name=ev.sole)]
    return Case(draft, tuple(names), tuple(unique), draft.clause or ev.clause, ev.information)


__all__ = ["Evaluation", "InvalidModel", "OpOracle", "ORACLES", "evaluate", "oracle_for", "output_type", "register",
           "union"]

"""The case model: one conformance case, as generators draft it and the corpus stores it."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from qconform import dtypes

ONNX_DOMAIN = ""
MS_DOMAIN = "com.microsoft"


@dataclass(frozen=True)
class Arg:
    """A named, typed input. Quantization parameters are initializers, the data is a graph input."""

    name: str
    type: str
    value: np.ndarray
    initializer: bool = False

    def __post_init__(self) -> None:
        want = dtypes.get(self.type).dtype
        if self.value.dtype != want:
            raise TypeError(f"input {self.name}: array dtype {self.value.dtype} is not {self.type} ({want})")


@dataclass(frozen=True)
class Node:
    """One node of a graph case (a QDQ pattern): op type, tensor names in and out, attributes."""

    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    domain: str = ONNX_DOMAIN


#: The pseudo-domain of graph cases' ids (``qdq.Add-21/...``): a pattern, named by its central op,
#: in a model of that ai.onnx opset. No model ever carries it.
PATTERN_DOMAIN = "qdq"


@dataclass(frozen=True)
class Reading:
    """One permitted result of the case: the outputs under one reading of the spec, and per output
    the elements whose value that reading leaves undefined (don't-care; None: none). The masks are
    the reading's own: an element only another reading makes NaN is still checked here."""

    name: str  # e.g. "spec", "quotient-in-float16"
    outputs: tuple[np.ndarray, ...]
    dont_care: tuple[np.ndarray | None, ...] = ()  # () = no don't-care element in any output

    def __post_init__(self) -> None:
        if not self.dont_care:
            object.__setattr__(self, "dont_care", (None,) * len(self.outputs))
        if len(self.dont_care) != len(self.outputs):
            raise ValueError(f"reading {self.name}: {len(self.dont_care)} masks for {len(self.outputs)} outputs")


@dataclass(frozen=True)
class Draft:
    """What a generator produces: everything but the expected outputs (the oracle adds those)."""

    op: str
    opset: int
    types: str  # type signature in the id, e.g. "float32-int8"
    family: str
    name: str  # last id component, unique within (op, opset, types, family)
    inputs: tuple[Arg | None, ...]  # positional; None = optional input left out
    attrs: Mapping[str, Any] = field(default_factory=dict)
    domain: str = ONNX_DOMAIN
    clause: str = ""  # anchor in qconform/docs/semantics.md; the oracle fills it when empty
    provenance: str = ""
    note: str = ""
    #: A pattern's nodes, in topological order; its ``inputs`` are then the graph's inputs and
    #: initializers, by name, and ``domain`` is PATTERN_DOMAIN. Empty for a single-node case, which
    #: is the one-node graph ``one_node`` derives from the fields above (stored as they are: the
    #: corpus's form of a single-node case does not change, and its node is never written twice).
    graph: tuple[Node, ...] = ()

    @property
    def id(self) -> str:
        prefix = f"{self.domain}." if self.domain else ""
        return f"{prefix}{self.op}-{self.opset}/{self.types}/{self.family}/{self.name}"

    @property
    def is_graph(self) -> bool:
        """Whether the case is a pattern (nodes of its own) rather than one declared op's node."""
        return bool(self.graph)


def one_node(draft: Draft, outputs: tuple[str, ...]) -> Node:
    """A single-node draft as the one node of its graph: its op, its inputs by position ("" for one
    left out), its attributes, its domain, and ``outputs`` (its op's output names; a Draft does not
    hold them, the oracle and the Case do)."""
    return Node(draft.op, tuple("" if a is None else a.name for a in draft.inputs), tuple(outputs),
                dict(draft.attrs), draft.domain)


@dataclass(frozen=True)
class Case:
    """A complete case: a draft plus its expected outputs under every permitted reading.

    ``readings[0]`` is the reading the latest spec text states (the strict profile accepts only
    it). ``reading.dont_care[i]`` marks elements of output i whose value that reading leaves undefined.
    """

    draft: Draft
    output_names: tuple[str, ...]
    readings: tuple[Reading, ...]
    clause: str
    #: Non-empty: the model is invalid by the text (why); the case is information, never pass or fail.
    information: str = ""

    def __post_init__(self) -> None:
        if not self.readings:
            raise ValueError(f"{self.draft.id}: a case needs at least one reading")
        n = len(self.output_names)
        for r in self.readings:
            if len(r.outputs) != n:
                raise ValueError(f"{self.draft.id}: reading {r.name} has {len(r.outputs)} outputs, not {n}")

    # Flattened accessors: most consumers read these.
    id = property(lambda self: self.draft.id)
    op = property(lambda self: self.draft.op)
    domain = property(lambda self: self.draft.domain)
    opset = property(lambda self: self.draft.opset)
    types = property(lambda self: self.draft.types)
    family = property(lambda self: self.draft.family)
    inputs = property(lambda self: self.draft.inputs)
    attrs = property(lambda self: MappingProxyType(dict(self.draft.attrs)))
    graph = property(lambda self: self.draft.graph)
    is_graph = property(lambda self: self.draft.is_graph)

    @property
    def nodes(self) -> tuple[Node, ...]:
        """Every case is a graph: a pattern's nodes, or a single-node case's one node."""
        return self.draft.graph or (one_node(self.draft, self.output_names),)

    @property
    def expected(self) -> tuple[np.ndarray, ...]:
        return self.readings[0].outputs

    @functools.cached_property
    def output_types(self) -> tuple[str, ...]:
        """The outputs' type names (read for every record and model of the case: computed once)."""
        return tuple(dtypes.get(a.dtype).name for a in self.expected)

    @property
    def feeds(self) -> dict[str, np.ndarray]:
        """Graph inputs a runner is handed (initializers live in the model)."""
        return {a.name: a.value for a in self.inputs if a is not None and not a.initializer}

    @property
    def group(self) -> str:
        """Corpus file grouping: one file per (domain, op, opset)."""
        prefix = f"{self.domain}." if self.domain else ""
        return f"{prefix}{self.op}-{self.opset}"

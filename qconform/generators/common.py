"""Builders every generator shares: the op versions to generate for, typed arrays from plain numbers,
and drafts from a schema combo."""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from qconform import dtypes, schemas
from qconform.case import Arg, Draft
from qconform.declarations import operators
from qconform.declarations.operator import Kind
from qconform.oracle import floats
from qconform.schemas import OpSpec

#: The groups (op versions, ``OpSpec.key``) a caller of ``generators.all_drafts(wanted)`` keeps; None: all.
_WANTED: ContextVar[Callable[[str], bool] | None] = ContextVar("qconform_generators_wanted", default=None)


def specs() -> Iterator[OpSpec]:
    """Every op version of the schemas, less those the caller of ``all_drafts`` will not keep: a
    generator that walks these skips whole groups instead of drafting cases to throw away. Only for
    a generator whose drafts of one op version never depend on another's (not one that spreads
    its variants over the versions, as block_sizes does); ``all_drafts`` filters every draft by
    its group in any case, and the sampled regeneration test holds the kept groups to the corpus."""
    wanted = _WANTED.get()
    return (s for s in schemas.all_specs() if wanted is None or wanted(s.key))


@contextmanager
def only(wanted: Callable[[str], bool] | None):
    """While generating for ``all_drafts(wanted)``."""
    token = _WANTED.set(wanted)
    try:
        yield
    finally:
        _WANTED.reset(token)


def array(t: str, values: Iterable[float] | np.ndarray, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """An array of type t holding ``values`` (floats rounded to t by the project's own codec)."""
    et = dtypes.get(t)
    v = np.asarray(values, dtype=np.float64 if et.is_float else np.int64)
    if shape is not None:
        v = v.reshape(shape)
    if et.is_float:
        return et.from_bits(floats.encode(v, et, saturate=False, notes=False)).reshape(v.shape)
    lo, hi = et.qrange
    if v.size and (v.min() < lo or v.max() > hi):
        raise ValueError(f"{t}: value outside [{lo}, {hi}]")
    return et.from_bits(v & ((1 << et.bits) - 1)).reshape(v.shape)


def input_types(spec: OpSpec, combo: Mapping[str, str]) -> dict[str, str]:
    return {f.name: combo[f.type_param] for f in spec.inputs}


def output_types(spec: OpSpec, combo: Mapping[str, str]) -> dict[str, str]:
    return {f.name: combo[f.type_param] for f in spec.outputs}


def type_signature(spec: OpSpec, combo: Mapping[str, str]) -> str:
    """``x-y`` where the scale shares a type with x (QuantizeLinear) or y (DequantizeLinear),
    else ``x-scale-y``; other ops list every type parameter in order."""
    ins, outs = input_types(spec, combo), output_types(spec, combo)
    if is_quantize(spec) or is_dequantize(spec):
        x, s = ins[spec.inputs[0].name], ins[spec.inputs[1].name]
        y = outs["y"]
        same = s == (x if is_quantize(spec) else y)
        return f"{x}-{y}" if same else f"{x}-{s}-{y}"
    return "-".join(combo[k] for k in spec.type_params)


def draft(spec: OpSpec, combo: Mapping[str, str], family: str, name: str, values: Mapping[str, Any],
          attrs: Mapping[str, Any] | None = None, clause: str = "", note: str = "",
          provenance: str = "") -> Draft:
    """A draft whose input i gets ``values[formal name]`` (None or absent leaves an optional input out).

    The operator's data inputs are graph inputs; the others (weights, scales, zero points, bias) are
    initializers, as its declaration says."""
    types = input_types(spec, combo)
    decl = operators.get(spec.domain, spec.op)
    args: list[Arg | None] = []
    for i, f in enumerate(spec.inputs):
        v = values.get(f.name)
        if v is None:
            if not f.optional:
                raise ValueError(f"{spec.key}: input {f.name} is required")
            args.append(None)
            continue
        arr = v if isinstance(v, np.ndarray) and v.dtype == dtypes.get(types[f.name]).dtype else array(types[f.name], v)
        args.append(Arg(f.name, types[f.name], arr, initializer=not decl.input(f.name).is_graph_input))
    while args and args[-1] is None:
        args.pop()
    return Draft(op=spec.op, opset=spec.since, types=type_signature(spec, combo), family=family, name=name,
                 inputs=tuple(args), attrs=dict(attrs or {}), domain=spec.domain, clause=clause,
                 provenance=provenance or f"{family}:{spec.key}", note=note)


def is_quantize(spec: OpSpec) -> bool:
    return operators.get(spec.domain, spec.op).kind is Kind.QUANTIZE


def is_dequantize(spec: OpSpec) -> bool:
    return operators.get(spec.domain, spec.op).kind is Kind.DEQUANTIZE


def by_family(key: tuple[str, str], families: Sequence[str], table: Mapping[str, Callable[[], Iterable[Draft | None]]],
              family: str | None = None) -> Iterator[Draft]:
    """The drafts of ``family`` (of every family, in ``families``' order, where None) from ``table``'s
    builders, leaving out the None a builder yields for a combination without a case; nothing where
    the caller of ``all_drafts`` keeps no version of operator ``key``. The ``generate`` of a module
    whose families each build every case of one operator (MatMulNBits, GatherBlockQuantized)."""
    if not any((s.domain, s.op) == key for s in specs()):
        return
    for fam in (families if family is None else (family,)):
        yield from (d for d in table[fam]() if d is not None)


def family_entries(prefix: str, families: Sequence[str],
                   generate: Callable[[str], Iterator[Draft]]) -> dict[str, Callable[[], Iterator[Draft]]]:
    """One ``generators.FAMILIES`` entry per family, keyed "<prefix>:<family>", each generating that
    family alone."""
    return {f"{prefix}:{fam}": (lambda fam=fam: generate(fam)) for fam in families}


class ComboFamilies:
    """A generator whose families each draft, per type combination of its operators' kept versions
    (``specs``), the cases that family applies to: its ``combos``, ``applies``, ``generate`` and
    ``entries`` written once (QLinearConv's, the QOperator ops', the scale-product ops')."""

    def __init__(self, keys: Iterable[tuple[str, str]], families: Sequence[str], combo: Callable[[OpSpec, dict], Any],
                 applies: Callable[[Any, str], bool], build: Callable[[Any, str], Iterable[Draft | None]]) -> None:
        self.keys, self.families, self.combo = frozenset(keys), tuple(families), combo
        self._applies, self._build = applies, build

    def combos(self) -> Iterator[Any]:
        """Every type combination of the operators' kept versions, in the schemas' order."""
        for spec in (s for s in specs() if (s.domain, s.op) in self.keys):
            for types in spec.combinations():
                yield self.combo(spec, types)

    def applies(self, spec: OpSpec, combo: dict[str, str], family: str | None = None) -> bool:
        """The coverage table's question: does ``family`` (any, where None) draft this combination?"""
        if (spec.domain, spec.op) not in self.keys:
            return False
        c = self.combo(spec, combo)
        return any(self._applies(c, f) for f in (self.families if family is None else (family,)))

    def generate(self, family: str | None = None) -> Iterator[Draft]:
        """The drafts of ``family`` (every family in order, where None), combination by combination,
        leaving out the None a builder yields for a combination without a case."""
        for fam in (self.families if family is None else (family,)):
            for c in self.combos():
                if self._applies(c, fam):
                    yield from (d for d in self._build(c, fam) if d is not None)

"""Operator schemas as small typed specs: read from ``onnx.defs``, plus one cited table for the
com.microsoft ops that onnx.defs does not know. Generators enumerate type combinations from here."""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cache
from typing import Any

import onnx
import onnx.defs
from onnx import helper

from qconform import dtypes
from qconform.case import MS_DOMAIN, ONNX_DOMAIN
from qconform.declarations import operators

#: Ops and versions in scope: (domain, op) -> since_versions, from the operator declarations
#: (qconform/declarations/operators.py; adding one: qconform/docs/guide-op.md).
IN_SCOPE: dict[tuple[str, str], tuple[int, ...]] = operators.in_scope()


@dataclass(frozen=True)
class Formal:
    name: str
    type_param: str  # a key of OpSpec.type_params
    optional: bool = False


@dataclass(frozen=True)
class OpSpec:
    domain: str
    op: str
    since: int
    inputs: tuple[Formal, ...]
    outputs: tuple[Formal, ...]
    attrs: dict[str, Any]  # name -> default (None where the attribute has no default)
    type_params: dict[str, tuple[str, ...]]  # "T1" -> registry type names (out-of-scope types dropped)

    @property
    def key(self) -> str:
        prefix = f"{self.domain}." if self.domain else ""
        return f"{prefix}{self.op}-{self.since}"

    def combinations(self) -> list[dict[str, str]]:
        """Every assignment of a type to each type parameter (the schema's valid type combinations)."""
        names = list(self.type_params)
        return [dict(zip(names, combo)) for combo in itertools.product(*(self.type_params[n] for n in names))]


def _type_name(type_str: str) -> str | None:
    try:
        return dtypes.get(type_str).name
    except KeyError:
        return None  # e.g. tensor(double): not in the registry, not in scope


def _from_onnx(op: str, since: int) -> OpSpec:
    schema = onnx.defs.get_schema(op, since, ONNX_DOMAIN)
    if schema.since_version != since:
        raise LookupError(f"{op}-{since} is not a version of its own (it is {op}-{schema.since_version})")
    params = {tc.type_param_str: tuple(filter(None, map(_type_name, tc.allowed_type_strs)))
              for tc in schema.type_constraints}

    def formal(p: onnx.defs.OpSchema.FormalParameter) -> Formal:
        tp = p.type_str
        if tp not in params:  # a fixed type such as tensor(float)
            params[tp] = (dtypes.get(tp).name,)
        return Formal(p.name, tp, p.option == onnx.defs.OpSchema.FormalParameterOption.Optional)

    inputs = tuple(formal(p) for p in schema.inputs)
    outputs = tuple(formal(p) for p in schema.outputs)
    attrs = {a.name: (helper.get_attribute_value(a.default_value) if a.default_value.name else None)
             for a in schema.attributes.values()}
    return OpSpec(ONNX_DOMAIN, op, since, inputs, outputs, attrs, params)


def _from_declaration(op: operators.Operator) -> OpSpec:
    """A com.microsoft operator's schema, from the cited table of its declaration (onnx.defs has none)."""
    sch = op.schema or {}
    return OpSpec(op.domain, op.op, op.versions[0],
                  tuple(Formal(n, tp, opt) for n, tp, opt in sch["inputs"]),
                  tuple(Formal(n, tp) for n, tp in sch["outputs"]),
                  dict(sch["attrs"]), {k: tuple(v) for k, v in sch["types"].items()})


#: com.microsoft schemas by op name (their declarations' ``schema`` tables).
MS_SPECS: dict[str, OpSpec] = {o.op: _from_declaration(o) for o in operators.OPERATORS
                               if o.domain == MS_DOMAIN and o.schema}


@cache
def get(op: str, since: int, domain: str = ONNX_DOMAIN) -> OpSpec:
    if domain == MS_DOMAIN:
        if since != 1 or op not in MS_SPECS:
            raise LookupError(f"no com.microsoft spec for {op}-{since}")
        return MS_SPECS[op]
    return _from_onnx(op, since)


@cache
def since_version(domain: str, op: str, opset: int) -> int:
    """The version of ``op`` a model importing ``opset`` of its domain runs: the newest in scope at or
    below it. An opset newer than the schemas know (onnx.defs' newest; com.microsoft's is 1) raises:
    the op may have a version there that neither the schemas nor the oracle have."""
    newest = onnx.defs.onnx_opset_version() if domain == ONNX_DOMAIN else 1
    if opset > newest:
        raise LookupError(f"{domain or 'ai.onnx'} opset {opset} is newer than the schemas know ({newest}): "
                          f"{op} may have a version there that qconform does not model")
    versions = [v for v in IN_SCOPE.get((domain, op), ()) if v <= opset]
    if not versions:
        raise LookupError(f"{domain or 'ai.onnx'} {op} has no version in scope at opset {opset}")
    if domain == ONNX_DOMAIN:
        since = onnx.defs.get_schema(op, opset, domain).since_version
        if since != versions[-1]:
            raise LookupError(f"{op} at opset {opset} is {op}-{since} in onnx.defs, not a version in scope")
    return versions[-1]


def all_specs() -> list[OpSpec]:
    return [get(op, v, dom) for (dom, op), versions in IN_SCOPE.items() for v in versions]

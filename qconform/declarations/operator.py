"""What an operator declaration is made of: everything qconform needs to know of an operator that
is not arithmetic, said once (adding one: qconform/docs/guide-op.md).

Generators, the diagnosis, the facts drift and the runners' and kernels' scopes read these fields
instead of keeping lists of op names or positional input indices; the arithmetic itself lives in the
operator's oracle (``qconform/oracle/``), registered under the same (domain, op, version).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Sequence


class Kind(StrEnum):
    """What an operator computes, as far as the diagnosis and the kernels need to know: which steps
    its result goes through."""

    QUANTIZE = "quantize"  # float -> code: a division, a rounding, a saturation (or a float8 encode)
    DEQUANTIZE = "dequantize"  # code -> float: a subtraction and a multiplication
    DYNAMIC = "dynamic-quantize"  # computes its own scale and zero point, then quantizes
    REQUANTIZE = "requantize"  # integer accumulation, then a multiplier, a rounding, a saturation
    INTEGER = "integer"  # integer accumulation only (an int32 result)


class Role(StrEnum):
    """What one input of an operator is."""

    DATA = "data"  # the tensor computed on; a graph input of a case
    WEIGHT = "weight"  # a tensor computed on that a model holds as an initializer (a filter, B)
    SCALE = "scale"
    ZERO_POINT = "zero-point"
    BIAS = "bias"


@dataclass(frozen=True)
class Input:
    """One input of an operator, in schema order."""

    name: str
    role: Role
    #: A scale's or zero point's tensor (``y`` for an output's); "" for data, weights and bias.
    of: str = ""
    #: How a per-channel parameter maps onto its tensor: the axis of ``of`` its elements run along
    #: ("axis" = the op's ``axis`` attribute; an int = that axis; None = per tensor only).
    along: str | int | None = None

    @property
    def is_graph_input(self) -> bool:
        """Whether a case hands this input to the runner (the others are initializers of the model)."""
        return self.role is Role.DATA


@dataclass(frozen=True)
class Operator:
    """One operator in qconform's scope, every version of it."""

    domain: str  # "" for ai.onnx
    op: str
    versions: tuple[int, ...]  # the since_versions in scope, oldest first
    kind: Kind
    inputs: tuple[Input, ...]
    outputs: tuple[str, ...]
    #: The semantics.md anchor of the operator's formula (the first decision the readings rest on).
    section: str
    #: Every reading name a case of the operator may carry (semantics.md §13 lists them).
    readings: tuple[str, ...] = ()
    #: The input whose type is the output's, where one is (a zero point); else the output is
    #: the first data input's type, or ``output_type`` when set.
    output_like: str = ""
    output_type: str = ""
    #: How an accumulating operator walks its operands: "matmul" (numpy.matmul's K) or "conv"
    #: (a filter window over the group's channels); "" for the others.
    contraction: str = ""
    #: Whether qconform's own kernels (cpu-kernel, gpu-kernel) implement it; why not otherwise.
    kernel: bool = True
    kernel_reason: str = ""
    #: The attributes that change the arithmetic (a test fails where one has no case).
    arithmetic_attrs: tuple[str, ...] = ()
    #: Families whose cases the facts of third-party runtimes are asserted on (the observed slice).
    observed: tuple[str, ...] = ("basic",)
    #: Registered schema where onnx.defs has none (com.microsoft): (inputs, outputs, attrs, type params).
    schema: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def key(self) -> tuple[str, str]:
        return (self.domain, self.op)

    @property
    def label(self) -> str:
        """The op as case ids and groups spell it (``com.microsoft.QuantizeLinear``)."""
        return f"{self.domain}.{self.op}" if self.domain else self.op

    def input(self, name: str) -> Input:
        for i in self.inputs:
            if i.name == name:
                return i
        raise KeyError(f"{self.label} has no input {name!r}")

    def index(self, name: str) -> int:
        return [i.name for i in self.inputs].index(name)

    def of_role(self, role: Role) -> tuple[Input, ...]:
        return tuple(i for i in self.inputs if i.role is role)

    def params_of(self, tensor: str) -> tuple[Input | None, Input | None]:
        """The scale and the zero point of ``tensor`` (None where the operator has none)."""
        scale = next((i for i in self.inputs if i.role is Role.SCALE and i.of == tensor), None)
        zero = next((i for i in self.inputs if i.role is Role.ZERO_POINT and i.of == tensor), None)
        return scale, zero

    def arg(self, args: Sequence[Any], name: str) -> Any:
        """The argument of input ``name`` in a positional argument list (None where left out)."""
        i = self.index(name)
        return args[i] if i < len(args) else None

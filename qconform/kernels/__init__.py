"""qconform's own reference kernels: ``qkernels.h``, one C source for the host and the device.

``build`` compiles it with gcc for the ``cpu-kernel`` runner; ``ptx`` compiles it with NVRTC for
the GPU (and lints the PTX); ``qconform/runners/gpu_kernel.py`` launches it through CuPy. This module holds
what both sides share: the kind numbers of the kernel ABI and the host-side plan of a call (which
kinds, which precision, how parameters are indexed).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qconform import dtypes
from qconform.case import ONNX_DOMAIN, Arg, Draft
from qconform.oracle.base import InvalidModel, oracle_for, output_type
from qconform.oracle.granularity import expand, granularity
from qconform.runner import Unsupported

#: The one C source of the kernels, for the host (build.py) and the device (ptx.py).
HEADER = Path(__file__).with_name("qkernels.h")

#: Kernel kind numbers, in the order of the header's enum (tests check each row against dtypes).
KINDS: tuple[str, ...] = (
    "int2", "uint2", "int4", "uint4", "int8", "uint8", "int16", "uint16", "int32",
    "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float4e2m1", "float6e2m3",
    "float6e3m2", "float8e8m0", "float16", "bfloat16", "float32",
)
KIND: dict[str, int] = {name: i for i, name in enumerate(KINDS)}

#: Kernel style numbers (the header's QK_STYLE_*), by the registry's FloatFormat.nan_style.
STYLE: dict[str, int] = {"int": 0, "ieee": 1, "fn": 2, "fnuz": 3, "none": 4, "e8m0": 5}

#: Precisions the kernel computes a quotient in (a kernel fact: the oracle says which one a node asks for).
PRECISIONS = ("float32", "float16", "bfloat16")


def kind(name: str) -> int:
    return KIND[dtypes.get(name).name]


@dataclass(frozen=True)
class ParamIndex:
    """How element i of x finds its scale / zero point: the header's qk_param_index arguments.

    a = (i // inner) % axis_len; parameter = outer * s_outer + (a // block) * s_axis + (i % inner) * s_inner.
    """

    inner: int = 1
    axis_len: int = 0  # 0: per-tensor
    block: int = 1
    s_outer: int = 0
    s_axis: int = 0
    s_inner: int = 0

    @property
    def args(self) -> tuple[int, ...]:
        return self.inner, self.axis_len, self.block, self.s_outer, self.s_axis, self.s_inner


def param_index(x_shape: tuple[int, ...], p_shape: tuple[int, ...], axis: int | None, block_size: int) -> ParamIndex:
    """Per-tensor, per-axis or blocked indexing. Which one, and whether the shapes fit, is the
    oracle's decision (oracle/granularity.py: a scalar is per-tensor whatever block_size says;
    ``expand`` raises InvalidModel for a scale that does not fit x, axis and block_size)."""
    x_shape, p_shape = tuple(x_shape), tuple(p_shape)
    if granularity(x_shape, p_shape, axis, block_size) == "per-tensor":
        return ParamIndex()
    expand(np.zeros(p_shape), x_shape, axis, block_size)  # the oracle's shape checks
    axis %= len(x_shape)
    inner = int(np.prod(x_shape[axis + 1:], dtype=np.int64))
    n = x_shape[axis]
    if not block_size:
        return ParamIndex(inner, n, 1, 0, 1, 0)
    blocks = math.ceil(n / block_size)
    return ParamIndex(inner, n, block_size, blocks * inner, inner, 1)


def codes(arr: np.ndarray, t: dtypes.ElemType) -> np.ndarray:
    """One code per element in the kernel's storage (uint8 / uint16 / uint32), contiguous."""
    raw = t.to_bits(np.asarray(arr, dtype=t.dtype))
    storage = np.uint8 if t.bits <= 8 else (np.uint16 if t.bits <= 16 else np.uint32)
    return np.ascontiguousarray(raw.astype(storage, copy=False)).reshape(-1)


def storage_dtype(t: dtypes.ElemType) -> np.dtype:
    return np.dtype(np.uint8 if t.bits <= 8 else (np.uint16 if t.bits <= 16 else np.uint32))


def from_codes(raw: np.ndarray, t: dtypes.ElemType, shape: tuple[int, ...]) -> np.ndarray:
    """Kernel output codes -> an array of t's registry dtype (exact bit moves only)."""
    raw = raw.reshape(shape)
    if t.is_integer and t.packed:
        c = raw.astype(np.uint8)
        if t.signed:
            shift = 8 - t.bits
            c = (c << np.uint8(shift)).view(np.int8) >> np.int8(shift)
        return np.asarray(c.astype(t.dtype)).reshape(shape)  # numpy ops on 0-d give scalars
    if raw.dtype.itemsize == t.dtype.itemsize:
        return raw.view(t.dtype)
    return t.from_bits(raw)


# ----------------------------------------------------------------------------------------------
# Plan: what the node asks for, read once from the model (shared by cpu-kernel and gpu-kernel)
# ----------------------------------------------------------------------------------------------
# What the C kernels implement (kernel facts, not type facts: a type the registry and the spec
# allow may still be missing from the kernels, and the plan refuses it as Unsupported).
Q_X = ("float32", "float16", "bfloat16", "int32")
Q_SCALE = ("float32", "float16", "bfloat16", "int32", "float8e8m0")
Q_OUT = ("int2", "uint2", "int4", "uint4", "int8", "uint8", "int16", "uint16", "float8e4m3fn", "float8e4m3fnuz",
         "float8e5m2", "float8e5m2fnuz", "float4e2m1", "float6e2m3", "float6e3m2")
DQ_X = Q_OUT + ("int32",)
DQ_SCALE = ("float32", "float16", "bfloat16", "float8e8m0")
DQ_OUT = ("float32", "float16", "bfloat16")
KNOWN_ATTRS = {"QuantizeLinear": {"axis", "block_size", "saturate", "output_dtype", "precision"},
               "DequantizeLinear": {"axis", "block_size", "output_dtype"}}


@dataclass
class Plan:
    """One QuantizeLinear / DequantizeLinear node as the kernel runs it."""

    op: str  # "QuantizeLinear" | "DequantizeLinear"
    opset: int
    inputs: tuple[str | None, ...]  # x, scale, zero point (None: absent)
    types: tuple[str | None, ...]  # declared element types of those inputs
    consts: dict[str, np.ndarray] = field(default_factory=dict)  # initializers
    out_type: str = ""
    axis: int | None = 1
    block_size: int = 0
    saturate: int = 1
    prec: str = "float32"  # quotient precision (QuantizeLinear)
    fnuz_inf_saturates: bool = True

    def arrays(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray | None]:
        out = []
        for name, t in zip(self.inputs, self.types):
            if name is None:
                out.append(None)
                continue
            arr = self.consts[name] if name in self.consts else np.asarray(feeds[name])
            want = dtypes.get(t)
            if arr.dtype != want.dtype:
                raise TypeError(f"input {name}: array dtype {arr.dtype}, the model declares {want.name}")
            out.append(arr)
        return out

    def call(self, feeds: Mapping[str, np.ndarray]) -> tuple[dict[str, Any], tuple[int, ...]]:
        """Everything a kernel launch needs: codes, kinds, flags, indexing; and x's shape."""
        x, s, zp = self.arrays(feeds)
        if zp is not None and zp.shape != s.shape:
            raise InvalidModel(f"zero point shape {zp.shape} differs from scale shape {s.shape}")
        idx = param_index(x.shape, s.shape, self.axis, self.block_size)
        xt, st, zt = (dtypes.get(t) if t else None for t in self.types)
        if self.op == "DequantizeLinear" and xt.name == "int32" and zp is not None and np.any(zp != 0):
            raise InvalidModel("int32 input with a non-zero zero point")
        args = dict(x=codes(x, xt), xk=KIND[xt.name], s=codes(s, st), sk=KIND[st.name],
                    zp=None if zp is None else codes(zp, zt), ok=KIND[self.out_type], n=int(x.size), index=idx)
        if self.op == "QuantizeLinear":
            args.update(prec=KIND[self.prec], saturate=int(bool(self.saturate)),
                        fnuz_inf_saturates=int(self.fnuz_inf_saturates))
        return args, tuple(x.shape)


def read_plan(model: onnx.ModelProto, who: str) -> Plan:
    """Read the single node; ``Unsupported`` for anything the kernels do not cover.

    The op's rules (which versions exist, whether it has an axis, its output type, its quotient
    precision, its Cast table) are the oracle's version class's, asked here, never restated."""
    if len(model.graph.node) != 1:
        raise Unsupported(f"{who} runs single-node models only")
    node = model.graph.node[0]
    if node.domain not in ("", "ai.onnx") or node.op_type not in KNOWN_ATTRS:
        dom = f"{node.domain}." if node.domain else ""
        raise Unsupported(f"{who} implements ai.onnx QuantizeLinear and DequantizeLinear only, not {dom}{node.op_type}")
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    try:
        oracle = oracle_for(ONNX_DOMAIN, node.op_type, opset)
    except LookupError as exc:  # a version the schemas and the oracle do not know
        raise Unsupported(f"{who}: {exc}") from None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    unknown = sorted(set(attrs) - KNOWN_ATTRS[node.op_type])
    if unknown:
        raise Unsupported(f"{who}: attribute(s) {', '.join(unknown)} of {node.op_type} not implemented")
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    declared = {t.name: dtypes.get(t.data_type).name for t in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name not in declared:
            declared[vi.name] = dtypes.get(vi.type.tensor_type.elem_type).name
    names = list(node.input) + [""] * (3 - len(node.input))
    inputs = tuple(n or None for n in names[:3])
    types = tuple(declared[n] if n else None for n in inputs)
    xt, st, zt = types
    plan = Plan(node.op_type, opset, inputs, types, consts)
    plan.axis = oracle.axis(attrs, _rank(model, inputs[0]))
    plan.block_size = int(attrs.get("block_size", 0))
    out = _output_type(node.op_type, opset, attrs, inputs, types)
    if node.op_type == "QuantizeLinear":
        code = attrs.get("output_dtype", 0)
        if code and zt and dtypes.get(code).name != zt:  # QuantizeLinear.evaluate's own check
            raise InvalidModel("output_dtype differs from the zero point's type")
        _need(who, "x", xt, Q_X)
        _need(who, "y_scale", st, Q_SCALE)
        _need(who, "output", out, Q_OUT)
        plan.saturate = int(attrs.get("saturate", 1))
        plan.fnuz_inf_saturates = oracle.fnuz_inf_saturates
        # The quotient precision the latest text states: the oracle's first division reading.
        plan.prec = oracle.division_readings(xt, st, attrs)[0][1]
        _need(who, "precision", plan.prec, PRECISIONS)
    else:
        _need(who, "x", xt, DQ_X)
        _need(who, "x_scale", st, DQ_SCALE)
        _need(who, "output", out, DQ_OUT)
        if zt is not None and zt != xt:  # the schema's type constraint (x and x_zero_point are both T1)
            raise InvalidModel(f"zero point type {zt} differs from x type {xt}")
    plan.out_type = out
    return plan


def _rank(model: onnx.ModelProto, name: str) -> int:
    """The declared rank of input ``name`` (the oracle's ``axis`` takes it)."""
    for t in model.graph.initializer:
        if t.name == name:
            return len(t.dims)
    for vi in model.graph.input:
        if vi.name == name:
            return len(vi.type.tensor_type.shape.dim)
    return 0


def _output_type(op: str, opset: int, attrs: Mapping[str, Any], inputs, types) -> str:
    """The oracle's output-type rule (qconform/docs/semantics.md#q-output-type, #dq-output-type), asked
    with the node's attributes and declared types (the rule reads no values)."""
    args = tuple(None if t is None else Arg(n, t, np.zeros((), dtypes.get(t).dtype)) for n, t in zip(inputs, types))
    return output_type(Draft(op, opset, "", "", "", args, attrs))


def _need(who: str, what: str, t: str, allowed: tuple[str, ...]) -> None:
    if t not in allowed:
        raise Unsupported(f"{who}: {what} type {t} not implemented (kernels cover {', '.join(allowed)})")


def run_plan(plan: Plan, feeds: Mapping[str, np.ndarray], launch: Callable[..., np.ndarray]) -> list[np.ndarray]:
    """Run a plan with ``launch(**args) -> output codes`` (the host or the device loop)."""
    try:
        args, shape = plan.call(feeds)
    except InvalidModel as exc:
        raise ValueError(f"invalid model: {exc}") from None
    raw = launch(plan.op, **args)
    return [from_codes(raw, dtypes.get(plan.out_type), shape)]


__all__ = ["DQ_OUT", "InvalidModel", "Plan", "Q_OUT", "read_plan", "run_plan", "KIND", "KINDS", "PRECISIONS", "STYLE", "ParamIndex", "codes", "from_codes",
           "kind", "param_index", "storage_dtype"]

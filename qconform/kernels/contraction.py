"""The integer compute ops as the kernels run them: QLinearConv and ConvInteger (qkernels.h's ``conv``
entry point) and MatMulInteger (``matmul_integer``), read by their declarations (roles, output type,
arithmetic attributes), never by name.

The host plans shapes only, with the oracle's own rules: ``integer.conv_geometry`` (auto_pad resolved,
attributes checked against the tensors), ``integer.matmul_operands`` and ``param_view`` (through
``node.MatmulShapes``). The arithmetic -- the exact accumulation, the bias, the accumulation reading,
the requantisation with the float32 multiplier, rounding half to even, saturation -- is the header's,
so the device runs it too. Which readings come first is asked of the oracle (its first requantisation
and accumulation readings, qconform/docs/semantics.md#qlconv-requant and #integer-accumulation).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from qconform import dtypes
from qconform.declarations.operator import Kind, Operator, Role
from qconform.kernels import CONV_GEOMETRY, KIND, Launch, codes, from_codes, storage_dtype
from qconform.kernels.node import ACCUMULATIONS, REQUANTISATIONS, Execute, MatmulShapes, Node, checked, need, single_launch
from qconform.oracle.base import InvalidModel
from qconform.oracle.integer import ACCUMULATIONS as ORACLE_ACCUMULATIONS
from qconform.oracle.integer import conv_geometry
from qconform.runner import Unsupported

# Kernel facts: what the conv and matmul_integer entry points implement.
INT_DATA = ("int8", "uint8")  # x, w, A, B and their zero points: a difference fits 9 bits
CONV_SCALE = ("float32",)
CONV_OUT = ("int8", "uint8", "int32")  # QLinearConv's requantised y; ConvInteger's int32
MAX_SPATIAL = 3  # 1-D to 3-D: fewer axes are size-1 axes of the 3-D walk


def _scalar(name: str, v: np.ndarray | None) -> None:
    if v is not None and not (v.size == 1 and v.ndim <= 1):
        raise InvalidModel(f"{name} of shape {v.shape}: per tensor only (a scalar)")


def _per_channel(name: str, v: np.ndarray | None, m: int) -> None:
    if v is not None and not (v.size == 1 and v.ndim <= 1) and not (v.ndim == 1 and v.shape[0] == m):
        raise InvalidModel(f"{name} of shape {v.shape}: a scalar or one element per output channel ({m})")


def _per_m(v: np.ndarray | None, t: str, m: int) -> np.ndarray:
    """A per-tensor or per-output-channel parameter as M codes (absent: code 0, value 0)."""
    et = dtypes.get(t)
    if v is None:
        return np.zeros(m, storage_dtype(et))
    return codes(np.ascontiguousarray(np.broadcast_to(v.reshape(-1) if v.size > 1 else v.reshape(()), (m,))), et)


def _one(v: np.ndarray | None, t: str) -> np.ndarray:
    """A per-tensor parameter as one code (absent: code 0)."""
    return np.zeros(1, storage_dtype(dtypes.get(t))) if v is None else codes(v.reshape(1), dtypes.get(t))


def geometry(x_shape: tuple[int, ...], w_shape: tuple[int, ...], attrs: Mapping) -> tuple[np.ndarray, tuple[int, ...]]:
    """The conv entry point's geometry numbers (``CONV_GEOMETRY`` order) and y's shape. The
    attributes are resolved by the oracle's ``conv_geometry`` (InvalidModel where they contradict the
    tensors); output sizes are Conv's floor((D + pads - dilated kernel) / stride) + 1."""
    strides, dil, begin, end, group = conv_geometry(x_shape, w_shape, attrs)
    spatial = len(x_shape) - 2
    if spatial > MAX_SPATIAL:
        raise Unsupported(f"a {spatial}-D convolution (the kernels walk 1-D to {MAX_SPATIAL}-D)")
    d, k = list(x_shape[2:]), list(w_shape[2:])
    o = [(dd + b + e - ((kk - 1) * dl + 1)) // s + 1 for dd, b, e, kk, dl, s in zip(d, begin, end, k, dil, strides)]
    fill = MAX_SPATIAL - spatial
    values = {"n": [x_shape[0]], "c": [x_shape[1]], "m": [w_shape[0]], "group": [group],
              "d": d + [1] * fill, "k": k + [1] * fill, "o": o + [1] * fill, "s": list(strides) + [1] * fill,
              "dil": list(dil) + [1] * fill, "pad": list(begin) + [0] * fill}
    numbers = [int(v) for name, count in CONV_GEOMETRY for v in values[name][:count]]
    return np.array(numbers, np.int64), (x_shape[0], w_shape[0], *o)


@dataclass
class ConvPlan:
    """One QLinearConv (requant) or ConvInteger node as the conv entry point runs it."""

    node: Node
    decl: Operator
    out_type: str
    requant: bool
    wrap: int

    def _inputs(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | None]:
        arrays = self.node.arrays(feeds)
        return {i.name: self.decl.arg(arrays, i.name) for i in self.decl.inputs}

    def launch(self, feeds: Mapping[str, np.ndarray]) -> tuple[Launch, tuple[int, ...]]:
        d, v = self.decl, self._inputs(feeds)
        x_name, w_name = d.of_role(Role.DATA)[0].name, d.of_role(Role.WEIGHT)[0].name
        (xs_in, xz_in), (ws_in, wz_in), (ys_in, yz_in) = (d.params_of(t) for t in (x_name, w_name, "y"))
        get = lambda inp: None if inp is None else v[inp.name]  # noqa: E731
        x, w = v[x_name], v[w_name]
        xs, xz, ws, wz, ys, yz = (get(i) for i in (xs_in, xz_in, ws_in, wz_in, ys_in, yz_in))
        if x is None or w is None:
            raise InvalidModel(f"{d.label} needs {x_name} and {w_name}")
        if self.requant and any(p is None for p in (xs, xz, ws, wz, ys, yz)):
            raise InvalidModel(f"{d.label} needs the scale and zero point of {x_name}, {w_name} and y")
        if x.ndim < 3 or w.ndim != x.ndim:
            raise InvalidModel(f"{x_name} {x.shape} and {w_name} {w.shape}: not an N-D convolution")
        m = w.shape[0]
        for (si, s), (zi, z) in (((xs_in, xs), (xz_in, xz)), ((ws_in, ws), (wz_in, wz)), ((ys_in, ys), (yz_in, yz))):
            if s is not None and z is not None and s.shape != z.shape:
                raise InvalidModel(f"{si.name} {s.shape} and {zi.name} {z.shape} differ in shape")
        for inp, val in ((xs_in, xs), (xz_in, xz), (ys_in, ys), (yz_in, yz)):
            if inp is not None:
                _scalar(inp.name, val)
        for inp, val in ((ws_in, ws), (wz_in, wz)):
            if inp is not None:
                _per_channel(inp.name, val, m)
        bias_in = next(iter(d.of_role(Role.BIAS)), None)
        bias = get(bias_in)
        if bias is not None and bias.shape != (m,):
            raise InvalidModel(f"{bias_in.name} of shape {bias.shape}: a 1-D bias of M = {m} elements")
        geom, shape = geometry(x.shape, w.shape, self.node.attrs)
        tx, tw = (self.node.types[d.index(n)] for n in (x_name, w_name))
        scale_t = "float32"
        args = dict(x=codes(x, dtypes.get(tx)), xk=KIND[tx], w=codes(w, dtypes.get(tw)), wk=KIND[tw], geom=geom,
                    xz=_one(xz, tx), wz=_per_m(wz, tw, m), bias=_per_m(bias, "int32", m), ws=_per_m(ws, scale_t, m),
                    xs=_one(xs, scale_t), ys=_one(ys, scale_t), sk=KIND[scale_t], yz=_one(yz, self.out_type),
                    ok=KIND[self.out_type], requant=int(self.requant), wrap=self.wrap, n=int(np.prod(shape)))
        size = int(np.prod(shape))
        return Launch("conv", args, {"y": (storage_dtype(dtypes.get(self.out_type)), size)}, size), shape

    def run(self, feeds: Mapping[str, np.ndarray], execute: Execute) -> list[np.ndarray]:
        return single_launch(lambda: self.launch(feeds), execute, self.out_type)


@dataclass
class MatMulIntegerPlan:
    """One MatMulInteger node as the matmul_integer entry point runs it (y int32)."""

    node: Node
    decl: Operator

    def launch(self, feeds: Mapping[str, np.ndarray]) -> tuple[Launch, tuple[int, ...], tuple[int, ...]]:
        d, arrays = self.decl, self.node.arrays(feeds)
        a_name, b_name = d.of_role(Role.DATA)[0].name, d.of_role(Role.WEIGHT)[0].name
        (_, az_in), (_, bz_in) = d.params_of(a_name), d.params_of(b_name)
        a, b = d.arg(arrays, a_name), d.arg(arrays, b_name)
        if a is None or b is None:
            raise InvalidModel(f"{d.label} needs {a_name} and {b_name}")
        az, bz = d.arg(arrays, az_in.name), d.arg(arrays, bz_in.name)
        ta, tb = (self.node.types[d.index(n)] for n in (a_name, b_name))
        g = MatmulShapes.of(a, b, (a_name, b_name))
        args = dict(g.operand_args(a, ta, b, tb), az=g.params(az, ta, "a"), bz=g.params(bz, tb, "b"))
        return Launch("matmul_integer", args, {"y": (np.dtype(np.uint32), g.size)}, g.size), g.full, g.shape

    def run(self, feeds: Mapping[str, np.ndarray], execute: Execute) -> list[np.ndarray]:
        launch, full, shape = checked(lambda: self.launch(feeds))
        return [from_codes(execute(launch)["y"], dtypes.get("int32"), full).reshape(shape)]


def read(node: Node, decl: Operator, who: str) -> ConvPlan | MatMulIntegerPlan:
    """The plan of a declared integer compute op; Unsupported for types the kernels do not cover,
    InvalidModel where a zero point's type is not its tensor's."""
    types = dict(zip((i.name for i in decl.inputs), node.types))
    for tensor in (decl.of_role(Role.DATA)[0].name, decl.of_role(Role.WEIGHT)[0].name):
        need(who, tensor, types[tensor], INT_DATA)
        scale, zero = decl.params_of(tensor)
        if zero is not None and types.get(zero.name) not in (None, types[tensor]):
            raise InvalidModel(f"{zero.name} type {types[zero.name]} differs from {tensor} type {types[tensor]}")
        if scale is not None and types.get(scale.name) is not None:
            need(who, scale.name, types[scale.name], CONV_SCALE)
    if decl.contraction == "matmul":
        return MatMulIntegerPlan(node, decl)
    out = decl.output_type or types[decl.output_like]
    need(who, "output", out, CONV_OUT)
    requant = decl.kind is Kind.REQUANTIZE
    if requant:
        y_scale = decl.params_of("y")[0]
        if types.get(y_scale.name) is not None:
            need(who, y_scale.name, types[y_scale.name], CONV_SCALE)
        first = node.oracle.requantisations(types[y_scale.name] or "float32")[0]
        if first not in REQUANTISATIONS:
            raise Unsupported(f"{who}: requantisation reading {first} not implemented")
    # The accumulation reading the oracle reads first (ConvInteger's one reading is the same wrap).
    return ConvPlan(node, decl, out, requant, ACCUMULATIONS[ORACLE_ACCUMULATIONS[0]])


__all__ = ["CONV_OUT", "CONV_SCALE", "ConvPlan", "INT_DATA", "MAX_SPATIAL", "MatMulIntegerPlan", "geometry", "read"]

"""onnxruntime's element-wise quantized binary ops as the kernels run them, by declared section:
``ms-qlinear-mul`` (C = ((A − A_zp)·(B − B_zp))·(A_s·B_s)/C_s + C_zp) and ``ms-qlinear-add`` (C =
RNE((A_s·(A − A_zp) + B_s·(B − B_zp)) / C_s) + C_zp from the exact value, reading exact-rational: qkernels.h's
``qlinear_add`` entry point, the same broadcast offsets).

The product of two codes' differences is the quantized matmul's accumulator over K = 1, and the text
requantises it with the quantized matmul's readings, so the kernel is qkernels.h's ``qlinear_matmul``
entry point over one batch per output element (M = K = N = 1): batch t's A element and B element are
found through offsets the host plans from numpy broadcasting (shapes only). The arithmetic -- the exact
product, the accumulation reading, ``qk_requant_f32`` (multiplier-float32, the oracle's first
reading), rounding half to even, the zero point, saturation -- is the header's, on the device too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from qconform import dtypes
from qconform.declarations.operator import Operator, Role
from qconform.kernels import KIND, Launch, codes, storage_dtype
from qconform.kernels.node import ACCUMULATIONS, REQUANTISATIONS, Execute, Node, need, single_launch
from qconform.oracle.base import InvalidModel
from qconform.oracle.integer import ACCUMULATIONS as ORACLE_ACCUMULATIONS
from qconform.runner import Unsupported

#: The declarations' sections these plans compute (the formula, not the op's name, decides).
SECTIONS = ("ms-qlinear-mul", "ms-qlinear-add")
#: QLinearAdd's reading the ``qlinear_add`` entry point computes (the oracle's first).
ADD_FIRST = "exact-rational"
DATA = ("int8", "uint8")
SCALE = ("float32",)


def _scalar(name: str, v: np.ndarray | None) -> None:
    if v is not None and not (v.size == 1 and v.ndim <= 1):
        raise InvalidModel(f"{name} of shape {v.shape}: a scalar (per tensor) only")


def _offsets(shape: tuple[int, ...], out: tuple[int, ...]) -> np.ndarray:
    """For each element of the broadcast output, the flat index of the operand element it reads."""
    idx = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    return np.ascontiguousarray(np.broadcast_to(idx, out).reshape(-1))


@dataclass
class BinaryPlan:
    """One element-wise requantising binary node: A and B broadcast, per-tensor parameters."""

    node: Node
    decl: Operator
    out_type: str
    wrap: int

    def launch(self, feeds: Mapping[str, np.ndarray]) -> tuple[Launch, tuple[int, ...]]:
        d, arrays = self.decl, self.node.arrays(feeds)
        a_name, b_name = (i.name for i in d.of_role(Role.DATA))
        (as_in, az_in), (bs_in, bz_in), (ys_in, yz_in) = (d.params_of(t) for t in (a_name, b_name, "y"))
        get = lambda inp: d.arg(arrays, inp.name)  # noqa: E731
        a, b, as_, az, bs, bz, ys, yz = (get(i) for i in (d.input(a_name), d.input(b_name), as_in, az_in, bs_in,
                                                           bz_in, ys_in, yz_in))
        if any(v is None for v in (a, b, as_, bs, ys)):
            raise InvalidModel(f"{d.label} needs {a_name}, {b_name} and the scales of both and of the output")
        for inp, v in ((as_in, as_), (az_in, az), (bs_in, bs), (bz_in, bz), (ys_in, ys), (yz_in, yz)):
            _scalar(inp.name, v)
        try:
            shape = tuple(np.broadcast_shapes(a.shape, b.shape))
        except ValueError:
            raise InvalidModel(f"{a_name} {a.shape} and {b_name} {b.shape} do not broadcast") from None
        size = int(np.prod(shape, dtype=np.int64))
        ta, tb = (self.node.types[d.index(n)] for n in (a_name, b_name))
        f32 = dtypes.get("float32")
        one = lambda v, t: np.zeros(1, storage_dtype(dtypes.get(t))) if v is None else codes(v.reshape(1), dtypes.get(t))  # noqa: E731
        many = lambda v, t: np.ascontiguousarray(np.broadcast_to(one(v, t), (size,)))  # noqa: E731
        args = dict(a=codes(a, dtypes.get(ta)), ak=KIND[ta], a_off=_offsets(a.shape, shape),
                    b=codes(b, dtypes.get(tb)), bk=KIND[tb], b_off=_offsets(b.shape, shape),
                    nb=size, mdim=1, kdim=1, ndim=1, as_=many(as_, "float32"), az=many(az, ta),
                    bs_=many(bs, "float32"), bz=many(bz, tb), sk=KIND[f32.name], ys=one(ys, "float32"),
                    yz=one(yz, self.out_type), ok=KIND[self.out_type], rq=REQUANTISATIONS["multiplier-float32"],
                    wrap=self.wrap, saturate=1, fnuz_inf_saturates=0)
        out = {"y": (storage_dtype(dtypes.get(self.out_type)), size)}
        if self.decl.section == "ms-qlinear-add":
            if ta != tb:
                raise InvalidModel(f"{a_name} {ta} and {b_name} {tb}: one type T")
            args = dict(a=args["a"], a_off=args["a_off"], b=args["b"], b_off=args["b_off"], tk=KIND[ta], az=one(az, ta),
                        bz=one(bz, tb), as_=one(as_, "float32"), bs_=one(bs, "float32"), cs_=args["ys"], yz=args["yz"],
                        ok=KIND[self.out_type], n=size)
            return Launch("qlinear_add", args, out, size), shape
        return Launch("qlinear_matmul", args, out, size), shape

    def run(self, feeds: Mapping[str, np.ndarray], execute: Execute) -> list[np.ndarray]:
        return single_launch(lambda: self.launch(feeds), execute, self.out_type)


def read(node: Node, decl: Operator, who: str) -> BinaryPlan:
    """The plan of a declared element-wise binary op; Unsupported for what the kernels do not cover."""
    types = dict(zip((i.name for i in decl.inputs), node.types))
    data = [i.name for i in decl.of_role(Role.DATA)]
    for name in data:
        need(who, name, types.get(name), DATA)
        scale, zero = decl.params_of(name)
        need(who, scale.name, types.get(scale.name), SCALE)
        if types.get(zero.name) not in (None, types[name]):
            raise InvalidModel(f"{zero.name} type {types[zero.name]} differs from {name} type {types[name]}")
    ys, yz = decl.params_of("y")
    need(who, ys.name, types.get(ys.name), SCALE)
    out = types.get(decl.output_like) or types[data[0]]
    need(who, "output", out, DATA)
    if decl.section == "ms-qlinear-add":
        if decl.readings[0] != ADD_FIRST:
            raise Unsupported(f"{who}: reading {decl.readings[0]} not implemented ({ADD_FIRST})")
        return BinaryPlan(node, decl, out, 0)
    first = node.oracle.requantisations("float32")[0]
    if first not in REQUANTISATIONS:
        raise Unsupported(f"{who}: requantisation reading {first} not implemented")
    return BinaryPlan(node, decl, out, ACCUMULATIONS[ORACLE_ACCUMULATIONS[0]])


__all__ = ["BinaryPlan", "DATA", "SCALE", "SECTIONS", "read"]

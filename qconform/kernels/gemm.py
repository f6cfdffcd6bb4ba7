"""onnxruntime's com.microsoft QGemm as the kernels run it (the declaration whose section is
``ms-qgemm``): Y = alpha·A'·B' (+ C) requantised with the quantized matmul's readings, alpha·a_scale in
place of a_scale, and Y float32 where y_scale is absent (semantics.md#ms-qgemm).

The host plans shapes only: transA / transB applied to the codes (A' [M, K], B' [K, N]), C broadcast to
[M, N], b's parameters per column. The arithmetic -- the exact sum, C added to it, alpha·a_scale in
float32, ``qk_requant_f32`` (multiplier-float32, the oracle's first reading), rounding, the zero point,
saturation -- is qkernels.h's ``qgemm`` entry point, on the device too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from qconform import dtypes
from qconform.declarations.operator import Operator, Role
from qconform.kernels import KIND, Launch, codes, storage_dtype
from qconform.kernels.node import REQUANTISATIONS, Execute, Node, need, single_launch
from qconform.oracle.base import InvalidModel
from qconform.runner import Unsupported

SECTIONS = ("ms-qgemm",)
DATA = ("int8", "uint8")
SCALE = ("float32",)
F32 = dtypes.get("float32")


def _scalar(name: str, v: np.ndarray | None) -> None:
    if v is not None and not (v.size == 1 and v.ndim <= 1):
        raise InvalidModel(f"{name} of shape {v.shape}: a scalar (per tensor) only")


def _one(v: np.ndarray, t: str) -> np.ndarray:
    return codes(np.asarray(v).reshape(1), dtypes.get(t))


@dataclass
class GemmPlan:
    node: Node
    decl: Operator
    out_type: str

    def launch(self, feeds: Mapping[str, np.ndarray]) -> tuple[Launch, tuple[int, ...]]:
        d, arrays = self.decl, self.node.arrays(feeds)
        a_name, b_name = d.of_role(Role.DATA)[0].name, d.of_role(Role.WEIGHT)[0].name
        (as_in, az_in), (bs_in, bz_in), (ys_in, yz_in) = (d.params_of(t) for t in (a_name, b_name, "y"))
        c_in = d.of_role(Role.BIAS)[0]
        get = lambda inp: d.arg(arrays, inp.name)  # noqa: E731
        a, b, as_, az, bs, bz, c, ys, yz = (get(i) for i in (d.input(a_name), d.input(b_name), as_in, az_in,
                                                              bs_in, bz_in, c_in, ys_in, yz_in))
        if any(v is None for v in (a, as_, az, b, bs, bz)):
            raise InvalidModel(f"{d.label} needs {a_name}, {b_name} and their scales and zero points")
        if (ys is None) != (yz is None):
            raise InvalidModel(f"{ys_in.name} and {yz_in.name}: both or neither (semantics.md#ms-qgemm)")
        if a.ndim != 2 or b.ndim != 2:
            raise InvalidModel(f"{a_name} {a.shape} and {b_name} {b.shape}: 2-D operands")
        attrs = self.node.attrs
        av = a.T if attrs.get("transA", 0) else a
        bv = b.T if attrs.get("transB", 0) else b
        if av.shape[1] != bv.shape[0]:
            raise InvalidModel(f"inner dimensions differ: {av.shape}, {bv.shape}")
        m, k, n = av.shape[0], av.shape[1], bv.shape[1]
        for inp, v in ((as_in, as_), (az_in, az), (ys_in, ys), (yz_in, yz)):
            _scalar(inp.name, v)
        for inp, v in ((bs_in, bs), (bz_in, bz)):
            if not (v.size == 1 and v.ndim <= 1) and v.shape != (n,):
                raise InvalidModel(f"{inp.name} of shape {v.shape}: a scalar or N = {n} elements")
        if bs.shape != bz.shape:
            raise InvalidModel(f"{bs_in.name} {bs.shape} and {bz_in.name} {bz.shape} differ in shape")
        alpha = np.float32(attrs.get("alpha", 1.0))
        if float(alpha) * float(as_.reshape(())) != float(np.float32(float(alpha) * float(as_.reshape(())))):
            raise InvalidModel("alpha·a_scale is not a float32 (semantics.md#ms-qgemm)")  # the oracle's refusal
        if c is not None:
            try:
                c = np.broadcast_to(c, (m, n))
            except ValueError:
                raise InvalidModel(f"{c_in.name} {c.shape} does not broadcast to (M, N) = {(m, n)}") from None
        ta, tb = (self.node.types[d.index(x)] for x in (a_name, b_name))
        per_n = lambda v, t: codes(np.ascontiguousarray(np.broadcast_to(v.reshape(-1) if v.size > 1 else v.reshape(()), (n,))), dtypes.get(t))  # noqa: E731
        requant = ys is not None
        args = dict(a=codes(np.ascontiguousarray(av), dtypes.get(ta)), ak=KIND[ta],
                    b=codes(np.ascontiguousarray(bv), dtypes.get(tb)), bk=KIND[tb], mdim=m, kdim=k, ndim=n,
                    c=np.zeros(m * n, np.uint32) if c is None else codes(np.ascontiguousarray(c), dtypes.get("int32")),
                    alpha=_one(alpha, "float32"), as_=_one(as_, "float32"), az=_one(az, ta), bs_=per_n(bs, "float32"),
                    bz=per_n(bz, tb), ys=_one(ys if requant else np.float32(1), "float32"),
                    yz=_one(yz, self.out_type) if requant else np.zeros(1, np.uint8), ok=KIND[self.out_type],
                    requant=int(requant))
        out = {"y": (storage_dtype(dtypes.get(self.out_type)), m * n)}
        return Launch("qgemm", args, out, m * n), (m, n)

    def run(self, feeds: Mapping[str, np.ndarray], execute: Execute) -> list[np.ndarray]:
        return single_launch(lambda: self.launch(feeds), execute, self.out_type)


def read(node: Node, decl: Operator, who: str) -> GemmPlan:
    """The plan of a declared QGemm-like node; Unsupported for what the kernels do not cover."""
    types = dict(zip((i.name for i in decl.inputs), node.types))
    for tensor in (decl.of_role(Role.DATA)[0].name, decl.of_role(Role.WEIGHT)[0].name):
        need(who, tensor, types.get(tensor), DATA)
        scale, zero = decl.params_of(tensor)
        need(who, scale.name, types.get(scale.name), SCALE)
        if types.get(zero.name) not in (None, types[tensor]):
            raise InvalidModel(f"{zero.name} type {types[zero.name]} differs from {tensor} type {types[tensor]}")
    ys, yz = decl.params_of("y")
    if types.get(ys.name) is not None:
        need(who, ys.name, types[ys.name], SCALE)
    out = types.get(yz.name) or ("float32" if types.get(ys.name) is None else None)
    if out is None:
        raise ValueError(f"invalid model: {ys.name} without {yz.name}")
    need(who, "output", out, DATA + SCALE)
    bias = decl.of_role(Role.BIAS)[0]
    if types.get(bias.name) not in (None, "int32"):
        raise Unsupported(f"{who}: {bias.name} type {types[bias.name]} not implemented (int32)")
    first = node.oracle.requantisations("float32")[0]
    if first not in REQUANTISATIONS:
        raise Unsupported(f"{who}: requantisation reading {first} not implemented")
    return GemmPlan(node, decl, out)


__all__ = ["DATA", "GemmPlan", "SCALE", "SECTIONS", "read"]

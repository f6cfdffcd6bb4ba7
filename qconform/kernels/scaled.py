"""onnxruntime's MatMulIntegerToFloat and DynamicQuantizeMatMul as the kernels run them (the
declarations whose section is ``ms-scale-products``; the dynamic one by its kind): an exact integer
sum scaled to float, Y = acc · a_scale · b_scale (+ bias), in the reading the oracle gives first,
scales-multiplied-first (qkernels.h's ``qk_scaled_mm1``).

The host plans shapes (numpy.matmul's, through ``node.MatmulShapes``; b's parameters per column).
DynamicQuantizeMatMul first quantizes A with the ai.onnx dynamic quantizer the kernels already have
(the ``dql_params`` and ``quantize`` entry points, as ``plan.DqlPlan`` runs them: the dynamic
quantizer's first reading, #dql-formula), then runs the same scaled matmul with that scale and zero point.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from qconform import dtypes
from qconform.declarations.operator import Kind, Operator, Role
from qconform.kernels import KIND, Launch, ParamIndex, codes, from_codes, storage_dtype
from qconform.kernels.node import Execute, MatmulShapes, Node, checked, need
from qconform.oracle import dynamic_quantize
from qconform.oracle.base import InvalidModel
from qconform.runner import Unsupported

SECTIONS = ("ms-scale-products",)
DATA = ("int8", "uint8")
OUT = ("float32", "float16")
FIRST = "scales-multiplied-first"  # the one reading qk_scaled_mm1 computes


def _column(name: str, v: np.ndarray, n: int) -> np.ndarray:
    """A parameter of B: one element per tensor, or N per column (the oracle's rule)."""
    if v.size == 1 and v.ndim <= 1:
        return v.reshape(())
    if v.ndim == 1 and v.shape[0] == n:
        return v
    raise InvalidModel(f"{name} of shape {v.shape}: a scalar or a 1-D tensor of N = {n} elements")


@dataclass
class ScaledPlan:
    node: Node
    decl: Operator
    out_type: str

    def _quantized_a(self, a: np.ndarray, execute: Execute) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A's codes, scale and zero point from the dynamic quantizer (uint8), run by the kernels."""
        f32, out_t = dtypes.get("float32"), dtypes.get(dynamic_quantize.OUT_T)
        xc = codes(a, f32)
        p = execute(Launch("dql_params", dict(x=xc, n=int(a.size), qmin=dynamic_quantize.QMIN,
                                              qmax=dynamic_quantize.QMAX),
                           {"scale": (storage_dtype(f32), 1), "zp": (storage_dtype(out_t), 1)}, 1))
        scale = from_codes(p["scale"], f32, ())
        if not np.isfinite(scale) or scale == 0 or not np.all(np.isfinite(a)):
            raise InvalidModel("the dynamic quantizer leaves A's codes undefined (NaN, ±Inf or a zero range)")
        args = dict(x=xc, xk=KIND["float32"], s=p["scale"], sk=KIND["float32"], zp=p["zp"], ok=KIND[out_t.name],
                    prec=KIND["float32"], saturate=1, fnuz_inf_saturates=1, n=int(a.size),
                    **dict(zip(("inner", "axis_len", "block", "s_outer", "s_axis", "s_inner"), ParamIndex().args)))
        y = execute(Launch("quantize", args, {"y": (storage_dtype(out_t), int(a.size))}, int(a.size)))["y"]
        return from_codes(y, out_t, a.shape), p["scale"], p["zp"]

    def launch(self, feeds: Mapping[str, np.ndarray], execute: Execute) -> tuple[Launch, tuple[int, ...], tuple[int, ...]]:
        d, arrays = self.decl, self.node.arrays(feeds)
        a_name, b_name = d.of_role(Role.DATA)[0].name, d.of_role(Role.WEIGHT)[0].name
        (as_in, az_in), (bs_in, bz_in) = d.params_of(a_name), d.params_of(b_name)
        bias_in = d.of_role(Role.BIAS)[0]
        get = lambda inp: None if inp is None else d.arg(arrays, inp.name)  # noqa: E731
        a, b, bs, bz, bias = get(d.input(a_name)), get(d.input(b_name)), get(bs_in), get(bz_in), get(bias_in)
        pk, ta, tb = self.out_type, self.node.types[d.index(a_name)], self.node.types[d.index(b_name)]
        if d.kind is Kind.DYNAMIC:
            a, as_codes, az_codes = self._quantized_a(a, execute)
            ta, azs = dynamic_quantize.OUT_T, 0
        else:
            as_, az = get(as_in), get(az_in)
            if as_.size != 1:
                raise InvalidModel("a per-column scale of A: a float sum in an open order (#ms-scale-products)")
            as_codes = codes(as_.reshape(1), dtypes.get(pk))
            k = a.shape[-1]
            if az is not None and not (az.size == 1 and az.ndim <= 1) and az.shape != (k,):
                raise InvalidModel(f"{az_in.name} of shape {az.shape}: a scalar or K = {k} elements")
            azs = int(az is not None and az.size > 1)
            az_codes = np.zeros(1, np.uint8) if az is None else codes(az.reshape(-1), dtypes.get(ta))
        n = b.shape[-1] if b.ndim > 1 else 1
        bzv = _column(bz_in.name, np.zeros((), b.dtype) if bz is None else bz, n)
        bsv = _column(bs_in.name, bs, n)
        g = MatmulShapes.of(a, b, (a_name, b_name))
        # The oracle's refusal (a check on the model, not the result): sums beyond int32.
        acc = np.matmul(g.av.astype(np.int64) - self._az_values(ta, az_codes, azs),
                        g.bv.astype(np.int64) - bzv.astype(np.int64))
        if np.any(np.abs(acc) >= 2 ** 31):
            raise InvalidModel("an integer sum beyond int32: the schema states no accumulator")
        want = g.batch + (n,)
        if bias is not None and bias.shape != (n,):
            raise InvalidModel(f"{bias_in.name} of shape {bias.shape}: 1-D, B's last dimension ({n})")
        per = lambda v, t: codes(np.ascontiguousarray(np.broadcast_to(v, want)), dtypes.get(t))  # noqa: E731
        args = dict(g.operand_args(a, ta, b, tb), az=az_codes, azs=azs, bz=per(bzv.astype(b.dtype), tb),
                    as_=as_codes, bs_=per(bsv, pk),
                    bias=np.zeros(1, storage_dtype(dtypes.get(pk))) if bias is None else codes(bias, dtypes.get(pk)),
                    has_bias=int(bias is not None), pk=KIND[pk])
        return Launch("scaled_matmul", args, {"y": (storage_dtype(dtypes.get(pk)), g.size)}, g.size), g.full, g.shape

    @staticmethod
    def _az_values(ta: str, az_codes: np.ndarray, azs: int) -> np.ndarray:
        vals = from_codes(az_codes, dtypes.get(ta), az_codes.shape).astype(np.int64)
        return vals if azs else vals.reshape(())

    def run(self, feeds: Mapping[str, np.ndarray], execute: Execute) -> list[np.ndarray]:
        launch, full, shape = checked(lambda: self.launch(feeds, execute))
        return [from_codes(execute(launch)["y"], dtypes.get(self.out_type), full).reshape(shape)]


def read(node: Node, decl: Operator, who: str) -> ScaledPlan:
    types = dict(zip((i.name for i in decl.inputs), node.types))
    a_name, b_name = decl.of_role(Role.DATA)[0].name, decl.of_role(Role.WEIGHT)[0].name
    if decl.kind is not Kind.DYNAMIC:
        need(who, a_name, types.get(a_name), DATA)
    elif types.get(a_name) != "float32":
        raise Unsupported(f"{who}: {a_name} type {types.get(a_name)} not implemented (float32)")
    need(who, b_name, types.get(b_name), DATA)
    out = types[decl.output_like] if decl.output_like else types[decl.params_of(b_name)[0].name]
    need(who, "output", out, OUT)
    if FIRST not in decl.readings or decl.readings[0] != FIRST:
        raise Unsupported(f"{who}: first reading {decl.readings[:1]} not implemented ({FIRST})")
    return ScaledPlan(node, decl, out)


__all__ = ["OUT", "ScaledPlan", "SECTIONS", "read"]

"""A node as the kernels run it: read once from the model (``read_plan``), then turned into kernel
launches for each call's inputs (shared by cpu-kernel and gpu-kernel, which only execute launches).
The integer compute ops' plans live in ``contraction.py``; what every plan shares (the node, the
refusals, numpy.matmul's geometry) in ``node.py``.

The plan keeps kernel facts only: which types, attributes and readings ``qkernels.h`` implements.
Every op rule (which versions exist, the axis, the output type, the quotient precision, the Cast
table, which reading comes first) is the oracle's version class's, asked here, never restated.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Protocol

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qconform import dtypes
from qconform.case import MS_DOMAIN, ONNX_DOMAIN
from qconform.declarations import operators
from qconform.declarations.operator import Kind
from qconform.kernels import KIND, PRECISIONS, Launch, ParamIndex, codes, from_codes, param_index, storage_dtype
from qconform.kernels import composed, contraction, elementwise, gbq, gemm, nbits, pools, scaled
from qconform.kernels.node import ACCUMULATIONS, REQUANTISATIONS, Execute, MatmulShapes, Node, checked, need, single_launch
from qconform.oracle import dynamic_quantize
from qconform.oracle.base import InvalidModel, OpOracle, oracle_for, output_type
from qconform.runner import Unsupported


# What the C kernels implement (kernel facts, not type facts: a type the registry and the spec
# allow may still be missing from the kernels, and the plan refuses it as Unsupported).
Q_X = ("float32", "float16", "bfloat16", "int32")
Q_SCALE = ("float32", "float16", "bfloat16", "int32", "float8e8m0")
Q_OUT = ("int2", "uint2", "int4", "uint4", "int8", "uint8", "int16", "uint16", "float8e4m3fn", "float8e4m3fnuz",
         "float8e5m2", "float8e5m2fnuz", "float4e2m1", "float6e2m3", "float6e3m2")
DQ_X = Q_OUT + ("int32",)
DQ_SCALE = ("float32", "float16", "bfloat16", "float8e8m0")
DQ_OUT = ("float32", "float16", "bfloat16")
MM_DATA = ("int8", "uint8", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz")
MM_SCALE = ("float32", "float16", "bfloat16")
#: Attributes each op's kernel reads, by (domain, op).
KNOWN_ATTRS = {(ONNX_DOMAIN, "QuantizeLinear"): {"axis", "block_size", "saturate", "output_dtype", "precision"},
               (ONNX_DOMAIN, "DequantizeLinear"): {"axis", "block_size", "output_dtype"},
               (MS_DOMAIN, "QuantizeLinear"): {"axis"}, (MS_DOMAIN, "DequantizeLinear"): {"axis"},
               (ONNX_DOMAIN, "QLinearMatMul"): set(), (ONNX_DOMAIN, "DynamicQuantizeLinear"): set()}
#: The integer compute ops (qconform/kernels/contraction.py), by their declarations: an op whose
#: declaration says the kernels implement it and how it contracts ("conv", or "matmul" without a
#: requantisation: MatMulInteger), reading its declared arithmetic attributes.
CONTRACTIONS = {o.key: o for o in operators.OPERATORS
                if o.kernel and o.section not in scaled.SECTIONS
                and (o.contraction == "conv" or (o.contraction == "matmul" and o.kind is Kind.INTEGER))}
KNOWN_ATTRS.update({key: set(o.arithmetic_attrs) for key, o in CONTRACTIONS.items()})
#: The element-wise requantising ops (qconform/kernels/elementwise.py) QGemm (gemm.py) and the scaled integer matmuls (scaled.py), MatMulNBits (nbits.py), GatherBlockQuantized (gbq.py), the composed ops (composed.py) and the pools (pools.py), by their declared section.
ELEMENTWISE = {o.key: o for o in operators.OPERATORS
               if o.kernel and o.section in elementwise.SECTIONS + gemm.SECTIONS + scaled.SECTIONS + nbits.SECTIONS
               + gbq.SECTIONS + composed.SECTIONS + pools.SECTIONS}
KNOWN_ATTRS.update({key: set(o.arithmetic_attrs) for key, o in ELEMENTWISE.items()})


class Plan(Protocol):
    def run(self, feeds: Mapping[str, np.ndarray], execute: Execute) -> list[np.ndarray]: ...


def _node(model: onnx.ModelProto, who: str) -> Node:
    if len(model.graph.node) != 1:
        raise Unsupported(f"{who} runs single-node models only")
    node = model.graph.node[0]
    domain = MS_DOMAIN if node.domain == MS_DOMAIN else (ONNX_DOMAIN if node.domain in ("", "ai.onnx") else None)
    if (domain, node.op_type) not in KNOWN_ATTRS:
        dom = f"{node.domain}." if node.domain else ""
        raise Unsupported(f"{who} has no kernel for {dom}{node.op_type}")
    opset = next(o.version for o in model.opset_import
                 if o.domain == domain or (domain == ONNX_DOMAIN and o.domain == "ai.onnx"))
    try:
        oracle = oracle_for(domain, node.op_type, opset)
    except LookupError as exc:  # a version the schemas and the oracle do not know
        raise Unsupported(f"{who}: {exc}") from None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    unknown = sorted(set(attrs) - KNOWN_ATTRS[(domain, node.op_type)])
    if unknown:
        raise Unsupported(f"{who}: attribute(s) {', '.join(unknown)} of {node.op_type} not implemented")
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    declared = {t.name: dtypes.get(t.data_type).name for t in model.graph.initializer}
    ranks = {t.name: len(t.dims) for t in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name not in declared:
            declared[vi.name] = dtypes.get(vi.type.tensor_type.elem_type).name
            ranks[vi.name] = len(vi.type.tensor_type.shape.dim)
    inputs = tuple(n or None for n in node.input)
    return Node(domain, node.op_type, opset, oracle, attrs, inputs, tuple(declared[n] if n else None for n in inputs),
                 consts, ranks)


def read_plan(model: onnx.ModelProto, who: str) -> Plan:
    """Read the single node; ``Unsupported`` for anything the kernels do not cover."""
    node = _node(model, who)
    if (node.domain, node.op) in CONTRACTIONS:
        return contraction.read(node, CONTRACTIONS[(node.domain, node.op)], who)
    if (node.domain, node.op) in ELEMENTWISE:
        decl = ELEMENTWISE[(node.domain, node.op)]
        module = next(m for m in (elementwise, gemm, scaled, nbits, gbq, composed, pools) if decl.section in m.SECTIONS)
        return module.read(node, decl, who)
    if node.op == "QLinearMatMul":
        return _matmul_plan(node, who)
    if node.op == "DynamicQuantizeLinear":
        return _dql_plan(node, who)
    return _qdq_plan(node, who)


def _zeros_like_params(s: np.ndarray, t: str) -> np.ndarray:
    """Code 0 per parameter: value 0 in every kind in scope, so an absent zero point is the same."""
    return np.zeros(s.size, dtype=storage_dtype(dtypes.get(t)))


# ----------------------------------------------------------------------------------------------
# QuantizeLinear / DequantizeLinear (ai.onnx and com.microsoft)
# ----------------------------------------------------------------------------------------------
@dataclass
class QdqPlan:
    """One QuantizeLinear / DequantizeLinear node as the kernel runs it."""

    node: Node
    out_type: str = ""
    axis: int | None = 1
    block_size: int = 0
    saturate: int = 1
    prec: str = "float32"  # quotient precision (QuantizeLinear)
    fnuz_inf_saturates: bool = True

    @property
    def op(self) -> str:
        return self.node.op

    def launch(self, feeds: Mapping[str, np.ndarray]) -> tuple[Launch, tuple[int, ...]]:
        """The kernel call for these inputs, and x's shape."""
        x, s, zp = (self.node.arrays(feeds) + [None, None])[:3]
        if zp is not None and zp.shape != s.shape:
            raise InvalidModel(f"zero point shape {zp.shape} differs from scale shape {s.shape}")
        idx: ParamIndex = param_index(x.shape, s.shape, self.axis, self.block_size)
        xt, st, zt = (dtypes.get(t) if t else None for t in (list(self.node.types) + [None, None])[:3])
        if self.op == "DequantizeLinear" and xt.name == "int32" and zp is not None and np.any(zp != 0):
            raise InvalidModel("int32 input with a non-zero zero point")
        zp_t = self.out_type if self.op == "QuantizeLinear" else xt.name
        args: dict[str, object] = dict(x=codes(x, xt), xk=KIND[xt.name], s=codes(s, st), sk=KIND[st.name],
                                       zp=_zeros_like_params(s, zp_t) if zp is None else codes(zp, zt),
                                       ok=KIND[self.out_type], n=int(x.size), **dict(zip(_INDEX_NAMES, idx.args)))
        if self.op == "QuantizeLinear":
            args.update(prec=KIND[self.prec], saturate=int(bool(self.saturate)),
                        fnuz_inf_saturates=int(self.fnuz_inf_saturates))
        entry = "quantize" if self.op == "QuantizeLinear" else "dequantize"
        out = (storage_dtype(dtypes.get(self.out_type)), int(x.size))
        return Launch(entry, args, {"y": out}, int(x.size)), tuple(x.shape)

    def run(self, feeds: Mapping[str, np.ndarray], execute: Execute) -> list[np.ndarray]:
        return single_launch(lambda: self.launch(feeds), execute, self.out_type)


_INDEX_NAMES = ("inner", "axis_len", "block", "s_outer", "s_axis", "s_inner")


def _qdq_plan(node: Node, who: str) -> QdqPlan:
    xt, st, zt = (list(node.types) + [None, None])[:3]
    # com.microsoft's ops without ``axis`` evaluate with their per-tensor body (oracle/ms_quant.py).
    body = getattr(node.oracle, "per_tensor", None) if "axis" not in node.attrs else None
    body = body or node.oracle
    plan = QdqPlan(node)
    plan.axis = body.axis(node.attrs, node.ranks.get(node.inputs[0], 0))
    plan.block_size = int(node.attrs.get("block_size", 0))
    try:
        out = output_type(node.draft())
    except InvalidModel as exc:
        raise ValueError(f"invalid model: {exc}") from None
    if node.op == "QuantizeLinear":
        code = node.attrs.get("output_dtype", 0)
        if code and zt and dtypes.get(code).name != zt:  # QuantizeLinear.evaluate's own check
            raise InvalidModel("output_dtype differs from the zero point's type")
        need(who, "x", xt, Q_X)
        need(who, "y_scale", st, Q_SCALE)
        need(who, "output", out, Q_OUT)
        plan.saturate = int(node.attrs.get("saturate", 1))
        plan.fnuz_inf_saturates = body.fnuz_inf_saturates
        # The quotient precision the latest text states: the oracle's first division reading.
        plan.prec = body.division_readings(xt, st, node.attrs)[0][1]
        need(who, "precision", plan.prec, PRECISIONS)
    else:
        need(who, "x", xt, DQ_X)
        need(who, "x_scale", st, DQ_SCALE)
        need(who, "output", out, DQ_OUT)
        if zt is not None and zt != xt:  # the schema's type constraint (x and x_zero_point are both T1)
            raise InvalidModel(f"zero point type {zt} differs from x type {xt}")
    plan.out_type = out
    return plan


# ----------------------------------------------------------------------------------------------
# DynamicQuantizeLinear: the range and parameters, then QuantizeLinear with them
# ----------------------------------------------------------------------------------------------
@dataclass
class DqlPlan:
    node: Node
    out_type: str = dynamic_quantize.OUT_T
    qmin: int = dynamic_quantize.QMIN
    qmax: int = dynamic_quantize.QMAX

    def run(self, feeds: Mapping[str, np.ndarray], execute: Execute) -> list[np.ndarray]:
        (x,) = self.node.arrays(feeds)
        f32, out_t = dtypes.get("float32"), dtypes.get(self.out_type)
        xc = codes(x, f32)
        params = execute(Launch("dql_params", dict(x=xc, n=int(x.size), qmin=self.qmin, qmax=self.qmax),
                                {"scale": (storage_dtype(f32), 1), "zp": (storage_dtype(out_t), 1)}, 1))
        # y = QuantizeLinear(x, scale, zp), the quotient in float32 (qconform/docs/semantics.md#dql-formula)
        args = dict(x=xc, xk=KIND["float32"], s=params["scale"], sk=KIND["float32"], zp=params["zp"],
                    ok=KIND[self.out_type], prec=KIND["float32"], saturate=1, fnuz_inf_saturates=1, n=int(x.size),
                    **dict(zip(_INDEX_NAMES, ParamIndex().args)))
        y = execute(Launch("quantize", args, {"y": (storage_dtype(out_t), int(x.size))}, int(x.size)))["y"]
        return [from_codes(y, out_t, x.shape), from_codes(params["scale"], f32, ()),
                from_codes(params["zp"], out_t, ())]


def _dql_plan(node: Node, who: str) -> DqlPlan:
    if len(node.inputs) != 1 or node.types[0] != "float32":
        raise Unsupported(f"{who}: DynamicQuantizeLinear takes one float32 input x, not {node.types}")
    return DqlPlan(node)


# ----------------------------------------------------------------------------------------------
# QLinearMatMul
# ----------------------------------------------------------------------------------------------
@dataclass
class MatMulPlan:
    node: Node
    out_type: str
    scale_type: str
    rq: int
    wrap: int
    saturate: int
    fnuz_inf_saturates: int

    def launch(self, feeds: Mapping[str, np.ndarray]) -> tuple[Launch, tuple[int, ...], tuple[int, ...]]:
        """The kernel call; the output's shape before and after numpy.matmul drops 1-D operands' axes."""
        a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = (self.node.arrays(feeds) + [None] * 8)[:8]
        ta, tb = self.node.types[0], self.node.types[3]
        for s, zp in ((a_s, a_zp), (b_s, b_zp), (y_s, y_zp)):
            if zp is not None and zp.shape != s.shape:
                raise InvalidModel(f"a scale {s.shape} and its zero point {zp.shape} differ in shape")
        if y_s.size != 1 or y_s.ndim > 1:
            raise InvalidModel(f"y_scale of shape {y_s.shape}: per-tensor only (qconform/docs/semantics.md#qlmm-shapes)")
        g = MatmulShapes.of(a, b)
        args = dict(g.operand_args(a, ta, b, tb), as_=g.params(a_s, self.scale_type, "a"), az=g.params(a_zp, ta, "a"),
                    bs_=g.params(b_s, self.scale_type, "b"), bz=g.params(b_zp, tb, "b"),
                    sk=KIND[self.scale_type], ys=codes(y_s, dtypes.get(self.scale_type)),
                    yz=np.zeros(1, storage_dtype(dtypes.get(self.out_type))) if y_zp is None
                    else codes(y_zp, dtypes.get(self.out_type)),
                    ok=KIND[self.out_type], rq=self.rq, wrap=self.wrap, saturate=self.saturate,
                    fnuz_inf_saturates=self.fnuz_inf_saturates)
        out = {"y": (storage_dtype(dtypes.get(self.out_type)), g.size)}
        return Launch("qlinear_matmul", args, out, g.size), g.full, g.shape

    def run(self, feeds: Mapping[str, np.ndarray], execute: Execute) -> list[np.ndarray]:
        launch, full, shape = checked(lambda: self.launch(feeds))
        y = from_codes(execute(launch)["y"], dtypes.get(self.out_type), full)
        return [y.reshape(shape)]


def _cast_table(oracle: OpOracle) -> tuple[int, int]:
    """(saturate, fnuz_inf_saturates) of the oracle's float8 output conversion, read off its own
    step (``encode_output``): QLinearMatMul has no attributes for them, the oracle's body fixes both."""
    def code(v: float, t: dtypes.ElemType) -> int:
        y, _ = oracle.encode_output(np.array([v]), t)
        return int(t.to_bits(y)[0])

    e4, fnuz = dtypes.get("float8e4m3fn"), dtypes.get("float8e4m3fnuz")
    max_code = int(e4.to_bits(np.array([e4.float_format.max_finite], e4.dtype))[0])
    return int(code(1e30, e4) == max_code), int(not fnuz.is_nan_bits(np.array([code(np.inf, fnuz)]))[0])


def _matmul_plan(node: Node, who: str) -> MatMulPlan:
    from qconform.oracle import evaluate
    from qconform.oracle.qlinear_matmul import ACCUMULATIONS as ORACLE_ACCUMULATIONS

    types = (list(node.types) + [None] * 8)[:8]
    ta, ts, tb, ty_s, tyz = types[0], types[1], types[3], types[6], types[7]
    need(who, "a", ta, MM_DATA)
    need(who, "b", tb, MM_DATA)
    need(who, "scale", ts, MM_SCALE)
    if not (ts == types[4] == ty_s):
        raise Unsupported(f"{who}: scales of different types ({ts}, {types[4]}, {ty_s})")
    # The output type: what the oracle gives this node (y_zero_point's type, else a's).
    probe = node.draft({0: (1, 1), 1: (), 3: (1, 1), 4: (), 6: ()})  # 1x1 a and b, scales 1, zero points 0
    try:
        out = dtypes.get(evaluate(probe, primary_only=True).expected[0].dtype).name
    except InvalidModel as exc:
        raise ValueError(f"invalid model: {exc}") from None
    need(who, "output", out, MM_DATA)
    if tyz is not None and tyz != out:
        raise InvalidModel(f"y_zero_point type {tyz} differs from the output type {out}")
    first = node.oracle.requantisations(ts)[0]
    if first not in REQUANTISATIONS:
        raise Unsupported(f"{who}: requantisation reading {first} not implemented")
    # Integer operands have the accumulation readings; float8 operands one exact accumulation
    # (qconform/docs/semantics.md#qlmm-float8).
    both_int = dtypes.get(ta).is_integer and dtypes.get(tb).is_integer
    wrap = ACCUMULATIONS[ORACLE_ACCUMULATIONS[0]] if both_int else 0
    saturate, fnuz_inf = _cast_table(node.oracle)
    return MatMulPlan(node, out, ts, REQUANTISATIONS[first], wrap, saturate, fnuz_inf)


__all__ = ["CONTRACTIONS", "DQ_OUT", "DQ_SCALE", "DQ_X", "DqlPlan", "Execute", "MatMulPlan", "MM_DATA", "MM_SCALE", "Plan",
           "QdqPlan", "Q_OUT", "Q_SCALE", "Q_X", "read_plan"]

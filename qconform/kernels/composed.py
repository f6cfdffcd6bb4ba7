"""onnxruntime's ops defined as quantize(f(dequantize(x))) whose float function the kernels compute
exactly (semantics.md#ms-qlinear-composed): three launches, the ``dequantize`` entry point (x to float32,
the DequantizeLinear-21 reading the kernels compute), the float op's entry point, and ``quantize``
(QuantizeLinear-21 with a float32 scale: the quotient in float32, round half to even, saturate).
Which float op the oracle composes is read off its version class (``float_op``). Sigmoid's value is the
exact one rounded once to float32: the kernel computes it in double with a proven error bound and rounds
only where the bound decides the float32 (qk_functions.h); elsewhere the case is Unsupported, never guessed.
The pools reuse this plan with their windows (``pools.py``)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from qconform import dtypes
from qconform.declarations.operator import Operator, Role
from qconform.kernels import ENTRY_POINTS, KIND, Launch, ParamIndex, codes, from_codes, param_index, storage_dtype
from qconform.kernels.node import Execute, Node, checked, need
from qconform.oracle.base import InvalidModel
from qconform.oracle.qlinear_composed import SoftmaxComposed, coerced_softmax
from qconform.runner import Unsupported

SECTIONS = ("ms-qlinear-composed", "ms-qlinear-concat")
DATA = ("int8", "uint8")
_INDEX = ("inner", "axis_len", "block", "s_outer", "s_axis", "s_inner")
_PER_TENSOR = dict(zip(_INDEX, ParamIndex().args))


def float_entry(node: Node) -> str | None:
    """The entry point of the float op the oracle composes (its ``float_op``), named as the op in snake
    case (LeakyRelu: ``leaky_relu``), where the kernels have one: no second list of the float ops."""
    op = getattr(node.oracle, "float_op", None)
    entry = re.sub(r"(?<!^)(?=[A-Z])", "_", op).lower() if op else None
    return entry if entry in ENTRY_POINTS else None


def covers(node: Node) -> bool:
    return float_entry(node) is not None


@dataclass
class ComposedPlan:
    """dequantize, the float function (``middle``: one launch on float32 codes, or more), quantize."""

    node: Node
    decl: Operator
    xt: str
    out_t: str

    def run(self, feeds: Mapping[str, np.ndarray], execute: Execute) -> list[np.ndarray]:
        return checked(lambda: self._run(feeds, execute))

    def _run(self, feeds: Mapping[str, np.ndarray], execute: Execute) -> list[np.ndarray]:
        d, arrays = self.decl, self.node.arrays(feeds)
        x_name = d.of_role(Role.DATA)[0].name
        (xs_in, xz_in), (ys_in, yz_in) = d.params_of(x_name), d.params_of("y")
        x, xs, xz, ys, yz = (d.arg(arrays, i.name) for i in (d.input(x_name), xs_in, xz_in, ys_in, yz_in))
        if x is None or xs is None or ys is None:
            raise InvalidModel(f"{d.label} needs {x_name} and the scales of {x_name} and Y")
        for v, inp in ((xs, xs_in), (xz, xz_in), (ys, ys_in), (yz, yz_in)):
            if v is not None and not (v.size == 1 and v.ndim <= 1):
                raise InvalidModel(f"{inp.name} of shape {v.shape}: a scalar (per tensor) only")
        f32, n = dtypes.get("float32"), int(x.size)
        zero = lambda t: np.zeros(1, storage_dtype(dtypes.get(t)))  # noqa: E731
        xf = execute(Launch("dequantize", dict(x=codes(x, dtypes.get(self.xt)), xk=KIND[self.xt],
                                               s=codes(xs.reshape(1), f32), sk=KIND["float32"],
                                               zp=zero(self.xt) if xz is None else codes(xz.reshape(1), dtypes.get(self.xt)),
                                               ok=KIND["float32"], n=n, **_PER_TENSOR),
                            {"y": (np.dtype(np.uint32), n)}, n))["y"]
        yf, shape = self.middle(xf, tuple(x.shape), execute)
        out, n = dtypes.get(self.out_t), int(yf.size)
        y = execute(Launch("quantize", dict(x=yf, xk=KIND["float32"], s=codes(ys.reshape(1), f32), sk=KIND["float32"],
                                            zp=zero(self.out_t) if yz is None else codes(yz.reshape(1), out),
                                            ok=KIND[self.out_t], prec=KIND["float32"], saturate=1, fnuz_inf_saturates=1,
                                            n=n, **_PER_TENSOR),
                           {"y": (storage_dtype(out), n)}, n))["y"]
        return [from_codes(y, out, shape)]

    def middle(self, xf: np.ndarray, shape: tuple[int, ...], execute: Execute) -> tuple[np.ndarray, tuple[int, ...]]:
        """The float function on x's float32 codes (flat, x's ``shape``): y's codes and shape. The entry
        point's other inputs are the op's float attributes (one float32 code each); an entry point with a
        status output marks the elements whose float32 rounding its error bound does not decide: the
        kernels do not guess, the case is Unsupported with that reason."""
        n, f32 = int(xf.size), dtypes.get("float32")
        entry = float_entry(self.node)
        args: dict[str, object] = dict(x=xf, n=n)
        outputs = {"y": (np.dtype(np.uint32), n)}
        for name, kind in ENTRY_POINTS[entry]:
            if kind == "in" and name != "x":
                value = np.float32(self.node.attrs.get(name, self.decl.schema["attrs"][name]))
                args[name] = codes(np.array([value]), f32)
            elif kind == "out" and name != "y":
                outputs[name] = (np.dtype(np.uint8), n)
        res = execute(Launch(entry, args, outputs, n))
        _decided(res, self.decl.label, self.node.oracle.float_op)
        return res["y"], shape


def _decided(res: Mapping[str, np.ndarray], label: str, float_op: str) -> None:
    """Unsupported where a status byte says the kernel's double value does not decide an element's float32."""
    undecided = int(np.count_nonzero(res["status"])) if "status" in res else 0
    if undecided:
        raise Unsupported(f"{undecided} element(s) of {label} whose exact {float_op} lies too near a float32 "
                          f"rounding boundary for the kernels' double value (qk_functions.h: its error bound) to "
                          f"decide their rounding; the kernels do not guess")


@dataclass
class ConcatPlan:
    """QLinearConcat: each (tensor, scale, zero point) triple dequantized, the float32 codes concatenated
    along ``axis`` on the host (layout only), the result quantized with Y's scale and zero point
    (semantics.md#ms-qlinear-concat)."""

    node: Node
    out_t: str

    def run(self, feeds: Mapping[str, np.ndarray], execute: Execute) -> list[np.ndarray]:
        return checked(lambda: self._run(feeds, execute))

    def _run(self, feeds: Mapping[str, np.ndarray], execute: Execute) -> list[np.ndarray]:
        arrays, types = self.node.arrays(feeds), self.node.types
        ys, yz, rest = arrays[0], arrays[1], arrays[2:]
        if ys is None or yz is None or not rest or len(rest) % 3 or any(a is None for a in rest):
            raise InvalidModel("QLinearConcat takes Y_scale, Y_zero_point, then (tensor, scale, zero point) triples")
        if "axis" not in self.node.attrs:
            raise InvalidModel("QLinearConcat's axis attribute is required")
        f32 = dtypes.get("float32")
        parts = []
        for i in range(0, len(rest), 3):
            x, s, z = rest[i:i + 3]
            xt = types[2 + i]
            if types[4 + i] != xt:
                raise InvalidModel(f"zero point type {types[4 + i]} differs from x type {xt}")
            idx = param_index(x.shape, s.shape, 1, 0)
            if z.shape != s.shape:
                raise InvalidModel(f"zero point shape {z.shape} differs from scale shape {s.shape}")
            n = int(x.size)
            xf = execute(Launch("dequantize", dict(x=codes(x, dtypes.get(xt)), xk=KIND[xt], s=codes(s, f32),
                                                   sk=KIND["float32"], zp=codes(z, dtypes.get(xt)), ok=KIND["float32"],
                                                   n=n, **dict(zip(_INDEX, idx.args))),
                                {"y": (np.dtype(np.uint32), n)}, n))["y"]
            parts.append(xf.reshape(x.shape))
        try:
            yf = np.ascontiguousarray(np.concatenate(parts, axis=int(self.node.attrs["axis"])))
        except (ValueError, np.exceptions.AxisError) as exc:
            raise InvalidModel(f"the inputs do not concatenate: {exc}") from None
        out, n = dtypes.get(self.out_t), int(yf.size)
        idx = param_index(yf.shape, ys.shape, 1, 0)
        if yz.shape != ys.shape:
            raise InvalidModel(f"Y_zero_point shape {yz.shape} differs from Y_scale shape {ys.shape}")
        y = execute(Launch("quantize", dict(x=yf.reshape(-1), xk=KIND["float32"], s=codes(ys, f32), sk=KIND["float32"],
                                            zp=codes(yz, out), ok=KIND[self.out_t], prec=KIND["float32"], saturate=1,
                                            fnuz_inf_saturates=1, n=n, **dict(zip(_INDEX, idx.args))),
                           {"y": (storage_dtype(out), n)}, n))["y"]
        return [from_codes(y, out, yf.shape)]


#: The longest row the softmax entry point takes (qk_functions.h's QK_SOFTMAX_MAX_ROW: its error bound).
MAX_ROW = 4096


@dataclass
class RowsPlan(ComposedPlan):
    """QLinearSoftmax: the float function along rows of d elements, laid out on the host as the oracle's
    graph lays them out (``coerced_softmax``: one Softmax along ``axis``, or, where it reshapes, the
    input coerced to N × D at ``axis``); then the entry point's rows, and the layout back."""

    def middle(self, xf: np.ndarray, shape: tuple[int, ...], execute: Execute) -> tuple[np.ndarray, tuple[int, ...]]:
        if "opset" not in self.node.attrs:
            raise InvalidModel(f"{self.decl.label}'s opset attribute is required")
        nodes, reshaped = coerced_softmax(self.node.attrs, shape)
        x = xf.reshape(shape)
        if reshaped:  # N × D: the rows are the input's own order
            rows, axis = x.reshape(int(reshaped[0].value[0]), -1), None
        else:
            axis = int(nodes[0].attrs["axis"]) % len(shape)
            rows = np.moveaxis(x, axis, -1)
        d = int(rows.shape[-1]) if rows.ndim else 1
        if d > MAX_ROW:
            raise Unsupported(f"rows of {d} elements (the kernel's error bound holds up to {MAX_ROW})")
        flat = np.ascontiguousarray(rows).reshape(-1)
        n = int(flat.size)
        res = execute(Launch(float_entry(self.node), dict(x=flat, d=d, n=n),
                             {"y": (np.dtype(np.uint32), n), "status": (np.dtype(np.uint8), n)}, n))
        _decided(res, self.decl.label, self.node.oracle.float_op)
        y = res["y"].reshape(rows.shape)
        y = y.reshape(shape) if axis is None else np.moveaxis(y, -1, axis)
        return np.ascontiguousarray(y).reshape(-1), shape


def read(node: Node, decl: Operator, who: str) -> ComposedPlan | ConcatPlan:
    if decl.section == "ms-qlinear-concat":
        out = node.types[1]
        need(who, "output", out, DATA)
        need(who, "Y_scale", node.types[0], ("float32",))
        for t in node.types[2::3]:  # each triple's tensor (its scale and zero point follow it)
            need(who, "input", t, DATA)
        for t in node.types[3::3]:
            need(who, "input scale", t, ("float32",))
        return ConcatPlan(node, out)
    if not covers(node):
        raise Unsupported(f"{who}: the float function of {decl.label} is not implemented")
    plan = RowsPlan if isinstance(node.oracle, SoftmaxComposed) else ComposedPlan
    return plan(node, decl, *unary_types(node, decl, who))


def unary_types(node: Node, decl: Operator, who: str) -> tuple[str, str]:
    """(x's type, y's type) of a unary composed op, refused unless the kernels cover them."""
    types = dict(zip((i.name for i in decl.inputs), node.types))
    x_name = decl.of_role(Role.DATA)[0].name
    need(who, x_name, types.get(x_name), DATA)
    out = types.get(decl.output_like) or types[x_name]
    need(who, "output", out, DATA)
    for name in (decl.params_of(x_name)[0].name, decl.params_of("y")[0].name):
        need(who, name, types.get(name), ("float32",))
    return types[x_name], out


__all__ = ["ComposedPlan", "ConcatPlan", "MAX_ROW", "RowsPlan", "SECTIONS", "covers", "float_entry", "read", "unary_types"]

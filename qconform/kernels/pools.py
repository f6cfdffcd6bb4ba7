"""onnxruntime's average pools as the kernels run them (semantics.md#ms-qlinear-pool): QLinearAveragePool
and QLinearGlobalAveragePool are "Dequantize(Input) -> AveragePool on fp32 data -> Quantize(output)", so
the plan is the composed ops' three launches (``composed.ComposedPlan``) with qkernels.h's ``avg_pool``
entry point in the middle: each window's exact sum over its count, rounded once to float32.

The host plans only the windows: the oracle's ``pool_geometry`` resolves kernel_shape, strides, pads,
auto_pad and ceil_mode; the output sizes are the oracle's window walk's (``integer.conv_windows``: the
padded length less the dilated kernel, over the stride, plus one). ``channels_last`` is layout, done
on the host as the oracle's graph does it (a Transpose to N × C × D1 … before the pool and back after).
The refusals are the oracle's own: a ``count_include_pad`` window reaching into ceil_mode's added
positions (its count is open), a window holding no input element, a sum some order would round.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from qconform.declarations.operator import Operator
from qconform.kernels import POOL_GEOMETRY, Launch
from qconform.kernels.composed import ComposedPlan, unary_types
from qconform.kernels.node import Execute, Node
from qconform.oracle.graph_ops import pool_geometry
from qconform.oracle.graph_sums import NotExact
from qconform.oracle.granularity import InvalidModel
from qconform.runner import Unsupported

SECTIONS = ("ms-qlinear-pool",)
MAX_SPATIAL = 3
#: A window's count is converted to float32 for the one division: exact below 2^24.
MAX_COUNT = 1 << 24
#: The status byte the avg_pool entry point writes beside each value (qk_windows.h's QK_POOL_*).
POOL_STATUS = {"exact": 0, "inexact": 1, "empty": 2}


def channels_first(rank: int) -> tuple[list[int], list[int]]:
    """The permutations N × D1 … × C → N × C × D1 … and back (the oracle's ``channels_last`` graph)."""
    first = [0, rank - 1] + list(range(1, rank - 1))
    return first, [int(i) for i in np.argsort(first)]


def geometry(shape: tuple[int, ...], attrs: Mapping[str, Any], whole: bool) -> tuple[np.ndarray, tuple[int, ...], int]:
    """The avg_pool entry point's geometry numbers (``POOL_GEOMETRY`` order), y's shape and
    count_include_pad, for x of ``shape`` (N, C, D1 …). ``whole``: GlobalAveragePool, "equivalent to
    AveragePool with kernel size equal to the spatial dimension of input tensor"."""
    if len(shape) < 2:
        raise InvalidModel(f"a pool of a rank-{len(shape)} input (N × C × D1 … expected)")
    spatial = len(shape) - 2
    if spatial > MAX_SPATIAL:
        raise Unsupported(f"a {spatial}-D pool (the kernels walk 1-D to {MAX_SPATIAL}-D)")
    if whole:
        attrs = {"kernel_shape": list(shape[2:])}
    if "kernel_shape" not in attrs or len(attrs["kernel_shape"]) != spatial:
        raise InvalidModel(f"kernel_shape {attrs.get('kernel_shape')} for {spatial} spatial axes")
    kernel, strides, dil, begin, end, extra = pool_geometry(shape, attrs)
    d = list(shape[2:])
    o = [(dd + b + e + x - ((k - 1) * dl + 1)) // s + 1
         for dd, b, e, x, k, dl, s in zip(d, begin, end, extra, kernel, dil, strides)]
    if any(v < 0 for v in o):
        raise InvalidModel(f"kernel {kernel} larger than the padded input {d}")
    include = int(bool(attrs.get("count_include_pad", 0)))
    if include and any(extra):  # op_AveragePool's refusal
        raise InvalidModel("count_include_pad with ceil_mode's added positions (the count is open)")
    if math.prod(kernel) >= MAX_COUNT:
        raise Unsupported(f"a window of {math.prod(kernel)} positions (the kernel's count is exact below 2^24)")
    fill = MAX_SPATIAL - spatial
    values = {"n": [shape[0]], "c": [shape[1]], "d": d + [1] * fill, "k": list(kernel) + [1] * fill,
              "o": o + [1] * fill, "s": list(strides) + [1] * fill, "dil": list(dil) + [1] * fill,
              "begin": list(begin) + [0] * fill, "end": list(end) + [0] * fill}
    numbers = [int(v) for name, count in POOL_GEOMETRY for v in values[name][:count]]
    return np.array(numbers, np.int64), (shape[0], shape[1], *o), include


@dataclass
class PoolPlan(ComposedPlan):
    """dequantize, avg_pool (the windows planned here), quantize."""

    def middle(self, xf: np.ndarray, shape: tuple[int, ...], execute: Execute) -> tuple[np.ndarray, tuple[int, ...]]:
        oracle = self.node.oracle
        attrs = {k: v for k, v in self.node.attrs.items() if k in oracle.float_attrs}
        last = bool(self.node.attrs.get("channels_last", 0)) and len(shape) >= 2
        if last:
            first, back = channels_first(len(shape))
            xf = np.ascontiguousarray(xf.reshape(shape).transpose(first)).reshape(-1)
            shape = tuple(shape[i] for i in first)
        # the global pool has no kernel_shape among its float function's attributes: its window is the whole
        numbers, y_shape, include = geometry(shape, attrs, "kernel_shape" not in oracle.float_attrs)
        n = math.prod(y_shape)
        res = execute(Launch("avg_pool", dict(x=xf, geom=numbers, include=include, n=n),
                             {"y": (np.dtype(np.uint32), n), "status": (np.dtype(np.uint8), n)}, n))
        status = res["status"]
        if (status == POOL_STATUS["empty"]).any():
            raise InvalidModel("a pooling window holds no input element")
        if (status == POOL_STATUS["inexact"]).any():
            raise NotExact("a window's sum is not exact in float32 for every order (semantics.md#qdq-sum-order)")
        yf = res["y"]
        if last:
            yf = np.ascontiguousarray(yf.reshape(y_shape).transpose(back)).reshape(-1)
            y_shape = tuple(y_shape[i] for i in back)
        return yf, y_shape


def read(node: Node, decl: Operator, who: str) -> PoolPlan:
    return PoolPlan(node, decl, *unary_types(node, decl, who))


__all__ = ["MAX_SPATIAL", "POOL_STATUS", "PoolPlan", "SECTIONS", "channels_first", "geometry", "read"]

"""The float ops of the QDQ patterns whose results are sums (Conv, MatMul, Gemm, the pools):
every attribute the text gives them, on the shared window function of the integer body
(``integer.conv_windows``), each sum exact where every order is (#qdq-sum-order) and bounded where
an order could round (#qdq-sum-bound)."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from qconform.oracle.graph_sums import Sums, row_sums, rounded
from qconform.oracle.granularity import InvalidModel
from qconform.oracle.integer import conv_windows, matmul_operands


def _map(results: list, fn) -> list:
    """``fn`` applied to every output of a float op's result (one value, or readings)."""
    if results and isinstance(results[0], tuple):
        return [(name, [fn(o) for o in outs]) for name, outs in results]
    return [fn(o) for o in results]


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else v


def pool_geometry(shape, attrs) -> tuple[list[int], list[int], list[int], list[int], list[int], list[int]]:
    """(kernel, strides, dilations, pads_begin, pads_end, extra_end) of a pooling node: the padding
    ``auto_pad`` or ``pads`` gives, and the end positions ``ceil_mode`` adds beyond it (AveragePool-19,
    MaxPool-12: the output shape formulas)."""
    n = len(shape) - 2
    kernel = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides", [1] * n))
    dil = list(attrs.get("dilations", [1] * n))
    ceil = bool(attrs.get("ceil_mode", 0))
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    dims = list(shape[2:])
    auto = _s(attrs.get("auto_pad", "NOTSET"))
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        out = [-(-d // s) for d, s in zip(dims, strides)]
        total = [max(0, (o - 1) * s + sp - d) for o, s, sp, d in zip(out, strides, span, dims)]
        small = [t // 2 for t in total]
        begin = small if auto == "SAME_UPPER" else [t - h for t, h in zip(total, small)]
        end = [t - b for t, b in zip(total, begin)]
    else:
        pads = [0] * 2 * n if auto == "VALID" else list(attrs.get("pads", [0] * 2 * n))
        begin, end = pads[:n], pads[n:]
        rnd = math.ceil if ceil else math.floor
        out = [rnd(Fraction(d + b + e - sp, s)) + 1 for d, b, e, sp, s in zip(dims, begin, end, span, strides)]
    extra = [max(0, (o - 1) * s + sp - (d + b + e)) for o, s, sp, d, b, e in zip(out, strides, span, dims, begin, end)]
    return kernel, strides, dil, begin, end, extra


def pool_windows(x: np.ndarray, attrs, fill: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(windows, real, in_pads): (N, C, O1..On, K) values (padding holding ``fill``), whether each
    position is an input element, and whether it lies within the input or its stated padding (not
    in the positions ``ceil_mode`` adds)."""
    kernel, strides, dil, begin, end, extra = pool_geometry(x.shape, attrs)
    n, c = x.ndim - 2, x.shape[1]
    stated = [(0, 0), (0, 0)] + list(zip(begin, end))
    more = [(0, 0), (0, 0)] + [(0, e) for e in extra]
    padded = np.pad(np.pad(x.astype(np.float64), stated, constant_values=fill), more, constant_values=fill)
    real = np.pad(np.ones(x.shape), [(0, 0), (0, 0)] + [(b, e + x_) for b, e, x_ in zip(begin, end, extra)])
    in_pads = np.pad(np.ones(padded.shape[:2] + tuple(d - x_ for d, x_ in zip(padded.shape[2:], extra))), more)
    geo = {"strides": strides, "dilations": dil, "group": c}
    wshape = (c, 1, *kernel)
    out = []
    for arr in (padded, real, in_pads):
        cols, _ = conv_windows(arr, wshape, geo)  # (N, O.., K.., C)
        cols = np.moveaxis(cols, -1, 1)
        out.append(cols.reshape(cols.shape[:2 + n] + (-1,)))
    return out[0], out[1].astype(bool), out[2].astype(bool)


class SumOps:
    """Conv, MatMul, Gemm, AveragePool, GlobalAveragePool, MaxPool (a maximum, exact), on float32
    tensors."""

    def op_Conv(self, node, ins, where):
        x, w = ins[0], ins[1]
        bias = ins[2] if len(ins) > 2 else None
        cols, group = conv_windows(x.astype(np.float64), w.shape, node.attrs, 0.0)  # (N, O.., K.., C)
        n = x.ndim - 2
        lead = cols.shape[:1 + n]
        cg, mg = x.shape[1] // group, w.shape[0] // group
        parts = []
        for g in range(group):
            c = cols[..., g * cg:(g + 1) * cg].reshape(lead + (-1,))
            wg = np.moveaxis(w[g * mg:(g + 1) * mg].astype(np.float64), 1, -1).reshape(mg, -1)
            parts.append(c[..., None, :] * wg)  # (N, O.., Mg, K·Cg)
        terms = np.concatenate(parts, axis=-2)
        if bias is not None:
            b = np.broadcast_to(bias.astype(np.float64)[:, None], terms.shape[-2:-1] + (1,))
            terms = np.concatenate([terms, np.broadcast_to(b, terms.shape[:-1] + (1,))], axis=-1)
        terms = np.moveaxis(terms, -2, 1)  # (N, M, O.., K·Cg [+1])
        return rounded(row_sums(terms), where)

    def op_MatMul(self, node, ins, where):
        a, b, squeeze, _ = matmul_operands(ins[0], ins[1])
        terms = np.moveaxis(a.astype(np.float64)[..., :, :, None] * b.astype(np.float64)[..., None, :, :], -2, -1)
        res = rounded(row_sums(terms), where)
        return _map(res, lambda o: o.squeeze(axis=squeeze) if squeeze else o)

    def op_Gemm(self, node, ins, where):
        a, b = ins[0].astype(np.float64), ins[1].astype(np.float64)
        if node.attrs.get("transA", 0):
            a = a.T
        if node.attrs.get("transB", 0):
            b = b.T
        if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
            raise InvalidModel(f"Gemm: A' {a.shape} and B' {b.shape}")
        alpha = float(np.float32(node.attrs.get("alpha", 1.0)))
        beta = float(np.float32(node.attrs.get("beta", 1.0)))
        # "Y = alpha * A' * B' + beta * C": each term alpha·a·b and beta·c exact in float64 (the
        # generator's alpha and beta have few mantissa bits), one sum of them (#qdq-sum-order)
        terms = np.moveaxis(a[:, :, None] * b[None, :, :], 1, -1) * alpha  # (M, N, K)
        c = ins[2] if len(ins) > 2 and ins[2] is not None else None
        if c is not None and beta != 0:
            cb = np.broadcast_to(c.astype(np.float64), terms.shape[:2]) * beta
            terms = np.concatenate([terms, cb[..., None]], axis=-1)
        return rounded(row_sums(terms), where)

    def op_MaxPool(self, node, ins, where):
        windows, real, _ = pool_windows(ins[0], node.attrs, -np.inf)
        if not real.any(axis=-1).all():
            raise InvalidModel(f"{where}: a pooling window holds no input element")
        return [windows.max(axis=-1).astype(np.float32)]

    def _mean(self, sums: Sums, counts: np.ndarray, where: str) -> list:
        """"divided by the number of elements": the exact sum over the count, rounded once (one
        float division, #qdq-sum-order)."""
        inv = np.frompyfunc(lambda c: Fraction(1, int(c)), 1, 1)(np.broadcast_to(counts, sums.exact.shape))
        return rounded(sums, where, inv)

    def op_AveragePool(self, node, ins, where):
        windows, real, in_pads = pool_windows(ins[0], node.attrs, 0.0)
        include = bool(node.attrs.get("count_include_pad", 0))
        if include and not in_pads.all():
            raise InvalidModel(f"{where}: count_include_pad with ceil_mode's added positions (the count is open)")
        counts = (in_pads if include else real).sum(axis=-1)
        if (counts == 0).any():
            raise InvalidModel(f"{where}: a pooling window holds no input element")
        return self._mean(row_sums(windows), counts, where)

    def op_GlobalAveragePool(self, node, ins, where):
        x = ins[0]
        rows = x.reshape(x.shape[:2] + (-1,)).astype(np.float64)
        res = self._mean(row_sums(rows), np.asarray(rows.shape[-1]), where)
        return _map(res, lambda o: o.reshape(x.shape[:2] + (1,) * (x.ndim - 2)))


__all__ = ["SumOps", "pool_geometry", "pool_windows"]

"""The float ops of the QDQ patterns that move values (Pad, Slice, Squeeze, Unsqueeze, Split,
DepthToSpace: exact) or compute them elementwise or along an axis (LeakyRelu, HardSwish, Softmax),
each result the exact value rounded once to float32 (#qdq-graph); HardSwish also by its function
body (#qdq-hardswish)."""
from __future__ import annotations

import decimal
from fractions import Fraction

import numpy as np

from qconform.oracle.granularity import InvalidModel
from qconform.oracle.graph_sums import _round_fraction_f32


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else v


def _ints(v) -> list[int]:
    return [int(i) for i in np.asarray(v).reshape(-1)]


def _round_f32(v: Fraction) -> float:
    return _round_fraction_f32(v)


def _exp(x: Fraction) -> Fraction:
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        d = (decimal.Decimal(x.numerator) / decimal.Decimal(x.denominator)).exp()
    return Fraction(d)


class ShapeOps:
    """Pad, Slice, Squeeze, Unsqueeze, Split, DepthToSpace, LeakyRelu, HardSwish, Softmax."""

    def op_LeakyRelu(self, node, ins, where):
        """"f(x) = alpha * x for x < 0, f(x) = x for x >= 0": one float32 multiply (the product of
        two float32 values is exact in float64, so its cast is the one rounding)."""
        x = ins[0]
        alpha = np.float32(node.attrs.get("alpha", 0.01))
        neg = (x.astype(np.float64) * np.float64(alpha)).astype(np.float32)
        return [np.where(x < 0, neg, x).astype(np.float32)]

    def op_HardSwish(self, node, ins, where):
        """"y = x * max(0, min(1, alpha * x + beta))", alpha = 1/6, beta = 0.5: the exact value rounded
        once (``spec``), and HardSwish's function body (HardSigmoid rounded, then Mul rounded:
        ``function-body``) (#qdq-hardswish)."""
        x = ins[0].reshape(-1)
        alpha, beta = Fraction(float(np.float32(1 / 6))), Fraction(1, 2)
        once, body = [], []
        for v in x:
            fv = Fraction(float(v))
            hs = min(Fraction(1), max(Fraction(0), alpha * fv + beta))
            once.append(_round_f32(fv * hs))
            body.append(_round_f32(fv * Fraction(_round_f32(hs))))
        shape = ins[0].shape
        return [("spec", [np.asarray(once, np.float32).reshape(shape)]),
                ("function-body", [np.asarray(body, np.float32).reshape(shape)])]

    def op_Softmax(self, node, ins, where):
        """"Exp(input) / ReduceSum(Exp(input), axis=axis, keepdims=1)": the exact value rounded once,
        as Sigmoid's (#qdq-softmax)."""
        x = ins[0]
        axis = node.attrs.get("axis", -1) % x.ndim
        moved = np.moveaxis(x, axis, -1)
        rows = moved.reshape(-1, moved.shape[-1])
        val = np.empty(rows.shape, np.float32)
        for r, row in enumerate(rows):
            top = Fraction(float(row.max()))
            es = [_exp(Fraction(float(v)) - top) for v in row]
            total = sum(es)
            val[r] = [_round_f32(e / total) for e in es]
        return [np.moveaxis(val.reshape(moved.shape), -1, axis).copy()]

    def op_Greater(self, node, ins, where):
        """"Returns the tensor resulted from performing the greater logical operation elementwise":
        exact (a condition for Where inside a pattern)."""
        return [np.greater(ins[0], ins[1])]

    def op_Where(self, node, ins, where):
        """"Return elements, either from X or Y, depending on condition": a selection, exact."""
        return [np.where(ins[0], ins[1], ins[2]).astype(np.float32)]

    # -- data movement ------------------------------------------------------------------------------
    def op_Pad(self, node, ins, where):
        x = ins[0]
        pads = _ints(ins[1])
        value = float(ins[2].reshape(())) if len(ins) > 2 and ins[2] is not None and np.size(ins[2]) else 0.0
        axes = _ints(ins[3]) if len(ins) > 3 and ins[3] is not None else list(range(x.ndim))
        axes = [a % x.ndim for a in axes]
        mode = _s(node.attrs.get("mode", "constant"))
        begin, end = [0] * x.ndim, [0] * x.ndim
        for k, a in enumerate(axes):
            begin[a], end[a] = pads[k], pads[k + len(axes)]
        crop = tuple(slice(max(0, -b), x.shape[i] - max(0, -e)) for i, (b, e) in enumerate(zip(begin, end)))
        y = x[crop]
        width = [(max(0, b), max(0, e)) for b, e in zip(begin, end)]
        if mode == "constant":
            out = np.pad(y, width, constant_values=np.float32(value))
        elif mode in ("reflect", "edge", "wrap"):
            out = np.pad(y, width, mode=mode)
        else:
            raise InvalidModel(f"Pad mode {mode!r}")
        return [out.astype(np.float32)]

    def op_Slice(self, node, ins, where):
        x = ins[0]
        starts, ends = _ints(ins[1]), _ints(ins[2])
        axes = _ints(ins[3]) if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
        steps = _ints(ins[4]) if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
        index = [slice(None)] * x.ndim
        for s, e, a, st in zip(starts, ends, axes, steps):
            a %= x.ndim
            d = x.shape[a]
            s, e = s + d if s < 0 else s, e + d if e < 0 else e
            if st > 0:
                s, e = min(max(s, 0), d), min(max(e, 0), d)
            else:
                s, e = min(max(s, 0), d - 1), min(max(e, -1), d - 1)
            index[a] = np.arange(s, e, st)
        y = x
        for a, ix in enumerate(index):
            if not isinstance(ix, slice):
                y = np.take(y, ix, axis=a)
        return [y.astype(np.float32)]

    def op_Squeeze(self, node, ins, where):
        x = ins[0]
        axes = tuple(a % x.ndim for a in _ints(ins[1])) if len(ins) > 1 and ins[1] is not None else None
        return [np.squeeze(x, axis=axes).copy()]

    def op_Unsqueeze(self, node, ins, where):
        x = ins[0]
        axes = _ints(ins[1])
        rank = x.ndim + len(axes)
        return [np.expand_dims(x, tuple(sorted(a % rank for a in axes))).copy()]

    def op_Split(self, node, ins, where):
        x = ins[0]
        axis = node.attrs.get("axis", 0) % x.ndim
        if len(ins) > 1 and ins[1] is not None:
            sizes = _ints(ins[1])
        else:
            k = int(node.attrs["num_outputs"])
            d = x.shape[axis]
            chunk = -(-d // k)
            sizes = [min(chunk, d - i * chunk) for i in range(k)]
        cuts = np.cumsum(sizes)[:-1]
        return [p.astype(np.float32).copy() for p in np.split(x, cuts, axis=axis)]

    def op_DepthToSpace(self, node, ins, where):
        x = ins[0]
        b = int(node.attrs["blocksize"])
        n, c, h, w = x.shape
        if _s(node.attrs.get("mode", "DCR")) == "DCR":
            t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
        else:
            t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
        return [t.reshape(n, c // (b * b), h * b, w * b).copy()]


__all__ = ["ShapeOps"]

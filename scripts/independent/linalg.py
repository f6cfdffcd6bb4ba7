"""Exact integer accumulation: numpy.matmul's shapes (with per-row / per-column parameters) and ONNX
Conv's window (N-D, groups, strides, dilations, pads, auto_pad), from the operator texts.

Operands arrive as exact integers: values times 2^E, E chosen so every value of the operand (and of
its zero point) is an integer (0 for integer types; float8 values lie on a 2^-k grid). Sums are
formed in int64 only where a bound proves they cannot overflow, otherwise as Python integers
(object arrays); either way every sum is exact. numpy does the indexing, never a rounding.
"""
from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np

from .values import FIN, signed

INT64_SAFE = 1 << 62


def exact_ints(values: list, shape) -> tuple[np.ndarray, int, np.ndarray]:
    """(ints, E, bad): an object array of the values times 2^E (Python integers), E the smallest
    exponent making every finite value an integer, and where a value is NaN or +-Inf (bad; its int
    is 0). −0 is 0."""
    e = 0
    for v in values:
        if v[0] == FIN and v[2]:
            d = v[2].denominator
            e = max(e, d.bit_length() - 1)  # d is a power of two (every format here is binary)
    scale = 1 << e
    ints = np.empty(len(values), dtype=object)
    bad = np.zeros(len(values), dtype=bool)
    for i, v in enumerate(values):
        if v[0] != FIN:
            ints[i], bad[i] = 0, True
            continue
        n = signed(v) * scale
        assert n.denominator == 1, "value not on a binary grid"
        ints[i] = int(n)
    return ints.reshape(shape), e, bad.reshape(shape)


def rescale(ints: np.ndarray, e_from: int, e_to: int) -> np.ndarray:
    return ints * (1 << (e_to - e_from)) if e_to != e_from else ints


def _maxabs(a: np.ndarray) -> int:
    return max((abs(int(v)) for v in a.ravel()), default=0)


def _fits(a: np.ndarray, b: np.ndarray, terms: int) -> bool:
    return _maxabs(a) * _maxabs(b) * max(terms, 1) < INT64_SAFE


def exact_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy.matmul of integer arrays ([..., M, K] @ [..., K, N]), every sum exact (object result)."""
    if _fits(a, b, a.shape[-1]):
        return np.matmul(a.astype(np.int64), b.astype(np.int64)).astype(object)
    return np.matmul(a.astype(object), b.astype(object))


# ------------------------------------------------------------------------------------------------
# numpy.matmul with per-row parameters of a and per-column parameters of b
# ------------------------------------------------------------------------------------------------
def param_shape(pshape: tuple, side: str) -> tuple:
    """The shape a scale / zero point broadcasts from against its operand (2-D view): () per tensor
    (a scalar or a 1-element tensor); an a-side 1-D vector is [M, 1] (one per row), a b-side one
    [1, N] (one per column); an N-D one ([..., M, 1] / [..., 1, N]) is as given."""
    if len(pshape) == 0 or int(np.prod(pshape)) == 1:
        return ()
    if len(pshape) == 1:
        return (pshape[0], 1) if side == "a" else (1, pshape[0])
    return tuple(pshape)


class MatMulShape:
    """numpy.matmul's shapes: a 1-D a is [1, K], a 1-D b is [K, 1], the added axis removed from y."""

    def __init__(self, ashape: tuple, bshape: tuple):
        self.a1, self.b1 = len(ashape) == 1, len(bshape) == 1
        self.a2 = (1,) + tuple(ashape) if self.a1 else tuple(ashape)
        self.b2 = tuple(bshape) + (1,) if self.b1 else tuple(bshape)
        if self.a2[-1] != self.b2[-2]:
            raise ValueError(f"matmul: K differs ({ashape} @ {bshape})")
        batch = np.broadcast_shapes(self.a2[:-2], self.b2[:-2])
        self.y2 = tuple(batch) + (self.a2[-2], self.b2[-1])
        r = len(self.y2)
        self.y = tuple(d for j, d in enumerate(self.y2) if not (self.a1 and j == r - 2 or self.b1 and j == r - 1))

    def flat(self, arr2: np.ndarray) -> np.ndarray:
        """An array of y2's shape (or broadcasting to it) as y's flat elements."""
        return np.broadcast_to(arr2, self.y2).reshape(self.y).ravel()

    def index_of(self, pshape: tuple, side: str) -> np.ndarray:
        """Flat index into a parameter for every flat element of y."""
        ps = param_shape(pshape, side)
        size = int(np.prod(pshape)) if len(pshape) else 1
        idx = np.arange(size).reshape(ps if ps else ())
        return self.flat(idx)


def matmul_acc(shape: MatMulShape, a_vals, a_zp_vals, a_zp_shape, b_vals, b_zp_vals, b_zp_shape):
    """Exact acc[..., m, n] = Σ_k (a − a_zp)(b − b_zp) for every flat element of y, as Fractions,
    and for each whether its dot product touches a NaN or ±Inf operand (its row of a with a's zero
    point, its column of b with b's zero point). Zero points: decoded values (one for an absent one)."""
    ai, ea, abad = exact_ints(list(a_vals) + list(a_zp_vals), (len(a_vals) + len(a_zp_vals),))
    bi, eb, bbad = exact_ints(list(b_vals) + list(b_zp_vals), (len(b_vals) + len(b_zp_vals),))
    na, nb = len(a_vals), len(b_vals)
    a = ai[:na].reshape(shape.a2)
    b = bi[:nb].reshape(shape.b2)
    azp = ai[na:].reshape(param_shape(a_zp_shape, "a"))
    bzp = bi[nb:].reshape(param_shape(b_zp_shape, "b"))
    da, db = a - azp, b - bzp  # object arrays: Python integers, exact
    acc = exact_matmul(da, db)
    bad_a = abad[:na].reshape(shape.a2) | abad[na:].reshape(param_shape(a_zp_shape, "a"))
    bad_b = bbad[:nb].reshape(shape.b2) | bbad[nb:].reshape(param_shape(b_zp_shape, "b"))
    touched = bad_a.any(axis=-1, keepdims=True) | bad_b.any(axis=-2, keepdims=True)
    den = 1 << (ea + eb)
    accs = [Fraction(int(s), den) for s in shape.flat(acc)]
    return accs, shape.flat(touched)


# ------------------------------------------------------------------------------------------------
# ONNX Conv: N-D, groups, strides, dilations, explicit pads or auto_pad
# ------------------------------------------------------------------------------------------------
def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def conv_geometry(xshape: tuple, wshape: tuple, attrs: dict):
    """(out spatial shape, pads_begin, strides, dilations, kernel) per the Conv text."""
    n = len(xshape) - 2
    kernel = tuple(int(k) for k in wshape[2:])
    ks = attrs.get("kernel_shape")
    if ks is not None and tuple(int(k) for k in ks) != kernel:
        raise ValueError(f"kernel_shape {list(ks)} is not w's spatial shape {list(kernel)}")
    strides = tuple(int(s) for s in attrs.get("strides", [1] * n))
    dil = tuple(int(d) for d in attrs.get("dilations", [1] * n))
    pads = [int(p) for p in attrs.get("pads", [0] * (2 * n))]
    auto = _s(attrs.get("auto_pad", "NOTSET"))
    begin, out = [], []
    for d in range(n):
        size, k, s, dl = xshape[2 + d], kernel[d], strides[d], dil[d]
        ext = (k - 1) * dl + 1  # the dilated kernel's extent
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-size // s)  # output_shape[i] = ceil(input_shape[i] / strides[i])
            total = max(0, (o - 1) * s + ext - size)
            small, big = total // 2, total - total // 2
            # "the extra padding is added at the end for SAME_UPPER and at the beginning for SAME_LOWER"
            pb = small if auto == "SAME_UPPER" else big
        elif auto == "VALID":
            pb, o = 0, (size - ext) // s + 1
        elif auto == "NOTSET":
            pb, pe = pads[d], pads[n + d]
            o = (size + pb + pe - ext) // s + 1
        else:
            raise ValueError(f"auto_pad {auto!r}")
        begin.append(pb)
        out.append(max(o, 0))
    return tuple(out), tuple(begin), strides, dil, kernel


def conv_acc(x: np.ndarray, w: np.ndarray, attrs: dict) -> np.ndarray:
    """Exact Σ over the group's input channels and the kernel window of x · w (integer arrays,
    [N, C, *S] and [M, C/group, *K]); padded positions hold 0. Result [N, M, *O], Python ints."""
    group = int(attrs.get("group", 1))
    nb, c = x.shape[:2]
    m, cg = w.shape[:2]
    if c != cg * group or m % group:
        raise ValueError(f"channels: x {x.shape}, w {w.shape}, group {group}")
    out, begin, strides, dil, kernel = conv_geometry(x.shape, w.shape, attrs)
    n = len(kernel)
    # a zero-filled canvas wide enough for every window position (padding and any overhang)
    span = [max(begin[d] + x.shape[2 + d], (out[d] - 1) * strides[d] + (kernel[d] - 1) * dil[d] + 1) if out[d]
            else begin[d] + x.shape[2 + d] for d in range(n)]
    terms = cg * int(np.prod(kernel))
    dt = np.int64 if _fits(x, w, terms) else object
    canvas = np.zeros((nb, c, *span), dtype=dt)
    canvas[(slice(None), slice(None)) + tuple(slice(begin[d], begin[d] + x.shape[2 + d]) for d in range(n))] = x
    wv = w.astype(dt)
    y = np.zeros((nb, m, *out), dtype=dt)
    if y.size == 0:
        return y.astype(object)
    mg = m // group
    for kk in itertools.product(*(range(k) for k in kernel)):
        win = tuple(slice(kk[d] * dil[d], kk[d] * dil[d] + (out[d] - 1) * strides[d] + 1, strides[d])
                    for d in range(n))
        for g in range(group):
            xs = canvas[(slice(None), slice(g * cg, (g + 1) * cg)) + win]  # [N, Cg, *O]
            ws = wv[(slice(g * mg, (g + 1) * mg), slice(None)) + kk]  # [Mg, Cg]
            y[:, g * mg:(g + 1) * mg] += np.moveaxis(np.tensordot(ws, xs, axes=([1], [1])), 0, 1)
    return y.astype(object)

"""The patterns' float ops on exact rationals: the text's real arithmetic, before any float32 rounding.

``FloatOps`` computes what the graph computes (float32, every rounding the text states); these give
the value a kernel that requantises once in exact arithmetic starts from (the diagnosis' exact
requantisation models, ``diagnosis/models/fixed_point_kernels.py``). Each is registered with its op
(``FloatOp.exact`` in ``graph.py``) and takes (operands as Fraction arrays, the other inputs as they
are, the attributes).
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any, Mapping, Sequence

import numpy as np

from qconform.oracle import integer

Operands = Sequence[np.ndarray]
Others = Sequence[Any]
Attrs = Mapping[str, Any]


def identity(v: Operands, o: Others, a: Attrs) -> np.ndarray:
    return v[0]


def relu(v: Operands, o: Others, a: Attrs) -> np.ndarray:
    return np.where(v[0] > 0, v[0], Fraction(0))


def leaky_relu(v: Operands, o: Others, a: Attrs) -> np.ndarray:
    """alpha as the float32 attribute holds it."""
    return np.where(v[0] >= 0, v[0], v[0] * Fraction(float(np.float32(a.get("alpha", 0.01)))))


def add(v: Operands, o: Others, a: Attrs) -> np.ndarray:
    return v[0] + v[1]


def sub(v: Operands, o: Others, a: Attrs) -> np.ndarray:
    return v[0] - v[1]


def mul(v: Operands, o: Others, a: Attrs) -> np.ndarray:
    return v[0] * v[1]


def concat(v: Operands, o: Others, a: Attrs) -> np.ndarray:
    return np.concatenate(v, axis=a["axis"])


def reshape(v: Operands, o: Others, a: Attrs) -> np.ndarray:
    return v[0].reshape([int(d) for d in o[1]])


def transpose(v: Operands, o: Others, a: Attrs) -> np.ndarray:
    return np.transpose(v[0], a.get("perm"))


def gather(v: Operands, o: Others, a: Attrs) -> np.ndarray:
    return np.take(v[0], np.asarray(o[1], np.int64), axis=a.get("axis", 0))


def clip(v: Operands, o: Others, a: Attrs) -> np.ndarray:
    """Bounds (inputs 2 and 3, either left out) as the float values given."""
    x = v[0]
    lo = Fraction(float(np.asarray(o[1]).reshape(-1)[0])) if len(o) > 1 and o[1] is not None else None
    hi = Fraction(float(np.asarray(o[2]).reshape(-1)[0])) if len(o) > 2 and o[2] is not None else None
    if lo is not None:
        x = np.where(x < lo, lo, x)
    if hi is not None:
        x = np.where(x > hi, hi, x)
    return x


def _windows(v: np.ndarray, a: Attrs) -> np.ndarray:
    """A pool's windows without padding, (N, O.., K, C), from the integer body's convolution windows."""
    kernel = list(a["kernel_shape"])
    n = v.ndim - 2
    cols, _ = integer.conv_windows(v, (v.shape[1], v.shape[1], *kernel),
                                   {k: a[k] for k in ("kernel_shape", "strides") if k in a})
    return cols.reshape(cols.shape[:1 + n] + (-1, v.shape[1]))


def max_pool(v: Operands, o: Others, a: Attrs) -> np.ndarray:
    return np.moveaxis(_windows(v[0], a).max(axis=-2), -1, 1)


def average_pool(v: Operands, o: Others, a: Attrs) -> np.ndarray:
    return np.moveaxis(_windows(v[0], a).sum(axis=-2), -1, 1) / int(np.prod(a["kernel_shape"]))


def global_average_pool(v: Operands, o: Others, a: Attrs) -> np.ndarray:
    return v[0].sum(axis=tuple(range(2, v[0].ndim)), keepdims=True) / int(np.prod(v[0].shape[2:]))


def mat_mul(v: Operands, o: Others, a: Attrs) -> np.ndarray:
    return np.dot(v[0], v[1])


def gemm(v: Operands, o: Others, a: Attrs) -> np.ndarray:
    """alpha·A'·B' + beta·C, A' and B' transposed as transA and transB say."""
    x = v[0].T if a.get("transA", 0) else v[0]
    w = v[1].T if a.get("transB", 0) else v[1]
    out = np.dot(x, w) * Fraction(float(a.get("alpha", 1.0)))
    return out + v[2] * Fraction(float(a.get("beta", 1.0))) if len(v) > 2 else out


def conv(v: Operands, o: Others, a: Attrs) -> np.ndarray:
    """Each group's windows (the integer body's, padded with 0) times its filters, plus the bias."""
    x, w = v[0], v[1]
    cols, group = integer.conv_windows(x, w.shape, a, pad_value=Fraction(0))  # (N, O.., K.., C)
    n = x.ndim - 2
    cg, mg = x.shape[1] // group, w.shape[0] // group
    parts = []
    for g in range(group):
        c = cols[..., g * cg:(g + 1) * cg].reshape(cols.shape[:1 + n] + (-1,))
        wg = np.moveaxis(w[g * mg:(g + 1) * mg], 1, -1).reshape(mg, -1)
        parts.append(np.dot(c, wg.T))
    out = np.moveaxis(np.concatenate(parts, axis=-1), -1, 1)
    if len(v) > 2:
        out = out + v[2].reshape((1, -1) + (1,) * n)
    return out

"""Cases of the com.microsoft ops the text defines as quantize(f(dequantize(x))): QLinearSigmoid,
QLinearLeakyRelu, QLinearAveragePool, QLinearGlobalAveragePool, QLinearSoftmax, QLinearConcat
(qconform/docs/semantics.md#ms-qlinear-composed and the sections after it).

- ``basic``: ordinary values and scales;
- ``exhaustive`` (Sigmoid, LeakyRelu): every code of X, at several scale pairs (256 codes: the
  whole domain, as a lookup-table kernel sees it);
- ``zero-points``: X's and Y's zero points at both ends of the type;
- ``saturation``: results beyond both ends of Y's type;
- ``ties``: power-of-two scales placing results on k + 1/2 (LeakyRelu's alpha 1/2, the pools' means
  of two and four, Concat's scale ratio 1/2);
- ``attributes``: LeakyRelu's alpha; the pools' kernel_shape, strides, pads, auto_pad, ceil_mode,
  count_include_pad, channels_last, 1-D to 3-D; Softmax's opset and axis; Concat's axis and input count;
- ``random``: seeded draws.
The pools' X scales are powers of two, so every window sum is exact in float32 for every order
(#qdq-sum-order): the case then has one value whatever order a kernel sums in.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np

from qconform.case import Arg, Draft
from qconform.declarations import contrib_qlinear as decl
from qconform.declarations import operators
from qconform.generators.common import type_signature
from qconform.generators.qlinear_common import Combo, codes, every_code, f32, lo_hi, mid, zp

Family = Callable[[Combo], Iterator[Draft]]


def _unary(c: Combo, x, xs, xz, ys, yz) -> dict[str, Any]:
    """Values by the op's own input names (X/x_scale/... spell differently per op)."""
    t = c.t("T")
    names = [i.name for i in operators.get(c.spec.domain, c.op).inputs]
    v = {names[0]: np.asarray(x).astype(t.dtype), names[1]: f32(xs), names[3]: f32(ys)}
    if xz is not None:
        v[names[2]] = zp(t, xz)
    if yz is not None:
        v[names[4]] = zp(t, yz)
    return v


def _y_zp(t) -> int:
    """Y's zero point where Y holds [0, 1) (Sigmoid, Softmax): the type's lowest code."""
    return lo_hi(t)[0]


# -- Sigmoid, LeakyRelu ------------------------------------------------------------------------------
def _is_leaky(c: Combo) -> bool:
    return c.op == decl.QLINEAR_LEAKY_RELU.op


def _elt_params(c: Combo) -> tuple[float, float, int]:
    """(x scale, y scale, y zero point) of an ordinary case."""
    t = c.t("T")
    return (0.05, 0.05, mid(t)) if _is_leaky(c) else (0.05, 1 / 256, _y_zp(t))


def _elt_basic(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    xs, ys, yz = _elt_params(c)
    rng = c.rng("basic", "ordinary")
    yield c.draft("basic", "ordinary", _unary(c, codes(t, (2, 5), rng), xs, mid(t), ys, yz))
    yield c.draft("basic", "no-zero-points", _unary(c, codes(t, (3, 4), rng), xs, None, ys, None),
                  note="zero points left out: 'Default value is 0 if it's not specified'")


def _elt_zero_points(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    lo, hi = lo_hi(t)
    xs, ys, _ = _elt_params(c)
    for xz, xn in ((lo, "lo"), (mid(t), "mid"), (hi, "hi")):
        for yz, yn in ((lo, "lo"), (mid(t), "mid"), (hi, "hi")):
            yield c.draft("zero-points", f"x-{xn}-y-{yn}", _unary(c, every_code(t), xs, xz, ys, yz),
                          note="every code, zero points at the type's ends")


def _elt_saturation(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    for i, (xs, ys) in enumerate([(0.5, 1 / 1024), (1.0, 1 / 4096), (0.1, 1e-4)]):
        yield c.draft("saturation", f"small-y-scale-{i}", _unary(c, every_code(t), xs, mid(t), ys, mid(t)),
                      note="Y's scale too small for the results: both ends")


_SCALES = [(1 / 16, 1 / 256), (0.05, 1 / 255), (0.1, 1 / 256), (1 / 32, 0.0039), (0.02, 0.003), (0.2, 1 / 128),
           (0.013, 0.0041), (0.07, 0.0021), (0.5, 1 / 256), (1 / 8, 0.01), (0.03, 0.0025), (0.25, 0.004)]


def _elt_exhaustive(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    for i, (xs, ys) in enumerate(_SCALES):
        if _is_leaky(c):
            ys = xs * (1.3 if i % 2 else 0.9)
        yz = mid(t) if _is_leaky(c) else _y_zp(t)
        yield c.draft("exhaustive", f"scales-{i}", _unary(c, every_code(t), xs, mid(t) + i - 6, ys, yz),
                      note=f"every code, x_scale {xs:g}, y_scale {ys:g}")
    if not _is_leaky(c):
        yield from _sigmoid_fine_grid(c)


def _sigmoid_fine_grid(c: Combo) -> Iterator[Draft]:
    """Y scales of 2^-24 and 2^-20 over X far below zero: sigmoid's small values on a grid fine enough
    that any approximation of the function shows (#qdq-sigmoid: its value is the exact sigmoid
    rounded once; a rational approximation that cancels p/q against 1/2 loses them)."""
    t = c.t("T")
    lo, hi = lo_hi(t)
    for name, xs, ys in (("fine-output-grid-2^-24", 1 / 8, 2.0**-24), ("fine-output-grid-2^-20", 1 / 16, 2.0**-20)):
        yield c.draft("exhaustive", name, _unary(c, every_code(t), xs, hi, ys, lo),
                      note=f"every code below zero, x_scale {xs:g}, y_scale {ys:g}: sigmoid's tail, code by code")


_ALPHAS = [None, 0.1, 0.2, 0.5, 1.0, 0.0, 2.0, 0.3333]


def _leaky_attributes(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    for alpha in _ALPHAS:
        attrs = {} if alpha is None else {"alpha": alpha}
        name = "alpha-default" if alpha is None else f"alpha-{alpha:g}"
        yield c.draft("attributes", name, _unary(c, every_code(t), 1.0, mid(t), 1.0, mid(t)), attrs,
                      note="alpha (x_scale = y_scale = 1: alpha 1/2 puts odd negative codes on ties)")


def _elt_random(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    for i in range(25 if not _is_leaky(c) else 20):
        rng = c.rng("random", str(i))
        xs = float(f32(rng.uniform(0.005, 0.2)))
        ys = xs * rng.uniform(0.5, 2.0) if _is_leaky(c) else float(f32(rng.uniform(0.002, 0.006)))
        attrs = {"alpha": float(f32(rng.uniform(0.0, 0.5)))} if _is_leaky(c) else {}
        shape = tuple(int(v) for v in rng.integers(1, 6, int(rng.integers(1, 4))))
        yield c.draft("random", f"draw-{i}", _unary(c, codes(t, shape, rng), xs, int(codes(t, (), rng)), ys,
                                                    int(codes(t, (), rng))), attrs, note="a seeded draw")


ELEMENTWISE: dict[str, Family] = {
    "basic": _elt_basic, "zero-points": _elt_zero_points, "saturation": _elt_saturation,
    "exhaustive": _elt_exhaustive, "random": _elt_random,
}
LEAKY_ONLY = {"attributes": _leaky_attributes}


# -- the pools -----------------------------------------------------------------------------------------
def _is_global(c: Combo) -> bool:
    return c.op == decl.QLINEAR_GLOBAL_AVERAGE_POOL.op


def _pool_case(c: Combo, family: str, name: str, shape, attrs, xs=0.5, ys=0.375, xz=None, yz=None, x=None,
               note="") -> Draft:
    t = c.t("T")
    rng = c.rng(family, name)
    x = codes(t, shape, rng) if x is None else x
    v = _unary(c, x, xs, mid(t) if xz is None else xz, ys, mid(t) + 3 if yz is None else yz)
    return c.draft(family, name, v, attrs, note=note)


_POOL_ATTRS: list[tuple[str, tuple[int, ...], dict[str, Any]]] = [
    ("1d-k3", (1, 2, 9), {"kernel_shape": [3]}),
    ("1d-k3-s2-pads", (1, 2, 9), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ("1d-k2-ceil", (1, 2, 8), {"kernel_shape": [2], "strides": [3], "ceil_mode": 1}),
    ("2d-k2", (1, 2, 4, 6), {"kernel_shape": [2, 2]}),
    ("2d-k2-s2", (1, 2, 4, 6), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ("2d-k3", (1, 2, 5, 6), {"kernel_shape": [3, 3]}),
    ("2d-k3-pads", (1, 2, 5, 6), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ("2d-k3-pads-include", (1, 2, 5, 6), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    ("2d-k3-pads-asym", (1, 2, 5, 6), {"kernel_shape": [3, 3], "pads": [0, 1, 2, 1]}),
    ("2d-k3-pads-asym-include", (1, 2, 5, 6), {"kernel_shape": [3, 3], "pads": [0, 1, 2, 1], "count_include_pad": 1}),
    ("2d-k2x3", (1, 1, 5, 7), {"kernel_shape": [2, 3], "strides": [1, 2]}),
    ("2d-k1x3", (2, 2, 3, 7), {"kernel_shape": [1, 3]}),
    ("2d-k3-s2-ceil", (1, 2, 6, 6), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("2d-k3-s2-ceil-pads", (1, 2, 6, 6), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1, "pads": [1, 1, 1, 1]}),
    ("2d-k3-s2-ceil-pads-include", (1, 2, 7, 7),
     {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1, "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    ("2d-k2-s2-ceil", (1, 2, 5, 5), {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ("2d-same-upper", (1, 2, 5, 6), {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER"}),
    ("2d-same-lower", (1, 2, 5, 6), {"kernel_shape": [2, 2], "auto_pad": "SAME_LOWER"}),
    ("2d-same-upper-s2", (1, 2, 5, 6), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ("2d-same-upper-include", (1, 2, 5, 6), {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER", "count_include_pad": 1}),
    ("2d-valid", (1, 2, 5, 6), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "VALID"}),
    ("2d-k7", (1, 1, 7, 7), {"kernel_shape": [7, 7]}),
    ("2d-nhwc-k2", (1, 4, 6, 3), {"kernel_shape": [2, 2], "channels_last": 1}),
    ("2d-nhwc-k3-pads", (1, 5, 6, 2), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "channels_last": 1}),
    ("2d-nhwc-k3-pads-include", (1, 5, 6, 2),
     {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "channels_last": 1, "count_include_pad": 1}),
    ("2d-nhwc-k3-s2", (2, 6, 6, 3), {"kernel_shape": [3, 3], "strides": [2, 2], "channels_last": 1}),
    ("2d-nhwc-ceil", (1, 5, 5, 2), {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1, "channels_last": 1}),
    ("3d-k2", (1, 1, 4, 4, 3), {"kernel_shape": [2, 2, 2]}),
    ("3d-k3-pads", (1, 2, 3, 4, 4), {"kernel_shape": [3, 3, 3], "pads": [1, 1, 1, 1, 1, 1]}),
    ("3d-k2-s2-include", (1, 1, 4, 5, 4),
     {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2], "pads": [1, 0, 1, 0, 1, 1], "count_include_pad": 1}),
]

_GLOBAL_SHAPES: list[tuple[str, tuple[int, ...], int]] = [
    ("1x1", (1, 3, 1, 1), 0), ("2x2", (1, 3, 2, 2), 0), ("3x3", (1, 2, 3, 3), 0), ("5x5", (1, 2, 5, 5), 0),
    ("7x7", (1, 2, 7, 7), 0), ("1x9", (2, 2, 1, 9), 0), ("1d-4", (1, 3, 4), 0), ("1d-3", (1, 3, 3), 0),
    ("3d-2x2x2", (1, 2, 2, 2, 2), 0), ("3x5", (2, 3, 3, 5), 0), ("nhwc-1x1", (1, 1, 1, 3), 1),
    ("nhwc-2x2", (1, 2, 2, 3), 1), ("nhwc-3x3", (1, 3, 3, 2), 1), ("nhwc-5x5", (1, 5, 5, 2), 1),
    ("nhwc-7x7", (1, 7, 7, 4), 1), ("nhwc-1x9", (2, 1, 9, 2), 1), ("nhwc-1d-5", (1, 5, 3), 1),
    ("nhwc-3x5", (2, 3, 5, 3), 1), ("nhwc-6x6", (1, 6, 6, 8), 1), ("6x6", (1, 8, 6, 6), 0),
]


def _pool_basic(c: Combo) -> Iterator[Draft]:
    if _is_global(c):
        yield _pool_case(c, "basic", "ordinary", (1, 3, 4, 4), {})
        yield _pool_case(c, "basic", "odd-count", (1, 2, 3, 3), {}, ys=0.3)
        return
    yield _pool_case(c, "basic", "ordinary", (1, 2, 4, 4), {"kernel_shape": [2, 2]})
    yield _pool_case(c, "basic", "k3-pads", (1, 2, 5, 5), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, ys=0.3)


def _pool_attributes(c: Combo) -> Iterator[Draft]:
    if _is_global(c):
        for name, shape, last in _GLOBAL_SHAPES:
            yield _pool_case(c, "attributes", name, shape, {"channels_last": last} if last else {},
                             ys=0.3 if len(name) % 2 else 0.375, note="spatial sizes and channels_last")
        return
    for name, shape, attrs in _POOL_ATTRS:
        yield _pool_case(c, "attributes", name, shape, attrs, ys=0.3 if len(name) % 2 else 0.375)


def _pool_ties(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    x = every_code(t, (1, 1, 16, 16))
    shapes = [("mean-of-4", {}), ("mean-of-2", {})] if _is_global(c) else \
        [("mean-of-2", {"kernel_shape": [1, 2], "strides": [1, 2]}), ("mean-of-4", {"kernel_shape": [2, 2], "strides": [2, 2]})]
    for name, attrs in shapes:
        xx = x.reshape(64, 1, 2, 2) if name == "mean-of-4" else x.reshape(128, 1, 1, 2)
        if not _is_global(c):
            xx = x
        for parity, yz in (("even", mid(t) - mid(t) % 2), ("odd", mid(t) - mid(t) % 2 + 1)):
            yield _pool_case(c, "ties", f"{name}-{parity}-zero-point", xx.shape, attrs, 1.0, 1.0, 0, yz, xx,
                             note="scales 1: means on k + 1/2, rounded half to even")


def _pool_zero_points(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    lo, hi = lo_hi(t)
    x = every_code(t, (1, 4, 8, 8))
    attrs = {} if _is_global(c) else {"kernel_shape": [2, 2], "strides": [2, 2]}
    if _is_global(c):
        x = every_code(t, (1, 64, 2, 2))
    for xz in (lo, hi):
        for yz in (lo, hi):
            yield _pool_case(c, "zero-points", f"x-{xz}-y-{yz}", x.shape, attrs, 0.25, 0.25, xz, yz, x,
                             note="zero points at the type's ends")


def _pool_saturation(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    x = every_code(t, (1, 64, 2, 2)) if _is_global(c) else every_code(t, (1, 4, 8, 8))
    attrs = {} if _is_global(c) else {"kernel_shape": [2, 2], "strides": [2, 2]}
    for yz, name in ((lo_hi(t)[0], "zero-point-lo"), (lo_hi(t)[1], "zero-point-hi")):
        yield _pool_case(c, "saturation", name, x.shape, attrs, 1.0, 0.25, mid(t), yz, x, note="beyond both ends")


def _pool_random(c: Combo) -> Iterator[Draft]:
    for i in range(14 if not _is_global(c) else 18):
        rng = c.rng("random", str(i))
        xs = float(2.0 ** -int(rng.integers(0, 8)))
        ys = float(f32(xs * rng.uniform(0.3, 1.5)))
        t = c.t("T")
        if _is_global(c):
            last = int(rng.integers(2))
            shape = (int(rng.integers(1, 3)), int(rng.integers(1, 5)), int(rng.integers(1, 6)), int(rng.integers(1, 6)))
            yield _pool_case(c, "random", f"draw-{i}", shape, {"channels_last": last} if last else {}, xs, ys,
                             int(codes(t, (), rng)), int(codes(t, (), rng)), note="a seeded draw")
            continue
        k = [int(v) for v in rng.integers(1, 4, 2)]
        attrs: dict[str, Any] = {"kernel_shape": k, "strides": [int(v) for v in rng.integers(1, 3, 2)],
                                 "pads": [int(min(v, kk - 1)) for v, kk in zip(rng.integers(0, 2, 4), k + k)],
                                 "count_include_pad": int(rng.integers(2))}
        shape = (1, int(rng.integers(1, 4)), int(rng.integers(3, 7)), int(rng.integers(3, 7)))
        yield _pool_case(c, "random", f"draw-{i}", shape, attrs, xs, ys, int(codes(t, (), rng)), int(codes(t, (), rng)),
                         note="a seeded draw (ceil_mode is in attributes)")


POOLS: dict[str, Family] = {
    "basic": _pool_basic, "attributes": _pool_attributes, "ties": _pool_ties, "zero-points": _pool_zero_points,
    "saturation": _pool_saturation, "random": _pool_random,
}


# -- Softmax -----------------------------------------------------------------------------------------------
def _softmax(c: Combo, family, name, x, opset=13, axis=None, xs=0.02, ys=1 / 256, xz=None, yz=None, note="") -> Draft:
    t = c.t("T")
    attrs: dict[str, Any] = {"opset": opset}
    if axis is not None:
        attrs["axis"] = axis
    return c.draft(family, name, _unary(c, x, xs, mid(t) if xz is None else xz, ys, _y_zp(t) if yz is None else yz),
                   attrs, note=note)


def _sm_basic(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    rng = c.rng("basic", "ordinary")
    yield _softmax(c, "basic", "opset-13", codes(t, (2, 5), rng))
    yield _softmax(c, "basic", "opset-11-axis-1", codes(t, (2, 3, 4), rng), opset=11, axis=1)


def _sm_attributes(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    for opset in (1, 11, 12, 13):
        for axis in (-1, 0, 1, 2, -2):
            rng = c.rng("attributes", f"{opset}-{axis}")
            if opset < 13 and axis == -2:
                continue
            yield _softmax(c, "attributes", f"opset-{opset}-axis-{axis}", codes(t, (2, 3, 4), rng), opset, axis,
                           note="opset ≤ 12: the input coerced to N × D at axis; 13+: along axis")


def _sm_zero_points(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    lo, hi = lo_hi(t)
    x = every_code(t, (16, 16))
    for xz in (lo, hi):
        for yz in (lo, mid(t)):
            yield _softmax(c, "zero-points", f"x-{xz}-y-{yz}", x, xs=0.05, ys=1 / 256, xz=xz, yz=yz)


def _sm_scales(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    x = every_code(t, (8, 32))
    for i, (xs, ys) in enumerate([(1 / 16, 1 / 256), (0.1, 1 / 256), (0.5, 1 / 256), (1.0, 1 / 256), (0.02, 1 / 255),
                                  (0.03, 1 / 255), (0.2, 1 / 255), (0.013, 0.004), (1 / 32, 1 / 128), (0.07, 0.0039)]):
        yield _softmax(c, "scales", f"scales-{i}", x, xs=xs, ys=ys, note=f"x_scale {xs:g}, y_scale {ys:g}")


def _sm_saturation(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    x = every_code(t, (4, 64))
    yield _softmax(c, "saturation", "small-y-scale", x, xs=0.01, ys=1 / 8192)
    yield _softmax(c, "saturation", "zero-point-hi", x, xs=0.01, ys=1 / 256, yz=lo_hi(t)[1])
    yield _softmax(c, "saturation", "one-element-rows", every_code(t, (256, 1))[::32], xs=0.1, ys=1 / 256,
                   note="rows of one element: softmax 1 exactly, 256 codes above the zero point")
    rng = c.rng("saturation", "dominant")
    x = codes(t, (3, 4), rng)
    x[:, 0] = lo_hi(t)[1]
    x[:, 1:] = lo_hi(t)[0]
    yield _softmax(c, "saturation", "dominant-element", x, xs=1.0, ys=1 / 256, xz=0,
                   note="one element 255 above the others: its softmax rounds to 256 codes")


def _sm_random(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    for i in range(16):
        rng = c.rng("random", str(i))
        shape = tuple(int(v) for v in rng.integers(1, 6, int(rng.integers(1, 4))))
        axis = int(rng.integers(-len(shape), len(shape)))
        yield _softmax(c, "random", f"draw-{i}", codes(t, shape, rng), int(rng.choice([11, 13])), axis,
                       float(f32(rng.uniform(0.004, 0.05))), 1 / 256, int(codes(t, (), rng)), note="a seeded draw")


SOFTMAX: dict[str, Family] = {
    "basic": _sm_basic, "attributes": _sm_attributes, "zero-points": _sm_zero_points, "scales": _sm_scales,
    "saturation": _sm_saturation, "random": _sm_random,
}


# -- Concat ----------------------------------------------------------------------------------------------------
def _concat(c: Combo, family: str, name: str, xs: list[np.ndarray], params: list[tuple[float, int]], axis: int,
            ys: float, yz: int, note: str = "") -> Draft:
    t = c.t("T8")
    args = [Arg("Y_scale", "float32", np.asarray(f32(ys)), initializer=True),
            Arg("Y_zero_point", t.name, zp(t, yz), initializer=True)]
    for i, (x, (s, z)) in enumerate(zip(xs, params)):
        args += [Arg(f"X{i}", t.name, np.asarray(x).astype(t.dtype)),
                 Arg(f"X{i}_scale", "float32", np.asarray(f32(s)), initializer=True),
                 Arg(f"X{i}_zero_point", t.name, zp(t, z), initializer=True)]
    return Draft(op=c.op, opset=c.spec.since, types=type_signature(c.spec, c.types), family=family, name=name,
                 inputs=tuple(args), attrs={"axis": axis}, domain=c.spec.domain, provenance=f"{family}:{c.spec.key}",
                 note=note)


def _cc_basic(c: Combo) -> Iterator[Draft]:
    t = c.t("T8")
    rng = c.rng("basic", "ordinary")
    m = mid(t)
    yield _concat(c, "basic", "same-parameters", [codes(t, (2, 3), rng), codes(t, (2, 2), rng)], [(0.1, m), (0.1, m)],
                  1, 0.1, m, note="inputs quantized as Y: a copy")
    yield _concat(c, "basic", "ordinary", [codes(t, (2, 3), rng), codes(t, (2, 2), rng)], [(0.05, m + 3), (0.2, m - 9)],
                  1, 0.1, m)


def _cc_attributes(c: Combo) -> Iterator[Draft]:
    t = c.t("T8")
    m = mid(t)
    for axis in (0, 1, 2, -1, -3):
        rng = c.rng("attributes", f"axis-{axis}")
        shapes = [[2, 3, 4], [2, 3, 4]]
        shapes[1][axis] = 1
        yield _concat(c, "attributes", f"axis-{axis}", [codes(t, s, rng) for s in shapes], [(0.1, m), (0.07, m + 5)],
                      axis, 0.09, m - 2)
    for n in (1, 3, 5, 8):
        rng = c.rng("attributes", f"inputs-{n}")
        xs = [codes(t, (2, int(rng.integers(1, 4))), rng) for _ in range(n)]
        params = [(float(f32(rng.uniform(0.01, 0.2))), int(codes(t, (), rng))) for _ in range(n)]
        yield _concat(c, "attributes", f"inputs-{n}", xs, params, 1, 0.1, m, note=f"{n} inputs")


def _cc_ties(c: Combo) -> Iterator[Draft]:
    t = c.t("T8")
    x = every_code(t, (16, 16))
    for parity, yz in (("even", mid(t) - mid(t) % 2), ("odd", mid(t) - mid(t) % 2 + 1)):
        yield _concat(c, "ties", f"ratio-half-{parity}", [x, x[:, :3]], [(0.5, mid(t)), (1.0, mid(t))], 1, 1.0, yz,
                      note="x_scale / Y_scale = 1/2: odd differences on k + 1/2")
        yield _concat(c, "ties", f"ratio-quarter-{parity}", [x[:3], x], [(1.0, 0), (0.25, mid(t))], 0, 1.0, yz)


def _cc_zero_points(c: Combo) -> Iterator[Draft]:
    t = c.t("T8")
    lo, hi = lo_hi(t)
    x = every_code(t, (16, 16))
    for xz in (lo, hi):
        for yz in (lo, mid(t), hi):
            yield _concat(c, "zero-points", f"x-{xz}-y-{yz}", [x, x[:, :5]], [(0.25, xz), (0.5, mid(t))], 1, 0.5, yz,
                          note="zero points at the type's ends")


def _cc_saturation(c: Combo) -> Iterator[Draft]:
    t = c.t("T8")
    x = every_code(t, (16, 16))
    for yz, name in ((lo_hi(t)[0], "zero-point-lo"), (lo_hi(t)[1], "zero-point-hi")):
        yield _concat(c, "saturation", name, [x, x[:, :2]], [(1.0, mid(t)), (0.5, mid(t))], 1, 0.25, yz,
                      note="an input whose range Y's parameters cannot hold")


def _cc_random(c: Combo) -> Iterator[Draft]:
    t = c.t("T8")
    for i in range(30):
        rng = c.rng("random", str(i))
        rank = int(rng.integers(1, 4))
        axis = int(rng.integers(-rank, rank))
        base = [int(v) for v in rng.integers(1, 4, rank)]
        n = int(rng.integers(1, 4))
        xs = []
        for _ in range(n):
            s = list(base)
            s[axis] = int(rng.integers(1, 4))
            xs.append(codes(t, s, rng))
        params = [(float(f32(rng.uniform(0.01, 0.2))), int(codes(t, (), rng))) for _ in range(n)]
        if rng.integers(3) == 0:
            params[0] = (0.1, mid(t))
        yield _concat(c, "random", f"draw-{i}", xs, params, axis, 0.1, mid(t), note="a seeded draw")


CONCAT: dict[str, Family] = {
    "basic": _cc_basic, "attributes": _cc_attributes, "ties": _cc_ties, "zero-points": _cc_zero_points,
    "saturation": _cc_saturation, "random": _cc_random,
}

__all__ = ["CONCAT", "ELEMENTWISE", "LEAKY_ONLY", "POOLS", "SOFTMAX"]


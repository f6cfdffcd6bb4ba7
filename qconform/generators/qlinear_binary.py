"""Cases of QLinearAdd, QLinearMul (qconform/docs/semantics.md#ms-qlinear-add, #ms-qlinear-mul) and QGemm
(#ms-qgemm): the families reach the requantisation the text writes as a formula.

- ``basic``: ordinary values and calibrated scales; zero points left out ("Default value is 0");
- ``zero-points``: every zero point at both ends of its type, every code of A against every code of B;
- ``ties``: power-of-two scale ratios placing results on k + 1/2 over the whole range, odd and even
  output zero points (the rounding the text does not state is QuantizeLinear's, ties to even);
- ``saturation``: results far beyond both ends of the output type;
- ``broadcast`` (Add, Mul): "with Numpy-style broadcasting support" — scalars, 1-element tensors,
  unequal ranks, both operands broadcast;
- ``readings``: scales whose float32 arithmetic moves results off exact ties (where readings part);
- ``attributes`` (QGemm): transA, transB, alpha, and C in each shape "unidirectional broadcastable
  to (M, N)"; ``per-channel`` (QGemm): b's scale and zero point per column; a float32 Y (y_scale and
  y_zero_point absent, "The output is full precision(float32)") in every family but ties and saturation;
- ``random``: seeded draws, scales as a quantizer calibrates them.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np

from qconform.case import Draft
from qconform.declarations.contrib_qlinear import QLINEAR_ADD
from qconform.generators.qlinear_common import Combo, codes, every_code, f32, lo_hi, mid, zp

Family = Callable[[Combo], Iterator[Draft]]


# -- QLinearAdd, QLinearMul -----------------------------------------------------------------------
def _bin(c: Combo, a, b, scales, zps=(None, None, None)) -> dict[str, Any]:
    t = c.t("T")
    v: dict[str, Any] = {"A": np.asarray(a).astype(t.dtype), "B": np.asarray(b).astype(t.dtype),
                         "A_scale": f32(scales[0]), "B_scale": f32(scales[1]), "C_scale": f32(scales[2])}
    for name, z in zip(("A_zero_point", "B_zero_point", "C_zero_point"), zps):
        if z is not None:
            v[name] = zp(t, z)
    return v


def _is_add(c: Combo) -> bool:
    return c.op == QLINEAR_ADD.op


def _bin_basic(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    rng = c.rng("basic", "ordinary")
    m = mid(t)
    sc = (0.02, 0.03, 0.05) if _is_add(c) else (0.02, 0.03, 0.25)
    yield c.draft("basic", "ordinary", _bin(c, codes(t, (2, 3), rng), codes(t, (2, 3), rng), sc, (m, m + 7, m - 5)))
    yield c.draft("basic", "no-zero-points", _bin(c, codes(t, (2, 4), rng), codes(t, (2, 4), rng), sc),
                  note="zero points left out: 'Default value is 0 if it's not specified'")
    yield c.draft("basic", "scalar-operand", _bin(c, codes(t, (3, 4), rng), codes(t, (), rng), sc, (m, m, m)))


def _bin_zero_points(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    lo, hi = lo_hi(t)
    a, b = every_code(t), every_code(t)[::-1].copy()
    sc = (1 / 8, 1 / 16, 1 / 4) if _is_add(c) else (1 / 16, 1 / 16, 1.0)
    for za in (lo, hi):
        for zb in (lo, hi):
            for zc, zn in ((lo, "lo"), (mid(t), "mid"), (hi, "hi")):
                name = f"a-{'lo' if za == lo else 'hi'}-b-{'lo' if zb == lo else 'hi'}-c-{zn}"
                yield c.draft("zero-points", name, _bin(c, a, b, sc, (za, zb, zc)), note="zero points at the type's ends")


def _small_differences(c: Combo) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Codes 15 below to 16 above a zero point against codes 7 below to 8 above another, every pair
    (512 elements): products and sums small enough that no result saturates."""
    t = c.t("T")
    za, zb = mid(t), mid(t) + 3
    da, db = np.meshgrid(np.arange(-15, 17), np.arange(-7, 9), indexing="ij")
    return (za + da).ravel(), (zb + db).ravel(), za, zb


def _bin_ties(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    if _is_add(c):
        a, b, za, zb = every_code(t), np.roll(every_code(t), 37), mid(t), mid(t) + 3
        grid = [(1, 1, 2), (0.5, 0.25, 0.5), (2, 1, 4)]
    else:  # the products of small differences: results on k + 1/2 without saturating
        a, b, za, zb = _small_differences(c)
        grid = [(1, 1, 2), (0.5, 0.5, 0.5), (0.25, 1, 0.5), (0.5, 0.5, 1)]
    for i, sc in enumerate(grid):
        for parity, zc in (("even", mid(t) - (mid(t) % 2)), ("odd", mid(t) - (mid(t) % 2) + 1)):
            yield c.draft("ties", f"ratio-{i}-{parity}-zero-point", _bin(c, a, b, sc, (za, zb, zc)),
                          note=f"scales {sc}: exact results on k + 1/2, rounded half to even")


def _bin_saturation(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    lo, hi = lo_hi(t)
    a, b = every_code(t), np.roll(every_code(t), 100)
    sc = (0.5, 0.5, 0.125) if _is_add(c) else (0.5, 0.5, 2.0)
    for zc, name in ((lo, "zero-point-lo"), (hi, "zero-point-hi"), (mid(t), "zero-point-mid")):
        yield c.draft("saturation", name, _bin(c, a, b, sc, (mid(t), mid(t), zc)), note="results beyond both ends")
    yield c.draft("saturation", "large-scales", _bin(c, a, b, (3.0e4, 1.5e4, 1e-3), (lo, hi, mid(t))))


_SHAPES = [((), (5,)), ((1,), (2, 3)), ((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((2, 1, 3), (4, 1)), ((4,), (2, 1)),
           ((2, 3), (2, 3)), ((1, 1, 1), (2, 2, 2)), ((6,), ()), ((2, 1, 2, 1), (3, 1, 2))]


def _bin_broadcast(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    for sa, sb in _SHAPES:
        rng = c.rng("broadcast", f"{sa}-{sb}")
        sc = (0.03, 0.07, 0.09) if _is_add(c) else (0.03, 0.07, 0.5)
        name = "x".join(map(str, sa)) or "scalar"
        name += "-" + ("x".join(map(str, sb)) or "scalar")
        yield c.draft("broadcast", name, _bin(c, codes(t, sa, rng), codes(t, sb, rng), sc,
                                              (mid(t) - 3, mid(t) + 5, mid(t))), note="numpy broadcasting")


def _bin_readings(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    if _is_add(c):
        a, b, za, zb = every_code(t), np.roll(every_code(t), 11), mid(t), mid(t)
        grid = [(0.1, 0.2, 0.3), (1 / 3, 1 / 3, 2 / 3), (0.7, 0.3, 1.1), (0.01, 0.03, 0.02)]
    else:  # small products, multipliers whose float32 value is off the exact one (1/6, 1, 1/1000)
        a, b, za, zb = _small_differences(c)
        grid = [(1, 0.5, 3), (0.1, 0.3, 0.03), (0.7, 0.3, 0.21)]
    for i, sc in enumerate(grid):
        yield c.draft("readings", f"scales-{i}", _bin(c, a, b, sc, (za, zb, mid(t))),
                      note=f"scales {sc}: float32 arithmetic may move exact ties")


def _bin_random(c: Combo) -> Iterator[Draft]:
    t = c.t("T")
    for i in range(20):
        rng = c.rng("random", str(i))
        sa, sb = _SHAPES[int(rng.integers(len(_SHAPES)))]
        if rng.integers(2):
            sa, sb = sb, sa
        a_s, b_s = (float(f32(rng.uniform(0.001, 0.1))) for _ in range(2))
        c_s = (a_s + b_s) * rng.uniform(0.5, 1.5) if _is_add(c) else a_s * b_s * 255 * rng.uniform(0.3, 1.5)
        zps = tuple(int(v) for v in codes(t, (3,), rng))
        yield c.draft("random", f"draw-{i}", _bin(c, codes(t, sa, rng), codes(t, sb, rng), (a_s, b_s, c_s), zps),
                      note="a seeded draw")


BINARY: dict[str, Family] = {
    "basic": _bin_basic, "zero-points": _bin_zero_points, "ties": _bin_ties, "saturation": _bin_saturation,
    "broadcast": _bin_broadcast, "readings": _bin_readings, "random": _bin_random,
}


# -- QGemm --------------------------------------------------------------------------------------------
def gemm_full(c: Combo) -> bool:
    """The combinations onnxruntime's quantization tool emits (U8U8, U8S8, S8S8: QuantType), Y in A's
    type or float32: every family; the schema's other combinations have ``basic``."""
    ta, tb, ty = c.types["TA"], c.types["TB"], c.types["TY"]
    return not (ta == "int8" and tb == "uint8") and ty in (ta, "float32")


def gemm_valid(c: Combo) -> bool:
    """y_zero_point's type is Y's where Y is quantized; with a float Y it is absent (TYZ as A's)."""
    ty, tyz = c.types["TY"], c.types["TYZ"]
    return tyz == ty if ty != "float32" else tyz == c.types["TA"]


def _quantized(c: Combo) -> bool:
    return c.types["TY"] != "float32"


def _gemm(c: Combo, a, b, a_zp, b_zp, a_s=0.5, b_s: Any = 0.25, y_s: float | None = None, y_zp: int | None = None,
          bias=None) -> dict[str, Any]:
    ta, tb = c.t("TA"), c.t("TB")
    b_s = np.asarray(b_s, np.float32)
    b_zp = np.asarray(b_zp)
    if b_s.ndim == 1 and b_zp.ndim == 0:
        b_zp = np.full(b_s.shape, b_zp)
    elif b_zp.ndim == 1 and b_s.ndim == 0:
        b_s = np.full(b_zp.shape, b_s, np.float32)
    v: dict[str, Any] = {"A": np.asarray(a).astype(ta.dtype), "a_scale": f32(a_s), "a_zero_point": zp(ta, a_zp),
                         "B": np.asarray(b).astype(tb.dtype), "b_scale": b_s, "b_zero_point": b_zp.astype(tb.dtype),
                         "C": None if bias is None else np.asarray(bias, np.int32)}
    if _quantized(c):
        ty = c.t("TY")
        v["y_scale"] = f32(y_s if y_s is not None else 8.0)
        v["y_zero_point"] = zp(ty, mid(ty) if y_zp is None else y_zp)
    return v


def _ordinary_gemm(c: Combo, family: str, name: str, m=3, k=5, n=4, attrs=None, bias_shape=None, note="") -> Draft:
    rng = c.rng(family, name)
    attrs = dict(attrs or {})
    ta, tb = c.t("TA"), c.t("TB")
    a = codes(ta, (k, m) if attrs.get("transA") else (m, k), rng)
    b = codes(tb, (n, k) if attrs.get("transB") else (k, n), rng)
    bias = None if bias_shape is None else rng.integers(-3000, 3000, bias_shape)
    v = _gemm(c, a, b, int(codes(ta, (), rng)), int(codes(tb, (), rng)), 0.5, 0.25, 8.0 * k, None, bias)
    return c.draft(family, name, v, attrs, note=note)


def _gemm_basic(c: Combo) -> Iterator[Draft]:
    yield _ordinary_gemm(c, "basic", "ordinary", note="ordinary values, power-of-two scales")


_TRANS_ALPHA = [(0, 0, 1.0), (1, 0, 1.0), (0, 1, 1.0), (1, 1, 1.0), (0, 0, 0.5), (0, 1, 2.0), (1, 0, 3.0),
                (1, 1, 0.25), (0, 0, 1.5), (0, 1, 0.75)]
_C_SHAPES = [(), (1,), (4,), (1, 4), (3, 1), (3, 4)]


def _gemm_attributes(c: Combo) -> Iterator[Draft]:
    for ta, tb, alpha in _TRANS_ALPHA:
        attrs = {"transA": ta, "transB": tb, "alpha": alpha}
        yield _ordinary_gemm(c, "attributes", f"transA-{ta}-transB-{tb}-alpha-{alpha:g}", attrs=attrs,
                             note="transA, transB, alpha (alpha·a_scale a float32)")
    for shape in _C_SHAPES:
        name = "C-" + ("x".join(map(str, shape)) or "scalar")
        yield _ordinary_gemm(c, "attributes", name, bias_shape=shape, note="C unidirectionally broadcast to (M, N)")


def _gemm_per_channel(c: Combo) -> Iterator[Draft]:
    tb = c.t("TB")
    lo, hi = lo_hi(tb)
    for i, (scales, zps) in enumerate([([0.25, 0.5, 1.0, 2.0], [0, 0, 0, 0]), ([0.125, 0.25, 0.5, 0.25], [lo, hi, 0, 1]),
                                       ([0.013, 0.021, 0.007, 0.033], [1, -1 if lo < 0 else 3, 5, 7])]):
        rng = c.rng("per-channel", str(i))
        a, b = codes(c.t("TA"), (3, 6), rng), codes(tb, (6, 4), rng)
        v = _gemm(c, a, b, int(codes(c.t("TA"), (), rng)), np.asarray(zps), 0.5, scales, 192.0 * max(scales))
        yield c.draft("per-channel", f"columns-{i}", v, note="b's scale and zero point per column")


def _gemm_ties(c: Combo) -> Iterator[Draft]:
    ta, tb, ty = c.t("TA"), c.t("TB"), c.t("TY")
    a = every_code(ta, (16, 16)).reshape(256, 1)
    b = np.asarray([[1]], dtype=np.int64)
    for parity, yz in (("even", mid(ty) - mid(ty) % 2), ("odd", mid(ty) - mid(ty) % 2 + 1)):
        v = _gemm(c, a, b, 0, 0, 1.0, 1.0, 2.0, yz)
        yield c.draft("ties", f"half-{parity}-zero-point", v, note="multiplier 1/2 over every code of A: ties to even")


def _gemm_saturation(c: Combo) -> Iterator[Draft]:
    ta, tb, ty = c.t("TA"), c.t("TB"), c.t("TY")
    lo, hi = lo_hi(ty)
    a = every_code(ta).reshape(256, 1)
    for yz, name in ((lo, "zero-point-lo"), (hi, "zero-point-hi")):
        v = _gemm(c, a, np.asarray([[3]]), mid(ta), 0, 1.0, 1.0, 1.0, yz)
        yield c.draft("saturation", name, v, note="results beyond both ends of Y")


def _gemm_zero_points(c: Combo) -> Iterator[Draft]:
    ta, tb = c.t("TA"), c.t("TB")
    for za in lo_hi(ta):
        for zb in lo_hi(tb):
            rng = c.rng("zero-points", f"{za}-{zb}")
            v = _gemm(c, codes(ta, (4, 8), rng), codes(tb, (8, 3), rng), za, zb, 0.5, 0.25, 256.0)
            yield c.draft("zero-points", f"a-{za}-b-{zb}", v, note="zero points at the types' ends")


def _gemm_readings(c: Combo) -> Iterator[Draft]:
    ta = c.t("TA")
    a = every_code(ta).reshape(256, 1)
    v = _gemm(c, a, np.asarray([[3]]), mid(ta), 0, 1.0, 0.5, 3.0, None)
    yield c.draft("readings", "thirds", v, note="multiplier 1/6 (1·1/2/3), acc = 3j: float32's 1/6 moves the ties")


def _gemm_random(c: Combo) -> Iterator[Draft]:
    ta, tb = c.t("TA"), c.t("TB")
    for i in range(6):
        rng = c.rng("random", str(i))
        m, k, n = (int(v) for v in rng.integers(1, 9, 3))
        a_s, b_s = float(f32(rng.uniform(0.002, 0.05))), float(f32(rng.uniform(0.001, 0.02)))
        y_s = a_s * b_s * k * 128 * 128 / 127 * rng.uniform(0.5, 1.5)  # |acc| ~ k·128²: results within range
        bias = rng.integers(-2000, 2000, (n,)) if rng.integers(2) else None
        v = _gemm(c, codes(ta, (m, k), rng), codes(tb, (k, n), rng), int(codes(ta, (), rng)), int(codes(tb, (), rng)),
                  a_s, b_s, y_s, None, bias)
        yield c.draft("random", f"draw-{i}", v, note="a seeded draw, calibrated scales")


GEMM: dict[str, Family] = {
    "basic": _gemm_basic, "attributes": _gemm_attributes, "per-channel": _gemm_per_channel, "ties": _gemm_ties,
    "saturation": _gemm_saturation, "zero-points": _gemm_zero_points, "readings": _gemm_readings,
    "random": _gemm_random,
}
#: QGemm's families that need a quantized Y.
GEMM_QUANTIZED_ONLY = ("ties", "saturation")

__all__ = ["BINARY", "GEMM", "GEMM_QUANTIZED_ONLY", "gemm_full", "gemm_valid"]

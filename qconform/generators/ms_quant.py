"""com.microsoft QuantizeLinear-1 / DequantizeLinear-1 families (qconform/docs/semantics.md#ms-quantize,
#ms-dequantize), on the type lists onnxruntime registers (qconform/schemas.py MS_SPECS):

- ``basic``: every type combination, per-tensor with and without a zero point; the seed page's
  (shared/seeds/002) two DequantizeLinear examples;
- ``ties``: QuantizeLinear quotients exactly k + 0.5 and one step either side, with a power-of-two
  scale and a scale whose reciprocal is inexact;
- ``saturation``: results at qmin-1 .. qmin+1 and qmax-1 .. qmax+1 after the zero point, zero points
  at both ends; DequantizeLinear differences at the extremes (float16 overflow included);
- ``per-axis``: the axis attribute on every axis of a rank-3 tensor, negative included;
- ``packing``: int4/uint4 with odd and even element counts, every value in every position.

Module contract (read by the coverage table): ``FAMILIES``, ``applies(spec, combo, family=None)``,
``generate(family=None)``."""
from __future__ import annotations

from typing import Callable, Iterator, Mapping

import numpy as np

from qconform.declarations import operators
from qconform import dtypes, schemas
from qconform.case import MS_DOMAIN, Draft
from qconform.dtypes import ElemType
from qconform.generators.common import draft
from qconform.oracle import floats
from qconform.schemas import OpSpec

OPS = operators.QDQ
FAMILIES = ("basic", "ties", "saturation", "per-axis", "packing")


def _roles(spec: OpSpec, combo: Mapping[str, str]) -> tuple[ElemType, ElemType, bool]:
    """(float side, quantized side, is QuantizeLinear)."""
    if spec.op == "QuantizeLinear":
        return dtypes.get(combo["T1"]), dtypes.get(combo["T2"]), True
    return dtypes.get(combo["T2"]), dtypes.get(combo["T1"]), False


_RULES: dict[str, Callable[[ElemType, ElemType, bool], bool]] = {
    "basic": lambda f, q, is_q: True,
    "ties": lambda f, q, is_q: is_q,
    "saturation": lambda f, q, is_q: True,
    "per-axis": lambda f, q, is_q: True,
    "packing": lambda f, q, is_q: q.packed,
}


def applies(spec: OpSpec, combo: dict[str, str], family: str | None = None) -> bool:
    if spec.domain != MS_DOMAIN or spec.op not in OPS:
        return False
    f, q, is_q = _roles(spec, combo)
    return any(_RULES[fam](f, q, is_q) for fam in (FAMILIES if family is None else (family,)))


def _representable(values: np.ndarray, t: ElemType) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    back = floats.decode(floats.encode(v, t, saturate=False), t)
    return back == v


def _mid(q: ElemType) -> int:
    lo, hi = q.qrange
    return (lo + hi + 1) // 2 if lo == 0 else 0


def _names(spec: OpSpec) -> tuple[str, str, str]:
    return tuple(f.name for f in spec.inputs)  # x, scale, zero point


def _case(spec, combo, family, name, x, s, zp, clause, note="", attrs=None, provenance="") -> Draft:
    xn, sn, zn = _names(spec)
    return draft(spec, combo, family, name, {xn: x, sn: s, zn: zp}, attrs=attrs, clause=clause, note=note,
                 provenance=provenance)


def _q_values(f: ElemType, q: ElemType, zp: int, s: float) -> np.ndarray:
    """Ordinary QuantizeLinear inputs: every k of an 8-bit range (a spread for 16 bits) at k, k + 0.25,
    k + 0.5 and k - 0.25, inside x's type."""
    lo, hi = q.qrange
    ks = np.arange(lo, hi + 1) if q.bits <= 8 else np.unique(np.r_[lo:lo + 8, -8:8, hi - 7:hi + 1, lo:hi:997])
    ks = ks - zp
    x = (ks[:, None] + np.array([0.0, 0.25, 0.5, -0.25])).ravel() * s
    return x[_representable(x, f)]


# --------------------------------------------------------------------------------------------
def _basic(spec, combo, f, q, is_q) -> Iterator[Draft]:
    clause = "ms-quantize" if is_q else "ms-dequantize"
    zp = _mid(q) if q.name != "int32" else 0
    if is_q:
        x = _q_values(f, q, zp, 2.0)
        yield _case(spec, combo, "basic", "per-tensor", x, 2.0, zp, clause, "ordinary values, scale 2")
        if q.name == "uint8":
            yield _case(spec, combo, "basic", "no-zero-point", x, 2.0, None, clause,
                        "zero point absent: uint8 with zero point 0")
        return
    lo, hi = q.qrange
    x = q.all_values() if q.bits <= 8 else np.array(sorted(v for v in {lo, lo + 1, -1, 0, 1, 2, 1000, hi - 1, hi}
                                                          if lo <= v <= hi))
    yield _case(spec, combo, "basic", "per-tensor", np.asarray(x, dtype=np.int64), 2.0, zp, clause,
                "every value (8 bits and less) or a spread, scale 2")
    yield _case(spec, combo, "basic", "no-zero-point", np.asarray(x, dtype=np.int64), 0.5, None, clause,
                "zero point absent: 0")
    if q.name == "uint8" and f.name == "float32":
        src = "shared/seeds/002 (com.microsoft DequantizeLinear-1 page)"
        yield _case(spec, combo, "basic", "seed-002-default", [0, 3, 128, 255], 2.0, 128, "ms-dequantize",
                    "expected [-256, -250, 0, 254]", provenance=src)
        x = [[[[3, 89], [34, 200], [74, 59]], [[5, 24], [24, 87], [32, 13]], [[245, 99], [4, 142], [121, 102]]]]
        yield _case(spec, combo, "basic", "seed-002-axis", x, [2.0, 4.0, 5.0], [84, 24, 196], "ms-dequantize",
                    "expected (x - zp) * scale along axis 1", attrs={"axis": 1}, provenance=src)


def _ties(spec, combo, f, q, is_q) -> Iterator[Draft]:
    lo, hi = q.qrange
    zp = _mid(q)
    ks = np.arange(lo, hi + 1) if q.bits <= 8 else np.unique(np.r_[lo:lo + 16, -16:16, hi - 15:hi + 1, lo:hi:509])
    for s_name, s in (("pow2-scale", 2.0), ("inexact-reciprocal", 6.0)):
        ties = (ks - zp + 0.5) * s
        ties = ties[_representable(ties, f)]
        neighbours = []
        if f.name == "float32":
            t32 = ties.astype(np.float32)
            neighbours = np.r_[np.nextafter(t32, np.float32(-np.inf)), np.nextafter(t32, np.float32(np.inf))]
        else:
            t16 = ties.astype(np.float16)
            neighbours = np.r_[np.nextafter(t16, np.float16(-np.inf)), np.nextafter(t16, np.float16(np.inf))]
        x = np.r_[ties, np.asarray(neighbours, dtype=np.float64)]
        yield _case(spec, combo, "ties", s_name, x, s, zp, "ms-quantize",
                    f"x / {s:g} = k + 0.5 for k over the output range, and one {f.name} step either side")
    if f.name == "float16":
        yield _case(spec, combo, "ties", "quotient-precision", _half_quotients(lo - zp, hi - zp, 2.4296875),
                    2.4296875, zp, "ms-quantize", "x where the float16 quotient rounds onto another integer "
                    "than the float32 one (readings quotient-in-float16 / quotient-in-float32)")


def _half_quotients(qlo: int, qhi: int, s: float, n: int = 16) -> np.ndarray:
    """float16 x whose quotient by s rounds to another integer in float16 than in float32."""
    x = floats.all_finite_values(dtypes.get("float16")).astype(np.float16)
    x = x[(x.astype(np.float64) >= qlo * s) & (x.astype(np.float64) <= qhi * s)]
    q16 = np.rint((x / np.float16(s)).astype(np.float64))  # numpy rounds a float16 quotient once (via float32)
    q32 = np.rint(x.astype(np.float32) / np.float32(s))
    hits = x[q16 != q32].astype(np.float64)
    return hits[:: max(1, len(hits) // n)][:n]


def _saturation(spec, combo, f, q, is_q) -> Iterator[Draft]:
    lo, hi = q.qrange
    clause = "ms-quantize" if is_q else "ms-dequantize"
    if is_q:
        for zp_name, zp in (("zero-point-qmin", lo), ("zero-point-qmax", hi)):
            ys = np.array([lo - 1000, lo - 2, lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, hi + 2, hi + 1000],
                          dtype=np.float64)
            x = (ys - zp) * 1.0
            x = x[_representable(x, f)]
            big = f.float_format.max_finite
            x = np.r_[x, big, -big]
            yield _case(spec, combo, "saturation", zp_name, x, 1.0, zp, clause,
                        "results around qmin and qmax after the zero point, and +-max finite x")
        return
    if q.name == "int32":  # no zero point but 0 (qconform/docs/semantics.md#ms-dequantize)
        x = np.array([lo, lo + 1, -1, 0, 1, hi - 1, hi])
        yield _case(spec, combo, "saturation", "extremes", x, 1.0, 0, clause,
                    "int32 extremes (float16: beyond 65504 overflows to Inf)")
        return
    for zp_name, zp in (("zero-point-qmin", lo), ("zero-point-qmax", hi)):
        x = np.array([lo, lo + 1, hi - 1, hi])
        yield _case(spec, combo, "saturation", zp_name, x, 1.0, zp, clause,
                    "x - zp at both extremes (float16: 65535 overflows to Inf)")


def _per_axis(spec, combo, f, q, is_q) -> Iterator[Draft]:
    clause = "ms-quantize" if is_q else "ms-dequantize"
    lo, hi = q.qrange
    shape = (2, 3, 4)
    rng = np.random.default_rng(len(combo) * 7919 + q.bits + f.bits)
    for axis in (0, 1, 2, -1, -3):
        n = shape[axis]
        scales = [2.0, 0.5, 4.0, 1.0][:n]
        zps = [int(np.clip(_mid(q) + d, lo, hi)) for d in (0, 1, -1, 2)][:n] if q.name != "int32" else [0] * n
        if is_q:
            base = rng.integers(max(lo, -100), min(hi, 100) + 1, size=shape).astype(np.float64)
            sc = np.reshape(scales, [n if i == axis % 3 else 1 for i in range(3)])
            x = (base + rng.choice([0.0, 0.5, 0.25], size=shape)) * sc
        else:
            x = rng.integers(max(lo, -1000), min(hi, 1000) + 1, size=shape)
        yield _case(spec, combo, "per-axis", f"axis-{axis}", x, scales, zps, clause,
                    f"per-axis over axis {axis} of a rank-3 tensor", attrs={"axis": axis})


def _packing(spec, combo, f, q, is_q) -> Iterator[Draft]:
    clause = "ms-quantize" if is_q else "ms-dequantize"
    values = q.all_values().astype(np.int64)
    zp = _mid(q)
    for name, shape in (("odd-count", (15,)), ("even-count", (16,)), ("rank-0", ()), ("odd-last-dim", (3, 5)),
                        ("rank-3", (2, 2, 3))):
        n = int(np.prod(shape))
        qv = np.resize(np.roll(values, n % 7), n).reshape(shape)
        if is_q:
            yield _case(spec, combo, "packing", name, (qv - zp) * 2.0, 2.0, zp, clause,
                        f"{q.name} results of shape {shape}: every value, shifted per case")
        else:
            yield _case(spec, combo, "packing", name, qv, 2.0, zp, clause, f"{q.name} x of shape {shape}")


_FAMILY_GEN = {"basic": _basic, "ties": _ties, "saturation": _saturation, "per-axis": _per_axis,
               "packing": _packing}


def generate(family: str | None = None) -> Iterator[Draft]:
    for fam in (FAMILIES if family is None else (family,)):
        for op in OPS:
            spec = schemas.get(op, 1, MS_DOMAIN)
            for combo in spec.combinations():
                f, q, is_q = _roles(spec, combo)
                if _RULES[fam](f, q, is_q):
                    yield from _FAMILY_GEN[fam](spec, combo, f, q, is_q)


def entries() -> dict[str, Callable[[], Iterator[Draft]]]:
    """One ``generators.FAMILIES`` entry per family, keyed "<module>:<family>" (family names such as
    "ties" are shared with the QuantizeLinear/DequantizeLinear modules)."""
    return {f"{__name__.rsplit('.', 1)[-1]}:{fam}": (lambda fam=fam: generate(fam)) for fam in FAMILIES}

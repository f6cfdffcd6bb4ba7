"""Family "codec-edges": QuantizeLinear to every float8, float4 and float6 type at the edges of the
encoder, where bit-field encoders go wrong (qconform/docs/semantics.md#q-float8, #q-float4-float6,
#q-float8-fnuz-inf):

- far underflow: quotients ±{1, 1.5, 2 - 2^-23} * 2^-k for every k from two binades below half the
  smallest subnormal down to 2^-149, where an encoder's unbounded subnormal shift wraps (a 64-bit
  shift by 64 or more is taken mod 64: ROCm/rocm-systems#10591) and returns a non-zero code;
- the subnormal range: every subnormal quantum k plus the fractions 1/8 .. 7/8 of a quantum (which
  separate rounding at the wrong bit, twice, or without the sticky bits), and both float32
  neighbours of every subnormal midpoint (a sticky bit in the lowest place);
- the largest finite value: max itself and max plus 1/4, just under 1/2, 1/2, just over 1/2, 1 and 2
  of its ulp (round down to max, the tie, overflow), and the float32 neighbour above max;
- ±Inf and ±NaN.

Each at a power-of-two scale (2^20, the quotient exact) and at an inexact scale (3, the quotient
rounded), under saturate=1 and saturate=0 (float4/float6 ignore saturate: saturate=1 only). Only
float32 data: float16 data cannot reach the far underflow at these scales, and float32 covers every
output type of every version. The float32 data-and-scale combinations get every variant; the other
scale types one, rotated. Values x's type cannot hold are left out."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from qconform import dtypes
from qconform.case import Draft
from qconform.dtypes import ElemType
from qconform.generators import qdq
from qconform.oracle import floats
from qconform.schemas import OpSpec

FAMILY = "codec-edges"
_F32 = dtypes.get("float32")


def _minifloat(t: ElemType) -> bool:
    f = t.float_format
    return f is not None and f.width <= 8 and f.nan_style != "e8m0"


def applies(spec: OpSpec, combo: dict[str, str]) -> bool:
    if not (qdq.is_qdq(spec) and spec.op == "QuantizeLinear"):
        return False
    c = qdq.Combo(spec, combo)
    return c.x.name == "float32" and _minifloat(c.y)


def _f32(v) -> np.ndarray:
    return floats.round_to_format(np.asarray(v, dtype=np.float64), _F32)


def quotients(y: ElemType) -> np.ndarray:
    """The quotients x / scale the family aims at for output type y (both signs, finite)."""
    f = y.float_format
    u = 2.0 ** (f.emin - f.mbits)  # the subnormal quantum
    top = 149
    ks = np.arange(-(f.emin - f.mbits) + 2, top + 1)
    far = np.concatenate([m * np.ldexp(1.0, -ks) for m in (1.0, 1.5, 2.0 - 2.0**-23)])
    k = np.arange(0, 1 << f.mbits, dtype=np.float64)
    fracs = np.concatenate([(k + fr) * u for fr in (0.125, 0.25, 0.375, 0.625, 0.75, 0.875)])
    mids = _f32((k + 0.5) * u)
    sticky = np.concatenate([np.nextafter(mids.astype(np.float32), np.float32(np.inf)),
                             np.nextafter(mids.astype(np.float32), np.float32(0))]).astype(np.float64)
    ulp = 2.0 ** (f.emax - f.mbits)
    near_max = f.max_finite + ulp * np.array([0, 0.25, 0.5 - 2.0**-10, 0.5, 0.5 + 2.0**-10, 1, 2])
    above = np.nextafter(np.float32(f.max_finite), np.float32(np.inf)).astype(np.float64)
    pos = np.concatenate([far, fracs, k * u, sticky, near_max, [above]])
    pos = _f32(pos)
    return np.concatenate([pos, -pos])


def _xs(c: qdq.Combo, q: np.ndarray, s: float) -> np.ndarray:
    """x values of x's type whose quotient by s is q (pow2 s: exactly; else the nearest x)."""
    with np.errstate(all="ignore"):
        x = floats.round_to_format(q * s, c.x)
    lo, hi = qdq.value_range(c.x)
    ok = np.isfinite(x) & (x >= lo) & (x <= hi) & ((x != 0) | (q == 0))
    specials = [np.inf, -np.inf, np.nan, -np.nan] if c.x.float_format.has_inf else [np.nan]
    return np.concatenate([qdq.keep(x[ok], c.x), specials])


def _variants(c: qdq.Combo) -> list[tuple[str, float, int]]:
    lo, hi = qdq.pow2_scales(c.s)
    out = [("pow2-scale", float(np.clip(2.0**20, lo, hi)))]
    if not qdq.exponent_only(c.s):
        out.append(("inexact-scale", 3.0))
    sats = (1, 0) if c.y.float_format.nan_style != "none" else (1,)
    return [(name, s, sat) for name, s in out for sat in sats]


def generate() -> Iterator[Draft]:
    for c in qdq.combos(quantize=True):
        if not applies(c.spec, c.types):
            continue
        q = quotients(c.y)
        clause = "q-float8" if c.y.name in dtypes.FLOAT8 else "q-float4-float6"
        variants = _variants(c)
        for name, s, sat in qdq.choose(variants, c, FAMILY, len(variants)):
            xs = _xs(c, q, s)
            yield c.draft(FAMILY, f"{name}-saturate-{sat}", xs, s, attrs={"saturate": sat}, clause=clause,
                          note=f"far underflow, subnormal fractions, sticky bits, the largest finite value, "
                          f"±Inf and NaN of {c.y.name}, x / {s}")

"""DynamicQuantizeLinear-11 families (qconform/docs/semantics.md#dql-formula .. #dql-ties).

One module for the op's families, each a named group of cases placed where implementations part:

- ``zero-point-ties``: min(x)/scale lands exactly on k + 0.5 (so round-half-away and truncation
  differ from ties-to-even), and one float32 step either side of the tie;
- ``ties``: x / scale exactly k + 0.5 over the whole output range, with power-of-two scales, an exact
  scale whose reciprocal is inexact (x * (1/scale) misses the tie), and inexact scales (x near a tie,
  where the float32 and the exact quotient may part);
- ``ranges``: ranges that include zero, lie entirely above or below it, single elements, and ONNX's
  own node-test inputs;
- ``constant``: constant tensors (±0, positive, negative);
- ``dynamic-range``: ranges near the float32 limits (max − min overflowing to Inf), tiny elements
  beside huge ones, and inputs where the float32 order of operations gives another result than
  float64 arithmetic (found by a seeded search);
- ``subnormals``: subnormal inputs, scales that are subnormal or underflow to 0;
- ``shapes``: empty tensors, rank 0 to 4;
- ``specials``: NaN and ±Inf.

Module contract (read by the coverage table): ``FAMILIES``, ``applies(spec, combo, family=None)``,
``generate(family=None)``."""
from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from qconform import schemas
from qconform.case import ONNX_DOMAIN, Draft
from qconform.generators.common import draft
from qconform.schemas import OpSpec

OP = "DynamicQuantizeLinear"
FAMILIES = ("zero-point-ties", "ties", "ranges", "constant", "dynamic-range", "subnormals", "shapes", "specials")

F32 = np.float32
TINY = float(np.finfo(np.float32).smallest_subnormal)
FMAX = float(np.finfo(np.float32).max)


def applies(spec: OpSpec, combo: dict[str, str], family: str | None = None) -> bool:
    return spec.domain == ONNX_DOMAIN and spec.op == OP and (family is None or family in FAMILIES)


def _f32(v) -> list[float]:
    """Values as float32 numbers (every case input is exactly representable)."""
    return np.asarray(v, dtype=np.float32).astype(np.float64).tolist()


def _up(v: float) -> float:
    return float(np.nextafter(F32(v), F32(np.inf)))


def _down(v: float) -> float:
    return float(np.nextafter(F32(v), F32(-np.inf)))


# --------------------------------------------------------------------------------------------
def _zero_point_ties() -> Iterator[tuple[str, list, str, str]]:
    """min = -(k + 0.5) s and max = (254.5 - k) s: range 255 s, scale s exactly, zp = k + 0.5."""
    for s_name, s in (("scale-1", 1.0), ("scale-0.1875", 0.1875), ("scale-2^-20", 2.0 ** -20)):
        for k in (0, 1, 2, 3, 126, 127, 128, 253, 254):
            lo, hi = -(k + 0.5) * s, (254.5 - k) * s
            mid = _f32([lo, hi, 0.0, lo / 2, hi / 3, s])
            yield (f"{s_name}/k-{k:03d}", mid, "dql-ties", f"zero point {k}.5 exactly: ties to {k + (k % 2)}")
            if s_name == "scale-1" and k in (0, 1, 2, 127, 254):
                for side, lo2 in (("below", _down(lo)), ("above", _up(lo))):
                    yield (f"{s_name}/k-{k:03d}-{side}", _f32([lo2, hi, 0.0]), "dql-ties",
                           f"min one float32 step {side} the zero-point tie at {k}.5")


def _ties() -> Iterator[tuple[str, list, str, str]]:
    # scale 1: min -2 (zp 2), max 253; x = k + 0.5 for every k of the output range, and neighbours
    ks = np.arange(-3, 254)
    yield ("scale-1/every-k", _f32([-2.0, 253.0, *(ks + 0.5)]), "dql-ties", "x / scale = k + 0.5, zp = 2")
    yield ("scale-1/neighbours", _f32([-2.0, 253.0, *[f(k + 0.5) for k in ks[::8] for f in (_down, _up)]]),
           "dql-ties", "one float32 step either side of k + 0.5")
    # scale 2^-8 exactly: min -3 * 2^-8 (zp 3), max 252 * 2^-8 (range 255 * 2^-8)
    s = 2.0 ** -8
    yield ("scale-2^-8/every-k", _f32([-3 * s, 252 * s, *((np.arange(-4, 253) + 0.5) * s)]), "dql-ties",
           "x / scale = k + 0.5 with scale 2^-8, zp = 3")
    # scale 15 * 2^-6 exactly (range 255 * scale, zp 3): x / scale is exactly k + 0.5, so every reading of
    # the division gives the tie, while x * fl32(1 / scale) misses it for 106 of these 255 k
    s = 15 * 2.0 ** -6
    yield ("scale-15x2^-6/every-k", _f32([-3 * s, 252 * s, *((np.arange(-3, 252) + 0.5) * s)]), "dql-ties",
           "x / scale = k + 0.5 exactly with an inexact reciprocal, zp = 3")
    # inexact scales: fl32(range / 255) not a power of two; x at fl32((k + 0.5) * scale) and neighbours
    for name, lo, hi in (("range-10", -4.0, 6.0), ("range-1", -0.3, 0.7), ("range-1000", -100.0, 900.0)):
        scale = float(F32(F32(hi) - F32(lo)) / F32(255))
        xs = [float(F32((k + 0.5) * scale)) for k in range(-30, 226, 3)]
        xs += [f(x) for x in xs[::4] for f in (_down, _up)]
        yield (f"inexact-{name}", _f32([lo, hi, *xs]), "dql-ties",
               f"scale fl32({hi - lo:g}/255) = {scale!r}: x near (k + 0.5) * scale, where x/s and x*(1/s) part")


def _ranges() -> Iterator[tuple[str, list, str, str]]:
    yield ("mixed", _f32([-1.0, 0.5, 2.0, -0.25, 3.0, 0.0]), "dql-formula", "range includes zero")
    yield ("positive-without-zero", _f32([0.5, 1.0, 2.5, 7.0]), "dql-formula", "min(x) > 0: min adjusted to 0")
    yield ("negative-without-zero", _f32([-0.5, -1.0, -2.5, -7.0]), "dql-formula", "max(x) < 0: max adjusted to 0")
    yield ("positive-with-zero", _f32([0.0, 1.0, 2.5, 7.0]), "dql-formula", "min(x) = 0")
    yield ("negative-with-zero", _f32([0.0, -1.0, -2.5, -7.0]), "dql-formula", "max(x) = 0")
    yield ("single-positive", _f32([3.7]), "dql-formula", "one element")
    yield ("single-negative", _f32([-3.7]), "dql-formula", "one element")
    yield ("asymmetric", _f32([-1e-3, 250.0, 17.3, -0.0]), "dql-formula", "zero point rounds to 0 from 0.001")
    # ONNX's own node tests (onnx/backend/test/case/node/dynamicquantizelinear.py)
    yield ("onnx-node-test_dynamicquantizelinear", _f32([0, 2, -3, -2.5, 1.34, 0.5]), "dql-formula",
           "test_dynamicquantizelinear")
    yield ("onnx-node-test_dynamicquantizelinear_max_adjusted", _f32([-1.0, -2.1, -1.3, -2.5, -3.34, -4.0]),
           "dql-formula", "test_dynamicquantizelinear_max_adjusted")
    yield ("onnx-node-test_dynamicquantizelinear_min_adjusted",
           np.asarray([[1, 2.1, 1.3, 2.5], [3.34, 4.0, 1.5, 2.6], [3.9, 4.0, 3.0, 2.345]], np.float32)
           .astype(np.float64), "dql-formula", "test_dynamicquantizelinear_min_adjusted")


def _constant() -> Iterator[tuple[str, list, str, str]]:
    yield ("zeros", _f32([0.0] * 4), "dql-zero-input", "all +0: scale readings, y = zp = 0")
    yield ("negative-zeros", _f32([-0.0] * 4), "dql-zero-input", "all -0")
    yield ("signed-zeros", _f32([0.0, -0.0, -0.0, 0.0]), "dql-zero-input", "+0 and -0")
    yield ("single-zero", _f32([0.0]), "dql-zero-input", "one +0")
    yield ("fives", _f32([5.0] * 3), "dql-formula", "constant positive: scale 5/255, y = 255")
    yield ("minus-fives", _f32([-5.0] * 3), "dql-formula", "constant negative: zp 255, y = 0")
    yield ("thousandths", _f32([1e-3] * 5), "dql-formula", "constant small positive")
    yield ("minus-thirds", _f32([-1 / 3] * 5), "dql-formula", "constant with an inexact scale")


def _order_matters(rng: np.random.Generator, want: int) -> list[list[float]]:
    """Seeded search: inputs whose y or zero point differ when the float32 steps are done in float64
    (the float32 order of operations is the spec's). Each draw adds an element at
    fl32((k + 0.5) * scale), where the two precisions are most likely to part."""
    found = []
    for _ in range(5000):
        n = int(rng.integers(2, 6))
        x = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4)).astype(np.float32)
        hi, lo = max(0.0, float(x.max())), min(0.0, float(x.min()))
        s32 = F32(F32(F32(hi) - F32(lo)) / F32(255))
        zp32 = np.rint(np.clip(F32(0) - F32(F32(lo) / s32), 0, 255))
        k = int(rng.integers(0, 255)) - int(zp32)
        x = np.append(x, F32((k + 0.5) * np.float64(s32)))
        if not lo <= float(x[-1]) <= hi:
            continue
        y32 = np.clip(np.rint(x / s32) + zp32, 0, 255)
        s64 = (hi - lo) / 255.0
        zp64 = np.rint(np.clip(-lo / s64, 0, 255))
        y64 = np.clip(np.rint(x.astype(np.float64) / s64) + zp64, 0, 255)
        if zp32 != zp64 or np.any(y32 != y64):
            found.append(x.astype(np.float64).tolist())
            if len(found) == want:
                break
    return found


def _dynamic_range() -> Iterator[tuple[str, list, str, str]]:
    yield ("range-overflows", _f32([FMAX, -FMAX, 1.0]), "dql-formula",
           "max - min overflows float32: scale = +Inf, zp = 0, y = 0")
    yield ("range-overflows-3e38", _f32([3e38, -3e38, 1e36]), "dql-formula",
           "(3e38 + 3e38) overflows in float32 (6e38/255 is finite in float64)")
    yield ("max-only", _f32([FMAX, 0.0, 1.0, FMAX / 2]), "dql-formula", "largest finite range")
    yield ("min-only", _f32([-FMAX, 0.0, -1.0, -FMAX / 2]), "dql-formula", "largest finite negative range")
    yield ("tiny-beside-huge", _f32([1e38, -1e-38, 1e-30, 1.0, -3e37]), "dql-formula",
           "elements far below the scale quantize to the zero point")
    yield ("powers-of-two", _f32([2.0 ** 127, -(2.0 ** 100), 2.0 ** -126, -(2.0 ** -149), 1.0]), "dql-formula",
           "every exponent range at once")
    rng = np.random.default_rng(0x0D41)
    for i, x in enumerate(_order_matters(rng, 6)):
        yield (f"float32-order-{i:03d}", x, "dql-formula",
               "float32 steps give another y or zero point than the same formula in float64")


def _subnormals() -> Iterator[tuple[str, list, str, str]]:
    yield ("scale-underflows", _f32([TINY, -TINY, 0.0]), "dql-formula",
           "range 2^-148: scale rounds to 0; zp 255; x = 0 gives 0/0 (don't-care)")
    yield ("scale-underflows-no-negative", _f32([TINY, 0.0]), "dql-formula",
           "scale 0 and min 0: the zero point is 0/0 (don't-care); y[0] = 255 whatever the zero point")
    yield ("single-smallest", _f32([TINY]), "dql-formula", "scale underflows to 0")
    yield ("single-smallest-negative", _f32([-TINY]), "dql-formula", "scale underflows to 0, zp 255")
    yield ("subnormal-scale", _f32([1e-40, 3e-39]), "dql-formula", "scale is subnormal")
    yield ("smallest-scale", _f32([255 * TINY, 17 * TINY]), "dql-formula", "scale = 2^-149 exactly")
    yield ("subnormal-elements", _f32([1.0, 1e-40, -1e-42, -0.5]), "dql-formula",
           "subnormal elements beside normal ones quantize to the zero point")
    yield ("normal-boundary", _f32([-1.1754942e-38, 2.3509887e-38, 1.1754944e-38]), "dql-formula",
           "scale just below the smallest normal")


def _shapes() -> Iterator[tuple[str, np.ndarray, str, str]]:
    yield ("empty-1d", np.zeros((0,)), "dql-zero-input", "empty x: the adjusted range is [0, 0]")
    yield ("empty-2x0", np.zeros((2, 0)), "dql-zero-input", "zero-size dimension")
    yield ("rank-0", np.asarray(-2.5), "dql-formula", "a scalar x")
    yield ("rank-3", np.linspace(-1.5, 3.0, 24).reshape(2, 3, 4), "dql-formula", "rank 3")
    yield ("rank-4", np.linspace(2.0, -7.0, 12).reshape(1, 2, 3, 2), "dql-formula", "rank 4")


def _specials() -> Iterator[tuple[str, list, str, str]]:
    nan, inf = float("nan"), float("inf")
    yield ("nan", [nan], "dql-nan", "all outputs don't-care")
    yield ("nan-among-finite", [nan, 1.0, -2.0], "dql-nan", "all outputs don't-care")
    yield ("plus-inf", [inf, 1.0, -2.0], "dql-inf", "scale +Inf, zp 0, finite x give 0, Inf is don't-care")
    yield ("plus-inf-alone", [inf], "dql-inf", "scale +Inf, zp 0")
    yield ("minus-inf", [-inf, 1.0, 2.0], "dql-inf", "scale +Inf, zp = -Inf/Inf: don't-care")
    yield ("both-infs", [inf, -inf, 0.0], "dql-inf", "scale +Inf, zp and y don't-care")
    yield ("minus-inf-alone", [-inf], "dql-inf", "scale +Inf, zp don't-care")
    yield ("signed-zero-among-values", _f32([-0.0, 1.0, -0.0, -1.0]), "dql-formula", "-0 quantizes to zp")


_SOURCES: dict[str, Callable[[], Iterator]] = {
    "zero-point-ties": _zero_point_ties,
    "ties": _ties,
    "ranges": _ranges,
    "constant": _constant,
    "dynamic-range": _dynamic_range,
    "subnormals": _subnormals,
    "shapes": _shapes,
    "specials": _specials,
}


def generate(family: str | None = None) -> Iterator[Draft]:
    spec = schemas.get(OP, 11)
    for combo in spec.combinations():
        for fam in (FAMILIES if family is None else (family,)):
            for name, x, clause, note in _SOURCES[fam]():
                yield draft(spec, combo, fam, name, {"x": np.asarray(x, dtype=np.float64)}, clause=clause,
                            note=note)


def entries() -> dict[str, Callable[[], Iterator[Draft]]]:
    """One ``generators.FAMILIES`` entry per family, keyed "<module>:<family>" (family names such as
    "ties" are shared with the QuantizeLinear/DequantizeLinear modules)."""
    return {f"{__name__.rsplit('.', 1)[-1]}:{fam}": (lambda fam=fam: generate(fam)) for fam in FAMILIES}

"""hypothesis strategies for every registry type, and for whole Q/DQ drafts.

hypothesis cannot draw ml_dtypes arrays, so everything is drawn as raw codes (ints) and viewed
through ``ElemType.from_bits``. Per type there are three element strategies: ``finite`` (ordinary
values; for wide floats hypothesis' own float strategy plus exact halves, so ties turn up early),
``special`` (NaN, ±Inf, ±0, subnormal and range ends: ``specials.special_values``) and
``bit_patterns`` (every code). Each shrinks toward small, simple values: +0, 1, rank 0."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from qconform import dtypes
from qconform.case import Draft
from qconform.dtypes import ElemType
from qconform.generators import qdq
from qconform.generators.specials import special_values
from qconform.oracle import floats
from qconform.schemas import OpSpec

FAMILY = "explore"


def _code(t: ElemType, v: float) -> int:
    if t.is_integer:
        return int(v) & ((1 << t.bits) - 1)
    return int(floats.encode(np.array(v, dtype=np.float64), t, saturate=False))


def _by_magnitude(t: ElemType, values) -> list[int]:
    vals = sorted(values, key=lambda v: (abs(v), math.copysign(1, v)))
    return list(dict.fromkeys(_code(t, v) for v in vals))


def finite(t: ElemType) -> st.SearchStrategy[int]:
    if t.is_integer:
        lo, hi = t.qrange
        return st.integers(lo, hi).map(lambda v: _code(t, v))
    if t.bits <= 8:
        return st.sampled_from(_by_magnitude(t, floats.all_finite_values(t)))
    halves = st.integers(-512, 512).map(lambda k: k / 2)
    wide = st.floats(width=32, allow_nan=False, allow_infinity=False)
    top = t.float_format.max_finite
    return st.one_of(halves, wide).filter(lambda v: abs(v) <= top).map(lambda v: _code(t, v))


def special(t: ElemType) -> st.SearchStrategy[int]:
    return st.sampled_from(_by_magnitude(t, special_values(t).tolist()) if t.is_integer else
                           [_code(t, v) for v in special_values(t)])


def bit_patterns(t: ElemType) -> st.SearchStrategy[int]:
    return st.integers(0, (1 << t.bits) - 1)


def elements(t: ElemType) -> st.SearchStrategy[int]:
    return st.one_of(finite(t), special(t), bit_patterns(t))


def positive_scales(t: ElemType) -> st.SearchStrategy[int]:
    """Finite positive scale codes, shrinking toward 1."""
    if t.is_integer:
        return st.integers(1, t.qrange[1]).map(lambda v: _code(t, v))
    f = t.float_format
    if f.mbits == 0:  # e8m0: 2^e, shrinking toward e = 0
        return st.integers(f.emin, f.emax).map(lambda e: e + f.bias)
    nice = st.sampled_from([_code(t, v) for v in (1.0, 2.0, 0.5, 3.0, 0.25, 6.0, 0.1, 1 / 3)])
    wide = st.floats(min_value=f.min_subnormal, max_value=f.max_finite, allow_nan=False).map(lambda v: _code(t, v))
    return st.one_of(nice, wide).filter(lambda c: np.isfinite(floats.decode(np.array(c), t)) and
                                        floats.decode(np.array(c), t) > 0)


def arrays(t: ElemType, shape: tuple[int, ...], codes: st.SearchStrategy[int] | None = None):
    n = math.prod(shape)
    return st.lists(elements(t) if codes is None else codes, min_size=n, max_size=n).map(
        lambda cs: t.from_bits(np.array(cs, dtype=np.uint64)).reshape(shape))


@st.composite
def drafts(draw, spec: OpSpec) -> Draft:
    """A valid QuantizeLinear/DequantizeLinear draft of this spec: combination, shape, granularity,
    data, scales, zero point (sometimes left out) and attributes all drawn."""
    c = qdq.Combo(spec, draw(st.sampled_from(spec.combinations())))
    rank = draw(st.integers(0, 3))
    shape = tuple(draw(st.integers(0, 4)) for _ in range(rank))
    kinds = ["per-tensor"] + (["per-axis", "blocked"] if c.has("axis") and rank else [])
    kind = draw(st.sampled_from(kinds[: 2 + c.has("block_size")]))
    attrs: dict = {}
    s_shape: tuple[int, ...] = ()
    if kind != "per-tensor":
        axis = draw(st.integers(-rank, rank - 1))
        attrs["axis"] = axis
        if kind == "per-axis":
            s_shape = (shape[axis],)
        else:
            d = shape[axis]
            block = draw(st.integers(1, max(1, d)))
            attrs["block_size"] = block
            s_shape = tuple(math.ceil(d / block) if i == axis % rank else n for i, n in enumerate(shape))
    x = draw(arrays(c.x, shape))
    scale = draw(arrays(c.s, s_shape, positive_scales(c.s)))
    zp = "default"
    if c.can_omit_zero_point() and draw(st.booleans()):
        zp = None
    elif c.q.is_integer and not c.zero_point_is_zero:
        zp = draw(arrays(c.q, s_shape, finite(c.q)))
    if c.has("saturate") and c.y.is_float:
        attrs["saturate"] = draw(st.sampled_from([1, 0]))
    if c.has("precision") and c.quantize:
        p = draw(st.sampled_from([0, *(dtypes.get(t).onnx for t in ("float32", "float16", "bfloat16"))]))
        if p:
            attrs["precision"] = p
    return c.draft(FAMILY, "draw", x, scale, zp, attrs=attrs, note="drawn by pytest --explore")

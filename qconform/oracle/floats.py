"""The minifloat codec, computed from first principles.

Everything here is driven by the ``FloatFormat`` fields of the type registry (ebits, mbits, bias,
nan_style); the only branches are on ``nan_style``. No ml_dtypes cast is used anywhere in this
module: ml_dtypes is the independent cross-check in ``tests/test_floats.py``.

Arithmetic is exact: every step is a float64 scaling by a power of two (``np.ldexp``), an exponent
extraction (``np.frexp``) or a round-half-to-even to an integer (``np.rint``). For every format in
the registry the scaled significands fit in 25 bits, so nothing is ever rounded except by the one
``np.rint`` that *is* the conversion's rounding.

Encoding rules — the ONNX ``Cast`` tables (opset 25; the same tables are quoted by
QuantizeLinear). ``[x]`` is x rounded to the target mantissa width (nearest, ties to even,
subnormals included, exponent range unbounded above — see ``round_to_format``).

saturate=True (default)::

    | x                 | E4M3FN   | E4M3FNUZ | E5M2     | E5M2FNUZ |
    | ----------------- | -------- | -------- | -------- | -------- |
    | 0                 | 0        | 0        | 0        | 0        |
    | -0                | -0       | 0        | -0       | 0        |
    | NaN               | NaN      | NaN      | NaN      | NaN      |
    | Inf               | FLT_MAX  | FLT_MAX  | FLT_MAX  | FLT_MAX  |
    | -Inf              | -FLT_MAX | -FLT_MAX | -FLT_MAX | -FLT_MAX |
    | [x] > FLT_MAX     | FLT_MAX  | FLT_MAX  | FLT_MAX  | FLT_MAX  |
    | [x] < -FLT_MAX    | -FLT_MAX | -FLT_MAX | -FLT_MAX | -FLT_MAX |
    | else              | RNE      | RNE      | RNE      | RNE      |

  In opsets 19-23 the Inf/-Inf rows read ``NaN`` for E4M3FNUZ and E5M2FNUZ; pass
  ``fnuz_inf_saturates=False`` to get that table (±Inf -> 0x80 for the fnuz kinds only).

saturate=False::

    | x                 | E4M3FN | E4M3FNUZ | E5M2 | E5M2FNUZ |
    | ----------------- | ------ | -------- | ---- | -------- |
    | 0                 | 0      | 0        | 0    | 0        |
    | -0                | -0     | 0        | -0   | 0        |
    | NaN               | NaN    | NaN      | NaN  | NaN      |
    | -NaN              | -NaN   | NaN      | -NaN | NaN      |
    | Inf               | NaN    | NaN      | Inf  | NaN      |
    | -Inf              | -NaN   | NaN      | -Inf | NaN      |
    | [x] > FLT_MAX     | NaN    | NaN      | Inf  | NaN      |
    | [x] < -FLT_MAX    | NaN    | NaN      | -Inf | NaN      |
    | else              | RNE    | RNE      | RNE  | RNE      |

The codec applies these rules per ``nan_style``: "fn" like E4M3FN, "fnuz" like the FNUZ columns,
"ieee" like E5M2 (so float16/bfloat16/float32 too: ONNX's rule for non-float8 targets, "+/-
infinity if OOR", is ``saturate=False``; ``saturate=True`` on them clamps like E5M2). "none"
(float4e2m1, float6e2m3, float6e3m2) always saturates: "[saturate] has no effect for float4e2m1,
float6e2m3, or float6e3m2, since those types have no non-saturating (infinity-representable)
encoding to fall back to" (QuantizeLinear). NaN into float4e2m1 saturates to +max, as its note says
("NaN | 6", float4.md); NaN into float6 the note leaves "unspecified", so it is a don't-care
(``unspecified``) whose code here, +max, is a placeholder; float6 keeps the sign of zero ("+/-0: 0x00 /
0x20", float6.md) as float4 does: qconform/docs/semantics.md#q-float4-float6.

Choice of NaN code (comparisons treat every NaN code as one class, so this is only a convention):
"fn" 0x7F, or 0xFF when the input NaN/Inf/overflow is negative (the table's "-NaN"); "fnuz" 0x80
(the only NaN); "ieee" the quiet NaN (exponent all ones, top mantissa bit) with the input's sign:
e5m2 0x7E/0xFE, float16 0x7E00/0xFE00, bfloat16 0x7FC0/0xFFC0, float32 0x7FC00000/0xFFC00000.

float8e8m0 ("e8m0": unsigned, value 2^(code-127), 0xFF NaN, no zero): ``decode`` is complete;
``encode`` only accepts exact powers of two in [2^-127, 2^127] (and NaN -> 0xFF) and raises
``ValueError`` otherwise — it is only needed to generate scales. The rounding modes of Cast-to-e8m0
(``round_mode`` up/down/nearest) are not implemented here.
"""
from __future__ import annotations

import functools

import numpy as np

from qconform.dtypes import BY_DTYPE, ElemType, FloatFormat

__all__ = [
    "decode",
    "round_to_format",
    "encode",
    "unspecified",
    "all_finite_values",
    "midpoints",
]


def _fmt(t: ElemType) -> FloatFormat:
    fmt = t.float_format
    if fmt is None:
        raise TypeError(f"{t.name} is not a floating-point type")
    return fmt


def _as_float64(x) -> np.ndarray:
    """Widen the input to float64 exactly.

    numpy float16/32/64 widen exactly by numpy's own casts. Registry float types stored as ml_dtypes
    arrays (bfloat16, float8, ...) are widened with this module's ``decode`` of their raw bits, so
    the codec never depends on an ml_dtypes cast.
    """
    arr = np.asarray(x)
    if arr.dtype.kind in "fiub":  # numpy's own bool/int/float kinds (ml_dtypes kinds are "V")
        return arr.astype(np.float64)
    t = BY_DTYPE.get(arr.dtype)
    if t is not None and t.is_float:
        return decode(t.to_bits(arr), t)
    raise TypeError(f"cannot widen {arr.dtype} to float64 exactly")


# --------------------------------------------------------------------------------------------
# decode
# --------------------------------------------------------------------------------------------


def decode(raw: np.ndarray, t: ElemType) -> np.ndarray:
    """Raw codes (unsigned ints) of float type t -> float64 values (exact).

    NaN codes -> nan, with the code's sign bit where the type's NaN has a sign ("ieee", "fn");
    the single fnuz NaN (0x80) and e8m0's 0xFF decode to +nan. Bits above the type's width are
    ignored.
    """
    fmt = _fmt(t)
    raw = np.asarray(raw).astype(np.uint64) & np.uint64((1 << fmt.width) - 1)
    mant_mask = (1 << fmt.mbits) - 1
    exp_mask = (1 << fmt.ebits) - 1
    expf = ((raw >> np.uint64(fmt.mbits)) & np.uint64(exp_mask)).astype(np.int64)
    mant = (raw & np.uint64(mant_mask)).astype(np.int64)

    if fmt.nan_style == "e8m0":
        # Exponent only, no implicit-bit/subnormal distinction: value = 2^(code - bias).
        out = np.ldexp(1.0, expf - fmt.bias)
        return np.where(raw == np.uint64(0xFF), np.nan, out)

    # Normal: (2^m + mant) * 2^(e - bias - m); subnormal (e == 0): mant * 2^(emin - m).
    sig = np.where(expf == 0, mant, mant + (1 << fmt.mbits)).astype(np.float64)
    scale = np.where(expf == 0, fmt.emin, expf - fmt.bias) - fmt.mbits
    mag = np.ldexp(sig, scale)
    negative = ((raw >> np.uint64(fmt.width - 1)) & np.uint64(1)).astype(bool)

    if fmt.nan_style == "ieee":
        top = expf == exp_mask
        mag = np.where(top & (mant == 0), np.inf, mag)
        mag = np.where(top & (mant != 0), np.nan, mag)
    elif fmt.nan_style == "fn":
        mag = np.where((expf == exp_mask) & (mant == mant_mask), np.nan, mag)
    elif fmt.nan_style == "fnuz":
        nan_code = raw == np.uint64(1 << (fmt.width - 1))
        return np.where(nan_code, np.nan, np.where(negative, -mag, mag))
    return np.where(negative, -mag, mag)


# --------------------------------------------------------------------------------------------
# rounding
# --------------------------------------------------------------------------------------------


def _quantum_exponent(a: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """For |x| = a > 0 finite: exponent q such that t's representable values near a are k * 2^q.

    q = max(E, emin) - mbits where a = 1.f * 2^E (E from frexp); below emin the spacing stays at
    the subnormal spacing 2^(emin - mbits).
    """
    _, e = np.frexp(a)  # a = f * 2^e, f in [0.5, 1)  =>  E = e - 1
    return np.maximum(e.astype(np.int64) - 1, fmt.emin) - fmt.mbits


def round_to_format(x: np.ndarray, t: ElemType) -> np.ndarray:
    """float64 input -> float64 value rounded to nearest-even in t's precision.

    The exponent range is UNBOUNDED above (the result may exceed t's max_finite: the caller decides
    overflow by comparing with it) and bounded below by subnormals (spacing 2^(emin - mbits)). No
    overflow handling; NaN and ±inf pass through; the sign of zero is kept (-tiny -> -0).
    float64 itself overflows only for |x| within half a t-ulp of 2^1024, which then gives ±inf.

    Not defined for float8e8m0 (raises ValueError): it has no mantissa and no zero, and Cast to it
    has its own rounding modes.
    """
    fmt = _fmt(t)
    if fmt.nan_style == "e8m0":
        raise ValueError("round_to_format is not defined for float8e8m0 (exponent-only scale type)")
    x = _as_float64(x)
    finite_nonzero, k, q = _round_scaled(x, fmt)
    with np.errstate(over="ignore"):  # scaling back is exact (or overflows to inf near 2^1024)
        r = np.ldexp(k, q)
    return np.where(finite_nonzero, np.copysign(r, x), x)


def _round_scaled(x: np.ndarray, fmt: FloatFormat) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """|x| rounded to t's precision as k * 2^q (k integral float64, q int64), for finite x != 0.

    a * 2^-q is exact (a power-of-two scaling landing in [0, 2^(mbits+1)), far from float64's
    limits) and rint rounds half to even: that rint is the conversion's one rounding."""
    finite_nonzero = np.isfinite(x) & (x != 0)
    a = np.where(finite_nonzero, np.abs(x), 1.0)
    q = _quantum_exponent(a, fmt)
    return finite_nonzero, np.rint(np.ldexp(a, -q)), q


# --------------------------------------------------------------------------------------------
# encode
# --------------------------------------------------------------------------------------------


def _nan_code(fmt: FloatFormat, negative: np.ndarray) -> np.ndarray:
    """The canonical NaN code for each element (see module docstring)."""
    sign = np.uint64(1 << (fmt.width - 1))
    if fmt.nan_style == "fn":
        pos = np.uint64((1 << (fmt.width - 1)) - 1)  # S.1111.111
        return np.where(negative, pos | sign, pos)
    if fmt.nan_style == "fnuz":
        return np.full(negative.shape, sign, dtype=np.uint64)  # 1.0000.000
    if fmt.nan_style == "ieee":
        pos = np.uint64((((1 << fmt.ebits) - 1) << fmt.mbits) | (1 << (fmt.mbits - 1)))
        return np.where(negative, pos | sign, pos)
    if fmt.nan_style == "e8m0":
        return np.full(negative.shape, 0xFF, dtype=np.uint64)
    return np.zeros(negative.shape, dtype=np.uint64)  # "none": no NaN code (encode saturates NaN)


def _magnitude_code(k: np.ndarray, q: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """Code (without sign) of the magnitude k * 2^q (from ``_round_scaled``), monotone in it.

    k < 2^mbits for subnormals (code = k), k in [2^mbits, 2^(mbits+1)) for normals, where code =
    (biased exp << mbits) + (k - 2^mbits) = ((E - emin) << mbits) + k, i.e. in both cases
    ((q + mbits - emin) << mbits) + k. A rounding that carried into the next binade (k =
    2^(mbits+1) at q, the same value as 2^mbits at q + 1) gives the same code, and so does
    subnormal k = 2^mbits (the smallest normal): no second exponent extraction is needed.
    Beyond max_finite the codes keep growing, so overflow is ``code > code of max_finite``.
    """
    return ((q + fmt.mbits - fmt.emin) << fmt.mbits) + k.astype(np.int64)


@functools.cache  # one per format: it was a quarter of encode's time on the small arrays of a diagnosis
def _max_code(fmt: FloatFormat) -> int:
    _, k, q = _round_scaled(np.array([fmt.max_finite]), fmt)
    return int(_magnitude_code(k, q, fmt)[0])


def _encode_e8m0(x: np.ndarray, t: ElemType) -> np.ndarray:
    fmt = _fmt(t)
    nan = np.isnan(x)
    f, e = np.frexp(np.where(nan, 1.0, x))
    exact_pow2 = (f == 0.5) & ~np.signbit(x)
    exp = e.astype(np.int64) - 1
    ok = nan | (exact_pow2 & (exp >= fmt.emin) & (exp <= fmt.emax))
    if not np.all(ok):
        bad = np.asarray(x)[~ok]
        raise ValueError(
            f"float8e8m0 encode only accepts NaN and exact powers of two in "
            f"[2^{fmt.emin}, 2^{fmt.emax}]; got e.g. {bad.ravel()[:5].tolist()}"
        )
    code = np.where(nan, 0xFF, exp + fmt.bias).astype(np.uint64)
    return code.astype(t.bits_dtype)


def encode(
    x: np.ndarray, t: ElemType, *, saturate: bool = True, fnuz_inf_saturates: bool = True, notes: bool = True
) -> np.ndarray:
    """float64 input -> raw codes of t (t.bits_dtype: uint8, or uint16/uint32 for 16/32-bit kinds).

    ``notes=False`` leaves out the float4 note's NaN -> +max (float6: the placeholder under a don't-care)
    and gives the "none" types' NaN code 0: a generator writing a value's own code wants the
    representation, not a Cast.

    Any float64 is accepted (float32/float16/bfloat16 values widen exactly). Rules: see the module
    docstring (the ONNX Cast tables). ``saturate`` picks the table; ``fnuz_inf_saturates=False``
    selects the opset 19-23 variant of the saturate table, where ±Inf -> NaN (0x80) for the fnuz
    kinds. Types without Inf/NaN always saturate. Overflow is decided after rounding:
    |[x]| > max_finite (e.g. float8e4m3fn: 464 rounds to 448, anything above 464 overflows).
    """
    fmt = _fmt(t)
    x = _as_float64(x)
    if fmt.nan_style == "e8m0":
        return _encode_e8m0(x, t)

    negative = np.signbit(x)
    nan = np.isnan(x)
    inf = np.isinf(x)
    finite_nonzero, k, q = _round_scaled(x, fmt)
    max_code = _max_code(fmt)
    mag = np.where(finite_nonzero, _magnitude_code(k, q, fmt), 0)
    overflow = mag > max_code  # a finite x whose rounding exceeds the range
    mag = np.where(overflow, 0, mag).astype(np.uint64)

    sign = np.uint64(1 << (fmt.width - 1))
    max_code = np.uint64(max_code)
    # Sign bit: set for negative inputs, except that fnuz has no -0 (its slot 0x80 is NaN):
    # "-0 -> 0" in the fnuz columns (also for negatives that round to zero).
    neg_bit = negative & ~((mag == 0) & ~overflow & (fmt.nan_style == "fnuz"))
    code = np.where(neg_bit, mag | sign, mag)

    nan_code = _nan_code(fmt, negative)
    saturated = np.where(negative, max_code | sign, max_code)
    if fmt.nan_style == "none" or saturate:
        # "Inf -> FLT_MAX, -Inf -> -FLT_MAX, [x] > FLT_MAX -> FLT_MAX, [x] < -FLT_MAX -> -FLT_MAX"
        code = np.where(overflow | inf, saturated, code)
        if fmt.nan_style == "fnuz" and not fnuz_inf_saturates:
            # opset 19-23 table: "Inf -> NaN, -Inf -> NaN" for E4M3FNUZ / E5M2FNUZ.
            code = np.where(inf, nan_code, code)
    elif fmt.nan_style == "ieee":
        # E5M2 column: "Inf -> Inf, -Inf -> -Inf, [x] > FLT_MAX -> Inf, [x] < -FLT_MAX -> -Inf".
        inf_code = np.uint64(((1 << fmt.ebits) - 1) << fmt.mbits)
        code = np.where(overflow | inf, np.where(negative, inf_code | sign, inf_code), code)
    else:
        # E4M3FN: "Inf -> NaN, -Inf -> -NaN, |[x]| > FLT_MAX -> NaN" (signed NaN code 0x7F/0xFF);
        # FNUZ: all of these -> NaN (0x80).
        code = np.where(overflow | inf, nan_code, code)

    # "NaN -> NaN", "-NaN -> -NaN" (fn, ieee) / "NaN" (fnuz); "none": "NaN | 6" (float4.md), +max.
    code = np.where(nan, max_code if fmt.nan_style == "none" and notes else nan_code, code)
    return code.astype(t.bits_dtype)


def unspecified(x: np.ndarray, t: ElemType) -> np.ndarray:
    """Where converting ``x`` to t has no specified result (a don't-care of the output): NaN into
    float6, whose note says "-0.0 (unspecified; ...)" for nan (float6.md);
    qconform/docs/semantics.md#q-float4-float6. No other conversion of this codec is unspecified."""
    fmt = t.float_format
    if fmt is None or fmt.nan_style != "none" or fmt.width != 6:
        return np.zeros(np.shape(x), bool)
    return np.isnan(np.asarray(x, np.float64))


# --------------------------------------------------------------------------------------------
# value tables for generators
# --------------------------------------------------------------------------------------------


def all_finite_values(t: ElemType) -> np.ndarray:
    """Sorted float64 array of every finite value of t, both signs; -0.0 (just before +0.0) only
    where the type has −0. Types wider than 16 bits raise ValueError (float32)."""
    fmt = _fmt(t)
    if fmt.width > 16:
        raise ValueError(f"{t.name} has too many values to list")
    v = decode(np.arange(1 << fmt.width, dtype=np.uint64), t)
    v = v[np.isfinite(v)]
    # Deduplicate (each value has one code; kept in case of future formats) and order -0 before +0.
    order = np.lexsort((~np.signbit(v), v))
    v = v[order]
    keep = np.ones(v.shape, dtype=bool)
    keep[1:] = (v[1:] != v[:-1]) | (np.signbit(v[1:]) != np.signbit(v[:-1]))
    return v[keep]


def midpoints(t: ElemType) -> np.ndarray:
    """Sorted float64 array: every midpoint between adjacent finite values of t (the -0/+0 pair
    excluded), plus the overflow thresholds ±(max_finite + ulp_at_max / 2) (+ only for unsigned
    float8e8m0). These are exact in float64. Inputs exactly here are ties; ±1 ulp of the input
    type around them select each side."""
    fmt = _fmt(t)
    v = all_finite_values(t)
    v = np.unique(v)  # -0 and +0 compare equal: one zero
    mids = (v[:-1] + v[1:]) / 2
    ulp_at_max = 2.0 ** (fmt.emax - fmt.mbits)
    thr = fmt.max_finite + ulp_at_max / 2
    extra = [thr] if fmt.sign_bit == 0 else [-thr, thr]
    return np.sort(np.concatenate([mids, np.array(extra)]))

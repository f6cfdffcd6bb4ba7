"""Cross-check of the first-principles minifloat codec (qconform/oracle/floats.py) against ml_dtypes.

ml_dtypes 0.6 is the independent reference for rounding; its casts implement the *non-saturating*
conversion, so for saturate=True the expectation is built from ml_dtypes' result by clamping
(Inf/NaN produced from a non-NaN input -> ±max_finite). What ml_dtypes does, measured here and
pinned in ``test_ml_dtypes_known_behaviour``:

* float8e4m3fn: ±Inf and |[x]| > 448 -> NaN 0x7F / 0xFF (sign kept) = ONNX saturate=False table.
* float8e4m3fnuz / float8e5m2fnuz: ±Inf and overflow -> 0x80; -0 and negatives rounding to zero
  -> 0x00 = ONNX saturate=False table.
* float8e5m2: ±Inf and overflow -> ±Inf (0x7C / 0xFC) = ONNX saturate=False table.
* float4e2m1 / float6e2m3 / float6e3m2 (no Inf, no NaN): ±Inf and overflow SATURATE to ±max_finite
  (6, 7.5, 28), which is ONNX's rule for these types (saturate has no effect on them).
  NaN -> a ZERO whose sign bit is the INVERSE of the NaN's sign: +NaN -> -0 (0x8 / 0x20),
  -NaN -> +0 (0x0), for float16/float32/float64 sources alike. The types' ONNX notes say NaN -> +max
  and (float6) -0 -> +0; our codec follows the notes, and those elements are compared with the notes'
  rule, not with ml_dtypes (``notes_rule``).
* float8e8m0fnu: 0, negatives, ±Inf -> 0xFF (NaN); otherwise round to nearest power of two.
  (Only exact powers of two are compared: our encode accepts nothing else.)
* Double rounding of float64 inputs: ml_dtypes converts float64 -> minifloat through float32, so a
  float64 that is not float32-exact can round twice. Example: x = 1 + 2**-4 + 2**-30 (just above
  the e4m3fn tie 1.0625 between 1.0 and 1.125): ml_dtypes gives 0x38 (1.0), the correctly rounded
  value is 0x39 (1.125); float6e2m3 likewise (0x08 vs 0x09). Our encode rounds float64 once.
  The comparisons therefore feed ml_dtypes float32 arrays (float16/bfloat16/float32 values are all
  float32-exact), and float64 inputs are checked against an exact Fraction-based reference instead.

Disagreements between ml_dtypes and the ONNX tables (ONNX's rule is what the codec implements and
what these tests expect):

* saturate=True (any opset): ml_dtypes never saturates; we expect ±max_finite where ml_dtypes gives
  Inf/NaN for a non-NaN input.
* The opset 19-23 saturate table sends ±Inf to NaN (0x80) for the two fnuz kinds
  (``fnuz_inf_saturates=False``); opset 24+ sends them to ±FLT_MAX (the default).
"""
from __future__ import annotations

import functools
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qconform import dtypes as D
from qconform.oracle import floats as F

# Widening signalling-NaN float32 payloads (exponent 255 in the sweeps) raises numpy's "invalid"
# flag; the values stay NaN, which is all the tests need.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")

FLOAT_KINDS = [n for n, t in D.TYPES.items() if t.is_float]
NARROW = list(D.FLOAT8) + ["float4e2m1", "float6e2m3", "float6e3m2"]
SWEEP_TARGETS = NARROW + ["float16", "bfloat16"]
ENCODABLE = SWEEP_TARGETS + ["float32"]  # every float kind except float8e8m0


def _t(name: str) -> D.ElemType:
    return D.TYPES[name]


def _finfo(t: D.ElemType):
    return np.finfo(t.dtype) if t.dtype.type.__module__ == "numpy" else ml_dtypes.finfo(t.dtype)


# ----------------------------------------------------------------------------------------------
# Expected codes from ml_dtypes, adjusted to the ONNX tables
# ----------------------------------------------------------------------------------------------


def ml_expected(x32: np.ndarray, t: D.ElemType, saturate: bool) -> np.ndarray:
    """Expected raw codes (uint64) for float32 inputs x32, from ml_dtypes' cast.

    saturate=False: ml_dtypes' cast is exactly the ONNX saturate=False table for every kind (see
    the module docstring). saturate=True: ml_dtypes does not saturate, so wherever x is ±Inf, or
    the result is Inf/NaN for a non-NaN x, the ONNX table says ±FLT_MAX (opset 24+ for fnuz).
    """
    assert x32.dtype == np.float32
    with np.errstate(all="ignore"):
        ml = x32 if t.dtype == np.float32 else x32.astype(t.dtype)
    bits = t.to_bits(ml).astype(np.uint64)
    if saturate:
        mlv = ml.astype(np.float64)
        clamp = ~np.isnan(x32) & (np.isinf(x32) | ~np.isfinite(mlv))
        fi = _finfo(t)
        pos, neg = t.to_bits(np.array([fi.max, -fi.max], dtype=t.dtype)).astype(np.uint64)
        bits = np.where(clamp, np.where(np.signbit(x32), neg, pos), bits)
    return bits


def assert_codes_equal(got, exp, t: D.ElemType, x, label: str, *, skip=None) -> None:
    """Raw-bit comparison; NaN codes form one class, every non-NaN code must match exactly."""
    got = np.asarray(got).astype(np.uint64)
    exp = np.asarray(exp).astype(np.uint64)
    gn, en = t.is_nan_bits(got), t.is_nan_bits(exp)
    bad = (gn != en) | (~gn & ~en & (got != exp))
    if skip is not None:
        bad &= ~skip
    if bad.any():
        idx = np.flatnonzero(bad)[:12]
        xs = np.asarray(x)
        rows = [
            f"  x={xs[i]!r} ({xs[i].view(np.uint64 if xs.dtype == np.float64 else np.uint32):#x}) "
            f"got={int(got[i]):#x} expected={int(exp[i]):#x}"
            for i in idx
        ]
        raise AssertionError(f"{label}: {int(bad.sum())} mismatches of {bad.size}\n" + "\n".join(rows))


def check_against_ml(x32: np.ndarray, t: D.ElemType, saturate: bool, label: str) -> None:
    x = x32.astype(np.float64)
    got = F.encode(x, t, saturate=saturate)
    assert got.dtype == t.bits_dtype
    exp = ml_expected(x32, t, saturate)
    skip = notes_rule(x, t)
    assert_codes_equal(got, exp, t, x32, label, skip=skip)
    if skip.any():  # where the types' notes rule, ml_dtypes is not the reference: the notes are
        assert np.array_equal(got[skip], F.encode(x[skip], t, saturate=saturate, notes=True))
        assert np.array_equal(F.encode(x[~skip], t, saturate=saturate, notes=False), got[~skip])


def notes_rule(x: np.ndarray, t: D.ElemType) -> np.ndarray:
    """Where the float4/float6 notes decide the code (semantics.md#q-float4-float6): NaN -> +max, and
    float6 results of -0 -> +0 (ml_dtypes gives -0 / a signed zero for NaN there)."""
    if t.float_format.nan_style != "none":
        return np.zeros(x.shape, bool)
    rule = np.isnan(x)
    if t.float_format.width == 6:
        rule |= np.signbit(x) & (F.encode(np.abs(x), t, saturate=True) == 0)
    return rule


# ----------------------------------------------------------------------------------------------
# Registry sanity
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FLOAT_KINDS)
def test_registry_limits_match_ml_dtypes(name):
    t = _t(name)
    fmt = t.float_format
    fi = _finfo(t)
    assert fmt.max_finite == float(fi.max)
    assert fmt.min_subnormal == float(fi.smallest_subnormal)
    assert fmt.width == t.bits


def test_type_capabilities_name_the_types_they_describe():
    """Type-name sets are capabilities of the registry, asked of any name."""
    assert D.having("is_arithmetic") == ("float16", "bfloat16", "float32")
    assert D.having("is_half") == ("float16", "bfloat16")
    assert D.having("is_float8") == D.FLOAT8 == ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz")
    assert "float64" not in D.having("is_arithmetic")  # outside the registry: simply absent
    with pytest.raises(AttributeError, match="not a capability"):
        D.having("is_quaternion")


# ----------------------------------------------------------------------------------------------
# decode
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in FLOAT_KINDS if n != "float32"])
def test_decode_all_codes(name):
    t = _t(name)
    codes = np.arange(1 << t.bits, dtype=np.uint64)
    got = F.decode(codes, t)
    exp = t.from_bits(codes).astype(np.float64)
    assert got.dtype == np.float64
    assert np.array_equal(np.isnan(got), np.isnan(exp))
    fin = ~np.isnan(exp)
    assert np.array_equal(got[fin], exp[fin])
    assert np.array_equal(np.signbit(got[fin]), np.signbit(exp[fin]))
    assert np.array_equal(np.isnan(got), t.is_nan_bits(codes))


def test_decode_float32_sample():
    t = _t("float32")
    rng = np.random.default_rng(1)
    codes = np.concatenate(
        [
            rng.integers(0, 1 << 32, size=1 << 18, dtype=np.uint64),
            np.array([0, 1, 0x7FFFFF, 0x800000, 0x7F7FFFFF, 0x7F800000, 0x7F800001, 0x7FC00000], np.uint64),
        ]
    )
    codes = np.concatenate([codes, codes | (1 << 31)])
    got = F.decode(codes, t)
    exp = codes.astype(np.uint32).view(np.float32).astype(np.float64)
    assert np.array_equal(got, exp, equal_nan=True)
    assert np.array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(exp[~np.isnan(exp)]))


def test_decode_ignores_high_bits_and_signed_nan():
    t = _t("float4e2m1")
    assert np.array_equal(F.decode(np.array([0xF2, 0x02], np.uint8), t), [1.0, 1.0])
    e4 = _t("float8e4m3fn")
    assert np.signbit(F.decode(np.array([0xFF]), e4))[0]
    assert not np.signbit(F.decode(np.array([0x7F]), e4))[0]


# ----------------------------------------------------------------------------------------------
# encode: exhaustive float16 and bfloat16 sources
# ----------------------------------------------------------------------------------------------


def all_float16_as_float32() -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)


def all_bfloat16_as_float32() -> np.ndarray:
    # bfloat16 is the top half of a float32: widening is a 16-bit shift, no ml_dtypes involved.
    return (np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)).view(np.float32)


SOURCES = {"float16": all_float16_as_float32, "bfloat16": all_bfloat16_as_float32}
EXHAUSTIVE = [
    pytest.param(src, dst, sat, id=f"{src}->{dst}-{'sat' if sat else 'nosat'}")
    for src in SOURCES
    for dst in SWEEP_TARGETS
    if dst != src
    for sat in (True, False)
]


@pytest.mark.parametrize("src,dst,saturate", EXHAUSTIVE)
def test_encode_exhaustive_16bit(src, dst, saturate):
    x32 = SOURCES[src]()
    check_against_ml(x32, _t(dst), saturate, f"{src}->{dst} saturate={saturate}")


# ----------------------------------------------------------------------------------------------
# encode: structured float32 sweep (every exponent x significands at every rounding boundary)
# ----------------------------------------------------------------------------------------------


def _sweep_significands() -> np.ndarray:
    """23-bit significand patterns around every rounding boundary.

    Rounding to m kept bits (m = the target's mantissa width for normals, fewer for subnormals,
    so all m in 0..23 occur somewhere across the exponent sweep) has its tie where the dropped
    23-m bits are 100..0. For each m: ties with kept bits 0 (even), 1 (odd), all ones (odd,
    carries into the exponent), all ones - 1 (even) — every kept value for m <= 4, which covers
    every tie of the float8/float6/float4 kinds — each ±1 ulp; plus 0, 1, all ones and 64 random
    patterns.
    """
    pats = {0, 1, (1 << 23) - 1}
    for m in range(23):
        low = 23 - m
        half = 1 << (low - 1)
        kept_set = set(range(1 << m)) if m <= 4 else {0, 1, (1 << m) - 1, (1 << m) - 2}
        for kept in kept_set:
            tie = (kept << low) | half
            pats.update({tie - 1, tie, tie + 1})
    rng = np.random.default_rng(20240611)
    pats.update(int(v) for v in rng.integers(0, 1 << 23, size=64))
    return np.array(sorted(p for p in pats if 0 <= p < (1 << 23)), dtype=np.uint32)


def _sweep_inputs() -> np.ndarray:
    sig = _sweep_significands()
    exps = np.arange(256, dtype=np.uint32)
    bits = (exps[:, None] << np.uint32(23)) | sig[None, :]
    bits = np.concatenate([bits.ravel(), bits.ravel() | np.uint32(1 << 31)])
    return bits.view(np.float32)


SWEEP_X32 = _sweep_inputs()
SWEEP = [
    pytest.param(dst, sat, id=f"float32->{dst}-{'sat' if sat else 'nosat'}")
    for dst in ENCODABLE
    for sat in (True, False)
]


@pytest.mark.parametrize("dst,saturate", SWEEP)
def test_encode_float32_sweep(dst, saturate):
    check_against_ml(SWEEP_X32, _t(dst), saturate, f"float32->{dst} saturate={saturate}")


def test_sweep_hits_every_tie():
    # Every midpoint of every narrow kind that is float32-exact must be in the sweep.
    xs = set(SWEEP_X32.astype(np.float64).tolist())
    for name in NARROW:
        mids = F.midpoints(_t(name))
        missing = [m for m in mids if m not in xs]
        assert not missing, (name, missing[:5])


# ----------------------------------------------------------------------------------------------
# encode: float64 inputs against an exact reference (ml_dtypes double-rounds float64)
# ----------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _reference_table(name: str):
    t = _t(name)
    fmt = t.float_format
    codes = np.arange(1 << t.bits, dtype=np.uint64)
    vals = t.from_bits(codes).astype(np.float64)  # ml_dtypes' decode, independent of ours
    keep = np.isfinite(vals) & (vals >= 0) & ~np.signbit(vals)
    pos = sorted((Fraction(float(v)), int(c)) for v, c in zip(vals[keep], codes[keep]))
    top_v, top_c = pos[-1]
    ulp = Fraction(2) ** (fmt.emax - fmt.mbits)
    virtual = (top_v + ulp, top_c + 1)  # the next value with unbounded exponent: code parity flips
    return pos + [virtual], top_c, virtual


def _exact_reference(x: float, t: D.ElemType, saturate: bool) -> int:
    """Brute force over the value table with Fractions: nearest value, ties to the even code.
    Returns -1 for NaN."""
    fmt = t.float_format
    table, top_c, virtual = _reference_table(t.name)
    sign = 1 << (fmt.width - 1)
    fx = Fraction(x)
    a = abs(fx)
    best = min(table, key=lambda vc: (abs(vc[0] - a), vc[1] & 1))
    neg = np.signbit(x)
    if best is virtual or a > virtual[0]:  # overflow after rounding
        if saturate or fmt.nan_style == "none":
            return top_c | (sign if neg else 0)
        if fmt.nan_style == "ieee":
            inf = ((1 << fmt.ebits) - 1) << fmt.mbits
            return inf | (sign if neg else 0)
        return -1  # NaN
    code = best[1]
    if neg and not (best[0] == 0 and fmt.nan_style == "fnuz"):
        code |= sign
    return code


def _near_midpoints(t: D.ElemType):
    mids = F.midpoints(t)
    return st.builds(
        lambda m, k, neg: (-1 if neg else 1) * float(np.nextafter(m, np.inf * np.sign(k or 1)) if k else m),
        st.sampled_from(list(mids[mids > 0])),
        st.sampled_from([-1, 0, 1]),
        st.booleans(),
    )


@pytest.mark.parametrize("name", NARROW)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_encode_float64_exact_reference(name, data):
    t = _t(name)
    x = data.draw(st.one_of(st.floats(allow_nan=False, allow_infinity=False), _near_midpoints(t)))
    for saturate in (True, False):
        got = int(F.encode(np.array([x]), t, saturate=saturate, notes=False)[0])  # notes: test_the_notes_rules…
        exp = _exact_reference(x, t, saturate)
        if exp == -1:
            assert t.is_nan_bits(np.array([got]))[0], (x, hex(got))
        else:
            assert got == exp, (x, saturate, hex(got), hex(exp))


def test_float64_double_rounding_example():
    # Just above the tie 1.0625 (between 1.0 and 1.125) by 2**-30 — not float32-exact.
    x = np.array([1 + 2**-4 + 2**-30])
    assert F.encode(x, _t("float8e4m3fn"))[0] == 0x39  # 1.125, correctly rounded
    assert F.encode(x, _t("float6e2m3"))[0] == 0x09  # 1.125
    assert F.encode(-x, _t("float8e4m3fnuz"))[0] == 0xC1  # -1.125


def test_ml_dtypes_known_behaviour():
    """Pins what ml_dtypes 0.6 does (see module docstring) so an upgrade that changes it is noticed."""
    x = np.array([np.inf, -np.inf, 1e6, -1e6, np.nan, -np.nan], dtype=np.float32)

    def ml(name, arr=x):
        t = _t(name)
        with np.errstate(all="ignore"):
            return t.to_bits(arr.astype(t.dtype)).tolist()

    assert ml("float8e4m3fn")[:4] == [0x7F, 0xFF, 0x7F, 0xFF]
    assert ml("float8e4m3fnuz")[:4] == [0x80] * 4
    assert ml("float8e5m2fnuz")[:4] == [0x80] * 4
    assert ml("float8e5m2")[:4] == [0x7C, 0xFC, 0x7C, 0xFC]
    assert ml("float4e2m1") == [0x7, 0xF, 0x7, 0xF, 0x8, 0x0]  # saturates; NaN -> zero, sign flipped
    assert ml("float6e2m3") == [0x1F, 0x3F, 0x1F, 0x3F, 0x20, 0x00]
    assert ml("float6e3m2") == [0x1F, 0x3F, 0x1F, 0x3F, 0x20, 0x00]
    assert ml("float8e5m2fnuz", np.array([-0.0, -1e-30], np.float32)) == [0, 0]
    # float64 inputs are double-rounded through float32 by ml_dtypes
    x64 = np.array([1 + 2**-4 + 2**-30])
    assert _t("float8e4m3fn").to_bits(x64.astype(ml_dtypes.float8_e4m3fn)).tolist() == [0x38]
    assert F.encode(x64, _t("float8e4m3fn")).tolist() == [0x39]

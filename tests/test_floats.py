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


def _all_float16_as_float32() -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)


def _all_bfloat16_as_float32() -> np.ndarray:
    # bfloat16 is the top half of a float32: widening is a 16-bit shift, no ml_dtypes involved.
    return (np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)).view(np.float32)


SOURCES = {"float16": _all_float16_as_float32, "bfloat16": _all_bfloat16_as_float32}
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


# ----------------------------------------------------------------------------------------------
# Special values, options, helpers
# ----------------------------------------------------------------------------------------------

SPECIALS = np.array([np.inf, -np.inf, 1e30, -1e30, 1.0, -1.0, 0.0, -0.0, np.nan, -np.nan])


@pytest.mark.parametrize("name", ENCODABLE)
def test_fnuz_inf_saturates_false(name):
    t = _t(name)
    fnuz = t.float_format.nan_style == "fnuz"
    for saturate in (True, False):
        new = F.encode(SPECIALS, t, saturate=saturate)
        old = F.encode(SPECIALS, t, saturate=saturate, fnuz_inf_saturates=False)
        if fnuz and saturate:
            assert list(old[:2]) == [0x80, 0x80]  # opset 19-23: "Inf -> NaN, -Inf -> NaN"
            assert list(new[:2]) == [0x7F, 0xFF]  # opset 24+: ±FLT_MAX
            assert np.array_equal(old[2:], new[2:])  # finite overflow still saturates
        else:
            assert np.array_equal(old, new)


def test_documented_examples():
    e4 = _t("float8e4m3fn")
    x = np.array([448.0, 464.0, 464.0 + 2**-40, 480.0, -464.0, -465.0])
    assert list(F.encode(x, e4)) == [0x7E, 0x7E, 0x7E, 0x7E, 0xFE, 0xFE]
    assert list(F.encode(x, e4, saturate=False)) == [0x7E, 0x7E, 0x7F, 0x7F, 0xFE, 0xFF]
    r = F.round_to_format(np.array([464.0, 465.0, 1e6, -3e-3, 2.0**-10, 2.0**-11, -(2.0**-11)]), e4)
    # unbounded above (480 and 983040 do not exist in e4m3fn), subnormal spacing 2^-9 below
    assert list(r) == [448.0, 480.0, 983040.0, -(2.0**-8), 0.0, 0.0, -0.0]  # -3e-3 = -1.536 * 2^-9
    assert np.signbit(r[-1]) and not np.signbit(r[-2])
    # NaN codes
    nan = np.array([np.nan, -np.nan])
    assert list(F.encode(nan, e4)) == [0x7F, 0xFF]
    assert list(F.encode(nan, _t("float8e4m3fnuz"))) == [0x80, 0x80]
    assert list(F.encode(nan, _t("float8e5m2"))) == [0x7E, 0xFE]
    assert list(F.encode(nan, _t("float16"))) == [0x7E00, 0xFE00]
    assert list(F.encode(nan, _t("bfloat16"))) == [0x7FC0, 0xFFC0]
    assert list(F.encode(nan, _t("float32"))) == [0x7FC00000, 0xFFC00000]
    assert list(F.encode(nan, _t("float4e2m1"))) == [7, 7]  # "NaN | 6" (float4.md)
    # fnuz: -0 and negatives that round to zero -> +0
    assert list(F.encode(np.array([-0.0, -1e-30]), _t("float8e5m2fnuz"))) == [0, 0]
    assert list(F.encode(np.array([-0.0, -1e-30]), e4)) == [0x80, 0x80]


def test_round_to_format_consistent_with_codec():
    x = _all_float16_as_float32().astype(np.float64)
    for name in ENCODABLE:
        t = _t(name)
        r = F.round_to_format(x, t)
        ok = np.isfinite(r) & (np.abs(r) <= t.float_format.max_finite)
        back = F.decode(F.encode(x[ok], t, notes=False), t)  # the representation: float6 keeps -0 here
        assert np.array_equal(back, r[ok]), name
        assert np.array_equal(np.signbit(back), np.signbit(r[ok])) or t.float_format.nan_style == "fnuz"
    with pytest.raises(ValueError):
        F.round_to_format(np.array([1.0]), _t("float8e8m0"))


def test_accepts_ml_dtypes_input_without_casting():
    # bfloat16 arrays are widened through the codec's own decode of their bits.
    xb = np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16)
    via_bits = F.encode(xb, _t("float8e4m3fn"))
    via_f32 = F.encode(_all_bfloat16_as_float32().astype(np.float64), _t("float8e4m3fn"))
    assert np.array_equal(via_bits, via_f32)


@pytest.mark.parametrize("name", ENCODABLE)
def test_the_notes_rules_for_nan_and_negative_zero(name):
    t = _t(name)
    x = np.array([np.nan, -np.nan, -0.0, -(2.0 ** -60)])
    codes = F.encode(x, t, saturate=True)
    unspecified = F.unspecified(x, t).tolist()
    if t.float_format.nan_style == "none":  # "NaN | 6" (float4.md); "+/-0: 0x00 / 0x20" (float6.md)
        mx = int(F.encode(np.array([np.inf]), t, saturate=True)[0])
        sign = 1 << (t.float_format.width - 1)
        assert codes.tolist() == [mx, mx, sign, sign]  # float6's NaN code: a placeholder, unspecified
        assert unspecified == [t.float_format.width == 6] * 2 + [False, False]
    else:
        assert t.is_nan_bits(codes[:2]).all() and not any(unspecified)


def test_e8m0_encode():
    t = _t("float8e8m0")
    codes = np.arange(255, dtype=np.uint64)
    vals = F.decode(codes, t)
    assert list(vals[[0, 127, 254]]) == [2.0**-127, 1.0, 2.0**127]
    assert np.array_equal(F.encode(vals, t), codes.astype(np.uint8))
    assert np.array_equal(t.to_bits(vals.astype(np.float32).astype(t.dtype)), codes.astype(np.uint8))
    assert F.encode(np.array([np.nan, -np.nan]), t).tolist() == [0xFF, 0xFF]
    for bad in (3.0, 0.0, -0.0, -1.0, 2.0**-128, 2.0**128, np.inf):
        with pytest.raises(ValueError):
            F.encode(np.array([bad]), t)


@pytest.mark.parametrize("name", [n for n in FLOAT_KINDS if n != "float32"])
def test_all_finite_values(name):
    t = _t(name)
    v = F.all_finite_values(t)
    ref = t.from_bits(np.arange(1 << t.bits, dtype=np.uint64)).astype(np.float64)
    ref = ref[np.isfinite(ref)]
    assert len(v) == len(ref)  # one entry per finite code (±0 both present where −0 exists)
    assert np.all(np.diff(v) >= 0)
    assert np.array_equal(np.sort(v), np.sort(ref))
    zeros = v[v == 0]
    if t.float_format.has_negative_zero:
        assert list(np.signbit(zeros)) == [True, False]
    elif t.float_format.nan_style == "fnuz":
        assert list(np.signbit(zeros)) == [False]
    expected_counts = {"float8e4m3fn": 254, "float8e4m3fnuz": 255, "float8e5m2": 248, "float8e5m2fnuz": 255,
                       "float4e2m1": 16, "float6e2m3": 64, "float6e3m2": 64, "float8e8m0": 255}
    if name in expected_counts:
        assert len(v) == expected_counts[name]


@pytest.mark.parametrize("name", NARROW + ["float16", "bfloat16"])
def test_midpoints_are_ties(name):
    t = _t(name)
    fmt = t.float_format
    mids = F.midpoints(t)
    vals = np.unique(F.all_finite_values(t))
    thr = fmt.max_finite + 2.0 ** (fmt.emax - fmt.mbits) / 2
    assert mids[-1] == thr and mids[0] == -thr
    assert len(mids) == len(vals) - 1 + 2
    below = F.round_to_format(np.nextafter(mids, -np.inf), t)
    above = F.round_to_format(np.nextafter(mids, np.inf), t)
    assert np.all(below < above)
    at = F.round_to_format(mids, t)
    assert np.all((at == below) | (at == above))
    # At the overflow threshold (a tie between max_finite and the next value with unbounded
    # exponent): rounds to the even one. fn kinds' max has an even mantissa (e4m3fn 448 = 1.110b),
    # every other kind's max is all ones (odd), so the tie overflows there.
    top = int(F.encode(np.array([thr]), t, saturate=False)[0])
    max_code = (1 << (fmt.width - 1)) - 1 - (1 if fmt.nan_style == "fn" else 0)
    if fmt.nan_style == "ieee":
        max_code = (((1 << fmt.ebits) - 1) << fmt.mbits) - 1
    expected_top = {
        "fn": max_code,  # stays at max
        "none": max_code,  # overflows, but saturates regardless of the flag
        "ieee": max_code + 1,  # Inf
        "fnuz": 1 << (fmt.width - 1),  # NaN
    }[fmt.nan_style]
    assert top == expected_top, (hex(top), hex(expected_top))
    assert int(F.encode(np.array([thr]), t, saturate=True)[0]) == max_code


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


def _same_floats(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal values, the same sign of zero, NaN where NaN."""
    return bool(np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(a[~np.isnan(a)], b[~np.isnan(b)])
                and np.array_equal(np.signbit(a[~np.isnan(a)]), np.signbit(b[~np.isnan(b)])))


def _ties_and_edges(t: str, step: int) -> np.ndarray:
    """float64 values at every ``step``-th tie between neighbours of float type ``t`` (all of them
    for float16), one float64 ulp either side, a little further (where a cast through float32
    would land on the tie), the subnormal and overflow edges, and random values across the range."""
    info = {"float32": (np.float32, np.uint32, 32, 149, 104), "float16": (np.float16, np.uint16, 16, 24, 16)}
    ftype, utype, width, tiny, big = info[t]
    bits = np.arange(0, 1 << width, step, dtype=np.uint64).astype(utype)  # every exponent, many significands
    lo = bits.view(ftype)
    with np.errstate(all="ignore"):
        nxt = np.nextafter(lo, ftype(np.inf)).astype(np.float64)
        lo = lo.astype(np.float64)
        finite = np.isfinite(lo) & np.isfinite(nxt)
        mid = ((lo + nxt) / 2)[finite]  # exact in float64: the tie between neighbours
        near = np.concatenate([mid * (1 + 2.0**-30), mid * (1 - 2.0**-30)])
    top = float(np.finfo(ftype).max)
    half_ulp = 2.0 ** (np.frexp(top)[1] - np.finfo(ftype).nmant - 2)
    edges = np.array([2.0**-tiny, 2.0**-(tiny + 1), 2.0**-(tiny + 1) * 1.5, 2.0**-(tiny + 1) + 2.0**-(tiny + 40),
                      top, top + half_ulp, top + half_ulp - half_ulp * 2.0**-30, top + half_ulp * (1 + 2.0**-30),
                      np.inf, np.nan, 0.0, 1e300, 1e-300])
    rng = np.random.default_rng(7)
    rand = rng.standard_normal(1 << 16) * 2.0 ** rng.integers(-tiny - 10, big + 10, 1 << 16)
    return np.concatenate([mid, np.nextafter(mid, 0), np.nextafter(mid, np.inf), near, edges, -edges, rand])


@pytest.mark.parametrize("t, step", [("float32", 4099), ("float16", 1)])
def test_fl_hardware_path_is_the_codec(t, step):
    """arith.fl rounds to float32 and float16 with numpy's cast (the sweeps and the diagnosis need
    the speed): it must give the codec's answer at every tie (float32: every 4099th), just beside
    it, where a cast through float32 would round twice, at the subnormal and overflow edges, and
    on random float64 values."""
    from qconform.oracle import arith

    ft = _t(t)
    codec = lambda v: F.decode(F.encode(v, ft, saturate=False), ft)  # noqa: E731
    v = _ties_and_edges(t, step)
    nans = np.array([0x7FF0000000000001, 0xFFF0000000000001, 0x7FF8000000000001, 0x7FF4000000000000],
                    np.uint64).view(np.float64)  # signalling, with payloads, either sign
    v = np.concatenate([v, nans])
    with np.errstate(all="ignore"):
        assert arith._hardware_ok() and (t != "float16" or arith._rounds_once())
        assert np.array_equal(arith.fl(t, v).view(np.uint64), codec(v).view(np.uint64))  # bits, NaN's too


def test_a_cast_that_rounds_twice_is_not_taken_for_float16(monkeypatch):
    """The float16 traps tell a cast through float32 from numpy's own: with one that rounds twice,
    fl takes the codec and still gives the tie's correct rounding."""
    from qconform.oracle import arith

    assert not np.any(arith._TIE_TRAPS.astype(np.float32).astype(np.float16).astype(np.float64) == arith._TIE_ROUNDED)
    monkeypatch.setattr(arith, "_rounds_once", lambda: False)
    assert np.array_equal(arith.fl("float16", arith._TIE_TRAPS), arith._TIE_ROUNDED)


def test_primary_only_is_the_first_reading():
    """evaluate(primary_only=True) (sweeps, cpu-ref) returns the first reading of the full evaluation."""
    from qconform.case import Arg, Draft
    from qconform.oracle import evaluate

    x = np.array([1.0, -0.0, 2.5, 1000.0], np.float16)
    draft = Draft("QuantizeLinear", 21, "float16-float8e4m3fn", "test", "primary",
                  (Arg("x", "float16", x), Arg("y_scale", "float16", np.array(0.1, np.float16), True),
                   Arg("y_zero_point", "float8e4m3fn", np.array(0, ml_dtypes.float8_e4m3fn), True)), {})
    full, primary = evaluate(draft), evaluate(draft, primary_only=True)
    assert len(full.readings) > 1
    assert len(primary.readings) == 1
    got, want = primary.readings[0], full.readings[0]
    assert got.name == want.name
    assert all(np.array_equal(_t("float8e4m3fn").to_bits(a), _t("float8e4m3fn").to_bits(b))
               for a, b in zip(got.outputs, want.outputs))

"""The minifloat codec's own rules (qconform/oracle/floats.py), beside the ml_dtypes cross-check of
tests/test_floats.py: the special values and options (fnuz ±Inf, the notes for NaN and -0, e8m0),
the documented examples, every finite value and midpoint, and arith.fl's hardware path, which must
give the codec's answer bit for bit."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from test_floats import ENCODABLE, FLOAT_KINDS, NARROW, all_bfloat16_as_float32, all_float16_as_float32

from qconform import dtypes as D
from qconform.oracle import floats as F

# Widening signalling-NaN float32 payloads raises numpy's "invalid" flag; the values stay NaN,
# which is all the tests need.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")


def _t(name: str) -> D.ElemType:
    return D.TYPES[name]


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
    x = all_float16_as_float32().astype(np.float64)
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
    via_f32 = F.encode(all_bfloat16_as_float32().astype(np.float64), _t("float8e4m3fn"))
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

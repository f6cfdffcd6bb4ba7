"""What a deviating element holds instead of its expected code: the relation of actual to expected.

Where a deviation happens is a description over features (``features``); *what* it does is read
off each deviating element's two codes: one code up or down (toward or away from zero), the sign
lost or flipped, a zero written, NaN for a finite value (or the reverse), ±Inf, the type's ends,
another element's expected value (a neighbour's, the first element's, the other half of a packed
byte's), or the expected code reinterpreted (its top bit flipped: the other signedness; its bytes
swapped; the value encoded in another type of the same width). An element may show several.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from qconform import dtypes
from qconform.diagnosis import codes

#: Every relation, the most specific first: where several hold for as many elements, the first is said.
DATA = "is the data input's own code at that element (the op not applied)"
NEIGHBOUR = "is a neighbouring element's expected value"
FIRST = "is the first element's expected value"
REINTERPRETED = "is the expected value encoded as another type of the same width (a bit pattern reinterpreted)"
SWAPPED = "is the expected code with its bytes swapped"
TOP_BIT = "is the expected code with its top bit flipped (read with the other signedness)"
SIGN_LOST = "is the expected value with its sign lost"
SIGN_FLIPPED = "is the expected value with its sign flipped"
ZERO = "is zero where the expected value is not"
NAN = "is NaN where a finite value is expected"
NOT_NAN = "is a finite value where NaN is expected"
INF = "is ±Inf where a finite value is expected"
ENDS = "is the type's minimum or maximum where a value inside is expected"
ABOVE = "is one code above the expected one"
BELOW = "is one code below the expected one"
NEARER = "is one code nearer to zero than the expected one"
FURTHER = "is one code further from zero than the expected one"
ONE = "is one code from the expected one (above or below)"
FAR = "is more than one code away from the expected one"
RELATIONS = (DATA, NEIGHBOUR, FIRST, REINTERPRETED, SWAPPED, TOP_BIT, SIGN_LOST, SIGN_FLIPPED, ZERO, NAN, NOT_NAN,
             INF, ENDS, ABOVE, BELOW, NEARER, FURTHER, ONE, FAR)


def _ordinal(bits: np.ndarray, t: dtypes.ElemType) -> np.ndarray:
    """Codes in value order: integers as themselves; sign-magnitude floats as ±magnitude bits."""
    if t.is_integer:
        return np.asarray(t.from_bits(bits)).astype(np.int64)
    fmt = t.float_format
    b = bits.astype(np.int64)
    if not fmt.sign_bit:
        return b
    mag = b & ((1 << (fmt.width - 1)) - 1)
    return np.where((b >> (fmt.width - 1)) & 1, -mag, mag)


def relate(t: dtypes.ElemType, expected_flat: np.ndarray, where: np.ndarray, actual_bits: np.ndarray,
           data_flat: np.ndarray | None = None) -> Counter:
    """How many of the deviating elements at flat indices ``where`` (of an output whose expected
    codes are ``expected_flat``) show each relation, given their ``actual_bits``; ``data_flat``: the
    codes of a data input of the output's type and size, where the case has one."""
    e = np.asarray(expected_flat).astype(np.uint64)[where]
    a = np.asarray(actual_bits).astype(np.uint64)
    full = np.asarray(expected_flat).astype(np.uint64)
    out: Counter = Counter()
    if not len(a):
        return out
    e_nan, a_nan = t.is_nan_bits(e), t.is_nan_bits(a)
    cls_e, cls_a = codes.code_class(e, t), codes.code_class(a, t)
    if t.is_float:  # codes.FLOAT_LABELS: 0, 1 zeros; 8, 9 ±max; 10, 11 ±Inf
        inf_a = (cls_a == 10) | (cls_a == 11)
        finite_e = ~e_nan & (cls_e != 10) & (cls_e != 11)
        zero_a, zero_e = cls_a <= 1, cls_e <= 1
        ends_a, ends_e = (cls_a == 8) | (cls_a == 9), (cls_e == 8) | (cls_e == 9)
    else:  # codes.INT_LABELS: 0 zero; 1, 2 the type's ends
        inf_a, finite_e = np.zeros(len(a), bool), np.ones(len(a), bool)
        zero_a, zero_e = cls_a == 0, cls_e == 0
        ends_a, ends_e = (cls_a == 1) | (cls_a == 2), (cls_e == 1) | (cls_e == 2)
    both = ~e_nan & ~a_nan
    oe, oa = _ordinal(e, t), _ordinal(a, t)
    d = oa - oe
    sign_bit = np.uint64(1 << (t.bits - 1))
    far = ~(both & (np.abs(d) == 1))  # another element's value by chance is no finding when one code away
    none = np.zeros(len(a), bool)
    checks = {
        DATA: (np.asarray(data_flat).astype(np.uint64)[where] == a) if data_flat is not None else none,
        NEIGHBOUR: _neighbour(full, where, a) & far,
        FIRST: (full[0] == a) & (where != 0) & far,
        REINTERPRETED: _reinterpreted(e, a, t),
        SWAPPED: _swapped(e, t) == a if t.bits in (16, 32) else none,
        TOP_BIT: (e ^ sign_bit) == a if t.is_integer else none,
        SIGN_LOST: both & (oe < 0) & (oa == -oe),
        SIGN_FLIPPED: both & (oe != 0) & (oa == -oe),
        ZERO: zero_a & ~zero_e & ~e_nan,
        NAN: a_nan & finite_e,
        NOT_NAN: e_nan & ~a_nan,
        INF: inf_a & finite_e,
        ENDS: ends_a & ~ends_e & ~e_nan,
        ABOVE: both & (d == 1),
        BELOW: both & (d == -1),
        NEARER: both & (np.abs(d) == 1) & (np.abs(oa) < np.abs(oe)),
        FURTHER: both & (np.abs(d) == 1) & (np.abs(oa) > np.abs(oe)),
        ONE: both & (np.abs(d) == 1),
        FAR: both & (np.abs(d) > 1),
    }
    for name, hit in checks.items():
        k = int(np.count_nonzero(hit))
        if k:
            out[name] = k
    return out


def _neighbour(full: np.ndarray, where: np.ndarray, a: np.ndarray) -> np.ndarray:
    n = len(full)
    hit = np.zeros(len(a), bool)
    for step in (-1, 1):
        j = where + step
        ok = (j >= 0) & (j < n)
        hit[ok] |= full[j[ok]] == a[ok]
    return hit


def _swapped(e: np.ndarray, t: dtypes.ElemType) -> np.ndarray:
    nbytes = t.bits // 8
    out = np.zeros(e.shape, np.uint64)
    for i in range(nbytes):
        byte = (e >> np.uint64(8 * i)) & np.uint64(0xFF)
        out |= byte << np.uint64(8 * (nbytes - 1 - i))
    return out


def _reinterpreted(e: np.ndarray, a: np.ndarray, t: dtypes.ElemType) -> np.ndarray:
    """The expected value encoded as another float type of the same width (float16 as bfloat16, one
    float8 kind as another): a buffer written in one type and read as the other."""
    hit = np.zeros(len(a), bool)
    if not t.is_float or t.float_format.nan_style == "e8m0":
        return hit
    from qconform.oracle import floats

    values = floats.decode(e, t)
    for other in dtypes.TYPES.values():
        if other is t or not other.is_float or other.bits != t.bits or other.float_format.nan_style == "e8m0":
            continue
        try:
            with np.errstate(all="ignore"):
                enc = floats.encode(values, other, saturate=True).astype(np.uint64)
        except (ValueError, TypeError):
            continue
        back = floats.decode(enc, other)
        hit |= (enc == a) & (enc != e) & (back == values) & (values != 0)  # the same value, exactly, in the other type
    return hit


def ranked(counts: Counter) -> list[tuple[str, int]]:
    """The relations seen, the most frequent first, the more specific first among equals."""
    return sorted(counts.items(), key=lambda kv: (-kv[1], RELATIONS.index(kv[0])))


__all__ = ["RELATIONS", "ranked", "relate"]

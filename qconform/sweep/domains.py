"""Sweep domains (every input of a chunk), the canonical form of outputs, and digests.

* ``all``      every encoding of a type of at most 16 bits (float16 / bfloat16 inputs of
               QuantizeLinear; every input value of each quantized type for DequantizeLinear);
* ``sampled``  float32 inputs: both signs x all 256 exponents x structured significands (the top
               10 mantissa bits in all 1024 combinations x the low 13 bits in
               {0, 1, 0xFFF, 0x1000, 0x1001, 0x1FFF}: ties, just-below and just-above ties of every
               float8/float4/float16/bfloat16 rounding and of integer rounding), 3 * 2^20 inputs;
* ``full``     all 2^32 float32 bit patterns, in chunks of 2^24 (behind ``--domain full``).

A digest is the SHA-256 of the expected output codes in canonical form (little-endian codes; every
NaN code replaced by the type's canonical NaN, because implementations encode NaN differently and
NaNs compare as a class; don't-care elements -- NaN into a type without NaN, which the spec leaves
undefined -- set to 0). Golden digests are computed by the oracle (``oracle_digest``), never by a
kernel under test.
"""
from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from qconform import dtypes
from qconform.sweep.table import Sweep

#: Low 13 mantissa bits of the sampled float32 domain (see the module docstring).
SAMPLED_LOWS = (0x0, 0x1, 0xFFF, 0x1000, 0x1001, 0x1FFF)
SAMPLED_HI_BITS = 10


@dataclass(frozen=True)
class Domain:
    name: str
    size: int
    chunk: int

    @property
    def chunks(self) -> int:
        return -(-self.size // self.chunk)


def domain(sweep: Sweep, name: str) -> Domain:
    if name not in sweep.domains():
        raise ValueError(f"{sweep.id} has no domain {name!r}; it has {', '.join(sweep.domains())}")
    if name == "all":
        n = 1 << dtypes.get(sweep.x_type).bits
        return Domain(name, n, n)
    if name == "sampled":
        return Domain(name, 2 * 256 * (1 << SAMPLED_HI_BITS) * len(SAMPLED_LOWS), 1 << 20)
    return Domain(name, 1 << 32, 1 << 24)


def input_bits(sweep: Sweep, dom: Domain, chunk: int) -> np.ndarray:
    """Raw codes of x for one chunk (uint16 / uint32 / uint8 ...). A full-domain chunk comes in a
    buffer the next full-domain call in the same process overwrites: copy it to keep it."""
    lo = chunk * dom.chunk
    n = min(dom.chunk, dom.size - lo)
    t = dtypes.get(sweep.x_type)
    if dom.name == "all":
        return np.arange(lo, lo + n, dtype=np.uint32).astype(t.bits_dtype)
    if dom.name == "full":
        return np.add(_counting(n), np.uint32(lo), out=_chunk_buffer(n))
    j = np.arange(lo, lo + n, dtype=np.int64)
    nl = len(SAMPLED_LOWS)
    low = np.array(SAMPLED_LOWS, dtype=np.int64)[j % nl]
    hi = (j // nl) % (1 << SAMPLED_HI_BITS)
    exp = (j // (nl << SAMPLED_HI_BITS)) % 256
    sign = j // (nl << SAMPLED_HI_BITS) // 256
    return ((sign << 31) | (exp << 23) | (hi << (23 - SAMPLED_HI_BITS)) | low).astype(np.uint32)


@functools.cache
def _counting(n: int) -> np.ndarray:
    """0 .. n-1 as uint32, made once per process: a full chunk is then one addition (2^24 inputs)."""
    out = np.arange(n, dtype=np.uint32)
    out.flags.writeable = False
    return out


@functools.cache
def _chunk_buffer(n: int) -> np.ndarray:
    """One input buffer per process for full-domain chunks: a fresh 64 MiB array per chunk costs
    more in page faults than the addition. Each chunk is done with before the next is made."""
    return np.empty(n, dtype=np.uint32)


def inputs(sweep: Sweep, dom: Domain, chunk: int) -> np.ndarray:
    t = dtypes.get(sweep.x_type)
    bits = input_bits(sweep, dom, chunk)
    if t.is_float and bits.dtype.itemsize == t.dtype.itemsize:
        return bits.view(t.dtype)  # the codes are the array (no copy: 2^24 inputs per chunk)
    return t.from_bits(bits)


# ----------------------------------------------------------------------------------------------
# Canonical form and digests
# ----------------------------------------------------------------------------------------------
def canonical_nan(t: dtypes.ElemType) -> int | None:
    fmt = t.float_format
    if fmt is None or not fmt.has_nan:
        return None
    if fmt.nan_style == "fn":
        return (1 << (fmt.width - 1)) - 1
    if fmt.nan_style == "fnuz":
        return 1 << (fmt.width - 1)
    if fmt.nan_style == "e8m0":
        return 0xFF
    return (((1 << fmt.ebits) - 1) << fmt.mbits) | (1 << (fmt.mbits - 1))


@dataclass
class Canonicaliser:
    """Output codes -> canonical little-endian codes: every NaN code becomes ``canonical_nan``."""

    t: dtypes.ElemType

    def nan_mask(self, bits: np.ndarray) -> np.ndarray | None:
        fmt = self.t.float_format
        if fmt is None or not fmt.has_nan or fmt.nan_style in ("fnuz", "e8m0"):
            return None  # no NaN, or a single NaN code already
        mag = bits & bits.dtype.type((1 << (fmt.width - 1)) - 1)
        if fmt.nan_style == "fn":
            return mag == bits.dtype.type((1 << (fmt.width - 1)) - 1)
        return mag > bits.dtype.type(((1 << fmt.ebits) - 1) << fmt.mbits)  # ieee: exponent all ones, mantissa != 0

    @cached_property
    def renamed(self) -> tuple[int, ...] | None:
        """The codes canonical form changes (the other NaN codes), for types of at most 16 bits:
        a float8 output then costs one comparison per code, not a mask and a copy per chunk."""
        if self.t.bits > 16:
            return None
        codes = np.arange(1 << self.t.bits, dtype=np.uint32).astype(self.t.bits_dtype)
        changed = codes[self._canonical(codes) != codes]
        return tuple(int(c) for c in changed) if changed.size <= 8 else None

    def _canonical(self, bits: np.ndarray) -> np.ndarray:
        nan = self.nan_mask(bits)
        return bits.copy() if nan is None else np.where(nan, bits.dtype.type(canonical_nan(self.t)), bits)

    def __call__(self, out: np.ndarray, dont_care: np.ndarray | None) -> np.ndarray:
        bits = self.t.to_bits(out).reshape(-1)
        renamed = self.renamed
        if renamed is None:
            canon = self._canonical(bits)
        else:
            mask = np.zeros(bits.shape, bool)
            for code in renamed:
                mask |= bits == bits.dtype.type(code)
            if mask.any():
                canon = bits.copy()
                canon[mask] = canonical_nan(self.t)
            else:
                canon = bits.copy() if dont_care is not None else bits
        if dont_care is not None:
            canon[dont_care.reshape(-1)] = 0
        return canon.astype(canon.dtype.newbyteorder("<"), copy=False)


def dont_care(sweep: Sweep, x: np.ndarray) -> np.ndarray | None:
    """Elements whose result the spec leaves undefined: a NaN x into a type without NaN.

    (Checked against the oracle's own mask whenever goldens are computed.)"""
    out = dtypes.get(sweep.out_type)
    if sweep.op != "QuantizeLinear" or (out.float_format is not None and out.float_format.has_nan):
        return None
    xt = dtypes.get(sweep.x_type)
    if not xt.is_float:
        return None
    return xt.is_nan_bits(xt.to_bits(x)) if xt.bits <= 16 else np.isnan(x.astype(np.float32, copy=False))


def digest(canon: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(canon).data).hexdigest()


#: The oracle evaluates a chunk in slices this long: numpy's temporaries then stay in cache (~1.5x
#: faster than one 2^24 pass); the digest is the same, hashed slice by slice.
ORACLE_SLICE = 1 << 16


def oracle_case(sweep: Sweep, x: np.ndarray, primary_only: bool = False):
    from qconform.oracle import evaluate

    return evaluate(sweep.draft(x), primary_only=primary_only)


def oracle_digest(sweep: Sweep, dom: Domain, chunk: int) -> str:
    """The golden digest of one chunk, computed by the oracle's primary reading (the golden bytes;
    other readings are only consulted when a runner's chunk differs). Checks the don't-care rule."""
    x = inputs(sweep, dom, chunk)
    canonical = Canonicaliser(dtypes.get(sweep.out_type))
    h = hashlib.sha256()
    for lo in range(0, x.size, ORACLE_SLICE):
        xs = x[lo:lo + ORACLE_SLICE]
        case = oracle_case(sweep, xs, primary_only=True)
        mask = case.readings[0].dont_care[0]
        mine = dont_care(sweep, xs)
        theirs = np.zeros(xs.shape, bool) if mask is None else mask
        if not np.array_equal(theirs, np.zeros(xs.shape, bool) if mine is None else mine):
            raise AssertionError(f"{sweep.id}: the oracle's don't-care elements differ from sweep.dont_care")
        h.update(np.ascontiguousarray(canonical(case.expected[0], mine)).data)
    return h.hexdigest()



"""MatMulNBits-1 families (qconform/docs/semantics.md#ms-matmulnbits), each tied to its sentence:

- ``basic``: every ``bits`` value 2..8 ("which can take values from 2 to 8"), default zero point
  2^(bits−1), each type of A;
- ``block-sizes``: block_size 16 to 2,048 ("a power of 2 and not smaller than 16"), K below one
  block, on it, and with a tail (k_blocks = ceil(K / block_size): the last blob padded) up to 4,096;
- ``tails``: N not a multiple of the vector width (1, 7, 9, 15, 17, 33) and K tails;
- ``zero-points``: packed uint8 zero points with odd block counts (padding bits in the last byte),
  codes at both ends, and unpacked float zero points ("Unpacked (same type as A)");
- ``scales``: negative, non-power-of-two and per-block different scales; 1-D scales (information);
- ``bias``: "Bias to add to result. It should have shape [N]";
- ``g-idx``: the deprecated group index, as k // block_size (one value either way) or not (information);
- ``accuracy-level``: 0 to 4 with A that no permitted downcast or int8 quantization changes;
- ``batch``: A of rank 1 to 4;
- ``random``: seeded draws over everything above.

Values are dyadic and small, so each sum is exact in every order (#qdq-sum-order); A is sparse where
K is long so that the corpus stays small and float16 sums stay exact.
"""
from __future__ import annotations

import hashlib
from typing import Any, Callable, Iterator

import numpy as np

from qconform.case import Draft
from qconform.declarations.contrib_blocked import MATMUL_NBITS
from qconform.generators.common import array, by_family, draft, family_entries, specs
from qconform.declarations.contrib_blocked import pack_stream
from qconform.oracle.arith import fl

FAMILIES = ("basic", "block-sizes", "tails", "zero-points", "scales", "bias", "g-idx", "accuracy-level", "batch",
            "random")
_LABEL = MATMUL_NBITS.op


def _spec():
    return next((s for s in specs() if (s.domain, s.op) == MATMUL_NBITS.key), None)


def _rng(*key: Any) -> np.random.Generator:
    seed = hashlib.sha256("/".join(map(str, (_LABEL,) + key)).encode()).digest()
    return np.random.default_rng(int.from_bytes(seed[:8], "little"))


class Weights:
    """One draft's operands being put together: codes [N, K], scales and zero points [N, k_blocks]."""

    def __init__(self, t1: str, n: int, k: int, bits: int, bs: int, rng: np.random.Generator):
        self.t1, self.n, self.k, self.bits, self.bs, self.rng = t1, n, k, bits, bs, rng
        self.kb = -(-k // bs)
        self.codes = rng.integers(0, 1 << bits, (n, self.kb * bs))
        self.scales = np.full((n, self.kb), 0.25)
        self.zp: Any = None  # None: the default; "packed" codes; or a float array
        self.zp_codes = np.full((n, self.kb), 1 << (bits - 1))
        self.zp_pad_ones = False
        self.attrs: dict[str, Any] = {}

    def tail_garbage(self) -> None:
        """Padding codes past K are anything: every code of the padded blob set to its maximum."""
        self.codes[:, self.k:] = (1 << self.bits) - 1

    def packed_zero_points(self, codes: np.ndarray, pad_ones: bool = False) -> None:
        self.zp, self.zp_codes, self.zp_pad_ones = "packed", codes, pad_ones

    def b(self) -> np.ndarray:
        blob = self.bs * self.bits // 8
        return pack_stream(self.codes, self.bits, self.kb * blob).reshape(self.n, self.kb, blob)

    def zero_points(self) -> Any:
        if self.zp is None:
            return None
        if isinstance(self.zp, str):
            nbytes = -(-self.kb * self.bits // 8)
            packed = pack_stream(self.zp_codes, self.bits, nbytes)
            if self.zp_pad_ones and (self.kb * self.bits) % 8:
                used = (self.kb * self.bits) % 8
                packed[:, -1] |= np.uint8((0xFF << used) & 0xFF)
            return packed
        return array(self.t1, self.zp)

    def values(self, a: np.ndarray, bias: Any = None, g_idx: Any = None, scales: Any = None) -> dict[str, Any]:
        return {"A": array(self.t1, a), "B": self.b(), "scales": array(self.t1, self.scales if scales is None else scales),
                "zero_points": self.zero_points(), "g_idx": g_idx, "bias": None if bias is None else array(self.t1, bias)}

    def attributes(self) -> dict[str, Any]:
        out = {"K": self.k, "N": self.n, "bits": self.bits, "block_size": self.bs}
        out.update(self.attrs)
        return out


def sparse_a(rng: np.random.Generator, shape: tuple[int, ...], k: int, nonzero: int, amp: int, bs: int) -> np.ndarray:
    """A with ``nonzero`` small integer values per row, spread over K's blocks (the first and last
    positions, each block boundary's neighbours and the tail among them)."""
    a = np.zeros(shape + (k,))
    where = sorted({0, k - 1, min(bs, k - 1), max(k - bs, 0), k // 2} |
                   set(rng.integers(0, k, max(nonzero - 5, 0)).tolist()))
    for pos in where:
        a[..., pos] = rng.integers(-amp, amp + 1, shape)
    return a


_PRECISION = {"float32": 24, "float16": 11, "bfloat16": 8}


def _lowest_bits(v: np.ndarray) -> np.ndarray:
    """Per element, the largest power of two it is a multiple of (+inf for zeros)."""
    m, e = np.frexp(np.abs(v))
    mant = (m * 2.0 ** 53).astype(np.int64)
    low = np.where(mant != 0, mant & -mant, 1).astype(np.float64)
    return np.where(v != 0, np.exp2(e - 53 + np.log2(low)), np.inf)


def fits(w: Weights, a: np.ndarray, bias: Any) -> bool:
    """Whether the draft's sums are exact in every order: per output element, its terms multiples of
    their smallest power of two u and their magnitudes below 2^p·u (#qdq-sum-order), the budget the
    generator keeps so that the oracle accepts every draft."""
    blk = np.arange(w.k) // w.bs
    z = w.zp if isinstance(w.zp, np.ndarray) else w.zp_codes
    diff = w.codes[:, :w.k] - np.asarray(z, np.float64)[:, blk]
    wv = diff * w.scales[:, blk]
    if np.any(fl(w.t1, diff) != diff) or np.any(fl(w.t1, wv) != wv):
        return False
    terms = np.asarray(a, np.float64)[..., None, :] * wv
    if bias is not None:
        b = np.broadcast_to(np.asarray(bias, np.float64)[:, None], terms.shape[:-1] + (1,))
        terms = np.concatenate([terms, b], axis=-1)
    unit = _lowest_bits(terms).min(axis=-1)
    unit = np.where(np.isinf(unit), 1.0, unit)
    y = terms.sum(axis=-1)
    if np.any(np.all((terms == 0) & np.signbit(terms), axis=-1)):
        return False  # a sum of −0 terms only: its sign depends on where the accumulator starts
    return bool(np.all(np.abs(terms).sum(axis=-1) < 2.0 ** _PRECISION[w.t1] * unit) and np.all(fl(w.t1, y) == y))


def _smaller(a: np.ndarray) -> np.ndarray:
    """A with its magnitudes halved (rounded up: a nonzero stays nonzero), or once all are 1, with
    the last nonzero of each row that has more than one dropped (then of any row)."""
    if np.abs(a).max(initial=0) > 1:
        return np.sign(a) * np.ceil(np.abs(a) / 2)
    out = a.reshape(-1, a.shape[-1]).copy()
    several = (out != 0).sum(axis=-1) > 1
    rows = np.flatnonzero(several) if several.any() else np.flatnonzero((out != 0).any(axis=-1))
    for r in rows:
        out[r, np.flatnonzero(out[r])[-1]] = 0
    return out.reshape(a.shape)


def _draft(family: str, name: str, w: Weights, a: np.ndarray, note: str, **extra: Any) -> Draft | None:
    """The draft, with A's magnitudes halved until every order of the sums gives one value."""
    spec = _spec()
    if spec is None:
        return None
    types = {"T1": w.t1, "T2": "uint8", "T3": "uint8" if not isinstance(w.zp, np.ndarray) else w.t1, "T4": "int32"}
    for _ in range(64):
        if fits(w, a, extra.get("bias")):
            break
        a = _smaller(a)
    else:
        raise ValueError(f"{_LABEL} {family}/{name}: no A small enough makes the sums exact")
    return draft(spec, types, family, name, w.values(a, **extra), w.attributes(), clause="ms-matmulnbits", note=note)


def _shape(t1: str) -> int:
    return {"float32": 12, "float16": 3, "bfloat16": 1}[t1]


def _basic() -> Iterator[Draft]:
    for t1 in ("float32", "float16", "bfloat16"):
        for bits in range(2, 9):
            if t1 != "float32" and bits not in (2, 4, 8):
                continue
            for bs in ((16, 32) if bits in (2, 4, 8) else (16,)):
                rng = _rng("basic", t1, bits, bs)
                w = Weights(t1, 3, 2 * bs, bits, bs, rng)
                a = sparse_a(rng, (2,), w.k, 8, 3, bs)
                yield _draft("basic", f"bits{bits}-bs{bs}", w, a, f"{bits}-bit weights, default zero point")


def _block_sizes() -> Iterator[Draft]:
    for bs in (16, 32, 64, 128, 256, 512, 1024, 2048):
        ks = sorted({k for k in (bs // 2, bs - 1, bs, bs + 1, 3 * bs - 5, 4096 - 3) if 1 <= k <= 4096})
        for k in ks:
            for bits in (2, 4, 8):
                if bits == 2 and bs > 256 and k != bs:  # onnxruntime refuses these: a few cases say so
                    continue
                rng = _rng("block-sizes", bs, k, bits)
                w = Weights("float32", 3, k, bits, bs, rng)
                w.tail_garbage()
                w.scales = np.exp2(rng.integers(-4, -1, w.scales.shape).astype(float))
                a = sparse_a(rng, (1,), k, 12, 7, bs)
                yield _draft("block-sizes", f"bs{bs}-K{k}-bits{bits}", w, a,
                             f"block_size {bs}, K {k} ({w.kb} blocks, last padded where K % block_size != 0)")
        for bits in (3, 5, 6, 7):
            if bs == 128:
                rng = _rng("block-sizes-odd", bs, bits)
                w = Weights("float32", 3, bs + 3, bits, bs, rng)
                w.tail_garbage()
                yield _draft("block-sizes", f"bs{bs}-K{bs + 3}-bits{bits}", w, sparse_a(rng, (1,), bs + 3, 8, 5, bs),
                             f"{bits}-bit weights in a bit stream across bytes")
    for t1 in ("float16",):
        for bs in (16, 64, 256, 1024, 2048):
            for k in (bs // 2 + 1, bs + 5, 4096):
                if bs == 2048 and k == 4096:
                    continue
                rng = _rng("block-sizes-half", bs, k)
                w = Weights(t1, 3, k, 4, bs, rng)
                w.tail_garbage()
                yield _draft("block-sizes", f"{t1}-bs{bs}-K{k}", w, sparse_a(rng, (1,), k, 5, 2, bs),
                             f"float16 A, block_size {bs}, K {k}")


def _tails() -> Iterator[Draft]:
    for t1 in ("float32", "float16"):
        for n in (1, 7, 9, 15, 17, 33):
            for k in (17, 31, 33, 100):
                for bits in (2, 4, 8):
                    if t1 == "float16" and (bits == 2 or n in (9, 15)):
                        continue
                    bs = 16 if k < 64 else 32
                    rng = _rng("tails", t1, n, k, bits)
                    w = Weights(t1, n, k, bits, bs, rng)
                    w.tail_garbage()
                    m = 3 if t1 == "float32" else 1
                    yield _draft("tails", f"{t1}-N{n}-K{k}-bits{bits}", w,
                                 sparse_a(rng, (m,), k, 6, 3, bs), f"N = {n}, K = {k}")


def _zero_points() -> Iterator[Draft]:
    for bits in range(2, 9):
        for kb in (1, 2, 3, 5, 7):
            if bits in (3, 5, 6, 7) and kb != 3:
                continue
            for pad in (False, True):
                if pad and (kb * bits) % 8 == 0:
                    continue
                rng = _rng("zero-points", bits, kb, pad)
                k = 16 * kb - 3
                w = Weights("float32", 5, k, bits, 16, rng)
                zc = rng.integers(0, 1 << bits, (5, kb))
                zc[0, :] = 0
                zc[1, :] = (1 << bits) - 1
                w.packed_zero_points(zc, pad)
                yield _draft("zero-points", f"packed-bits{bits}-blocks{kb}" + ("-padding-ones" if pad else ""), w,
                             sparse_a(rng, (2,), k, 8, 3, 16),
                             f"packed {bits}-bit zero points, {kb} blocks" + (", padding bits set" if pad else ""))
    for t1 in ("float32", "float16", "bfloat16"):
        for bits in (2, 4, 8):
            for kind in ("integer", "half", "ends"):
                if (t1 == "bfloat16" or bits == 8) and kind != "integer" or bits == 8 and t1 == "float16":
                    continue
                rng = _rng("zero-points-float", t1, bits, kind)
                w = Weights(t1, 3, 40, bits, 16, rng)
                top = (1 << bits) - 1
                z = {"integer": rng.integers(0, top + 1, (3, w.kb)).astype(float),
                     "half": rng.integers(0, top, (3, w.kb)) + 0.5,
                     "ends": np.array([[0.0] * w.kb, [float(top)] * w.kb, [-1.0] * w.kb])}[kind]
                w.zp = z
                yield _draft("zero-points", f"float-{t1}-bits{bits}-{kind}", w, sparse_a(rng, (2,), 40, 6, 2, 16),
                             f"unpacked {t1} zero points ({kind})")


def _scales() -> Iterator[Draft]:
    kinds = {"negative": lambda r, s: -s, "odd-multiples": lambda r, s: s * r.choice([1.0, 3.0, 5.0, 0.75], s.shape),
             "per-block": lambda r, s: np.exp2(r.integers(-6, 2, s.shape).astype(float)),
             "large": lambda r, s: s * 2.0 ** 6, "small": lambda r, s: s * 2.0 ** -12,
             "mixed-sign": lambda r, s: s * r.choice([-1.0, 1.0], s.shape)}
    for t1 in ("float32", "float16"):
        for name, f in kinds.items():
            for bits in (2, 4, 8):
                rng = _rng("scales", t1, name, bits)
                w = Weights(t1, 4, 80, bits, 16, rng)
                w.scales = f(rng, w.scales)
                yield _draft("scales", f"{t1}-{name}-bits{bits}", w, sparse_a(rng, (2,), 80, 6, 2, 16),
                             f"scales: {name}")
    rng = _rng("scales-1d")
    w = Weights("float32", 4, 48, 4, 16, rng)
    yield _draft("scales", "one-dimensional", w, sparse_a(rng, (2,), 48, 6, 3, 16),
                 "1-D scales of N·k_blocks (an earlier text's form): information", scales=w.scales.reshape(-1))


def _bias() -> Iterator[Draft]:
    for t1 in ("float32", "float16", "bfloat16"):
        for bits in (2, 4, 8):
            for name in ("small", "large", "fraction"):
                if t1 == "bfloat16" and name != "small" or t1 == "float16" and name == "large":
                    continue
                rng = _rng("bias", t1, bits, name)
                w = Weights(t1, 5, 48, bits, 16, rng)
                b = {"small": rng.integers(-8, 9, 5).astype(float), "large": np.array([256.0, -512, 128, 0, 64]),
                     "fraction": np.array([0.5, -0.25, 0.125, 1.5, -2.75])}[name]
                yield _draft("bias", f"{t1}-bits{bits}-{name}", w, sparse_a(rng, (2,), 48, 6, 3, 16),
                             f"bias [N] ({name})", bias=b)


def _g_idx() -> Iterator[Draft]:
    for bs in (16, 32, 64):
        for k in (bs * 2, bs * 3 - 7):
            rng = _rng("g-idx", bs, k)
            w = Weights("float32", 3, k, 4, bs, rng)
            g = (np.arange(k) // bs).astype(np.int32)
            yield _draft("g-idx", f"identity-bs{bs}-K{k}", w, sparse_a(rng, (2,), k, 8, 3, bs),
                         "g_idx = k // block_size: one value whether applied or ignored", g_idx=g)
    rng = _rng("g-idx-permuted")
    w = Weights("float32", 3, 32, 4, 16, rng)
    yield _draft("g-idx", "permuted", w, sparse_a(rng, (2,), 32, 8, 3, 16),
                 "g_idx other than k // block_size: information", g_idx=(1 - np.arange(32) // 16).astype(np.int32))


def _lossless_int8(rng: np.random.Generator, m: int, k: int, bs: int, step: float) -> np.ndarray:
    """A whose every block holds multiples of ``step`` with one ±127·step: any int8 quantization of a
    block to amax/127 gives back A exactly."""
    kb = -(-k // bs)
    a = rng.integers(-127, 128, (m, kb * bs)).astype(float)
    a[:, ::bs] = 127 * rng.choice([-1.0, 1.0], (m, kb))
    return (a * step)[:, :k]


def _accuracy_level() -> Iterator[Draft]:
    for level in range(5):
        for bits in (2, 4, 8):
            for bs in (16, 32, 128):
                k = bs * 2 + (5 if bs < 128 else 0)
                rng = _rng("accuracy-level", level, bits, bs)
                w = Weights("float32", 3, k, bits, bs, rng)
                w.attrs["accuracy_level"] = level
                w.scales = np.exp2(rng.integers(-3, 0, w.scales.shape).astype(float))
                a = _lossless_int8(rng, 2, k, bs, 2.0 ** -4) if level == 4 else sparse_a(rng, (2,), k, 8, 7, bs)
                yield _draft("accuracy-level", f"level{level}-bits{bits}-bs{bs}", w, a,
                             f"accuracy_level {level}: A unchanged by what the level permits")


def _batch() -> Iterator[Draft]:
    for shape in ((), (1,), (2, 3), (2, 1, 2)):
        for bits in (2, 4, 8):
            rng = _rng("batch", shape, bits)
            w = Weights("float32", 5, 40, bits, 16, rng)
            a = sparse_a(rng, shape, 40, 6, 3, 16)
            yield _draft("batch", f"A{'x'.join(map(str, shape + (40,)))}-bits{bits}", w, a,
                         f"A of rank {len(shape) + 1}")


def _random() -> Iterator[Draft]:
    for i in range(220):
        rng = _rng("random", i)
        t1 = "float16" if i % 5 == 4 else "float32"
        bits = int(rng.choice([2, 4, 8]))
        bs = int(rng.choice([16, 32, 64, 128, 256]))
        k = int(rng.integers(1, 3 * bs + 1))
        n = int(rng.integers(1, 20))
        w = Weights(t1, n, k, bits, bs, rng)
        w.tail_garbage()
        w.scales = np.exp2(rng.integers(-5, 1, w.scales.shape).astype(float)) * rng.choice([-1.0, 1.0, 0.75], w.scales.shape)
        if rng.random() < 0.5:
            w.packed_zero_points(rng.integers(0, 1 << bits, (n, w.kb)), bool(rng.random() < 0.5))
        bias = rng.integers(-4, 5, n).astype(float) if rng.random() < 0.3 else None
        a = sparse_a(rng, (int(rng.integers(1, 4)),), k, 10, 3 if t1 == "float16" else 15, bs)
        yield _draft("random", f"{i:03d}", w, a, f"seeded draw {i}", bias=bias)


_GEN: dict[str, Callable[[], Iterator[Draft]]] = {
    "basic": _basic, "block-sizes": _block_sizes, "tails": _tails, "zero-points": _zero_points, "scales": _scales,
    "bias": _bias, "g-idx": _g_idx, "accuracy-level": _accuracy_level, "batch": _batch, "random": _random}


_F32, _F16, _BF16, _U8 = "float32", "float16", "bfloat16", "uint8"
#: (A's type, the zero points' type) each family drafts for.
_APPLIES: dict[str, set[tuple[str, str]]] = {
    "basic": {(_F32, _U8), (_F16, _U8), (_BF16, _U8)}, "block-sizes": {(_F32, _U8), (_F16, _U8)},
    "tails": {(_F32, _U8), (_F16, _U8)},
    "zero-points": {(_F32, _U8), (_F32, _F32), (_F16, _F16), (_BF16, _BF16)},
    "scales": {(_F32, _U8), (_F16, _U8)}, "bias": {(_F32, _U8), (_F16, _U8), (_BF16, _U8)},
    "g-idx": {(_F32, _U8)}, "accuracy-level": {(_F32, _U8)}, "batch": {(_F32, _U8)},
    "random": {(_F32, _U8), (_F16, _U8)}}


def applies(spec, combo: dict[str, str], family: str | None = None) -> bool:
    if (spec.domain, spec.op) != MATMUL_NBITS.key:
        return False
    key = (combo["T1"], combo["T3"])
    return any(key in _APPLIES[f] for f in (FAMILIES if family is None else (family,)))


def generate(family: str | None = None) -> Iterator[Draft]:
    return by_family(MATMUL_NBITS.key, FAMILIES, _GEN, family)


def entries() -> dict[str, Callable[[], Iterator[Draft]]]:
    """One ``generators.FAMILIES`` entry per family, keyed "matmul-nbits:<family>"."""
    return family_entries("matmul-nbits", FAMILIES, generate)

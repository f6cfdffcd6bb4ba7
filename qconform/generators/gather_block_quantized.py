"""GatherBlockQuantized-1 families (qconform/docs/semantics.md#ms-gather-block-quantized):

- ``basic``: int4, uint4 and uint8 data, every index and output type, default zero points ("the
  default value is 0 for int4/uint4, or 2^(bits-1) for uint8") and given ones;
- ``block-sizes``: 16 to 256, quantize_axis lengths that are not multiples of the block (a last block short);
- ``axes``: gather_axis and quantize_axis in each order, negative, rank 2 and 3;
- ``indices``: negative ("Values in [-s, s-1]"), out-of-range ("produces zeros"), rank 0 to 2;
- ``uint8-bits``: bits 2 and 4 packed along the last dimension, low-order bits first;
- ``float8``: FP8 and FP4 data, block_size 0 and broadcast scales (point 6).
"""
from __future__ import annotations

import hashlib
from typing import Any, Callable, Iterator

import numpy as np

from qconform.case import Draft
from qconform.declarations.contrib_blocked import GATHER_BLOCK_QUANTIZED
from qconform.generators.common import array, by_family, draft, family_entries, specs
from qconform.oracle import floats
from qconform import dtypes
from qconform.declarations.contrib_blocked import pack_stream

FAMILIES = ("basic", "block-sizes", "axes", "indices", "uint8-bits", "float8")
_INT = ("int4", "uint4", "uint8")
_FP = ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float4e2m1")


def _spec():
    return next((s for s in specs() if (s.domain, s.op) == GATHER_BLOCK_QUANTIZED.key), None)


def _rng(*key: Any) -> np.random.Generator:
    seed = hashlib.sha256("/".join(map(str, ("GBQ",) + key)).encode()).digest()
    return np.random.default_rng(int.from_bytes(seed[:8], "little"))


def _qrange(t1: str, bits: int) -> tuple[int, int]:
    return {"int4": (-8, 7), "uint4": (0, 15)}.get(t1, (0, (1 << bits) - 1))


def _scales(rng, shape, qa: int, bs: int, t2: str) -> np.ndarray:
    sshape = list(shape)
    sshape[qa] = 1 if bs == 0 else -(-shape[qa] // bs)
    s = np.exp2(rng.integers(-4, 2, sshape).astype(float)) * rng.choice([1.0, 0.75, -1.0, 1.25], sshape)
    return array(t2, s)


def _make(family: str, name: str, t1: str, t2: str, ti: str, shape: tuple[int, ...], idx: np.ndarray,
          attrs: dict[str, Any], rng, zp: bool = False, note: str = "", data: np.ndarray | None = None,
          scales: np.ndarray | None = None) -> Draft | None:
    spec = _spec()
    if spec is None:
        return None
    ga, qa = attrs.get("gather_axis", 0) % len(shape), attrs.get("quantize_axis", 1) % len(shape)
    bs, bits = attrs.get("block_size", 128), attrs.get("bits", 4)
    values: dict[str, Any] = {"indices": np.asarray(idx, dtypes.get(ti).dtype)}
    if t1 in _FP:
        vals = dtypes.get(t1).from_bits(rng.integers(0, 1 << dtypes.get(t1).bits, shape).astype(np.int64)) \
            if data is None else data
        fin = np.isfinite(floats.decode(dtypes.get(t1).to_bits(vals), dtypes.get(t1)))
        vals = np.where(fin, vals, array(t1, np.zeros(shape)))
        values["data"] = vals
    else:
        lo, hi = _qrange(t1, bits)
        codes = rng.integers(lo, hi + 1, shape)
        codes.reshape(-1)[:2] = (lo, hi)
        if t1 == "uint8" and bits < 8:
            values["data"] = pack_stream(codes.reshape(-1, shape[-1]), bits, shape[-1] * bits // 8).reshape(
                shape[:-1] + (shape[-1] * bits // 8,))
        else:
            values["data"] = array(t1, codes)
    values["scales"] = _scales(rng, shape, qa, bs, t2) if scales is None else scales
    if zp:
        lo, hi = _qrange(t1, bits)
        z = rng.integers(lo, hi + 1, values["scales"].shape)
        values["zero_points"] = array(t1, z)
    return draft(spec, {"T1": t1, "T2": t2, "Tind": ti}, family, name, values, attrs,
                 clause="ms-gather-block-quantized", note=note)


def _basic() -> Iterator[Draft]:
    for t1 in _INT:
        for t2 in ("float32", "float16", "bfloat16"):
            for ti in ("int32", "int64"):
                if t2 == "bfloat16" and ti == "int64":
                    continue
                for zp in (False, True):
                    rng = _rng("basic", t1, t2, ti, zp)
                    attrs = {"block_size": 16} if t1 != "uint8" else {"block_size": 16, "bits": 8}
                    idx = np.array([0, 3, 3, 5, 1])
                    yield _make("basic", "zero-points" if zp else "default-zero-point", t1, t2, ti, (6, 32), idx,
                                attrs, rng, zp, "a 2-D table, rows gathered")


def _block_sizes() -> Iterator[Draft]:
    for t1 in _INT:
        for bs in (16, 32, 64, 128, 256):
            for cols in (bs, bs + 16, 3 * bs - 16 if bs > 16 else 40):
                for zp in (False, True):
                    rng = _rng("block-sizes", t1, bs, cols, zp)
                    attrs = {"block_size": bs, **({"bits": 8} if t1 == "uint8" else {})}
                    yield _make("block-sizes", f"bs{bs}-cols{cols}" + ("-zp" if zp else ""), t1, "float32", "int64",
                                (3, cols), np.array([2, 0]), attrs, rng, zp,
                                f"block_size {bs} over {cols} columns")


def _axes() -> Iterator[Draft]:
    cases = [((32, 4), 1, 0, "quantize axis 0, gather axis 1"), ((4, 32), 0, 1, "default axes"),
             ((4, 32), -2, -1, "negative axes"), ((2, 5, 32), 1, 2, "rank 3"), ((2, 32, 3), 0, 1, "rank 3, middle"),
             ((2, 5, 32), 0, 2, "rank 3, gather 0"), ((32, 3, 2), 2, 0, "rank 3, quantize 0"),
             ((4, 48), 0, 1, "tail block")]
    for t1 in ("int4", "uint4"):
        for t2 in ("float32", "float16"):
            for i, (shape, ga, qa, note) in enumerate(cases):
                for zp in (False, True):
                    rng = _rng("axes", t1, t2, i, zp)
                    d = shape[ga]
                    idx = rng.integers(-d, d, 3)
                    yield _make("axes", f"{i}-{'x'.join(map(str, shape))}-g{ga}-q{qa}" + ("-zp" if zp else ""), t1, t2,
                                "int64", shape, idx, {"gather_axis": ga, "quantize_axis": qa, "block_size": 16}, rng, zp,
                                note)


def _indices() -> Iterator[Draft]:
    shapes = {"scalar": np.array(2), "negative": np.array([-1, -6, 0]), "rank2": np.array([[0, 1], [5, -2]]),
              "out-of-range-high": np.array([0, 6, 2]), "out-of-range-low": np.array([-7, 1]),
              "all-out": np.array([100, -100]), "repeated": np.array([4, 4, 4, 4])}
    for t1 in _INT:
        for ti in ("int32", "int64"):
            for name, idx in shapes.items():
                rng = _rng("indices", t1, ti, name)
                attrs = {"block_size": 16, **({"bits": 8} if t1 == "uint8" else {})}
                yield _make("indices", name, t1, "float32", ti, (6, 32), idx, attrs, rng, False,
                            f"indices {name}")


def _uint8_bits() -> Iterator[Draft]:
    for bits in (2, 4, 8):
        for t2 in ("float32", "float16"):
            for cols in (32, 48, 64):
                rng = _rng("uint8-bits", bits, t2, cols)
                yield _make("uint8-bits", f"bits{bits}-cols{cols}", "uint8", t2, "int64", (5, cols),
                            np.array([4, 0, 2]), {"bits": bits, "block_size": 16}, rng, bits == 8,
                            f"uint8 data of {bits}-bit codes packed along the last dimension")


def _float8() -> Iterator[Draft]:
    for t1 in _FP:
        for t2 in ("float32", "float16"):
            for bs, bshape in ((0, None), (16, None), (0, "per-tensor"), (32, "rows-shared")):
                rng = _rng("float8", t1, t2, bs, bshape)
                shape = (5, 64)
                scales = None
                if bshape == "per-tensor":
                    scales = array(t2, [[0.5]])
                elif bshape == "rows-shared":
                    scales = array(t2, np.exp2(rng.integers(-3, 2, (1, 2)).astype(float)))
                yield _make("float8", f"bs{bs}" + (f"-{bshape}" if bshape else ""), t1, t2, "int64", shape,
                            np.array([1, -1, 3]), {"block_size": bs}, rng, False,
                            "FP8/FP4 data: float(data) · scale", scales=scales)


_GEN: dict[str, Callable[[], Iterator[Draft]]] = {
    "basic": _basic, "block-sizes": _block_sizes, "axes": _axes, "indices": _indices, "uint8-bits": _uint8_bits,
    "float8": _float8}


_ALL_OUT = ("float32", "float16", "bfloat16")
#: (data types, output types, index types) each family drafts for.
_APPLIES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "basic": (_INT, _ALL_OUT, ("int32", "int64")), "block-sizes": (_INT, ("float32",), ("int64",)),
    "axes": (("int4", "uint4"), ("float32", "float16"), ("int64",)), "indices": (_INT, ("float32",), ("int32", "int64")),
    "uint8-bits": (("uint8",), ("float32", "float16"), ("int64",)), "float8": (_FP, ("float32", "float16"), ("int64",))}


def applies(spec, combo: dict[str, str], family: str | None = None) -> bool:
    if (spec.domain, spec.op) != GATHER_BLOCK_QUANTIZED.key:
        return False
    for f in (FAMILIES if family is None else (family,)):
        t1, t2, ti = _APPLIES[f]
        if f == "basic" and combo["T2"] == "bfloat16" and combo["Tind"] == "int64":
            continue
        if combo["T1"] in t1 and combo["T2"] in t2 and combo["Tind"] in ti:
            return True
    return False


def generate(family: str | None = None) -> Iterator[Draft]:
    return by_family(GATHER_BLOCK_QUANTIZED.key, FAMILIES, _GEN, family)


def entries() -> dict[str, Callable[[], Iterator[Draft]]]:
    """One ``generators.FAMILIES`` entry per family, keyed "gather-block-quantized:<family>"."""
    return family_entries("gather-block-quantized", FAMILIES, generate)

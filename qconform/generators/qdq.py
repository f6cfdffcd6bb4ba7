"""What the edge families share about QuantizeLinear/DequantizeLinear combinations.

A ``Combo`` names the roles of one schema type assignment (data, scale, output, zero point) so a
family reads ``c.x``/``c.s``/``c.y`` instead of type parameters, and builds drafts without
repeating the attribute rules (output_dtype, zero-point type, axis). Plus the value helpers every
family needs: representability in a type, float neighbours, and seeds derived from case ids."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import numpy as np

from qconform.declarations import operators
from qconform import dtypes, schemas
from qconform.case import Draft
from qconform.dtypes import ElemType
from qconform.generators.common import draft, input_types, output_types, type_signature
from qconform.oracle import floats
from qconform.schemas import OpSpec

QDQ_OPS = operators.QDQ


@dataclass(frozen=True)
class Combo:
    spec: OpSpec
    types: Mapping[str, str]

    @property
    def quantize(self) -> bool:
        return self.spec.op == "QuantizeLinear"

    @property
    def names(self) -> tuple[str, str, str]:
        return tuple(f.name for f in self.spec.inputs[:3])  # x, scale, zero point

    @property
    def x(self) -> ElemType:
        return dtypes.get(input_types(self.spec, self.types)[self.names[0]])

    @property
    def s(self) -> ElemType:
        return dtypes.get(input_types(self.spec, self.types)[self.names[1]])

    @property
    def y(self) -> ElemType:
        return dtypes.get(output_types(self.spec, self.types)["y"])

    @property
    def q(self) -> ElemType:
        """The quantized side: the output of QuantizeLinear, the input of DequantizeLinear."""
        return self.y if self.quantize else self.x

    @property
    def prefix(self) -> str:
        return f"{self.spec.key}/{type_signature(self.spec, self.types)}"

    def has(self, attr: str) -> bool:
        return attr in self.spec.attrs

    def base_attrs(self, with_zero_point: bool = True) -> dict[str, Any]:
        """Attributes the combination itself needs (qconform/docs/semantics.md#q-output-type, #dq-output-type)."""
        if self.quantize:
            if not with_zero_point and self.has("output_dtype"):
                return {"output_dtype": self.y.onnx}
            return {}
        if exponent_only(self.s) or (self.has("output_dtype") and self.y.name != self.s.name):
            return {"output_dtype": self.y.onnx}
        return {}

    @property
    def zero_point_is_zero(self) -> bool:
        """DequantizeLinear of int32 takes a zero point of 0 or none (qconform/docs/semantics.md#dq-int32)."""
        return not self.quantize and self.x.bits == 32 and self.x.is_integer

    def can_omit_zero_point(self) -> bool:
        return not self.quantize or self.has("output_dtype") or self.y.name == "uint8"

    def zero(self) -> float:
        """The zero point with room on both sides: mid-range for unsigned, 0 otherwise."""
        return mid_zero_point(self.q)

    def draft(self, family: str, name: str, x, scale, zp="default", *, attrs: Mapping[str, Any] | None = None,
              clause: str = "", note: str = "") -> Draft:
        """``zp="default"``: the type's zero value (0 for float and int32 inputs); None leaves it out."""
        if isinstance(zp, str):
            zp = np.zeros(np.shape(scale)) if zp == "default" else zp
        if zp is not None and self.zero_point_is_zero:
            zp = np.zeros(np.shape(scale))  # qconform/docs/semantics.md#dq-int32: zero point 0 or absent
        vals = dict(zip(self.names, (x, scale, zp)))
        full = {**self.base_attrs(zp is not None), **(attrs or {})}
        return draft(self.spec, self.types, family, name, vals, full, clause=clause, note=note)


def exponent_only(t: ElemType) -> bool:
    """A scale type with no significand (float8e8m0): scales are powers of two, nothing else."""
    return t.is_float and t.float_format.mbits == 0


def mid_zero_point(t: ElemType) -> float:
    if t.is_float:
        return 0.0
    lo, hi = t.qrange
    return float((lo + hi + 1) // 2) if lo == 0 else 0.0


def combos(quantize: bool | None = None) -> Iterator[Combo]:
    """Every valid ONNX-domain Q/DQ combination, in schema order."""
    for spec in schemas.all_specs():
        if spec.domain or spec.op not in QDQ_OPS:
            continue
        if quantize is not None and (spec.op == "QuantizeLinear") != quantize:
            continue
        for types in spec.combinations():
            yield Combo(spec, types)


def is_qdq(spec: OpSpec) -> bool:
    return not spec.domain and spec.op in QDQ_OPS


def seed(*parts: object) -> int:
    """A 64-bit seed from the case-id prefix (sha256; never Python's salted hash())."""
    return int.from_bytes(hashlib.sha256("/".join(map(str, parts)).encode()).digest()[:8], "little")


def rng(*parts: object) -> np.random.Generator:
    return np.random.default_rng(seed(*parts))


def representable(v: np.ndarray, t: ElemType) -> np.ndarray:
    """Which float64 values t holds exactly (finite ones only)."""
    v = np.asarray(v, dtype=np.float64)
    fin = np.isfinite(v)
    if t.is_integer:
        lo, hi = t.qrange
        return fin & (np.where(fin, v, 0) == np.round(np.where(fin, v, 0))) & (v >= lo) & (v <= hi)
    safe = np.where(fin, v, 0.0)
    if exponent_only(t):  # positive powers of two in range
        m, e = np.frexp(safe)
        fmt = t.float_format
        return fin & (m == 0.5) & (e - 1 >= fmt.emin) & (e - 1 <= fmt.emax)
    back = floats.decode(floats.encode(safe, t, saturate=False), t)
    return fin & (back == safe)


def keep(v, t: ElemType) -> np.ndarray:
    """The values of v that t represents exactly, order kept (duplicates dropped)."""
    v = np.asarray(v, dtype=np.float64).ravel()
    v = v[representable(v, t)]
    _, first = np.unique(np.stack([v, np.signbit(v)]), axis=1, return_index=True)
    return v[np.sort(first)]


def nextup(v: np.ndarray, t: ElemType) -> np.ndarray:
    """The next value of t above each representable finite v (inf/nan past the top)."""
    v = np.asarray(v, dtype=np.float64)
    if t.is_integer:
        return v + 1
    mag = floats.encode(np.abs(v), t, saturate=False).astype(np.int64)
    up = floats.decode(np.clip(mag + 1, 0, None).astype(np.uint64), t)
    down = floats.decode(np.clip(mag - 1, 0, None).astype(np.uint64), t)
    return np.where((v > 0) | ((v == 0)), up, -down)


def nextdown(v: np.ndarray, t: ElemType) -> np.ndarray:
    return -nextup(-np.asarray(v, dtype=np.float64), t)


def around(v, t: ElemType) -> np.ndarray:
    """Each value with its two neighbours in t: [down, v, up] per value, flattened."""
    v = np.asarray(v, dtype=np.float64)
    return np.stack([nextdown(v, t), v, nextup(v, t)], axis=-1).ravel()


def value_range(t: ElemType) -> tuple[float, float]:
    """Finite range of a type (integers: qrange)."""
    if t.is_integer:
        return tuple(map(float, t.qrange))
    m = t.float_format.max_finite
    return (-m if t.float_format.sign_bit else 0.0, m)


def pow2_scales(t: ElemType) -> tuple[float, float]:
    """Smallest and largest power of two of a scale type (normal range; integers: 1 and 2^30)."""
    if t.is_integer:
        return 1.0, float(2 ** (t.bits - 2))
    fmt = t.float_format
    return 2.0 ** fmt.emin, 2.0 ** fmt.emax


def sample_ints(lo: int, hi: int, edge: int = 8, spread: int = 48, mid: int | None = None) -> list[int]:
    """All of [lo, hi] if small, else both ends, around ``mid`` (default 0) and an even spread."""
    if hi - lo + 1 <= 2 * edge + 3 * spread:
        return list(range(lo, hi + 1))
    picks = set(range(lo, lo + edge)) | set(range(hi - edge + 1, hi + 1))
    mid = max(lo, min(0, hi)) if mid is None else int(mid)
    picks |= {k for k in range(mid - edge, mid + edge) if lo <= k <= hi}
    picks |= {int(v) for v in np.linspace(lo, hi, spread)}
    return sorted(picks)


def rotate(variants: list, key: str, n: int, start: int | None = None) -> list:
    """n of the variants, cyclically from ``start`` (default: a position derived from key)."""
    if not variants:
        return []
    start = seed(key) % len(variants) if start is None else start % len(variants)
    return [variants[(start + i) % len(variants)] for i in range(min(n, len(variants)))]


def primary(c: Combo) -> bool:
    """The combination that gets a family's full variant list for its quantized type: float32 data
    and scale (QuantizeLinear) or float32 scale and output (DequantizeLinear); the rest rotate."""
    if c.quantize:
        return c.x.name == "float32" and c.s.name == "float32"
    return c.s.name == "float32" and c.y.name == "float32"


def version_index(spec: OpSpec) -> int:
    """Position of the spec's version among its op's versions (consecutive windows per version)."""
    return schemas.IN_SCOPE[(spec.domain, spec.op)].index(spec.since)


def choose(variants: list, c: Combo, family: str, n_primary: int) -> list:
    """The variants a combination gets: primary ones n_primary in consecutive windows per version
    (so the versions together walk the list), the others one, from a hash of the case-id prefix."""
    if primary(c):
        return rotate(variants, "", n_primary, start=version_index(c.spec) * n_primary)
    return rotate(variants, f"{c.prefix}/{family}", 1)

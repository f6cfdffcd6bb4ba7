"""What the generators of onnxruntime's QOperator-format ops share (``generators/contrib_qlinear.py``,
``generators/qlinear_binary.py``, ``generators/qlinear_composed.py``): the type combination a case is
drafted for, seeded generators derived from the case's id, and codes of a type."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from qconform import dtypes
from qconform.case import Draft
from qconform.dtypes import ElemType
from qconform.generators.common import draft
from qconform.schemas import OpSpec


@dataclass(frozen=True)
class Combo:
    """One op version and one assignment of its type parameters."""

    spec: OpSpec
    types: Mapping[str, str]

    @property
    def op(self) -> str:
        return self.spec.op

    def t(self, param: str) -> ElemType:
        return dtypes.get(self.types[param])

    def rng(self, family: str, name: str) -> np.random.Generator:
        seed = hashlib.sha256(f"{self.spec.key}/{dict(self.types)}/{family}/{name}".encode()).digest()
        return np.random.default_rng(int.from_bytes(seed[:8], "little"))

    def draft(self, family: str, name: str, values: Mapping[str, Any], attrs: Mapping[str, Any] | None = None,
              note: str = "") -> Draft:
        return draft(self.spec, self.types, family, name, values, attrs or {}, note=note)


def lo_hi(t: ElemType) -> tuple[int, int]:
    lo, hi = t.qrange
    return int(lo), int(hi)


def mid(t: ElemType) -> int:
    lo, hi = lo_hi(t)
    return (lo + hi + 1) // 2


def codes(t: ElemType, shape, rng: np.random.Generator) -> np.ndarray:
    lo, hi = lo_hi(t)
    return rng.integers(lo, hi + 1, shape).astype(t.dtype)


def every_code(t: ElemType, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """All 2^8 codes of an 8-bit type, in order (exhaustive where the domain is small)."""
    lo, hi = lo_hi(t)
    v = np.arange(lo, hi + 1).astype(t.dtype)
    return v.reshape(shape) if shape else v


def f32(v: float) -> np.float32:
    return np.float32(v)


def zp(t: ElemType, v: int) -> np.ndarray:
    return np.asarray(v).astype(t.dtype)


__all__ = ["Combo", "codes", "every_code", "f32", "lo_hi", "mid", "zp"]

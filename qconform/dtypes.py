"""The type registry: one table of every element type in scope, read by everything else.

Adding a type is one row here (a float layout the ``FloatFormat`` fields describe needs nothing
more of the codec, which they drive), then the corpus and the few files
qconform/docs/guide-type.md names. No other module branches on type names.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any

import ml_dtypes
import numpy as np
from onnx import TensorProto


@dataclass(frozen=True)
class FloatFormat:
    """Bit layout of a binary floating-point kind.

    ``finite_nan``: how NaN is encoded when there is no Inf:
      ``"ieee"``   exponent all ones, mantissa ≠ 0 is NaN, mantissa 0 is Inf (float16/32, e5m2);
      ``"fn"``     only exponent and mantissa all ones is NaN, no Inf (e4m3fn);
      ``"fnuz"``   the single code 0x80 (negative zero's slot) is NaN; no Inf, no −0;
      ``"none"``   no NaN, no Inf (float4e2m1, float6);
      ``"e8m0"``   unsigned exponent-only scale: 0xFF is NaN, no zero, no sign.
    """

    ebits: int
    mbits: int
    bias: int
    nan_style: str

    @property
    def sign_bit(self) -> int:
        return 0 if self.nan_style == "e8m0" else 1

    @property
    def width(self) -> int:
        return self.sign_bit + self.ebits + self.mbits

    @property
    def has_inf(self) -> bool:
        return self.nan_style == "ieee"

    @property
    def has_nan(self) -> bool:
        return self.nan_style != "none"

    @property
    def has_negative_zero(self) -> bool:
        return self.nan_style in ("ieee", "fn", "none")

    @property
    def emax(self) -> int:
        """Largest unbiased exponent of a finite value."""
        top = (1 << self.ebits) - 1
        if self.nan_style in ("ieee",):
            return top - 1 - self.bias
        if self.nan_style == "e8m0":
            return top - 1 - self.bias
        return top - self.bias

    @property
    def emin(self) -> int:
        """Smallest unbiased exponent of a normal value."""
        return (0 if self.nan_style == "e8m0" else 1) - self.bias

    @property
    def max_finite(self) -> float:
        if self.nan_style == "e8m0":
            return float(2.0**self.emax)
        frac_max = (1 << self.mbits) - 1
        if self.nan_style == "fn":  # the all-ones mantissa at the top exponent is NaN
            frac_max -= 1
        return float((1 + frac_max / (1 << self.mbits)) * 2.0**self.emax)

    @property
    def min_subnormal(self) -> float:
        if self.nan_style == "e8m0":
            return float(2.0**self.emin)
        return float(2.0 ** (self.emin - self.mbits))


@dataclass(frozen=True)
class ElemType:
    """One ONNX element type: its names, storage and value facts."""

    name: str  # ONNX spelling, e.g. "float8e4m3fn"
    onnx: int  # TensorProto.DataType
    dtype: np.dtype  # numpy or ml_dtypes dtype of the unpacked array
    bits: int
    signed: bool
    float_format: FloatFormat | None = None

    @property
    def is_float(self) -> bool:
        return self.float_format is not None

    @property
    def is_integer(self) -> bool:
        return self.float_format is None

    @property
    def is_arithmetic(self) -> bool:
        """A float type arithmetic runs in: an IEEE binary layout (±Inf, NaN) of 16 bits or more, so
        float16, bfloat16 and float32; float8e5m2 shares the layout but only stores."""
        fmt = self.float_format
        return fmt is not None and fmt.nan_style == "ieee" and self.bits >= 16

    @property
    def is_half(self) -> bool:
        """An arithmetic float type narrower than float32 (float16, bfloat16)."""
        return self.is_arithmetic and self.bits < 32

    @property
    def is_float8(self) -> bool:
        """A signed 8-bit float: the float8 kinds QuantizeLinear produces by the Cast tables
        (float8e8m0, unsigned, is a scale type)."""
        return self.is_float and self.bits == 8 and self.signed

    @property
    def packed(self) -> bool:
        """Sub-byte types are stored two or four to a byte, LSB first (TensorProto)."""
        return self.bits < 8

    @cached_property
    def qrange(self) -> tuple[int, int]:
        """Integer range [qmin, qmax] (integer types only)."""
        if not self.is_integer:
            raise TypeError(f"{self.name} has no integer range")
        if self.signed:
            return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        return 0, (1 << self.bits) - 1

    @property
    def bits_dtype(self) -> np.dtype:
        """Unsigned integer dtype that holds one element's raw bits."""
        return np.dtype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[self.dtype.itemsize])

    def to_bits(self, arr: np.ndarray) -> np.ndarray:
        """Raw encoding of every element, high unused bits cleared (comparison works on this)."""
        arr = np.ascontiguousarray(arr, dtype=self.dtype).reshape(np.shape(arr))  # keep rank 0
        raw = arr.view(self.bits_dtype)
        if self.bits < 8 * self.dtype.itemsize:
            raw = raw & self.bits_dtype.type((1 << self.bits) - 1)
        return raw

    def from_bits(self, raw: np.ndarray) -> np.ndarray:
        """Inverse of ``to_bits`` (sign-extends sub-byte signed integers as ml_dtypes stores them)."""
        raw = np.asarray(raw).astype(self.bits_dtype)
        if self.is_integer and self.packed:  # two's-complement sign extension of the low bits, in uint8
            c = raw.astype(np.uint8) & np.uint8((1 << self.bits) - 1)
            if self.signed:
                shift = 8 - self.bits
                c = (c << np.uint8(shift)).view(np.int8) >> np.int8(shift)
            return np.asarray(c).astype(self.dtype)  # numpy ops on rank 0 give scalars: keep an array
        return raw.view(self.dtype).copy()

    def is_nan_bits(self, raw: np.ndarray) -> np.ndarray:
        """Which encodings are NaN (any payload, any sign)."""
        raw = np.asarray(raw).astype(np.uint64)
        fmt = self.float_format
        if fmt is None or not fmt.has_nan:
            return np.zeros(raw.shape, dtype=bool)
        if fmt.nan_style == "fnuz":
            return raw == (1 << (fmt.width - 1))
        if fmt.nan_style == "e8m0":
            return raw == 0xFF
        mag = raw & np.uint64((1 << (fmt.width - 1)) - 1)
        exp_all = np.uint64(((1 << fmt.ebits) - 1) << fmt.mbits)
        if fmt.nan_style == "fn":
            return mag == np.uint64((1 << (fmt.width - 1)) - 1)
        return ((mag & exp_all) == exp_all) & ((mag & np.uint64((1 << fmt.mbits) - 1)) != 0)

    def excused(self, expected: np.ndarray, actual: np.ndarray, dont_care: np.ndarray | None = None, *,
                strict_nan: bool = False) -> np.ndarray:
        """The elements the comparison rule does not judge by their bits: both NaN of this type
        (any NaN matches any NaN, unless ``strict_nan``), and those ``dont_care`` marks (the spec
        leaves their value undefined). ``expected`` and ``actual``: arrays of this type, one shape."""
        return self._excused(self.to_bits(expected), self.to_bits(actual), dont_care, strict_nan)

    def differs(self, expected: np.ndarray, actual: np.ndarray, dont_care: np.ndarray | None = None, *,
                strict_nan: bool = False) -> np.ndarray:
        """The comparison rule, element by element, written once (qconform/docs/semantics.md#principles):
        True where ``actual`` is not ``expected`` -- their raw bits differ (so -0 is not +0) and the
        element is not ``excused``. Every verdict, diagnosis, finding and sweep, and the oracle's
        de-duplication of readings, ask this; the mask comes with each call, so that each reading
        can carry its own."""
        eb, ab = self.to_bits(expected), self.to_bits(actual)
        return (eb != ab) & ~self._excused(eb, ab, dont_care, strict_nan)

    def _excused(self, eb: np.ndarray, ab: np.ndarray, dont_care: np.ndarray | None, strict_nan: bool) -> np.ndarray:
        if strict_nan or self.float_format is None or not self.float_format.has_nan:
            out = np.zeros(eb.shape, bool)
        else:
            out = self.is_nan_bits(eb) & self.is_nan_bits(ab)
        if dont_care is not None:
            out |= np.asarray(dont_care, bool)
        return out

    def all_values(self) -> np.ndarray:
        """Every encoding of a type of at most 16 bits, in code order (for exhaustive cases)."""
        if self.bits > 16:
            raise ValueError(f"{self.name} has too many encodings to list")
        return self.from_bits(np.arange(1 << self.bits, dtype=np.uint64))

    def __str__(self) -> str:
        return self.name


def _t(name: str, onnx_name: str, dtype, bits: int, signed: bool, fmt: FloatFormat | None = None) -> ElemType:
    return ElemType(name, getattr(TensorProto, onnx_name), np.dtype(dtype), bits, signed, fmt)


_TYPES = [
    _t("int2", "INT2", ml_dtypes.int2, 2, True),
    _t("uint2", "UINT2", ml_dtypes.uint2, 2, False),
    _t("int4", "INT4", ml_dtypes.int4, 4, True),
    _t("uint4", "UINT4", ml_dtypes.uint4, 4, False),
    _t("int8", "INT8", np.int8, 8, True),
    _t("uint8", "UINT8", np.uint8, 8, False),
    _t("int16", "INT16", np.int16, 16, True),
    _t("uint16", "UINT16", np.uint16, 16, False),
    _t("int32", "INT32", np.int32, 32, True),
    _t("int64", "INT64", np.int64, 64, True),  # shapes and indices in QDQ patterns; no Q/DQ type
    _t("float8e4m3fn", "FLOAT8E4M3FN", ml_dtypes.float8_e4m3fn, 8, True, FloatFormat(4, 3, 7, "fn")),
    _t("float8e4m3fnuz", "FLOAT8E4M3FNUZ", ml_dtypes.float8_e4m3fnuz, 8, True, FloatFormat(4, 3, 8, "fnuz")),
    _t("float8e5m2", "FLOAT8E5M2", ml_dtypes.float8_e5m2, 8, True, FloatFormat(5, 2, 15, "ieee")),
    _t("float8e5m2fnuz", "FLOAT8E5M2FNUZ", ml_dtypes.float8_e5m2fnuz, 8, True, FloatFormat(5, 2, 16, "fnuz")),
    _t("float4e2m1", "FLOAT4E2M1", ml_dtypes.float4_e2m1fn, 4, True, FloatFormat(2, 1, 1, "none")),
    _t("float6e2m3", "FLOAT6E2M3", ml_dtypes.float6_e2m3fn, 6, True, FloatFormat(2, 3, 1, "none")),
    _t("float6e3m2", "FLOAT6E3M2", ml_dtypes.float6_e3m2fn, 6, True, FloatFormat(3, 2, 3, "none")),
    _t("float8e8m0", "FLOAT8E8M0", ml_dtypes.float8_e8m0fnu, 8, False, FloatFormat(8, 0, 127, "e8m0")),
    _t("float16", "FLOAT16", np.float16, 16, True, FloatFormat(5, 10, 15, "ieee")),
    _t("bfloat16", "BFLOAT16", ml_dtypes.bfloat16, 16, True, FloatFormat(8, 7, 127, "ieee")),
    _t("float32", "FLOAT", np.float32, 32, True, FloatFormat(8, 23, 127, "ieee")),
]

TYPES: dict[str, ElemType] = {t.name: t for t in _TYPES}
BY_ONNX: dict[int, ElemType] = {t.onnx: t for t in _TYPES}
BY_DTYPE: dict[np.dtype, ElemType] = {t.dtype: t for t in _TYPES}
#: TensorProto codes whose raw bytes are a numpy array's own bytes (whole-byte elements: numpy's
#: types and ml_dtypes' 8- and 16-bit ones; sub-byte types are packed), by code and by dtype: where a
#: model is built and the corpus read without onnx's general converters (same bytes, same arrays).
#: Empty on a big-endian host (ONNX raw data is little-endian; onnx's converters swap there).
PLAIN_CODES: dict[int, np.dtype] = {
    **{t.onnx: t.dtype for t in _TYPES if t.bits % 8 == 0},
    TensorProto.DOUBLE: np.dtype("float64"), TensorProto.INT64: np.dtype("int64"),
    TensorProto.UINT32: np.dtype("uint32"), TensorProto.UINT64: np.dtype("uint64"),
} if np.little_endian else {}
PLAIN_DTYPES: dict[np.dtype, int] = {d: c for c, d in PLAIN_CODES.items()}



@cache
def having(capability: str) -> tuple[str, ...]:
    """The names of the types with a capability (an ``ElemType`` property such as ``"is_half"``), in
    table order: ``name in having("is_half")`` asks it of any name, one outside the registry
    ("float64") included."""
    if not isinstance(getattr(ElemType, capability, None), property):
        raise AttributeError(f"{capability!r} is not a capability of ElemType")
    return tuple(t.name for t in _TYPES if getattr(t, capability))


#: Float kinds that QuantizeLinear may produce and whose conversion obeys the Cast tables.
FLOAT8 = having("is_float8")


#: Keys already looked up (by their Python type too: ``np.dtype("float64") == "float"`` is true).
_FOUND: dict[tuple[type, Any], ElemType] = {}


def get(name_or_code: str | int | np.dtype | ElemType) -> ElemType:
    """Look a type up by ONNX name, TensorProto code, numpy dtype or ``tensor(x)`` string."""
    try:
        return _FOUND[type(name_or_code), name_or_code]
    except (KeyError, TypeError):  # TypeError: an unhashable key (a dtype-like object)
        pass
    found = _lookup(name_or_code)
    try:
        _FOUND[type(name_or_code), name_or_code] = found
    except TypeError:
        pass
    return found


def _lookup(name_or_code: str | int | np.dtype | ElemType) -> ElemType:
    if isinstance(name_or_code, ElemType):
        return name_or_code
    if isinstance(name_or_code, (int, np.integer)):
        return BY_ONNX[int(name_or_code)]
    if isinstance(name_or_code, str):
        key = name_or_code.removeprefix("tensor(").removesuffix(")")
        key = {"float": "float32", "double": "float64"}.get(key, key)
        if key in TYPES:
            return TYPES[key]
        raise KeyError(f"unknown element type {name_or_code!r}; known: {', '.join(TYPES)}")
    return BY_DTYPE[np.dtype(name_or_code)]

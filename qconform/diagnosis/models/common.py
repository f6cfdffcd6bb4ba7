"""Constants and helpers the deviation models share (arithmetic on codes and formats)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from qconform import dtypes
from qconform.declarations import operators
from qconform.oracle import floats
from qconform.oracle.arith import fl as _fl


#: The operators the models are written for, by their declarations (qconform/declarations/operators.py).
Q, DQ = operators.QUANTIZE_LINEAR.op, operators.DEQUANTIZE_LINEAR.op
DQL, QLMM = operators.DYNAMIC_QUANTIZE_LINEAR.op, operators.QLINEAR_MATMUL.op
QLCONV, CONVI, MMI = operators.QLINEAR_CONV.op, operators.CONV_INTEGER.op, operators.MATMUL_INTEGER.op


def swap_slots(arr: np.ndarray, t: dtypes.ElemType | str) -> np.ndarray:
    """What a correct (LSB-first) reader sees of data packed most-significant slot first.

    Byte j of the buffer holds elements k*j .. k*j+k-1 (k = 8 // bits) in reverse slot order, the
    final partial byte padded with zero codes; the result has arr's shape and type."""
    t = dtypes.get(t)
    if not t.packed:
        return arr
    k = 8 // t.bits
    codes = t.to_bits(arr).reshape(-1)
    n = codes.size
    padded = np.concatenate([codes, np.zeros((-n) % k, dtype=codes.dtype)])
    perm = padded.reshape(-1, k)[:, ::-1].reshape(-1)[:n]
    return t.from_bits(perm).reshape(np.shape(arr))


def _int32_cast(v: np.ndarray) -> np.ndarray:
    """x86 cvttsd2si / np.astype(int32): NaN, ±Inf and out-of-range -> INT_MIN; else the value."""
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(v) & (v >= -(2.0**31)) & (v < 2.0**31)
    return np.where(ok, v, -(2.0**31))


def _minifloat(t) -> bool:
    fmt = dtypes.get(t).float_format
    return fmt is not None and fmt.width <= 8 and fmt.nan_style != "e8m0"


def _bfloat16_from_float32_bits(v: np.ndarray, top: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """v rounded to float32, then to bfloat16 by ``top`` (float32 bits, uint64 -> the kept upper 16
    bits): the bit-level conversions hand-written kernels use. NaN keeps its float32 bits."""
    f32 = dtypes.get("float32")
    v32 = _fl(f32, v)
    bits = floats.encode(v32, f32, saturate=False).astype(np.uint64)
    kept = (top(bits) << np.uint64(16)) & np.uint64(0xFFFFFFFF)
    return floats.decode(np.where(np.isnan(v32), bits, kept), f32)


_F32 = "float32"

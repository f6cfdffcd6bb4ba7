"""Arrays qconform hands out <-> the raw bytes an ONNX runtime keeps, bit-exactly.

A runner receives inputs and must return outputs as numpy arrays; for the element types numpy
lacks (int2/uint2/int4/uint4, the float8 kinds, float8e8m0, float4e2m1, bfloat16) those are
*unpacked* ml_dtypes arrays, one element per array element. Most runtime bindings speak bytes
instead: a buffer in the ONNX layout, an element type and a shape. This module is the one place
that converts between the two; the bundled onnxruntime runner uses it for every type its Python
binding cannot carry.

The layout is TensorProto's ``raw_data`` layout, which runtimes also keep in memory:

* 8-, 16-, 32- and 64-bit types: each element's encoding, little-endian, in row-major order;
* 2-, 4- and 6-bit types: one little-endian bit stream, element ``i`` in stream bits
  ``bits * i`` .. ``bits * i + bits - 1``, least significant bit first (for 2 and 4 bits: ``8 // bits``
  elements per byte, the first in the low bits); the unused bits of a final partial byte are
  written as zero and ignored on read; ``ceil(bits * n / 8)`` bytes in all (onnx.proto, raw_data).

Only integer bit moves are applied -- no float arithmetic, no casts through another float type --
so NaN payloads, signed zeros and every other code survive both ways (``tests/test_adapt.py``
checks every code of every type, and the packing against onnx's own ``numpy_helper``).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from qconform import dtypes

__all__ = ["NUMPY_NATIVE", "dtype", "elem_type", "from_bytes", "from_codes", "from_tensor_proto", "nbytes", "pack",
           "to_bytes", "to_codes", "to_tensor_proto",
           "unpack"]

#: ONNX element types (``onnx.TensorProto`` codes) whose arrays are plain numpy arrays; every other
#: qconform type is an ml_dtypes array, which a binding that only knows numpy cannot carry.
NUMPY_NATIVE: frozenset[int] = frozenset(
    t.onnx for t in dtypes.TYPES.values() if t.dtype.type.__module__.split(".")[0] == "numpy")


def elem_type(dt: np.dtype | type | str) -> int:
    """The ONNX element type (``onnx.TensorProto`` code) of a qconform array dtype."""
    return dtypes.get(np.dtype(dt)).onnx


def dtype(onnx_type: int) -> np.dtype:
    """The numpy / ml_dtypes dtype qconform uses for an ONNX element type."""
    return dtypes.get(int(onnx_type)).dtype


def _type(onnx_type: int) -> dtypes.ElemType:
    return dtypes.get(int(onnx_type))


def nbytes(onnx_type: int, shape: Sequence[int]) -> int:
    """Bytes a tensor of this type and shape occupies in the ONNX layout."""
    t = _type(onnx_type)
    count = math.prod(int(d) for d in shape)  # math.prod: numpy's costs more than the rest of a small tensor's decoding
    bits = t.bits if t.packed else 8 * t.dtype.itemsize
    return -(-count * bits // 8)


def to_codes(array: np.ndarray) -> np.ndarray:
    """Each element's raw encoding, as unsigned integers of the element's width (same shape)."""
    return dtypes.get(array.dtype).to_bits(array)


def from_codes(codes: np.ndarray, onnx_type: int) -> np.ndarray:
    """Inverse of ``to_codes``: the qconform array holding these encodings (same shape)."""
    return dtypes.get(int(onnx_type)).from_bits(np.asarray(codes))


def to_bytes(array: np.ndarray) -> bytes:
    """The ONNX-layout bytes of a qconform array (any type qconform hands out, any shape)."""
    return pack(np.asarray(array).dtype, to_codes(np.asarray(array))).tobytes()


def pack(dt: np.dtype, codes: np.ndarray) -> np.ndarray:
    """Raw codes (any shape) of elements of ``dt`` -> the ONNX-layout bytes, as a flat uint8 array."""
    t = dtypes.get(np.dtype(dt))
    codes = np.ascontiguousarray(codes).reshape(-1)
    if not t.packed:
        return codes.astype(t.bits_dtype.newbyteorder("<"), copy=False).view(np.uint8)
    if 8 % t.bits:  # 6-bit: the general bit stream
        stream = np.unpackbits(codes.astype(np.uint8)[:, None], axis=1, bitorder="little")[:, : t.bits]
        return np.packbits(stream.reshape(-1), bitorder="little")
    per = 8 // t.bits
    n = codes.size
    padded = np.zeros(-(-n // per) * per, dtype=np.uint8)
    padded[:n] = codes.astype(np.uint8) & np.uint8((1 << t.bits) - 1)
    slots = padded.reshape(-1, per)
    out = np.zeros(slots.shape[0], dtype=np.uint8)
    for i in range(per):
        out |= slots[:, i] << np.uint8(t.bits * i)
    return out


def unpack(onnx_type: int, raw: np.ndarray, count: int) -> np.ndarray:
    """ONNX-layout bytes (flat uint8) -> ``count`` raw codes, flat, in the element's width."""
    t = _type(onnx_type)
    if not t.packed:
        return raw[: count * t.dtype.itemsize].view(t.bits_dtype.newbyteorder("<")).astype(t.bits_dtype)
    if 8 % t.bits:  # 6-bit: the general bit stream
        stream = np.unpackbits(raw, bitorder="little")[: count * t.bits].reshape(count, t.bits)
        return np.packbits(stream, axis=1, bitorder="little").reshape(count).astype(t.bits_dtype)
    per = 8 // t.bits
    mask = np.uint8((1 << t.bits) - 1)
    slots = np.empty((raw.size, per), dtype=np.uint8)
    for i in range(per):
        slots[:, i] = (raw >> np.uint8(t.bits * i)) & mask
    return slots.reshape(-1)[:count].astype(t.bits_dtype)


def from_bytes(data: bytes | bytearray | memoryview | np.ndarray, onnx_type: int, shape: Sequence[int]) -> np.ndarray:
    """The qconform array of an ONNX-layout buffer. The byte count must be exactly the layout's:
    a runtime whose buffer is longer or shorter does not keep the layout above, and guessing would
    make up bits."""
    shape = tuple(int(d) for d in shape)
    want = nbytes(onnx_type, shape)
    raw = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data.reshape(-1).view(np.uint8)
    if raw.size != want:
        t = dtypes.get(int(onnx_type))
        raise ValueError(f"{t.name}{list(shape)} takes {want} bytes in the ONNX layout, got {raw.size}")
    return from_codes(unpack(onnx_type, raw, math.prod(shape)), onnx_type).reshape(shape)


def to_tensor_proto(array: np.ndarray, name: str = "") -> bytes:
    """An array as serialised ONNX TensorProto bytes: ``raw_data`` in the ONNX layout (sub-byte types
    packed), so every type crosses a file or a socket bit-exactly (the device protocol, offline results)."""
    import onnx

    array = np.asarray(array)
    t = onnx.TensorProto()
    t.name = name
    t.data_type = elem_type(array.dtype)
    t.dims.extend(array.shape)
    t.raw_data = to_bytes(array)
    return t.SerializeToString()


def from_tensor_proto(data: bytes) -> np.ndarray:
    """Serialised TensorProto bytes as a qconform array: ``raw_data`` through ``from_bytes`` (exact
    byte count), else onnx's reading of the typed fields (``float_data``, ``int32_data``, ...)."""
    import onnx

    t = onnx.TensorProto()
    t.ParseFromString(data)
    if t.raw_data or not any((t.float_data, t.int32_data, t.int64_data, t.double_data, t.uint64_data)):
        return from_bytes(t.raw_data, t.data_type, t.dims)
    from onnx import numpy_helper

    return numpy_helper.to_array(t)

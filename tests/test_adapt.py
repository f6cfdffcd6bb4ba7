"""qconform.adapt, the public bytes adapter: every code of every type survives both ways, and the
layout is onnx's own (checked against onnx.numpy_helper, an independent implementation)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper

from qconform import adapt, dtypes

TYPES = sorted(dtypes.TYPES)


def _every_code(t: dtypes.ElemType) -> np.ndarray:
    if t.bits <= 16:
        return np.arange(1 << t.bits, dtype=np.uint64).astype(t.bits_dtype)
    rng = np.random.default_rng(t.onnx)  # 32-bit types: the extremes and a sample
    edge = np.array([0, 1, (1 << (t.bits - 1)) - 1, 1 << (t.bits - 1), (1 << t.bits) - 1], dtype=np.uint64)
    return np.concatenate([edge, rng.integers(0, 1 << t.bits, 4096, dtype=np.uint64)]).astype(t.bits_dtype)


@pytest.mark.parametrize("name", TYPES)
def test_every_code_survives_both_ways(name):
    t = dtypes.TYPES[name]
    codes = _every_code(t)
    arr = adapt.from_codes(codes, t.onnx)
    assert arr.dtype == t.dtype and adapt.elem_type(arr.dtype) == t.onnx and adapt.dtype(t.onnx) == t.dtype
    data = adapt.to_bytes(arr)
    assert len(data) == adapt.nbytes(t.onnx, arr.shape)
    back = adapt.from_bytes(data, t.onnx, arr.shape)
    assert back.dtype == t.dtype and np.array_equal(adapt.to_codes(back), codes)


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("shape", [(), (0,), (1,), (3,), (5,), (2, 3), (7, 1, 3)])
def test_the_layout_is_onnx_raw_data(name, shape):
    t = dtypes.TYPES[name]
    rng = np.random.default_rng(sum(shape) + t.onnx)
    codes = rng.integers(0, 1 << t.bits, size=shape, dtype=np.uint64).astype(t.bits_dtype)
    arr = adapt.from_codes(codes, t.onnx)
    proto = numpy_helper.from_array(arr)
    assert proto.data_type == t.onnx
    assert adapt.to_bytes(arr) == proto.raw_data
    assert np.array_equal(adapt.to_codes(numpy_helper.to_array(proto)), codes)
    back = adapt.from_bytes(proto.raw_data, t.onnx, shape)
    assert isinstance(back, np.ndarray) and back.shape == shape  # rank 0 too: an array, never a numpy scalar
    assert isinstance(t.from_bits(codes), np.ndarray)


def test_sub_byte_packing_is_lsb_first_and_pads_with_zero():
    i4 = dtypes.TYPES["int4"].onnx
    assert adapt.to_bytes(adapt.from_codes(np.array([0x1, 0x2, 0xF], np.uint8), i4)) == bytes([0x21, 0x0F])
    u2 = dtypes.TYPES["uint2"].onnx
    assert adapt.to_bytes(adapt.from_codes(np.array([1, 2, 3, 0, 1], np.uint8), u2)) == bytes([0b00111001, 0b01])
    f6 = dtypes.TYPES["float6e2m3"].onnx
    x = np.array([0x3F, 0x01, 0x20, 0x15], np.uint8)  # byte0 = x0 | (x1 & 3) << 6, ... (onnx.proto)
    assert adapt.to_bytes(adapt.from_codes(x, f6)) == bytes([0x3F | 1 << 6, 0 | (0x20 & 0xF) << 4,
                                                             0x20 >> 4 | 0x15 << 2])


def test_big_endian_never_leaks_and_signed_zero_and_nan_payloads_survive():
    f16 = np.array([-0.0, np.nan], np.float16)
    f16[1:] = np.frombuffer(b"\x01\x7e", np.float16)  # a NaN with a payload
    assert adapt.to_bytes(f16) == b"\x00\x80\x01\x7e"
    back = adapt.from_bytes(b"\x00\x80\x01\x7e", dtypes.TYPES["float16"].onnx, (2,))
    assert back.view(np.uint16).tolist() == [0x8000, 0x7E01]


def test_a_wrong_byte_count_is_refused():
    with pytest.raises(ValueError, match=r"int4\[3\] takes 2 bytes in the ONNX layout, got 3"):
        adapt.from_bytes(b"\0\0\0", dtypes.TYPES["int4"].onnx, (3,))


def test_numpy_native_is_exactly_the_types_without_ml_dtypes():
    native = {t.name for t in dtypes.TYPES.values() if t.onnx in adapt.NUMPY_NATIVE}
    assert native == {"int8", "uint8", "int16", "uint16", "int32", "int64", "float16", "float32"}

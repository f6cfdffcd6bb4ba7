"""The declarations of onnxruntime's weight-only and dynamic com.microsoft ops (MatMulNBits, GatherBlockQuantized, MatMulIntegerToFloat, DynamicQuantizeMatMul): one ``Operator`` each, joined to
``operators.OPERATORS``. Their schema is onnxruntime's registered one (version 1, com.microsoft).

Each ``schema`` table is onnxruntime 1.32.0's registered schema
(``onnxruntime.capi.onnxruntime_pybind11_state.get_all_operator_schema()``): inputs (name, type
parameter, optional) in order, outputs, attributes with their defaults (None: required or no
default), type constraints. onnxruntime is an optional dependency, so the table is stored;
tests/test_contrib_blocked.py compares it with the installed onnxruntime's where there is one.

Kinds: ``Kind`` has no kind for "dequantize, then a float computation"; MatMulNBits and
GatherBlockQuantized are declared ``INTEGER`` (their features read scales and zero points by role,
none positionally), MatMulIntegerToFloat ``INTEGER`` (an integer accumulation, then a scale) and
DynamicQuantizeMatMul ``DYNAMIC`` (it computes A's scale and zero point itself).
"""
from __future__ import annotations

import numpy as np

from qconform.case import MS_DOMAIN
from qconform.declarations.operator import Input, Kind, Operator, Role

D, W, S, Z, B = Role.DATA, Role.WEIGHT, Role.SCALE, Role.ZERO_POINT, Role.BIAS
_FLOATS = ("float32", "float16", "bfloat16")

#: Reading names of the float scale products of MatMulIntegerToFloat and DynamicQuantizeMatMul
#: (semantics.md#ms-scale-products): the association of acc · a_scale · b_scale, then how the bias
#: is added (rounded apart, or fused into one rounding with the product).
SCALE_READINGS = ("scales-multiplied-first", "scales-applied-in-turn", "scaled-exactly",
                  "scales-multiplied-first-fused-bias", "scales-applied-in-turn-fused-bias",
                  "scaled-exactly-fused-bias")
#: float16 outputs (MatMulIntegerToFloat): each step in float16, or in float32 and rounded once at the end.
HALF_READINGS = ("steps-in-float32",)
#: GatherBlockQuantized's out-of-range indices: "produces zeros" (+0 first, −0 permitted).
FILL_READINGS = ("negative-zero-fill",)
_DQ_READINGS = ("multiply-in-output-type", "multiply-in-float32-then-round", "multiply-exact-then-round")

# -- the packed layout of MatMulNBits' B and zero points and of GatherBlockQuantized's uint8 data
# ("the first 4 bits are stored in the lower 4 bits of a byte"; semantics.md#ms-matmulnbits-layout)
def unpack_stream(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The first ``count`` ``bits``-bit codes of each row of uint8 bytes (last axis), read as one bit
    stream with the low-order bits of each byte first (int64)."""
    flat = np.unpackbits(np.ascontiguousarray(packed, np.uint8), axis=-1, bitorder="little")
    usable = (flat.shape[-1] // bits) * bits
    groups = flat[..., :usable].reshape(flat.shape[:-1] + (-1, bits)).astype(np.int64)
    codes = (groups << np.arange(bits, dtype=np.int64)).sum(axis=-1)
    if codes.shape[-1] < count:
        raise ValueError(f"{codes.shape[-1]} packed {bits}-bit codes where {count} are needed")
    return codes[..., :count]


def pack_stream(codes: np.ndarray, bits: int, nbytes: int) -> np.ndarray:
    """The inverse of ``unpack_stream`` (rows of codes -> rows of ``nbytes`` bytes, zero-padded)."""
    codes = np.asarray(codes, np.int64)
    bitarr = ((codes[..., None] >> np.arange(bits)) & 1).astype(np.uint8)
    bitarr = bitarr.reshape(codes.shape[:-1] + (-1,))
    pad = nbytes * 8 - bitarr.shape[-1]
    if pad < 0:
        raise ValueError(f"{codes.shape[-1]} {bits}-bit codes do not fit {nbytes} bytes")
    bitarr = np.concatenate([bitarr, np.zeros(bitarr.shape[:-1] + (pad,), np.uint8)], axis=-1)
    return np.packbits(bitarr, axis=-1, bitorder="little")



MATMUL_NBITS = Operator(
    MS_DOMAIN, "MatMulNBits", (1,), Kind.INTEGER,
    (Input("A", D), Input("B", W), Input("scales", S, "B"), Input("zero_points", Z, "B"),
     Input("g_idx", W), Input("bias", B)), ("Y",),
    "ms-matmulnbits", (), kernel=True,  # no "matmul" contraction: B is [N, K] blobs
    arithmetic_attrs=("K", "N", "bits", "block_size", "accuracy_level"),
    schema={"inputs": (("A", "T1", False), ("B", "T2", False), ("scales", "T1", False),
                       ("zero_points", "T3", True), ("g_idx", "T4", True), ("bias", "T1", True)),
            "outputs": (("Y", "T1"),),
            "attrs": {"K": None, "N": None, "accuracy_level": 0, "bits": 4, "block_size": None,
                      "weight_prepacked": 0},
            "types": {"T1": _FLOATS, "T2": ("uint8",), "T3": ("uint8", "float16", "float32", "bfloat16"),
                      "T4": ("int32",)}})
GATHER_BLOCK_QUANTIZED = Operator(
    MS_DOMAIN, "GatherBlockQuantized", (1,), Kind.INTEGER,
    (Input("data", W), Input("indices", D), Input("scales", S, "data"), Input("zero_points", Z, "data")),
    ("output",), "ms-gather-block-quantized",
    _DQ_READINGS + FILL_READINGS + tuple(f"{r}+{FILL_READINGS[0]}" for r in _DQ_READINGS[1:]), output_like="scales",
    kernel=True, arithmetic_attrs=("bits", "block_size", "gather_axis", "quantize_axis"),
    schema={"inputs": (("data", "T1", False), ("indices", "Tind", False), ("scales", "T2", False),
                       ("zero_points", "T1", True)),
            "outputs": (("output", "T2"),),
            "attrs": {"bits": 4, "block_size": 128, "gather_axis": 0, "quantize_axis": 1},
            "types": {"T1": ("int4", "uint4", "uint8", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2",
                             "float8e5m2fnuz", "float4e2m1"),
                      "T2": _FLOATS, "Tind": ("int32", "int64")}})
MATMUL_INTEGER_TO_FLOAT = Operator(
    MS_DOMAIN, "MatMulIntegerToFloat", (1,), Kind.INTEGER,
    (Input("A", D), Input("B", W), Input("a_scale", S, "A"), Input("b_scale", S, "B", -1),
     Input("a_zero_point", Z, "A"), Input("b_zero_point", Z, "B", -1), Input("bias", B)), ("Y",),
    "ms-scale-products", SCALE_READINGS + tuple(f"{r}+{HALF_READINGS[0]}" for r in SCALE_READINGS), output_like="a_scale",
    contraction="matmul", kernel=True,
    schema={"inputs": (("A", "T1", False), ("B", "T2", False), ("a_scale", "T3", False), ("b_scale", "T3", False),
                       ("a_zero_point", "T1", True), ("b_zero_point", "T2", True), ("bias", "T3", True)),
            "outputs": (("Y", "T3"),), "attrs": {},
            "types": {"T1": ("int8", "uint8"), "T2": ("int8", "uint8"), "T3": ("float32", "float16")}})
DYNAMIC_QUANTIZE_MATMUL = Operator(
    MS_DOMAIN, "DynamicQuantizeMatMul", (1,), Kind.DYNAMIC,
    (Input("A", D), Input("B", W), Input("b_scale", S, "B", -1), Input("b_zero_point", Z, "B", -1),
     Input("bias", B)), ("Y",),
    "ms-scale-products", SCALE_READINGS + tuple(f"{r}+quotient-exact" for r in SCALE_READINGS), contraction="matmul", kernel=True,
    schema={"inputs": (("A", "T1", False), ("B", "T2", False), ("b_scale", "T1", False),
                       ("b_zero_point", "T2", True), ("bias", "T1", True)),
            "outputs": (("Y", "T1"),), "attrs": {},
            "types": {"T1": ("float32",), "T2": ("int8", "uint8")}})

OPERATORS: tuple[Operator, ...] = (MATMUL_NBITS, GATHER_BLOCK_QUANTIZED, MATMUL_INTEGER_TO_FLOAT,
                                   DYNAMIC_QUANTIZE_MATMUL)

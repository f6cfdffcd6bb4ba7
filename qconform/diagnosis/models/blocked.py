"""onnxruntime's weight-only and dynamic ops done another way: MatMulNBits' packed layout and blocks,
GatherBlockQuantized's default zero points, DynamicQuantizeMatMul's A left unquantized (each a mixin
over one step of ``qconform/oracle/contrib_blocked.py``; semantics.md §9.5-9.7)."""
from __future__ import annotations

import numpy as np

from qconform.declarations.contrib_blocked import (DYNAMIC_QUANTIZE_MATMUL, GATHER_BLOCK_QUANTIZED, MATMUL_NBITS,
                                                   unpack_stream)
from qconform.oracle.arith import as_float64
from qconform.diagnosis.models.base import _dev

NBITS, GBQ, DQMM = MATMUL_NBITS.op, GATHER_BLOCK_QUANTIZED.op, DYNAMIC_QUANTIZE_MATMUL.op


class NbitsRowStrideFromK:
    """B's rows taken K·bits/8 bytes apart, as if the last blob of a row held no padding."""

    def weight_codes(self, b, k, bits, bs):
        n = b.shape[0]
        flat = np.ascontiguousarray(b).reshape(-1)
        stride = -(-k * bits // 8)
        rows = [np.concatenate([flat[r * stride:(r + 1) * stride], np.zeros(stride, np.uint8)])[:stride]
                for r in range(n)]
        return unpack_stream(np.stack(rows), bits, k)


class NbitsZeroPointsAcrossRows:
    """Packed zero points read as one bit stream over all N·k_blocks codes (no per-row padding)."""

    def packed_zero_points(self, zp, kb, bits):
        n = zp.shape[0]
        return unpack_stream(zp.reshape(1, -1), bits, n * kb).reshape(n, kb).astype(np.float64)


class NbitsLargeBlockZeros:
    """No kernel for a block_size above 256: Y is left as allocated, zeros."""

    def block_sums(self, terms, precision, where, block_size):
        if block_size > 256:
            return np.zeros(terms.shape[:-1])
        return super().block_sums(terms, precision, where, block_size)


class GbqDefaultZeroPointBySign:
    """The default zero point chosen by signedness: unsigned data (uint4 too) gets 2^(bits−1)."""

    def default_zero_point(self, data_type, bits):
        return 0.0 if data_type == "int4" else float(1 << (bits - 1))


class GbqUint8DefaultZeroPointZero:
    """The default zero point 0 for every data type, uint8 too."""

    def default_zero_point(self, data_type, bits):
        return 0.0


class DqmmANotQuantized:
    """A used as it is: Y = A · ((B − b_zero_point) · b_scale) + bias, a float matmul, no quantization
    of A (its values stand for codes with scale 1 and zero point 0)."""

    def quantized_a(self, a):
        return [("", as_float64(a.value, a.type), 1.0, 0)]


def _attr(d, name, default):
    return int(d.attrs.get(name, default))


def _k_tail_rows(d) -> bool:
    return d.op == NBITS and _attr(d, "K", 0) % _attr(d, "block_size", 16) != 0 and _attr(d, "N", 1) > 1


def _odd_packed_zero_points(d) -> bool:
    if d.op != NBITS or len(d.inputs) < 4 or d.inputs[3] is None or d.inputs[3].type != "uint8":
        return False
    kb = -(-_attr(d, "K", 0) // _attr(d, "block_size", 16))
    return (kb * _attr(d, "bits", 4)) % 8 != 0 and _attr(d, "N", 1) > 1


def _gbq_default(data_type: str):
    def applies(d) -> bool:
        return d.op == GBQ and d.inputs[0].type == data_type and (len(d.inputs) < 4 or d.inputs[3] is None)
    return applies


DEVIATIONS = [
    _dev("nbits-row-stride-from-k", NBITS,
         "Your MatMulNBits steps from one row of B to the next by K·bits/8 bytes instead of k_blocks·blob_size, "
         "so where K is not a multiple of block_size every row after the first reads its weights shifted by the "
         "padding of the rows before it.",
         "ROCm/hip-ep#588 (the int4 naive kernel's row stride K / 2: 2152 bytes where 135·16 = 2160, Gemma-4's "
         "vision down_proj, K=4304, block_size=32) and ROCm/hip-ep#720 (the same K / 2 in its WMMA dequantizer).",
         "MatMulNBits 4-bit, K=20, block_size=16, N=2: row 1 starts 10 bytes in instead of 16",
         NbitsRowStrideFromK, _k_tail_rows, ("block-sizes", "tails", "random")),
    _dev("nbits-zero-points-packed-across-rows", NBITS,
         "Your MatMulNBits reads packed uint8 zero points as one stream over all N·k_blocks codes, the earlier "
         "text's 1-D layout, where each row is packed on its own and padded to whole bytes.",
         "microsoft/onnxruntime#22253 (the spec's shape formulas for the flat packed zero points, "
         "CeilDiv(N·n_blocks_per_col·bits, 8)); robertknight/rten#1337 (accepts the 1-D layout of earlier "
         "versions beside the 2-D one); microsoft/onnxruntime#28530's review (a 2-bit zero point indexed across "
         "the flattened scales instead of per row).",
         "MatMulNBits 4-bit, 3 blocks per row, N=2, packed zero points: row 1's first zero point is read from the "
         "high nibble of row 0's second byte",
         NbitsZeroPointsAcrossRows, _odd_packed_zero_points, ("zero-points", "random")),
    _dev("nbits-large-block-zeros", NBITS,
         "Your MatMulNBits has no kernel for a block_size above 256 and returns Y as allocated: all zeros.",
         "microsoft/onnxruntime#28551 (CPU EP, onnxruntime 1.26.0: bits=4, block_size=512 gives an all-zero "
         "output with no warning; 16 to 256 correct).",
         "MatMulNBits 4-bit, K=2048, block_size=512, codes 2, zero points 3, scales 0.5: −1024 per output "
         "expected, 0 given",
         NbitsLargeBlockZeros, lambda d: d.op == NBITS and _attr(d, "block_size", 16) > 256, ("block-sizes",)),
    _dev("gbq-unsigned-default-zero-point-midpoint", GBQ,
         "Your GatherBlockQuantized picks the default zero point by signedness, so uint4 data without zero "
         "points is dequantized around 8 where the text's default for int4/uint4 is 0.",
         "ROCm/hip-ep#609 (the default chosen from is_signed_data: uint4 embedding tables published without "
         "zero_points come back shifted by −8·scale on every gathered row).",
         "GatherBlockQuantized uint4 data of code 10, no zero_points, scale 0.5: 5.0 expected, 1.0 given",
         GbqDefaultZeroPointBySign, _gbq_default("uint4"), ("basic", "block-sizes", "axes")),
    _dev("gbq-uint8-default-zero-point-zero", GBQ,
         "Your GatherBlockQuantized uses 0 as the default zero point of uint8 data, where the text's default "
         "is 2^(bits−1).",
         "microsoft/onnxruntime#31692 (CUDA's implicit zero point 0 against the CPU's 8 for 4-bit uint8 data, "
         "every embedding row offset by 8·scale); microsoft/onnxruntime#26506 (fixes the CUDA kernel's uint8 "
         "default zero point).",
         "GatherBlockQuantized uint8 data (bits 4) of code 10, no zero_points, scale 0.5: 1.0 expected, 5.0 given",
         GbqUint8DefaultZeroPointZero, _gbq_default("uint8"), ("uint8-bits", "basic", "block-sizes")),
    _dev("dqmm-a-not-quantized", DQMM,
         "Your DynamicQuantizeMatMul multiplies A as given by the dequantized B (a float matmul) instead of "
         "quantizing A to uint8 with the dynamic quantizer first, so Y misses the rounding of A's scale and codes.",
         "openvinotoolkit/openvino src/frontends/onnx/frontend/src/op/com.microsoft/dynamic_quantize_matmul.cpp "
         "(\"Technically this does not do DynamicQuantization ... It will implement A * B_dequantized + bias\"); "
         "OpenVINO in this suite's run: DynamicQuantizeMatMul 1x1x1, A=34.5, B=111, b_scale=0.25 gives 957.375 "
         "where the quantized path gives 957.37506.",
         "DynamicQuantizeMatMul A=[[3, -2, 1]] (scale 5/255 rounds), B int8, b_scale 0.25: A·B·0.25 exactly "
         "instead of acc·fl(fl(5/255)·0.25)",
         DqmmANotQuantized, lambda d: d.op == DQMM, ("dynamic", "basic")),
]

"""onnxruntime's MatMulNBits as the kernels run it (the declaration whose section is ``ms-matmulnbits``):
Y = A · dequantized(B)ᵀ (+ bias), B's bits-bit codes in blocks along K (semantics.md#ms-matmulnbits).

The host checks the shapes the oracle checks (the same InvalidModel refusals) and hands the packed
bytes over as they are: the header reads B's and the zero points' bit streams, dequantizes and sums
(qkernels.h's ``qk_nbits1``). g_idx and accuracy_level change nothing the oracle computes (its first
and only reading, 'spec': g_idx other than k // block_size is an information case, and accuracy_level
only admits cases whose A no permitted downcast changes), so the kernel reads neither.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from qconform import dtypes
from qconform.declarations.operator import Operator, Role
from qconform.kernels import KIND, Launch, codes, storage_dtype
from qconform.kernels.node import Execute, Node, need, single_launch
from qconform.oracle.base import InvalidModel

SECTIONS = ("ms-matmulnbits",)
FLOATS = ("float32", "float16", "bfloat16")


@dataclass
class NBitsPlan:
    node: Node
    decl: Operator
    t1: str

    def launch(self, feeds: Mapping[str, np.ndarray]) -> tuple[Launch, tuple[int, ...]]:
        d, arrays, attrs = self.decl, self.node.arrays(feeds), self.node.attrs
        a_name, b_name = d.of_role(Role.DATA)[0].name, d.of_role(Role.WEIGHT)[0].name
        s_in, z_in = d.params_of(b_name)
        bias_in = d.of_role(Role.BIAS)[0]
        a, b, s, z, bias = (d.arg(arrays, x) for x in (a_name, b_name, s_in.name, z_in.name, bias_in.name))
        k, n = int(attrs["K"]), int(attrs["N"])
        bits, bs = int(attrs.get("bits", 4)), int(attrs["block_size"])
        if not 2 <= bits <= 8:
            raise InvalidModel(f"bits={bits}: 'bits' can take values from 2 to 8")
        if bs < 16 or bs & (bs - 1):
            raise InvalidModel(f"block_size={bs}: must be a power of 2 and not smaller than 16")
        if int(attrs.get("weight_prepacked", 0)) != 0:
            raise InvalidModel("weight_prepacked != 0: an EP-specific layout")
        if not 0 <= int(attrs.get("accuracy_level", 0)) <= 4:
            raise InvalidModel("accuracy_level: 0 to 4")
        if a.ndim < 1 or a.shape[-1] != k:
            raise InvalidModel(f"A of shape {a.shape}: its last dimension is K = {k}")
        kb, blob = -(-k // bs), bs * bits // 8
        if b.shape != (n, kb, blob):
            raise InvalidModel(f"B of shape {b.shape}: (N, k_blocks, blob_size) = {(n, kb, blob)}")
        if s.shape not in ((n, kb), (n * kb,)):
            raise InvalidModel(f"scales of shape {s.shape}: (N, k_blocks) = {(n, kb)}")
        t = dtypes.get(self.t1)
        zmode, zrow, zc = 0, 0, np.zeros(1, np.uint8)
        if z is not None:
            zt = self.node.types[d.index(z_in.name)]
            if zt == "uint8":
                zrow = -(-kb * bits // 8)
                if z.size != n * zrow:
                    raise InvalidModel(f"packed zero_points of shape {z.shape}: (N, ceil(k_blocks·bits/8)) = {(n, zrow)}")
                zmode, zc = 1, np.ascontiguousarray(z, np.uint8).reshape(-1)
            else:
                if zt != self.t1:
                    raise InvalidModel(f"unpacked zero_points of type {zt}: the same type as A ({self.t1})")
                if z.shape != (n, kb):
                    raise InvalidModel(f"zero_points of shape {z.shape}: (N, k_blocks) = {(n, kb)}")
                zmode, zc = 2, codes(z, t)
        if bias is not None and bias.shape != (n,):
            raise InvalidModel(f"bias of shape {bias.shape}: [N] = [{n}]")
        rows = int(np.prod(a.shape[:-1], dtype=np.int64))
        args = dict(a=codes(a, t), ak=KIND[self.t1], b=np.ascontiguousarray(b, np.uint8).reshape(-1), rowbytes=kb * blob,
                    s=codes(s, t), z=zc, zmode=zmode, zrow=zrow,
                    bias=np.zeros(1, storage_dtype(t)) if bias is None else codes(bias, t), has_bias=int(bias is not None),
                    rows=rows, kdim=k, ndim=n, bits=bits, bs=bs, kb=kb)
        size = rows * n
        return Launch("matmul_nbits", args, {"y": (storage_dtype(t), size)}, size), tuple(a.shape[:-1]) + (n,)

    def run(self, feeds: Mapping[str, np.ndarray], execute: Execute) -> list[np.ndarray]:
        return single_launch(lambda: self.launch(feeds), execute, self.t1)


def read(node: Node, decl: Operator, who: str) -> NBitsPlan:
    types = dict(zip((i.name for i in decl.inputs), node.types))
    a_name = decl.of_role(Role.DATA)[0].name
    need(who, a_name, types.get(a_name), FLOATS)
    return NBitsPlan(node, decl, types[a_name])


__all__ = ["FLOATS", "NBitsPlan", "SECTIONS", "read"]

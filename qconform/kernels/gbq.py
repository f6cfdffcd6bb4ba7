"""onnxruntime's GatherBlockQuantized as the kernels run it (the declaration whose section is
``ms-gather-block-quantized``): output = (data − zero_point) · scale gathered along gather_axis, the
scales and zero points in blocks along quantize_axis (semantics.md#ms-gather-block-quantized).

The host plans indices only: which logical data element each output element reads (-1 for an index
out of range) and which scale / zero point; it checks the shapes the oracle checks (the same
InvalidModel refusals). The header reads the codes (packed uint8 rows as bit streams), subtracts the
zero point and multiplies in the output type: the oracle's first reading, multiply-in-output-type,
with +0 for an out-of-range index (qkernels.h's ``qk_gbq1``).
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
from qconform.oracle.contrib_blocked import gbq_attributes

SECTIONS = ("ms-gather-block-quantized",)
DATA = ("int4", "uint4", "uint8", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float4e2m1")
OUT = ("float32", "float16", "bfloat16")
FIRST = "multiply-in-output-type"


@dataclass
class GbqPlan:
    node: Node
    decl: Operator
    data_t: str
    out_t: str

    def launch(self, feeds: Mapping[str, np.ndarray]) -> tuple[Launch, tuple[int, ...]]:
        d, arrays, attrs = self.decl, self.node.arrays(feeds), self.node.attrs
        data_name, idx_name = d.of_role(Role.WEIGHT)[0].name, d.of_role(Role.DATA)[0].name
        s_in, z_in = d.params_of(data_name)
        data, indices, s, z = (d.arg(arrays, x) for x in (data_name, idx_name, s_in.name, z_in.name))
        t = dtypes.get(self.data_t)
        r = data.ndim
        ga, qa, bs, bits = gbq_attributes(self.data_t, r, attrs, z is not None)
        pbits, last, rowbytes, shape = 0, 1, 1, tuple(data.shape)
        if not t.is_float and self.data_t == "uint8" and bits < 8:
            pbits, rowbytes = bits, data.shape[-1]
            last = data.shape[-1] * 8 // bits
            shape = tuple(data.shape[:-1]) + (last,)
        dim = shape[qa]
        nblk = 1 if bs == 0 else -(-dim // bs)
        if s.ndim != r:
            raise InvalidModel(f"scales of rank {s.ndim}: the same rank as data ({r})")
        for i in range(r):
            if not (s.shape[i] == (nblk if i == qa else shape[i]) or (t.is_float and i != qa and s.shape[i] == 1)):
                raise InvalidModel(f"scales of shape {s.shape} for data of shape {shape} (quantize_axis {qa}, block_size {bs})")
        zmode = 0
        if z is not None and not pbits:
            if z.shape != s.shape:
                raise InvalidModel(f"zero_points of shape {z.shape}: the shape of scales {s.shape}")
            zmode = 1
        blk = np.arange(dim) // (dim if bs == 0 else bs)
        sidx = np.broadcast_to(np.take(np.arange(s.size, dtype=np.int64).reshape(s.shape), blk, axis=qa), shape)
        src = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
        n_ga = shape[ga]
        iv = indices.astype(np.int64)
        outside = (iv < -n_ga) | (iv >= n_ga)
        picked = np.where(outside, 0, np.where(iv < 0, iv + n_ga, iv))
        mask = outside.reshape((1,) * ga + outside.shape + (1,) * (r - ga - 1))
        src_out = np.where(mask, -1, np.take(src, picked, axis=ga))
        sidx_out = np.take(sidx, picked, axis=ga)
        out_shape = src_out.shape
        size = int(src_out.size)
        dk = KIND[self.data_t]
        args = dict(data=np.ascontiguousarray(data, np.uint8).reshape(-1) if pbits else codes(data, t), dk=dk,
                    pbits=pbits, last=last, rowbytes=rowbytes, src=np.ascontiguousarray(src_out.reshape(-1)),
                    sidx=np.ascontiguousarray(np.broadcast_to(sidx_out, out_shape).reshape(-1)),
                    s=codes(s, dtypes.get(self.out_t)), z=codes(z, t) if zmode else np.zeros(1, np.uint8), zmode=zmode,
                    dz=(1 << (bits - 1)) if self.data_t == "uint8" else 0, ok=KIND[self.out_t], n=size)
        return Launch("gather_block_quantized", args, {"y": (storage_dtype(dtypes.get(self.out_t)), size)}, size), out_shape

    def run(self, feeds: Mapping[str, np.ndarray], execute: Execute) -> list[np.ndarray]:
        return single_launch(lambda: self.launch(feeds), execute, self.out_t)


def read(node: Node, decl: Operator, who: str) -> GbqPlan:
    types = dict(zip((i.name for i in decl.inputs), node.types))
    data_name = decl.of_role(Role.WEIGHT)[0].name
    need(who, data_name, types.get(data_name), DATA)
    out = types[decl.output_like]
    need(who, "output", out, OUT)
    if decl.readings[0] != FIRST:
        raise ValueError(f"{who}: first reading {decl.readings[0]}, the kernel computes {FIRST}")
    return GbqPlan(node, decl, types[data_name], out)


__all__ = ["DATA", "GbqPlan", "OUT", "SECTIONS", "read"]

"""qconform's own reference kernels: ``qkernels.h`` and its parts (``PARTS``), one C source for the host and the device.

``build`` compiles it with gcc for the ``cpu-kernel`` runner; ``ptx`` compiles it with NVRTC to the
one linted PTX that ``qconform/runners/gpu_kernel.py`` loads through CuPy; ``plan`` reads a node into
kernel launches. This module holds what every side shares: the kernel ABI (kind numbers, each entry
point's parameters, one ``Launch``) and the codes the kernels read and write.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from qconform import dtypes
from qconform.oracle.granularity import expand, granularity

#: The kernels' one C source, in parts by concern (none over 600 lines), in the order they form the one
#: translation unit that both compilers read through ``source()``: build.py's gcc and ptx.py's NVRTC
#: (which resolves no #include from disk). ``qkernels.h`` comes first: the rules, kinds and rounding.
PARTS: tuple[Path, ...] = tuple(Path(__file__).with_name(name) for name in (
    "qkernels.h", "qk_contraction.h", "qk_blocked.h", "qk_windows.h", "qk_functions.h", "qk_entries.h"))


def source() -> str:
    """The assembled translation unit: each part after a ``#line`` directive naming it, so a compiler's
    message points into the part; the host build key and the PTX (its digest, its lint) are of this text."""
    texts = (p.read_text() for p in PARTS)
    return "".join(f'#line 1 "{p.name}"\n{t}' + ("" if t.endswith("\n") else "\n") for p, t in zip(PARTS, texts))


def cache_root() -> Path:
    """Where built kernels live: ``$QCONFORM_CACHE_DIR``, else ``$XDG_CACHE_HOME/qconform`` (default
    ``~/.cache/qconform``); the host library under ``kernels/``, approved PTX under ``ptx/``."""
    if os.environ.get("QCONFORM_CACHE_DIR"):
        return Path(os.environ["QCONFORM_CACHE_DIR"]).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "qconform"

#: Kernel kind numbers, in the order of the header's enum (tests check each row against dtypes).
KINDS: tuple[str, ...] = (
    "int2", "uint2", "int4", "uint4", "int8", "uint8", "int16", "uint16", "int32",
    "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float4e2m1", "float6e2m3",
    "float6e3m2", "float8e8m0", "float16", "bfloat16", "float32",
)
KIND: dict[str, int] = {name: i for i, name in enumerate(KINDS)}

#: Kernel style numbers (the header's QK_STYLE_*), by the registry's FloatFormat.nan_style.
STYLE: dict[str, int] = {"int": 0, "ieee": 1, "fn": 2, "fnuz": 3, "none": 4, "e8m0": 5}

#: Precisions the kernel computes a quotient in (a kernel fact: the oracle says which one a node asks for);
#: int32 is the integer division of an int32 scale at QuantizeLinear-23+ (qkernels.h: qk_int_quotient).
PRECISIONS = ("float32", "float16", "bfloat16", "int32")


def kind(name: str) -> int:
    return KIND[dtypes.get(name).name]


@dataclass(frozen=True)
class ParamIndex:
    """How element i of x finds its scale / zero point: the header's qk_param_index arguments.

    a = (i // inner) % axis_len; parameter = outer * s_outer + (a // block) * s_axis + (i % inner) * s_inner.
    """

    inner: int = 1
    axis_len: int = 0  # 0: per-tensor
    block: int = 1
    s_outer: int = 0
    s_axis: int = 0
    s_inner: int = 0

    @property
    def args(self) -> tuple[int, ...]:
        return self.inner, self.axis_len, self.block, self.s_outer, self.s_axis, self.s_inner


def param_index(x_shape: tuple[int, ...], p_shape: tuple[int, ...], axis: int | None, block_size: int) -> ParamIndex:
    """Per-tensor, per-axis or blocked indexing. Which one, and whether the shapes fit, is the
    oracle's decision (oracle/granularity.py: a scalar is per-tensor whatever block_size says;
    ``expand`` raises InvalidModel for a scale that does not fit x, axis and block_size)."""
    x_shape, p_shape = tuple(x_shape), tuple(p_shape)
    if granularity(x_shape, p_shape, axis, block_size) == "per-tensor":
        return ParamIndex()
    expand(np.zeros(p_shape), x_shape, axis, block_size)  # the oracle's shape checks
    axis %= len(x_shape)
    inner = int(np.prod(x_shape[axis + 1:], dtype=np.int64))
    n = x_shape[axis]
    if not block_size:
        return ParamIndex(inner, n, 1, 0, 1, 0)
    blocks = math.ceil(n / block_size)
    return ParamIndex(inner, n, block_size, blocks * inner, inner, 1)


def codes(arr: np.ndarray, t: dtypes.ElemType) -> np.ndarray:
    """One code per element in the kernel's storage (uint8 / uint16 / uint32), contiguous."""
    raw = t.to_bits(np.asarray(arr, dtype=t.dtype))
    storage = np.uint8 if t.bits <= 8 else (np.uint16 if t.bits <= 16 else np.uint32)
    return np.ascontiguousarray(raw.astype(storage, copy=False)).reshape(-1)


def storage_dtype(t: dtypes.ElemType) -> np.dtype:
    return np.dtype(np.uint8 if t.bits <= 8 else (np.uint16 if t.bits <= 16 else np.uint32))


def from_codes(raw: np.ndarray, t: dtypes.ElemType, shape: tuple[int, ...]) -> np.ndarray:
    """Kernel output codes -> an array of t's registry dtype (exact bit moves only)."""
    raw = raw.reshape(shape)
    if t.is_integer and t.packed:
        c = raw.astype(np.uint8)
        if t.signed:
            shift = 8 - t.bits
            c = (c << np.uint8(shift)).view(np.int8) >> np.int8(shift)
        return np.asarray(c.astype(t.dtype)).reshape(shape)  # numpy ops on 0-d give scalars
    if raw.dtype.itemsize == t.dtype.itemsize:
        return raw.view(t.dtype)
    return t.from_bits(raw)

# ----------------------------------------------------------------------------------------------
# Entry points: one parameter list per kernel, the same on the host (qk_<name>, ctypes) and the
# device (qk_<name>_kernel, CuPy). "in": a read array, "out": a written one, "i32" / "i64": scalars.
# ----------------------------------------------------------------------------------------------
_INDEX = (("inner", "i64"), ("axis_len", "i64"), ("block", "i64"), ("s_outer", "i64"), ("s_axis", "i64"),
          ("s_inner", "i64"))
ENTRY_POINTS: dict[str, tuple[tuple[str, str], ...]] = {
    "quantize": (("x", "in"), ("xk", "i32"), ("s", "in"), ("sk", "i32"), ("zp", "in"), ("ok", "i32"),
                 ("prec", "i32"), ("saturate", "i32"), ("fnuz_inf_saturates", "i32"), ("n", "i64"), *_INDEX,
                 ("y", "out")),
    "dequantize": (("x", "in"), ("xk", "i32"), ("s", "in"), ("sk", "i32"), ("zp", "in"), ("ok", "i32"),
                   ("n", "i64"), *_INDEX, ("y", "out")),
    "qlinear_matmul": (("a", "in"), ("ak", "i32"), ("a_off", "in"), ("b", "in"), ("bk", "i32"), ("b_off", "in"),
                       ("nb", "i64"), ("mdim", "i64"), ("kdim", "i64"), ("ndim", "i64"), ("as_", "in"),
                       ("az", "in"), ("bs_", "in"), ("bz", "in"), ("sk", "i32"), ("ys", "in"), ("yz", "in"),
                       ("ok", "i32"), ("rq", "i32"), ("wrap", "i32"), ("saturate", "i32"),
                       ("fnuz_inf_saturates", "i32"), ("y", "out")),
    "dql_params": (("x", "in"), ("n", "i64"), ("qmin", "i32"), ("qmax", "i32"), ("scale", "out"), ("zp", "out")),
    "matmul_integer": (("a", "in"), ("ak", "i32"), ("a_off", "in"), ("b", "in"), ("bk", "i32"), ("b_off", "in"),
                       ("nb", "i64"), ("mdim", "i64"), ("kdim", "i64"), ("ndim", "i64"), ("az", "in"), ("bz", "in"),
                       ("y", "out")),
    # com.microsoft MatMulIntegerToFloat / DynamicQuantizeMatMul: y in the float kind pk.
    "scaled_matmul": (("a", "in"), ("ak", "i32"), ("a_off", "in"), ("b", "in"), ("bk", "i32"), ("b_off", "in"),
                      ("nb", "i64"), ("mdim", "i64"), ("kdim", "i64"), ("ndim", "i64"), ("az", "in"), ("azs", "i32"),
                      ("bz", "in"), ("as_", "in"), ("bs_", "in"), ("bias", "in"), ("has_bias", "i32"), ("pk", "i32"),
                      ("y", "out")),
    # com.microsoft QLinearAdd (exact-rational): the operands' elements by offset (broadcast planned on the host).
    "qlinear_add": (("a", "in"), ("a_off", "in"), ("b", "in"), ("b_off", "in"), ("tk", "i32"), ("az", "in"),
                    ("bz", "in"), ("as_", "in"), ("bs_", "in"), ("cs_", "in"), ("yz", "in"), ("ok", "i32"), ("n", "i64"),
                    ("y", "out")),
    # com.microsoft MatMulNBits: B and packed zero points read as bit streams by the kernel.
    "matmul_nbits": (("a", "in"), ("ak", "i32"), ("b", "in"), ("rowbytes", "i64"), ("s", "in"), ("z", "in"),
                     ("zmode", "i32"), ("zrow", "i64"), ("bias", "in"), ("has_bias", "i32"), ("rows", "i64"),
                     ("kdim", "i64"), ("ndim", "i64"), ("bits", "i32"), ("bs", "i64"), ("kb", "i64"), ("y", "out")),
    # com.microsoft GatherBlockQuantized: the gather and the block indices planned on the host.
    "gather_block_quantized": (("data", "in"), ("dk", "i32"), ("pbits", "i32"), ("last", "i64"), ("rowbytes", "i64"),
                               ("src", "in"), ("sidx", "in"), ("s", "in"), ("z", "in"), ("zmode", "i32"),
                               ("dz", "i64"), ("ok", "i32"), ("n", "i64"), ("y", "out")),
    # LeakyRelu on float32 codes (QLinearLeakyRelu: dequantize, this, quantize).
    "leaky_relu": (("x", "in"), ("alpha", "in"), ("n", "i64"), ("y", "out")),
    # com.microsoft QGemm: A' and B' planned on the host; requant=0 (no y_scale): float32 Y.
    "qgemm": (("a", "in"), ("ak", "i32"), ("b", "in"), ("bk", "i32"), ("mdim", "i64"), ("kdim", "i64"),
              ("ndim", "i64"), ("c", "in"), ("alpha", "in"), ("as_", "in"), ("az", "in"), ("bs_", "in"), ("bz", "in"),
              ("ys", "in"), ("yz", "in"), ("ok", "i32"), ("requant", "i32"), ("y", "out")),
    # Sigmoid on float32 codes (QLinearSigmoid: dequantize, this, quantize); status one byte per element,
    # qkernels' QK_ROUNDING_*: 1 where the float32 rounding is not proven (the plan refuses the case).
    "sigmoid": (("x", "in"), ("n", "i64"), ("y", "out"), ("status", "out")),
    # Softmax along rows of d float32 codes (QLinearSoftmax; the rows laid out on the host); status as sigmoid's.
    "softmax": (("x", "in"), ("d", "i64"), ("n", "i64"), ("y", "out"), ("status", "out")),
    # The average pools on float32 codes (QLinearAveragePool, QLinearGlobalAveragePool: dequantize, this,
    # quantize); geom: POOL_GEOMETRY's numbers; status one byte per element (qkernels.h's QK_POOL_*).
    "avg_pool": (("x", "in"), ("geom", "in"), ("include", "i32"), ("n", "i64"), ("y", "out"), ("status", "out")),
    # ConvInteger (requant=0, ok int32) and QLinearConv (requant=1); geom: CONV_GEOMETRY's numbers.
    "conv": (("x", "in"), ("xk", "i32"), ("w", "in"), ("wk", "i32"), ("geom", "in"), ("xz", "in"), ("wz", "in"),
             ("bias", "in"), ("ws", "in"), ("xs", "in"), ("ys", "in"), ("sk", "i32"), ("yz", "in"), ("ok", "i32"),
             ("requant", "i32"), ("wrap", "i32"), ("n", "i64"), ("y", "out")),
}
#: The conv entry point's geometry array, in the source's QK_CG_* order: N, C, M, group, then three
#: numbers each (spatial axes 1..3, a 1-D or 2-D convolution padded with size-1 axes).
CONV_GEOMETRY: tuple[tuple[str, int], ...] = (("n", 1), ("c", 1), ("m", 1), ("group", 1), ("d", 3), ("k", 3),
                                               ("o", 3), ("s", 3), ("dil", 3), ("pad", 3))
#: The avg_pool entry point's geometry array, in the source's QK_PG_* order: N, C, then three numbers each
#: (spatial axes 1..3, fewer axes padded with size-1 axes); begin and end are the stated pads.
POOL_GEOMETRY: tuple[tuple[str, int], ...] = (("n", 1), ("c", 1), ("d", 3), ("k", 3), ("o", 3), ("s", 3), ("dil", 3),
                                               ("begin", 3), ("end", 3))
#: Device entry points that run as one block of this many threads (a reduction), not a grid-stride loop.
SINGLE_BLOCK: dict[str, int] = {"dql_params": 256}  # qkernels.h's QK_DQL_THREADS


@dataclass(frozen=True)
class Launch:
    """One kernel call: the entry point, every input argument by name, and each output's (dtype,
    length). ``work`` is the number of independent elements (the device's grid size follows it)."""

    entry: str
    args: Mapping[str, object]
    outputs: Mapping[str, tuple[np.dtype, int]]
    work: int


__all__ = ["CONV_GEOMETRY", "POOL_GEOMETRY", "ENTRY_POINTS", "PARTS", "cache_root", "KIND", "KINDS", "Launch", "PRECISIONS", "SINGLE_BLOCK", "STYLE", "ParamIndex",
           "codes", "source", "from_codes", "kind", "param_index", "storage_dtype"]

"""The sweep table: which operator configurations are swept exhaustively, and over which domains.

A *sweep* is one operator configuration (op, opset, types, scale, zero point, saturate) whose data
input ``x`` takes every value of a domain (``qconform.sweep.domains``). ``all_sweeps`` is the one
table; adding a configuration is one line there (its golden file is made by ``qconform sweep --regen``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable

import numpy as np

from qconform import dtypes

#: Format of the golden files and state files.
FORMAT = 1
SWEEP_OPSET = 25
# The table's choices (which outputs and inputs are swept), not type facts; the op rules a sweep
# needs (its output type) are the oracle's version class's.
FLOAT_TARGETS = ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float4e2m1")
DQ_TYPES = ("int2", "uint2", "int4", "uint4", "int8", "uint8", "int16", "uint16", "float8e4m3fn",
            "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float4e2m1", "float6e2m3", "float6e3m2")


@dataclass(frozen=True)
class Sweep:
    op: str
    opset: int
    x_type: str
    scale_type: str
    scale: float
    zp_type: str
    zp: float
    saturate: int | None = None

    @property
    def out_type(self) -> str:
        """The oracle's output-type rule for this configuration (its version class's)."""
        from qconform.oracle.base import output_type

        return output_type(self._draft(np.zeros(0, dtypes.get(self.x_type).dtype), ""))

    @property
    def id(self) -> str:
        parts = [f"{self.op}-{self.opset}", f"{self.x_type}-{self.out_type}",
                 f"scale={self.scale_type}:{self.scale!r}"]
        if self.zp:
            parts.append(f"zp={self.zp!r}")
        if self.saturate is not None:
            parts.append(f"saturate={self.saturate}")
        return "/".join(parts)

    @property
    def slug(self) -> str:
        return self.id.replace("/", "__").replace(":", "_").replace("=", "-")

    @property
    def param_names(self) -> tuple[str, str]:
        return ("y_scale", "y_zero_point") if self.op == "QuantizeLinear" else ("x_scale", "x_zero_point")

    def scale_array(self) -> np.ndarray:
        return np.array(self.scale, dtype=dtypes.get(self.scale_type).dtype).reshape(())

    def zp_array(self) -> np.ndarray:
        t = dtypes.get(self.zp_type)
        if t.is_integer:
            return np.array(int(self.zp), dtype=t.dtype).reshape(())
        from qconform.oracle import floats

        return t.from_bits(floats.encode(np.array([self.zp]), t)).reshape(())

    def domains(self) -> tuple[str, ...]:
        """float32 inputs: sampled, and all 2^32 for the current opset's table (the opset-21 fnuz
        sweeps differ from it at ±Inf only, which the sampled domain holds)."""
        if self.x_type != "float32":
            return ("all",)
        return ("sampled", "full") if self.opset == SWEEP_OPSET else ("sampled",)

    def describe(self) -> dict[str, Any]:
        st, zt = dtypes.get(self.scale_type), dtypes.get(self.zp_type)
        return {**asdict(self), "out_type": self.out_type,
                "scale_bits": f"{int(st.to_bits(self.scale_array())):#x}",
                "zp_bits": f"{int(zt.to_bits(self.zp_array())):#x}"}

    def draft(self, x: np.ndarray):
        return self._draft(x, f"{self.x_type}-{self.out_type}")

    def _draft(self, x: np.ndarray, types: str):
        from qconform.case import Arg, Draft

        sname, zname = self.param_names
        attrs = {} if self.saturate is None else {"saturate": self.saturate}
        return Draft(self.op, self.opset, types, "sweep", "chunk",
                     (Arg("x", self.x_type, x), Arg(sname, self.scale_type, self.scale_array(), True),
                      Arg(zname, self.zp_type, self.zp_array(), True)), attrs)


#: The integer outputs beyond int8/uint8, each with a zero point inside its range (mid-range for the
#: unsigned ones, so both saturation ends are reached).
NARROW_AND_WIDE_INTEGERS = (("int4", 0), ("uint4", 8), ("int2", 0), ("uint2", 2), ("int16", 0), ("uint16", 32768))


def all_sweeps() -> list[Sweep]:
    """Every sweep configuration (the golden files are one per sweep)."""
    out: list[Sweep] = []
    q = "QuantizeLinear"
    for xt in ("float16", "bfloat16", "float32"):
        for k in FLOAT_TARGETS:
            for sat in (1, 0):
                out.append(Sweep(q, SWEEP_OPSET, xt, xt, 1.0, k, 0.0, sat))
        for k in ("float8e4m3fnuz", "float8e5m2fnuz"):  # opset 19-23 table: ±Inf -> NaN with saturate
            out.append(Sweep(q, 21, xt, xt, 1.0, k, 0.0, 1))
        for k, zp in (("int8", 0), ("uint8", 128)):
            for sc in (1.0, 0.125, 0.1):  # one, a power of two, an inexact one
                out.append(Sweep(q, SWEEP_OPSET, xt, xt, sc, k, zp))
        for k, zp in NARROW_AND_WIDE_INTEGERS:  # every other integer output: a power of two and an inexact scale
            for sc in (0.125, 0.1):
                out.append(Sweep(q, SWEEP_OPSET, xt, xt, sc, k, zp))
    for qt in DQ_TYPES:
        zp = 1 if dtypes.get(qt).is_integer else 0.0
        for st, sc in (("float32", 1.0), ("float32", 0.1), ("float16", 0.1), ("bfloat16", 0.1)):
            out.append(Sweep("DequantizeLinear", SWEEP_OPSET, qt, st, sc, qt, zp))
    ids = [s.id for s in out]
    assert len(ids) == len(set(ids)), "sweep ids must be unique"
    return out


def select(patterns: Iterable[str] | None = None, sweeps: list[Sweep] | None = None) -> list[Sweep]:
    """Sweeps named by full id, else those whose id contains every pattern (all when none)."""
    sweeps = all_sweeps() if sweeps is None else sweeps
    pats = [p for p in (patterns or []) if p]
    exact = [s for s in sweeps if s.id in pats]
    if exact:  # a full id names exactly that sweep (an id can be a prefix of another)
        return exact
    chosen = [s for s in sweeps if all(p in s.id for p in pats)]
    if not chosen:
        raise ValueError(f"no sweep id contains {' and '.join(map(repr, pats))}; "
                         f"e.g. {sweeps[0].id!r} (list them with `qconform sweep --list`)")
    return chosen



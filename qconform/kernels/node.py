"""What every kernel plan shares (qconform/kernels/plan.py for the quantization ops and the quantized
matmul, contraction.py for the integer compute ops): the single node as the model declares it, the
refusals, numpy.matmul's geometry as the matmul entry points index it, and the integer body's
readings the header computes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from qconform import dtypes
from qconform.case import Arg, Draft
from qconform.kernels import KIND, Launch, codes, from_codes, storage_dtype
from qconform.oracle.base import InvalidModel, OpOracle
from qconform.oracle.integer import matmul_operands
from qconform.runner import Unsupported

#: Runs one launch, returns its outputs by name (host: ctypes; device: CuPy).
Execute = Callable[[Launch], Mapping[str, np.ndarray]]
#: The requantisation readings qkernels.h computes (its QK_RQ_* numbers) and its accumulations.
REQUANTISATIONS = {"multiplier-float32": 0}
ACCUMULATIONS = {"accumulator-int32-wrap": 1, "accumulator-exact": 0}


@dataclass
class Node:
    """The single node with what the model declares about its inputs."""

    domain: str
    op: str
    opset: int
    oracle: OpOracle
    attrs: dict[str, Any]
    inputs: tuple[str | None, ...]
    types: tuple[str | None, ...]
    consts: dict[str, np.ndarray]
    ranks: dict[str, int]

    def arrays(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray | None]:
        out = []
        for name, t in zip(self.inputs, self.types):
            if name is None:
                out.append(None)
                continue
            arr = self.consts[name] if name in self.consts else np.asarray(feeds[name])
            if arr.dtype != dtypes.get(t).dtype:
                raise TypeError(f"input {name}: array dtype {arr.dtype}, the model declares {t}")
            out.append(arr)
        return out

    def draft(self, shapes: Mapping[int, tuple[int, ...]] | None = None) -> Draft:
        """A draft of this node with placeholder values (zeros; ones for the inputs given a shape),
        for the oracle's rules that read types and attributes only."""
        shapes = shapes or {}

        def value(i: int, t: str) -> np.ndarray:
            return np.ones(shapes[i], dtypes.get(t).dtype) if i in shapes else np.zeros((), dtypes.get(t).dtype)

        args = tuple(None if t is None else Arg(n, t, value(i, t)) for i, (n, t) in enumerate(zip(self.inputs, self.types)))
        return Draft(self.op, self.opset, "", "", "", args, self.attrs, domain=self.domain)


def need(who: str, what: str, t: str | None, allowed: tuple[str, ...]) -> None:
    if t not in allowed:
        raise Unsupported(f"{who}: {what} type {t} not implemented (kernels cover {', '.join(allowed)})")


def checked(make):
    """An invalid model found while reading the inputs: the runner's ValueError, as cpu-ref's."""
    try:
        return make()
    except InvalidModel as exc:
        raise ValueError(f"invalid model: {exc}") from None


def single_launch(make: Callable[[], tuple[Launch, tuple[int, ...]]], execute: Execute, out_t: str) -> list[np.ndarray]:
    """The plans whose node is one launch (``make``: the launch and y's shape, an invalid model refused as
    ``checked`` does): its ``y`` codes as the node's one output of type ``out_t``."""
    launch, shape = checked(make)
    return [from_codes(execute(launch)["y"], dtypes.get(out_t), shape)]


@dataclass(frozen=True)
class MatmulShapes:
    """numpy.matmul's geometry of two operands as the matmul entry points index them: batch t's a
    [M, K] starts at a_off[t], its b [K, N] at b_off[t]; the operand rules (1-D operands, inner
    dimension, batch broadcast) are the oracle's ``integer.matmul_operands``. The quantized and the
    integer matmul share it."""

    av: np.ndarray
    bv: np.ndarray
    squeeze: tuple[int, ...]
    full: tuple[int, ...]  # batch + (M, N)

    @classmethod
    def of(cls, a: np.ndarray, b: np.ndarray, names: tuple[str, str] = ("a", "b")) -> "MatmulShapes":
        av, bv, squeeze, full = matmul_operands(a, b, names)
        return cls(av, bv, squeeze, tuple(full))

    @property
    def batch(self) -> tuple[int, ...]:
        return self.full[:-2]

    @property
    def nb(self) -> int:
        return int(np.prod(self.batch, dtype=np.int64))

    @property
    def size(self) -> int:
        return self.nb * self.full[-2] * self.full[-1]

    @property
    def shape(self) -> tuple[int, ...]:
        """y's shape: the axes numpy.matmul adds for 1-D operands removed."""
        return tuple(d for i, d in enumerate(self.full) if i - len(self.full) not in self.squeeze)

    def _offsets(self, data: np.ndarray, size: int) -> np.ndarray:
        first = np.arange(int(np.prod(data.shape[:-2], dtype=np.int64)), dtype=np.int64).reshape(data.shape[:-2])
        return np.ascontiguousarray(np.broadcast_to(first, self.batch).reshape(-1) * size)

    def operand_args(self, a: np.ndarray, ta: str, b: np.ndarray, tb: str) -> dict[str, object]:
        """The operands, their kinds, batch offsets and sizes (the entry points' common arguments)."""
        (m, k), n = self.av.shape[-2:], self.bv.shape[-1]
        return dict(a=codes(self.av, dtypes.get(ta)), ak=KIND[ta], a_off=self._offsets(self.av, m * k),
                    b=codes(self.bv, dtypes.get(tb)), bk=KIND[tb], b_off=self._offsets(self.bv, k * n),
                    nb=self.nb, mdim=m, kdim=k, ndim=n)

    def params(self, arr: np.ndarray | None, t: str, of: str) -> np.ndarray:
        """A scale or zero point of a (per (batch, row)) or b (per (batch, column)), one code each
        (the oracle's param_view decides the forms); absent: code 0 (value 0 in every kind in scope)."""
        from qconform.oracle.qlinear_matmul import param_view

        m, n = self.full[-2:]
        if arr is None:
            return np.zeros(self.nb * (m if of == "a" else n), dtype=storage_dtype(dtypes.get(t)))
        data, axis = (self.av, -1) if of == "a" else (self.bv, -2)
        view = param_view("parameter", arr, data.shape, axis)
        want = self.batch + ((m, 1) if of == "a" else (1, n))
        return codes(np.ascontiguousarray(np.broadcast_to(view, want)), dtypes.get(t))


__all__ = ["ACCUMULATIONS", "Execute", "MatmulShapes", "Node", "REQUANTISATIONS", "checked", "need", "single_launch"]

"""Quantization parameters broadcast to the data's shape: per-tensor, per-axis, blocked.

Shared by QuantizeLinear and DequantizeLinear (and the com.microsoft variants): the spec words
are the same for both (qconform/docs/semantics.md#granularity-per-axis, #granularity-blocked)."""
from __future__ import annotations

import math

import numpy as np


class InvalidModel(ValueError):
    """The inputs or attributes violate the schema: not a conformance case but a must-reject one."""


def granularity(x_shape: tuple[int, ...], p_shape: tuple[int, ...], axis: int | None, block_size: int) -> str:
    if block_size:
        return "blocked"
    if len(p_shape) == 0 or (len(p_shape) == 1 and p_shape[0] == 1 and (axis is None or len(x_shape) == 0)):
        return "per-tensor"
    if len(p_shape) == 1 and p_shape[0] == 1:
        # A 1-element 1-D scale: per-tensor; per-axis over a length-1 axis gives the same result.
        return "per-tensor"
    return "per-axis"


def expand(param: np.ndarray, x_shape: tuple[int, ...], axis: int | None, block_size: int) -> np.ndarray:
    """Broadcast a scale or zero point (as float64/int64) to ``x_shape``."""
    kind = granularity(x_shape, param.shape, axis, block_size)
    if kind == "per-tensor":
        return np.broadcast_to(param.reshape(()), x_shape)
    rank = len(x_shape)
    if axis is None:
        raise InvalidModel(f"a scale of shape {param.shape} needs an axis")
    if not -rank <= axis < rank:
        raise InvalidModel(f"axis {axis} outside [-{rank}, {rank - 1}]")
    axis %= rank
    if kind == "per-axis":
        if param.ndim != 1 or param.shape[0] != x_shape[axis]:
            raise InvalidModel(f"per-axis scale of shape {param.shape} for axis {axis} of {x_shape}")
        shape = [1] * rank
        shape[axis] = x_shape[axis]
        return np.broadcast_to(param.reshape(shape), x_shape)
    # blocked
    if block_size < 0:
        raise InvalidModel(f"block_size {block_size} is negative")
    want = list(x_shape)
    want[axis] = math.ceil(x_shape[axis] / block_size)
    if list(param.shape) != want:
        raise InvalidModel(f"blocked scale of shape {param.shape} for x {x_shape}, axis {axis}, "
                           f"block_size {block_size}: expected {tuple(want)}")
    return np.repeat(param, block_size, axis=axis).take(range(x_shape[axis]), axis=axis)

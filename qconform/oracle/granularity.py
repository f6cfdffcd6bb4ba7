"""Quantization parameters broadcast to the data's shape: per-tensor, per-axis, blocked.

Shared by QuantizeLinear and DequantizeLinear (and the com.microsoft variants): the spec words
are the same for both (qconform/docs/semantics.md#granularity-per-axis, #granularity-blocked)."""
from __future__ import annotations

import math

import numpy as np


class InvalidModel(ValueError):
    """The inputs or attributes violate the schema: not a conformance case but a must-reject one."""


def granularity(x_shape: tuple[int, ...], p_shape: tuple[int, ...], axis: int | None, block_size: int) -> str:
    """"There are three supported quantization granularities, determined by the shape of y_scale": a
    scalar is per-tensor whatever ``block_size`` says ("Used only for blocked quantization")."""
    if block_size and len(p_shape) != 0:
        return "blocked"
    if len(p_shape) == 0 or (len(p_shape) == 1 and p_shape[0] == 1 and (axis is None or len(x_shape) == 0)):
        return "per-tensor"
    if len(p_shape) == 1 and p_shape[0] == 1:
        # A 1-element 1-D scale: per-tensor; per-axis over a length-1 axis gives the same result.
        return "per-tensor"
    return "per-axis"


def invalid_by_text(x_shape: tuple[int, ...], p_shape: tuple[int, ...], axis: int | None, block_size: int) -> str:
    """Why a model the oracle can compute is still invalid by the text, or ''. Such a case is
    information: reported, never pass or fail (qconform/docs/semantics.md#granularity-per-tensor).

    A 1-element 1-D scale is "a 1-D tensor of length Di" for per-axis quantization, so on an axis
    of another length the model is invalid; runtimes read it as per-tensor. A rank-1 x is exempt:
    "When the rank of the input is 1, per-tensor quantization is applied"."""
    rank = len(x_shape)
    if block_size or tuple(p_shape) != (1,) or rank < 2 or axis is None or not -rank <= axis < rank:
        return ""
    if x_shape[axis % rank] == 1:
        return ""
    return (f"a scale of shape [1] is per-axis by the text (\"a 1-D tensor of length Di\"), and axis {axis} "
            f"of x {list(x_shape)} has length {x_shape[axis % rank]}: the model is invalid; runtimes commonly "
            "read it as per-tensor, which is the reading compared")


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

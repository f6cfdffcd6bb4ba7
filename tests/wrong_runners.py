"""Realistic wrong implementations of QuantizeLinear / DequantizeLinear, one known bug each.

Each is the oracle's first (latest-spec) reading recomputed step by step, with exactly one step
swapped for a bug seen in real kernels: rounding half away from zero, truncating, multiplying by
the reciprocal, wrapping instead of saturating, a symmetric int8 clamp, the x86 float-to-int cast,
float8 that always saturates, nibbles in the wrong order, the partial block read from the wrong
scale, a negative axis counted from the wrong end, rank 0 promoted to [1], a quotient computed in
float64, distributed dequantization, truncating float outputs, an ignored zero point.
``WrongRunner(bug)`` runs like cpu-ref: it sees only the model and the inputs."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import onnx

from qconform import dtypes
from qconform.case import Draft
from qconform.oracle import floats, oracle_for
from qconform.oracle.arith import as_float64, fl, pack_output
from qconform.oracle.granularity import expand
from qconform.runner import BaseRunner, Inputs, Outputs, Prepared
from qconform.runners.cpu_ref import draft_from_model


def _rne(q):
    return np.rint(q)


def _clip(v, t):
    lo, hi = t.qrange
    return np.clip(np.where(np.isnan(v), 0, v), lo, hi).astype(np.int64)


def _divide(a, b, prec):
    return fl(prec, a / b)


def _mul(a, b, t):
    return fl(t, fl(t, a) * fl(t, b))


@dataclass(frozen=True)
class Steps:
    """The steps of the computation; a bug replaces one."""

    divide: Callable = _divide  # (x, scale, precision type) -> quotient
    round: Callable = _rne
    saturate: Callable = _clip  # (exact integer-valued float64, type) -> int64 in range
    saturate_float8: bool | None = None  # None: the attribute decides
    expand: Callable = expand
    axis: Callable = lambda axis, rank: axis  # noqa: E731
    slots: bool = False  # reverse the element order inside each byte of packed types
    rank0: bool = False  # return rank-0 results as shape [1]
    precision: str | None = None  # the quotient's precision regardless of the spec
    dq: Callable = lambda diff, zero, x, scale, t: _mul(diff, scale, t)  # noqa: E731
    zero_point: bool = True


def _swap_slots(arr: np.ndarray, t: dtypes.ElemType) -> np.ndarray:
    """The bytes packed with the element order inside each byte reversed, then read back correctly."""
    k = 8 // t.bits
    flat = t.to_bits(arr).ravel()
    n = flat.size
    padded = np.concatenate([flat, np.zeros((-n) % k, flat.dtype)]).reshape(-1, k)[:, ::-1].ravel()[:n]
    return t.from_bits(padded).reshape(arr.shape)


def _toward_zero(v: np.ndarray, t: dtypes.ElemType) -> np.ndarray:
    r = fl(t, v)
    over = np.abs(r) > np.abs(v)
    down = -floats.decode(floats.encode(np.abs(r), t, saturate=False).astype(np.uint64) - 1, t)
    return np.where(over & np.isfinite(v) & (v != 0), np.copysign(-down, v), r)


def compute(d: Draft, st: Steps) -> np.ndarray:
    o = oracle_for(d.domain, d.op, d.opset)
    x, s, zp = (list(d.inputs) + [None])[:3]
    if st.slots and dtypes.get(x.type).packed:
        x = replace(x, value=_swap_slots(x.value, dtypes.get(x.type)))
    attrs = d.attrs
    shape = x.value.shape
    axis = st.axis(attrs.get("axis", 1), len(shape)) if o.has_axis else None
    block = attrs.get("block_size", 0)
    scale = st.expand(as_float64(s.value, s.type), shape, axis, block)
    zero = st.expand(as_float64(zp.value, zp.type), shape, axis, block) if zp is not None else np.zeros(shape)
    if not st.zero_point:
        zero = np.zeros(shape)
    xv = as_float64(x.value, x.type)
    if d.op == "QuantizeLinear":
        out_t = dtypes.get(o.output_type(d, zp))
        prec = st.precision or o.division_readings(x.type, s.type, attrs)[0][1]
        q = xv / scale if prec == "float64" else st.divide(fl(prec, xv), fl(prec, scale), prec)
        if out_t.is_integer:
            out = pack_output(st.saturate(st.round(q) + zero, out_t), out_t)
        else:
            v = q + zero if prec == "float64" else fl(prec, q + zero)
            sat = bool(attrs.get("saturate", 1)) if st.saturate_float8 is None else st.saturate_float8
            out = pack_output(floats.encode(v, out_t, saturate=sat, fnuz_inf_saturates=o.fnuz_inf_saturates), out_t)
    else:
        out_t = dtypes.get(o.output_type(d, s.type))
        y = st.dq(xv - zero, zero, xv, scale, out_t)
        out = pack_output(floats.encode(y, out_t, saturate=False), out_t)
    if st.slots and out_t.packed:
        out = _swap_slots(out, out_t)
    return out.reshape(1) if st.rank0 and out.ndim == 0 else out


def _half_away(q):
    return np.sign(q) * np.floor(np.abs(q) + 0.5)


def _wrap(v, t):
    lo, hi = t.qrange
    v = np.where(np.isfinite(v), v, 0).astype(np.int64)
    return (v - lo) % (hi - lo + 1) + lo


def _symmetric(v, t):
    lo, hi = t.qrange
    return np.clip(np.where(np.isnan(v), 0, v), -hi if lo < 0 else lo, hi).astype(np.int64)


def _x86_cast(v, t):
    """cvtss2si: NaN, ±Inf and |v| ≥ 2^31 become INT_MIN before the clamp."""
    bad = ~np.isfinite(v) | (np.abs(v) >= 2.0 ** 31)
    return _clip(np.where(bad, -(2.0 ** 31), v), t)


def _reciprocal(a, b, prec):
    return fl(prec, a * fl(prec, 1.0 / b))


def _wrong_block(param, shape, axis, block):
    if not block:
        return expand(param, shape, axis, block)
    axis %= len(shape)
    n = param.shape[axis]
    idx = (np.arange(shape[axis]) * n) // shape[axis]  # spreads blocks evenly: wrong for a partial block
    return np.take(param, idx, axis=axis)


def _distributed(diff, zero, x, scale, t):
    return fl(t, fl(t, x * scale) - fl(t, zero * scale))


def _truncated_product(diff, zero, x, scale, t):
    return _toward_zero(diff * scale, t)  # e.g. bfloat16 made by dropping float32's low half


BUGS: dict[str, Steps] = {
    "round-half-away": Steps(round=_half_away),
    "truncation": Steps(round=np.trunc),
    "multiply-by-reciprocal": Steps(divide=_reciprocal),
    "wrap-instead-of-saturate": Steps(saturate=_wrap),
    "symmetric-clamp": Steps(saturate=_symmetric),
    "x86-float-to-int-cast": Steps(saturate=_x86_cast),
    "float8-always-saturates": Steps(saturate_float8=True),
    "swapped-nibbles": Steps(slots=True),
    "wrong-partial-block": Steps(expand=_wrong_block),
    "negative-axis-miscounted": Steps(axis=lambda a, r: a + r - 1 if a < 0 else a),
    "rank0-promoted": Steps(rank0=True),
    "quotient-in-float64": Steps(precision="float64"),
    "distributed-dequantize": Steps(dq=_distributed),
    "truncating-output-rounding": Steps(dq=_truncated_product),
    "zero-point-ignored": Steps(zero_point=False),
}


class WrongRunner(BaseRunner):
    def __init__(self, bug: str) -> None:
        self.bug = bug
        self.steps = BUGS[bug]
        self.name = f"wrong:{bug}"

    def prepare(self, model: onnx.ModelProto) -> Prepared:
        def run(feeds: Inputs) -> Outputs:
            return [compute(draft_from_model(model, feeds), self.steps)]

        return run

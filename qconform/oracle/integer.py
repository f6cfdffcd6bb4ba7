"""The one integer body of the accumulating operators (the quantized matmuls and convolutions,
``Kind.REQUANTIZE`` and ``Kind.INTEGER`` in qconform/declarations/operators.py) and of every fused-kernel deviation model: accumulate, then requantise.

- Accumulation (qconform/docs/semantics.md#qlmm-accumulation, #integer-accumulation): the sum of
  products computed exactly (int64), then read as the text permits: reduced modulo 2^32
  (``accumulator-int32-wrap``) or kept wide (``accumulator-exact``, where a requantisation follows).
- Convolution windows (``conv_windows``): the operand patches of an N-D convolution in the
  channels-last reduction order fused kernels use (kernel offsets, then channels), padded with the
  value that contributes 0 — one function for the oracle and the fused models.
- Requantisation (#qlmm-requant): ``acc · s_a · s_b / s_y`` under each permitted reading, rounded
  by the oracle's own ``round`` step, the zero point added, saturated (``Requantising``).
Deviation models override a step (``round``, ``accumulate``, ``requantise``); they never copy these.
"""
from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any, Mapping, Sequence

import numpy as np

from qconform import dtypes
from qconform.dtypes import ElemType
from qconform.oracle.arith import pack_output
from qconform.oracle.base import Evaluation, OpOracle
from qconform.oracle.granularity import InvalidModel
from qconform.oracle.steps import Steps

ACCUMULATIONS = ("accumulator-int32-wrap", "accumulator-exact")
REQUANTISATIONS = ("multiplier-float32", "multiplier-float64", "exact-rational",
                   "multiplier-float32-product-float64", "multiplier-in-scale-type")
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def wrap_int32(v: np.ndarray) -> np.ndarray:
    """Two's-complement wrap of exact integers (int64) to the int32 range."""
    v = np.asarray(v, dtype=np.int64)
    return ((v + (1 << 31)) & ((1 << 32) - 1)) - (1 << 31)


def accumulations(exact: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """The accumulation readings of an exact integer sum (#qlmm-accumulation)."""
    return [(ACCUMULATIONS[0], wrap_int32(exact)), (ACCUMULATIONS[1], exact)]


# -- matmul geometry -----------------------------------------------------------------------------
def matmul_operands(av: np.ndarray, bv: np.ndarray, names: tuple[str, str] = ("a", "b")
                    ) -> tuple[np.ndarray, np.ndarray, tuple[int, ...], tuple[int, ...]]:
    """numpy.matmul's operands: a 1-D first operand is [1, K], a 1-D second one [K, 1] (the added
    axes, to squeeze from the result, are returned), inner dimensions equal, batch dimensions
    broadcast; (a, b, squeeze, output shape). Raises InvalidModel otherwise."""
    shapes = (av.shape, bv.shape)
    if av.ndim == 0 or bv.ndim == 0:
        raise InvalidModel("numpy.matmul takes no scalars")
    squeeze: tuple[int, ...] = ()
    if av.ndim == 1:
        av, squeeze = av[None, :], squeeze + (-2,)
    if bv.ndim == 1:
        bv, squeeze = bv[:, None], squeeze + (-1,)
    if av.shape[-1] != bv.shape[-2]:
        raise InvalidModel(f"inner dimensions differ: {names[0]} {shapes[0]}, {names[1]} {shapes[1]}")
    try:
        batch = np.broadcast_shapes(av.shape[:-2], bv.shape[:-2])
    except ValueError:
        raise InvalidModel(f"batch dimensions of {names[0]} {shapes[0]} and {names[1]} {shapes[1]} "
                           "do not broadcast") from None
    return av, bv, squeeze, batch + (av.shape[-2], bv.shape[-1])


# -- convolution geometry ----------------------------------------------------------------------
def conv_geometry(x_shape: Sequence[int], w_shape: Sequence[int], attrs: Mapping[str, Any]
                  ) -> tuple[list[int], list[int], list[int], list[int], int]:
    """(strides, dilations, pads_begin, pads_end, group) of an ONNX Conv node, ``auto_pad`` resolved
    as the Conv text states; an attribute that contradicts the tensors raises InvalidModel."""
    n = len(x_shape) - 2
    if n < 1 or len(w_shape) != n + 2:
        raise InvalidModel(f"x {tuple(x_shape)} and w {tuple(w_shape)}: not an N-D convolution")
    kernel = list(w_shape[2:])
    if "kernel_shape" in attrs and list(attrs["kernel_shape"]) != kernel:
        raise InvalidModel(f"kernel_shape {attrs['kernel_shape']} is not w's spatial shape {kernel}")
    strides = list(attrs.get("strides", [1] * n))
    dil = list(attrs.get("dilations", [1] * n))
    group = int(attrs.get("group", 1))
    if group < 1 or x_shape[1] % group or w_shape[0] % group or x_shape[1] // group != w_shape[1]:
        raise InvalidModel(f"group {group}: x has {x_shape[1]} channels, w is {tuple(w_shape)}")
    auto = attrs.get("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        out = [-(-d // s) for d, s in zip(x_shape[2:], strides)]
        total = [max(0, (o - 1) * s + k - d) for o, s, k, d in zip(out, strides, span, x_shape[2:])]
        small = [t // 2 for t in total]
        begin = small if auto == "SAME_UPPER" else [t - h for t, h in zip(total, small)]
        end = [t - b for t, b in zip(total, begin)]
    elif auto == "VALID":
        begin, end = [0] * n, [0] * n
    elif auto == "NOTSET":
        pads = list(attrs.get("pads", [0] * 2 * n))
        begin, end = pads[:n], pads[n:]
    else:
        raise InvalidModel(f"auto_pad {auto!r} is none of NOTSET, SAME_UPPER, SAME_LOWER, VALID")
    if any(d + b + e < k for d, b, e, k in zip(x_shape[2:], begin, end, span)):
        raise InvalidModel("the dilated kernel is larger than the padded input")
    return strides, dil, begin, end, group


def conv_windows(x: np.ndarray, w_shape: Sequence[int], attrs: Mapping[str, Any], pad_value: Any = 0
                 ) -> tuple[np.ndarray, int]:
    """The patches of ``x`` (N, C, D1..Dn) each output position reads: shape (N, O1..On, K1..Kn, C)
    — kernel offsets, then channels, the order channels-last kernels reduce in — padded with
    ``pad_value``; and the group count."""
    strides, dil, begin, end, group = conv_geometry(x.shape, w_shape, attrs)
    n = x.ndim - 2
    padded = np.pad(x, [(0, 0), (0, 0)] + list(zip(begin, end)), constant_values=pad_value)
    kernel = list(w_shape[2:])
    out = [(p - ((k - 1) * d + 1)) // s + 1 for p, k, d, s in zip(padded.shape[2:], kernel, dil, strides)]
    cols = np.empty((x.shape[0], *out, *kernel, x.shape[1]), x.dtype)
    for offs in itertools.product(*(range(k) for k in kernel)):
        sl = tuple(slice(o * d, o * d + (m - 1) * s + 1, s) for o, d, m, s in zip(offs, dil, out, strides))
        patch = padded[(slice(None), slice(None)) + sl]  # (N, C, O1..On)
        cols[(slice(None),) + (slice(None),) * n + offs] = np.moveaxis(patch, 1, -1)
    return cols, group


def conv_accumulate(xd: np.ndarray, wd: np.ndarray, attrs: Mapping[str, Any], pad_value: int = 0) -> np.ndarray:
    """The exact sums of an N-D grouped convolution of integer differences (int64), shape
    (N, M, O1..On): padded positions hold ``pad_value`` (0, the text's: #qlconv-padding)."""
    cols, group = conv_windows(xd.astype(np.int64), wd.shape, attrs, pad_value)
    n = xd.ndim - 2
    cg, mg = xd.shape[1] // group, wd.shape[0] // group
    parts = []
    for g in range(group):
        c = cols[..., g * cg:(g + 1) * cg].reshape(cols.shape[:1 + n] + (-1,))  # (N, O.., K·Cg)
        wg = np.moveaxis(wd[g * mg:(g + 1) * mg].astype(np.int64), 1, -1).reshape(mg, -1)  # (Mg, K·Cg)
        parts.append(c @ wg.T)  # (N, O.., Mg)
    return np.moveaxis(np.concatenate(parts, axis=-1), -1, 1)


def conv_sums(x: np.ndarray, x_zp: np.ndarray, w: np.ndarray, w_zp: np.ndarray, attrs: Mapping[str, Any],
              pad_code: int | None = None) -> np.ndarray:
    """Σ (x − x_zp)(w − w_zp[m]) over each window of the codes (int64; w_zp per tensor or per output
    channel). Padded pixels hold ``pad_code``: by default x's zero point, so they contribute 0."""
    zp = np.asarray(x_zp, np.int64).reshape(())
    wz = np.asarray(w_zp, np.int64)
    wz = wz.reshape((-1,) + (1,) * (w.ndim - 1)) if wz.size > 1 else wz.reshape(())
    pad = 0 if pad_code is None else int(pad_code - zp)
    return conv_accumulate(np.asarray(x, np.int64) - zp, np.asarray(w, np.int64) - wz, attrs, pad)


# -- requantisation ------------------------------------------------------------------------------
def acc_float64(acc: np.ndarray, e: int) -> np.ndarray:
    """The accumulator acc · 2^-e as float64 (int64 accumulators: |acc| < 2^53, exact; object arrays
    of Python integers on a float8 grid: rounded once)."""
    if acc.dtype == object:
        return np.array([float(Fraction(int(c), 1 << e)) for c in acc.ravel()], dtype=np.float64).reshape(acc.shape)
    return acc.astype(np.float64)


def finite_exact(acc: np.ndarray, e: int, scales, zp: float) -> np.ndarray:
    """Where acc · s_a · s_b / s_y (+ the zero point) is finite: float64 holds every such value of
    8-bit operands and scales finite in their own types, so an Inf there is the operands'."""
    a_s, b_s, y_s = scales
    with np.errstate(all="ignore"):
        return np.isfinite(acc_float64(acc, e) * a_s * b_s / y_s + zp)


def requantise(steps: Steps, req: str, acc: np.ndarray, e: int, scales, zp: float, out_t: ElemType,
               scale_t: str) -> dict[bool, np.ndarray]:
    """What reading ``req`` hands to the output conversion, keyed by "zero point added": for
    integer outputs round(v) + zp (exact integers, ±Inf, NaN); for float8 outputs v + zp and v
    alone (#q-float8-zero-point). acc · 2^-e is the exact accumulator (leading axes broadcast).
    ``steps``: the oracle (or a deviation model's) whose ``fl``, ``round`` and ``round_exact`` apply."""
    a_s, b_s, y_s = scales
    shape = acc.shape
    if req == "exact-rational":
        ys, fzp = Fraction(y_s), Fraction(zp)
        sa, sb = np.broadcast_to(a_s, shape).ravel(), np.broadcast_to(b_s, shape).ravel()
        with_zp = np.empty(acc.size, dtype=np.float64)
        without = np.empty(acc.size, dtype=np.float64)
        for i, c in enumerate(acc.ravel()):
            v = Fraction(int(c), 1 << e) * Fraction(float(sa[i])) * Fraction(float(sb[i])) / ys
            # rounded exactly; float(Fraction) rounds correctly (float8: rounding to float64
            # first is innocuous, 53 >= 2 * 4 + 2).
            if out_t.is_integer:
                with_zp[i] = float(steps.round_exact(v) + fzp)
            else:
                with_zp[i], without[i] = float(v + fzp), float(v)
        return {True: with_zp.reshape(shape), False: without.reshape(shape)}
    acc64 = acc_float64(acc, e)
    prec = {"multiplier-float64": "float64", "multiplier-in-scale-type": scale_t}.get(req, "float32")
    r = (lambda x: np.asarray(x, dtype=np.float64)) if prec == "float64" else (lambda x: steps.fl(prec, x))
    with np.errstate(all="ignore"):
        m = r(r(a_s * b_s) / y_s)
        if req == "multiplier-float32-product-float64":
            v = acc64 * m  # numpy: int32 * float32 -> float64
            r = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731  (the zero point too)
        elif req == "multiplier-in-scale-type":
            v = r(acc64 * m)  # the product rounded once to TS: acc itself need not fit TS's range
        else:
            v = r(r(acc64) * m)
        if out_t.is_integer:
            return {True: steps.round(v) + zp}
        return {True: r(v + zp), False: v}


class Requantising(OpOracle):
    """The steps of an operator that accumulates and requantises (#qlmm-requant); the defaults are
    the permitted readings, a deviation model overrides one."""

    def requantisations(self, scale_t: str) -> list[str]:
        return [r for r in REQUANTISATIONS if r != "multiplier-in-scale-type" or dtypes.get(scale_t).is_half]

    def requantise(self, req: str, acc: np.ndarray, e: int, scales, zp: float, out_t: ElemType,
                   scale_t: str) -> dict[bool, np.ndarray]:
        """What reading ``req`` hands to the output conversion (``requantise``, through this
        oracle's own steps)."""
        return requantise(self, req, acc, e, scales, zp, out_t, scale_t)

    def encode_output(self, v: np.ndarray, out_t: ElemType) -> tuple[np.ndarray, np.ndarray]:
        """Saturate to an integer y (with NaN's undefined mask), or QuantizeLinear-21's saturate=1
        Cast table to a float8 y (fnuz ±Inf -> NaN, #q-float8-fnuz-inf)."""
        if out_t.is_integer:
            y, nan = self.saturate(v, out_t)
            return pack_output(y, out_t), nan
        code = self.encode(v, out_t, saturate=True, fnuz_inf_saturates=False)
        return pack_output(code, out_t), np.zeros(np.shape(v), bool)

    def add_readings(self, ev: Evaluation, accs: list[tuple[str, np.ndarray]], e: int, scales, yz: float,
                     out_t: ElemType, scale_t: str, touched: np.ndarray, out_shape: tuple[int, ...]) -> None:
        """Every requantisation reading crossed with every accumulation reading (and, for float
        outputs, the zero point added even where it is +0), named ``requant+accumulation``. A reading
        whose chain overflows to ±Inf where the exact value is finite is not offered (#qlmm-requant)."""
        stack = np.stack([np.broadcast_to(acc, out_shape) for _, acc in accs])
        encoded: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}  # readings often coincide
        finite = finite_exact(stack, e, scales, yz) & ~touched
        for req in self.requantisations(scale_t):
            values = self.requantise(req, stack, e, scales, yz, out_t, scale_t)
            if any(np.any(np.isinf(v) & finite) for v in values.values()):
                continue
            for i, (acc_name, _) in enumerate(accs):
                v = np.where(touched, 0.0, values[True][i])  # the zero point added, +0 too (#q-float8-zero-point)
                key = v.tobytes()
                if key not in encoded:
                    encoded[key] = self.encode_output(v, out_t)
                out, undefined = encoded[key]  # NaN to an integer y under this reading
                ev.add("+".join(n for n in (req, acc_name) if n), (out,), (undefined,))


__all__ = ["ACCUMULATIONS", "INT32_MAX", "INT32_MIN", "REQUANTISATIONS", "Requantising", "accumulations",
           "acc_float64", "conv_accumulate", "conv_geometry", "conv_sums", "conv_windows", "finite_exact", "matmul_operands", "requantise", "wrap_int32"]

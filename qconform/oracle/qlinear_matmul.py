"""QLinearMatMul-10 and -21: y = saturate(round(acc * a_scale * b_scale / y_scale) + y_zero_point),
acc = matmul(a - a_zero_point, b - b_zero_point), batched and broadcast like numpy.matmul.

qconform/docs/semantics.md#qlmm-formula .. #qlmm-shapes. The accumulator is computed exactly (int64 for
integer inputs; Python integers on the 2^-k grid of the float8 kinds otherwise), then read two
ways where both inputs are integers (#qlmm-accumulation):

    accumulator-int32-wrap  the exact sum wrapped to int32, two's complement        (first)
    accumulator-exact       a wider accumulator ("may overflow" permits, does not require, the wrap)

and requantised in the readings of #qlmm-requant (the spec names no precision or order):

    multiplier-float32                  m = fl32(fl32(a_s*b_s)/y_s), v = fl32(fl32(acc)*m)   (first)
    multiplier-float64                  the same in float64
    exact-rational                      v = acc*a_s*b_s/y_s exactly
    multiplier-float32-product-float64  m as multiplier-float32, v = fl64(acc*m) (onnx.reference)
    multiplier-in-scale-type            m = fl_TS(fl_TS(a_s*b_s)/y_s), v = fl_TS(acc*m), TS half only

A reading whose chain overflows to +-Inf where the exact value is finite is not offered for that
case: saturation cannot turn an in-range value into NaN or into another value (#qlmm-requant).

v is rounded half to even, the zero point added exactly and the sum saturated (integer y), or
v + y_zero_point goes to the float8 output through QuantizeLinear-21's saturate=1 Cast table, with
the #q-float8-zero-point readings and QuantizeLinear-21's fnuz table (#qlmm-float8). Readings giving the same
bits collapse in base.evaluate.
"""
from __future__ import annotations

import numpy as np

from qconform import dtypes
from qconform.case import Arg, Draft, Reading
from qconform.dtypes import ElemType
from qconform.oracle.base import Evaluation, register
from qconform.oracle.granularity import InvalidModel
from qconform.oracle.integer import (ACCUMULATIONS, REQUANTISATIONS, Requantising, accumulations,  # noqa: F401
                                     matmul_operands, wrap_int32)

def grid_exponent(t: ElemType) -> int:
    """k such that every finite value of t is an integer multiple of 2^-k (0 for integers)."""
    return 0 if t.is_integer else t.float_format.mbits - t.float_format.emin


def _to_grid(values: np.ndarray, k: int) -> np.ndarray:
    """Finite float64 values on the 2^-k grid -> object array of Python ints value * 2^k (exact)."""
    scaled = np.ldexp(values, k)
    return np.array([int(v) for v in scaled.ravel()], dtype=object).reshape(values.shape)


def param_view(name: str, value: np.ndarray, data_shape: tuple[int, ...], axis: int) -> np.ndarray:
    """A scale or zero point of a (axis=-1: per row, [..., M, 1]) or b (axis=-2: per column,
    [..., 1, N]) broadcast to that shape; scalars and 1-element 1-D tensors stay 0-d. For 2-D data
    the text's vector forms too: "an M element vector ... for per row quantization" of a [M, K], and
    one element per column of b [K, N]. Anything else is an invalid model
    (qconform/docs/semantics.md#qlmm-shapes)."""
    if value.size == 1 and value.ndim <= 1:
        return value.reshape(())
    want = list(data_shape)
    want[axis] = 1
    if value.ndim == 1 and len(data_shape) == 2 and value.shape[0] == data_shape[axis + 1 if axis == -2 else -2]:
        return value.reshape(tuple(want))
    if value.ndim == len(data_shape) >= 2 and value.shape[axis] == 1:
        try:
            if np.broadcast_shapes(value.shape, tuple(want)) == tuple(want):
                return np.broadcast_to(value, tuple(want))
        except ValueError:
            pass
    what = "per-row [..., M, 1]" if axis == -1 else "per-column [..., 1, N]"
    raise InvalidModel(f"{name} of shape {value.shape} is neither a scalar nor {what} for data of shape "
                       f"{data_shape} (qconform/docs/semantics.md#qlmm-shapes)")


class QLinearMatMul(Requantising):
    op = "QLinearMatMul"
    output_names = ("y",)
    has_axis = False

    # -- the steps of this op (defaults: the spec; a deviation model overrides one) ---------------
    def accumulate(self, da, db, raw, zeros, types) -> np.ndarray:
        """Exact integer accumulator of (a - a_zp) @ (b - b_zp) (int64; |acc| <= K * 255^2).
        ``raw`` (a, b as read) and ``zeros`` (their zero points) are for kernels that fold the
        zero points in afterwards."""
        return np.matmul(da.astype(np.int64), db.astype(np.int64))

    def b_scale(self, sb: np.ndarray, out_shape) -> np.ndarray:
        """b's scale (per tensor, or per column [..., 1, N]) against the output's shape."""
        return np.broadcast_to(sb, out_shape)

    # -- the body ----------------------------------------------------------------------------------
    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = (list(draft.inputs) + [None] * 8)[:8]
        if any(v is None for v in (a, a_s, b, b_s, y_s)):
            raise InvalidModel("QLinearMatMul needs a, a_scale, b, b_scale and y_scale")
        for s, zp in ((a_s, a_zp), (b_s, b_zp), (y_s, y_zp)):
            if zp is not None and zp.value.shape != s.value.shape:
                raise InvalidModel(f"{s.name} {s.value.shape} and {zp.name} {zp.value.shape} differ in shape")
        if y_s.value.size != 1 or y_s.value.ndim > 1:
            raise InvalidModel(f"y_scale of shape {y_s.value.shape}: per-tensor only "
                               "(qconform/docs/semantics.md#qlmm-shapes)")
        ta, tb = dtypes.get(a.type), dtypes.get(b.type)
        out_t = dtypes.get(y_zp.type if y_zp is not None else a.type)
        scale_t = y_s.type
        # numpy.matmul: a 1-D a is [1, K], a 1-D b is [K, 1]; the added axis is removed at the end.
        av, bv, squeeze, out_shape = matmul_operands(self.data(a), self.data(b))

        def param(arg: Arg | None, shape, axis) -> np.ndarray:
            if arg is None:
                return np.zeros(())
            return param_view(arg.name, self.param(arg), shape, axis)

        az, bz = param(a_zp, av.shape, -1), param(b_zp, bv.shape, -2)
        with np.errstate(all="ignore"):
            da, db = av - az, bv - bz  # exact: 8-bit values (float8: on one 2^-k grid)
        # qconform/docs/semantics.md#qlmm-float8: a dot product touching NaN or +-Inf is don't-care.
        bad_a, bad_b = ~np.isfinite(da), ~np.isfinite(db)
        touched = (np.matmul(bad_a.astype(np.int64), np.ones(db.shape, np.int64))
                   + np.matmul(np.ones(da.shape, np.int64), bad_b.astype(np.int64))) > 0
        da, db = np.where(bad_a, 0.0, da), np.where(bad_b, 0.0, db)

        if ta.is_integer and tb.is_integer:
            exact = self.accumulate(da, db, (av, bv), (az, bz), (ta, tb))
            accs = [(name, acc, 0) for name, acc in accumulations(exact)]
        else:
            ka, kb = grid_exponent(ta), grid_exponent(tb)
            accs = [("", np.matmul(_to_grid(da, ka), _to_grid(db, kb)), ka + kb)]

        sa, sb = param(a_s, av.shape, -1), param(b_s, bv.shape, -2)
        if sa.ndim:  # per row: [..., M, 1] against the output's batch dimensions
            sa = np.broadcast_to(sa, out_shape[:-1] + (1,))
        if sb.ndim:  # per column: [..., 1, N]
            sb = np.broadcast_to(sb, out_shape[:-2] + (1, out_shape[-1]))
        scales = (np.broadcast_to(sa, out_shape), self.b_scale(sb, out_shape),
                  float(self.param(y_s).reshape(())))
        yz = float(self.param(y_zp).reshape(())) if y_zp is not None else 0.0

        ev = Evaluation(clause="qlmm-formula", primary_only=primary_only)
        touched = np.broadcast_to(touched, out_shape)
        self.add_readings(ev, [(n, acc) for n, acc, _ in accs], accs[0][2], scales, yz, out_t, scale_t, touched,
                          out_shape)
        if squeeze:
            ev.readings = [Reading(r.name, tuple(np.squeeze(o, axis=squeeze) for o in r.outputs),
                                   tuple(None if m is None else np.squeeze(m, axis=squeeze) for m in r.dont_care))
                           for r in ev.readings]
            touched = np.squeeze(touched, axis=squeeze)
        ev.dont_care = [touched]
        return ev


class QLinearMatMul_10(QLinearMatMul):
    since = 10


class QLinearMatMul_21(QLinearMatMul):
    since = 21


register(QLinearMatMul_10(), QLinearMatMul_21())

"""QLinearConv-10, ConvInteger-10 and MatMulInteger-10 on the one integer body (``oracle/integer.py``).

QLinearConv (qconform/docs/semantics.md#qlconv-formula):
    acc[n, m, o..] = Σ_{c in m's group, k} (x[n, c, o·s + k·d − pad] − x_zp) · (w[m, c, k] − w_zp[m]) + B[m]
    (a padded position contributes 0: #qlconv-padding), read as the accumulation readings, then
    y = saturate(RNE(acc · x_s · w_s[m] / y_s) + y_zp) in the quantized matmul's requantisation readings
    (#qlconv-requant), named ``requant+accumulation``.
ConvInteger, MatMulInteger (#integer-accumulation): y = the exact sum reduced modulo 2^32 into
int32 — the one reading "The accumulation may overflow if and only if in 32 bits" leaves.
"""
from __future__ import annotations

import numpy as np

from qconform import dtypes
from qconform.case import Arg, Draft
from qconform.oracle.base import Evaluation, OpOracle, register
from qconform.oracle.granularity import InvalidModel
from qconform.oracle import integer
from qconform.oracle.integer import Requantising, accumulations, matmul_operands, wrap_int32
from qconform.oracle.qlinear_matmul import param_view


def _codes(oracle: OpOracle, arg: Arg | None) -> np.ndarray:
    """An integer tensor's values as int64 (an absent zero point: 0)."""
    if arg is None:
        return np.zeros((), np.int64)
    return np.asarray(oracle.param(arg), np.float64).astype(np.int64)


def _data(oracle: OpOracle, arg: Arg) -> np.ndarray:
    """A data or weight tensor's codes as int64, read through the oracle's layout step."""
    return np.asarray(oracle.data(arg), np.float64).astype(np.int64)


def _per_channel(name: str, arg: Arg | None, m: int) -> None:
    """A filter's scale or zero point: a scalar or a 1-D tensor of M elements, else invalid."""
    if arg is None:
        return
    v = arg.value
    if not (v.size == 1 and v.ndim <= 1) and not (v.ndim == 1 and v.shape[0] == m):
        raise InvalidModel(f"{name} of shape {v.shape}: a scalar or one element per output channel ({m})")


def _channel_view(v: np.ndarray, spatial: int) -> np.ndarray:
    """A per-output-channel parameter against (N, M, O..); a scalar stays 0-d."""
    return v.reshape(()) if v.size == 1 else v.reshape((1, -1) + (1,) * spatial)


def _scalar(name: str, arg: Arg | None) -> None:
    if arg is not None and not (arg.value.size == 1 and arg.value.ndim <= 1):
        raise InvalidModel(f"{name} of shape {arg.value.shape}: per tensor only (a scalar)")


class ConvSums(OpOracle):
    """The convolution's exact sums, a step of its own so that a deviation model (padding with
    code 0, a zero point ignored) replaces it and nothing else."""

    def conv_sums(self, x: np.ndarray, x_zp: np.ndarray, w: np.ndarray, w_zp: np.ndarray, attrs) -> np.ndarray:
        """Σ (x − x_zp)(w − w_zp[m]) over each window, padded positions contributing 0 (int64)."""
        return integer.conv_sums(x, x_zp, w, w_zp, attrs)


class QLinearConv(Requantising, ConvSums):
    op = "QLinearConv"
    output_names = ("y",)
    has_axis = False

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp, bias = (list(draft.inputs) + [None] * 9)[:9]
        if any(v is None for v in (x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp)):
            raise InvalidModel("QLinearConv needs x, w and the scale and zero point of x, w and y")
        for s, zp in ((x_s, x_zp), (w_s, w_zp), (y_s, y_zp)):
            if zp.value.shape != s.value.shape:
                raise InvalidModel(f"{s.name} {s.value.shape} and {zp.name} {zp.value.shape} differ in shape")
        for name, a in (("x_scale", x_s), ("y_scale", y_s)):
            _scalar(name, a)
        m, spatial = w.value.shape[0], w.value.ndim - 2
        _per_channel("w_scale", w_s, m)
        if bias is not None and bias.value.shape != (m,):
            raise InvalidModel(f"B of shape {bias.value.shape}: a 1-D bias of M = {m} elements")
        exact = self.conv_sums(_data(self, x), _codes(self, x_zp), _data(self, w), _codes(self, w_zp), draft.attrs)
        if bias is not None:
            exact = exact + _channel_view(_codes(self, bias), spatial)
        out_shape = exact.shape
        scales = (float(self.param(x_s).reshape(())),
                  np.broadcast_to(_channel_view(np.asarray(self.param(w_s), np.float64), spatial), out_shape),
                  float(self.param(y_s).reshape(())))
        out_t = dtypes.get(y_zp.type)
        ev = Evaluation(clause="qlconv-formula", primary_only=primary_only)
        self.add_readings(ev, accumulations(exact), 0, scales, float(self.param(y_zp).reshape(())), out_t,
                          y_s.type, np.zeros(out_shape, bool), out_shape)
        return ev


class ConvInteger(ConvSums):
    op = "ConvInteger"
    output_names = ("y",)
    has_axis = False

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        x, w, x_zp, w_zp = (list(draft.inputs) + [None] * 4)[:4]
        if x is None or w is None:
            raise InvalidModel("ConvInteger needs x and w")
        _scalar("x_zero_point", x_zp)
        _per_channel("w_zero_point", w_zp, w.value.shape[0])
        exact = self.conv_sums(_data(self, x), _codes(self, x_zp), _data(self, w), _codes(self, w_zp), draft.attrs)
        ev = Evaluation(clause="integer-accumulation", primary_only=primary_only)
        ev.add("spec", (self.int32_result(exact),))
        return ev

    def int32_result(self, exact: np.ndarray) -> np.ndarray:
        """The exact sum as the int32 output: reduced modulo 2^32 (#integer-accumulation)."""
        return wrap_int32(exact).astype(np.int32)


class MatMulInteger(OpOracle):
    op = "MatMulInteger"
    output_names = ("Y",)
    has_axis = False

    def matmul_sums(self, a: np.ndarray, a_zp: np.ndarray, b: np.ndarray, b_zp: np.ndarray) -> np.ndarray:
        """Σ_k (a − a_zp)(b − b_zp) exactly (int64), batched like numpy.matmul."""
        return np.matmul(a - a_zp, b - b_zp)

    def int32_result(self, exact: np.ndarray) -> np.ndarray:
        return wrap_int32(exact).astype(np.int32)

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        a, b, a_zp, b_zp = (list(draft.inputs) + [None] * 4)[:4]
        if a is None or b is None:
            raise InvalidModel("MatMulInteger needs A and B")
        av, bv, squeeze, _ = matmul_operands(_data(self, a), _data(self, b), ("A", "B"))
        az = param_view("a_zero_point", _codes(self, a_zp), av.shape, -1) if a_zp is not None else np.zeros((), np.int64)
        bz = param_view("b_zero_point", _codes(self, b_zp), bv.shape, -2) if b_zp is not None else np.zeros((), np.int64)
        y = self.int32_result(self.matmul_sums(av, az, bv, bz))
        if squeeze:
            y = np.squeeze(y, axis=squeeze)
        ev = Evaluation(clause="integer-accumulation", primary_only=primary_only)
        ev.add("spec", (y,))
        return ev


class QLinearConv_10(QLinearConv):
    since = 10


class ConvInteger_10(ConvInteger):
    since = 10


class MatMulInteger_10(MatMulInteger):
    since = 10


register(QLinearConv_10(), ConvInteger_10(), MatMulInteger_10())

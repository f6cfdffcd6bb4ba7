"""The oracle of onnxruntime's QOperator-format com.microsoft ops (QLinearAdd, QLinearMul, the pools, QLinearConcat, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QGemm).

Here the three whose text is an integer formula, on the one integer body (``oracle/integer.py``):

    QLinearAdd   C = (A_s·(A − A_zp) + B_s·(B − B_zp)) / C_s + C_zp       (#ms-qlinear-add)
                 exact-rational (first): the formula's value, RNE, the zero point, saturation;
                 formula-float32: each operation of the formula rounded to float32, in its order.
    QLinearMul   C = ((A − A_zp)·(B − B_zp))·(A_s·B_s)/C_s + C_zp          (#ms-qlinear-mul)
                 the quantized matmul's requantisation readings (#qlmm-requant), acc = the product.
    QGemm        Y = alpha·A'·B' (+ C) in the quantized matmul's readings, alpha·a_s in place of
                 a_s; float32 Y where y_scale is absent (#ms-qgemm).

The ops the text defines as ``quantize(f(dequantize(x)))`` are in ``oracle/qlinear_composed.py``.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from qconform import dtypes
from qconform.case import MS_DOMAIN, Arg, Draft
from qconform.oracle.arith import pack_output
from qconform.oracle.base import Evaluation, register
from qconform.oracle.granularity import InvalidModel
from qconform.oracle.graph import _round_fraction_f32
from qconform.oracle.integer import Requantising, requantise
from qconform.oracle.qlinear_composed import Composed, ConcatComposed, SoftmaxComposed

F32 = dtypes.get("float32")


def per_tensor_or(v: np.ndarray, shape: tuple[int, ...] | None, says: str) -> np.ndarray:
    """A parameter per tensor ("It's a scalar, which means a per-tensor/layer quantization": a scalar
    or a 1-element 1-D tensor), as shape (); else of ``shape`` where the op also admits one element
    per row or column; else InvalidModel(``says``). One reading of "scalar" for every com.microsoft op."""
    if v.size == 1 and v.ndim <= 1:
        return v.reshape(())
    if shape is not None and v.shape == tuple(shape):
        return v
    raise InvalidModel(says)


def scalar(arg: Arg | None, what: str) -> None:
    """A parameter the text makes per tensor only (absent: its default)."""
    if arg is not None:
        per_tensor_or(arg.value, None, f"{what} of shape {arg.value.shape}: a scalar (per tensor) only")


class _Binary(Requantising):
    """The operands of QLinearAdd and QLinearMul: per-tensor parameters, numpy broadcasting."""

    domain = MS_DOMAIN
    since = 1
    output_names = ("C",)
    has_axis = False

    def operands(self, draft: Draft):
        """(A, B) as int64 codes broadcast together, their zero points, the three scales, C's zero
        point, C's type and shape."""
        a, a_s, a_zp, b, b_s, b_zp, c_s, c_zp = (list(draft.inputs) + [None] * 8)[:8]
        if any(v is None for v in (a, a_s, b, b_s, c_s)):
            raise InvalidModel(f"{self.op} needs A, B and the scales of A, B and C")
        for arg, name in ((a_s, "A_scale"), (a_zp, "A_zero_point"), (b_s, "B_scale"), (b_zp, "B_zero_point"),
                          (c_s, "C_scale"), (c_zp, "C_zero_point")):
            scalar(arg, name)
        try:
            shape = np.broadcast_shapes(a.value.shape, b.value.shape)
        except ValueError:
            raise InvalidModel(f"A {a.value.shape} and B {b.value.shape} do not broadcast") from None
        zp = lambda arg: 0 if arg is None else int(self.param(arg).reshape(()))  # noqa: E731
        av = np.broadcast_to(self.data(a).astype(np.int64), shape)
        bv = np.broadcast_to(self.data(b).astype(np.int64), shape)
        scales = tuple(float(self.param(s).reshape(())) for s in (a_s, b_s, c_s))
        out_t = dtypes.get(c_zp.type if c_zp is not None else a.type)
        return av, bv, (zp(a_zp), zp(b_zp)), scales, zp(c_zp), out_t, shape


class QLinearAdd(_Binary):
    op = "QLinearAdd"

    def add_values(self, da: np.ndarray, db: np.ndarray, scales) -> list[tuple[str, np.ndarray]]:
        """(reading, v) with v the value RNE rounds: the exact formula, and the formula in float32."""
        a_s, b_s, c_s = (Fraction(s) for s in scales)
        fa, fb = da.ravel().tolist(), db.ravel().tolist()
        exact = [(a_s * x + b_s * y) / c_s for x, y in zip(fa, fb)]
        f32 = []
        for x, y in zip(fa, fb):
            ta = _round_fraction_f32(a_s * x)  # A_s·(A − A_zp): an 8-bit difference is a float32
            tb = _round_fraction_f32(b_s * y)
            s = _round_fraction_f32(Fraction(ta) + Fraction(tb))
            f32.append(Fraction(_round_fraction_f32(Fraction(s) / c_s)) if np.isfinite(s) else s)
        return [("exact-rational", exact), ("formula-float32", f32)]

    def add_results(self, a: np.ndarray, b: np.ndarray, zps: tuple[int, int], scales, czp: int
                    ) -> list[tuple[str, np.ndarray]]:
        """(reading, RNE(v) + C_zp as exact integers) from the raw codes: the step a kernel that folds
        the zero points into its arithmetic replaces."""
        out = []
        for name, values in self.add_values(a - zps[0], b - zps[1], scales):
            q = np.array([float(self.round_exact(v)) if isinstance(v, Fraction) else v for v in values], np.float64)
            out.append((name, q.reshape(a.shape) + czp))
        return out

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        a, b, zps, scales, czp, out_t, shape = self.operands(draft)
        ev = Evaluation(clause="ms-qlinear-add", primary_only=primary_only)
        for name, q in self.add_results(a, b, zps, scales, czp):
            y, undefined = self.saturate(q, out_t)
            ev.add(name, (pack_output(y, out_t),), (undefined,))
        return ev


class QLinearMul(_Binary):
    op = "QLinearMul"

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        a, b, zps, scales, czp, out_t, shape = self.operands(draft)
        ev = Evaluation(clause="ms-qlinear-mul", primary_only=primary_only)
        product = (a - zps[0]) * (b - zps[1])
        self.add_readings(ev, [("", product)], 0, scales, float(czp), out_t, "float32", np.zeros(shape, bool), shape)
        return ev


class QGemm(Requantising):
    domain = MS_DOMAIN
    op = "QGemm"
    since = 1
    output_names = ("Y",)
    has_axis = False

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        a, a_s, a_zp, b, b_s, b_zp, c, y_s, y_zp = (list(draft.inputs) + [None] * 9)[:9]
        if any(v is None for v in (a, a_s, a_zp, b, b_s, b_zp)):
            raise InvalidModel("QGemm needs A, B and their scales and zero points")
        if y_zp is not None and y_s is None:
            raise InvalidModel("y_zero_point without y_scale")
        if y_s is not None and y_zp is None:
            raise InvalidModel("y_scale without y_zero_point: the text makes Y float32 without either "
                               "(qconform/docs/semantics.md#ms-qgemm)")
        attrs = draft.attrs
        av, bv = self.data(a).astype(np.int64), self.data(b).astype(np.int64)
        if av.ndim != 2 or bv.ndim != 2:
            raise InvalidModel(f"A {av.shape} and B {bv.shape}: QGemm takes 2-D operands")
        av = av.T if attrs.get("transA", 0) else av
        bv = bv.T if attrs.get("transB", 0) else bv
        if av.shape[1] != bv.shape[0]:
            raise InvalidModel(f"inner dimensions differ: A' {av.shape}, B' {bv.shape}")
        m, n = av.shape[0], bv.shape[1]
        for arg, name in ((a_s, "a_scale"), (a_zp, "a_zero_point"), (y_s, "y_scale"), (y_zp, "y_zero_point")):
            scalar(arg, name)
        for arg, name in ((b_s, "b_scale"), (b_zp, "b_zero_point")):
            per_tensor_or(arg.value, (n,),
                          f"{name} of shape {arg.value.shape}: a scalar or N = {n} elements (per column)")
        if b_s.value.shape != b_zp.value.shape:
            raise InvalidModel(f"b_scale {b_s.value.shape} and b_zero_point {b_zp.value.shape} differ in shape")
        bz = self.param(b_zp).astype(np.int64).reshape(-1)
        acc = (av - int(self.param(a_zp).reshape(()))) @ (bv - (bz if bz.size > 1 else bz[0]))
        if c is not None:
            try:
                acc = acc + np.broadcast_to(self.param(c).astype(np.int64), (m, n))
            except ValueError:
                raise InvalidModel(f"C {c.value.shape} does not broadcast to (M, N) = {(m, n)}") from None
        alpha = float(np.float32(attrs.get("alpha", 1.0)))
        a_scale = alpha * float(self.param(a_s).reshape(()))  # exact in float64: two float32 factors
        if float(np.float32(a_scale)) != a_scale:
            raise InvalidModel("alpha·a_scale is not a float32: the case would depend on where alpha enters "
                               "(a generator keeps it exact, qconform/docs/semantics.md#ms-qgemm)")
        b_scale = np.broadcast_to(self.param(b_s).reshape(-1) if b_s.value.size > 1 else self.param(b_s).reshape(()),
                                  (m, n))
        ev = Evaluation(clause="ms-qgemm", primary_only=primary_only)
        if y_s is None:
            self.float_readings(ev, acc, (a_scale, b_scale))
            return ev
        out_t = dtypes.get(y_zp.type)
        self.add_readings(ev, [("", acc)], 0, (a_scale, b_scale, float(self.param(y_s).reshape(()))),
                          float(self.param(y_zp).reshape(())), out_t, "float32", np.zeros((m, n), bool), (m, n))
        return ev

    def float_readings(self, ev: Evaluation, acc: np.ndarray, scales) -> None:
        """Y = acc·alpha·a_s·b_s as float32, in the requantisation readings with y_s = 1: each chain's
        value rounded to float32 once at its end; exact-rational rounds the exact product once."""
        a_s, b_s = scales
        for req in self.requantisations("float32"):
            if req == "exact-rational":
                v = np.array([_round_fraction_f32(Fraction(int(x)) * Fraction(a_s) * Fraction(float(s)))
                              for x, s in zip(acc.ravel(), b_s.ravel())], np.float64).reshape(acc.shape)
            else:
                v = requantise(self, req, acc, 0, (a_s, b_s, 1.0), 0.0, F32, "float32")[False]
            ev.add(req, (self.fl(F32, v).astype(np.float32),))


class QLinearAdd_1(QLinearAdd):
    pass


class QLinearMul_1(QLinearMul):
    pass


class QGemm_1(QGemm):
    pass


class QLinearSigmoid_1(Composed):
    op = "QLinearSigmoid"
    float_op = "Sigmoid"


class QLinearLeakyRelu_1(Composed):
    op = "QLinearLeakyRelu"
    float_op = "LeakyRelu"
    float_attrs = ("alpha",)


class QLinearSoftmax_1(SoftmaxComposed):
    op = "QLinearSoftmax"
    float_op = "Softmax"
    float_attrs = ("axis", "opset")
    clause = "ms-qlinear-softmax"


class QLinearAveragePool_1(Composed):
    op = "QLinearAveragePool"
    float_op = "AveragePool"
    float_attrs = ("auto_pad", "ceil_mode", "channels_last", "count_include_pad", "kernel_shape", "pads", "strides")
    clause = "ms-qlinear-pool"


class QLinearGlobalAveragePool_1(Composed):
    op = "QLinearGlobalAveragePool"
    float_op = "GlobalAveragePool"
    float_attrs = ("channels_last",)
    clause = "ms-qlinear-pool"


class QLinearConcat_1(ConcatComposed):
    op = "QLinearConcat"


register(QLinearAdd_1(), QLinearMul_1(), QGemm_1(), QLinearSigmoid_1(), QLinearLeakyRelu_1(), QLinearSoftmax_1(),
         QLinearAveragePool_1(), QLinearGlobalAveragePool_1(), QLinearConcat_1())

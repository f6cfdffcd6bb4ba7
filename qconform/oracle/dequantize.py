"""DequantizeLinear, every version: y = (x - x_zero_point) * x_scale.

The subtraction is exact; the multiplication is rounded once in the compute type
(qconform/docs/semantics.md#dq-formula, #dq-subtraction, #dq-precision)."""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from qconform import dtypes
from qconform.case import Draft
from qconform.oracle.base import Evaluation, OpOracle, register
from qconform.oracle import granularity
from qconform.oracle.granularity import InvalidModel


class DequantizeLinear(OpOracle):
    op = "DequantizeLinear"
    output_names = ("y",)
    has_axis: ClassVar[bool] = True
    has_output_dtype: ClassVar[bool] = False

    def output_type(self, draft: Draft, scale_t: str) -> str:
        """qconform/docs/semantics.md#dq-output-type."""
        code = draft.attrs.get("output_dtype", 0) if self.has_output_dtype else 0
        if code:
            return dtypes.get(code).name
        if scale_t == "float8e8m0":
            raise InvalidModel("a float8e8m0 scale needs output_dtype")
        return scale_t

    def subtract(self, xv: np.ndarray, zero: np.ndarray, x_t: str, prec: str) -> np.ndarray:
        """x - zero_point: exact (both sides have at most 33 significant bits here)."""
        return xv - zero

    def product_type(self, out_t: str, scale_t: str) -> str:
        """The literal reading's multiplication precision: "The output type also determines the
        precision of the multiplication" (23+; before, the output type is the scale's)."""
        return out_t

    def dq_value(self, xv, zero, scale, x_t: str, prec: str | None, out_t: str) -> np.ndarray:
        """(x - zero) * scale: operands and product rounded to ``prec``, or (prec None) the exact
        product rounded once to ``out_t``."""
        diff = self.subtract(xv, zero, x_t, prec or out_t)
        with np.errstate(all="ignore"):
            if prec is None:
                return self.exact_product(out_t, diff, scale)
            return self.fl(prec, self.fl(prec, diff) * self.fl(prec, scale))

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        x, s, zp = (list(draft.inputs) + [None])[:3]
        attrs = draft.attrs
        out_t = self.output_type(draft, s.type)
        shape = x.value.shape
        axis = self.axis(attrs, len(shape))
        block = attrs.get("block_size", 0)
        scale = self.expand(self.param(s), shape, axis, block)
        zero = self.expand(self.param(zp), shape, axis, block) if zp is not None else np.zeros(shape)
        if x.type == "int32" and np.any(zero != 0):
            raise InvalidModel("int32 input with a non-zero zero point (qconform/docs/semantics.md#dq-int32)")
        xv = self.data(x)
        ev = Evaluation(clause="dq-formula", primary_only=primary_only,
                        information=granularity.invalid_by_text(shape, s.value.shape, axis, block))
        # Literal: "The output type also determines the precision of the multiplication" (23+).
        literal = self.fl(out_t, self.dq_value(xv, zero, scale, x.type, self.product_type(out_t, s.type), out_t))
        ev.add("multiply-in-output-type", (self._out(literal, out_t),))
        if out_t != "float32" and not ev.complete:
            via32 = self.fl(out_t, self.dq_value(xv, zero, scale, x.type, "float32", out_t))
            ev.add("multiply-in-float32-then-round", (self._out(via32, out_t),))
        if not ev.complete:
            exact = self.dq_value(xv, zero, scale, x.type, None, out_t)
            ev.add("multiply-exact-then-round", (self._out(exact, out_t),))
        ev.dont_care = [None]
        return ev

    def _out(self, values: np.ndarray, t: str) -> np.ndarray:
        return self.pack(self.encode(values, t, saturate=False), t)


def _version(since: int, **facts) -> DequantizeLinear:
    return type(f"DequantizeLinear_{since}", (DequantizeLinear,), {"since": since, **facts})()


register(
    _version(10, has_axis=False),
    _version(13),
    _version(19),
    _version(21),
    *(_version(v, has_output_dtype=True) for v in (23, 24, 25, 28)),
)

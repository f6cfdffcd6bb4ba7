"""DequantizeLinear, every version: y = (x - x_zero_point) * x_scale.

The subtraction is exact; the multiplication is rounded once in the compute type
(qconform/docs/semantics.md#dq-formula, #dq-subtraction, #dq-precision)."""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from qconform import dtypes
from qconform.case import Draft
from qconform.oracle import floats
from qconform.oracle.arith import as_float64, exact_product, fl, pack_output
from qconform.oracle.base import Evaluation, OpOracle, register
from qconform.oracle.granularity import InvalidModel, expand


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

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        x, s, zp = (list(draft.inputs) + [None])[:3]
        attrs = draft.attrs
        out_t = self.output_type(draft, s.type)
        axis = attrs.get("axis", 1) if self.has_axis else None
        block = attrs.get("block_size", 0)
        shape = x.value.shape
        scale = expand(as_float64(s.value, s.type), shape, axis, block)
        zero = (expand(as_float64(zp.value, zp.type), shape, axis, block) if zp is not None
                else np.zeros(shape))
        if x.type == "int32" and np.any(zero != 0):
            raise InvalidModel("int32 input with a non-zero zero point (qconform/docs/semantics.md#dq-int32)")
        diff = as_float64(x.value, x.type) - zero  # exact: both sides have ≤ 33 significant bits here
        ev = Evaluation(clause="dq-formula", primary_only=primary_only)
        # Literal: "The output type also determines the precision of the multiplication" (23+).
        literal = fl(out_t, fl(out_t, diff) * fl(out_t, scale))
        ev.add("multiply-in-output-type", (self._out(literal, out_t),))
        if out_t != "float32" and not ev.complete:
            via32 = fl(out_t, fl("float32", fl("float32", diff) * fl("float32", scale)))
            ev.add("multiply-in-float32-then-round", (self._out(via32, out_t),))
        if not ev.complete:
            ev.add("multiply-exact-then-round", (self._out(exact_product(out_t, diff, scale), out_t),))
        ev.dont_care = [None]
        return ev

    @staticmethod
    def _out(values: np.ndarray, t: str) -> np.ndarray:
        return pack_output(floats.encode(values, dtypes.get(t), saturate=False), t)


def _version(since: int, **facts) -> DequantizeLinear:
    return type(f"DequantizeLinear_{since}", (DequantizeLinear,), {"since": since, **facts})()


register(
    _version(10, has_axis=False),
    _version(13),
    _version(19),
    _version(21),
    *(_version(v, has_output_dtype=True) for v in (23, 24, 25, 28)),
)

"""DynamicQuantizeLinear-11: scale, zero point and y of a float32 tensor, in float32, in the spec's order.

    scale = (max(0, max x) - min(0, min x)) / 255           (qconform/docs/semantics.md#dql-formula)
    zp    = round(saturate(0 - min(0, min x) / scale))        saturate to [0, 255], then round (RNE)
    y     = saturate(round(x / scale) + zp)                   round (RNE), then add, then saturate

Every arithmetic step is one IEEE float32 operation (``fl``), as the function body in onnx.defs
spells it (Sub, Div, Div, Sub, Clip, Round, QuantizeLinear). Readings:
- y's x / y_scale is its QuantizeLinear-10 node's, whose precision the text leaves open for float32
  operands: the float32 quotient (``spec``) or the exact one rounded once (``quotient-exact``), as
  for QuantizeLinear-10 itself (#dql-formula, #q-division);
- a zero range (all +-0, or empty): y_scale is the formula's 0/255 = +0, or -0 where an x element
  is -0 (Max and Min do not order the zeros, so hi - lo may be -0 - +0); the zero point and y are
  0/0 by the text, so don't-care (#dql-zero-input);
- NaN anywhere in x: every output is don't-care (#dql-nan);
- +-Inf: plain IEEE float32 arithmetic; elements it leaves NaN are don't-care (#dql-inf).
"""
from __future__ import annotations

import numpy as np

from qconform import dtypes
from qconform.case import Draft
from qconform.oracle import floats
from qconform.oracle.arith import pack_output
from qconform.oracle.base import Evaluation, OpOracle, register
from qconform.oracle.granularity import InvalidModel

QMIN, QMAX = 0, 255  # "Right now only uint8 is supported."
OUT_T = "uint8"


def _f32(v) -> np.ndarray:
    """A float32 value held in float64 as a 0-d float32 array (encoded from its bits, not cast)."""
    return pack_output(floats.encode(np.asarray(v, dtype=np.float64), dtypes.get("float32"), saturate=False),
                       "float32")


class DynamicQuantizeLinear(OpOracle):
    op = "DynamicQuantizeLinear"
    output_names = ("y", "y_scale", "y_zero_point")

    def dql_range(self, xv: np.ndarray) -> tuple[float, float]:
        """(max(0, max x), min(0, min x)): the data range adjusted to include 0 (+0 for -0)."""
        hi = max(0.0, float(xv.max())) if xv.size else 0.0
        lo = min(0.0, float(xv.min())) if xv.size else 0.0
        return hi, lo

    def dql_width(self, hi: float, lo: float) -> float:
        """max(0, max x) - min(0, min x): one float32 subtraction."""
        with np.errstate(all="ignore"):
            return float(self.fl("float32", np.float64(hi) - np.float64(lo)))

    def dql_scale(self, rng: np.ndarray) -> float:
        """y_scale = (max(x) - min(x)) / (qmax - qmin), one float32 division."""
        with np.errstate(all="ignore"):
            return float(self.fl("float32", rng / np.float64(QMAX - QMIN)))

    def dql_quantize(self, xv: np.ndarray, lo: float, scale: float,
                     division: str = "float32") -> tuple[int | None, np.ndarray, np.ndarray]:
        """(zero point, or None where the arithmetic leaves it NaN; y as int64; y's undefined mask).

        ``division``: the precision of y's x / y_scale, which the body leaves to its QuantizeLinear-10
        node: "float32" (``spec``) or "float64", the exact quotient rounded once (``quotient-exact``,
        qconform/docs/semantics.md#dql-formula). The zero point's division is a Div node: float32.
        An undefined zero point is still some uint8 value (the Cast of a NaN), so y stays defined
        where x / scale is +-Inf: saturation decides it whatever the zero point (#dql-inf)."""
        with np.errstate(all="ignore"):
            min_scaled = self.quotient(np.float64(lo), np.float64(scale), "float32")
            izp = self.fl("float32", np.float64(QMIN) - min_scaled)  # "qmin - min(x)/y_scale"
            clipped = np.clip(izp, QMIN, QMAX)  # "saturate(...)"; NaN stays NaN
            zp = float(self.round(clipped))  # "round(...)": ties to even
            q = self.quotient(xv, np.float64(scale), division)
            if np.isnan(zp):
                y, undefined = self.saturate(np.where(np.isinf(q), q, np.nan), OUT_T)
                return None, y, undefined
            y, undefined = self.to_int(q, zp, OUT_T, "float32")
        return int(zp), y, undefined

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        if len(draft.inputs) != 1 or draft.inputs[0] is None or draft.inputs[0].type != "float32":
            raise InvalidModel("DynamicQuantizeLinear takes one float32 input x")
        x = draft.inputs[0]
        xv = self.data(x)
        ev = Evaluation(clause="dql-formula", primary_only=primary_only)
        shape = xv.shape
        u8 = lambda v: pack_output(np.asarray(v, np.int64), OUT_T)  # noqa: E731
        if np.isnan(xv).any():  # qconform/docs/semantics.md#dql-nan: min/max of a NaN tensor is not defined
            ev.clause = "dql-nan"
            ev.add("spec", (u8(np.zeros(shape)), _f32(0.0), u8(0)))
            ev.dont_care = [np.ones(shape, bool), np.ones((), bool), np.ones((), bool)]
            return ev
        hi, lo = self.dql_range(xv)
        with np.errstate(all="ignore"):
            rng = self.dql_width(hi, lo)
            scale = self.dql_scale(rng)
        zp, y, undefined = self.dql_quantize(xv, lo, scale)
        if rng == 0:  # all +-0 or empty: the adjusted range is [0, 0], zp and y are 0/0 (#dql-zero-input)
            ev.clause = "dql-zero-input"
            ev.add("scale-plus-zero", (self.pack(y, OUT_T), _f32(scale), u8(0 if zp is None else zp)))
            if scale == 0 and np.signbit(xv).any():  # Max(-0, 0) may be -0, Min(-0, 0) +0: -0 - +0 = -0
                ev.add("scale-minus-zero", (self.pack(y, OUT_T), _f32(-0.0), u8(0)))
            ev.dont_care = [undefined, np.zeros((), bool), np.asarray(zp is None)]
            return ev
        if np.isinf(xv).any():
            ev.clause = "dql-inf"
        ev.add("spec", (self.pack(y, OUT_T), _f32(scale), u8(0 if zp is None else zp)))
        ev.dont_care = [undefined, np.zeros((), bool), np.asarray(zp is None)]
        if not ev.complete:  # y's division in its QuantizeLinear-10 node: the exact quotient too (#dql-formula)
            _, y_exact, undefined_exact = self.dql_quantize(xv, lo, scale, division="float64")
            if not (np.array_equal(y_exact, y) and np.array_equal(undefined_exact, undefined)):
                ev.add("quotient-exact", (self.pack(y_exact, OUT_T), _f32(scale), u8(0 if zp is None else zp)),
                       [undefined_exact, None, None])
        return ev


class DynamicQuantizeLinear_11(DynamicQuantizeLinear):
    since = 11


register(DynamicQuantizeLinear_11())

"""QuantizeLinear, every version: y = saturate(round(x / y_scale) + y_zero_point).

One common body; a version class only sets the facts its own text states (see the table in
``_VERSIONS``). Clauses: qconform/docs/semantics.md#q-formula and the sections named below.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from qconform import dtypes
from qconform.case import Arg, Draft
from qconform.oracle import floats, granularity
from qconform.oracle.arith import round_half_even
from qconform.oracle.base import Evaluation, OpOracle, register
from qconform.oracle.granularity import InvalidModel

#: Precision prefix of the reading that rounds the exact quotient once (qconform/docs/semantics.md#q-division).
ONCE = "once:"


class QuantizeLinear(OpOracle):
    op = "QuantizeLinear"
    output_names = ("y",)
    has_axis: ClassVar[bool] = True
    # Cast table of this version: fnuz ±Inf with saturate=1 -> NaN (19–23) or ±FLT_MAX (24+).
    fnuz_inf_saturates: ClassVar[bool] = False
    # The "precision" sentence (23+); before it the quotient precision of half inputs is unstated.
    scale_type_sets_precision: ClassVar[bool] = False

    def output_type(self, draft: Draft, zp: Arg | None) -> str:
        """qconform/docs/semantics.md#q-output-type."""
        if zp is not None:
            return zp.type
        code = draft.attrs.get("output_dtype", 0)
        return dtypes.get(code).name if code else "uint8"

    def division_readings(self, x_t: str, s_t: str, attrs) -> list[tuple[str, str]]:
        """(reading name, precision type) pairs; the first is what the latest spec text states.

        qconform/docs/semantics.md#q-division, #q-division-half."""
        if attrs.get("precision", 0):
            return self.precision_readings(dtypes.get(attrs["precision"]).name)
        if s_t == "int32" and self.scale_type_sets_precision:  # the division in int32 precision (Q2)
            return self.precision_readings("int32")
        if s_t in ("int32", "float8e8m0"):  # no floating-point division in these types
            readings = [("division-in-float32", "float32")]
            if dtypes.get(x_t).is_half:
                readings.append((f"division-in-{x_t}", x_t))
            readings.append(("division-in-float64", "float64"))
            return readings
        if dtypes.get(s_t).is_half and not self.scale_type_sets_precision:
            readings = [(f"quotient-in-{s_t}", s_t), ("quotient-in-float32", "float32")]
            if s_t == "bfloat16":  # float32's range is bfloat16's: x / s can leave it, the exact one need not
                readings.append(("quotient-exact", "float64"))  # qconform/docs/semantics.md#q-division-half
            return readings
        if x_t == "int32" and not self.scale_type_sets_precision:  # qconform/docs/semantics.md#q-int32-input
            return [("int32-via-float32", s_t), ("int32-via-float64", "float64")]
        if self.scale_type_sets_precision:
            return self.precision_readings(s_t)
        # float32 operands before 23: the precision is unstated; float32 (what 23+ states for these
        # types) or the exact quotient, the formula's own value (qconform/docs/semantics.md#q-division)
        return [("spec", s_t), ("quotient-exact", "float64")]

    def precision_readings(self, p: str) -> list[tuple[str, str]]:
        """"The type of y_scale determines the precision of the division" (23+; and ``precision``):
        the operands rounded to P and divided in P (first, strict), or the exact quotient rounded once
        to P, the IEEE-754 meaning of an operation's precision (qconform/docs/semantics.md#q-division)."""
        return [(f"operands-rounded-to-{p}", p), (f"quotient-rounded-once-to-{p}", ONCE + p)]

    def divisions(self, xv, scale, readings: list[tuple[str, str]], primary_only: bool = False):
        """(reading name, precision, quotient) per division reading; the zero-point and fnuz readings
        share them. The exact-quotient reading is dropped where it gives the very quotients of the
        operands-rounded one (its name with it: the case then says "spec")."""
        out: list[tuple[str, str, np.ndarray]] = []
        for name, prec in readings[:1] if primary_only else readings:
            p = prec.removeprefix(ONCE)
            if p == "int32":  # an integer quotient: the zero point is then added exactly
                p, q = "float64", self.integer_quotient(xv, scale, once=prec.startswith(ONCE))
            elif prec.startswith(ONCE):
                q = self.quotient_once(xv, scale, p)
            else:
                q = self.quotient(xv, scale, p)
            if prec.startswith(ONCE):
                first = next((o for o in out if o[1] == p), None)
                if first is not None and _same(first[2], q):
                    out[out.index(first)] = ("spec" if len(readings) == 2 else first[0], p, first[2])
                    continue
            out.append((name, p, q))
        return out

    def integer_quotient(self, x: np.ndarray, s: np.ndarray, once: bool) -> np.ndarray:
        """x / s in int32 precision, "For (x / y_scale), it rounds to the nearest even": x converted to
        an integer (ties to even) unless ``once``, then the quotient rounded to the nearest integer, ties
        to even (qconform/docs/semantics.md#q-division, int32 scale). float64 decides every tie here:
        a non-tie quotient of a float32 x and an int32 s is further from k + 1/2 than float64's error.
        A zero quotient is +0: an int32 has no -0 (adding +0 clears the sign of a zero, nothing else)."""
        with np.errstate(all="ignore"):
            xi = np.asarray(x, np.float64) if once else round_half_even(x)
            return self.round(xi / np.asarray(s, np.float64)) + 0.0

    def quantize_int(self, xv, scale, q, zero, out_t, prec: str) -> tuple[np.ndarray, np.ndarray]:
        """An integer y from the quotient q = x / scale; x and scale are here for kernels that fuse
        the division into the rounding (OpenVINO's FakeQuantize), the spec needs only q."""
        return self.to_int(q, zero, out_t, prec)

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        x, s, zp = (list(draft.inputs) + [None])[:3]
        attrs = draft.attrs
        out_t = dtypes.get(self.output_type(draft, zp))
        if zp is not None and attrs.get("output_dtype", 0) and dtypes.get(attrs["output_dtype"]).name != zp.type:
            raise InvalidModel("output_dtype differs from the zero point's type")
        shape = x.value.shape
        axis = self.axis(attrs, len(shape))
        block = attrs.get("block_size", 0)
        scale = self.expand(self.param(s), shape, axis, block)
        zero = self.expand(self.param(zp), shape, axis, block) if zp is not None else np.zeros(shape)
        xv = self.data(x)
        ev = Evaluation(clause="q-formula", primary_only=primary_only,
                        information=granularity.invalid_by_text(shape, s.value.shape, axis, block))

        saturate = bool(attrs.get("saturate", 1))
        divisions = self.divisions(xv, scale, self.division_readings(x.type, s.type, attrs), primary_only)
        for div_name, prec, q in divisions:
            if ev.complete:
                break
            if out_t.is_integer:
                y, undefined = self.quantize_int(xv, scale, q, zero, out_t, prec)
                out = self.pack(y, out_t)
            else:
                v = self.add_zero_float(q, zero, prec)  # added even where +0: −0 + +0 = +0 (#q-float8-zero-point)
                undefined = floats.unspecified(v, out_t)
                # fnuz +-Inf: this version's own Cast table (#q-float8-fnuz-inf)
                out = self.pack(self.encode(v, out_t, saturate=saturate, fnuz_inf_saturates=self.fnuz_inf_saturates),
                                out_t)
            ev.add(div_name, (out,), (undefined,))
        return ev


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Same values, NaN where NaN and the same sign of zero."""
    return bool(np.array_equal(a, b, equal_nan=True) and np.array_equal(np.signbit(a), np.signbit(b)))


def _version(since: int, **facts) -> QuantizeLinear:
    cls = type(f"QuantizeLinear_{since}", (QuantizeLinear,), {"since": since, **facts})
    return cls()


_VERSIONS = [
    _version(10, has_axis=False),
    _version(13),
    _version(19),
    _version(21),
    _version(23, scale_type_sets_precision=True),
    _version(24, scale_type_sets_precision=True, fnuz_inf_saturates=True),
    _version(25, scale_type_sets_precision=True, fnuz_inf_saturates=True),
    _version(28, scale_type_sets_precision=True, fnuz_inf_saturates=True),
]
register(*_VERSIONS)

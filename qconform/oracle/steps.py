"""The steps implementations differ on, written once, as methods whose defaults are the spec.

Every op oracle computes its outputs through these methods (``OpOracle`` inherits them): reading
the data, broadcasting the parameters, the division, the rounding, the zero-point addition, the
saturation, the minifloat encoding, rounding to an intermediate float type and the element order of
packed types. A deviation model (``qconform.diagnosis.models``) is a mixin that overrides one of
them; composed with an oracle's version class it is that op version computed the deviating way,
by the very body that computes the goldens. There is no second copy of the arithmetic to keep in
step with the first.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any, ClassVar, Mapping

import numpy as np

from qconform import dtypes
from qconform.case import Arg
from qconform.oracle import floats, granularity
from qconform.oracle.arith import (as_float64, exact_product, fl, pack_output, round_fraction, round_with,
                                   saturate_to_int)


class Steps:
    """Defaults: exactly the spec's arithmetic (docs/semantics.md). Override one to deviate."""

    #: Rounding to an integer: "half-even" is the spec's; see arith.round_with for the others.
    rounding: ClassVar[str] = "half-even"
    #: Whether the op version has an ``axis`` attribute (QuantizeLinear-10 and DequantizeLinear-10 do not).
    has_axis: ClassVar[bool] = True

    # -- reading ---------------------------------------------------------------------------------
    def fl(self, t: Any, v: np.ndarray) -> np.ndarray:
        """Round float64 values once to float type t (IEEE round-to-nearest-even, overflow to ±Inf)."""
        return fl(t, v)

    def read_layout(self, arr: np.ndarray, t: str) -> np.ndarray:
        """A data input as the kernel reads it (packed types: the element order in a byte)."""
        return arr

    def data(self, arg: Arg) -> np.ndarray:
        """A data input's exact values."""
        return as_float64(self.read_layout(arg.value, arg.type), arg.type)

    def param(self, arg: Arg) -> np.ndarray:
        """A scale's or zero point's exact values."""
        return as_float64(arg.value, arg.type)

    # -- granularity -----------------------------------------------------------------------------
    def axis(self, attrs: Mapping[str, Any], rank: int) -> int | None:
        return attrs.get("axis", 1) if self.has_axis else None

    def expand(self, p: np.ndarray, shape, axis: int | None, block: int) -> np.ndarray:
        """A parameter broadcast to the data's shape (per-tensor, per-axis or blocked)."""
        return granularity.expand(p, shape, axis, block)

    # -- arithmetic ------------------------------------------------------------------------------
    def quotient(self, x: np.ndarray, s: np.ndarray, prec: str) -> np.ndarray:
        """x / s correctly rounded in ``prec`` (operands first rounded to it); "float64" keeps the
        exact operands and rounds once to float64 (the int32-via-float64 reading)."""
        with np.errstate(all="ignore"):
            if prec == "float64":
                return np.asarray(x, np.float64) / s
            return self.fl(prec, self.fl(prec, x) / self.fl(prec, s))

    def quotient_once(self, x: np.ndarray, s: np.ndarray, prec: str) -> np.ndarray:
        """The exact x / s rounded once to ``prec``: float64 division of the exact operands, then one
        rounding. The double rounding is innocuous: operands have at most 32 significant bits and
        ``prec`` at most 24, so a quotient that is not a midpoint of ``prec`` stays more than 2^-48
        (relative) away from one, far beyond float64's 2^-53."""
        with np.errstate(all="ignore"):
            return self.fl(prec, np.asarray(x, np.float64) / s)

    def add_zero_float(self, q: np.ndarray, zero: np.ndarray, prec: str) -> np.ndarray:
        """q + zero for a float output, rounded to ``prec``."""
        with np.errstate(all="ignore"):
            return q + zero if prec == "float64" else self.fl(prec, q + zero)

    def exact_product(self, t: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """fl_t(a * b) with one rounding of the exact product."""
        return exact_product(t, a, b)

    def round(self, v: np.ndarray) -> np.ndarray:
        """Round exact float64 values to integers (NaN and ±Inf pass through)."""
        return round_with(v, self.rounding)

    def round_exact(self, v: Fraction) -> int:
        """``round`` for one exact rational."""
        return round_fraction(v, self.rounding)

    # -- to the output type ----------------------------------------------------------------------
    def to_int(self, q: np.ndarray, zero: np.ndarray, t: Any, prec: str) -> tuple[np.ndarray, np.ndarray]:
        """saturate(round(q) + zero) as int64, plus the NaN (undefined) mask."""
        with np.errstate(all="ignore"):
            return self.saturate(self.round(q) + zero, t)

    def saturate(self, v: np.ndarray, t: Any) -> tuple[np.ndarray, np.ndarray]:
        """Clamp exact integers (±Inf allowed) to t's range; NaN -> (0, undefined)."""
        return saturate_to_int(v, t)

    def encode(self, v: np.ndarray, t: Any, **kw) -> np.ndarray:
        """float64 values -> t's codes by the Cast tables (``saturate``, ``fnuz_inf_saturates``)."""
        return floats.encode(v, dtypes.get(t), **kw)

    def layout(self, out: np.ndarray, t: Any) -> np.ndarray:
        """The output array as a correct reader sees what the kernel wrote (packed types)."""
        return out

    def pack(self, values: np.ndarray, t: Any) -> np.ndarray:
        """int64 values or float codes -> an array of t's dtype, in the kernel's layout."""
        return self.layout(pack_output(values, t), t)


__all__ = ["Steps"]

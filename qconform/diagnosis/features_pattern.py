"""Features of a QDQ pattern's elements that a fused kernel's vendor can act on (issue 64): what the
pattern's requantisation is in exact arithmetic, not only what the graph's last QuantizeLinear saw.

A fused integer kernel computes DequantizeLinear … → op → QuantizeLinear as one requantisation of the
codes: the value it rounds is the exact one, op((q − z)·s)/s_y, which the graph's float32 steps move
by an ulp or two. So an element is described by

- whether the exact value is a tie, and its distance to one: within 2^-12, 2^-8 or 2^-4 of a code
  (how large a kernel's error near a tie is), or farther;
- each requantisation multiplier s/s_y: whether every one is a power of two (an integer shift, where
  the exact value's ties are exact ties) and the largest multiplier's binary exponent (the shift);
- the operands' code width and whether a code's distance from its zero point is past float16's
  exact integers (2^11), where a kernel that dequantizes to float16 loses it.

The exact value is ``fixed_point_kernels``' (the same arithmetic the exact-requantisation models compute).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from qconform import dtypes
from qconform.case import Draft
from qconform.diagnosis.models.fixed_point_kernels import _exact_pattern, exact_value
from qconform.diagnosis.models.fused_pattern import pattern

#: The exact value's distance to a tie, in classes (``exact_places``): farther than 2^-4 of a code,
#: within 2^-4, 2^-8, 2^-12 of one (and not closer), an exact tie.
TIE_PLACES = ("farther than 2^-4 of a code from a tie", "within 2^-4 of a code of a tie (and not 2^-8)",
              "within 2^-8 of a code of a tie (and not 2^-12)", "within 2^-12 of a code of a tie (and not one)",
              "an exact tie")
NEAR = (Fraction(1, 16), Fraction(1, 256), Fraction(1, 4096))


def exact_places(draft: Draft) -> np.ndarray | None:
    """Per output element (flat), the exact value's place against a tie (``TIE_PLACES``), or None
    where the exact value is not computed (another pattern)."""
    if not _exact_pattern(draft):
        return None
    p = pattern(draft)
    v = np.asarray(exact_value(p), object).reshape(-1)
    sy = Fraction(float(np.asarray(p.y_scale, np.float64).reshape(-1)[0]))

    def place(x: Fraction) -> int:
        q = x / sy
        d = abs(q - q.__floor__() - Fraction(1, 2))
        if d == 0:
            return 4
        return sum(d <= near for near in NEAR)
    return np.asarray([place(x) for x in v], np.int64)


def _flag(yes: str, no: str):
    return lambda v: yes if v else no


def columns(draft: Draft, size: int, keep: np.ndarray) -> list[tuple[str, str, str, object, object]]:
    """The pattern's columns for the rows ``keep`` of an output of ``size`` elements, each as
    (key, kind, name, labels, values) for ``features.Column`` (a yes/no one: no name, its labels
    say each answer as a clause); values one per row, or one for all."""
    p = pattern(draft) if draft.graph else None
    if p is None or not dtypes.get(p.y_type).is_integer:
        return []
    cols = []
    places = exact_places(draft)
    if places is not None and places.size == size:
        cols.append(("pattern:tie", "value", "", _flag(
            "the pattern's exact value (the codes through the exact ratios of the scales) is a tie",
            "the pattern's exact value (the codes through the exact ratios of the scales) is not a tie"),
            (places[keep] == 4).astype(np.int64)))
        cols.append(("pattern:near", "value", "the pattern's exact value (the codes through the exact ratios of the "
                     "scales)", TIE_PLACES, places[keep]))
    operands = [o for o in p.operands if o is not None and dtypes.get(o.type).is_integer]
    if not operands:
        return cols
    sy = float(np.asarray(p.y_scale, np.float64).reshape(-1)[0])
    ratios = [np.asarray(o.scale, np.float64).reshape(-1) / sy for o in operands]
    pow2 = all(bool(np.all(np.frexp(r)[0] == 0.5)) for r in ratios)
    cols.append(("pattern:ratio-pow2", "case", "", _flag("every requantisation multiplier s/s_y is a power of two (an "
                 "integer shift)", "a requantisation multiplier s/s_y is not a power of two"), int(pow2)))
    shift = max(int(np.frexp(r.max())[1]) - 1 for r in ratios)
    cols.append(("pattern:shift", "case", "the largest multiplier s/s_y's binary exponent", str, shift))
    wide = max(dtypes.get(o.type).bits for o in operands) > 8
    cols.append(("pattern:wide", "case", "", _flag("an operand holds 16-bit codes",
                                                   "every operand holds 8-bit codes or fewer"), int(wide)))
    far = any(bool(np.any(np.abs(o.exact()) >= 1 << 11)) for o in operands if "block_size" not in o.attrs)
    cols.append(("pattern:past-float16", "case", "", _flag(
        "an operand's code lies 2^11 or more from its zero point (past float16's exact integers)",
        "every operand's code lies within 2^11 of its zero point"), int(far)))
    return cols


__all__ = ["TIE_PLACES", "columns", "exact_places"]

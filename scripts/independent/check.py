"""One case against this oracle: every reading it carries, element by element, and the side reports.

An op module describes a case as a `Model`: the output type and shape it expects, the readings
semantics.md permits for the case (first = strict), how a reading name maps onto a key, and a
function computing a key's codes. `check_case` is the same for every op.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Callable

import numpy as np

from .values import DTYPE_NAME, FLOATS, UNDEF, WIDTH, hexcode, is_nan_code, raw_bits, same


class Computed:
    """Per element codes of one reading (or UNDEF), plus what (a) needs: where an integer
    quotient is 0, and what (f) needs: elements where q + zp rounded in P converts otherwise."""

    def __init__(self, codes, int_zero=None):
        self.codes, self.int_zero, self.rounded_sum = codes, int_zero, 0


def key_name(key: tuple) -> str:
    return "+".join(k for k in key if k)


class Model:
    """What check_case needs of one case.

    out_t, shape: the output's element type and shape. alternatives: the keys (tuples of reading
    components) semantics.md permits for this case, the strict one first. parse(name): the key a
    reading name stands for ('spec' and omitted components: the first ones). compute(key): a
    Computed (KeyError: not implemented). plain_key: the text's plain reading, for (c); c_name: what
    (c) names. inputs_text(i): the operands of flat output element i, for a disagreement line.
    not_offered: keys the text names but this case does not offer, with why (e.g. an overflowing
    chain), so a golden reading of that name is reported under (e) with the reason."""

    def __init__(self, out_t: str, shape: tuple, alternatives: list[tuple], parse: Callable[[str], tuple],
                 compute: Callable[[tuple], Computed], plain_key: tuple, c_name: str,
                 inputs_text: Callable[[int], str], not_offered: dict | None = None):
        self.out_t, self.shape, self.alternatives, self.parse = out_t, tuple(shape), alternatives, parse
        self.plain_key, self.c_name, self.inputs_text = plain_key, c_name, inputs_text
        self.not_offered = not_offered or {}
        self._compute, self._memo = compute, {}

    def get(self, key) -> Computed:
        if key not in self._memo:
            self._memo[key] = self._compute(key)
        return self._memo[key]


def empty_result(cid: str, skipped: tuple = ()) -> dict:
    return {"id": cid, "rows": [], "dis": [], "a": [], "b": [], "b2": [], "c": None, "d": [], "e": [],
            "f": [], "nan_bits": 0, "skipped": list(skipped)}


def check_case(case, model_of: Callable) -> dict:
    """Every reading of one case: counts, disagreements and the side reports (a)-(f)."""
    res = empty_result(case.id)
    model = model_of(case)
    out_t = model.out_t
    golden_types = {DTYPE_NAME.get(r.outputs[0].dtype.name, r.outputs[0].dtype.name) for r in case.readings}
    if golden_types != {out_t}:
        res["dis"].append((case.id, "*", "output type", f"golden {sorted(golden_types)}", f"mine {out_t}"))
        return res
    if any(tuple(r.outputs[0].shape) != model.shape for r in case.readings):
        shapes = sorted({tuple(r.outputs[0].shape) for r in case.readings})
        res["dis"].append((case.id, "*", "output shape", f"golden {shapes}", f"mine {model.shape}"))
        return res
    alternatives = model.alternatives
    first_key = alternatives[0]
    goldens = []
    for n, r in enumerate(case.readings):
        gbits = raw_bits(r.outputs[0]).ravel()
        gmask = (np.zeros(len(gbits), dtype=bool) if r.dont_care[0] is None
                 else np.asarray(r.dont_care[0]).ravel().astype(bool))
        goldens.append((r.name, gbits, gmask))
        try:
            key = model.parse(r.name)
        except KeyError:
            res["e"].append((case.id, r.name, "not a reading name semantics.md defines for this op"))
            res["skipped"].append((case.id, r.name, "reading not implemented"))
            continue
        if key not in alternatives:
            why = model.not_offered.get(key)
            res["e"].append((case.id, r.name, "not a reading semantics.md permits for this case"
                             + (f" ({why})" if why else "")))
        if n == 0 and key != first_key:
            res["e"].append((case.id, r.name, f"readings[0] is not the strict reading {key_name(first_key)}"))
        try:
            mine = model.get(key)
        except KeyError:
            res["skipped"].append((case.id, r.name, "reading not implemented"))
            continue
        checked = bad = 0
        for i, g in enumerate(gbits):
            m = mine.codes[i]
            if gmask[i]:
                if m is not UNDEF:
                    res["b"].append((case.id, r.name, i, hexcode(out_t, m)))
                continue
            if m is UNDEF:
                res["b2"].append((case.id, r.name, i, hexcode(out_t, g)))
                continue
            checked += 1
            if m != int(g) and is_nan_code(out_t, m) and is_nan_code(out_t, int(g)):
                res["nan_bits"] += 1
                res.setdefault("nan_kinds", defaultdict(int))[(out_t, hexcode(out_t, g), hexcode(out_t, m))] += 1
            if not same(out_t, m, int(g)):
                bad += 1
                res["dis"].append((case.id, r.name, i, model.inputs_text(i),
                                   f"golden {hexcode(out_t, g)} mine {hexcode(out_t, m)}"))
            if mine.int_zero is not None and mine.int_zero[i] and out_t in FLOATS and int(g) == 1 << (WIDTH[out_t] - 1):
                res["a"].append((case.id, r.name, i))
        res["rows"].append((f"{case.draft.id.split('/')[0]}", r.name, checked, bad))
        if mine.rounded_sum:
            res["f"].append((case.id, r.name, mine.rounded_sum))

    def equals(codes, gbits, gmask):
        return all(gmask[i] or codes[i] is UNDEF or same(out_t, codes[i], int(g)) for i, g in enumerate(gbits))

    # (c) does some reading equal the text's plain reading on its unmasked elements?
    plain = model.get(model.plain_key).codes
    if not any(equals(plain, g, m) for _, g, m in goldens):
        res["c"] = (case.id, model.c_name)
    # (d) every permitted reading's result must be among the case's readings
    for key in alternatives:
        codes = model.get(key).codes
        if not any(equals(codes, g, m) for _, g, m in goldens):
            res["d"].append((case.id, key_name(key)))
    return res

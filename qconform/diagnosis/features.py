"""The features a characterisation separates deviating elements by: one row per output element (or per
case), one small integer per feature.

A row of a case's element holds: each operand's code class at that element (x, the scale and zero
point as broadcast to it, a matmul's parameters by row and column), its sign, exponent field,
NaN payload class or top bit; the expected value's class; the value the final rounding is applied
to (``probe``): tie or near tie, magnitude against the output type, rounding direction; the
element's position (index from the start and the end along each axis, the flat index modulo the
vector widths 4 to 128, a loop's scalar tail, the channel, the block and the position in it); and
the case's facts (family, attributes, shapes and their divisibility, K, block size, empty tensors,
constant or graph inputs, granularity). ``Column`` says each in words.

What the runner wrote is not a feature (a conforming element's is its expected value): it is the
*relation* of a deviating element's actual to expected code (``relations``) -- off by one code,
sign lost, zero written, NaN for a finite value, another element's value, a code reinterpreted.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from qconform import dtypes
from qconform.case import Case, Draft
from qconform.declarations import operators
from qconform.declarations.operator import Input, Kind, Operator, Role
from qconform.diagnosis import codes
from qconform.diagnosis.features_pattern import columns as pattern_columns
from qconform.diagnosis.probe import Seen, final_node, look, param_bits

#: Vector and tile widths an element's position is read against.
WIDTHS = (4, 8, 16, 32, 64, 128)
#: The kinds of feature, in the order a description prefers them when two separate equally well: what
#: the element's codes are, what the computation made of them, what was expected, then where it is.
KINDS = ("operand", "value", "expected", "case", "position", "group")
NA = -1  # a feature a row does not have (another op, another output)


@dataclass(frozen=True)
class Column:
    """One feature: ``name`` is a noun phrase, ``labels`` says each value (a tuple indexed by the
    value, or a function of it); ``says`` makes the predicate."""

    key: str
    kind: str
    name: str
    labels: tuple[str, ...] | Callable[[int], str]
    #: among features of one kind that separate the same rows, the lower is said (a magnitude class
    #: before the exponent field it implies)
    prefer: int = 5

    def label(self, value: int) -> str:
        if callable(self.labels):
            return self.labels(value)
        return self.labels[value] if 0 <= value < len(self.labels) else str(value)

    def says(self, value: int, negated: bool = False) -> str:
        if not self.name:  # a yes/no feature: each value is a whole clause
            return self.label(1 - value if negated else value)
        label = self.label(value)
        if negated and label.startswith("not "):  # "is not not a tie" reads "is a tie"
            return f"{self.name} is {label[4:]}"
        return f"{self.name} {'is not' if negated else 'is'} {label}"


YES_NO = ("no", "yes")


def _flag(key: str, kind: str, yes: str, no: str) -> Column:
    """A yes/no feature said as a sentence either way ("the element is in ...")."""
    return Column(key, kind, "", lambda v, yes=yes, no=no: yes if v else no)


class Strings:
    """Strings as small integers, shared by every row of a table (family and case names, attributes)."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.texts: list[str] = []

    def __call__(self, text: str) -> int:
        if text not in self.codes:
            self.codes[text] = len(self.texts)
            self.texts.append(text)
        return self.codes[text]

    def label(self, value: int) -> str:
        return self.texts[value] if 0 <= value < len(self.texts) else "?"


@dataclass
class Rows:
    """Some rows of a table: feature values by column key (each an int64 array of ``n``) and whether
    each row deviates."""

    n: int
    values: dict[str, np.ndarray]
    deviating: np.ndarray


class Features:
    """Builds rows and keeps the columns they use (``columns``)."""

    def __init__(self) -> None:
        self.columns: dict[str, Column] = {}
        self.strings = Strings()
        self.thinned = 0  # outputs whose elements were sampled

    # -- columns ------------------------------------------------------------------------------
    def _put(self, out: dict[str, np.ndarray], column: Column, values, n: int) -> None:
        """A column's values for ``n`` rows (one value: the same for all, spread by ``concat``)."""
        self.columns.setdefault(column.key, column)
        out[column.key] = np.asarray(values, np.int64)

    def _text(self, out, key: str, kind: str, name: str, text: str, n: int) -> None:
        self._put(out, Column(key, kind, name, self.strings.label), self.strings(text), n)

    def operand(self, out, role: str, t: dtypes.ElemType, bits: np.ndarray, n: int) -> None:
        """A code's class, and the parts of it a kernel may test on their own (``bits``: one code per
        row, or a single code every row shares)."""
        bits = np.asarray(bits).astype(np.uint64)
        k = f"operand:{role}:{'float' if t.is_float else 'int'}"
        cls = codes.code_class(bits, t)
        self._put(out, Column(k + ":class", "operand", role,
                              codes.FLOAT_LABELS if t.is_float else codes.INT_LABELS, 1), cls, n)
        if t.is_float:
            fmt = t.float_format
            self._put(out, Column(k + ":magnitude", "operand", role, codes.MAGNITUDE_LABELS, 0),
                      codes.magnitude_of(cls), n)
            if fmt.nan_style != "e8m0":
                self._put(out, Column(k + ":exponent", "operand", f"{role}'s exponent field", codes.EXPONENT_LABELS),
                          codes.exponent_field(bits, t), n)
            if fmt.has_nan:
                self._put(out, Column(k + ":nan", "operand", role, lambda v, t=t: codes.nan_label(v, t), 2),
                          codes.nan_kind(bits, t), n)
            if fmt.sign_bit:
                self._put(out, Column(k + ":sign", "operand", f"{role}'s sign bit", ("clear", "set")),
                          codes.top_bit(bits, t), n)
        else:
            self._put(out, Column(k + ":top", "operand", f"{role}'s top bit", ("clear", "set")), codes.top_bit(bits, t), n)

    # -- one case ------------------------------------------------------------------------------
    def case_rows(self, case: Case, deviating: Mapping[str, np.ndarray] | None = None,
                  reading: str | None = None, elements: bool = True, sample: int | None = None) -> Rows:
        """The rows of one case: one per compared element of each output (``elements``), or one for
        the case itself. ``deviating``: output name -> flat indices of its deviating elements.
        ``sample``: at most about so many elements per output, evenly spaced (few deviating ones are
        all kept)."""
        if not elements:
            out: dict[str, np.ndarray] = {}
            self.case_facts(out, case, 1)
            self.group_facts(out, case, 1)
            return Rows(1, out, np.zeros(1, bool))
        chosen = next((r for r in case.readings if r.name == reading), case.readings[0])
        node = final_node(case.draft, case.output_names[0]) if case.is_graph else case.draft  # its writer's view
        seen = look(node) if node is not None else None
        parts = []
        for i, (name, expected) in enumerate(zip(case.output_names, chosen.outputs)):
            mask = chosen.dont_care[i]  # the reading compared: its own undefined elements
            keep = np.flatnonzero(~np.asarray(mask, bool).reshape(-1)) if mask is not None else np.arange(expected.size)
            dev_here = np.asarray(deviating[name], np.int64) if deviating and name in deviating else None
            n = len(keep)
            keep = thin_indices(keep, sample, dev_here)
            self.thinned += len(keep) < n
            n = len(keep)
            if not n:
                continue
            out = {}
            if len(case.output_names) > 1:
                self._text(out, "case:output", "case", "the output", name, n)
            t = dtypes.get(expected.dtype)
            eb = t.to_bits(expected).reshape(-1)[keep]
            self._put(out, Column(f"expected:{'float' if t.is_float else 'int'}", "expected", "the expected value",
                                  codes.FLOAT_LABELS if t.is_float else codes.INT_LABELS), codes.code_class(eb, t), n)
            if i == 0 and node is not None:
                self.operands(out, node, expected.shape, keep, seen)
                self.value(out, node, expected, keep, seen)
            for key, kind, name, labels, values in (pattern_columns(case.draft, expected.size, keep) if i == 0 else ()):
                self._put(out, Column(key, kind, name, labels), values, n)
            self.position(out, case, expected.shape, keep, seen if i == 0 else None)
            self.case_facts(out, case, n)
            self.group_facts(out, case, n)
            dev = np.zeros(n, bool)
            if dev_here is not None:
                hit = np.zeros(expected.size, bool)
                hit[dev_here] = True
                dev = hit[keep]
            parts.append(Rows(n, out, dev))
        return parts[0] if len(parts) == 1 else concat(parts)

    def operands(self, out, case: Draft, shape, keep: np.ndarray, seen: Seen | None) -> None:
        """Each operand's code at every element of the first output (``case``: the case's draft, or the
        Q/DQ node that writes a pattern's first output)."""
        n = len(keep)
        ins = list(case.inputs)
        decl = None if case.is_graph else operators.find(case.domain, case.op)
        if decl is not None and decl.kind in (Kind.QUANTIZE, Kind.DEQUANTIZE):
            x, s, zp = (ins + [None, None])[:3]
            roles = [("x", x, None), ("the scale", s, param_bits(s, shape, seen)),
                     ("the zero point", zp, param_bits(zp, shape, seen))]
        elif decl is not None and decl.kind in (Kind.REQUANTIZE, Kind.INTEGER):
            declared = {i.name: i for i in decl.inputs}  # not a variadic list's members (QLinearConcat's X0_scale)
            roles = [(a.name, a, _param_by_output(declared[a.name], decl, a, shape)) for a in ins
                     if a is not None and a.name in declared and declared[a.name].role in (Role.SCALE, Role.ZERO_POINT)]
        else:  # the dynamic quantizer, a graph: the inputs shaped like the output
            roles = [(a.name if case.is_graph else "x", a, None) for a in ins if a is not None]
        for role, arg, bits in roles:
            if arg is None:
                continue
            t = dtypes.get(arg.type)
            if arg.value.size == 1 and arg.value.shape != tuple(shape):  # one code for every element
                self.operand(out, role, t, t.to_bits(arg.value).reshape(()), n)
                continue
            if bits is None:
                if arg.value.shape != tuple(shape):
                    continue
                bits = t.to_bits(arg.value)
            flat = np.asarray(bits).reshape(-1)[keep]
            self.operand(out, role, t, flat, n)
            if role in ("the scale", "the zero point") and arg.value.size > 1:
                first = np.asarray(bits).reshape(-1)[:1]
                self._put(out, _flag(f"operand:{role}:first", "operand", f"{role} is the first element's",
                                     f"{role} differs from the first element's"), flat == first, n)

    # -- the computation's values --------------------------------------------------------------
    def value(self, out, case: Draft, expected: np.ndarray, keep: np.ndarray, seen: Seen | None) -> None:
        """The value the final rounding or conversion is applied to, against the output type."""
        got = _rounded_value(case, expected.shape, seen)
        if got is None:
            return
        v, exact, zero = (np.asarray(a, np.float64).reshape(-1)[keep] if a is not None else None for a in got)
        t = dtypes.get(expected.dtype)
        n = len(keep)
        ev = None if t.is_integer else _decoded(expected, t).reshape(-1)[keep]
        self._put(out, Column("value:tie", "value", "the value rounded", TIE_LABELS), tie_class(v, t), n)
        d, half = tie_distance(exact, t)
        for p in NEAR_PRECISIONS:
            fmt = dtypes.get(p).float_format
            if t.is_integer or fmt.mbits > t.float_format.mbits:
                self._put(out, _flag(f"value:near:{p}", "value", f"the value rounded is within half a {p} ulp of a tie "
                                     "(and not one)", f"the value rounded is not within half a {p} ulp of a tie"),
                          (d <= half * 2.0 ** -fmt.mbits) & (d > 0), n)
        if t.is_integer or t.float_format.mbits < 23:
            self._put(out, _flag("value:near2", "value", "the value rounded is within two float32 ulps of a tie",
                                 "the value rounded is not within two float32 ulps of a tie"), d <= half * 2.0 ** -21, n)
        with np.errstate(all="ignore"):
            inexact = np.isfinite(exact) & (v != exact)
        self._put(out, _flag("value:inexact", "value", "the value rounded was itself rounded on the way (its exact value "
                             "is not representable where it was computed)", "the value rounded is exact"), inexact, n)
        self._put(out, _flag("value:precision-decides", "value", "rounding the exact value instead would give another "
                             "result (the precision it was computed in decides)", "rounding the exact value would give "
                             "the same result"), precision_decides(v, exact, t), n)
        ranged = range_class(v, t, zero)
        self._put(out, Column("value:range", "value", "the value rounded", RANGE_LABELS), ranged, n)
        self._put(out, _flag("value:outside", "value", "the value rounded lies outside the output type's finite range",
                             "the value rounded lies inside the output type's finite range"),
                  np.isin(ranged, (1, 2, 3, 4, 5, 6, 10)), n)
        self._put(out, Column("value:sign", "value", "the value rounded", SIGN_LABELS), sign_class(v), n)
        self._put(out, Column("value:rounding", "value", "its rounding", ROUNDING_LABELS), rounding_class(v, t, ev), n)

    # -- where the element is --------------------------------------------------------------------
    def position(self, out, case: Case, shape, keep: np.ndarray, seen: Seen | None) -> None:
        n, size = len(keep), int(np.prod(shape, dtype=np.int64))
        idx = np.unravel_index(keep, shape) if len(shape) else ()
        for ax, (i, d) in enumerate(zip(idx, shape)):
            if d < 2:
                continue
            self._put(out, Column(f"position:axis{ax}:start", "position", f"the index along axis {ax}", _START),
                      np.minimum(i, 4), n)
            self._put(out, Column(f"position:axis{ax}:end", "position", f"the index along axis {ax}", _END),
                      np.minimum(d - 1 - i, 4), n)
        spans = [("flat", keep, size)] + ([("last", idx[-1], shape[-1])] if len(shape) > 1 else [])
        for where, i, d in spans:
            what = "the flat index" if where == "flat" else "the index along the last axis"
            for m in WIDTHS:
                if d > m:
                    self._put(out, Column(f"position:{where}:mod{m}", "position", f"{what} mod {m}", str), i % m, n)
                if d % m and d > 1:
                    self._put(out, _flag(f"position:{where}:tail{m}", "position",
                                         f"{what} is in the last {where == 'flat' and 'n' or 'D'} mod {m} (a {m}-wide "
                                         "loop's scalar tail)", f"{what} is not in a {m}-wide loop's scalar tail"),
                              i >= (d // m) * m, n)
        if seen is not None and seen.params and seen.axis is not None and len(shape):
            self.channel(out, shape, idx, seen, n)

    def channel(self, out, shape, idx, seen: Seen, n: int) -> None:
        """Per-axis and blocked: the element's channel, block and place in its block."""
        rank = len(shape)
        axis = seen.axis % rank if -rank <= seen.axis < rank else None
        if axis is None or shape[axis] < 2:
            return
        j, d = idx[axis], shape[axis]
        b = seen.block
        if not b:
            self._put(out, Column("position:channel", "position", "the channel (index along the axis)", _START),
                      np.minimum(j, 4), n)
            return
        blocks = math.ceil(d / b)
        blk, pos = j // b, j % b
        last_len = d - (blocks - 1) * b
        self._put(out, Column("position:block", "position", "the block", ("the first", "the last", "neither the first "
                                                                                           "nor the last")),
                  np.where(blk == 0, 0, np.where(blk == blocks - 1, 1, 2)), n)
        end = np.where(blk == blocks - 1, last_len - 1, b - 1)
        self._put(out, Column("position:in-block", "position", "the position in its block",
                              ("the first", "the last", "inside")), np.where(pos == 0, 0, np.where(pos == end, 1, 2)), n)
        if d % b:
            partial = Column("position:partial", "position", "", lambda v: ("the element is not in the partial last block",
                                                                             "the element is in the partial last block")[v],
                             prefer=0)
            self._put(out, partial, blk == blocks - 1, n)
        if b > 4:
            m = min(b, 16)
            self._put(out, Column(f"position:in-block:mod{m}", "position", f"the position in its block mod {m}", str),
                      pos % m, n)

    # -- the case and its group ------------------------------------------------------------------
    def case_facts(self, out, case: Case, n: int) -> None:
        self._text(out, "case:family", "case", "the family", case.family, n)
        self._text(out, "case:name", "case", "the case", f"{case.family}/{case.draft.name}", n)
        for k, v in sorted(case.attrs.items()):
            self._text(out, f"case:attr:{k}", "case", f"attribute {k}", str(v), n)
        data = next((a for a in case.inputs if a is not None), None)
        if data is not None:
            self._put(out, _flag("case:constant", "case", "the data input is a constant (an initializer)",
                                 "the data input is a graph input"), bool(data.initializer), n)
            self._put(out, Column("case:rank", "case", "the data's rank", str), data.value.ndim, n)
            size = data.value.size
            for m in WIDTHS:
                self._put(out, _flag(f"case:size-div{m}", "case", f"the data's element count is a multiple of {m}",
                                     f"the data's element count is not a multiple of {m}"), size % m == 0, n)
            if dtypes.get(data.type).is_float:
                signs = _signs(data)
                self._text(out, "case:data-signs", "case", "the data", signs, n)
                self._put(out, _flag("case:data-excludes-zero", "case", "the data's values are all of one sign, none zero",
                                     "the data's values include zero or both signs"), signs.startswith("all "), n)
        empty = any(a is not None and a.value.size == 0 for a in case.inputs) or any(o.size == 0 for o in case.expected)
        self._put(out, _flag("case:empty", "case", "a tensor of the case is empty", "no tensor of the case is empty"),
                  empty, n)
        if _q_or_dq(case) and len(case.inputs) > 1 and case.inputs[1] is not None:
            s = case.inputs[1].value
            self._put(out, _flag("case:scale-rank0", "case", "the scale has rank 0", "the scale has rank 1 or more"),
                      s.ndim == 0, n)
            block = case.attrs.get("block_size", 0)
            kind = "blocked" if block and s.ndim else ("per-axis" if s.size > 1 else "per-tensor")
            self._text(out, "case:granularity", "case", "the granularity", kind, n)
            if kind == "blocked" and data is not None:
                axis = case.attrs.get("axis", 1) % max(1, data.value.ndim)
                self._put(out, _flag("case:partial-block", "case", "the block size leaves a partial last block",
                                     "the block size divides the axis"), data.value.shape[axis] % block != 0, n)
        decl = None if case.is_graph else operators.find(case.domain, case.op)
        if decl is not None and decl.contraction == "matmul" and case.inputs[0] is not None \
                and case.inputs[0].value.ndim:
            k = case.inputs[0].value.shape[-1]  # a matmul's K: the first operand's last axis
            self._put(out, Column("case:K", "case", "K", str), k, n)

    def group_facts(self, out, case: Case, n: int) -> None:
        prefix = f"{case.domain}." if case.domain else ""
        self._text(out, "group:op", "group", "the op", f"{prefix}{case.op}-{case.opset}", n)
        self._text(out, "group:types", "group", "the types", case.types, n)
        self._text(out, "group:output-type", "group", "the output type", case.output_types[0], n)
        out_t = dtypes.get(case.output_types[0])
        self._text(out, "group:output-kind", "group", "the output type", "an integer type" if out_t.is_integer else
                   "a float type", n)
        data = next((a for a in case.inputs if a is not None), None)
        if data is not None:
            self._text(out, "group:data-type", "group", "the data type", data.type, n)


def _signs(data) -> str:
    """What signs a float data input's values have (NaN aside): its range against zero."""
    from qconform.oracle.arith import as_float64

    with np.errstate(invalid="ignore"):
        v = as_float64(data.value, data.type)
        neg, pos, zero = bool(np.any(v < 0)), bool(np.any(v > 0)), bool(np.any(v == 0))
    if not neg and not pos:
        return "zero everywhere, or empty"
    if neg and pos:
        return "of both signs"
    side = "positive" if pos else "negative"
    return f"{'zero or ' if zero else 'all '}{side}"


#: Deviating elements of one output kept whole under a sample (a rare deviation is never sampled away).
FEW = 1024


def thin_indices(keep: np.ndarray, sample: int | None, deviating: np.ndarray | None) -> np.ndarray:
    """``keep`` evenly thinned to about ``sample`` elements, with every deviating one where they are few."""
    if not sample or len(keep) <= sample:
        return keep
    out = keep[np.linspace(0, len(keep) - 1, sample).astype(np.int64)]
    if deviating is not None and 0 < len(deviating) <= FEW:
        out = np.union1d(out, np.intersect1d(keep, deviating))
    return np.unique(out)


def concat(parts: Sequence[Rows]) -> Rows:
    """Rows of several cases as one: a column a part lacks is ``NA`` there."""
    parts = [p for p in parts if p.n]
    if not parts:
        return Rows(0, {}, np.zeros(0, bool))
    keys = list(dict.fromkeys(k for p in parts for k in p.values))
    n = sum(p.n for p in parts)
    values = {}
    for k in keys:
        column, at = np.empty(n, np.int64), 0
        for p in parts:
            column[at:at + p.n] = p.values.get(k, NA)  # one value spreads over the part's rows
            at += p.n
        values[k] = column
    return Rows(n, values, np.concatenate([p.deviating for p in parts]))


# -- the value rounded: helpers -----------------------------------------------------------------
TIE_LABELS = ("not a tie", "an exact tie whose even neighbour is toward zero",
              "an exact tie whose even neighbour is away from zero")
RANGE_LABELS = ("NaN", "+Inf", "-Inf", "beyond 2^63 in magnitude", "beyond the int32 range (2^31)",
                "above the output type's maximum (saturates)", "below the output type's minimum (saturates)",
                "below 1/2 in magnitude (rounds to zero)", "zero", "inside the output type's range",
                "beyond the output type's largest finite value", "in the output type's subnormal range",
                "below half the output type's smallest subnormal (underflows)")
SIGN_LABELS = ("negative", "positive", "zero", "NaN")
ROUNDING_LABELS = ("exact (no rounding)", "toward zero", "away from zero", "not a number")
NEAR_PRECISIONS = ("float32", "float16", "bfloat16")
_START = ("0 (the first)", "1", "2", "3", "4 or more")
_END = ("the last", "the second to last", "the third to last", "the fourth to last", "further from the end")


def _decoded(a: np.ndarray, t: dtypes.ElemType) -> np.ndarray:
    from qconform.oracle.floats import decode

    return decode(t.to_bits(a).astype(np.uint64), t)


def _ulp(v: np.ndarray, t: dtypes.ElemType) -> np.ndarray:
    """The spacing of t's values at |v| (1 for integers), subnormals included."""
    if t.is_integer:
        return np.ones_like(v)
    fmt = t.float_format
    with np.errstate(all="ignore"):
        e = np.floor(np.log2(np.where(np.isfinite(v) & (v != 0), np.abs(v), 1.0)))
    return np.exp2(np.maximum(e, fmt.emin) - fmt.mbits)


def tie_class(v: np.ndarray, t: dtypes.ElemType) -> np.ndarray:
    """``TIE_LABELS``: whether |v| is halfway between two neighbours of t, and where the even one is."""
    with np.errstate(all="ignore"):
        k = np.abs(v) / _ulp(v, t)
        lo = np.floor(k)
        tie = np.isfinite(k) & (k - lo == 0.5)
        return np.where(tie, np.where(np.where(tie, lo, 0) % 2 == 0, 1, 2), 0)


def tie_distance(exact: np.ndarray, t: dtypes.ElemType) -> tuple[np.ndarray, np.ndarray]:
    """(the distance of |exact| from the nearest tie between two neighbours of t, half of |exact|'s
    binade 2^e); within half an ulp of a precision with m mantissa bits is d <= half * 2^-m. A value
    that is not finite is at an infinite distance."""
    with np.errstate(all="ignore"):
        a = np.abs(exact)
        u = _ulp(exact, t)
        finite = np.isfinite(a)
        d = np.where(finite, np.abs(a - (np.floor(a / u) + 0.5) * u), np.inf)
        e = np.floor(np.log2(np.where(finite & (a != 0), a, 1.0)))
    return d, np.exp2(e - 1)


def precision_decides(v: np.ndarray, exact: np.ndarray, t: dtypes.ElemType) -> np.ndarray:
    """Where rounding ``exact`` to the output type gives another value than rounding ``v`` (the value
    the spec rounds, computed in its precision): a kernel computing in another precision differs
    exactly there."""
    from qconform.oracle import floats

    with np.errstate(all="ignore"):
        both = np.isfinite(v) & np.isfinite(exact)
        if t.is_integer:
            return both & (np.rint(v) != np.rint(exact))
        if t.float_format.nan_style == "e8m0":
            return np.zeros(v.shape, bool)
        return both & (floats.round_to_format(np.where(both, v, 0), t) != floats.round_to_format(np.where(both, exact, 0), t))


def range_class(v: np.ndarray, t: dtypes.ElemType, zero: np.ndarray | None) -> np.ndarray:
    """``RANGE_LABELS``: the value against the output type (integers: after rounding and the zero point)."""
    with np.errstate(all="ignore"):
        a = np.abs(v)
        out = np.full(v.shape, 9, np.int64)
        if t.is_integer:
            lo, hi = t.qrange
            w = np.rint(v) + (zero if zero is not None else 0)
            out = np.where(w > hi, 5, np.where(w < lo, 6, out))
            out = np.where((a < 0.5) & (v != 0), 7, out)
            out = np.where(a >= 2.0**31, 4, out)
            out = np.where(a >= 2.0**63, 3, out)
        else:
            fmt = t.float_format
            out = np.where(a > fmt.max_finite, 10, out)
            out = np.where((a < 2.0**fmt.emin) & (a > 0), 11, out)
            out = np.where((a <= fmt.min_subnormal / 2) & (a > 0), 12, out)
        out = np.where(v == 0, 8, out)
        out = np.where(np.isposinf(v), 1, np.where(np.isneginf(v), 2, out))
        return np.where(np.isnan(v), 0, out)


def sign_class(v: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(v), 3, np.where(v == 0, 2, np.where(v < 0, 0, 1)))


def rounding_class(v: np.ndarray, t: dtypes.ElemType, expected: np.ndarray | None) -> np.ndarray:
    """``ROUNDING_LABELS``: where the spec's rounding takes |v| (integers: to the nearest even
    integer; floats: to the expected value)."""
    with np.errstate(all="ignore"):
        r = np.rint(v) if expected is None else expected
        d = np.abs(r) - np.abs(v)
        out = np.where(d == 0, 0, np.where(d < 0, 1, 2))
        return np.where(np.isfinite(v) & np.isfinite(r), out, 3)


def _rounded_value(case: Draft, shape, seen: Seen | None):
    """(the value the final rounding is applied to, the exact value before any rounding, the zero
    point added after it) at each element of the first output, from what the oracle's steps saw."""
    if seen is None:
        return None
    shape = tuple(shape)
    size = int(np.prod(shape, dtype=np.int64))

    def fits(a) -> np.ndarray | None:
        a = np.asarray(a, np.float64)
        if a.shape == shape:
            return a
        if a.ndim == len(shape) + 1 and a.shape[1:] == shape:  # a requantising op's readings, stacked first
            return a[0]
        if a.size == size and size:
            return a.reshape(shape)
        return None

    if seen.requantised is not None:  # a requantising op: its accumulator, scales and zero point
        acc, e, (sa, sb, ys), zp = seen.requantised
        exact = fits(np.asarray(acc, np.float64)[-1] * 2.0**-e * np.asarray(sa) * np.asarray(sb) / ys)
        v = next((fits(r) for r in seen.rounded if fits(r) is not None), None)
        if v is None:
            v = next((fits(r) for r in seen.encoded if fits(r) is not None), exact)
        return None if v is None or exact is None else (v, exact, np.full(shape, zp))
    v = next((fits(r) for r in seen.rounded if fits(r) is not None), None)
    if _q_or_dq(case) and seen.params and case.inputs[0] is not None:
        x = seen.data.get(case.inputs[0].name)
        scale = seen.params[0]
        zero = seen.params[1] if len(seen.params) > 1 else None
        if x is None or fits(x) is None:
            return None
        with np.errstate(all="ignore"):
            if case.op == "DequantizeLinear":
                diff = fits(seen.differences[0]) if seen.differences else fits(x)
                exact = diff * scale
                return exact, exact, None
            exact = x / scale
            if v is not None:
                return v, exact, zero
            enc = next((fits(r) for r in seen.encoded if fits(r) is not None), None)
            if enc is None:
                return None
            return enc, exact + (zero if zero is not None else 0), None
    if v is not None:  # the dynamic quantizer: x / y_scale in float32
        return v, v, None
    return None


def _q_or_dq(case) -> bool:
    """A QuantizeLinear or DequantizeLinear case (either domain)."""
    decl = None if case.is_graph else operators.find(case.domain, case.op)
    return decl is not None and decl.kind in (Kind.QUANTIZE, Kind.DEQUANTIZE)


def _param_by_output(role: Input, decl: Operator, arg, out_shape) -> np.ndarray | None:
    """A scale's or zero point's codes by output element, as its declaration places it: a matmul's
    first operand's by row (``along`` -2), its second's by column (-1), a filter's by output
    channel (``along`` 0: the output's axis 1); per tensor everywhere."""
    t = dtypes.get(arg.type)
    bits = t.to_bits(arg.value).astype(np.int64)
    if bits.size == 1:
        return np.broadcast_to(bits.reshape(()), out_shape)
    if len(out_shape) < 2 or role.along is None:
        return None
    try:
        if role.along == 0:  # per output channel of a convolution: [N, M, ...]
            v = bits.reshape((1, -1) + (1,) * (len(out_shape) - 2))
        elif role.along == -2:  # per row
            v = bits.reshape(bits.shape + (1,)) if bits.ndim == 1 else bits
        else:  # per column
            v = bits.reshape((1,) + bits.shape) if bits.ndim == 1 else bits
        return np.broadcast_to(v, out_shape)
    except ValueError:
        return None


__all__ = ["Column", "Features", "KINDS", "NA", "Rows", "WIDTHS", "concat", "range_class", "rounding_class",
           "thin_indices", "tie_class", "tie_distance"]

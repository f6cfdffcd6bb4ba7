"""The simplest description that separates deviating rows from conforming ones.

Over a table of rows (``features.Rows``: elements or cases, each with small-integer features) the
candidates are every single predicate "feature = value" (and "feature ≠ value" for features of
three or more values), and the best of them (by score, and the most precise of those every
deviating row satisfies) each refined by any second predicate. Each is scored by F1 of the lower
(Wilson, 95 %) bounds of its precision (matched rows that deviate) and recall (deviating rows
matched), so that a few rows matched by chance do not outrank a real trigger, less a little for
complexity: a conjunction, a negation, a feature of many values (an index mod 128 separates a
single element by chance more easily than a code class does). Equal scores go to the earlier
feature kind (``features.KINDS``: what the codes are before where they sit). Descriptions that
match the very same rows are one; the best few are returned, each with its exact counts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from qconform.diagnosis.features import KINDS, NA, Column, Rows

PAIR_COST = 0.01
NEGATION_COST = 0.005
CARDINALITY_COST = 0.002  # per bit of the feature's number of values beyond 8 (an index mod 128, a case name)


@dataclass(frozen=True)
class Term:
    key: str
    value: int
    negated: bool = False


@dataclass
class Description:
    """A predicate over the rows and how well it separates them."""

    terms: tuple[Term, ...]
    text: str  # the predicate in words
    matched_deviating: int  # true positives
    matched_conforming: int  # false positives
    deviating: int
    conforming: int
    score: float = 0.0

    @property
    def precision(self) -> float:
        m = self.matched_deviating + self.matched_conforming
        return self.matched_deviating / m if m else 0.0

    @property
    def recall(self) -> float:
        return self.matched_deviating / self.deviating if self.deviating else 0.0

    @property
    def exact(self) -> bool:
        return self.matched_deviating == self.deviating and not self.matched_conforming

    def sentence(self, unit: str = "element", deviating: str = "deviating", conforming: str = "conforming") -> str:
        """"All 312 deviating elements, and none of the 4,021 conforming ones, are where ..." with
        precision and recall."""
        d, c, tp, fp = self.deviating, self.conforming, self.matched_deviating, self.matched_conforming
        units = unit + ("" if d == 1 else "s")
        dev = (f"the one {deviating} {unit}" if d == 1 else f"all {d:,} {deviating} {units}") if tp == d \
            else f"{tp:,} of the {d:,} {deviating} {units}"
        if not c:
            conf = f"there is no {conforming} one"
        elif not fp:
            conf = f"none of the {c:,} {conforming} ones"
        else:
            conf = f"{fp:,} of the {c:,} {conforming} ones"
        text = f"{dev[:1].upper()}{dev[1:]}, and {conf}, are where {self.text}" if c else \
            f"{dev[:1].upper()}{dev[1:]} are where {self.text} ({conf})"
        return f"{text} (precision {_pct(self.precision)}, recall {_pct(self.recall)})."

    def to_json(self, columns: Mapping[str, Column], **words) -> dict:
        return {"sentence": self.sentence(**words), "text": self.text, "precision": round(self.precision, 4),
                "recall": round(self.recall, 4), "matched_deviating": self.matched_deviating,
                "matched_conforming": self.matched_conforming, "deviating": self.deviating,
                "conforming": self.conforming, "exact": self.exact,
                "terms": [{"feature": t.key, "value": columns[t.key].label(t.value), "negated": t.negated}
                          for t in self.terms]}


def _pct(x: float) -> str:
    if x in (0.0, 1.0):
        return f"{int(x * 100)} %"
    return f"{100 * x:.1f} %" if 0.001 < x < 0.999 else f"{100 * x:.2f} %"


#: The confidence with which precision and recall are bounded below (a normal quantile, 95 %).
Z = 1.96


def _lower(hits: np.ndarray, n: np.ndarray | int) -> np.ndarray:
    """The Wilson lower bound of a proportion hits / n: what it is at least, given how few it rests on."""
    n = np.maximum(np.asarray(n, np.float64), 1.0)
    p = hits / n
    z2 = Z * Z
    return (p + z2 / (2 * n) - Z * np.sqrt(p * (1 - p) / n + z2 / (4 * n * n))) / (1 + z2 / n)


def _score(tp: np.ndarray, fp: np.ndarray, d: int) -> np.ndarray:
    """F1 of the lower bounds of precision and recall: three elements matched by chance out of fourteen
    deviating ones do not outrank all fourteen matched with some conforming ones besides."""
    p, r = _lower(tp, tp + fp), _lower(tp, d)
    return np.where(tp > 0, 2 * p * r / np.maximum(p + r, 1e-12), 0.0)


def describe(rows: Rows, columns: Mapping[str, Column], top: int = 3) -> list[Description]:
    """The ``top`` best descriptions of which rows deviate (empty when none or all do)."""
    y = rows.deviating
    d = int(np.count_nonzero(y))
    if not d or d == rows.n:
        return []
    table = _Table(rows, columns)
    if not table.slots:
        return []
    singles = table.best(np.arange(rows.n), y, d, None, KEEP)
    if not singles:
        return []
    if singles[0].tp == d and not singles[0].fp:  # one predicate separates them: nothing simpler exists
        firsts: list[_Found] = []
    else:
        by_recall = sorted((s for s in singles if s.tp == d), key=lambda s: (-s.precision, s.order()))
        k = FIRSTS if rows.n <= BIG else FIRSTS // 2  # a large table refines fewer
        firsts = list({s.terms: s for s in singles[:k] + by_recall[:k]}.values())
    found = list(singles)
    for a in firsts:
        found += table.best(np.flatnonzero(a.mask(rows)), y, d, a, FIRSTS)
    found.sort(key=_Found.order)
    out: list[Description] = []
    sigs: list[bytes | None] = []  # each kept description's rows, read only when counts collide
    for hit in found:
        mine = None
        duplicate = False
        for j, o in enumerate(out):
            if (o.matched_deviating, o.matched_conforming) != (hit.tp, hit.fp):
                continue
            if sigs[j] is None:
                sigs[j] = _mask_signature(rows, o.terms)
            mine = mine if mine is not None else _mask_signature(rows, hit.terms)
            if mine == sigs[j]:
                duplicate = True
                break
        if duplicate or _only_where(hit, columns, d):
            continue
        text = " and ".join(columns[t.key].says(t.value, t.negated) for t in hit.terms)
        out.append(Description(hit.terms, text, hit.tp, hit.fp, d, rows.n - d, round(hit.score, 6)))
        sigs.append(mine)
        if len(out) >= top:
            break
    return out


#: A description made of positions alone (an index, a lane, a loop's tail, a block) says where, not
#: why: it is said only when it separates the deviating elements exactly and there are at least this
#: many of them (a loop's tail, a vector lane); otherwise one with a term on the values, the codes or
#: the parameters is said, or none (a vendor cannot act on "the flat index mod 16 is 11").
POSITION_ONLY_SUPPORT = 16


def _only_where(hit: "_Found", columns: Mapping[str, Column], d: int) -> bool:
    """A description of positions alone that is not an exact, well supported one."""
    if not all(columns[t.key].kind == "position" for t in hit.terms):
        return False
    return not (hit.tp == d and hit.fp == 0 and hit.tp >= POSITION_ONLY_SUPPORT)


#: How many single predicates (the best by score, and the most precise of those every deviating row
#: satisfies) are refined by a second term; how many candidates of each round are kept.
FIRSTS = 8
KEEP = 48
BIG = 20_000


@dataclass
class _Found:
    score: float
    rank: tuple
    terms: tuple[Term, ...]
    tp: int
    fp: int
    cost: float  # what its form costs (the score is F1 less this)

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp)

    def order(self) -> tuple:
        return (-self.score, len(self.terms), self.rank)

    def mask(self, rows: Rows) -> np.ndarray:
        m = np.ones(rows.n, bool)
        for t in self.terms:
            m &= _mask(rows, t)
        return m


class _Table:
    """Every column's values as one matrix of *slots* (a column's value, numbered across columns),
    so that one ``np.bincount`` counts every predicate over any subset of the rows at once."""

    def __init__(self, rows: Rows, columns: Mapping[str, Column]) -> None:
        keys = list(rows.values)
        m = np.stack([rows.values[k] for k in keys]) if keys else np.zeros((0, rows.n), np.int64)
        low = m.min(axis=1) if rows.n else np.zeros(len(keys), np.int64)
        m = m - low[:, None]
        width = m.max(axis=1) + 1 if rows.n else np.ones(len(keys), np.int64)
        offset = np.concatenate([[0], np.cumsum(width)[:-1]])
        present = np.bincount((m + offset[:, None]).ravel(), minlength=int(width.sum())) > 0
        na = NA - low
        use = []
        for i, key in enumerate(keys):
            here = np.flatnonzero(present[offset[i]:offset[i] + width[i]])
            real = here[here != na[i]]
            if len(real) >= 2 or (len(real) == 1 and len(here) == 2):
                use.append((i, key, len(real)))
        self.keys = [key for _, key, _ in use]
        self.slots = 0
        if not use:
            return
        rows_used = [i for i, _, _ in use]
        width, low, na = width[rows_used], low[rows_used], na[rows_used]
        offset = np.concatenate([[0], np.cumsum(width)[:-1]])
        self.slots = int(width.sum())
        self.codes = np.ascontiguousarray((m[rows_used] + offset[:, None]).T.astype(np.int32))
        self.col = np.repeat(np.arange(len(use)), width)
        self.value = np.arange(self.slots) - np.repeat(offset, width) + np.repeat(low, width)
        self.na_slot = np.where((na >= 0) & (na < width), offset + na, -1)
        kinds = [columns[key].kind for key in self.keys]
        self.rank = np.asarray([(KINDS.index(k) if k in KINDS else len(KINDS)) * 10 + columns[key].prefer
                                for k, key in zip(kinds, self.keys)])
        real = np.asarray([r for _, _, r in use])
        self.cost = CARDINALITY_COST * np.log2(np.maximum(8, real) / 8)
        self.many = real >= 3
        self.is_na = np.zeros(self.slots, bool)
        self.is_na[self.na_slot[self.na_slot >= 0]] = True
        self.present = np.bincount(self.codes.ravel(), minlength=self.slots) > 0

    def best(self, subset: np.ndarray, y: np.ndarray, d: int, before: _Found | None, keep: int) -> list[_Found]:
        """The ``keep`` best predicates over the rows in ``subset`` (each after ``before``)."""
        if not len(subset):
            return []
        block = self.codes[subset]
        total = np.bincount(block.ravel(), minlength=self.slots)
        dev = np.bincount(block[y[subset]].ravel(), minlength=self.slots)
        col_na_t = np.where(self.na_slot >= 0, total[np.maximum(self.na_slot, 0)], 0)
        col_na_d = np.where(self.na_slot >= 0, dev[np.maximum(self.na_slot, 0)], 0)
        all_t = len(subset) - col_na_t[self.col]
        all_d = int(np.count_nonzero(y[subset])) - col_na_d[self.col]
        ok = ~self.is_na & (self.present if before is None else total > 0)
        if before is not None:
            ok &= self.col != self.keys.index(before.terms[-1].key)
        slot = np.flatnonzero(ok)
        neg_slot = slot[self.many[self.col[slot]]]
        idx = np.concatenate([slot, neg_slot])
        neg = np.concatenate([np.zeros(len(slot), bool), np.ones(len(neg_slot), bool)])
        tp = np.where(neg, all_d[idx] - dev[idx], dev[idx])
        fp = np.where(neg, (all_t[idx] - total[idx]) - (all_d[idx] - dev[idx]), total[idx] - dev[idx])
        good = tp > 0
        idx, neg, tp, fp = idx[good], neg[good], tp[good], fp[good]
        cost = self.cost[self.col[idx]] + NEGATION_COST * neg + ((PAIR_COST + before.cost) if before else 0.0)
        score = _score(tp, fp, d) - cost
        if before is not None:  # a second term earns its place only by doing better than the first alone
            better = score > before.score + 1e-9
            idx, neg, tp, fp, cost, score = idx[better], neg[better], tp[better], fp[better], cost[better], score[better]
        order = np.lexsort((self.rank[self.col[idx]], -score))[: keep]
        out = []
        for j in order:
            s = idx[j]
            key = self.keys[self.col[s]]
            term = Term(key, int(self.value[s]), bool(neg[j]))
            prior = before.terms if before is not None else ()
            negs = term.negated + sum(t.negated for t in prior)
            r = int(self.rank[self.col[s]])
            rank = (min(r, before.rank[0]) if before is not None else r, negs, key, term.value)
            out.append(_Found(float(score[j]), rank, prior + (term,), int(tp[j]), int(fp[j]), float(cost[j])))
        return out


def _mask(rows: Rows, term: Term) -> np.ndarray:
    v = rows.values[term.key]
    return ((v != term.value) & (v != NA)) if term.negated else (v == term.value)


def _mask_signature(rows: Rows, terms: tuple[Term, ...]) -> bytes:
    m = np.ones(rows.n, bool)
    for t in terms:
        m &= _mask(rows, t)
    return np.packbits(m).tobytes()


__all__ = ["Description", "Term", "describe"]

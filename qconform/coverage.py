"""Coverage: every valid (op, version, type combination) from the schemas, which families apply
to it, and how many cases each has.

The combinations come from ``schemas.all_specs()`` (never a hand list). A family declares where it
applies by a module-level ``applies(spec, combo) -> bool`` next to its ``FAMILY`` and
``generate()`` (``applies(spec, combo, family=...)`` for a module holding several families); the
families are the modules behind ``generators.FAMILIES`` (a family without ``applies``, such as
the hand-written examples, claims nothing). ``missing()`` lists every
(combination, family) that applies but has no case: the coverage test fails on any."""
from __future__ import annotations

import functools
import inspect
import sys
from collections import Counter
from dataclasses import dataclass
from types import ModuleType
from typing import Iterable

from qconform import schemas
from qconform.generators import FAMILIES
from qconform.generators.common import type_signature
from qconform.schemas import OpSpec


@dataclass(frozen=True)
class Combination:
    spec: OpSpec
    types: dict

    @property
    def key(self) -> tuple[str, str]:
        return self.spec.key, type_signature(self.spec, self.types)

    def __hash__(self) -> int:
        return hash(self.key)


@dataclass(frozen=True)
class Family:
    """One ``generators.FAMILIES`` entry: its key, the family name its cases carry (the part after
    "module:" in a shared-name key such as "qlinear_matmul:ties"), and its module's ``applies``."""

    key: str
    name: str
    module: ModuleType

    @functools.cached_property
    def _takes_family(self) -> bool:  # asked once, not once per combination (inspect is slow)
        return "family" in inspect.signature(self.module.applies).parameters

    def applies(self, spec: OpSpec, combo: dict) -> bool:
        if self._takes_family:
            return bool(self.module.applies(spec, combo, family=self.name))
        return bool(self.module.applies(spec, combo))


def families() -> list[Family]:
    """The families that declare ``applies`` (in FAMILIES order)."""
    out = []
    for key, gen in FAMILIES.items():
        mod = sys.modules[gen.__module__]
        if callable(getattr(mod, "applies", None)):
            out.append(Family(key, key.rsplit(":", 1)[-1], mod))
    return out


def combinations() -> list[Combination]:
    return [Combination(spec, combo) for spec in schemas.all_specs() for combo in spec.combinations()]


@functools.cache
def applicable() -> dict[tuple[str, str], list[str]]:
    """(op-version key, type signature) -> names of the families that apply to it (a function of
    the code alone: computed once per process; callers do not change it)."""
    fams = families()
    return {c.key: list(dict.fromkeys(f.name for f in fams if f.applies(c.spec, c.types))) for c in combinations()}


def counts(cases: Iterable) -> Counter:
    """(op-version key, type signature, family) -> number of cases (cases, drafts or index refs alike)."""
    out: Counter = Counter()
    for c in cases:
        prefix = f"{c.domain}." if c.domain else ""
        out[(f"{prefix}{c.op}-{c.opset}", c.types, c.family)] += 1
    return out


def missing(cases: Iterable) -> list[tuple[str, str, str]]:
    have = counts(cases)
    return [(key, types, fam) for (key, types), fams in applicable().items() for fam in fams
            if not have[(key, types, fam)]]


def table(cases: Iterable, width: int = 120) -> str:
    """The op × version × type-pair table: cases per family ('.' = does not apply, '!' = missing).
    Families are numbered columns with a legend, rows grouped under their op-version, so the table
    fits ``width`` columns (a terminal, a CI log) whatever the number of families."""
    import textwrap

    have = counts(cases)
    fams = list(dict.fromkeys(f.name for f in families()))
    table_rows: list[tuple[str, str, list[str]]] = []
    gaps = 0
    for (key, types), applies in applicable().items():
        cells = []
        for f in fams:
            n = have[(key, types, f)]
            gaps += f in applies and not n
            cells.append(str(n) if n else ("!" if f in applies else "."))
        table_rows.append((key, types, cells))
    cell = max([len(str(i + 1)) for i in range(len(fams))] + [len(c) for *_, cs in table_rows for c in cs]) + 1
    label = min(max(len(t) for _, t, _ in table_rows) + 2, width // 3)
    per = max(1, (width - label) // cell)  # families per block: more than fit one line go to the next block
    legend = ", ".join(f"{i + 1} {f}" for i, f in enumerate(fams))
    rows = textwrap.wrap(f"families: {legend}", width)
    for lo in range(0, len(fams), per):
        cols = range(lo, min(lo + per, len(fams)))
        rows.append(f"{'op-version / types':{label}}" + "".join(f"{i + 1:>{cell}}" for i in cols))
        last = None
        for key, types, cells in table_rows:
            if key != last:
                rows.append(key)
                last = key
            if len(types) > label - 2:  # a very long type list gets a line of its own
                rows.append(f"  {types}")
                types = ""
            rows.append(f"  {types:{label - 2}}" + "".join(f"{cells[i]:>{cell}}" for i in cols))
    rows.append(f"{len(table_rows)} combinations, {sum(have.values())} cases; {gaps} applicable (combination, "
                f"family) pair(s) without a case")
    return "\n".join(rows)


def main(root, only_missing: bool = False) -> int:
    """``qconform coverage``: the table (or only the gaps) of the corpus at root; 1 if any gap."""
    from qconform import corpus

    try:
        cases = corpus.index(root).refs  # the index lines name what counts(): no tensor is read
    except corpus.CorpusError as exc:
        print(f"qconform: {exc}")
        return 2
    gaps = missing(cases)
    if only_missing:
        for key, types, fam in gaps:
            print(f"{key} {types}: no {fam} case")
        print(f"{len(gaps)} applicable (combination, family) pair(s) without a case")
    else:
        print(table(cases))
    return 1 if gaps else 0

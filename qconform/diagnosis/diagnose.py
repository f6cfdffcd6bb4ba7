"""Run failing cases through the deviation models and rank the models per (op, version, types).

Two steps, so that the heavy data never travels:

1. ``diagnose_case(case, actual)`` — where the runner's outputs are in memory (the pytest worker,
   right after ``compare``): every applicable model computes the case; a model *explains* the case
   when one of its readings equals ``actual`` under ``compare()``'s rules (bits, NaN as one class
   unless ``strict_nan``, the case's don't-care elements skipped). Only the model names go into the
   per-case record (``record.CaseRecord.judged``), a few bytes, whatever the output size.
2. ``rank(records, cases)`` — on the controller, from the per-case records of a whole run: per
   (domain, op, opset, types) group, a model that explains every failing case ranks first, then
   models by the number of failing cases they explain. Given the corpus cases, each candidate is
   also run on the group's *passing* cases: a model that would have failed a case the runner passed
   is contradicted by it and ranks after the models that are not. A group no model explains says
   "no known deviation explains this"; a group that several models explain together gets a greedy
   cover, and ``overall(groups)`` gives the cover of the whole run: the runtime's diagnosis.

Pairs: a case no single model explains is tried against pairs of the models that come closest
(``PAIR_POOL``). Cost: failing cases only, about 10-30 ms each; ``Budget`` caps the number of
diagnosed failing cases per group (the rest are recorded as not diagnosed, never as unexplained).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from qconform import dtypes
from qconform.case import Case
from qconform.compare import Outcome, check_structure, closest, differing, passes, reading_of, usable
from qconform.diagnosis.models import MODELS, Deviation, combine, get
from qconform.oracle.base import union
from qconform.oracle.granularity import InvalidModel
from qconform.verdicts import FAIL, PASS

NO_EXPLANATION = "no known deviation explains this"


@dataclass(frozen=True)
class Diagnosis:
    """One model that reproduces a runner's outputs for one case."""

    model: str
    reading: str  # the model's reading that matched (the spec reading it deviates from)
    explanation: str

    def line(self) -> str:
        return f"{self.model}: {self.explanation}"


def applicable(case: Case, models: Iterable[Deviation] | None = None, errors: list[str] | None = None) -> list[Deviation]:
    return [m for m in (MODELS.values() if models is None else models) if _applies(m, case, errors)]


def _applies(model: Deviation, case: Case, errors: list[str] | None = None) -> bool:
    """``model.applies``; a predicate that raises is reported like a model that breaks (``_evaluate``)."""
    try:
        return model.applies(case.draft)
    except Exception as exc:
        if errors is None:
            raise
        errors.append(f"{model.name}: its applies_to raised {type(exc).__name__}: {exc}")
        return False


def _masks(case: Case, model_masks) -> list[np.ndarray | None]:
    """The elements any of the case's readings leaves undefined, plus those the model's reading does:
    a model is not held to a value the spec leaves open under some reading."""
    out = []
    for i, e in enumerate(case.expected):
        mm = model_masks[i] if model_masks and i < len(model_masks) else None
        if mm is not None and np.shape(mm) != np.shape(e):
            mm = None
        out.append(union(mm, *(r.dont_care[i] for r in case.readings)))
    return out


def same_outputs(expected: Sequence[np.ndarray], actual: Sequence[np.ndarray], masks, *,
                 strict_nan: bool = False) -> bool:
    """compare()'s rule for one reading (``compare.differing``), without building mismatch messages."""
    return differing(expected, actual, masks, strict_nan) == 0


def _evaluate(model: Deviation, case: Case, errors: list[str] | None = None):
    """The model's evaluation of the case; None where such a kernel would reject the model.

    Any other exception is a bug of the model, never silent: it is appended to ``errors`` (the run
    counts and reports it) or, without that list, raised -- the project's tests call it so."""
    try:
        return model.evaluate(case.draft)
    except InvalidModel:
        return None
    except Exception as exc:
        if errors is None:
            raise
        errors.append(f"{model.name}: {type(exc).__name__}: {exc}")
        return None


def _closest(ev, case: Case, actual, strict_nan: bool, profile: str = "default") -> tuple[int, str | None]:
    """(fewest differing elements over the model's usable readings, that reading); (-1, None) when
    none has the outputs' structure."""
    return closest(((r.name, r.outputs, _masks(case, ev.masks(r))) for r in usable(ev.readings, profile)),
                   actual, strict_nan)


def reproduces(model: Deviation, case: Case, actual: Sequence[np.ndarray], *, strict_nan: bool = False,
               profile: str = "default", errors: list[str] | None = None) -> str | None:
    """The name of the model's reading that equals ``actual`` (compare rules), or None."""
    ev = _evaluate(model, case, errors)
    if ev is None:
        return None
    n, name = _closest(ev, case, actual, strict_nan, profile)
    return name if n == 0 else None


#: When no single model explains a case, pairs of the ``PAIR_POOL`` models that come closest are tried.
PAIR_POOL = 10
#: Always in the pool when applicable: they change the quotient's precision only, which often shows
#: through another step alone (so by themselves they are rarely among the closest).
PAIR_ALWAYS = ("quotient-in-float32", "divide-in-float64")


def diagnose_case(case: Case, actual: Sequence[np.ndarray], *, strict_nan: bool = False, profile: str = "default",
                  models: Iterable[Deviation] | None = None, pairs: bool = True,
                  errors: list[str] | None = None) -> list[Diagnosis]:
    """Every applicable model that reproduces the runner's ``actual`` outputs of ``case`` exactly.

    Meant for failing cases (for a passing case a model matching it is not a diagnosis). Malformed
    outputs (wrong count, not arrays) get no diagnosis; a wrong shape or type can be explained.
    If no single model explains the case and ``pairs``, the ``PAIR_POOL`` models that individually
    come closest (fewest differing elements) are tried two at a time (``Diagnosis.model`` is then
    ``a+b``). Closeness is only a heuristic for which pairs to try: a model can change nothing alone
    or even move further away and still be half of an exact pair (onnxruntime's float32 quotient
    only shows through its int32 cast), so the models that change the quotient's precision alone
    (``PAIR_ALWAYS``) are also tried with every applicable model.

    ``profile="strict"``: a model explains the failure only through its first reading, the one the
    strict comparison judged by. ``errors``: see ``_evaluate``."""
    if check_structure(case, actual):
        return []
    found, near = [], []
    for m in applicable(case, models, errors):
        ev = _evaluate(m, case, errors)
        if ev is None:
            continue
        n, reading = _closest(ev, case, actual, strict_nan, profile)
        if n == 0:
            found.append(Diagnosis(m.name, reading, m.explanation))
        elif n > 0:
            near.append((n, m.name))
    if found or not pairs or len(near) < 2:
        return found
    dist = {name: n for n, name in near}
    pool = [name for _, name in sorted(near)][:PAIR_POOL]
    tries = {tuple(sorted((a, b))) for i, a in enumerate(pool) for b in pool[i + 1:]}
    tries |= {tuple(sorted((a, b))) for a in PAIR_ALWAYS if a in dist for b in dist if b != a}
    for a, b in sorted(tries, key=lambda ab: (dist[ab[0]] + dist[ab[1]], ab)):  # closest first
        pair = combine(a, b)
        if pair is None or not _applies(pair, case, errors):
            continue
        reading = reproduces(pair, case, actual, strict_nan=strict_nan, profile=profile, errors=errors)
        if reading is not None:
            found.append(Diagnosis(pair.name, reading, pair.explanation))
    return found


class Budget:
    """At most ``per_group`` diagnosed failing cases per (domain, op, opset, types) group (None: no
    limit), counted per ``scope``: the run of cases an executor handed over together (its first case
    id), so which failures carry a diagnosis does not depend on which worker, process or machine ran
    them; without a scope, per process."""

    def __init__(self, per_group: int | None = None) -> None:
        self.per_group = per_group
        self._used: dict[tuple, int] = defaultdict(int)

    def allow(self, case: Case, scope: str | None = None) -> bool:
        if self.per_group is None:
            return True
        key = (scope, case.domain, case.op, case.opset, case.types)
        if self._used[key] >= self.per_group:
            return False
        self._used[key] += 1
        return True


def error_summary(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every distinct model error of a run, with how many failing cases hit it and one of them."""
    seen: dict[str, dict[str, Any]] = {}
    for r in records:
        for e in r.get("diagnosis_errors") or ():
            entry = seen.setdefault(e, {"error": e, "cases": 0, "example": r["id"]})
            entry["cases"] += 1
    return sorted(seen.values(), key=lambda e: (-e["cases"], e["error"]))


def message_lines(diagnoses: Sequence[Diagnosis], step: str = "") -> list[str]:
    """Lines for the pytest failure message of one failing case."""
    if not diagnoses:
        return [f"  diagnosis: {NO_EXPLANATION}" + (f"; {step}" if step else "")]
    return [f"  diagnosis: {d.line()}" for d in diagnoses]


def localise(case: Case, actual: Sequence[np.ndarray], outcome: Outcome) -> str:
    """Which step a failure no model explains sits in, read off the outcome's differing elements
    (the first output that differs, against the reading it was compared with): packing, saturation,
    zero point, rounding, special values, float precision or encoding. '' when no rule fits."""
    if outcome.problem:
        return "the difference is structural (element type or shape): the reading of the model's outputs"
    chosen = reading_of(case, outcome)
    for e, a, differ in zip(chosen.outputs, actual, outcome.differences):
        if not differ.any():
            continue
        t = dtypes.BY_DTYPE[e.dtype]
        eb, ab = t.to_bits(e), t.to_bits(a)
        data = case.inputs[0]
        x_t = dtypes.get(data.type)
        with np.errstate(invalid="ignore"):  # a signalling NaN input widens to a quiet one: NaN either way
            xv = np.asarray(data.value, np.float64) if data.value.shape == e.shape and not (x_t.packed and x_t.is_integer) else None
        if xv is not None and not np.all(np.isfinite(xv[differ])):
            return "the difference sits in special inputs (±Inf/NaN): their reading or saturation"
        if t.packed:
            k = 8 // t.bits
            ec, ac = eb.reshape(-1), ab.reshape(-1)
            n = len(ec) - len(ec) % k
            if n and np.array_equal(np.sort(ec[:n].reshape(-1, k), 1), np.sort(ac[:n].reshape(-1, k), 1)):
                return "the difference sits in the packing step: the right codes, in another order within bytes"
        ev, av = np.asarray(e, np.float64)[differ], np.asarray(a, np.float64)[differ]
        if t.is_integer:
            lo, hi = t.qrange
            d = av - ev
            if np.all((ev == lo) | (ev == hi) | (av == lo) | (av == hi)) and np.any(np.abs(d) > 1):
                return "the difference sits in the saturation step: results at the range's ends"
            if np.all(np.abs(d) == 1):
                return "the difference sits in the rounding step (or the division's precision): off by one"
            zp = case.inputs[2] if len(case.inputs) > 2 and case.inputs[2] is not None else None
            if zp is not None and zp.value.size == 1 and np.all(np.abs(d) == abs(float(np.asarray(zp.value, np.float64)))):
                return "the difference sits in the zero-point step: off by the zero point"
            return "the difference sits in the division or zero-point step: off by more than one"
        with np.errstate(all="ignore"):
            if np.any(np.isinf(ev) != np.isinf(av)) or np.any(np.isnan(ev) != np.isnan(av)):
                return "the difference sits in the conversion to the output type: overflow, Inf or NaN handled otherwise"
            rel = np.abs(av - ev) / np.maximum(np.abs(ev), np.finfo(np.float64).tiny)
        if t.float_format is not None and t.float_format.width <= 8:
            return "the difference sits in the encoding step: float8/float4/float6 codes"
        if np.all(rel <= 2.0 ** (-t.float_format.mbits + 1)):
            return "the difference sits in the precision of the division or multiplication: within two ulps"
        return "the difference sits in the arithmetic: values differ beyond rounding"
    return ""


# --------------------------------------------------------------------------------------------
# ranking over a run
# --------------------------------------------------------------------------------------------


@dataclass
class Candidate:
    model: str
    explanation: str
    evidence: str
    explained: list[str]  # ids of the group's failing cases it reproduces
    failing: int  # how many failing cases the group has
    contradicted: list[str] = field(default_factory=list)  # passing cases it would have failed
    checked: int = 0  # passing cases it was checked against
    rank: int = 0  # 1 = first; equal keys share a rank

    @property
    def explains_all(self) -> bool:
        return len(self.explained) == self.failing

    def key(self) -> tuple:
        return (not self.explains_all, len(self.contradicted), -len(self.explained))

    def summary(self) -> str:
        every = "all " if self.explains_all else ""
        s = f"{self.model} explains {every}{len(self.explained)} of {self.failing} failing case(s)"
        if self.checked:
            s += (f"; contradicted by {len(self.contradicted)} of {self.checked} passing case(s)" if self.contradicted
                  else f"; consistent with all {self.checked} passing case(s)")
        return s

    def to_json(self) -> dict:
        d = asdict(self)
        d["explains_all"] = self.explains_all
        return d


@dataclass
class GroupDiagnosis:
    domain: str
    op: str
    opset: int
    types: str
    failing: list[str]
    candidates: list[Candidate]
    unexplained: list[str]  # diagnosed failing cases no model reproduces
    undiagnosed: list[str] = field(default_factory=list)  # failing cases left out by a diagnosis budget
    #: failing cases each model explains over the whole run (set by ``rank``): breaks ties in ``cover``
    run_counts: dict[str, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.domain + '.' if self.domain else ''}{self.op}-{self.opset} {self.types}"

    @property
    def first(self) -> list[Candidate]:
        return [c for c in self.candidates if c.rank == 1]

    @property
    def cover(self) -> list[tuple[str, int]]:
        """When no model explains every failing case: models (in rank order) that together explain
        as many as can be explained, each with the number of cases it adds (greedy set cover)."""
        return _cover({c.model: set(c.explained) for c in self.candidates},
                      {c.model: (len(c.contradicted), c.rank, -self.run_counts.get(c.model, 0))
                       for c in self.candidates})

    def headline(self) -> str:
        if not self.candidates:
            return f"{self.label}: {NO_EXPLANATION} ({len(self.failing)} failing case(s))" + self._budget()
        if any(c.explains_all for c in self.first):
            return f"{self.label}: " + "; ".join(c.summary() for c in self.first) + self._budget()
        parts = " + ".join(f"{m} ({n})" for m, n in self.cover)
        rest = f"; {len(self.unexplained)} unexplained ({NO_EXPLANATION})" if self.unexplained else ""
        n = len(self.failing) - len(self.undiagnosed)
        return f"{self.label}: {n} failing case(s) explained together by {parts}{rest}" + self._budget()

    def _budget(self) -> str:
        return f" ({len(self.undiagnosed)} more failing case(s) not diagnosed)" if self.undiagnosed else ""

    def to_json(self) -> dict:
        return {"domain": self.domain, "op": self.op, "opset": self.opset, "types": self.types,
                "label": self.label, "headline": self.headline(), "failing": self.failing,
                "unexplained": self.unexplained, "undiagnosed": self.undiagnosed,
                "candidates": [c.to_json() for c in self.candidates],
                "cover": [{"model": m, "adds": n} for m, n in self.cover]}


def _cover(ids: Mapping[str, set[str]], tiebreak: Mapping[str, tuple]) -> list[tuple[str, int]]:
    """Greedy set cover: repeatedly the model adding the most not yet explained cases (ties: a
    pair made of models already chosen, then the smaller ``tiebreak`` value, then the name)."""
    remaining = set().union(*ids.values()) if ids else set()
    out: list[tuple[str, int]] = []

    def new_parts(m: str) -> int:  # a pair "a+b" whose halves are already chosen explains more simply
        chosen = {c for c, _ in out}
        return sum(p not in chosen for p in m.split("+"))

    while remaining:
        best = min(ids, key=lambda m: (-len(ids[m] & remaining), new_parts(m), tiebreak.get(m, ()), m))
        gain = ids[best] & remaining
        if not gain:
            break
        out.append((best, len(gain)))
        remaining -= gain
    return out


def _names(diag: Any) -> list[str]:
    out = []
    for d in diag or []:
        out.append(d if isinstance(d, str) else (d.model if isinstance(d, Diagnosis) else d["model"]))
    return out


def _lookup(name: str) -> Deviation | None:
    try:
        return get(name)
    except KeyError:
        return None


def _would_fail(model: Deviation, case: Case, strict_nan: bool, profile: str = "default",
                errors: list[str] | None = None) -> bool:
    """Whether a runtime with this deviation fails a case (no reading of the model passes it)."""
    if not _applies(model, case, errors):
        return False
    ev = _evaluate(model, case, errors)
    if ev is None:  # the kernel rejects the model (or the model broke, and says so in errors)
        return True
    return not any(passes(case, r.outputs, strict_nan=strict_nan, profile=profile) for r in usable(ev.readings, profile))


class _Ranking(NamedTuple):
    """One group on its way through ``rank``: its candidates before the passing cases are read."""

    key: tuple
    records: list[Mapping[str, Any]]
    failing: list[Mapping[str, Any]]
    diagnosed: list[Mapping[str, Any]]
    candidates: list[Candidate]
    checks: bool  # whether its candidates are checked against its passing cases


def rank(records: Iterable[Mapping[str, Any]],
         cases: Mapping[str, Case] | Callable[[Iterable[str]], Mapping[str, Case]] | None = None, *,
         strict_nan: bool = False, check: str = "ties", max_passing: int | None = 32, profile: str = "default",
         errors: list[str] | None = None) -> list[GroupDiagnosis]:
    """Group per-case records by (domain, op, opset, types) and rank the models in each group
    that has failing cases.

    ``records``: dicts with at least ``id``, ``domain``, ``op``, ``opset``, ``types``, ``verdict``
    and, for failing cases, ``diagnosis`` (model names, as ``CaseRecord.to_dict`` writes them; absent or
    None: not diagnosed, e.g. beyond a ``Budget``). Only ``verdict == "fail"`` counts as failing (a
    runner error has no outputs to explain).
    ``cases``: case id -> Case, or a function from ids to such a mapping (called only for the groups
    that need their passing cases, so that a run's report does not read every failing group's
    cases); when given, candidates are checked against the group's passing
    cases (see the module docstring), at most ``max_passing`` of them per group:
    ``check="ties"`` only where two or more models explain every failing case (what it takes to
    order the first rank; a broadly failing runtime has a thousand groups), ``"leaders"`` the
    models that explain every failing case, ``"all"`` every candidate. Groups come back in
    (op, opset, types) order."""
    groups: dict[tuple, list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        groups[(r.get("domain", ""), r["op"], int(r["opset"]), r["types"])].append(r)
    ranked: list[_Ranking] = []
    for key, recs in sorted(groups.items()):
        failing = [r for r in recs if r["verdict"] == FAIL]
        if not failing:
            continue
        diagnosed = [r for r in failing if r.get("diagnosis") is not None]  # key absent or None: budget
        explained: dict[str, list[str]] = defaultdict(list)
        for r in diagnosed:
            for name in _names(r.get("diagnosis")):
                explained[name].append(r["id"])
        cands = []
        for name, ids in explained.items():
            m = _lookup(name)
            cands.append(Candidate(name, m.explanation if m else "", m.evidence if m else "", ids, len(diagnosed)))
        leaders = sum(c.explains_all for c in cands)
        ranked.append(_Ranking(key, recs, failing, diagnosed, cands,
                               cases is not None and (check != "ties" or leaders > 1)))
    if callable(cases):  # one read of the corpus for the passing cases the checking groups look at
        cases = _passing_cases(cases, [[r["id"] for r in g.records if r["verdict"] == PASS] for g in ranked if g.checks],
                               max_passing)
    out = []
    for (domain, op, opset, types), recs, failing, diagnosed, cands, checks in ranked:
        if checks:
            passing = [cases[r["id"]] for r in recs if r["verdict"] == PASS and r["id"] in cases]
            passing = passing[:max_passing] if max_passing is not None else passing
            for c in cands:
                m = _lookup(c.model)
                if m is None or (check != "all" and not c.explains_all):
                    continue
                for case in passing:
                    if _applies(m, case, errors):
                        c.checked += 1
                        if _would_fail(m, case, strict_nan, profile, errors):
                            c.contradicted.append(case.id)
        cands.sort(key=lambda c: (c.key(), c.model))
        for i, c in enumerate(cands):
            c.rank = 1 if i == 0 else (cands[i - 1].rank if c.key() == cands[i - 1].key() else i + 1)
        covered = {i for c in cands for i in c.explained}
        out.append(GroupDiagnosis(domain, op, opset, types, [r["id"] for r in failing], cands,
                                  [r["id"] for r in diagnosed if r["id"] not in covered],
                                  [r["id"] for r in failing if r.get("diagnosis") is None]))
    counts: dict[str, int] = defaultdict(int)
    for g in out:
        for c in g.candidates:
            counts[c.model] += len(c.explained)
    for g in out:
        g.run_counts = dict(counts)
    return out


def _passing_cases(read: Callable[[Iterable[str]], Mapping[str, Case]], groups: list[list[str]],
                   limit: int | None) -> dict[str, Case]:
    """The cases of each group's first ``limit`` passing ids that are in the corpus (all of them
    without a limit), read together: the ranking looks at no others."""
    got: dict[str, Case] = {}
    todo = [(ids, 0) for ids in groups]
    while todo:
        want = [ids[at:at + limit] if limit is not None else ids[at:] for ids, at in todo]
        got.update(read([i for w in want for i in w]))
        todo = [(ids, at + len(w)) for (ids, at), w in zip(todo, want)
                if limit is not None and at + len(w) < len(ids) and sum(i in got for i in ids[:at + len(w)]) < limit]
    return got


@dataclass
class Overall:
    """One model across every failing group of a run."""

    model: str
    first_in: list[str]  # groups where it ranks first and explains every failing case
    groups: int  # groups where it explains at least one failing case
    explained: int  # failing cases it explains, over all groups
    contradicted: int  # passing cases it would have failed, over those groups
    adds: int = 0  # failing cases it adds in the run's greedy cover (0: the others already explain them)

    def key(self) -> tuple:
        return (-len(self.first_in), self.contradicted, -self.explained)

    def line(self) -> str:
        m = MODELS.get(self.model)
        head = (f"{self.model}: explains {self.explained} failing case(s) in {self.groups} group(s)"
                + (f", first in {len(self.first_in)}" if self.first_in else "")
                + (f", adds {self.adds} to the cover" if self.adds else ""))
        return head + (f" — {m.explanation}" if m else "")


def overall(groups: Sequence[GroupDiagnosis]) -> list[Overall]:
    """The run's diagnosis in one list: first the models of a greedy cover of every explained
    failing case (most cases first; ties: more groups explained entirely, fewer contradictions),
    then the others by groups explained entirely, contradictions and cases explained."""
    acc: dict[str, Overall] = {}
    ids: dict[str, set[str]] = defaultdict(set)
    for g in groups:
        for c in g.candidates:
            o = acc.setdefault(c.model, Overall(c.model, [], 0, 0, 0))
            o.groups += 1
            o.explained += len(c.explained)
            o.contradicted += len(c.contradicted)
            ids[c.model] |= set(c.explained)
            if c.rank == 1 and c.explains_all:
                o.first_in.append(g.label)
    cover = _cover(ids, {m: (o.key()[0], o.contradicted) for m, o in acc.items()})
    for m, n in cover:
        acc[m].adds = n
    chosen = [acc[m] for m, _ in cover]
    rest = sorted((o for o in acc.values() if not o.adds), key=lambda o: (o.key(), o.model))
    return chosen + rest


# --------------------------------------------------------------------------------------------
# a whole run in process (tests, benchmark, docs)
# --------------------------------------------------------------------------------------------


def report_section(records: Sequence[Mapping[str, Any]], cases_of: Callable[[Iterable[str]], Mapping[str, Case]], *,
                   strict_nan: bool = False, profile: str = "default") -> dict[str, Any]:
    """report.json's ``diagnosis``: the models ranked per op-version/type group over the diagnosed
    failures, the cover over all groups, and every model error (``cases_of``: ids -> cases)."""
    import dataclasses
    from collections import Counter

    errors = error_summary(records)
    if not any(r.get("verdict") == FAIL and "diagnosis" in r for r in records):
        return {"groups": [], "overall": [], "errors": errors}
    ranking: list[str] = []
    try:
        groups = rank(records, cases_of, strict_nan=strict_nan, profile=profile, errors=ranking)
    except Exception as exc:  # noqa: BLE001 - advice only: a report is never lost to it, but it shows
        ranking.append(f"rank: {type(exc).__name__}: {exc}")
        groups = []
    errors += [{"error": e, "cases": n, "example": ""} for e, n in sorted(Counter(ranking).items())]
    return {"groups": [g.to_json() for g in groups], "overall": [dataclasses.asdict(o) for o in overall(groups)],
            "errors": errors}


def render_text(groups: Sequence[GroupDiagnosis], *, per_group: int = 3) -> list[str]:
    """Terminal lines: the run's cover (which deviations explain the failures), then one headline
    per group with its first candidates."""
    lines = []
    cover = [o for o in overall(groups) if o.adds]
    if cover:
        lines.append("the failures are explained by:")
        lines += [f"  {o.line()}" for o in cover]
    for g in groups:
        lines.append(g.headline())
        for c in g.first[:per_group]:
            lines.append(f"    {c.model}: {c.explanation}")
    return lines


def render_markdown(groups: Sequence[GroupDiagnosis], *, max_ids: int = 4) -> str:
    lines = ["| group | failing | diagnosis (rank 1) | other candidates | unexplained |",
             "| --- | --- | --- | --- | --- |"]
    for g in groups:
        first = "; ".join(c.summary() for c in g.first) or NO_EXPLANATION
        others = ", ".join(f"{c.model} ({len(c.explained)})" for c in g.candidates if c.rank != 1) or "-"
        ids = ", ".join(f"`{i}`" for i in g.failing[:max_ids]) + (" ..." if len(g.failing) > max_ids else "")
        lines.append(f"| {g.label} | {len(g.failing)}: {ids} | {first} | {others} | {len(g.unexplained)} |")
    return "\n".join(lines)


__all__ = ["Budget", "Candidate", "Diagnosis", "GroupDiagnosis", "NO_EXPLANATION", "Overall", "applicable",
           "diagnose_case", "error_summary", "localise", "message_lines", "overall", "rank", "render_markdown", "render_text",
           "report_section", "reproduces", "same_outputs"]

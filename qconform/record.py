"""One case's record: what a run knows of a case, whatever became of it.

The engine builds one ``CaseRecord`` for every outcome -- judged (pass, fail, error, information),
refused (unsupported), crashed or timed out, lost (not run) -- and a front-end builds the stub of a
collected case that produced none. Its ``to_dict`` is what crosses processes as JSON (pytest-xdist's
record files, ``certify --state``) and what ``report.model.build`` reads: report.json is its
serialisation.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from qconform.verdicts import INFO, NOT_RUN, Verdict

#: The case's own fields, the same whatever the outcome (None: the engine had no case to read them
#: from; the front-end's stub of the case supplies them).
STATIC = ("op", "domain", "opset", "types", "family", "clause", "readings", "output_types", "output_names")
#: Fields written only where they say something (absent otherwise, in memory as in report.json).
OPTIONAL = ("diagnosis", "diagnosis_errors", "diagnosis_step", "evidence", "traceback", "information", "runner_did",
            "duration_s", "packed")


@dataclass
class CaseRecord:
    """A case's id and verdict, the case's static fields, and what the engine found."""

    id: str
    verdict: Verdict = NOT_RUN
    op: str | None = None
    domain: str | None = None
    opset: int | None = None
    types: str | None = None
    family: str | None = None
    clause: str | None = None
    readings: int | None = None  # how many permitted readings the case has
    output_types: list[str] | None = None
    output_names: list[str] | None = None
    reading: str | None = None  # the reading matched (pass) or shown against (fail)
    masked: int = 0  # don't-care elements skipped
    mismatches: int = 0  # elements that differ from ``reading``
    problem: str = ""  # why, in words: a runner's message, a structural problem, an information sentence
    first_mismatches: list[dict] = field(default_factory=list)
    #: the deviation models that reproduce a failure (None: not diagnosed, by option or budget)
    diagnosis: list[str] | None = None
    diagnosis_errors: list[str] | None = None  # models that broke on the case
    diagnosis_step: str | None = None  # where a failure no model explains sits
    evidence: list[list[str]] | None = None  # every mismatching element (compare.EVIDENCE_HEADER rows)
    traceback: str | None = None  # the runner's own, when it raised
    information: str | None = None  # an information case: why the text makes the model invalid
    runner_did: str | None = None  # ... and what the runner did with it, a phrase ("rejected it (...)")
    duration_s: float | None = None  # the runner's time on the case, where a front-end measured it
    packed: bool | None = None  # True: the verdict (a pass) came from a packed model (qconform.packing)

    # -- how the engine and the front-ends make one --------------------------------------------
    @classmethod
    def stub(cls, case: Any, verdict: Verdict = NOT_RUN, problem: str = "") -> "CaseRecord":
        """A case's static fields (from a ``Case`` or a ``corpus.CaseRef``) and a verdict with no
        outputs behind it: a collected case with no result (``not-run``), or one the front-end knows
        failed without a record."""
        readings = case.readings if isinstance(case.readings, int) else len(case.readings)
        return cls(case.id, Verdict(verdict), case.op, case.domain, case.opset, case.types, case.family, case.clause,
                   readings, list(case.output_types), list(case.output_names), problem=problem)

    @classmethod
    def judged(cls, case: Any, outcome: Any, diagnosis: Sequence[str] | None = None,
               diagnosis_errors: Sequence[str] = (), diagnosis_step: str = "") -> "CaseRecord":
        """A case the comparison judged (``compare.Outcome``), with its diagnosis where one ran."""
        rec = cls.stub(case, outcome.verdict, outcome.problem)
        rec.reading, rec.masked, rec.mismatches = outcome.reading, outcome.masked, outcome.mismatch_count
        rec.first_mismatches = [dataclasses.asdict(m) for m in outcome.mismatches]
        if diagnosis is not None:
            rec.diagnosed(diagnosis, diagnosis_errors, diagnosis_step)
        return rec

    def diagnosed(self, diagnosis: Sequence[str], diagnosis_errors: Sequence[str] = (), diagnosis_step: str = "") -> None:
        """The diagnosis of this failure: the models that reproduce it, the ones that broke, the step."""
        self.diagnosis = list(diagnosis)
        self.diagnosis_errors = list(diagnosis_errors) or None
        self.diagnosis_step = diagnosis_step or None

    @classmethod
    def informed(cls, case: Any, reading: str | None, runner_did: str) -> "CaseRecord":
        """A model the text makes invalid: what the runner did with it, never judged."""
        rec = cls.stub(case, INFO, f"information: {case.information}. The runner {runner_did}.")
        rec.reading, rec.information, rec.runner_did = reading, case.information, runner_did
        return rec

    @classmethod
    def lost(cls, case_id: str, verdict: Verdict, problem: str, traceback: str = "") -> "CaseRecord":
        """A case whose outcome is known without the case itself (the runner's worker could not
        start, qconform broke loading it): only its id; the front-end's stub supplies the rest."""
        return cls(case_id, Verdict(verdict), problem=problem, traceback=traceback or None)

    # -- what crosses processes and goes into the report -----------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The record as report.model.build and the record files read it: every field, but the
        static ones the engine did not know and the optional ones that say nothing."""
        return {name: value for name in _FIELDS if (value := getattr(self, name)) is not None or name not in _SILENT}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CaseRecord":
        """A record read back from ``to_dict``'s JSON (fields it does not know are left out)."""
        known = {f.name for f in dataclasses.fields(cls)}
        rec = cls(**{k: v for k, v in d.items() if k in known})
        rec.verdict = Verdict(rec.verdict)
        return rec

    def over(self, stub: "CaseRecord") -> "CaseRecord":
        """This record, with the static fields it lacks taken from ``stub`` (the same case's)."""
        out = object.__new__(type(self))  # a shallow copy, as dataclasses.replace makes, at a fraction of its cost
        out.__dict__.update(self.__dict__)
        for k in STATIC:
            if getattr(out, k) is None:
                setattr(out, k, getattr(stub, k))
        return out


_FIELDS = tuple(f.name for f in dataclasses.fields(CaseRecord))  # in order: report.json's key order
_SILENT = frozenset(STATIC) | frozenset(OPTIONAL)  # left out of to_dict where None


#: A deviation's behaviour where the diagnosis names no model (``behaviour``; a baseline entry's
#: ``"diagnosis": "none"``).
UNNAMED = "none"


def behaviour(record: Mapping[str, Any]) -> str | None:
    """A deviation's behaviour as baselines and certificates name it: its first diagnosis model,
    ``UNNAMED`` where the diagnosis names none, None where it was not diagnosed."""
    if record.get("diagnosis") is None:
        return None
    return record["diagnosis"][0] if record["diagnosis"] else UNNAMED


__all__ = ["CaseRecord", "OPTIONAL", "STATIC", "UNNAMED", "behaviour"]

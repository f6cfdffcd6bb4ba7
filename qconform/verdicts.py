"""Every word qconform judges with, named once: what a case gets (``Verdict``), what a runner call did
(``Call``), how a group of cases reads at a glance (``Status``) and what a certificate states of a
scope (``Conformance``), with the groups the reports and front-ends count by.

The members are ``StrEnum``s: each is its own value as a string (``Verdict.PASS == "pass"``, the same
hash, ``json.dumps`` writes ``"pass"``), so report.json and the other files stay as they were written,
and a verdict read back from one compares equal to the member. No module outside this one spells a
verdict as a literal (``tests/test_verdicts.py`` checks the package); a new verdict is a line here,
then whatever renders it.
"""
from __future__ import annotations

from enum import StrEnum


class Verdict(StrEnum):
    """What a case gets, in the order reports list them."""

    PASS = "pass"  # the outputs are one of the case's permitted readings
    FAIL = "fail"  # they are none of them (or malformed in type or shape)
    ERROR = "error"  # the runner raised, returned something that is not outputs, or qconform broke on it
    CRASHED = "crashed"  # the runner's process died on the case
    TIMEOUT = "timeout"  # no result within the case timeout
    UNSUPPORTED = "unsupported"  # the runner declined the model (``qconform.Unsupported``)
    INFO = "info"  # a model the text makes invalid: what the runner did is said, never judged
    NOT_RUN = "not-run"  # collected, no result: the run was stopped, or the case was lost to the infrastructure


class Call(StrEnum):
    """What one call of a runner did (``isolation.CallResult.kind``); every kind but ``OK`` is the
    verdict of the same name."""

    OK = "ok"  # outputs, to be compared
    UNSUPPORTED = "unsupported"
    ERROR = "error"
    CRASHED = "crashed"
    TIMEOUT = "timeout"
    NOT_RUN = "not-run"  # no answer, and not the runner's doing (a connection to a device dropped)

    @property
    def verdict(self) -> Verdict:
        """The verdict of a call that gave no outputs to compare."""
        if self is Call.OK:
            raise ValueError("a call with outputs is judged by the comparison, not by its kind")
        return Verdict(self.value)


class Probe(StrEnum):
    """What a runner did with a model the text makes invalid, where that is all a probe asks."""

    RAN = "ran"
    REJECTED = "rejected"

    @classmethod
    def of(cls, call: Call) -> "Probe":
        return cls.RAN if call == Call.OK else cls.REJECTED


class SweepStatus(StrEnum):
    """What became of one sweep unit (a chunk of a domain through a runner, or through the oracle)."""

    OK = "ok"  # the chunk's digest is the golden one
    READING = "reading"  # it differs from the golden digest, and matches another permitted reading
    MISMATCH = "mismatch"  # it matches no permitted reading
    UNSUPPORTED = "unsupported"
    ERROR = "error"
    NO_GOLDEN = "no-golden"  # nothing to compare it with
    GOLDEN = "golden"  # the oracle's digest, computed to be kept

    @property
    def deviates(self) -> bool:
        return self in (SweepStatus.MISMATCH, SweepStatus.ERROR)


class Stale(StrEnum):
    """Why a baseline entry accepted nothing in a run (report.json's ``gate.stale[].state``)."""

    UNMATCHED = "unmatched"  # no case of the run matches it
    FIXED = "fixed"  # its cases ran, and some pass now: the deviation it accepted is gone there
    NOT_DEVIATING = "not-deviating"  # its cases ran, none deviates, none passes (unsupported, information)
    REDUNDANT = "redundant"  # its cases still deviate, accepted by an entry before it (a behaviour entry)
    CHANGED = "changed"  # its cases still deviate, but not as it accepts (a failure is now an error or a crash)


class Status(StrEnum):
    """A group of cases at a glance: a heat-map cell of the report, a cell of the scoreboard."""

    FAIL = "fail"
    ERROR = "error"  # deviating with no failure: an error, a crash or a timeout
    DEVIATES = "deviate"  # the scoreboard's one column for every deviating verdict
    PASS = "pass"
    PARTIAL = "partial"  # passes, and some cases unsupported
    UNSUPPORTED = "unsupported"
    INFO = "info"
    NOT_RUN = "not-run"


class Conformance(StrEnum):
    """What a certificate states of one scope (an op version, a type combination) and of a run."""

    CONFORMANT = "conformant"  # every case ran, and passed
    SELECTION_PASSED = "passed the selected cases"  # a selection of its cases ran and passed: no conformance
    ACCEPTED = "deviates, accepted by baseline"  # deviates, and every deviation is accepted with a reason
    DEVIATES = "deviates"  # a deviation no baseline entry covers
    UNSUPPORTED = "not supported"  # the runner ran none of its cases
    INFORMATION = "information only"  # every case a model the text makes invalid
    NOT_RUN = "not run"
    NOT_FULLY_RUN = "not fully run"  # some of its cases did not run, none deviating: no statement on them


PASS, FAIL, ERROR, CRASHED, TIMEOUT = Verdict.PASS, Verdict.FAIL, Verdict.ERROR, Verdict.CRASHED, Verdict.TIMEOUT
UNSUPPORTED, INFO, NOT_RUN = Verdict.UNSUPPORTED, Verdict.INFO, Verdict.NOT_RUN

#: Every verdict, in the order reports list them.
VERDICTS = tuple(Verdict)
#: The case deviates from the spec: what gates and certificates count.
DEVIATING = frozenset({FAIL, ERROR, CRASHED, TIMEOUT})
#: What the controller says of a case whose runner died or hung: no outputs to judge.
FAULTS = (CRASHED, TIMEOUT)
#: Neither a pass nor a deviation of the runner: pytest shows these as skipped.
SHOWN_AS_SKIPPED = frozenset({UNSUPPORTED, INFO, NOT_RUN})
#: The columns a one-line summary shows (a terminal, the scoreboard); crashes and timeouts are
#: counted with the errors there.
HEADLINE = (PASS, FAIL, ERROR, UNSUPPORTED, INFO)

__all__ = ["CRASHED", "Call", "Conformance", "DEVIATING", "ERROR", "FAIL", "FAULTS", "HEADLINE", "INFO", "NOT_RUN",
           "PASS", "Probe", "SHOWN_AS_SKIPPED", "Stale", "Status", "SweepStatus", "TIMEOUT", "UNSUPPORTED", "VERDICTS", "Verdict"]

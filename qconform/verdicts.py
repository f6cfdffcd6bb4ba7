"""The verdicts a case can get, named once: the engine, the reports and the applications import the
names and the groups from here (a new verdict is one line here, then whatever renders it)."""
from __future__ import annotations

PASS, FAIL, ERROR, CRASHED, TIMEOUT = "pass", "fail", "error", "crashed", "timeout"
UNSUPPORTED, INFO, NOT_RUN = "unsupported", "info", "not-run"

#: Every verdict, in the order reports list them.
VERDICTS = (PASS, FAIL, ERROR, CRASHED, TIMEOUT, UNSUPPORTED, INFO, NOT_RUN)
#: The case deviates from the spec (what gates and certificates count).
DEVIATING = frozenset({FAIL, ERROR, CRASHED, TIMEOUT})
#: What the controller says of a case whose runner died or hung: no outputs to judge.
FAULTS = (CRASHED, TIMEOUT)

__all__ = ["CRASHED", "DEVIATING", "ERROR", "FAIL", "FAULTS", "INFO", "NOT_RUN", "PASS", "TIMEOUT", "UNSUPPORTED",
           "VERDICTS"]

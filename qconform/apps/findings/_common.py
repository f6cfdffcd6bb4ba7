"""What every step of the package shares: paths and constants."""
from __future__ import annotations

from pathlib import Path

import qconform


PKG = Path(qconform.__file__).resolve().parent
CHECKOUT = PKG.parent if (PKG.parent / "pyproject.toml").is_file() else None
SEMANTICS = PKG / "docs" / "semantics.md"
INDEX = "index.md"
STATUS = "status.toml"
META = "finding.json"
FORMAT = 1
#: The last line a script prints when the runtime deviates (tests/test_findings.py looks for it).
MARK = "MISMATCH:"
#: Fact kinds that make a finding: the source contradicts the text, or runs a model it makes invalid.
FACT_KINDS = ("erratum", "must-reject")
#: Candidate cases tried per group until one gives a script that shows the mismatch.
TRIES = 5
VERIFY_TIMEOUT = 300
#: Runs of a freshly written script that must all show the mismatch: a runtime whose outputs differ
#: from run to run (memory it never writes, tvm's y_scale of an empty x) gets no reproducer that
#: passes one day and not the next.
VERIFY_RUNS = 3


def default_out() -> Path:
    """``qconform/docs/findings`` of a source checkout; ``./qconform-findings`` elsewhere."""
    return PKG / "docs" / "findings" if CHECKOUT else Path("qconform-findings")



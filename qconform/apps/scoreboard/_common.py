"""What every step of the package shares: paths and constants."""
from __future__ import annotations

from pathlib import Path

import qconform
from qconform.runner import BUNDLED
from qconform.declarations.runtimes import RUNTIMES


FORMAT = 1
FILES = ("scoreboard.md", "scoreboard.html", "scoreboard.json")
DATA = "scoreboard.json"
#: qconform's own kernels: bundled runners, but no runtime anyone ships; left out by default.
OWN = tuple(name for name, rt in RUNTIMES.items() if rt.own)
#: Top deviation models listed per runtime.
TOP = 10
REPORT_FILES = ("report.html", "summary.md", "report.json")

PKG = Path(qconform.__file__).resolve().parent
CHECKOUT = PKG.parent if (PKG.parent / "pyproject.toml").is_file() else None


def default_out() -> Path:
    """``qconform/docs/scoreboard`` of a source checkout; ``./qconform-scoreboard`` elsewhere."""
    return PKG / "docs" / "scoreboard" if CHECKOUT else Path("qconform-scoreboard")


def runtimes() -> list[str]:
    """The bundled third-party runtimes, in ``BUNDLED`` order (installed or not)."""
    return [n for n in BUNDLED if n not in OWN]


def _order(name: str) -> tuple:
    """Bundled names first in ``BUNDLED`` order, then others by name: the order of every table,
    whatever order ``--runners`` gave (a re-render must not depend on it)."""
    names = list(BUNDLED)
    return (names.index(name), "") if name in names else (len(names), name)



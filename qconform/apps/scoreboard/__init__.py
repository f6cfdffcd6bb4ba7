"""``qconform scoreboard``: the bundled third-party runtimes side by side on the golden corpus.

One ``qconform certify --runner NAME --report DIR/NAME`` run per installed runtime (exactly the command
a user types, in a subprocess each, so runtimes never share a process and can run in parallel; the
report ``pytest --runner=NAME --report=DIR/NAME`` writes, without pytest's cost per case), then a
comparison built only from the report.json files: ``scoreboard.md``, ``scoreboard.html`` and
``scoreboard.json`` (the same tables as data, and what ``--check`` reads). ``--from-reports DIR``
re-renders from kept report directories without running anything: the output depends on the
reports alone (no clock, no absolute path), so the same reports give the same bytes.

The default output folder is ``qconform/docs/scoreboard/`` of a source checkout, beside the other
documents (which can link to it). It is not package data (the wheel ships ``docs/*.md`` only): a
scoreboard is a measurement of some runtime versions on one machine, not part of the suite. Outside
a checkout (an installed wheel) the default is ``./qconform-scoreboard``, never site-packages.

``stale(dir)`` says why a committed scoreboard no longer describes this checkout: the corpus changed,
or an installed runtime is another version than the one measured (a runtime not installed here is
not a reason: nobody can re-measure it here).

One module per step: ``run`` (a certification per runtime), ``data`` (their reports as the
scoreboard's data), ``render`` (its documents), ``stale`` (whether the committed one still holds) and
``cli``.
"""
from __future__ import annotations

from qconform.apps.scoreboard._common import DATA, FILES, FORMAT, OWN, PKG, TOP, default_out, runtimes
from qconform.apps.scoreboard.cli import add_arguments, main
from qconform.apps.scoreboard.data import CERTIFICATE_COLUMNS, CERTIFICATE_FORMAT, build, collect, merge
from qconform.apps.scoreboard.freshness import current_digest, installed_version, stale
from qconform.apps.scoreboard.render import render_html, render_markdown, write
from qconform.apps.scoreboard.run import installed, run_all, run_one

__all__ = ["CERTIFICATE_COLUMNS", "CERTIFICATE_FORMAT", "DATA", "FILES", "FORMAT", "OWN", "PKG", "TOP", "add_arguments",
           "build", "collect", "current_digest", "default_out", "installed", "installed_version", "main", "merge",
           "render_html", "render_markdown", "run_all", "run_one", "runtimes", "stale", "write"]

"""The pytest plugin (``pytest11`` entry point): options, collection of golden cases, execution.

``pytest --runner=NAME`` collects one item per golden case; without ``--runner`` the plugin collects
nothing, so the project's own tests run alone.

One object, ``QconformPlugin``, registered only when ``--runner`` is given and kept under one stash
key (``PLUGIN``), holds the session's state and hooks; the feature modules (reports, exploration)
read it from there and add their terminal sections through the ``pytest_qconform_summary`` hook.

Collection reads only the corpus index (``corpus.index``): no tensors. Execution goes through an
engine (``qconform.execution``): when the first case of a group (op-version and types) runs, the
whole group of this session's items is handed to the runner's worker process in batches, and the
worker streams results back while pytest reports the previous ones; items only pick their result
up. Per-case records stay in the process that ran them (``Records``); pytest-xdist workers write
theirs to a file the controller merges at the end, so nothing but pytest's own small reports
crosses to the controller per item. Under xdist each pytest worker hands its runner every case xdist
has queued on it (xdist's own load scheduling; its scope schedulers are quadratic at corpus size).

The package's modules, lowest first: ``options`` (options and selection), ``items`` (case items and
records), ``collection``, ``terminal``, ``core`` (the plugin object and its hooks); the feature
modules ``model`` (``--model FILE``: a user's model as the corpus), ``report`` and ``explore`` are
registered as plugins of their own (``pytest_plugins``; ``model`` first, as ``report`` reads it). This
module is the entry point pytest registers: it holds the package's module-level hooks and what
outside code imports.
"""
from __future__ import annotations

from qconform.plugin.core import (QconformPlugin, pytest_addhooks, pytest_configure, pytest_terminal_summary,
                                  plugin_of)
from qconform.plugin.items import WORKERINPUT_RECORDS, CaseItem, Records
from qconform.plugin.options import (NO_LAST_FAILED, PLUGIN, case_markers, default_golden, identity, marker_name,
                                     no_last_failed, pytest_addoption)

__all__ = ["NO_LAST_FAILED", "PLUGIN", "WORKERINPUT_RECORDS", "CaseItem", "QconformPlugin", "Records", "case_markers",
           "default_golden", "identity", "marker_name", "no_last_failed", "plugin_of", "pytest_addhooks",
           "pytest_addoption", "pytest_configure", "pytest_terminal_summary"]

# Feature modules, each with its own options and hooks (reports, exploration, a user's model).
pytest_plugins: list[str] = ["qconform.plugin.model", "qconform.plugin.report", "qconform.plugin.explore"]

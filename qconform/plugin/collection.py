"""Collection: the corpus's MANIFEST as one pytest file whose items are its cases, read from the index.

Also which other plugins hook item or phase hooks: with any, pytest selects and runs cases itself.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from qconform.plugin.items import CaseItem
from qconform.plugin.options import PLUGIN, case_markers


#: Hooks of pytest's own test phases. The fast protocol calls none of them, so a plugin that
#: implements one (a conftest that fails a setup, a timeout plugin) gets pytest's own protocol.
PHASE_HOOKS = ("pytest_runtest_setup", "pytest_runtest_call", "pytest_runtest_teardown")


def _hooked_by(config: pytest.Config, hooks: tuple[str, ...], known) -> list[str]:
    """``plugin.hook`` for each implementation of ``hooks`` whose plugin ``known(module, file)`` does not
    accept (``module``: the plugin's module name; ``file``: its file, or None)."""
    found = []
    for name in hooks:
        for impl in getattr(config.pluginmanager.hook, name).get_hookimpls():
            module = getattr(impl.plugin, "__name__", None) or type(impl.plugin).__module__
            if not known(module, getattr(impl.plugin, "__file__", None)):
                found.append(f"{impl.plugin_name}.{name}")
    return found


def phase_hooks(config: pytest.Config) -> list[str]:
    """Plugins outside pytest itself (and hypothesis, which only wraps its own tests) that hook a phase."""
    return _hooked_by(config, PHASE_HOOKS, lambda module, _: module.startswith(("_pytest", "_hypothesis_pytestplugin")))


#: Hooks through which a plugin may give collected items markers or keywords before pytest's own
#: ``-k`` / ``-m`` deselection sees them.
ITEM_HOOKS = ("pytest_itemcollected", "pytest_collection_modifyitems")
#: Plugins known to add none to corpus items: pytest's own, xdist's, qconform's, hypothesis's, and
#: this project's tests/conftest.py (only pytest.Function items get its markers).
OWN_ITEM_HOOKS = ("_pytest", "xdist", "qconform", "_hypothesis_pytestplugin")
PROJECT_CONFTEST = Path(__file__).resolve().parents[2] / "tests" / "conftest.py"


def _foreign_item_hooks(config: pytest.Config) -> list[str]:
    """Plugins that could mark items before ``-k`` / ``-m`` is applied (a vendor's conftest adding
    ``known_issue`` to some cases): with any, the corpus is collected whole and pytest alone selects."""
    return _hooked_by(config, ITEM_HOOKS, lambda module, where: module.split(".")[0] in OWN_ITEM_HOOKS
                      or bool(where and Path(where).resolve() == PROJECT_CONFTEST))


class CorpusFile(pytest.File):
    def collect(self):
        marks: dict[str, pytest.MarkDecorator] = {}
        keep = [] if _foreign_item_hooks(self.config) else \
            [f for f in (self._keyword_filter(), self._mark_filter()) if f is not None]
        plugin = self.config.stash[PLUGIN]
        chosen = plugin.chosen
        for ref in plugin.index.refs:
            if chosen is not None and not chosen(ref.id):
                continue
            if keep and not all(f(ref) for f in keep):
                plugin.prefiltered += 1  # counted as deselected, as pytest would have
                continue
            item = CaseItem.from_parent(self, name=ref.id, ref=ref)
            for m in case_markers(ref):
                deco = marks.get(m) or marks.setdefault(m, getattr(pytest.mark, m))
                item.keywords[m] = deco
                item.own_markers.append(deco.mark)
            yield item


    def _expression(self, text: str | None, matcher: str):
        """pytest's own ``-k`` / ``-m`` expression compiled, with its matcher class (``KeywordMatcher``,
        ``MarkMatcher``); None where there is none or pytest's internals are not the expected ones
        (pytest then selects alone, and reports a bad expression itself)."""
        if not (text or "").strip():
            return None
        try:
            import _pytest.mark as pytest_mark
            from _pytest.mark.expression import Expression

            return Expression.compile(text.strip()), getattr(pytest_mark, matcher)
        except Exception:  # noqa: BLE001
            return None

    def _keyword_filter(self):
        """``-k`` decided before items exist: creating every corpus item to keep ten is what made a ``-k``
        run slow. The names matched are exactly those pytest's own ``-k`` matches for a case item
        (its chain's names, the case id, its markers), so pytest's own deselection, which still runs,
        agrees (``collect`` takes no pre-filter where another plugin could mark items first); None
        (no pre-filter) when there is no ``-k``."""
        compiled = self._expression(self.config.option.keyword, "KeywordMatcher")
        if compiled is None:
            return None
        expr, matcher = compiled
        chain = {n.name for n in self.listchain()
                 if not isinstance(n, pytest.Session)
                 and not (isinstance(n, pytest.Directory) and isinstance(n.parent, pytest.Session))}
        chain |= set(self.listextrakeywords())
        return lambda ref: expr.evaluate(matcher({*chain, ref.id, *case_markers(ref)}))

    def _mark_filter(self):
        """``-m`` decided before items exist, for the same reason as ``-k``: a case item's markers are
        its ``case_markers`` and its parents' own (``collect`` takes no pre-filter where another
        plugin could add one first), so pytest's own ``-m``, which still runs, agrees; None when
        there is no ``-m``."""
        compiled = self._expression(self.config.option.markexpr, "MarkMatcher")
        if compiled is None:
            return None
        expr, matcher = compiled
        inherited = [m for n in self.listchain() for m in n.own_markers]
        marks: dict[str, Any] = {}

        def mark(name: str):
            return marks.get(name) or marks.setdefault(name, getattr(pytest.mark, name).mark)

        return lambda ref: expr.evaluate(matcher.from_markers([*inherited, *map(mark, case_markers(ref))]))

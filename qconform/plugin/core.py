"""The plugin object: ``QconformPlugin``, the session's state and hooks, registered by
``pytest_configure`` only with ``--runner`` and kept under the one stash key (``PLUGIN``).
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from qconform import corpus as corpus_mod
from qconform.execution import Options, local_executor
from qconform.plugin.collection import CorpusFile, phase_hooks
from qconform.plugin.items import WORKERINPUT_RECORDS, CaseItem, Records, marked_to_skip, skip_marked
from qconform.plugin.options import (PLUGIN, SCOPED, XDIST_TAKEN, case_markers, chosen_cases, default_golden,
                                     is_xdist_worker, no_cache_dir, read_identity, runner_options, scoped_cases,
                                     take_over_xdist)
from qconform.plugin.terminal import fast_teardown_lookup, rerun_hint, summary
from qconform.runner import Runner, RunnerError, identity_digest, resolve


class Hookspecs:
    """The hooks qconform adds to pytest's."""

    @pytest.hookspec
    def pytest_qconform_summary(self, terminalreporter, config: pytest.Config) -> None:
        """Write a feature's section of the terminal summary, after qconform's own (on the process
        that reports: the xdist controller, or a plain run)."""


def pytest_addhooks(pluginmanager) -> None:
    pluginmanager.add_hookspecs(Hookspecs)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which starts its workers when configured
def pytest_configure(config: pytest.Config) -> None:
    name = config.getoption("runner", None)
    if not name:
        return
    try:
        runner = resolve(name, runner_options(config))
    except RunnerError as exc:
        raise pytest.UsageError(str(exc)) from None
    from qconform.plugin.model import model_corpus  # a feature module: pytest imports it first (pytest_plugins)

    model = model_corpus(config)  # --model: the user's model's groups are the corpus
    golden = model or Path(config.getoption("golden") or default_golden())
    try:
        index = corpus_mod.index(golden)
    except corpus_mod.CorpusError as exc:
        raise pytest.UsageError(str(exc)) from None
    if config.getoption("batch") < 1:
        raise pytest.UsageError(f"--batch={config.getoption('batch')}: expected a number of cases >= 1")
    ident = read_identity(name, runner, runner_options(config))
    chosen, scope = chosen_cases(config), None
    if chosen is None and model is None:  # a model's groups are its own scope
        chosen, scope = scoped_cases(config, ident, index)
    plugin = QconformPlugin(config, runner, index, ident, chosen)
    plugin.scope = scope
    config.stash[PLUGIN] = plugin
    config.pluginmanager.register(plugin, "qconform-session")
    hypothesis_plugin = config.pluginmanager.get_plugin("hypothesispytest")
    if hypothesis_plugin is not None and not config.getoption("explore", False):
        # A corpus run has no hypothesis test; its plugin would import hypothesis (~1 s) to summarise none.
        config.pluginmanager.unregister(hypothesis_plugin)
    for m in sorted({m for r in index.refs for m in case_markers(r)}):
        config.addinivalue_line("markers", f"{m}: qconform case marker")
    # With no explicit paths (or only the configured testpaths), collect the corpus itself.
    if not config.args or getattr(config, "args_source", None) in (
            pytest.Config.ArgsSource.INVOCATION_DIR, pytest.Config.ArgsSource.TESTPATHS) \
            or Path(config.args[0]).resolve() == config.rootpath:
        config.args[:] = [str(golden)]
        plugin.xdist_taken = take_over_xdist(config)


def plugin_of(config: pytest.Config) -> "QconformPlugin | None":
    """The session's plugin object, or None without ``--runner``."""
    return config.stash.get(PLUGIN, None)


class QconformPlugin:
    """The session's state and hooks, registered by ``pytest_configure`` when ``--runner`` is given."""

    def __init__(self, config: pytest.Config, runner: Runner, index: corpus_mod.Index, identity: dict,
                 chosen) -> None:
        self.config, self.runner, self.index, self.identity = config, runner, index, identity
        self.chosen = chosen  # --case / --from-report / the declared scope: case id -> selected? (None: all)
        self.scope: dict | None = None  # a bundled runtime's declared scope, where it narrows this run
        self.records = Records(config)
        self.plan: list[str] | None = None  # this session's case ids, in run order
        self.sent = False  # the plan was handed to the engine
        self.fast = False  # case items use the fast protocol
        self.stopped: str | None = None  # why the run stopped early (the device gone), if it did
        #: every failure must be diagnosed (a baseline that accepts deviations by behaviour)
        self.diagnose_all = False
        self._engine: Any = None
        self.xdist_taken = 0  # -n N run on N runner workers instead (``take_over_xdist``)
        #: corpus cases -k / -m set aside while collecting (no item made): pytest's deselection, early
        self.prefiltered = 0

    @property
    def runner_workers(self) -> int:
        """The isolated runner workers this process's engine ran cases on (0: none started here)."""
        return getattr(self._engine, "workers", 0)  # an in-process engine has none

    @property
    def engine(self):
        """The engine, started on first use (a collect-only run starts no worker)."""
        if self._engine is None:
            config = self.config
            opts = Options(str(self.index.root), config.getoption("runner"), runner_options(config),
                           bool(config.getoption("strict_nan")), config.getoption("profile"),
                           config.getoption("diagnose") == "on",
                           None if self.diagnose_all else config.getoption("diagnose_per_group") or None,
                           runner_identity=identity_digest(self.identity))
            workers = config.getoption("runner_workers") or (1 if is_xdist_worker(config) else min(2, os.cpu_count() or 1))
            self._engine = local_executor(opts, self.index, isolate=config.getoption("isolate") == "on",
                                          workers=workers, timeout=config.getoption("case_timeout"),
                                          memory_mb=config.getoption("worker_memory_mb"),
                                          batch=config.getoption("batch"), runner=self.runner,
                                          diagnose_here=False)  # pytest's items keep this process busiest
        return self._engine

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        config = session.config
        no_cache_dir(config)
        fast_teardown_lookup(config)  # the terminal reporter exists by now
        choice = config.getoption("case_protocol")
        self.fast = choice == "fast" or (choice == "auto" and not phase_hooks(config))

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        from qconform import platform as machine

        c = self.index
        info = {k: v for k, v in self.identity.items() if k != "platform"}
        return [f"qconform: runner {json.dumps(info, sort_keys=True, default=str)}",
                f"qconform: platform {machine.label()} ({machine.cpu_model()})",
                f"qconform: corpus {c.root} digest {c.digest[:16]} ({len(c)} cases), "
                f"profile {config.getoption('profile')}",
                *([XDIST_TAKEN.format(n=self.xdist_taken, w=config.getoption("runner_workers"))]
                  if self.xdist_taken else [])]

    def scoped_line(self) -> str:
        from qconform.runner import runtime_name

        return SCOPED.format(name=runtime_name(self.identity), why=self.scope["why"],
                             n=len(self.index) - self.scope["left_out"], left=self.scope["left_out"])

    def pytest_ignore_collect(self, collection_path: Path, config: pytest.Config) -> bool | None:
        golden = self.index.root.resolve()
        p = collection_path.resolve()
        if p == golden or golden in p.parents or p in golden.parents:
            return None
        return True  # with --runner only the corpus is collected; the project's tests stay separate

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector):
        if file_path.name == corpus_mod.MANIFEST and file_path.parent.resolve() == self.index.root.resolve():
            return CorpusFile.from_parent(parent, path=file_path)
        return None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The plan: this session's case ids, in run order, once every plugin has selected and ordered
        them (-k/-m, and the cache plugin's --lf/--ff, which deselect in a wrapper after every
        ``pytest_collection_modifyitems``)."""
        self.plan = [item.case_id for item in session.items if isinstance(item, CaseItem) and not skip_marked(item)]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        """A case item's protocol: the same reports in the same order as pytest's own (logstart, setup,
        call, teardown, logfinish), without what a case needs none of -- fixtures, output capture around
        each phase (the runner runs in its own process), exception and traceback machinery for a verdict
        already known. ``--case-protocol=pytest`` keeps pytest's own protocol (setup hooks, capture); so
        does ``auto`` when a plugin outside pytest hooks a phase."""
        if not isinstance(item, CaseItem) or not self.fast or marked_to_skip(item):
            return None
        item.run_protocol()
        return True

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call):
        if not isinstance(item, CaseItem) or not item._fast:
            return None
        return item.report(call)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        """xdist controller: each worker writes its records under one directory of this run."""
        if self.records.dir is None:
            self.records.dir = Path(tempfile.mkdtemp(prefix="qconform-records-"))
        node.workerinput[WORKERINPUT_RECORDS] = str(self.records.dir)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.records.close()
        if not is_xdist_worker(self.config):
            self.records.merge_workers()

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._engine is not None:
            self._engine.close()
        if self.records.dir is not None:
            import shutil

            shutil.rmtree(self.records.dir, ignore_errors=True)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter, exitstatus, config: pytest.Config):
        result = yield
        if not is_xdist_worker(config):
            if self.records.by_id:
                summary(terminalreporter, self.records.by_id.values())
                rerun_hint(terminalreporter, config, self.records.by_id.values())
            # features, last; also without a record: a gate that fails a run of no case says why
            config.hook.pytest_qconform_summary(terminalreporter=terminalreporter, config=config)
        return result


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config):
    """Without ``--runner``: say why no corpus case was collected."""
    result = yield
    if PLUGIN not in config.stash and not terminalreporter._session.testscollected and not is_xdist_worker(config):
        from qconform.runner import BUNDLED

        terminalreporter.write_line(f"qconform: no --runner given, so no corpus case was collected; e.g. pytest "
                                    f"--runner=onnxruntime (bundled: {', '.join(sorted(BUNDLED))})")
    return result

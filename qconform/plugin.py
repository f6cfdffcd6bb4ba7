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
"""
from __future__ import annotations

import functools
import json
import os
import re
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from qconform import corpus as corpus_mod
from qconform.execution import CaseResult, Options, local_executor
from qconform.record import CaseRecord
from qconform.runner import Runner, RunnerError, identity_digest, parse_options, resolve
from qconform.verdicts import DEVIATING, ERROR, FAIL, HEADLINE, INFO, PASS, SHOWN_AS_SKIPPED, UNSUPPORTED

#: The one stash key: the session's ``QconformPlugin`` (present only with ``--runner``).
PLUGIN = pytest.StashKey["QconformPlugin"]()
WORKERINPUT_RECORDS = "qconform_records"

# Feature modules, each with its own options and hooks (reports, exploration).
pytest_plugins: list[str] = ["qconform.apps.pytest_report", "qconform.apps.explore"]


def default_golden() -> Path:
    """The corpus shipped with qconform (package data: ``qconform/golden/``)."""
    return corpus_mod.DEFAULT_ROOT


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("qconform", "qconform conformance suite")
    g.addoption("--runner", default=None, metavar="NAME",
                help="runner under test: onnxruntime, onnx-reference, cpu-ref, an entry point name in "
                     "'qconform.runners', package.module:Attr or path/to/file.py:Attr")
    g.addoption("--runner-opt", action="append", default=[], metavar="KEY=VALUE",
                help="option passed to the runner's constructor (repeatable)")
    g.addoption("--golden", default=None, metavar="DIR", help="golden corpus directory (default: the bundled one)")
    g.addoption("--strict-nan", action="store_true", help="NaN outputs must match the expected NaN bits exactly")
    g.addoption("--profile", choices=("default", "strict"), default="default",
                help="default: any permitted reading passes; strict: only the latest spec text's reading")
    g.addoption("--isolate", choices=("on", "off"), default="on",
                help="run the runner in a worker process so a crash or hang costs one case, not the run "
                     "(default: on)")
    g.addoption("--case-timeout", type=float, default=120.0, metavar="S",
                help="with --isolate=on: a case with no result after S seconds is a timeout (default 120)")
    g.addoption("--batch", type=int, default=64, metavar="N",
                help="with --isolate=on: cases handed to the runner's worker per round trip (default 64)")
    g.addoption("--runner-workers", type=int, default=0, metavar="N",
                help="with --isolate=on: runner worker processes (default: 2 on a machine with 2 or more cores, "
                     "1 under pytest-xdist, where each xdist worker has its own)")
    g.addoption("--case", action="append", default=[], metavar="ID",
                help="run only this case (repeatable): a case id, an fnmatch glob over ids, or the form "
                     "pytest prints (anything up to the last '::' is ignored)")
    g.addoption("--from-report", default=None, metavar="REPORT",
                help="run only the cases of an earlier report.json (or its directory) with a --verdict")
    g.addoption("--verdict", default="fail,error,crashed,timeout", metavar="V[,V]",
                help="with --from-report: the verdicts to rerun (default fail,error,crashed,timeout)")
    g.addoption("--runner-traceback", action="store_true",
                help="show the runner's full traceback under each error (also shown at -v; always in "
                     "report.json)")
    g.addoption("--case-protocol", choices=("auto", "fast", "pytest"), default="auto",
                help="fast: each case item's reports straight from its result; pytest: pytest's own runtest "
                     "protocol per case (setup/teardown hooks, output capture), slower; auto (default): fast "
                     "unless a plugin or conftest outside pytest hooks a test phase")
    g.addoption("--diagnose", choices=("on", "off"), default="on",
                help="name the known deviation (qconform/docs/diagnosis.md) that reproduces each failure "
                     "(default: on)")
    g.addoption("--diagnose-per-group", type=int, default=16, metavar="N",
                help="diagnose at most N failing cases per op-version/type group and process (default 16; "
                     "0: no limit); the report ranks models over the diagnosed ones")
    g.addoption("--worker-memory-mb", type=int, default=0, metavar="MB",
                help="with --isolate=on: address-space limit of the runner's worker (default: none)")


def _options(config: pytest.Config) -> dict[str, str]:
    try:
        return parse_options(config.getoption("runner_opt"))
    except RunnerError as exc:
        raise pytest.UsageError(str(exc)) from None


@functools.cache
def marker_name(prefix: str, value: object) -> str:
    """``op_QuantizeLinear``, ``types_float32_int8``: the few distinct names of a corpus, made once
    (every collected case asks for four; a ``-k`` run asks for every case of the corpus)."""
    return f"{prefix}_" + re.sub(r"\W", "_", str(value))


def case_markers(case) -> list[str]:
    """The markers of a case (a Case or a CaseRef): -m "op_QuantizeLinear and opset_21" ..."""
    return [marker_name("op", case.op), marker_name("opset", case.opset),
            marker_name("family", case.family), marker_name("types", case.types)]


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


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
        runner = resolve(name, _options(config))
    except RunnerError as exc:
        raise pytest.UsageError(str(exc)) from None
    golden = Path(config.getoption("golden") or default_golden())
    try:
        index = corpus_mod.index(golden)
    except corpus_mod.CorpusError as exc:
        raise pytest.UsageError(str(exc)) from None
    if config.getoption("batch") < 1:
        raise pytest.UsageError(f"--batch={config.getoption('batch')}: expected a number of cases >= 1")
    ident = _identity(name, runner, _options(config))
    chosen, scope = _chosen_cases(config), None
    if chosen is None:
        chosen, scope = _declared_scope(config, ident, index)
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
        plugin.xdist_taken = _take_over_xdist(config)


#: Said in the header when ``-n N`` over the corpus runs on qconform's own workers instead.
XDIST_TAKEN = ("qconform: -n {n}: the corpus's cases run on {w} runner workers in this pytest process, not on "
               "{n} pytest-xdist workers (xdist's per-case reports cost more than they parallelise; "
               "give test paths to keep xdist)")


def _take_over_xdist(config: pytest.Config) -> int:
    """``pytest --runner=X -n N`` with no test paths (the session is the corpus alone) and isolated
    runner workers: xdist is switched off and the N processes become the engine's runner workers
    (unless ``--runner-workers`` says how many). Measured: every case costs pytest's controller the
    same per-item work with or without xdist, and xdist adds a serialised report per phase, so -n 2
    was 0.7x of one process (benchmarks/bench_xdist.py); the runner's own work is what parallelises.
    Returns N, or 0 where xdist stays (explicit paths, remote or non-popen workers, no isolation)."""
    n = getattr(config.option, "numprocesses", None)
    tx = getattr(config.option, "tx", None) or []
    if _is_xdist_worker(config) or not n or not tx or any(t != "popen" for t in tx) \
            or config.getoption("isolate") != "on" or getattr(config.option, "dist", "no") not in ("load", "no"):
        return 0
    config.option.numprocesses, config.option.tx, config.option.dist = 0, [], "no"
    if not config.getoption("runner_workers"):
        config.option.runner_workers = len(tx)
    return len(tx)


def plugin_of(config: pytest.Config) -> "QconformPlugin | None":
    """The session's plugin object, or None without ``--runner``."""
    return config.stash.get(PLUGIN, None)


def _chosen_cases(config: pytest.Config):
    """The ``--case``/``--from-report`` selection as a predicate over case ids (None: no selection)."""
    from fnmatch import fnmatchcase

    patterns = [corpus_mod.case_pattern(c) for c in config.getoption("case") if c.strip()]
    exact: set[str] = {p for p in patterns if not any(ch in p for ch in "*?[")}
    globs = [p for p in patterns if p not in exact]
    source = config.getoption("from_report")
    if source:
        from qconform.apps.baseline import BaselineError, read_report

        try:
            cases = read_report(source)["cases"]
        except BaselineError as exc:
            raise pytest.UsageError(f"--from-report: {exc}") from None
        wanted = {v.strip() for v in config.getoption("verdict").split(",") if v.strip()}
        exact |= {c["id"] for c in cases if c.get("verdict") in wanted}
    elif not patterns:
        return None
    return lambda cid: cid in exact or any(fnmatchcase(cid, g) for g in globs)


def _declared_scope(config: pytest.Config, ident: dict, index: corpus_mod.Index):
    """(predicate, scope) of a bundled runtime certified on a declared part of the corpus, when the
    run makes no selection of its own (no -k, -m or node ids; --deselect takes cases out of it; not
    with --explore, whose cases are drafted): the cases ``qconform certify`` runs, with
    ``scope["left_out"]`` of the corpus's not collected. (None, None) otherwise."""
    from fnmatch import fnmatchcase

    from qconform.runner import declared_scope

    if config.option.keyword or config.option.markexpr or config.getoption("explore", False) \
            or any("::" in str(a) for a in config.args):
        return None, None
    scope = declared_scope(ident)
    if scope is None:
        return None, None
    wanted = scope["cases"]

    def chosen(cid: str) -> bool:
        return any(fnmatchcase(cid, g) for g in wanted)

    scope["left_out"] = sum(1 for r in index.refs if not chosen(r.id))
    return chosen, scope


#: Said once where a bundled runtime's declared scope narrows a run that selected nothing itself.
SCOPED = ("qconform: {name} is certified on its declared scope: {why} ({n:,} cases; {left:,} left out; "
          "-k, -m or --case select others)")


def _identity(name: str, runner: Runner, options: dict[str, str]) -> dict:
    """The runner's ``describe()``, once, before any case runs: a runner whose identity cannot be
    read would produce a report nobody can attribute, so the run stops here with one line."""
    from qconform.runner import identity as runner_identity

    try:
        return runner_identity(runner, name, options)
    except RunnerError as exc:
        raise pytest.UsageError(str(exc)) from None


def identity(config: pytest.Config) -> dict:
    return config.stash[PLUGIN].identity


#: pytest options that read or write pytest's cache directory: asked for, it stays.
CACHE_OPTIONS = ("lf", "failedfirst", "newfirst", "stepwise", "stepwise_skip", "cacheclear", "cacheshow")


def _no_cache_dir(config: pytest.Config) -> None:
    """A certification run in a vendor's directory leaves no ``.pytest_cache`` behind unless a cache
    option asks for it: the plugins that would write it (last-failed, new-first) are taken out."""
    if any(getattr(config.option, o, None) for o in CACHE_OPTIONS):
        return
    for name in ("lfplugin", "nfplugin"):
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(plugin)


#: Said where --lf / --ff find no failure recorded: a plain ``pytest --runner`` run records none
#: (``_no_cache_dir``), a run that passed has none to record.
NO_LAST_FAILED = ("qconform: --lf/--ff found no failures recorded, so every selected case runs. A pytest --runner "
                  "run records its failures only when it has a cache option itself (--lf or --ff); rerun a "
                  "report's failures with --from-report DIR/report.json")


def _no_last_failed(config: pytest.Config) -> bool:
    """--lf or --ff was asked for, with no selection of cases of its own, pytest's cache holds no
    failure to go by, and pytest then runs every selected case (``--lfnf=all``, its default)."""
    if not (getattr(config.option, "lf", False) or getattr(config.option, "failedfirst", False)):
        return False
    if config.getoption("from_report", None) or config.getoption("case", None) \
            or getattr(config.option, "last_failed_no_failures", "all") != "all":
        return False
    plugin = config.pluginmanager.get_plugin("lfplugin")
    return plugin is not None and not getattr(plugin, "lastfailed", None)


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


def _phase_hooks(config: pytest.Config) -> list[str]:
    """Plugins outside pytest itself (and hypothesis, which only wraps its own tests) that hook a phase."""
    return _hooked_by(config, PHASE_HOOKS, lambda module, _: module.startswith(("_pytest", "_hypothesis_pytestplugin")))


#: Hooks through which a plugin may give collected items markers or keywords before pytest's own
#: ``-k`` / ``-m`` deselection sees them.
ITEM_HOOKS = ("pytest_itemcollected", "pytest_collection_modifyitems")
#: Plugins known to add none to corpus items: pytest's own, xdist's, qconform's, hypothesis's, and
#: this project's tests/conftest.py (only pytest.Function items get its markers).
OWN_ITEM_HOOKS = ("_pytest", "xdist", "qconform", "_hypothesis_pytestplugin")
PROJECT_CONFTEST = Path(__file__).resolve().parent.parent / "tests" / "conftest.py"


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


class CaseFailure(Exception):
    """A case whose outputs differ from every permitted reading (or are malformed)."""


class CaseItem(pytest.Item):
    def __init__(self, *, ref: corpus_mod.CaseRef, **kw: Any) -> None:
        super().__init__(**kw)
        self.ref = ref
        self.case_id = ref.id
        self._result: CaseResult | None = None
        self._fast = False  # True while run_protocol makes this item's reports

    def run_protocol(self) -> None:
        ihook = self.ihook
        self._fast = True
        self._kw = dict.fromkeys(self.keywords, 1)
        ihook.pytest_runtest_logstart(nodeid=self.nodeid, location=self.location)
        for when in ("setup", "call", "teardown"):
            call = pytest.CallInfo.from_call(self._compute if when == "call" else _nothing, when, reraise=BaseException)
            ihook.pytest_runtest_logreport(report=ihook.pytest_runtest_makereport(item=self, call=call))
        ihook.pytest_runtest_logfinish(nodeid=self.nodeid, location=self.location)
        self._fast = False

    def _compute(self) -> CaseResult:
        plugin = self.config.stash[PLUGIN]
        self._submit()
        res = self._result = plugin.engine.result(self.case_id)
        res.record = res.record.over(CaseRecord.stub(self.ref))
        plugin.records.add(res.record)
        if res.stop:  # the device is gone: the rest would not run either; stop as Ctrl-C would
            self.session.shouldstop = f"qconform: {res.record.problem}"
            plugin.stopped = str(res.record.problem or "the device is gone")
        return res

    def report(self, call) -> pytest.TestReport:
        """A phase's report, made from the case's result (no exception raised or inspected)."""
        res = self._result
        if call.when != "call" or res.verdict == PASS:
            outcome, longrepr = "passed", None
        elif res.verdict in SHOWN_AS_SKIPPED:
            outcome = "skipped"
            longrepr = (self.path.name, 1, f"Skipped: {_skip_reason(res)}")
        else:
            outcome, longrepr = "failed", _failure_text(self.config, res)
        return pytest.TestReport(self.nodeid, self.location, self._kw, outcome, longrepr, call.when, (),
                                 call.duration, call.start, call.stop, user_properties=self.user_properties)

    @property
    def case(self):
        """The whole case (inputs and readings), loaded on demand."""
        return self.config.stash[PLUGIN].index.case(self.case_id)

    def _submit(self) -> None:
        """Hand cases to the engine ahead of pytest, once: in one process the whole plan at the first
        case (the runner's worker works through it while pytest reports); under xdist, whenever a case
        was not handed over yet, every case xdist has queued on this pytest worker by then."""
        config, plugin = self.config, self.config.stash[PLUGIN]
        engine = plugin.engine
        if not getattr(engine, "runs_ahead", True):
            return
        if not plugin.sent:
            plugin.sent = True
            if not _is_xdist_worker(config):
                engine.submit(plugin.plan or [self.case_id])
        if _is_xdist_worker(config) and self.case_id not in engine.submitted:
            engine.submit([self.case_id, *_xdist_queued_cases(config)])

    def runtest(self) -> None:
        """pytest's own protocol (``--case-protocol=pytest``): the verdict as an outcome."""
        res = self._compute()  # the report comes from the exception, as for any pytest item; the baseline
        if res.verdict == PASS:  # gate reads the verdict and the diagnosis from ``_result``
            return
        if res.verdict in SHOWN_AS_SKIPPED:
            pytest.skip(_skip_reason(res))
        raise CaseFailure(_failure_text(self.config, res))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CaseFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, 0, self.case_id  # pytest's skip report needs a line: the corpus's MANIFEST has none


def _marked_to_skip(item: pytest.Item) -> bool:
    """A case item a conftest marked ``skip``, ``skipif`` or ``xfail``: pytest's own protocol runs it,
    so its skipping plugin decides (the fast protocol calls no setup hook)."""
    return _skip_marked(item) or any(True for _ in item.iter_markers("xfail"))


def _skip_marked(item: pytest.Item) -> bool:
    """Marked ``skip`` or ``skipif``: never run ahead (if its condition lets it run, it is computed
    when pytest asks for it)."""
    return any(True for name in ("skip", "skipif") for _ in item.iter_markers(name))


def _nothing() -> None:
    """A case item's setup and teardown: there is nothing to set up or tear down."""


def _failure_text(config: pytest.Config, res: CaseResult) -> str:
    """A failure's text: the verdict line (and mismatches, diagnosis); with ``-v`` or
    ``--runner-traceback`` also the runner's own traceback when it raised (always in report.json)."""
    tb = res.record.traceback
    if tb and (config.getoption("verbose") > 0 or config.getoption("runner_traceback")):
        return f"{res.message}\n\nthe runner's traceback:\n{tb.rstrip()}"
    return res.message


@functools.lru_cache(maxsize=1024)  # thousands of skipped cases share a handful of reasons, some long
def _short(reason: str, limit: int = 48) -> str:
    """A skip reason for the terminal and JUnit XML, where thousands of cases repeat it: the full text
    is in the qconform summary and, once per distinct reason, in report.json."""
    reason = " ".join(reason.split())
    return reason if len(reason) <= limit else reason[: limit - 1] + "…"


# ----------------------------------------------------------------------------------------------
# Per-case records: kept where the case ran; xdist workers hand theirs over through a file
# ----------------------------------------------------------------------------------------------
class Records:
    """The per-case records of this process (and, on the xdist controller, of every worker)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.by_id: dict[str, CaseRecord] = {}
        self._file = None
        self.dir: Path | None = None
        if _is_xdist_worker(config):
            where = config.workerinput.get(WORKERINPUT_RECORDS)
            if where:
                path = Path(where) / f"{config.workerinput.get('workerid', os.getpid())}.jsonl"
                # line-buffered: a worker that crashes (xdist restarts it) keeps every record it made
                self._file = path.open("w", encoding="utf-8", buffering=1)

    def add(self, rec: CaseRecord) -> None:
        self.by_id[rec.id] = rec
        if self._file is not None:
            self._file.write(json.dumps(rec.to_dict(), separators=(",", ":")) + "\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def merge_workers(self) -> None:
        """Controller: read what every xdist worker recorded."""
        if self.dir is None:
            return
        for path in sorted(self.dir.glob("*.jsonl")):
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    rec = CaseRecord.from_dict(json.loads(line))
                except (json.JSONDecodeError, TypeError, KeyError, ValueError):
                    continue  # a line cut by a crashed worker
                self.by_id[rec.id] = rec


# ----------------------------------------------------------------------------------------------
# xdist: what is queued on this worker goes to its runner in one go
# ----------------------------------------------------------------------------------------------
def _xdist_queued_cases(config: pytest.Config) -> list[str]:
    """The case ids xdist has queued on this pytest worker, in order (best effort: xdist's own queue,
    as pytest-xdist 3.x keeps it; nothing when its shape is not the expected one)."""
    interactor = next((p for p in config.pluginmanager.get_plugins() if type(p).__name__ == "WorkerInteractor"), None)
    queue, session = getattr(interactor, "torun", None), getattr(interactor, "session", None)
    items = getattr(session, "items", None)
    if queue is None or not items or not hasattr(queue, "lock"):
        return []
    try:
        with queue.lock() as pending:
            indices = list(pending)
    except Exception:  # noqa: BLE001 - another xdist: one case at a time
        return []
    return [items[i].case_id for i in indices
            if isinstance(i, int) and 0 <= i < len(items) and isinstance(items[i], CaseItem)
            and not _skip_marked(items[i])]


# ----------------------------------------------------------------------------------------------
# Terminal: the qconform summary comes last, after pytest's short summary
# ----------------------------------------------------------------------------------------------
def _fast_teardown_lookup(config: pytest.Config) -> None:
    """pytest's FAILURES section looks for each failure's teardown output by scanning every report
    of the run: quadratic, ~34 ms per failure on the whole corpus. Index the scan once instead."""
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is None or not hasattr(tr, "_get_teardown_reports"):
        return
    cache: dict[str, list] = {}
    seen = [0]

    def teardown_reports(node_id):
        reports = tr.stats.get("", [])
        if len(reports) != seen[0]:
            cache.clear()
            for rep in reports:
                if getattr(rep, "when", None) == "teardown" and not hasattr(rep, "_pdbshown"):
                    cache.setdefault(rep.nodeid, []).append(rep)
            seen[0] = len(reports)
        return cache.get(node_id, [])

    tr._get_teardown_reports = teardown_reports


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
        self.xdist_taken = 0  # -n N run on N runner workers instead (``_take_over_xdist``)
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
            opts = Options(str(self.index.root), config.getoption("runner"), _options(config),
                           bool(config.getoption("strict_nan")), config.getoption("profile"),
                           config.getoption("diagnose") == "on",
                           None if self.diagnose_all else config.getoption("diagnose_per_group") or None,
                           runner_identity=identity_digest(self.identity))
            workers = config.getoption("runner_workers") or (1 if _is_xdist_worker(config) else min(2, os.cpu_count() or 1))
            self._engine = local_executor(opts, self.index, isolate=config.getoption("isolate") == "on",
                                          workers=workers, timeout=config.getoption("case_timeout"),
                                          memory_mb=config.getoption("worker_memory_mb"),
                                          batch=config.getoption("batch"), runner=self.runner,
                                          diagnose_here=False)  # pytest's items keep this process busiest
        return self._engine

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        config = session.config
        _no_cache_dir(config)
        _fast_teardown_lookup(config)  # the terminal reporter exists by now
        choice = config.getoption("case_protocol")
        self.fast = choice == "fast" or (choice == "auto" and not _phase_hooks(config))

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
        self.plan = [item.case_id for item in session.items if isinstance(item, CaseItem) and not _skip_marked(item)]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        """A case item's protocol: the same reports in the same order as pytest's own (logstart, setup,
        call, teardown, logfinish), without what a case needs none of -- fixtures, output capture around
        each phase (the runner runs in its own process), exception and traceback machinery for a verdict
        already known. ``--case-protocol=pytest`` keeps pytest's own protocol (setup hooks, capture); so
        does ``auto`` when a plugin outside pytest hooks a phase."""
        if not isinstance(item, CaseItem) or not self.fast or _marked_to_skip(item):
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
        if not _is_xdist_worker(self.config):
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
        if not _is_xdist_worker(config):
            if self.records.by_id:
                _summary(terminalreporter, self.records.by_id.values())
                _rerun_hint(terminalreporter, config, self.records.by_id.values())
            # features, last; also without a record: a gate that fails a run of no case says why
            config.hook.pytest_qconform_summary(terminalreporter=terminalreporter, config=config)
        return result


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config):
    """Without ``--runner``: say why no corpus case was collected."""
    result = yield
    if PLUGIN not in config.stash and not terminalreporter._session.testscollected and not _is_xdist_worker(config):
        from qconform.runner import BUNDLED

        terminalreporter.write_line(f"qconform: no --runner given, so no corpus case was collected; e.g. pytest "
                                    f"--runner=onnxruntime (bundled: {', '.join(sorted(BUNDLED))})")
    return result


def _rerun_hint(tr, config: pytest.Config, records) -> None:
    """How to run a deviating case again, in a form that works from any directory and install."""
    bad = sorted(r.id for r in records if r.verdict in DEVIATING)
    if not bad:
        return
    import shlex

    cmd = ["pytest", f"--runner={config.getoption('runner')}",
           *[f"--runner-opt={o}" for o in config.getoption("runner_opt") or []]]
    tr.write_line(f"{'rerun one case:':18}{shlex.join([*cmd, '--case', bad[0]])}")
    report_dir = config.getoption("report", None)
    if report_dir:
        label = f"rerun all {len(bad)}:"
        tr.write_line(f"{label:18}{shlex.join([*cmd, '--from-report', str(Path(report_dir) / 'report.json')])}")


def _skip_reason(res) -> str:
    rec = res.record
    if res.verdict == INFO:  # the runner's part first, at a glance
        return _short(f"information: the runner {rec.runner_did}. ({rec.information})", 160)
    return f"{res.verdict}: {_short(rec.problem)}"


def _summary(tr, records) -> None:
    per_op: dict[str, Counter] = defaultdict(Counter)
    unsupported: Counter = Counter()
    for r in records:
        key = f"{r.domain + '.' if r.domain else ''}{r.op}-{r.opset}"
        per_op[key][r.verdict] += 1
        if r.verdict == UNSUPPORTED:
            unsupported[(key, _short(r.problem, 120))] += 1
    tr.section("qconform summary")
    verdicts = HEADLINE
    tr.write_line(f"{'op-version':32} {'cases':>6} " + " ".join(f"{v:>11}" for v in verdicts))
    for key in sorted(per_op, key=lambda k: (k.rsplit('-', 1)[0], int(k.rsplit('-', 1)[1]))):
        cnt = per_op[key]
        other = sum(n for v, n in cnt.items() if v not in verdicts)  # crashed, timeout: counted as errors
        cells = [cnt[PASS], cnt[FAIL], cnt[ERROR] + other, cnt[UNSUPPORTED], cnt[INFO]]
        tr.write_line(f"{key:32} {sum(cnt.values()):>6} " + " ".join(f"{v:>11}" for v in cells))
    if unsupported:
        tr.write_line("not supported by the runner (cases, op-version, reason):")
        for (key, why), n in sorted(unsupported.items()):
            tr.write_line(f"  {n:>5}  {key}: {why}")

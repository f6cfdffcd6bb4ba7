"""The pytest plugin (``pytest11`` entry point): options, collection of golden cases, execution.

``pytest --runner=NAME`` collects one item per golden case; without ``--runner`` the plugin collects
nothing, so the project's own tests run alone.

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

import json
import os
import re
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from qconform import corpus as corpus_mod
from qconform.execution import CaseResult, Options, local_executor
from qconform.runner import Runner, RunnerError, parse_options, resolve
from qconform.record import CaseRecord
from qconform.verdicts import DEVIATING, ERROR, FAIL, HEADLINE, INFO, PASS, SHOWN_AS_SKIPPED, UNSUPPORTED

RUNNER_KEY = pytest.StashKey[Runner]()
CORPUS_KEY = pytest.StashKey[corpus_mod.Index]()
ENGINE_KEY = pytest.StashKey[Any]()
RECORDS_KEY = pytest.StashKey["Records"]()
PLAN_KEY = pytest.StashKey[list]()  # this session's case ids, in run order
SENT_KEY = pytest.StashKey[bool]()  # the plan was handed to the engine
FAST_KEY = pytest.StashKey[bool]()  # case items use the fast protocol
CHOSEN_KEY = pytest.StashKey[Any]()  # --case / --from-report: case id -> selected?
IDENTITY_KEY = pytest.StashKey[dict]()  # the runner's describe(), called once at the start
STOPPED_KEY = pytest.StashKey[str]()  # why the run stopped early (the device gone), if it did
#: Feature modules' terminal sections (callables of terminalreporter, config), printed after the
#: plugin's own summary: they register here, so this module never imports them.
SUMMARY_KEY = pytest.StashKey[list]()
#: Set where every failure must be diagnosed (a baseline that accepts deviations by behaviour).
DIAGNOSE_ALL_KEY = pytest.StashKey[bool]()
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


def marker_name(prefix: str, value: object) -> str:
    return f"{prefix}_" + re.sub(r"\W", "_", str(value))


def case_markers(case) -> list[str]:
    """The markers of a case (a Case or a CaseRef): -m "op_QuantizeLinear and opset_21" ..."""
    return [marker_name("op", case.op), marker_name("opset", case.opset),
            marker_name("family", case.family), marker_name("types", case.types)]


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


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
    chosen = _chosen_cases(config)
    if chosen is not None:
        config.stash[CHOSEN_KEY] = chosen
    config.stash[RUNNER_KEY] = runner
    config.stash[IDENTITY_KEY] = _identity(name, runner, _options(config))
    config.stash[CORPUS_KEY] = index
    hypothesis_plugin = config.pluginmanager.get_plugin("hypothesispytest")
    if hypothesis_plugin is not None and not config.getoption("explore", False):
        # A corpus run has no hypothesis test; its plugin would import hypothesis (~1 s) to summarise none.
        config.pluginmanager.unregister(hypothesis_plugin)
    config.stash[RECORDS_KEY] = Records(config)
    for m in sorted({m for r in index.refs for m in case_markers(r)}):
        config.addinivalue_line("markers", f"{m}: qconform case marker")
    # With no explicit paths (or only the configured testpaths), collect the corpus itself.
    if not config.args or getattr(config, "args_source", None) in (
            pytest.Config.ArgsSource.INVOCATION_DIR, pytest.Config.ArgsSource.TESTPATHS) \
            or Path(config.args[0]).resolve() == config.rootpath:
        config.args[:] = [str(golden)]


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


def _identity(name: str, runner: Runner, options: dict[str, str]) -> dict:
    """The runner's ``describe()``, once, before any case runs: a runner whose identity cannot be
    read would produce a report nobody can attribute, so the run stops here with one line."""
    from qconform.runner import identity as runner_identity

    try:
        return runner_identity(runner, name, options)
    except RunnerError as exc:
        raise pytest.UsageError(str(exc)) from None


def identity(config: pytest.Config) -> dict:
    return config.stash[IDENTITY_KEY]


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


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if RUNNER_KEY in config.stash:
        _no_cache_dir(config)
        _fast_teardown_lookup(config)  # the terminal reporter exists by now
        choice = config.getoption("case_protocol")
        config.stash[FAST_KEY] = choice == "fast" or (choice == "auto" and not _phase_hooks(config))


#: Hooks of pytest's own test phases. The fast protocol calls none of them, so a plugin that
#: implements one (a conftest that fails a setup, a timeout plugin) gets pytest's own protocol.
PHASE_HOOKS = ("pytest_runtest_setup", "pytest_runtest_call", "pytest_runtest_teardown")


def _phase_hooks(config: pytest.Config) -> list[str]:
    """Plugins outside pytest itself (and hypothesis, which only wraps its own tests) that hook a phase."""
    found = []
    for name in PHASE_HOOKS:
        for impl in getattr(config.pluginmanager.hook, name).get_hookimpls():
            module = getattr(impl.plugin, "__name__", None) or type(impl.plugin).__module__
            if not module.startswith(("_pytest", "_hypothesis_pytestplugin")):
                found.append(f"{impl.plugin_name}.{name}")
    return found


def _engine(config: pytest.Config):
    """The engine, started on first use (a collect-only run starts no worker)."""
    if ENGINE_KEY not in config.stash:
        opts = Options(str(config.stash[CORPUS_KEY].root), config.getoption("runner"), _options(config),
                       bool(config.getoption("strict_nan")), config.getoption("profile"),
                       config.getoption("diagnose") == "on",
                       None if config.stash.get(DIAGNOSE_ALL_KEY, False) else config.getoption("diagnose_per_group") or None)
        workers = config.getoption("runner_workers") or (1 if _is_xdist_worker(config) else min(2, os.cpu_count() or 1))
        config.stash[ENGINE_KEY] = local_executor(opts, config.stash[CORPUS_KEY], isolate=config.getoption("isolate") == "on",
                                                  workers=workers, timeout=config.getoption("case_timeout"),
                                                  memory_mb=config.getoption("worker_memory_mb"),
                                                  batch=config.getoption("batch"), runner=config.stash[RUNNER_KEY])
    return config.stash[ENGINE_KEY]


def pytest_report_header(config: pytest.Config) -> list[str]:
    if RUNNER_KEY not in config.stash:
        return []
    from qconform import platform as machine

    c = config.stash[CORPUS_KEY]
    info = {k: v for k, v in identity(config).items() if k != "platform"}
    return [f"qconform: runner {json.dumps(info, sort_keys=True, default=str)}",
            f"qconform: platform {machine.label()} ({machine.cpu_model()})",
            f"qconform: corpus {c.root} digest {c.digest[:16]} ({len(c)} cases), "
            f"profile {config.getoption('profile')}"]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if RUNNER_KEY not in config.stash:
        return None
    golden = config.stash[CORPUS_KEY].root.resolve()
    p = collection_path.resolve()
    if p == golden or golden in p.parents or p in golden.parents:
        return None
    return True  # with --runner only the corpus is collected; the project's tests stay separate


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    config = parent.config
    if RUNNER_KEY in config.stash and file_path.name == corpus_mod.MANIFEST \
            and file_path.parent.resolve() == config.stash[CORPUS_KEY].root.resolve():
        return CorpusFile.from_parent(parent, path=file_path)
    return None


class CorpusFile(pytest.File):
    def collect(self):
        marks: dict[str, pytest.MarkDecorator] = {}
        keep = self._keyword_filter()
        chosen = self.config.stash.get(CHOSEN_KEY, None)
        for ref in self.config.stash[CORPUS_KEY].refs:
            if chosen is not None and not chosen(ref.id):
                continue
            if keep is not None and not keep(ref):
                continue
            item = CaseItem.from_parent(self, name=ref.id, ref=ref)
            for m in case_markers(ref):
                deco = marks.get(m) or marks.setdefault(m, getattr(pytest.mark, m))
                item.keywords[m] = deco
                item.own_markers.append(deco.mark)
            yield item


    def _keyword_filter(self):
        """``-k`` decided before items exist: creating 21,430 items to keep ten is what made a ``-k``
        run slow. The names matched are exactly those pytest's own ``-k`` matches for a case item
        (its chain's names, the case id, its markers), so pytest's own deselection, which still runs,
        agrees; None (no pre-filter) when there is no ``-k`` or pytest's internals are not the
        expected ones."""
        expr_text = (self.config.option.keyword or "").strip()
        if not expr_text:
            return None
        try:
            from _pytest.mark import KeywordMatcher
            from _pytest.mark.expression import Expression

            expr = Expression.compile(expr_text)
        except Exception:  # noqa: BLE001 - pytest reports a bad -k itself
            return None
        chain = {n.name for n in self.listchain()
                 if not isinstance(n, pytest.Session)
                 and not (isinstance(n, pytest.Directory) and isinstance(n.parent, pytest.Session))}
        chain |= set(self.listextrakeywords())
        return lambda ref: expr.evaluate(KeywordMatcher({*chain, ref.id, *case_markers(ref)}))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """The plan: this session's case ids, in run order (after -k/-m selection)."""
    if RUNNER_KEY in config.stash:
        config.stash[PLAN_KEY] = [item.case_id for item in items if isinstance(item, CaseItem)]


class CaseFailure(Exception):
    """A case whose outputs differ from every permitted reading (or are malformed)."""


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """A case item's protocol: the same reports in the same order as pytest's own (logstart, setup,
    call, teardown, logfinish), without what a case needs none of -- fixtures, output capture around
    each phase (the runner runs in its own process), exception and traceback machinery for a verdict
    already known. ``--case-protocol=pytest`` keeps pytest's own protocol (setup hooks, capture); so
    does ``auto`` when a plugin outside pytest hooks a phase."""
    if not isinstance(item, CaseItem) or not item.config.stash.get(FAST_KEY, False):
        return None
    item.run_protocol()
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    if not isinstance(item, CaseItem) or not item._fast:
        return None
    return item.report(call)


class CaseItem(pytest.Item):
    def __init__(self, *, ref: corpus_mod.CaseRef, **kw: Any) -> None:
        super().__init__(**kw)
        self.ref = ref
        self.case_id = ref.id
        self._result: CaseResult | None = None
        self._fast = False  # True while run_protocol makes this item's reports

    def run_protocol(self) -> None:
        from _pytest.runner import CallInfo

        ihook = self.ihook
        self._fast = True
        self._kw = dict.fromkeys(self.keywords, 1)
        ihook.pytest_runtest_logstart(nodeid=self.nodeid, location=self.location)
        for when in ("setup", "call", "teardown"):
            start, t0 = time.time(), time.perf_counter()
            if when == "call":
                self._compute()
            call = CallInfo(None, None, start, time.time(), time.perf_counter() - t0, when, _ispytest=True)
            ihook.pytest_runtest_logreport(report=ihook.pytest_runtest_makereport(item=self, call=call))
        ihook.pytest_runtest_logfinish(nodeid=self.nodeid, location=self.location)
        self._fast = False

    def _compute(self) -> CaseResult:
        config = self.config
        self._submit()
        res = self._result = _engine(config).result(self.case_id)
        res.record = res.record.over(CaseRecord.stub(self.ref))
        config.stash[RECORDS_KEY].add(res.record)
        if res.stop:  # the device is gone: the rest would not run either; stop as Ctrl-C would
            self.session.shouldstop = f"qconform: {res.record.problem}"
            config.stash[STOPPED_KEY] = str(res.record.problem or "the device is gone")
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
        return self.config.stash[CORPUS_KEY].case(self.case_id)

    def _submit(self) -> None:
        """Hand cases to the engine ahead of pytest, once: in one process the whole plan at the first
        case (the runner's worker works through it while pytest reports); under xdist, whenever a case
        was not handed over yet, every case xdist has queued on this pytest worker by then."""
        config = self.config
        engine = _engine(config)
        if not getattr(engine, "runs_ahead", True):
            return
        if not config.stash.get(SENT_KEY, False):
            config.stash[SENT_KEY] = True
            if not _is_xdist_worker(config):
                engine.submit(config.stash.get(PLAN_KEY, [self.case_id]))
        if _is_xdist_worker(config) and self.case_id not in engine.submitted:
            engine.submit([self.case_id, *_xdist_queued_cases(config)])

    def runtest(self) -> None:
        """pytest's own protocol (``--case-protocol=pytest``): the verdict as an outcome."""
        res = self._compute()
        self._result = None  # the report comes from the exception, as for any pytest item
        if res.verdict == PASS:
            return
        if res.verdict in SHOWN_AS_SKIPPED:
            pytest.skip(_skip_reason(res))
        raise CaseFailure(_failure_text(self.config, res))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CaseFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, self.case_id


def _failure_text(config: pytest.Config, res: CaseResult) -> str:
    """A failure's text: the verdict line (and mismatches, diagnosis); with ``-v`` or
    ``--runner-traceback`` also the runner's own traceback when it raised (always in report.json)."""
    tb = res.record.traceback
    if tb and (config.getoption("verbose") > 0 or config.getoption("runner_traceback")):
        return f"{res.message}\n\nthe runner's traceback:\n{tb.rstrip()}"
    return res.message


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
                self._file = path.open("w", encoding="utf-8")

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


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist controller: each worker writes its records under one directory of this run."""
    config = node.config
    if RECORDS_KEY not in config.stash:
        return
    rec = config.stash[RECORDS_KEY]
    if rec.dir is None:
        rec.dir = Path(tempfile.mkdtemp(prefix="qconform-records-"))
    node.workerinput[WORKERINPUT_RECORDS] = str(rec.dir)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if RECORDS_KEY not in config.stash:
        return
    records = config.stash[RECORDS_KEY]
    records.close()
    if not _is_xdist_worker(config):
        records.merge_workers()


def pytest_unconfigure(config: pytest.Config) -> None:
    if ENGINE_KEY in config.stash:
        config.stash[ENGINE_KEY].close()
    rec = config.stash.get(RECORDS_KEY, None)
    if rec is not None and rec.dir is not None:
        import shutil

        shutil.rmtree(rec.dir, ignore_errors=True)


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
            if isinstance(i, int) and 0 <= i < len(items) and isinstance(items[i], CaseItem)]


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


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config):
    result = yield
    if RUNNER_KEY not in config.stash and not terminalreporter._session.testscollected \
            and not _is_xdist_worker(config):
        from qconform.runner import BUNDLED

        terminalreporter.write_line(f"qconform: no --runner given, so no corpus case was collected; e.g. pytest "
                                    f"--runner=onnxruntime (bundled: {', '.join(sorted(BUNDLED))})")
    if RECORDS_KEY in config.stash and config.stash[RECORDS_KEY].by_id and not _is_xdist_worker(config):
        _summary(terminalreporter, config.stash[RECORDS_KEY].by_id.values())
        _rerun_hint(terminalreporter, config, config.stash[RECORDS_KEY].by_id.values())
        for lines in config.stash.get(SUMMARY_KEY, []):  # feature modules' sections, last
            lines(terminalreporter, config)
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

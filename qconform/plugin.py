"""The pytest plugin (``pytest11`` entry point): options, collection of golden cases, execution.

``pytest --runner=NAME`` collects one item per golden case; without ``--runner`` the plugin collects
nothing, so the project's own tests run alone.

Collection reads only the corpus index (``corpus.index``): no tensors. Execution goes through an
engine (``qconform.execution``): when the first case of a group (op-version and types) runs, the
whole group of this session's items is handed to the runner's worker process in batches, and the
worker streams results back while pytest reports the previous ones; items only pick their result
up. Per-case records stay in the process that ran them (``Records``); pytest-xdist workers write
theirs to a file the controller merges at the end, so nothing but pytest's own small reports
crosses to the controller per item. Under xdist the plugin schedules whole groups per worker, so
each worker keeps its runner warm on one group at a time.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from qconform import corpus as corpus_mod
from qconform.execution import CaseResult, InProcessEngine, IsolatedEngine, Options
from qconform.runner import Runner, RunnerError, describe, resolve

RUNNER_KEY = pytest.StashKey[Runner]()
CORPUS_KEY = pytest.StashKey[corpus_mod.Index]()
ENGINE_KEY = pytest.StashKey[Any]()
RECORDS_KEY = pytest.StashKey["Records"]()
PLAN_KEY = pytest.StashKey[dict]()
WORKERINPUT_RECORDS = "qconform_records"

# Feature modules, each with its own options and hooks (reports, exploration).
pytest_plugins: list[str] = ["qconform.report.plugin", "qconform.explore"]


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
    g.addoption("--diagnose", choices=("on", "off"), default="on",
                help="name the known deviation (qconform/docs/diagnosis.md) that reproduces each failure "
                     "(default: on)")
    g.addoption("--diagnose-per-group", type=int, default=16, metavar="N",
                help="diagnose at most N failing cases per op-version/type group and process (default 16; "
                     "0: no limit); the report ranks models over the diagnosed ones")
    g.addoption("--worker-memory-mb", type=int, default=0, metavar="MB",
                help="with --isolate=on: address-space limit of the runner's worker (default: none)")


def _options(config: pytest.Config) -> dict[str, str]:
    opts = {}
    for item in config.getoption("runner_opt"):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise pytest.UsageError(f"--runner-opt {item!r} is not KEY=VALUE")
        opts[key] = value
    return opts


def marker_name(prefix: str, value: object) -> str:
    return f"{prefix}_" + re.sub(r"\W", "_", str(value))


def case_markers(case) -> list[str]:
    """The markers of a case (a Case or a CaseRef): -m "op_QuantizeLinear and opset_21" ..."""
    return [marker_name("op", case.op), marker_name("opset", case.opset),
            marker_name("family", case.family), marker_name("types", case.types)]


def group_key(case_id: str) -> str:
    """The unit of scheduling and batching: op-version and types (``QuantizeLinear-21/float32-int8``)."""
    return "/".join(case_id.split("/", 2)[:2])


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
    config.stash[RUNNER_KEY] = runner
    config.stash[CORPUS_KEY] = index
    config.stash[RECORDS_KEY] = Records(config)
    for m in sorted({m for r in index.refs for m in case_markers(r)}):
        config.addinivalue_line("markers", f"{m}: qconform case marker")
    # With no explicit paths (or only the configured testpaths), collect the corpus itself.
    if not config.args or [Path(a).resolve() for a in config.args] == [
        (config.rootpath / p).resolve() for p in (config.getini("testpaths") or ["."])
    ] or Path(config.args[0]).resolve() == config.rootpath:
        config.args[:] = [str(golden)]
    _fast_teardown_lookup(config)


def _engine(config: pytest.Config):
    """The engine, started on first use (a collect-only run starts no worker)."""
    if ENGINE_KEY not in config.stash:
        opts = Options(str(config.stash[CORPUS_KEY].root), config.getoption("runner"), _options(config),
                       bool(config.getoption("strict_nan")), config.getoption("profile"),
                       config.getoption("diagnose") == "on", config.getoption("diagnose_per_group") or None)
        if config.getoption("isolate") == "on":
            config.stash[ENGINE_KEY] = IsolatedEngine(opts, config.stash[CORPUS_KEY], config.getoption("case_timeout"),
                                                      config.getoption("worker_memory_mb"), config.getoption("batch"))
        else:
            config.stash[ENGINE_KEY] = InProcessEngine(opts, config.stash[RUNNER_KEY], config.stash[CORPUS_KEY])
    return config.stash[ENGINE_KEY]


def pytest_report_header(config: pytest.Config) -> list[str]:
    if RUNNER_KEY not in config.stash:
        return []
    from qconform import platform as machine

    c = config.stash[CORPUS_KEY]
    info = {k: v for k, v in describe(config.stash[RUNNER_KEY]).items() if k != "platform"}
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
        for ref in self.config.stash[CORPUS_KEY].refs:
            item = CaseItem.from_parent(self, name=ref.id, ref=ref)
            for m in case_markers(ref):
                deco = marks.get(m) or marks.setdefault(m, getattr(pytest.mark, m))
                item.keywords[m] = deco
                item.own_markers.append(deco.mark)
            yield item


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """The plan: this session's case items by group, in order (after -k/-m selection)."""
    if RUNNER_KEY not in config.stash:
        return
    plan: dict[str, list[str]] = {}
    for item in items:
        if isinstance(item, CaseItem):
            plan.setdefault(group_key(item.case_id), []).append(item.case_id)
    config.stash[PLAN_KEY] = plan


class CaseFailure(Exception):
    """A case whose outputs differ from every permitted reading (or are malformed)."""


class CaseItem(pytest.Item):
    def __init__(self, *, ref: corpus_mod.CaseRef, **kw: Any) -> None:
        super().__init__(**kw)
        self.ref = ref
        self.case_id = ref.id

    @property
    def case(self):
        """The whole case (inputs and readings), loaded on demand."""
        return self.config.stash[CORPUS_KEY].case(self.case_id)

    def _submit(self) -> None:
        """Hand this item's group (and, in one process, the next group) to the engine."""
        config = self.config
        plan = config.stash.get(PLAN_KEY, {})
        key = group_key(self.case_id)
        engine = _engine(config)
        engine.submit(plan.get(key, [self.case_id]))
        if not _is_xdist_worker(config):
            keys = list(plan)
            at = keys.index(key) if key in plan else -1
            if 0 <= at < len(keys) - 1:
                engine.submit(plan[keys[at + 1]])

    def runtest(self) -> None:
        config = self.config
        engine = _engine(config)
        self._submit()
        res: CaseResult = engine.result(self.case_id)
        config.stash[RECORDS_KEY].add(res.record)
        if res.verdict == "pass":
            return
        if res.verdict == "unsupported":
            pytest.skip(f"unsupported: {_short(res.record.get('problem', ''))}")
        raise CaseFailure(res.message)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CaseFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, self.case_id


def _short(reason: str, limit: int = 100) -> str:
    """A skip reason for the terminal and JUnit XML (the full text is in the report)."""
    reason = " ".join(reason.split())
    return reason if len(reason) <= limit else reason[: limit - 1] + "…"


# ----------------------------------------------------------------------------------------------
# Per-case records: kept where the case ran; xdist workers hand theirs over through a file
# ----------------------------------------------------------------------------------------------
class Records:
    """The per-case records of this process (and, on the xdist controller, of every worker)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.by_id: dict[str, dict] = {}
        self._file = None
        self.dir: Path | None = None
        if _is_xdist_worker(config):
            where = config.workerinput.get(WORKERINPUT_RECORDS)
            if where:
                path = Path(where) / f"{config.workerinput.get('workerid', os.getpid())}.jsonl"
                self._file = path.open("w", encoding="utf-8")

    def add(self, rec: dict) -> None:
        self.by_id[rec["id"]] = rec
        if self._file is not None:
            self._file.write(json.dumps(rec, separators=(",", ":")) + "\n")

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
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by a crashed worker
                self.by_id[rec["id"]] = rec


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
# xdist: whole groups per worker
# ----------------------------------------------------------------------------------------------
def _dist_given(config: pytest.Config) -> bool:
    return any(a == "--dist" or a.startswith("--dist=") or a == "-d" for a in config.invocation_params.args)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under ``-n N`` (without an explicit ``--dist``) a corpus run hands out whole groups, so each
    worker's runner stays warm on one group and its engine can batch the group."""
    if RUNNER_KEY not in config.stash or _dist_given(config):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_key(nodeid.split("::", 1)[-1])

    return GroupScheduling(config, log)


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
    if RECORDS_KEY in config.stash and config.stash[RECORDS_KEY].by_id and not _is_xdist_worker(config):
        _summary(terminalreporter, config.stash[RECORDS_KEY].by_id.values())
        from qconform.report import plugin as report_plugin

        report_plugin.terminal_lines(terminalreporter, config)
    return result


def _summary(tr, records) -> None:
    per_op: dict[str, Counter] = defaultdict(Counter)
    unsupported: Counter = Counter()
    for r in records:
        key = f"{r['domain'] + '.' if r.get('domain') else ''}{r['op']}-{r['opset']}"
        per_op[key][r["verdict"]] += 1
        if r["verdict"] == "unsupported":
            unsupported[(key, _short(r.get("problem", ""), 120))] += 1
    tr.section("qconform summary")
    verdicts = ("pass", "fail", "error", "unsupported")
    tr.write_line(f"{'op-version':32} {'cases':>6} " + " ".join(f"{v:>11}" for v in verdicts))
    for key in sorted(per_op, key=lambda k: (k.rsplit('-', 1)[0], int(k.rsplit('-', 1)[1]))):
        cnt = per_op[key]
        other = sum(n for v, n in cnt.items() if v not in verdicts)  # crashed, timeout: counted as errors
        cells = [cnt["pass"], cnt["fail"], cnt["error"] + other, cnt["unsupported"]]
        tr.write_line(f"{key:32} {sum(cnt.values()):>6} " + " ".join(f"{v:>11}" for v in cells))
    if unsupported:
        tr.write_line("not supported by the runner (cases, op-version, reason):")
        for (key, why), n in sorted(unsupported.items()):
            tr.write_line(f"  {n:>5}  {key}: {why}")

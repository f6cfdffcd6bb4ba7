"""The pytest plugin (``pytest11`` entry point): options, collection of golden cases, execution.

``pytest --runner=NAME`` collects one item per golden case; without ``--runner`` the plugin
collects nothing, so the project's own tests run alone. Workers (pytest-xdist) each load the
corpus and their own runner; per-case results travel to the controller in ``user_properties``.
"""
from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from qconform import corpus as corpus_mod
from qconform.case import Case
from qconform.compare import Outcome, compare
from qconform.model import build_model
from qconform.isolation import Worker, execute
from qconform.runner import Runner, RunnerError, describe, resolve

RUNNER_KEY = pytest.StashKey[Runner]()
WORKER_KEY = pytest.StashKey[Worker]()
BUDGET_KEY = pytest.StashKey[Any]()
CORPUS_KEY = pytest.StashKey[corpus_mod.Corpus]()
PROPERTY = "qconform"

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
    g.addoption("--diagnose", choices=("on", "off"), default="on",
                help="name the known deviation (qconform/docs/diagnosis.md) that reproduces each failure (default: on)")
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


def case_markers(case: Case) -> list[str]:
    return [marker_name("op", case.op), marker_name("opset", case.opset),
            marker_name("family", case.family), marker_name("types", case.types)]


def pytest_configure(config: pytest.Config) -> None:
    _session_results.clear()
    name = config.getoption("runner", None)
    if not name:
        return
    try:
        runner = resolve(name, _options(config))
    except RunnerError as exc:
        raise pytest.UsageError(str(exc)) from None
    golden = Path(config.getoption("golden") or default_golden())
    try:
        corpus = corpus_mod.load(golden)
    except corpus_mod.CorpusError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[RUNNER_KEY] = runner
    config.stash[CORPUS_KEY] = corpus
    if config.getoption("isolate") == "on":
        config.stash[WORKER_KEY] = Worker(name, _options(config), config.getoption("case_timeout"),
                                          config.getoption("worker_memory_mb"))
    for m in sorted({m for c in corpus.cases for m in case_markers(c)}):
        config.addinivalue_line("markers", f"{m}: qconform case marker")
    # With no explicit paths (or only the configured testpaths), collect the corpus itself.
    if not config.args or [Path(a).resolve() for a in config.args] == [
        (config.rootpath / p).resolve() for p in (config.getini("testpaths") or ["."])
    ] or Path(config.args[0]).resolve() == config.rootpath:
        config.args[:] = [str(golden)]


def pytest_unconfigure(config: pytest.Config) -> None:
    if WORKER_KEY in config.stash:
        config.stash[WORKER_KEY].close()


def pytest_report_header(config: pytest.Config) -> list[str]:
    if RUNNER_KEY not in config.stash:
        return []
    from qconform import platform as machine

    c = config.stash[CORPUS_KEY]
    info = {k: v for k, v in describe(config.stash[RUNNER_KEY]).items() if k != "platform"}
    return [f"qconform: runner {json.dumps(info, sort_keys=True, default=str)}",
            f"qconform: platform {machine.label()} ({machine.cpu_model()})",
            f"qconform: corpus {c.root} digest {c.digest[:16]} ({len(c.cases)} cases), "
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
        for case in self.config.stash[CORPUS_KEY].cases:
            item = CaseItem.from_parent(self, name=case.id, case=case)
            for m in case_markers(case):
                item.add_marker(m)
            yield item


class CaseFailure(Exception):
    """A case whose outputs differ from every permitted reading (or are malformed)."""


class CaseItem(pytest.Item):
    def __init__(self, *, case: Case, **kw: Any) -> None:
        super().__init__(**kw)
        self.case = case

    def runtest(self) -> None:
        case, config = self.case, self.config
        model = build_model(case)
        if WORKER_KEY in config.stash:
            result = config.stash[WORKER_KEY].call(model, case.feeds)
        else:
            result = execute(config.stash[RUNNER_KEY], model, case.feeds)
        if result.kind == "unsupported":
            self._record(Outcome("unsupported", problem=result.message))
            pytest.skip(f"unsupported: {result.message}")
        if result.kind != "ok":  # error, crashed, timeout: this case's verdict; the run goes on
            self._record(Outcome(result.kind, problem=result.message))
            raise CaseFailure(f"{case.id}: {result.kind}: {result.message}")
        outcome = compare(case, result.outputs, strict_nan=config.getoption("strict_nan"),
                          profile=config.getoption("profile"))
        diagnosis = self._diagnose(outcome, result.outputs)
        self._record(outcome, diagnosis)
        if outcome.verdict != "pass":
            lines = [] if diagnosis is None else message_lines_for(diagnosis)
            raise CaseFailure("\n".join([outcome.message(case), *lines]))

    def _diagnose(self, outcome: Outcome, outputs) -> list | None:
        """Which known deviations reproduce a failure (None: not diagnosed, by option or budget)."""
        config = self.config
        if outcome.verdict != "fail" or config.getoption("diagnose") == "off":
            return None
        from qconform.diagnosis.diagnose import Budget, diagnose_case

        if BUDGET_KEY not in config.stash:
            config.stash[BUDGET_KEY] = Budget(config.getoption("diagnose_per_group") or None)
        if not config.stash[BUDGET_KEY].allow(self.case):
            return None
        try:
            return diagnose_case(self.case, outputs, strict_nan=config.getoption("strict_nan"))
        except Exception:  # diagnosis is advice: it must never turn a verdict into a crash
            return None

    def _record(self, outcome: Outcome, diagnosis: list | None = None) -> None:
        c = self.case
        self.user_properties.append((PROPERTY, json.dumps({
            "id": c.id, "op": c.op, "domain": c.domain, "opset": c.opset, "types": c.types,
            "family": c.family, "clause": c.clause, "verdict": outcome.verdict, "reading": outcome.reading,
            "readings": len(c.readings), "masked": outcome.masked, "mismatches": outcome.mismatch_count,
            "problem": outcome.problem,
            "first_mismatches": [dataclasses.asdict(m) for m in outcome.mismatches],
            "output_types": list(c.output_types),
            **({} if diagnosis is None else {"diagnosis": [d.model for d in diagnosis]}),
        })))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CaseFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, self.case.id


def message_lines_for(diagnosis: list) -> list[str]:
    from qconform.diagnosis.diagnose import message_lines

    return message_lines(diagnosis)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for key, value in report.user_properties:
        if key == PROPERTY and (report.when == "call" or report.skipped):
            _session_results.append(json.loads(value))


_session_results: list[dict] = []


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    if RUNNER_KEY not in config.stash or not _session_results:
        return
    seen = {r["id"]: r for r in _session_results}
    per_op: dict[str, Counter] = defaultdict(Counter)
    unsupported: Counter = Counter()
    for r in seen.values():
        key = f"{r['domain'] + '.' if r['domain'] else ''}{r['op']}-{r['opset']}"
        per_op[key][r["verdict"]] += 1
        if r["verdict"] == "unsupported":
            unsupported[(key, r["problem"][:120])] += 1
    tr = terminalreporter
    tr.section("qconform summary")
    verdicts = ("pass", "fail", "error", "unsupported")
    tr.write_line(f"{'op-version':32} {'cases':>6} " + " ".join(f"{v:>11}" for v in verdicts))
    for key in sorted(per_op, key=lambda k: (k.rsplit('-', 1)[0], int(k.rsplit('-', 1)[1]))):
        cnt = per_op[key]
        tr.write_line(f"{key:32} {sum(cnt.values()):>6} " + " ".join(f"{cnt[v]:>11}" for v in verdicts))
    if unsupported:
        tr.write_line("not supported by the runner (cases, op-version, reason):")
        for (key, why), n in sorted(unsupported.items()):
            tr.write_line(f"  {n:>5}  {key}: {why}")

"""Certification reports, baseline gating, the collected-cases floor and failure export (pytest feature).

Options: ``--report=DIR`` (report.json, report.html, summary.md), ``--baseline=FILE``,
``--min-cases=N``, ``--export-failures=DIR``. All active only with ``--runner``.

Per-case records come from the session's plugin object (``qconform.plugin.core.QconformPlugin.records``; on
the xdist controller merged from the workers' record files at session finish); the collected case list comes from
``pytest_collection_finish`` or, under xdist, ``pytest_xdist_node_collection_finished``. Files are
written only where ``workerinput`` is absent (the controller, or a plain run), in
``pytest_sessionfinish``, which pytest also calls after Ctrl-C: the report is then written with
``"complete": false`` and every case that produced no result as ``not-run``.

Baseline gating: on the process that runs a case, a deviation a live baseline entry covers is
reported as xfail (reason ``baseline: ...``), so it no longer fails the run; the controller then
fails the run on expired entries or a collected-cases floor not met, and lists stale entries.

The floor (``--min-cases``): by default, a run without a selection (-k, -m, --deselect, node ids,
or any plugin deselecting items through ``pytest_deselected``, e.g. ``--explore``) must collect
every case of the corpus, and a run with one has no floor; an explicit ``--min-cases=N`` applies
to every run (0 disables it). Items dropped without ``pytest_deselected`` are what it catches.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from qconform.gating import baseline as baseline_mod
from qconform.gating.assembly import assemble
from qconform.interrupt import restore, sigterm_as_interrupt
from qconform.plugin.core import plugin_of
from qconform.plugin.model import built_of
from qconform.plugin.options import NO_LAST_FAILED, PLUGIN, no_last_failed
from qconform.record import CaseRecord, behaviour
from qconform.report import writer
from qconform.verdicts import DEVIATING, ERROR, NOT_RUN


@dataclass
class _State:
    baseline: baseline_mod.Baseline | None = None
    today: _dt.date = field(default_factory=_dt.date.today)
    collected: list[str] | None = None  # case ids, collection order
    #: case id -> (phase, why) of a case pytest reported failed (setup error, crash, a conftest's hook)
    failed_by_pytest: dict[str, tuple[str, str]] = field(default_factory=dict)
    durations: dict[str, float] = field(default_factory=dict)
    started: float = 0.0
    started_iso: str = ""
    interrupted: bool = False
    report: dict | None = None
    written: list[Path] = field(default_factory=list)
    exported: int = 0
    deselected: int = 0  # items a selection (-k, -m, a plugin) set aside; on xdist, from the workers
    extra_cases: dict = field(default_factory=dict)  # collected cases outside the corpus, by id
    no_last_failed: bool = False  # --lf/--ff asked for, and pytest's cache held no failure to go by



def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("qconform-report", "qconform reports and gating")
    g.addoption("--report", default=None, metavar="DIR",
                help="write report.json, report.html and summary.md to DIR (with --runner)")
    g.addoption("--baseline", default=None, metavar="FILE",
                help="JSON file of known deviations {id|glob, reason, expires}: the run fails only on "
                     "deviations it does not cover and on expired entries; stale entries are listed")
    g.addoption("--min-cases", type=int, default=None, metavar="N",
                help="fail unless at least N cases are collected (default: every corpus case, or every "
                     "case of a bundled runtime's declared scope, when no -k/-m/--deselect/node-id filter "
                     "is given, no floor otherwise; 0 disables)")
    g.addoption("--export-failures", default=None, metavar="DIR",
                help="write each failing case as an ONNX node test directory (model.onnx, "
                     "test_data_set_0/input_N.pb, output_N.pb) under DIR")


@pytest.hookimpl(trylast=True)  # after qconform.plugin.core has resolved the runner and loaded the corpus
def pytest_configure(config: pytest.Config) -> None:
    wanted = [o for o in ("report", "baseline", "export_failures") if config.getoption(o)]
    plugin = plugin_of(config)
    if plugin is None:
        if wanted:
            raise pytest.UsageError(f"--{wanted[0].replace('_', '-')} needs --runner (the suite under test)")
        return
    floor = config.getoption("min_cases")
    if floor is not None and floor < 0:
        raise pytest.UsageError(f"--min-cases={floor}: expected a number of cases >= 0 (0 disables the floor)")
    if _controller(config):
        for opt in ("report", "export_failures"):
            out = config.getoption(opt)
            why = writer.prepare(Path(out)) if out else ""
            if why:
                raise pytest.UsageError(f"--{opt.replace('_', '-')}={out}: {why}")
    state = _State()
    path = config.getoption("baseline")
    if path:
        try:
            state.baseline = baseline_mod.load(path)
        except baseline_mod.BaselineError as exc:
            raise pytest.UsageError(str(exc)) from None
    try:
        if state.baseline is not None and state.baseline.diagnose_every_failure(config.getoption("diagnose") == "on"):
            plugin.diagnose_all = True
    except baseline_mod.BaselineError as exc:
        raise pytest.UsageError(str(exc)) from None
    session = _Session(config, state)
    if _controller(config):  # a stopped run still reports what it judged (qconform.interrupt)
        session.sigterm = sigterm_as_interrupt()
    config.pluginmanager.register(session, "qconform-report-session")


def _case_id(nodeid: str) -> str:
    return nodeid.split("::", 1)[-1]


def _controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


class _Session:
    """The per-run hooks; an object (as pytest's junitxml does) so every hook sees the config."""

    def __init__(self, config: pytest.Config, state: _State) -> None:
        self.config, self.state = config, state
        self._stubs: dict[str, CaseRecord] | None = None
        self.sigterm = None  # the SIGTERM handler to put back at the end

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        restore(self.sigterm)

    def stubs(self) -> dict[str, CaseRecord]:
        """Static fields of every corpus case, for cases that never produced a record."""
        if self._stubs is None:
            self._stubs = {r.id: CaseRecord.stub(r) for r in self.config.stash[PLUGIN].index.refs}
        return self._stubs

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.state.started = time.perf_counter()
        self.state.started_iso = writer.now()
        self.state.no_last_failed = no_last_failed(session.config)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        stubs = self.stubs()
        ids = []
        for item in session.items:
            if hasattr(item, "case_id"):
                ids.append(item.case_id)
            elif hasattr(item, "case"):  # a case outside the corpus (generated at collection time)
                c = item.case
                if c.id not in stubs:
                    stubs[c.id] = CaseRecord.stub(c)
                    self.state.extra_cases[c.id] = c
                ids.append(c.id)
        self.state.collected = list(dict.fromkeys(ids))  # a case collected twice (--keep-duplicates) is one case
        self.state.deselected += self.config.stash[PLUGIN].prefiltered  # -k / -m decided while collecting

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids: list[str]) -> None:
        if self.state.collected is None:  # every worker collects the same ids (xdist checks)
            known = self.stubs()
            self.state.collected = [cid for cid in map(_case_id, ids) if cid in known]

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        """A deviation a live baseline entry covers is reported as xfail: it does not fail the run."""
        rep = yield
        baseline = self.state.baseline
        if baseline and rep.when == "call" and rep.failed and (hasattr(item, "case_id") or hasattr(item, "case")):
            result = getattr(item, "_result", None)
            record = result.record.to_dict() if result is not None else {}
            entry = baseline.live_match(getattr(item, "case_id", None) or item.case.id, record.get("verdict"),
                                        self.state.today, behaviour(record))
            if entry is not None:
                rep.outcome = "skipped"
                rep.wasxfail = f"baseline: {entry.reason}"
        return rep

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not _controller(self.config):
            return
        state, cid = self.state, _case_id(report.nodeid)
        state.durations[cid] = state.durations.get(cid, 0.0) + (report.duration or 0.0)
        # A case pytest failed: with no record (setup error, a qconform bug, a crashed pytest worker) or
        # after the engine's verdict (a plugin's hook, a teardown); settled at the end, when the records
        # of every process are in (_finish).
        if report.failed and cid in self.stubs() and cid not in state.failed_by_pytest:
            crash = getattr(getattr(report.longrepr, "reprcrash", None), "message", None)
            lines = (report.longreprtext or "").strip().splitlines()
            why = crash or (lines[-1] if lines else "")
            state.failed_by_pytest[cid] = (report.when, why[:500])

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.state.deselected += len(items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        """xdist: selection happens on the workers; they send their deselected count in workeroutput."""
        self.state.deselected = max(self.state.deselected, node.workeroutput.get("qconform_deselected", 0)
                                    if hasattr(node, "workeroutput") else 0)

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        self.state.interrupted = True

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if _controller(self.config):
            _finish(session, self.state, self.stubs())
        else:
            self.config.workeroutput["qconform_deselected"] = self.state.deselected

    def pytest_qconform_summary(self, terminalreporter, config: pytest.Config) -> None:
        """The report's section of the terminal summary (qconform.plugin.core prints it last)."""
        if self.state.report is not None:
            _summary(terminalreporter, config, self.state)


def _filters(config: pytest.Config, deselected: int = 0) -> list[str]:
    """Selections in effect: with any of them, fewer cases than the corpus is expected. A plugin
    that sets items aside through ``pytest_deselected`` (as -k and -m do) counts; one that drops
    items silently does not, so the floor catches it."""
    found = [f"-{flag} {val!r}" for flag, val in (("k", config.option.keyword), ("m", config.option.markexpr)) if val]
    if config.getoption("deselect", None):
        found.append("--deselect")
    if any("::" in a for a in config.args):
        found.append("node ids")
    if config.getoption("case", None):
        found.append("--case")
    if config.getoption("from_report", None):
        found.append("--from-report")
    if config.stash[PLUGIN].scope:
        found.append("scope")
    found += [flag for flag, opt in (("--lf", "lf"), ("--sw", "stepwise")) if getattr(config.option, opt, None)]
    if deselected:
        found.append(f"{deselected} deselected")
    return found


def _workers(config: pytest.Config) -> int:
    """xdist worker count (0 without xdist); ``-n auto`` is resolved to a number by then."""
    n = getattr(config.option, "numprocesses", None)
    return n if isinstance(n, int) and getattr(config.option, "dist", "no") != "no" else 0


def _meta(session: pytest.Session, state: _State, exitstatus: int, ran_all: bool = True) -> dict:
    config = session.config
    stopped = config.stash[PLUGIN].stopped
    why = next((w for w in (session.shouldfail, session.shouldstop) if isinstance(w, str) and w), "")
    if not stopped and not ran_all and why:
        stopped = f"pytest: {why}"  # -x / --maxfail: "stopping after 1 failures"; -x's own shouldstop
    return writer.meta(
        runner=config.stash[PLUGIN].identity, index=config.stash[PLUGIN].index, started_iso=state.started_iso,
        seconds=time.perf_counter() - state.started,
        interrupted=state.interrupted or exitstatus == pytest.ExitCode.INTERRUPTED, exit_status=int(exitstatus),
        stopped=stopped,
        invocation={"args": [str(a) for a in config.invocation_params.args],
                    "profile": config.getoption("profile"), "strict_nan": bool(config.getoption("strict_nan")),
                    "filters": _filters(config, state.deselected), "workers": _workers(config),
                    "command_line": _command_line(config), "baseline": _baseline_identity(config),
                    **({"scope": config.stash[PLUGIN].scope} if config.stash[PLUGIN].scope else {}),
                    **({"model": built_of(config).scope()} if built_of(config) is not None else {}),  # no conformance
                    **_runner_workers(config)})


def _runner_workers(config: pytest.Config) -> dict:
    """This process's isolated runner workers, where its engine ran cases (none on an xdist controller)."""
    n = config.stash[PLUGIN].runner_workers
    return {"runner_workers": n} if n > 0 else {}


def _command_line(config: pytest.Config) -> str:
    import shlex

    return shlex.join(["pytest", *[str(a) for a in config.invocation_params.args]])


def _baseline_identity(config: pytest.Config) -> dict | None:
    """The baseline file a certificate's accepted deviations come from, and its SHA-256."""
    path = config.getoption("baseline", None)
    return writer.baseline_identity(path) if path else None


def _finish(session: pytest.Session, state: _State, stubs: dict[str, CaseRecord]) -> None:
    """Build the report, decide the gate, write the files; controller only."""
    config = session.config
    collected = [stubs.get(cid, CaseRecord(cid)).to_dict() for cid in (state.collected or [])]
    got = dict(config.stash[PLUGIN].records.by_id)
    for cid, (when, why) in state.failed_by_pytest.items():
        if cid not in got:
            got[cid] = dataclasses.replace(stubs[cid], verdict=ERROR, problem=f"no result recorded ({when}): {why}")
        elif got[cid].verdict not in DEVIATING | {NOT_RUN}:  # pytest failed it (a conftest's hook, a teardown): not a pass
            got[cid] = dataclasses.replace(stubs[cid], verdict=ERROR, problem=f"pytest failed this case in its {when} "
                                           f"phase, after the engine's verdict {got[cid].verdict}: {why}")
    records = []
    for rec in got.values():
        rec = rec.over(stubs[rec.id]) if rec.id in stubs else rec
        rec.duration_s = state.durations.get(rec.id, 0.0)
        records.append(rec.to_dict())
    index = config.stash[PLUGIN].index
    ran_all = {r["id"] for r in records} >= set(state.collected or [])
    report, texts = assemble(records, collected, _meta(session, state, session.exitstatus, ran_all),
                                    cases_of=index.cases_of, baseline=state.baseline, today=state.today,
                                    min_cases=config.getoption("min_cases"), filters=_filters(config, state.deselected),
                                    corpus_size=len(index), strict_nan=bool(config.getoption("strict_nan")),
                                    profile=config.getoption("profile"))
    lost = any(r.get("verdict") == NOT_RUN for r in records)  # the device or its results, not the runtime
    if lost and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        session.exitstatus = pytest.ExitCode.INTERRUPTED  # an incomplete run certifies nothing: 2, as Ctrl-C
    elif not report["gate"]["passed"] and session.exitstatus == pytest.ExitCode.OK \
            and not config.option.collectonly:  # a listing is no certification attempt: its report says so
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    report["exit_status"] = int(session.exitstatus)
    state.report = report

    out = config.getoption("report")
    if out:
        state.written += writer.write(Path(out), report, texts)
    export_dir = config.getoption("export_failures")
    if export_dir:
        from qconform.report import export

        ids = [f["id"] for f in report["failures"]]
        by_id = config.stash[PLUGIN].index.cases_of(ids) | state.extra_cases
        failing = [(by_id[f["id"]], f) for f in report["failures"] if f["id"] in by_id]
        state.exported = len(export.export(failing, Path(export_dir), runner=report["runner"]))


def _summary(tr, config: pytest.Config, state: _State) -> None:
    report = state.report
    gate, c = report["gate"], report["counts"]
    tr.section("qconform report")
    tr.write_line(f"collected {c['collected']}"
                  + (f" ({state.deselected:,} deselected)" if state.deselected else "")
                  + f", reported {c['reported']}, ran {c['ran']}"
                  + ("" if report["complete"] else f" — INCOMPLETE ({c[NOT_RUN]} not run)"))
    for line in baseline_mod.stale_lines(gate):
        tr.write_line(line, yellow=True)
    if gate["baselined"]:
        tr.write_line(f"{gate['baselined']} deviation(s) covered by baseline {gate['baseline']}")
    for msg in gate["messages"]:
        tr.write_line(f"gate: {msg}", red=True, bold=True)
    if config.stash[PLUGIN].scope:
        tr.write_line(config.stash[PLUGIN].scoped_line())
    if state.no_last_failed:
        tr.write_line(NO_LAST_FAILED, yellow=True)
    for e in (report.get("diagnosis") or {}).get("errors", [])[:5]:  # a broken model is a qconform bug
        tr.write_line(f"diagnosis error in {e['cases']} case(s) (qconform bug, please report): {e['error']}"
                      + (f" (e.g. {e['example']})" if e["example"] else ""), red=True)
    for p in state.written:
        tr.write_line(f"wrote {p}")
    if config.getoption("export_failures"):
        tr.write_line(f"exported {state.exported} failing case(s) to {config.getoption('export_failures')}")

"""Items and records: one pytest item per corpus case, which only picks its result up from the
engine, and the per-case records kept where the case ran (xdist workers hand theirs over in a file).
"""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import pytest

from qconform import corpus as corpus_mod
from qconform.execution import CaseResult
from qconform.plugin.options import PLUGIN, is_xdist_worker
from qconform.record import CaseRecord
from qconform.verdicts import INFO, PASS, SHOWN_AS_SKIPPED

#: Where an xdist worker finds the directory it writes its records to (``workerinput``).
WORKERINPUT_RECORDS = "qconform_records"


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
            if not is_xdist_worker(config):
                engine.submit(plugin.plan or [self.case_id])
        if is_xdist_worker(config) and self.case_id not in engine.submitted:
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


def marked_to_skip(item: pytest.Item) -> bool:
    """A case item a conftest marked ``skip``, ``skipif`` or ``xfail``: pytest's own protocol runs it,
    so its skipping plugin decides (the fast protocol calls no setup hook)."""
    return skip_marked(item) or any(True for _ in item.iter_markers("xfail"))


def skip_marked(item: pytest.Item) -> bool:
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
def short(reason: str, limit: int = 48) -> str:
    """A skip reason for the terminal and JUnit XML, where thousands of cases repeat it: the full text
    is in the qconform summary and, once per distinct reason, in report.json."""
    reason = " ".join(reason.split())
    return reason if len(reason) <= limit else reason[: limit - 1] + "…"


def _skip_reason(res) -> str:
    rec = res.record
    if res.verdict == INFO:  # the runner's part first, at a glance
        return short(f"information: the runner {rec.runner_did}. ({rec.information})", 160)
    return f"{res.verdict}: {short(rec.problem)}"


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
        if is_xdist_worker(config):
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
            and not skip_marked(items[i])]

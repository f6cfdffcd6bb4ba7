"""The execution engine: many cases per round trip to the runner's worker, results in order, and a
crash or hang costs exactly the case that was running -- its batch neighbours keep their verdicts."""
from __future__ import annotations

from pathlib import Path

from fault_runners import FAULTS

from qconform import corpus as corpus_mod
from qconform.execution import InProcessEngine, IsolatedEngine, Options

FAULTY = f"{Path(__file__).with_name('fault_runners.py')}:FaultRunner"


def _healthy(index, group: str, n: int) -> list[str]:
    return [r.id for r in index.refs if r.group == group and r.id not in FAULTS][:n]


def test_a_crash_in_a_batch_loses_no_verdict_of_its_neighbours():
    index = corpus_mod.index(corpus_mod.DEFAULT_ROOT)
    faults = {f: cid for cid, f in FAULTS.items()}
    healthy = _healthy(index, "QuantizeLinear-13", 5)
    order = [healthy[0], faults["segfault"], healthy[1], faults["abort"], healthy[2], faults["hang"], healthy[3],
             faults["exit"], healthy[4]]
    engine = IsolatedEngine(Options(str(index.root), FAULTY), index, timeout=3.0, batch=64)
    try:
        engine.submit(order)  # one batch: every case in a single round trip
        got = {cid: engine.result(cid) for cid in order}
    finally:
        engine.close()
    assert [got[c].verdict for c in healthy] == ["pass"] * 5
    assert got[faults["segfault"]].verdict == "crashed" and "SIGSEGV" in got[faults["segfault"]].message
    assert got[faults["abort"]].verdict == "crashed" and "SIGABRT" in got[faults["abort"]].message
    assert got[faults["hang"]].verdict == "timeout" and "--case-timeout=3s" in got[faults["hang"]].message
    assert got[faults["exit"]].verdict == "crashed" and "status 3" in got[faults["exit"]].message
    # a fresh worker after the first crash, which replays the unanswered cases one by one (results of a
    # batch come in groups, so which case crashed is known only alone), then one after each fault
    assert engine.restarts == 5
    assert all(r.record.id == cid for cid, r in got.items())


def test_results_come_back_in_any_order_pytest_asks_for_them():
    index = corpus_mod.index(corpus_mod.DEFAULT_ROOT)
    ids = _healthy(index, "DequantizeLinear-21", 12)
    engine = IsolatedEngine(Options(str(index.root), "cpu-ref"), index, timeout=60.0, batch=5)
    try:
        engine.submit(ids)
        got = [engine.result(cid).verdict for cid in reversed(ids)]
        again = engine.result(ids[0])  # not submitted any more: computed on demand
    finally:
        engine.close()
    assert got == ["pass"] * len(ids) and again.verdict == "pass"
    assert engine.child.started == 1  # one worker for all of them


def test_in_process_and_isolated_engines_agree():
    index = corpus_mod.index(corpus_mod.DEFAULT_ROOT)
    refs = [r for r in index.refs if r.group == "QuantizeLinear-21"]
    ids = [r.id for r in refs if r.output_types == ("int8",)][:20] + [r.id for r in refs if r.output_types == ("uint8",)][:20]
    opts = Options(str(index.root), f"{Path(__file__).with_name('support.py')}:FlipInt8Runner")
    from support import FlipInt8Runner

    local = InProcessEngine(opts, FlipInt8Runner(), index)
    iso = IsolatedEngine(opts, index, timeout=60.0)
    try:
        iso.submit(ids)
        a = {cid: local.result(cid) for cid in ids}
        b = {cid: iso.result(cid) for cid in ids}
    finally:
        iso.close()
    assert {c: (r.verdict, r.message) for c, r in a.items()} == {c: (r.verdict, r.message) for c, r in b.items()}
    assert {r.verdict for r in a.values()} >= {"pass", "fail"}
    # the isolated engine's workers leave a failure's diagnosis to the controller: the same records
    assert {c: r.record.to_dict() for c, r in a.items()} == {c: r.record.to_dict() for c, r in b.items()}
    assert any(r.record.diagnosis is not None for r in b.values())  # diagnosed (whatever it found)
    assert all(r.undiagnosed is None and r.outputs is None for r in b.values())


# --------------------------------------------------------------------------------------------
# One engine: every application's verdict is the engine's
# --------------------------------------------------------------------------------------------
SLICE = "QuantizeLinear-21/float32-float8e4m3fn/granularity/*"
INFO_CASE = "QuantizeLinear-21/float32-float8e4m3fn/granularity/scale-shape-1"  # invalid by the text


def test_every_application_gives_the_engines_verdicts(corpus, tmp_path):
    """One slice with an information case through the pytest plugin, facts observation, findings,
    the diagnosis run and the engine itself: the same verdict for every case in each. (Facts once
    called the information case a pass where the plugin said info.)"""
    import json
    from fnmatch import fnmatchcase

    from conftest import run_pytest

    from qconform.apps.diagnosis_run import run_cases
    from qconform.execution import judge
    from qconform.facts.observe import observe
    from qconform.apps import findings
    from qconform.runner import resolve

    cases = [c for c in corpus.cases if fnmatchcase(c.id, SLICE)]
    assert any(c.id == INFO_CASE and c.information for c in cases)
    runner = resolve("onnx-reference")
    engine = {c.id: judge(runner, c).verdict for c in cases}
    r = run_pytest("--runner=onnx-reference", "--case", SLICE, f"--report={tmp_path}", "-q", "-p", "no:randomly")
    plugin = {c["id"]: c["verdict"] for c in json.loads((tmp_path / "report.json").read_text())["cases"]}
    facts = {k: v.verdict for k, v in observe("onnx-reference", corpus.root, probes=False, select=(SLICE,)).items()}
    found = {c.id: findings.observe(runner, c).verdict for c in cases}
    diagnosed = {rec["id"]: rec["verdict"] for rec in run_cases(runner, cases).records}
    assert plugin == engine, r.stdout[-2000:]
    assert facts == found == diagnosed == engine
    assert engine[INFO_CASE] == "info"


def test_the_local_executors_are_executors():
    """The seam the front-ends drive: both local executors implement it (a device, a cluster or
    offline results slot in the same way)."""
    from qconform.execution import Executor, local_executor
    from qconform.runners.cpu_ref import CpuRefRunner

    index = corpus_mod.index(corpus_mod.DEFAULT_ROOT)
    opts = Options(str(index.root), "cpu-ref")
    for isolate in (False, True):
        ex = local_executor(opts, index, isolate=isolate, runner=CpuRefRunner())
        try:
            assert isinstance(ex, Executor)
            cid = _healthy(index, "QuantizeLinear-13", 1)[0]
            ex.submit([cid])
            assert ex.result(cid).verdict == "pass"
        finally:
            ex.close()


def test_the_case_timeout_measures_the_runtime_not_qconforms_diagnosis():
    """A failure's diagnosis runs in the worker after the runtime answered (pytest's engine): it is
    not the runtime's time. A worker that says so keeps the item however long qconform's own work
    takes (with --case-timeout 0.5 a slow diagnosis made 'timeout' verdicts certify never gave);
    one that does not, times out as before."""
    from support import SlowOwnWorkJob

    from qconform.pool import IsolatedPool
    from qconform.verdicts import TIMEOUT

    for say, expected in ((True, [("done", "a"), ("done", "b")]), (False, None)):
        pool = IsolatedPool(SlowOwnWorkJob(1.5, say=say), timeout=0.5)
        try:
            pool.submit(["a", "b"])
            got = [pool.result("a"), pool.result("b")]
        finally:
            pool.close()
        if expected is not None:
            assert got == expected
        else:
            assert got[0][0] == TIMEOUT, got

"""Packing (qconform.packing, Pipeline.judge_many, certify --pack): many cases as nodes of one model,
with every verdict still its own single model's wherever it is not a pass from an equivalent packing."""
from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from qconform import corpus as corpus_mod
from qconform import cli, facts, packing
from qconform.apps import certify, packing_check
from qconform.execution import IsolatedEngine, Options, Pipeline
from qconform.model import build_model
from qconform.runner import declared_scope, resolve
from qconform.verdicts import CRASHED, PASS

FAULTS_FILE = Path(__file__).with_name("fault_runners.py")


@pytest.fixture(scope="module")
def index():
    return corpus_mod.index(corpus_mod.DEFAULT_ROOT)


def _slice(index, prefix: str, n: int | None = None) -> list:
    ids = [r.id for r in index.refs if r.id.startswith(prefix)]
    return [index.case(i) for i in ids[:n]]


def test_a_pack_is_a_valid_model_whose_parts_share_no_name(index):
    cases = _slice(index, "QuantizeLinear-21/float32-int8/", 12)
    groups = packing.groups(cases)
    assert groups and max(len(g) for g in groups) >= 2
    part = max(groups, key=len)
    model = packing.pack([m for _, m in part])
    onnx.checker.check_model(model, full_check=True)
    names = [o.name for o in model.graph.output]
    assert len(names) == len(set(names)) == sum(len(m.graph.output) for _, m in part)
    assert all(n.name.startswith(f"c{j}_") for j, (_, m) in enumerate(part) for n in model.graph.node[j:j + 1])


def test_an_information_case_is_never_packed(index):
    cases = [c for c in (index.case(r.id) for r in index.refs if r.id.startswith("QuantizeLinear-21/"))
             if c.information][:3]
    assert cases and packing.groups(cases) == []


@pytest.mark.parametrize("runner", ["cpu-ref", pytest.param("onnxruntime", marks=pytest.mark.needs("onnxruntime"))])
def test_a_packed_batch_gives_the_records_of_single_runs(index, runner):
    """The same record for every case, packed or not, but the packed mark; some cases did run packed."""
    cases = _slice(index, "QuantizeLinear-21/float32-", 70) + _slice(index, "DequantizeLinear-21/int8-", 40)
    r = resolve(runner, {})
    single = [Pipeline.local(r, diagnose=True).judge(c) for c in cases]
    packed = Pipeline(Options("", runner, diagnose=True, pack=True), r).judge_many(cases)
    assert [p.id for p in packed] == [c.id for c in cases]
    for s, p in zip(single, packed):
        got = p.record.to_dict()
        assert got.pop("packed", None) in (None, True)
        assert got == s.record.to_dict(), p.id
        assert not p.record.packed or p.verdict == PASS  # only a pass is ever taken from a packed model
    assert sum(bool(p.record.packed) for p in packed) > 10


def test_a_crash_inside_a_packed_model_is_no_case_s_verdict(index):
    """The pool replays a batch whose packed run killed its worker one case at a time: every case
    gets its single model's verdict, none is blamed for the packed model's crash."""
    ids = [c.id for c in _slice(index, "QuantizeLinear-13/float32-", 40)]
    engine = IsolatedEngine(Options(str(index.root), f"{FAULTS_FILE}:PackCrashRunner", pack=True), index,
                            timeout=60.0, batch=64)
    try:
        engine.submit(ids)
        got = {cid: engine.result(cid) for cid in ids}
    finally:
        engine.close()
    assert engine.restarts >= 1  # the packed run did crash its worker
    assert not [cid for cid, r in got.items() if r.verdict == CRASHED]
    single = Pipeline.local(resolve("cpu-ref", {}))
    assert all(r.verdict == single.judge(index.case(cid)).verdict for cid, r in got.items())
    assert not any(r.record.packed for r in got.values())  # replayed alone: nothing came from a pack


def test_a_crashing_case_in_a_pack_is_still_its_own_crash(index):
    """FaultRunner segfaults on one case's own model (and on a pack named after it): packed or not,
    that case crashes and its neighbours keep their verdicts."""
    from fault_runners import FAULTS

    crash = next(cid for cid, f in FAULTS.items() if f == "segfault")
    group = [r.id for r in index.refs if r.id.startswith("QuantizeLinear-13/float32-int8/basic/")]
    ids = [i for i in group if i not in FAULTS or i == crash]
    engine = IsolatedEngine(Options(str(index.root), f"{FAULTS_FILE}:FaultRunner", pack=True), index,
                            timeout=60.0, batch=64)
    try:
        engine.submit(ids)
        got = {cid: engine.result(cid) for cid in ids}
    finally:
        engine.close()
    assert got[crash].verdict == CRASHED
    assert all(r.verdict != CRASHED for cid, r in got.items() if cid != crash)


def test_the_measurement_finds_a_runner_that_differs_inside_a_pack(index):
    cases = _slice(index, "QuantizeLinear-21/float32-int8/", 40)
    from fault_runners import PackDiffersRunner
    from qconform.runners.cpu_ref import CpuRefRunner

    same = packing_check.measure(Pipeline.local(CpuRefRunner()), cases)
    assert same.compared > 10 and same.differing == []
    differs = packing_check.measure(Pipeline.local(PackDiffersRunner()), cases)
    assert differs.compared == same.compared
    assert len(differs.differing) > differs.compared // 2  # every case with an integer element


def _facts_with(monkeypatch, *entries: facts.Packing) -> None:
    real = facts.load

    def load(source):
        ff = real(source)
        return ff.__class__(ff.source, ff.path, ff.measured, ff.facts, tuple(entries))

    monkeypatch.setattr(facts, "load", load)


@pytest.mark.needs("onnxruntime")
def test_certify_packs_only_on_an_equivalence_measured_for_this_corpus(monkeypatch, index):
    from qconform.apps.packing_check import runtime_version

    from qconform.runner import identity, resolve

    ident = identity(resolve("onnxruntime"), "onnxruntime")  # the installed one, the bundled runner's file
    assert ident["version"] == runtime_version("onnxruntime", {})
    digest = index.digest
    _facts_with(monkeypatch)
    assert "no measurement" in certify._packing(ident, digest)["why"]
    everywhere = dict(version=ident["version"], platform="", date="2026-11-27", corpus=digest[:12])
    _facts_with(monkeypatch, facts.Packing(**everywhere, compared=100, differing=1))
    p = certify._packing(ident, digest)
    assert not p["used"] and "1 of 100 cases gave other outputs" in p["why"]
    _facts_with(monkeypatch, facts.Packing(**{**everywhere, "corpus": "0" * 12}, compared=100))
    assert not certify._packing(ident, digest)["used"]
    _facts_with(monkeypatch, facts.Packing(**{**everywhere, "selection": "cases X*"}, compared=100))
    assert not certify._packing(ident, digest)["used"]
    _facts_with(monkeypatch, facts.Packing(**everywhere, compared=100))
    assert certify._packing(ident, digest)["used"]
    assert not certify._packing({**ident, "remote": "127.0.0.1:1"}, digest)["used"]
    # a device's stored results whose device.json names this very runtime: nothing of it ran here
    offline = certify._packing({**ident, "results": "/lab/export"}, digest)
    assert not offline["used"] and "run on this machine" in offline["why"]
    # another runner whose describe() says onnxruntime (a file of one's own): the measurement is not its
    threads = certify._packing({**ident, "load": {"runner": "onnxruntime", "options": {"threads": "0"}}}, digest)
    assert not threads["used"] and "measured with its default settings" in threads["why"]
    impostor = {**ident, "source": {"path": "/tmp/fake_ort.py", "sha256": "0" * 64}}
    refused = certify._packing(impostor, digest)
    assert not refused["used"] and "only a bundled runtime" in refused["why"]
    _facts_with(monkeypatch, facts.Packing(**{**everywhere, "version": "0.1"}, compared=100))
    assert not certify._packing(ident, digest)["used"]


def test_a_declared_scope_is_the_bundled_runners_not_any_runner_claiming_its_name():
    """onnxruntime-qnn is certified on its declared scope; a runner of one's own whose describe() names
    the QNN provider runs the whole corpus (its scope was never declared)."""
    from qconform.runner import identity, resolve

    qnn = {"name": "onnxruntime", "providers": ["QNNExecutionProvider"], "options": {"optimize": "ORT_DISABLE_ALL"}}
    bundled = identity(resolve("onnxruntime"), "onnxruntime")["source"]
    assert declared_scope({**qnn, "source": bundled}) is not None
    assert declared_scope({**qnn, "source": {"path": "/tmp/fake_qnn.py", "sha256": "0" * 64}}) is None


@pytest.mark.needs("onnxruntime")
def test_certify_pack_same_verdicts_and_says_which_cases_ran_packed(monkeypatch, index, tmp_path):
    """The front-end: on an equivalence measurement, --pack gives the unpacked run's verdicts, marks
    the passes that came from packed models, and says so in the report."""
    from qconform.runner import identity

    ident = identity(resolve("onnxruntime", {}), "onnxruntime", {})
    _facts_with(monkeypatch, facts.Packing(facts.release(ident["version"]), "", "2026-11-27", "the whole corpus",
                                           index.digest[:12], 100, 0))
    reports = {}
    for flag in ([], ["--pack"]):
        out = tmp_path / ("packed" if flag else "single")
        cli.main(["certify", "--runner", "onnxruntime", "--case", "QuantizeLinear-21/float32-*", "-j", "1",
                      "--report", str(out), *flag])
        reports[bool(flag)] = json.loads((out / "report.json").read_text())
    single, packed = reports[False], reports[True]
    assert {c["id"]: c["verdict"] for c in single["cases"]} == {c["id"]: c["verdict"] for c in packed["cases"]}
    info = packed["invocation"]["packing"]
    assert info["used"] and info["cases"] == sum(1 for c in packed["cases"] if c.get("packed")) > 0
    assert all(c["verdict"] == PASS for c in packed["cases"] if c.get("packed"))
    assert "packing" not in single["invocation"] and not any(c.get("packed") for c in single["cases"])


def test_the_facts_files_keep_a_packing_measurement():
    text = facts.dump(facts.load("onnxruntime"))
    ff = facts.parse("onnxruntime", text)
    assert facts.dump(ff) == text
    with pytest.raises(facts.FactsError, match="packing #1"):
        facts.parse("onnxruntime", 'source = "onnxruntime"\n[[packing]]\ncompared = 3\n')
    assert ff.packing and all(p.version and p.corpus for p in ff.packing)


def test_facts_drift_says_when_a_recorded_packing_equivalence_no_longer_holds():
    from qconform.apps.facts_drift import Drift

    equivalent = facts.Packing("1.0", compared=10)
    differing = facts.Packing("1.0", compared=10, differing=2)
    for recorded, now, drifted in ((equivalent, [], False), (equivalent, ["X/a"], True),
                                   (differing, ["X/a"], False), (differing, [], True)):
        d = Drift("onnxruntime", "1.0", "1.0", "here", packing=(recorded, 10, now))
        assert d.packing_drifted is drifted and d.drifted is drifted
        assert ("changed: measure again" in d.text()) is drifted

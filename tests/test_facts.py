"""What qconform knows about other software (qconform/facts/*.toml) against what it really does.

1. onnx-reference and onnxruntime run every corpus case and every probe in-process (build_model +
   execute + compare), where their installed version is *measured* on this platform (elsewhere the
   checks skip and name ``qconform facts drift``). Every failure (or error) must be explained by a
   fact of that runner that applies to this version and platform; every refusal by an ``unsupported``
   fact whose message matches; and every applicable fact's example must still show the fact.
   Facts outside their version range or platform condition are not asserted.
2. ONNX's own node tests for the quantization operators (``onnx.backend.test.case``): cpu-ref (the
   oracle) runs each single-node example, and the official expected outputs must match bit for bit
   (NaN as a class), or an ``onnx-node-tests`` fact must cover the test.
3. ml_dtypes facts point at the test in tests/test_floats.py that pins the behaviour.
4. The files themselves: canonical form, unique ids, no TODO left by the drift command, and
   qconform/docs/facts.md rendered from them.

The two corpus observations run in parallel in two spawned processes (one per runner). Set
QCONFORM_FACTS_GOLDEN=/path/to/golden to check the facts against another corpus (e.g. a freshly
regenerated one) before it replaces qconform/golden/.
"""
from __future__ import annotations

import ast
import functools
import importlib
import multiprocessing as mp
import os
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from qconform import dtypes, facts
from qconform import platform as plat
from qconform.apps import facts_drift as drift
from qconform.facts import docs, observe
from qconform.facts.probes import PROBES

FILES = facts.load_all()
FACTS = facts.all_facts()
HERE = Path(__file__).resolve().parent


@functools.cache
def _runner(name: str):
    from qconform.runner import resolve

    return resolve(name)


def _golden() -> Path:
    from qconform.plugin import default_golden

    return Path(os.environ.get("QCONFORM_FACTS_GOLDEN") or default_golden())


@functools.cache
def _asserted(fid: str) -> bool:
    return not facts.asserted(fid, FILES)[1]


# ----------------------------------------------------------------------------------------------
# Observations (session fixture: one spawned process per checkable runner source, in parallel)
# ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def observations(tmp_path_factory) -> dict[str, dict[str, observe.Result] | str]:
    """source -> its observations, or the reason its facts are not checked here. Made once per run:
    pytest-xdist spreads this module's tests over its workers, and the first to need them observes
    while the others wait, then read what it kept in the run's own temp folder."""
    import hashlib
    import pickle

    from conftest import built_once

    with built_once(tmp_path_factory, "facts-observations") as root:
        kept = root / f"{hashlib.sha256(str(_golden()).encode()).hexdigest()[:16]}.pickle"  # per corpus
        if kept.is_file():
            return pickle.loads(kept.read_bytes())
        out = _observe()
        kept.with_suffix(".part").write_bytes(pickle.dumps(out))
        kept.with_suffix(".part").replace(kept)  # whole or absent, should this worker be killed
        return out


def _observe() -> dict[str, dict[str, observe.Result] | str]:
    out: dict[str, dict[str, observe.Result] | str] = {}
    todo = []
    for source in facts.RUNNER_SOURCES:
        _, why = facts.checkable(source, FILES)
        if why:
            out[source] = why
        else:
            todo.append(source)
    root = str(_golden())
    with ProcessPoolExecutor(max_workers=max(1, min(len(todo), os.cpu_count() or 1)), mp_context=mp.get_context("spawn")) as pool:
        futures = {s: pool.submit(observe.observe, facts.SOURCES[s].runner, root, True, facts.SOURCES[s].check,
                                  frozenset(f.example for f in FILES[s].facts),
                                  hangs=FILES[s].hanging_examples) for s in todo}
        out.update({s: f.result() for s, f in futures.items()})
    return out


def _results(observations, source: str) -> dict[str, observe.Result]:
    """The source's observations its own facts speak for (a variant's others are its parent's:
    ``Runtime.facts_scope``)."""
    got = observations[source]
    if isinstance(got, str):
        pytest.skip(got)
    src = facts.SOURCES[source]
    return {key: r for key, r in got.items() if src.speaks_for(observe.case_id_of(key))}


def _group(case_id: str) -> str:
    return "/".join(case_id.split("/", 3)[:3])


def _shown(uncovered: dict[str, observe.Result], source: str, what: str) -> str:
    groups = Counter(_group(cid) for cid in uncovered)
    shown = "\n".join(f"  {cid}: {r.verdict}\n    " + r.message.replace("\n", "\n    ")
                      for cid, r in sorted(uncovered.items())[:12])
    return (f"{len(uncovered)} {source} {what} are explained by no fact applying to {source} "
            f"{facts.SOURCES[source].version()} on {plat.label()} ({len(groups)} op/types/family groups, e.g. "
            f"{', '.join(g for g, _ in groups.most_common(8))}); run `{facts.DRIFT_COMMAND} --runner {source}` "
            f"to see the rows it would propose:\n{shown}")


def _applying(source: str) -> list[facts.Fact]:
    version = facts.SOURCES[source].version()
    return FILES[source].active(version)


@pytest.mark.parametrize("source", facts.RUNNER_SOURCES)
def test_every_disagreement_is_explained_by_a_fact(observations, source):
    results = _results(observations, source)
    active = _applying(source)
    uncovered = {cid: r for cid, r in results.items()
                 if r.disagrees and not any(observe.explains(f, cid, r) for f in active)}
    assert not uncovered, _shown(uncovered, source, "disagreements (fail or error)")


@pytest.mark.parametrize("source", facts.RUNNER_SOURCES)
def test_every_refusal_is_explained_by_a_fact(observations, source):
    results = _results(observations, source)
    active = _applying(source)
    uncovered = {cid: r for cid, r in results.items()
                 if r.verdict == "unsupported" and not any(observe.explains(f, cid, r) for f in active)}
    assert not uncovered, _shown(uncovered, source, "refusals (unsupported, with their reason)")


def _runner_facts():
    return [pytest.param(f, id=f.id) for f in FACTS if f.source in facts.RUNNER_SOURCES]


@pytest.mark.parametrize("fact", _runner_facts())
def test_fact_example_shows_the_fact(observations, fact):
    results = _results(observations, fact.source)
    _, why = facts.asserted(fact.id, FILES)
    if why:
        pytest.skip(why)
    if fact.probe is not None:
        assert fact.probe in PROBES, f"{fact.id}: no probe {fact.probe!r} in qconform/facts/probes.py"
    else:
        assert fact.kind != "must-reject", f"{fact.id}: a must-reject fact's example is a probe"
        if fact.example not in results:
            pytest.fail(f"{fact.id}: example {fact.example} is not in the corpus (stale id)")
    assert fact.covers(fact.example) or fact.probe is not None and _probe_covered(fact), \
        f"{fact.id}: its globs do not cover its own example {fact.example}"
    ok, seen = observe.shows(fact, results)
    assert ok, (f"{fact.id} ({fact.kind}) no longer shows on {fact.source} {facts.SOURCES[fact.source].version()} "
                f"on {plat.label()}: {seen}. If the runtime changed, close the fact's range with "
                f"`{facts.DRIFT_COMMAND} --runner {fact.source}`.")


def _probe_covered(fact: facts.Fact) -> bool:
    from qconform.facts.probes import probe_case

    return fact.covers(probe_case(fact.probe)[0].id)


def test_every_probe_is_used():
    used = {f.probe for f in FACTS if f.probe is not None}
    assert used == set(PROBES), f"probes without a fact: {sorted(set(PROBES) - used)}; " \
                                f"facts naming unknown probes: {sorted(used - set(PROBES))}"


def test_ml_dtypes_facts_name_a_test():
    tree = ast.parse((HERE / "test_floats.py").read_text())
    tests = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}
    for f in FACTS:
        if f.source == "ml_dtypes":
            assert f.example in tests, f"{f.id}: tests/test_floats.py has no {f.example}()"


# ----------------------------------------------------------------------------------------------
# The files
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("source", list(facts.SOURCES))
def test_facts_file_is_canonical_and_reviewed(source):
    path = facts.path_of(source)
    text = path.read_text()
    assert facts.dump(FILES[source]) == text, \
        f"{path} is not in canonical form: run `qconform facts fmt` and commit the result"
    todo = [f.id for f in FILES[source].facts if drift.TODO in (f.does + f.spec)]
    assert not todo, f"{path}: facts {todo} still say TODO (proposed by the drift command, not reviewed)"
    assert FILES[source].measured, f"{path}: no measured version"


def test_fact_ids_are_unique_and_globs_look_like_case_ids():
    ids = [f.id for f in FACTS]
    assert len(ids) == len(set(ids))
    node_names = set(_node_names())
    for f in FACTS:
        for p in f.cases:
            if f.source in facts.RUNNER_SOURCES:
                assert "/" in p or p.endswith("*"), f"{f.id}: {p!r} does not look like a case-id glob"
        if f.source == "onnx-node-tests":
            assert f.example in node_names and f.covers(f.example), f"{f.id}: no node test {f.example}"


def test_rendered_facts_document_is_current():
    assert docs.RENDERED.read_text() == docs.render(FILES, facts.SOURCES), \
        "qconform/docs/facts.md is stale: run `qconform facts render`"


def test_every_facts_source_is_known_to_the_platform_vocabulary():
    for f in FACTS:
        plat.check_condition(f.platform)
    for ff in FILES.values():
        for m in ff.measured:
            plat.check_condition(m.platform)


# ----------------------------------------------------------------------------------------------
# ONNX's node tests against cpu-ref
# ----------------------------------------------------------------------------------------------

NODE_MODULES = ("quantizelinear", "dequantizelinear", "dynamicquantizelinear", "qlinearmatmul")
QDQ = ("QuantizeLinear", "DequantizeLinear")
#: onnx 1.23.2: single-node examples per op (the issue's "38").
NODE_COUNTS_1_23_2 = {"QuantizeLinear": 13, "DequantizeLinear": 14, "DynamicQuantizeLinear": 3, "QLinearMatMul": 8}


@functools.cache
def _node_tests() -> tuple:
    """(name, model, inputs, outputs) of every single-node quantization test in onnx.backend.test.case.

    The export functions are called with onnx's registry swapped for an empty one, so the result does
    not depend on whether something else imported (or collected) the node tests before."""
    import onnx.backend.test.case.node as node_mod
    from onnx.backend.test.case.base import Base

    modules = [importlib.import_module(f"onnx.backend.test.case.node.{m}") for m in NODE_MODULES]
    saved = (node_mod._NodeTestCases, node_mod._existing_names, node_mod._TargetOpType)
    node_mod._NodeTestCases, node_mod._existing_names, node_mod._TargetOpType = [], {}, None
    try:
        for mod in modules:
            for cls in vars(mod).values():
                if isinstance(cls, type) and issubclass(cls, Base) and cls.__module__ == mod.__name__:
                    for attr in sorted(vars(cls)):
                        if attr.startswith("export"):
                            np.random.seed(0)  # as onnx's exporter does
                            getattr(cls, attr)()
        collected = list(node_mod._NodeTestCases)
    finally:
        node_mod._NodeTestCases, node_mod._existing_names, node_mod._TargetOpType = saved

    def arr(v):
        return numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else np.asarray(v)

    tests = []
    for tc in collected:
        if len(tc.model.graph.node) != 1:  # the *_expanded function bodies
            continue
        for inputs, outputs in tc.data_sets:
            tests.append((tc.name, tc.model, [arr(v) for v in inputs], [arr(v) for v in outputs]))
    return tuple(sorted(tests, key=lambda t: t[0]))


def _node_names():
    return [t[0] for t in _node_tests()]


def test_node_test_count():
    counts = Counter(t[1].graph.node[0].op_type for t in _node_tests())
    assert set(counts) == set(NODE_COUNTS_1_23_2), counts
    if onnx.__version__ == "1.23.2":
        assert dict(counts) == NODE_COUNTS_1_23_2
    assert counts["QuantizeLinear"] + counts["DequantizeLinear"] >= 27


def _bits_equal(expected: np.ndarray, actual: np.ndarray) -> str:
    """'' when equal as qconform.compare compares (raw bits, any NaN matches any NaN)."""
    te, ta = dtypes.get(expected.dtype), dtypes.get(actual.dtype)
    if te != ta:
        return f"element type {ta.name}, expected {te.name}"
    if expected.shape != actual.shape:
        return f"shape {actual.shape}, expected {expected.shape}"
    eb, ab = te.to_bits(expected), te.to_bits(actual)
    differ = (eb != ab) & ~(te.is_nan_bits(eb) & te.is_nan_bits(ab))
    if differ.any():
        idx = tuple(int(i) for i in np.argwhere(differ)[0])
        return f"{int(differ.sum())} element(s) differ, first at {idx}: 0x{int(ab[idx]):x}, expected 0x{int(eb[idx]):x}"
    return ""


@pytest.mark.parametrize("name", _node_names())
def test_node_test_agrees_with_cpu_ref(name):
    from qconform.execution import Pipeline

    (_, model, inputs, outputs), = [t for t in _node_tests() if t[0] == name]
    op = model.graph.node[0].op_type
    feeds = {vi.name: v for vi, v in zip(model.graph.input, inputs)}
    call, _ = Pipeline.local(_runner("cpu-ref")).call_model(model, feeds)
    if call.kind == "unsupported" and op not in QDQ:
        pytest.skip(f"cpu-ref has no oracle for {op} here: {call.message}")
    assert call.kind == "ok", f"cpu-ref cannot run {name}: {call.kind}: {call.message}"
    problems = [f"output {i}: {p}" for i, (e, a) in enumerate(zip(outputs, call.outputs)) if (p := _bits_equal(e, a))]
    if len(call.outputs) != len(outputs):
        problems.append(f"{len(call.outputs)} outputs, expected {len(outputs)}")
    rows = [f for f in FACTS if f.source == "onnx-node-tests" and f.covers(name) and _asserted(f.id)]
    if rows:
        assert problems, f"{name} now agrees with cpu-ref; rows {[r.id for r in rows]} are stale"
    else:
        assert not problems, f"{name} (official expectation vs cpu-ref): {'; '.join(problems)}; " \
                             f"add an onnx-node-tests fact to qconform/facts/onnx-node-tests.toml if the expectation is wrong"


# ----------------------------------------------------------------------------------------------
# The drift command
# ----------------------------------------------------------------------------------------------
def _fake_file() -> dict[str, facts.FactFile]:
    """A small facts file for the drift logic, independent of what is installed."""
    def fact(fid, kind, versions, cases, example, **kw):
        return facts.Fact(fid, "onnxruntime", kind, versions, "", "op", tuple(cases), example, "does", "spec", **kw)

    ff = facts.FactFile("onnxruntime", Path("onnxruntime.toml"), (facts.Measured("1.0.0", "x86_64"),), (
        fact("E1", "erratum", "", ["Q-1/*"], "Q-1/a/f/fixed"),
        fact("E2", "erratum", "<1.1", ["Q-2/*"], "Q-2/a/f/back"),
        fact("E3", "unsupported", "", ["Q-3/*"], "Q-3/a/f/refused", message="no kernel for Q"),
        fact("E4", "erratum", "", ["Q-4/*"], "Q-4/a/f/still"),
    ))
    return {"onnxruntime": ff}


def _r(verdict, message=""):
    return observe.Result(verdict, "spec" if verdict == "pass" else None, "spec", message)


def test_drift_closes_fixed_facts_widens_returning_ones_and_proposes_new_ones():
    results = {
        "Q-1/a/f/fixed": _r("pass"),  # E1 fixed in 1.1.0: close to <1.1.0
        "Q-2/a/f/back": _r("fail", "1 element(s) differ"),  # E2 (<1.1) shows again: widen
        "Q-3/a/f/refused": _r("unsupported", "Could not find an implementation for Q(3) node"),  # new reason
        "Q-4/a/f/still": _r("fail", "x"),
        "Q-5/int8-int8/g/new": _r("error", "runner raised RuntimeError: boom"),
        "Q-5/int8-int8/g/other": _r("fail", "y"),
    }
    feats = frozenset({"avx2"})
    d = drift.compute("onnxruntime", results, "1.1.0", against="1.0.0", feats=feats, machine="x86_64",
                      files=_fake_file())
    assert [f.id for f, _ in d.fixed] == ["E1", "E3"]
    assert {old.id: new.versions for old, new, _ in d.changed} == {"E1": "<1.1.0", "E2": "", "E3": "<1.1.0"}
    assert [f.id for f in d.holds] == ["E2", "E4"]
    new = {f.kind: (f, ids) for f, ids in d.new}
    assert new["erratum"][0].cases == ("Q-*/int8-int8/*",) and new["erratum"][0].versions == ">=1.1.0"
    assert sorted(new["erratum"][1]) == ["Q-5/int8-int8/g/new", "Q-5/int8-int8/g/other"]
    refusal = new["unsupported"][0]
    assert refusal.cases == ("Q-3/*",) and refusal.message and drift.TODO in refusal.spec
    import re

    assert re.search(refusal.message, "Could not find an implementation for Q(3) node")
    assert d.measured_added is not None and d.measured_added.version == "1.1.0"
    assert plat.condition_holds(d.measured_added.platform, feats, "x86_64")
    text = facts.dump(d.proposed)
    assert facts.parse("onnxruntime", text, known_readings=set()).facts == d.proposed.facts
    assert "fixed or changed (2)" in d.text() and "new (2)" in d.text()


def test_a_variants_drift_leaves_the_cases_outside_its_facts_scope_to_its_parents_facts():
    """onnxruntime-optimized's facts speak for the QDQ patterns only (``Runtime.facts_scope``): a single
    node runs as plain onnxruntime runs it, whose facts hold there, so the drift proposes no copy of
    them (a fact is written once) and says how many cases it left to them; a pattern still drifts."""
    ff = facts.FactFile("onnxruntime-optimized", Path("onnxruntime-optimized.toml"), ())
    results = {"QuantizeLinear-21/float32-int8/basic/x": _r("fail", "1 element(s) differ"),
               "qdq.Add-21/int8-int8-int8/ties/x": _r("fail", "1 element(s) differ")}
    d = drift.compute("onnxruntime-optimized", results, "1.32.0", feats=frozenset(), machine="x86_64",
                      files={"onnxruntime-optimized": ff})
    assert [ids for _, ids in d.new] == [["qdq.Add-21/int8-int8-int8/ties/x"]]
    assert d.elsewhere == ("onnxruntime", 1) and "left to onnxruntime's facts: 1 observed case(s)" in d.text()


def test_drift_reports_no_drift_when_the_facts_describe_the_runtime():
    results = {"Q-1/a/f/fixed": _r("fail"), "Q-2/a/f/back": _r("fail"), "Q-4/a/f/still": _r("fail"),
               "Q-3/a/f/refused": _r("unsupported", "no kernel for Q(3)")}
    d = drift.compute("onnxruntime", results, "1.0.0", feats=frozenset(), machine="x86_64", files=_fake_file())
    assert not d.drifted and not d.fixed and "no drift" in d.text()


def test_drift_against_1_31_1_reports_what_1_32_0_fixed_and_changed(observations):
    """Acceptance of the reproducible-tests issue: with 1.32.0 installed, the facts recorded for 1.31.1
    show E23, E30 and E32 as fixed, and the opset 27 / IR 14 refusals as changed."""
    results = _results(observations, "onnxruntime")
    installed = facts.SOURCES["onnxruntime"].version()
    if installed != "1.32.0":
        pytest.skip(f"this check is about onnxruntime 1.32.0 (the pin); installed {installed}")
    d = drift.compute("onnxruntime", results, installed, against="1.31.1", files=FILES)
    fixed = {f.id for f, _ in d.fixed}
    assert {"E23", "E30", "E32"} <= fixed, d.text()
    refusals = {f.id for f, _ in d.fixed if f.kind == "unsupported"}
    ir14 = next(f for f in FILES["onnxruntime"].facts if "IR version" in f.message)
    opset27 = next(f for f in FILES["onnxruntime"].facts if f.example == "probe:opset-27")
    assert {ir14.id, opset27.id} <= refusals, d.text()
    assert not d.new, "the recorded facts for 1.32.0 should explain everything: " + d.text()


def test_drift_command_writes_a_proposal_a_reviewer_can_apply(tmp_path):
    from support import copy_group

    from qconform.cli import main

    golden = copy_group(tmp_path / "golden", "DequantizeLinear-10")
    code = main(["facts", "drift", "--runner", "onnx-reference", "--golden", str(golden), "--out",
                 str(tmp_path / "out")])
    assert code in (0, 1)
    if code == 1:
        proposed = (tmp_path / "out" / "onnx-reference.toml").read_text()
        assert facts.parse("onnx-reference", proposed).source == "onnx-reference"
        assert (tmp_path / "out" / "onnx-reference.diff").read_text().startswith("--- a/onnx-reference.toml")


def test_drift_from_a_finished_report_sees_what_a_fresh_run_sees(tmp_path):
    """``facts drift --from-report``: a whole-corpus run of a slow runtime (IREE: hours here) is not
    repeated to compute its drift; the report's observations give the same uncovered cases."""
    import json

    from conftest import run_pytest
    from support import copy_group

    golden = copy_group(tmp_path / "golden", "QuantizeLinear-10")
    rep = tmp_path / "report"
    proc = run_pytest("--runner=onnx-reference", f"--golden={golden}", f"--report={rep}", "-p", "no:randomly",
                      "--isolate=off", "-q")
    assert (rep / "report.json").is_file(), proc.stdout[-2000:]
    got = drift.from_report(rep, golden)
    fresh = drift.run("onnx-reference", golden, whole=True)
    assert (got.source, got.installed, got.platform) == (fresh.source, fresh.installed, fresh.platform)
    assert got.holds and [f.id for f in got.holds] == [f.id for f in fresh.holds if not f.example.startswith(facts.PROBE)]
    on_cases = [(f.kind, f.cases, ids) for f, ids in fresh.new if not ids[0].startswith(facts.PROBE)]
    assert [(f.kind, f.cases, ids) for f, ids in got.new] == on_cases

    # describe()'s build string (OpenVINO's) is read as the release the facts' ranges name
    report = json.loads((rep / "report.json").read_text())
    tagged = tmp_path / "tagged.json"
    tagged.write_text(json.dumps({**report, "runner": {**report["runner"],
                                                        "version": report["runner"]["version"] + "-22982-e213a14/x"}}))
    assert drift.from_report(tagged, golden).installed == got.installed
    assert facts.release("2026.4.1-22982-e213a147257-releases/2026/4") == "2026.4.1"
    assert facts.release("0.27.0.post1") == "0.27.0.post1"

    # a run that did not finish, or ran another corpus, is refused with the reason
    for change, why in (({"complete": False}, "did not finish"), ({"corpus": {"digest": "0" * 64}}, "another corpus")):
        bad = tmp_path / f"bad-{len(why)}.json"
        bad.write_text(json.dumps({**report, **change}))
        with pytest.raises(facts.FactsError, match=why):
            drift.from_report(bad, golden)


def test_a_drift_from_a_report_reads_a_plugin_providers_own_version_and_its_bucketed_reasons():
    """onnxruntime-qnn's report names onnxruntime 1.32.0 as its runner and its execution provider's
    package, onnxruntime-qnn 2.7.0, apart: its facts are keyed by the latter. And a report keeps
    unsupported reasons bucketed (``n1_Clip_N``), which a fact's message for the runtime's own words
    (``n[\\d.]+_Clip_[\\d.]+``) must still match, or every such fact reads as fixed."""
    import re

    from qconform.facts.observe import _unbucketed
    from qconform.report.model import reason_bucket

    runner = {"name": "onnxruntime", "version": "1.32.0", "providers": ["QNNExecutionProvider"],
              "execution_provider": {"package": "onnxruntime-qnn", "version": "2.7.0"}}
    assert drift._version_of(runner, "onnxruntime-qnn") == "2.7.0"
    assert drift._version_of({"name": "onnxruntime", "version": "1.32.0"}, "onnxruntime") == "1.32.0"
    said = "QNN.backendValidateOpConfig() failed for node `n1_Clip_12` of type `ReluMinMax` with error code 3110"
    fact = r"QNN\.backendValidateOpConfig\(\) failed for node `n[\d.]+_Clip_[\d.]+` of type `ReluMinMax`"
    assert re.search(fact, said) and not re.search(fact, reason_bucket(said))
    assert re.search(fact, _unbucketed(reason_bucket(said)))

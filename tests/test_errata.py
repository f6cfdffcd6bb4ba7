"""The errata table of docs/semantics.md against what the sources really do (issue 3, §4).

1. onnx-reference and onnxruntime run every corpus case in-process (build_model + execute +
   compare). Every case either fails or errors in the default profile must be covered by an
   ``erratum`` or ``oracle-gap`` row of that runner. Every runner row's example must still show what
   the row says (no stale rows).
2. ONNX's own node tests for the quantization operators (``onnx.backend.test.case``): cpu-ref (the
   oracle) runs each single-node example, and the official expected outputs must match bit for bit
   (NaN as a class), or an ``onnx-node-tests`` row must cover the test.
3. ml_dtypes rows point at the test in tests/test_floats.py that pins the behaviour.

The two corpus sweeps run in parallel in two spawned processes (one per runner). Set
QCONFORM_ERRATA_GOLDEN=/path/to/golden to check the table against another corpus (e.g. a freshly
regenerated one) before it replaces golden/.
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

from conformance import dtypes, errata
from conformance.case import Arg, Case, Draft, Reading

ROWS = errata.load()
HERE = Path(__file__).resolve().parent

# ----------------------------------------------------------------------------------------------
# Probes: drafts for behaviour the corpus does not exercise (yet), named by rows as probe:NAME
# ----------------------------------------------------------------------------------------------


def _arg(name: str, t: str, value, initializer: bool = False) -> Arg:
    return Arg(name, t, np.asarray(value, dtype=dtypes.get(t).dtype), initializer)


def _probe(op: str, opset: int, types: str, name: str, inputs, attrs=None) -> Draft:
    return Draft(op, opset, types, "probe", name, tuple(inputs), dict(attrs or {}))


PROBES: dict[str, Draft] = {
    # (x - zp) * s with a non-zero float8 zero point: reference raises, ORT fails at run time.
    "dq-float8-zero-point": _probe(
        "DequantizeLinear", 21, "float8e4m3fn-float32", "dq-float8-zero-point",
        [_arg("x", "float8e4m3fn", [1.0, 2.0, -3.0]), _arg("x_scale", "float32", 2.0, True),
         _arg("x_zero_point", "float8e4m3fn", 1.0, True)]),
    # the reference ignores a float4 zero point: x = 1, zp = 1, s = 2 gives 2 instead of 0.
    "dq-float4-zero-point": _probe(
        "DequantizeLinear", 23, "float4e2m1-float32", "dq-float4-zero-point",
        [_arg("x", "float4e2m1", [1.0, 2.0, -3.0]), _arg("x_scale", "float32", 2.0, True),
         _arg("x_zero_point", "float4e2m1", 1.0, True)]),
    # must-reject: D = 4, S = 3, B = 2 (accepted block sizes for S = 3 are [ceil(4/3), ceil(4/2) - 1] = []).
    "blocked-bad-block-size": _probe(
        "QuantizeLinear", 21, "float32-uint8", "blocked-bad-block-size",
        [_arg("x", "float32", [1.0, 2.0, 3.0, 4.0]), _arg("y_scale", "float32", [1.0, 1.0, 1.0], True),
         _arg("y_zero_point", "uint8", [0, 0, 0], True)], {"axis": 0, "block_size": 2}),
    # must-reject: an e8m0 scale without output_dtype would make the output float8e8m0 (not in T3).
    "dq-e8m0-no-output-dtype": _probe(
        "DequantizeLinear", 24, "uint8-float8e8m0", "dq-e8m0-no-output-dtype",
        [_arg("x", "uint8", [1, 2, 3]), _arg("x_scale", "float8e8m0", 1.0, True)]),
}
#: Output type of a must-reject probe's model (the oracle refuses to compute one).
MUST_REJECT_OUTPUT = {"blocked-bad-block-size": "uint8", "dq-e8m0-no-output-dtype": "float8e8m0"}


def _probe_case(name: str) -> tuple[Case, bool]:
    """The probe as a Case, and whether the oracle calls it an invalid model (must-reject)."""
    from conformance.oracle import InvalidModel, evaluate

    draft = PROBES[name]
    try:
        return evaluate(draft), False
    except InvalidModel:
        out = dtypes.get(MUST_REJECT_OUTPUT[name])
        shape = draft.inputs[0].value.shape
        dummy = Reading("none", (out.from_bits(np.zeros(shape, dtype=np.uint64)),))
        return Case(draft, ("y",), (dummy,), (None,), "principles"), True


@functools.cache
def _runner(name: str):
    from conformance.runner import resolve

    return resolve(name)


# ----------------------------------------------------------------------------------------------
# The two corpus sweeps (session fixture: one spawned process per runner, in parallel)
# ----------------------------------------------------------------------------------------------


def _golden() -> Path:
    from conformance.plugin import default_golden

    return Path(os.environ.get("QCONFORM_ERRATA_GOLDEN") or default_golden())


@functools.cache
def _available(runner: str) -> bool:
    from conformance.runner import RunnerError

    try:
        _runner(runner)
    except RunnerError:
        return False
    return True


@pytest.fixture(scope="session")
def sweeps() -> dict[str, dict[str, errata.Result]]:
    root = str(_golden())
    names = [r for r in errata.RUNNER_SOURCES if _available(r)]
    with ProcessPoolExecutor(max_workers=max(1, len(names)), mp_context=mp.get_context("spawn")) as pool:
        futures = {r: pool.submit(errata.run_corpus, r, root) for r in names}
        return {r: f.result() for r, f in futures.items()}


def _results(sweeps, runner: str) -> dict[str, errata.Result]:
    if runner not in sweeps:
        pytest.skip(f"runner {runner} is not available here")
    return sweeps[runner]


def _group(case_id: str) -> str:
    op, types, family, _ = case_id.split("/", 3)
    return f"{op}/{types}/{family}"


@pytest.mark.parametrize("runner", errata.RUNNER_SOURCES)
def test_every_disagreement_is_in_the_table(sweeps, runner):
    results = _results(sweeps, runner)
    failing = {cid: r for cid, r in results.items() if r.disagrees}
    uncovered = {cid: r for cid, r in failing.items()
                 if not errata.covering(ROWS, runner, cid, errata.FAILING_KINDS)}
    if uncovered:
        groups = Counter(_group(cid) for cid in uncovered)
        shown = "\n".join(f"  {cid}: {r.verdict}\n    " + r.message.replace("\n", "\n    ")
                          for cid, r in sorted(uncovered.items())[:12])
        pytest.fail(f"{len(uncovered)} of {len(failing)} {runner} disagreements are in no erratum/oracle-gap "
                    f"row of docs/semantics.md#errata ({len(groups)} op/types/family groups, e.g. "
                    f"{', '.join(g for g, _ in groups.most_common(8))}):\n{shown}")


def _runner_rows():
    return [pytest.param(r, id=r.id) for r in ROWS if r.source in errata.RUNNER_SOURCES]


@pytest.mark.parametrize("row", _runner_rows())
def test_row_example_shows_the_row(sweeps, row):
    results = _results(sweeps, row.source)
    if row.probe is not None:
        assert row.probe in PROBES, f"{row.id}: no probe {row.probe!r} in tests/test_errata.py"
        case, invalid = _probe_case(row.probe)
        assert row.covers(case.id), f"{row.id}: its globs do not cover its own probe {case.id}"
        if row.kind == "must-reject":
            assert invalid, f"{row.id}: the oracle accepts probe {row.probe!r}; a must-reject probe is an invalid model"
            from conformance.isolation import execute
            from conformance.model import build_model

            call = execute(_runner(row.source), build_model(case), case.feeds)
            assert call.kind == "ok", f"{row.id}: {row.source} now rejects the invalid model ({call.kind}: " \
                                      f"{call.message}); the row is stale"
            return
        assert not invalid, f"{row.id}: the oracle calls probe {row.probe!r} an invalid model"
        result = errata.run_case(_runner(row.source), case)
        where = f"probe {row.probe}"
    else:
        assert row.kind != "must-reject", f"{row.id}: a must-reject row's example is a probe"
        assert row.covers(row.example), f"{row.id}: its globs do not cover its own example {row.example}"
        if row.example not in results:
            if not any(row.covers(cid) for cid in results):
                pytest.skip(f"{row.id}: the corpus has no case this row covers yet (example {row.example})")
            pytest.fail(f"{row.id}: example {row.example} is not in the corpus (stale id)")
        result = results[row.example]
        where = row.example
    shown = f"{where}: {result.verdict} (reading {result.reading}) {result.message}"
    if row.kind in errata.FAILING_KINDS:
        assert result.disagrees, f"{row.id} ({row.kind}): {row.source} no longer disagrees on {shown}"
    elif row.kind == "reading":
        assert result.verdict == "pass" and row.reading in (result.reading or "").split("+"), \
            f"{row.id}: {row.source} should pass {where} with reading {row.reading!r}; got {shown}"
        assert result.strict_disagrees, f"{row.id}: {where} passes strict, so it shows no non-first reading"
    elif row.kind == "unsupported":
        assert result.verdict == "unsupported", f"{row.id}: {row.source} now runs {shown}"
    else:
        pytest.fail(f"{row.id}: kind {row.kind!r} needs a probe example")


def test_every_probe_is_used():
    used = {r.probe for r in ROWS if r.probe is not None}
    assert used == set(PROBES), f"probes without a row: {sorted(set(PROBES) - used)}; " \
                                f"rows naming unknown probes: {sorted(used - set(PROBES))}"


def test_ml_dtypes_rows_name_a_test():
    tree = ast.parse((HERE / "test_floats.py").read_text())
    tests = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}
    for row in ROWS:
        if row.source == "ml_dtypes":
            assert row.example in tests, f"{row.id}: tests/test_floats.py has no {row.example}()"


def test_table_is_well_formed():
    assert [r.id for r in ROWS] == [f"E{i}" for i in range(1, len(ROWS) + 1)]
    for source in errata.RUNNER_SOURCES:
        assert any(r.source == source and r.kind in errata.FAILING_KINDS for r in ROWS)
    node_names = set(_node_names())
    for row in ROWS:
        for p in row.patterns:
            if row.source in errata.RUNNER_SOURCES:
                assert "/" in p or p.endswith("*"), f"{row.id}: {p!r} does not look like a case-id glob"
        if row.source == "onnx-node-tests":
            assert row.example in node_names and row.covers(row.example), f"{row.id}: no node test {row.example}"


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
    """'' when equal as conformance.compare compares (raw bits, any NaN matches any NaN)."""
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
    from conformance.isolation import execute

    (_, model, inputs, outputs), = [t for t in _node_tests() if t[0] == name]
    op = model.graph.node[0].op_type
    feeds = {vi.name: v for vi, v in zip(model.graph.input, inputs)}
    call = execute(_runner("cpu-ref"), model, feeds)
    if call.kind == "unsupported" and op not in QDQ:
        pytest.skip(f"cpu-ref has no oracle for {op} here: {call.message}")
    assert call.kind == "ok", f"cpu-ref cannot run {name}: {call.kind}: {call.message}"
    problems = [f"output {i}: {p}" for i, (e, a) in enumerate(zip(outputs, call.outputs)) if (p := _bits_equal(e, a))]
    if len(call.outputs) != len(outputs):
        problems.append(f"{len(call.outputs)} outputs, expected {len(outputs)}")
    rows = [r for r in ROWS if r.source == "onnx-node-tests" and r.covers(name)]
    if rows:
        assert problems, f"{name} now agrees with cpu-ref; rows {[r.id for r in rows]} are stale"
    else:
        assert not problems, f"{name} (official expectation vs cpu-ref): {'; '.join(problems)}; " \
                             f"add an onnx-node-tests row to docs/semantics.md#errata if the expectation is wrong"

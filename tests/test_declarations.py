"""Operators are declared once (qconform/declarations/operators.py) and read from there: the
declarations agree with the schemas and the oracle, no other list of operator names exists in the
package, and qconform/docs/guide-op.md is enough to add one (a toy operator, judged through the
engine by a real onnxruntime) and is followed backwards by every operator there is."""
from __future__ import annotations

import ast
import json
import re

import numpy as np
import pytest
from conftest import REPO

from qconform import corpus as corpus_mod
from qconform import schemas
from qconform.case import Draft
from qconform.declarations import operators
from qconform.declarations.operator import Input, Kind, Operator, Role
from qconform.oracle import ORACLES
from qconform.verdicts import PASS

PKG = REPO / "qconform"


def _code_files():
    return [f for f in PKG.rglob("*.py") if not f.is_relative_to(PKG / "docs")]


def test_each_declaration_matches_its_schema_and_oracle():
    for op in operators.OPERATORS:
        for since in op.versions:
            spec = schemas.get(op.op, since, op.domain)
            assert [i.name for i in op.inputs] == [f.name for f in spec.inputs], op.label
            assert (op.domain, op.op, since) in ORACLES, f"{op.label}-{since} has no oracle"
        assert op.output_like == "" or op.output_like in [i.name for i in op.inputs], op.label
        tensors = {i.name for i in op.inputs} | {"y", "x", "a", "b", "w", "A", "B"}
        for i in op.inputs:
            if i.role in (Role.SCALE, Role.ZERO_POINT):
                assert i.of in tensors, (op.label, i.name, i.of)
    from qconform.oracle.graph import FloatOp

    declared = {(o.domain, o.op) for o in operators.OPERATORS}
    quantized = {(d, o) for (d, o, _), oracle in ORACLES.items() if not isinstance(oracle, FloatOp)}
    assert quantized <= declared, "an oracle for an operator nobody declared (a pattern's float op is a FloatOp)"


def _op_name_lists(tree: ast.AST, names: frozenset[str]) -> list[int]:
    """Line numbers of collection literals naming two or more operators, and of strings that list
    operators as alternatives (a regular expression's ``A|B``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            elts = node.elts
        elif isinstance(node, ast.Dict):
            elts = [k for k in node.keys if k is not None]
        else:
            elts = None
        if elts is not None:
            hits = [e for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                    and re.sub(r"^com\.microsoft\.|-.*$", "", e.value) in names]
            if len(hits) >= 2:
                found.append(node.lineno)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            pairs = re.findall(r"([A-Za-z]\w*)\)?\|\(?([A-Za-z]\w*)", node.value)  # A|B, as a regex lists them
            if any(a in names and b in names for a, b in pairs):
                found.append(node.lineno)
    return found


def test_no_list_of_operator_names_outside_the_declarations():
    names = operators.names()
    where = {}
    for f in _code_files():
        if f.is_relative_to(PKG / "declarations"):
            continue
        lines = _op_name_lists(ast.parse(f.read_text(encoding="utf-8")), names)
        if lines:
            where[f.relative_to(REPO).as_posix()] = lines
    assert not where, f"lists of operator names outside qconform/declarations/: {where}"


def test_the_check_sees_a_planted_list():
    tree = ast.parse('OPS = ("QuantizeLinear", "QLinearMatMul")\nPAT = r"(DequantizeLinear|QuantizeLinear)"\n')
    assert _op_name_lists(tree, operators.names()) == [1, 2]


#: Files that still hold a list of the patterns' float op names, each with what it is; the float ops
#: are registered once (``FloatOp`` in qconform/oracle/graph.py, with what each is: ``terms``,
#: ``unary``, ``moves``, ``clamps``, ``adds``, ``averages``, ``bias``, ``accumulates``, ``exact``), and a list
#: derived from there leaves this table. What stays is the module's own data, not a property of the ops.
FLOAT_OP_LISTS = {
    "qconform/generators/explored_graphs.py": "the explorer's attribute draws, a function per float op (a table "
    "keyed by op, as the registry is); a generator sits below the oracle and cannot read FloatOp",
    "qconform/generators/patterns.py": "the ops each pattern family drafts, in the order its cases are written; a "
    "generator sits below the oracle (architecture.md's layers) and cannot read FloatOp",
    "qconform/generators/patterns_ops.py": "the ops a depth family drafts, in the order its cases are written; a "
    "generator sits below the oracle and cannot read FloatOp",
    "qconform/generators/patterns_pool.py": "the pools a depth family drafts, in the order its cases are written; a "
    "generator sits below the oracle and cannot read FloatOp",
    "qconform/diagnosis/models/fused.py": "NOT_INTEGER_KERNEL_PATTERNS: the pattern groups the corpus had when "
    "tract's failures were measured (the model's evidence, not a property of the ops); its scopes read FloatOp",
}


def _float_op_names() -> frozenset[str]:
    from qconform.oracle.graph import float_ops

    return frozenset(o.op for o in float_ops())


def test_no_list_of_float_op_names_outside_their_registration():
    """The patterns' float ops (Conv, MatMul, the pools ...) are not declared operators, so the check
    above, reading ``operators.names()``, did not see a list of them (gating's ``_REDUCING`` set of
    the ops that sum): their registration says what each sums, and no new list of them appears."""
    names = _float_op_names()
    where = {}
    for f in _code_files():
        rel = f.relative_to(REPO).as_posix()
        if f.is_relative_to(PKG / "declarations") or rel == "qconform/oracle/graph.py":
            continue
        lines = _op_name_lists(ast.parse(f.read_text(encoding="utf-8")), names)
        if lines:
            where[rel] = lines
    assert set(where) <= set(FLOAT_OP_LISTS), f"lists of float op names: {where}"
    gone = set(FLOAT_OP_LISTS) - set(where)
    assert not gone, f"no list left there, drop from FLOAT_OP_LISTS: {gone}"


def test_each_float_op_trait_holds_with_the_others():
    """What a FloatOp's fields say agrees with itself: an op that moves, clamps or averages has one
    data input, a window average sums, a bias is an accumulator's, an accumulator sums two inputs."""
    from qconform.oracle.graph import float_ops

    for o in float_ops():
        assert o.unary or not (o.moves or o.clamps or o.averages), o.op
        assert o.terms is not None or not o.averages, o.op
        assert o.accumulates or not o.bias, o.op
        assert not (o.accumulates and (o.unary or o.adds)), o.op


def test_the_float_op_check_sees_the_old_reducing_set():
    tree = ast.parse('_REDUCING = {"Conv", "MatMul", "Gemm", "AveragePool", "GlobalAveragePool", "Resize"}\n')
    assert _op_name_lists(tree, _float_op_names()) == [1]
    assert _op_name_lists(tree, operators.names()) == []  # why the declared operators' check missed it


@pytest.mark.parametrize("op, most", [("QLinearMatMul", 8), ("DynamicQuantizeLinear", 7)])
def test_an_operator_is_named_by_few_code_files(op, most):
    """Essential places only: the declaration, the oracle, the generator, the kernels' plan, the
    deviation models, and citations of real reports in their evidence."""
    files = sorted(f.relative_to(REPO).as_posix() for f in _code_files() if op in f.read_text(encoding="utf-8"))
    assert len(files) <= most, files


# -- guide-op.md, backwards -------------------------------------------------------------------------
def test_every_operator_stands_where_the_guide_says():
    """Each declared operator: an oracle module under qconform/oracle/ registering every version and
    imported by the package, a generator family yielding its groups, its semantics.md section, and a
    reviewed group per version in the corpus."""
    semantics = (PKG / "docs" / "semantics.md").read_text(encoding="utf-8")
    init = (PKG / "oracle" / "__init__.py").read_text(encoding="utf-8")
    index = {p.stem for p in (PKG / "golden" / "index").glob("*.jsonl")}
    for op in operators.OPERATORS:
        for since in op.versions:
            module = type(ORACLES[(op.domain, op.op, since)]).__module__
            assert module.startswith("qconform.oracle."), module
            assert f" {module.rsplit('.', 1)[-1]}" in init or f"{module.rsplit('.', 1)[-1]}," in init, module
            assert f"{op.label}-{since}" in index, f"no corpus group {op.label}-{since}"
        assert f'<a id="{op.section}"></a>' in semantics, f"{op.label}: no section {op.section}"


def test_every_pattern_op_has_a_float_op():
    """guide-pattern.md backwards: each pattern group's central op is a float op of the registry."""
    from qconform.oracle.graph import float_ops

    groups = {p.stem for p in (PKG / "golden" / "index").glob("qdq.*.jsonl")}
    ops = {g.split(".", 1)[1].rsplit("-", 1)[0] for g in groups}
    assert ops, "no pattern group"
    missing = sorted(o for o in ops if o not in ("FakeQuant", "Requant") and o not in {f.op for f in float_ops()})
    assert not missing, missing


# -- guide-op.md, forwards: a toy operator -------------------------------------------------------------
def test_a_toy_operator_by_the_guide(monkeypatch, tmp_path):
    """Steps 1, 2, 4 of guide-op.md for Abs-13 on int8 (a toy: the suite does not certify Abs),
    declared in a temporary module, then judged through the engine by onnxruntime."""
    pytest.importorskip("onnxruntime", reason="onnxruntime missing: pip install -e '.[onnxruntime]'")
    from qconform import oracle as oracle_pkg
    from qconform.apps.diagnosis_run import run_cases
    from qconform.generators.common import draft
    from qconform.oracle.base import Evaluation, OpOracle, register
    from qconform.runner import resolve

    # 1. declare it
    toy = Operator("", "Abs", (13,), Kind.INTEGER, (Input("X", Role.DATA),), ("Y",), "principles")
    monkeypatch.setattr(operators, "OPERATORS", operators.OPERATORS + (toy,))
    monkeypatch.setitem(operators._BY_KEY, toy.key, toy)
    monkeypatch.setitem(schemas.IN_SCOPE, toy.key, toy.versions)
    schemas.since_version.cache_clear()

    # 2. compute it: one class per version, registered
    class Abs13(OpOracle):
        op, since, output_names = "Abs", 13, ("Y",)

        def evaluate(self, d: Draft, primary_only: bool = False) -> Evaluation:
            x = d.inputs[0].value.astype(np.int64)
            ev = Evaluation(clause="principles", primary_only=primary_only)
            ev.add("spec", (((np.abs(x) + 128) % 256 - 128).astype(np.int8),))  # |−128| wraps in int8
            return ev

    register(Abs13())
    try:
        # 4. generate it: drafts from the schema, with the declaration's input roles
        spec = schemas.get("Abs", 13)
        combo = {"T": "int8"}
        drafts = [draft(spec, combo, "basic", "every-code", {"X": np.arange(-128, 128, dtype=np.int8)}),
                  draft(spec, combo, "basic", "small", {"X": np.array([[-3, 0, 5]], np.int8)})]
        assert all(not d.inputs[0].initializer for d in drafts), "a data input is a graph input"
        cases = [oracle_pkg.evaluate(d) for d in drafts]
        assert cases[0].id == "Abs-13/int8/basic/every-code"
        # written and read back as a corpus, then judged through the engine
        digest = corpus_mod.write(cases, tmp_path / "golden")
        back = corpus_mod.load(tmp_path / "golden")
        assert back.digest == digest and [c.id for c in back.cases] == sorted(c.id for c in cases)
        run = run_cases(resolve("onnxruntime"), back.cases, diagnose=False)
        assert [r["verdict"] for r in run.records] == [PASS, PASS], json.dumps(run.records)[:400]
    finally:
        del ORACLES[("", "Abs", 13)]
        schemas.since_version.cache_clear()

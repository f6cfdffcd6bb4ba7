"""Verdicts are named once: ``qconform/verdicts.py`` holds every word a case, a runner call, a group
of cases, a scope or a sweep unit is judged with; no other module of the package spells one as a
string literal (a typo there would be a verdict nobody counts)."""
from __future__ import annotations

import ast
import json
from pathlib import Path

from qconform import verdicts
from qconform.verdicts import DEVIATING, Call, Conformance, Probe, Status, SweepStatus, Verdict

PACKAGE = Path(verdicts.__file__).resolve().parent
#: Every judging word, but the few that are also the names of record fields ("reading", "ran",
#: "golden": a sweep unit's and a probe's words that double as fields, checked where they are compared).
WORDS = {str(m) for enum in (Verdict, Call, Status, Conformance, Probe, SweepStatus) for m in enum} - {
    "reading", "ran", "golden"}
#: Literals equal to a judging word that are not one, each with the reason: (module, word) -> why.
NOT_VERDICTS = {
    ("worker.py", "ok"): "a field of the device protocol's welcome (docs/protocol.md)",
    ("worker.py", "error"): "a field of the device protocol's refusal (docs/protocol.md)",
    ("runners/remote.py", "error"): "a field of the device protocol's refusal (docs/protocol.md)",
    ("runners/remote.py", "timeout"): "the name of a --runner-opt (the seconds it waits for an answer)",
    ("runners/ortweb_runner.py", "ok"): "a field of the Node process's answers (ortweb_server.mjs)",
    ("runners/ortweb_runner.py", "error"): "a field of the Node process's answers (ortweb_server.mjs)",
    ("diagnosis/diagnose.py", "error"): "a field of report.json's diagnosis errors: a model's error text",
    ("report/markdown.py", "error"): "the same field, read",
    ("plugin/report.py", "error"): "the same field, read",
    ("report/certificate.py", "ok"): "a certificate's tone, the CSS class of report.html's statement box",
    ("platform.py", "info"): "the name of a function, in __all__",
    ("runners/iree_runner.py", "crashed"): "a word in a runtime's own message",
    ("kernels/__init__.py", "ok"): "a kernel parameter's name: the output kind (qkernels.h's `ok`)",
    ("generators/block_sizes.py", "partial"): "a word in a case's name: the last block is partial",
}


def _literals(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


def test_no_verdict_literal_outside_verdicts_module():
    found, used = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "verdicts.py" or rel.startswith("docs/"):  # docs/findings: generated reproducers
            continue
        for line, value in _literals(path):
            if value in WORDS:
                if (rel, value) in NOT_VERDICTS:
                    used.add((rel, value))
                else:
                    found.append(f"qconform/{rel}:{line}: {value!r}")
    assert not found, "verdict words spelled as literals (import them from qconform.verdicts):\n" + "\n".join(found)
    assert used == set(NOT_VERDICTS), f"allowed literals no longer present: {sorted(set(NOT_VERDICTS) - used)}"


def test_verdicts_are_their_own_strings():
    """report.json, the state and record files write a verdict as its value and read it back equal."""
    assert json.dumps({Verdict.PASS: [Verdict.NOT_RUN]}) == '{"pass": ["not-run"]}'
    assert f"{Verdict.FAIL}" == "fail" and "fail" in DEVIATING and Verdict("crashed") in DEVIATING
    assert all(Call(k).verdict == Verdict(k) for k in Call if k != Call.OK)
    assert Probe.of(Call.OK) == Probe.RAN and Probe.of(Call.ERROR) == Probe.REJECTED

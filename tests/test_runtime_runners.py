"""The third-party runtimes' bundled runners (openvino, tract, tinygrad: optional extras).

Where the extra is installed, a slice of the corpus runs through the real runtime and every case
gets a verdict (the runtime's own failures are verdicts; a crash, a hang or a harness error is not
acceptable). Where it is not, choosing the runner says in one line which extra to install."""
from __future__ import annotations

import json

import pytest
from conftest import run_pytest

from qconform import tools
from qconform.runner import EXTRAS, RunnerError, resolve

SLICE = "opset_21 and (family_basic or family_specials or family_ties)"
#: What each runtime's runner needs besides its package (qconform.tools names).
ALSO_NEEDS = {"tinygrad": ("clang",)}


@pytest.mark.parametrize("name", sorted(EXTRAS))
def test_a_missing_runtime_names_the_extra_to_install(name):
    if tools.find(EXTRAS[name]):
        pytest.skip(f"{EXTRAS[name]} is installed here")
    with pytest.raises(RunnerError, match=rf"^runner '{name}' needs the {EXTRAS[name]} package: "
                                          rf"pip install 'qconform\[{name}\]'$"):
        resolve(name)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.needs(EXTRAS[n], *ALSO_NEEDS.get(n, ())))
                                  for n in sorted(EXTRAS)])
def test_a_runtime_runner_gives_every_case_of_a_slice_a_verdict(name, tmp_path):
    runner = resolve(name)
    ident = runner.describe()
    assert ident["name"] == name and ident["version"] and ident["device"]
    r = run_pytest(f"--runner={name}", f"--report={tmp_path}", "-q", "--tb=no", "-m", SLICE, timeout=900)
    rep = json.loads((tmp_path / "report.json").read_text())
    counts = rep["counts"]
    assert counts["crashed"] == counts["timeout"] == 0, r.stdout[-3000:]
    assert counts["pass"] > 0 and counts["collected"] == len(rep["cases"]), counts
    assert "INTERNALERROR" not in r.stdout
    reasons = [rep["reasons"][c["reason"]]["text"] for c in rep["cases"] if c["verdict"] == "unsupported"]
    assert all(r and "\n" not in r for r in reasons), reasons  # the runtime's own reason, one line

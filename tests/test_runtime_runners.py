"""The third-party runtimes' bundled runners (openvino, tract, tinygrad: optional extras).

Where the extra is installed, a slice of the corpus runs through the real runtime and every case
gets a verdict (the runtime's own failures are verdicts; a crash, a hang or a harness error is not
acceptable). Where it is not, choosing the runner says in one line which extra to install."""
from __future__ import annotations

import json

import pytest
from conftest import run_pytest

from qconform import tools
from qconform.runner import EXTRAS, RunnerError, resolve, runtime_name
from qconform.verdicts import UNSUPPORTED

#: The single-node quantization ops at opset 21 (the QDQ patterns are tested per runtime in test_patterns
#: and test_qnn: a compiling runtime would compile each one here too); a runtime that declares a scope
#: (QNN runs no single Q/DQ node) runs the basic cases of its scope instead.
SLICE = "opset_21 and (op_QuantizeLinear or op_DequantizeLinear) and (family_basic or family_specials or family_ties)"
SCOPED_SLICE = "opset_21 and family_basic and not (op_QuantizeLinear or op_DequantizeLinear)"
#: The runtimes that compile each model run a part of SLICE (``-m``, ``-k``): its cases from and to
#: float32 without per-axis ones (each quantized type each way, with the specials and ties: 77 of 312);
#: IREE, whose compiles are slowest, the per-tensor basic ones (21 compiles). ``--run-slow`` gives them
#: SLICE; the scoreboard runs them over the whole corpus.
COMPILING_SLICE = {
    **dict.fromkeys(("openvino", "tinygrad", "tvm"), (SLICE, "float32 and not per-axis")),
    "iree": ("opset_21 and (op_QuantizeLinear or op_DequantizeLinear) and family_basic", "per-tensor and float32"),
}
#: What each runtime's runner needs besides its package (qconform.tools names).
ALSO_NEEDS = {"tinygrad": ("clang",)}


def _refusals(rep: dict) -> list[str]:
    """The reason of every case the runner refused, as the report states it."""
    return [rep["reasons"][c["reason"]]["text"] for c in rep["cases"] if c["verdict"] == UNSUPPORTED]


@pytest.mark.parametrize("name", sorted(EXTRAS))
def test_a_missing_runtime_names_the_extra_to_install(name):
    if tools.find(EXTRAS[name]):
        pytest.skip(f"{EXTRAS[name]} is installed here")
    with pytest.raises(RunnerError, match=rf"^runner '{name}' needs the {EXTRAS[name]} package: "
                                          rf"pip install 'qconform\[{name}\]'$"):
        resolve(name)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.needs(EXTRAS[n], *ALSO_NEEDS.get(n, ())))
                                  for n in sorted(EXTRAS)])
def test_a_runtime_runner_gives_every_case_of_a_slice_a_verdict(name, tmp_path, request):
    runner = resolve(name)
    ident = runner.describe()
    assert runtime_name(ident) == name and ident["version"] and ident["device"]  # a variant: its runner's name
    from qconform.declarations.runtimes import RUNTIMES

    scoped = bool(RUNTIMES[name].scope) if name in RUNTIMES else False
    select = ["-m", SCOPED_SLICE if scoped else SLICE]
    if name in COMPILING_SLICE and not request.config.getoption("--run-slow"):
        marks, keywords = COMPILING_SLICE[name]
        select = ["-m", marks, "-k", keywords]
    r = run_pytest(f"--runner={name}", f"--report={tmp_path}", "-q", "--tb=no", *select, timeout=900)
    rep = json.loads((tmp_path / "report.json").read_text())
    counts = rep["counts"]
    assert counts["crashed"] == counts["timeout"] == 0, r.stdout[-3000:]
    assert counts["pass"] > 0 and counts["collected"] == len(rep["cases"]), counts
    assert "INTERNALERROR" not in r.stdout
    reasons = _refusals(rep)
    assert all(r and "\n" not in r for r in reasons), reasons  # the runtime's own reason, one line


@pytest.mark.needs(EXTRAS["iree"])
def test_iree_compile_cache_gives_the_same_module_and_keeps_refusals(tmp_path, corpus):
    """``--runner-opt cache=DIR``: the second pass reads each module (or iree-compile's refusal) back
    instead of compiling it; outputs and refusals are the first pass's, bit for bit."""
    from qconform.model import build_model
    from qconform.runner import Unsupported

    picks = [c for c in corpus.cases if c.id.startswith("DequantizeLinear-21/int8-float32/basic/")][:2]
    picks += [c for c in corpus.cases if c.id.startswith("QuantizeLinear-21/float32-float8e4m3fn/basic/")][:1]
    cold, warm = resolve("iree", {"cache": str(tmp_path)}), resolve("iree", {"cache": str(tmp_path)})
    assert cold.describe()["options"]["compile_cache"].startswith("on")

    def outcome(runner, case):
        try:
            return [o.tobytes() for o in runner.run(build_model(case), case.feeds)]
        except Unsupported as exc:
            return str(exc)

    first = [outcome(cold, c) for c in picks]
    entries = sorted(p.name for p in tmp_path.iterdir())
    assert len(entries) == len(picks) and all(e.endswith((".vmfb", ".refused")) for e in entries)
    assert [outcome(warm, c) for c in picks] == first
    assert sorted(p.name for p in tmp_path.iterdir()) == entries  # nothing compiled again


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.needs(EXTRAS[n])) for n in ("openvino",)])
def test_int64_indices_reach_the_runtime(name, tmp_path):
    """GatherBlockQuantized's int64 indices are handed to the runtime: a runner whose type table lacked
    int64 refused every such case itself ('cannot carry INT64'), a verdict on the harness, not the runtime."""
    from qconform import cli

    cli.main(["certify", "--runner", name, "-j", "1", "--min-cases", "1", "--report", str(tmp_path),
              "--case", "com.microsoft.GatherBlockQuantized-1/uint8-float32-int64/basic/*"])
    rep = json.loads((tmp_path / "report.json").read_text())
    reasons = _refusals(rep)
    assert rep["counts"]["pass"] > 0 and not [r for r in reasons if "cannot carry" in r], (rep["counts"], reasons)

"""The vendor's path: the shipped examples, a runner's own mistakes, tracebacks, reruns,
baselines and the command-line papercuts -- each as a vendor meets it."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import REPO, run_pytest
from qconform import corpus
from qconform.apps import baseline
from qconform.gating import baseline as gating
from qconform.verdicts import Stale

EXAMPLES = REPO / "qconform" / "examples"
QCONFORM = [sys.executable, "-m", "qconform.cli"]

RUNNERS = textwrap.dedent('''
    import numpy as np
    from qconform.runners.cpu_ref import CpuRefRunner

    class Raises(CpuRefRunner):
        name = "raises"

        def prepare(self, model):
            def inner_kernel_step(feeds):
                raise ValueError("scale tensor has no device buffer")
            return inner_kernel_step

    class BadIdentity(CpuRefRunner):
        name = "bad-identity"

        def describe(self):
            raise OSError("driver not loaded")

    class Scalars(CpuRefRunner):
        """Returns rank-0 outputs as numpy scalars, as many bindings do."""
        name = "scalars"

        def prepare(self, model):
            healthy = super().prepare(model)
            return lambda feeds: [o[()] if o.ndim == 0 else o for o in healthy(feeds)]
''')


@pytest.fixture()
def runners(tmp_path) -> str:
    f = tmp_path / "vendor_runners.py"
    f.write_text(RUNNERS)
    return str(f)


def _report(d: Path) -> dict:
    return json.loads((d / "report.json").read_text())


@pytest.mark.slow
def test_the_example_runner_has_no_error_over_the_default_corpus(tmp_path):
    r = run_pytest(f"--runner={EXAMPLES / 'my_runner.py'}:MyRunner", f"--report={tmp_path}", "-q", "--tb=no",
                   timeout=900)
    counts = _report(tmp_path)["counts"]
    assert counts["collected"] == len(corpus.index(corpus.DEFAULT_ROOT)), counts
    assert counts["error"] == counts["crashed"] == counts["timeout"] == 0, (counts, r.stdout[-2000:])
    assert counts["pass"] > 1000 and counts["unsupported"] > 0


def test_the_example_runner_has_no_error_over_opset_21(tmp_path):
    """The default run's share of the whole-corpus check above (--run-slow)."""
    r = run_pytest(f"--runner={EXAMPLES / 'my_runner.py'}:MyRunner", f"--report={tmp_path}", "-q", "--tb=no",
                   "-m", "opset_21", timeout=900)
    counts = _report(tmp_path)["counts"]
    assert counts["error"] == counts["crashed"] == counts["timeout"] == 0, (counts, r.stdout[-2000:])
    assert counts["pass"] > 100 and counts["unsupported"] > 0


def test_the_bytes_example_carries_the_types_numpy_lacks(tmp_path):
    r = run_pytest(f"--runner={EXAMPLES / 'bytes_runner.py'}:BytesRunner", f"--report={tmp_path}", "-q",
                   "--tb=no", "-m", "opset_21 and (types_float32_int4 or types_int4_float32 or "
                                    "types_float32_float8e4m3fn or types_float8e5m2_float32)")
    rep = _report(tmp_path)
    passed = {c["id"].split("/")[1] for c in rep["cases"] if c["verdict"] == "pass"}
    assert {"float32-int4", "int4-float32", "float32-float8e4m3fn", "float8e5m2-float32"} <= passed, r.stdout[-2000:]
    # The example calls onnxruntime bare, without the bundled runner's facts: its errors are exactly
    # the models onnxruntime refuses at run time, each an erratum in the facts (E35, E48).
    import onnxruntime

    from qconform import facts

    refusals = [f for f in facts.load("onnxruntime").facts
                if f.kind == "erratum" and f.does.startswith(("run-time failure", "refuses the model at run time"))
                and f.holds_for(onnxruntime.__version__)]
    errors = [c["id"] for c in rep["cases"] if c["verdict"] == "error"]
    assert all(any(f.covers(cid) for f in refusals) for cid in errors), errors


@pytest.mark.parametrize("isolate", ["on", "off"])
def test_a_runner_that_raises_shows_its_traceback_at_v_and_in_the_report(runners, tmp_path, isolate):
    subset = ["-m", "op_QuantizeLinear and opset_13 and family_basic", f"--isolate={isolate}"]
    r = run_pytest(f"--runner={runners}:Raises", *subset, "-q", f"--report={tmp_path}")
    assert "ValueError: scale tensor has no device buffer" in r.stdout  # the first line, always
    assert "inner_kernel_step" not in r.stdout  # the traceback only when asked
    failure = _report(tmp_path)["failures"][0]
    assert "inner_kernel_step" in failure["traceback"] and "ValueError" in failure["traceback"]
    r = run_pytest(f"--runner={runners}:Raises", *subset, "-v")
    assert "the runner's traceback:" in r.stdout and 'in inner_kernel_step' in r.stdout, r.stdout[-3000:]


def test_a_runner_whose_describe_raises_is_refused_before_any_case_runs(runners, tmp_path):
    r = run_pytest(f"--runner={runners}:BadIdentity", "-m", "opset_13", f"--report={tmp_path / 'rep'}")
    out = r.stdout + r.stderr
    assert r.returncode == 4  # usage error: nothing ran
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert lines == [f"ERROR: runner '{runners}:BadIdentity': describe() raised OSError: driver not loaded "
                     f"(no case was run)"], lines
    assert "Traceback" not in out and " passed" not in out


@pytest.mark.parametrize("isolate", ["on", "off"])
def test_numpy_scalars_are_accepted_as_0d_arrays(runners, isolate):
    r = run_pytest(f"--runner={runners}:Scalars", "-m", "family_shapes and opset_21", "-k", "rank0",
                   f"--isolate={isolate}", "-q")
    assert r.returncode == 0 and " passed" in r.stdout and "error" not in r.stdout.split("qconform summary")[0], \
        r.stdout[-2000:]


def test_baseline_create_refuses_placeholders_and_refresh_keeps_reasons():
    report = {"cases": [{"id": "A-1/t/basic/x", "verdict": "fail"}, {"id": "A-1/t/basic/y", "verdict": "error"},
                        {"id": "A-1/t/basic/z", "verdict": "unsupported"}, {"id": "A-1/t/basic/w", "verdict": "pass"}]}
    data = baseline.create(report)
    assert [e["id"] for e in data["entries"]] == ["A-1/t/basic/x", "A-1/t/basic/y"]
    with pytest.raises(gating.BaselineError, match="placeholder reason"):
        gating.parse(data)
    data = baseline.create(report, reason="vendor bug 7", expires="2030-01-01")
    assert gating.parse(json.loads(baseline.dumps(data))).entries[0].reason == "vendor bug 7"
    data["entries"].append({"id": "B-2/*", "reason": "not in this run"})
    later = {"cases": [{"id": "A-1/t/basic/x", "verdict": "pass"}, {"id": "A-1/t/basic/y", "verdict": "error"},
                       {"id": "A-1/t/basic/v", "verdict": "fail"}], "invocation": {"filters": ["-k A-1"]}}
    refreshed, dropped, new = baseline.refresh(data, later)  # a filtered run: B-2/* is simply not in it
    assert [d["id"] for d in dropped] == ["A-1/t/basic/x"] and dropped[0]["now"] == "its cases now pass"
    assert refreshed["entries"] == [{"id": "A-1/t/basic/y", "verdict": "error", "reason": "vendor bug 7",
                                     "expires": "2030-01-01"},
                                    {"id": "B-2/*", "reason": "not in this run"}]
    assert new == ["A-1/t/basic/v"]
    refreshed, _, _ = baseline.refresh(data, later, add_new=True)
    assert refreshed["entries"][-1] == {"id": "A-1/t/basic/v", "reason": gating.PLACEHOLDER}


def test_baseline_refresh_removes_exactly_the_stale_entries_the_gate_reports():
    """One rule for staleness: the entries the gate lists as stale are the ones refresh drops: fixed,
    no longer deviating, or (over the whole corpus) matching no case; a live entry covering a
    deviation stays, and so does one a filtered run cannot see."""
    import datetime

    entries = [{"id": "A-1/t/basic/x", "reason": "fixed since"}, {"id": "A-1/t/basic/y", "reason": "still fails"},
               {"id": "A-1/t/basic/z", "reason": "now refused"}, {"id": "B-2/*", "reason": "case gone"}]
    report = {"counts": {"collected": 3}, "cases": [{"id": "A-1/t/basic/x", "verdict": "pass"}, {"id": "A-1/t/basic/y", "verdict": "fail"},
                        {"id": "A-1/t/basic/z", "verdict": "unsupported"}], "failures": []}
    today = datetime.date(2026, 1, 1)
    gate = gating.gate(json.loads(json.dumps(report)), gating.parse({"qconform_baseline": 1, "entries": entries}), today)
    reported = [s["id"] for s in gate["stale"]]
    assert reported == ["A-1/t/basic/x", "A-1/t/basic/z", "B-2/*"]
    refreshed, dropped, _ = baseline.refresh({"entries": entries}, report)
    assert [d["id"] for d in dropped] == reported
    assert [e["id"] for e in refreshed["entries"]] == ["A-1/t/basic/y"]
    filtered = {**report, "invocation": {"filters": ["--case A-1/*"]}}
    gate = gating.gate(json.loads(json.dumps(filtered)), gating.parse({"qconform_baseline": 1, "entries": entries}), today, filtered=True)
    assert [s["id"] for s in gate["stale"]] == [d["id"] for d in baseline.refresh({"entries": entries}, filtered)[1]] \
        == ["A-1/t/basic/x", "A-1/t/basic/z"]


def test_an_entry_shadowed_by_a_behaviour_entry_is_redundant_not_fixed():
    """A per-case entry (written when the case was not diagnosed) whose case a behaviour entry before
    it now accepts: stale as *redundant* -- its case still deviates -- never "its cases now fail"."""
    import datetime

    entries = [{"id": "A-1/t/*", "diagnosis": "round-half-away", "reason": "ties rounded away, accepted"},
               {"id": "A-1/t/basic/y", "reason": "accepted case by case"}]
    report = {"counts": {"collected": 1}, "cases": [{"id": "A-1/t/basic/y", "verdict": "fail"}],
              "failures": [{"id": "A-1/t/basic/y", "verdict": "fail", "diagnosis": ["round-half-away"]}]}
    gate = gating.gate(json.loads(json.dumps(report)), gating.parse({"qconform_baseline": 1, "entries": entries}),
                         datetime.date(2026, 1, 1))
    (stale,) = gate["stale"]
    assert stale["id"] == "A-1/t/basic/y" and stale["state"] == Stale.REDUNDANT and "#1" in stale["why"]
    assert "now fail" not in stale["why"] and gate["passed"]
    assert gating.stale_lines(gate) == ["1 redundant baseline entry (an entry before each accepts its cases): "
                                          "qconform baseline refresh removes them"]
    refreshed, dropped, _ = baseline.refresh({"entries": entries}, report)
    assert [d["id"] for d in dropped] == ["A-1/t/basic/y"] and len(refreshed["entries"]) == 1


def test_certify_forwards_pytest_options_and_writes_a_report(tmp_path):
    r = subprocess.run([*QCONFORM, "certify", "--runner", "cpu-ref", "-k", "QuantizeLinear-13 and per-tensor", "-q"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert _report(tmp_path / "qconform-report")["counts"]["pass"] > 0
    assert not (tmp_path / ".pytest_cache").exists()


def test_a_closed_pipe_ends_quietly_and_tables_fit_120_columns():
    r = subprocess.run(f"{sys.executable} -m qconform.cli coverage | head -3", shell=True, capture_output=True,
                       text=True, timeout=300, cwd=REPO)
    assert r.stderr == "" and len(r.stdout.splitlines()) == 3
    r = subprocess.run([*QCONFORM, "coverage"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert max(len(ln) for ln in r.stdout.splitlines()) <= 120


@pytest.mark.parametrize("cmd", [[], ["certify"], ["sweep"], ["baseline"], ["baseline", "create"],
                                 ["init-runner"], ["coverage"], ["report", "diff"], ["facts", "drift"]])
def test_help_is_plain_text(cmd):
    r = subprocess.run([*QCONFORM, *cmd, "--help"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert r.returncode == 0 and "``" not in r.stdout and ":func:" not in r.stdout, r.stdout


def test_every_subcommand_says_what_it_does():
    """Each subcommand's own --help has a description, not only its usage line."""
    from qconform import cli

    subs = list(cli.subcommands(cli.build_parser()))
    assert len(subs) > 15
    for path, sub, _ in subs:
        assert sub.description and len(sub.description) > 10, " ".join(path)


def test_pytest_help_and_the_hint_without_a_runner(tmp_path):
    r = run_pytest("--help", cwd=tmp_path)
    section = r.stdout[r.stdout.index("qconform"):]
    assert "``" not in section
    r = run_pytest(cwd=tmp_path)
    assert "qconform: no --runner given" in r.stdout and "--runner=onnxruntime" in r.stdout

"""report.json: valid against its schema, and every collected case appears in it with a verdict.

End to end with ``pytester`` against the real bundled runners: onnxruntime over a small subset
of the real corpus, a deliberately wrong runner (cpu-ref with the low bit of int8 outputs
flipped), and the same run under pytest-xdist, whose controller must see what a plain run sees.
Runs use one golden group copied from the bundled corpus (``--golden``): the same real cases,
loaded and collected in a fraction of the time.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from qconform import corpus as corpus_mod
from qconform.report import model
from qconform.verdicts import DEVIATING
from support import SUPPORT, FlipInt8Runner, copy_group  # noqa: F401

pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve()
GROUP = "QuantizeLinear-21"
#: ORT subset: passes, real deviations (±inf to int8/int16, float8 saturation) and unsupported types.
ORT_SUBSET = "family_specials"
FAST = ("-p", "no:randomly", "--isolate=off")  # runner isolation is tested in test_isolation.py


@pytest.fixture(scope="module")
def group_golden(tmp_path_factory) -> Path:
    return copy_group(tmp_path_factory.mktemp("golden"), GROUP)


@pytest.fixture(scope="module")
def small_golden(group_golden: Path, tmp_path_factory) -> Path:
    """int8 and uint8 outputs of the basic and specials families: enough for every verdict kind."""
    cases = [c for c in corpus_mod.load(group_golden).cases
             if c.output_types[0] in ("int8", "uint8") and c.family in ("basic", "specials")]
    assert len(cases) >= 8
    root = tmp_path_factory.mktemp("small")
    corpus_mod.write(cases, root)
    return root


def run_report(pytester: pytest.Pytester, runner: str, golden: Path, *args: str):
    out = pytester.path / "out"
    result = pytester.runpytest(f"--runner={runner}", f"--golden={golden}", f"--report={out}", *FAST, *args)
    return result, json.loads((out / "report.json").read_text())


def validate(report: dict) -> None:
    jsonschema.Draft202012Validator(model.schema()).validate(report)


def check_counts(result: pytest.RunResult, report: dict) -> None:
    """collected == reported, and each verdict count agrees with pytest's own outcome counts."""
    c = report["counts"]
    outcomes = result.parseoutcomes()
    assert c["collected"] == c["reported"] == len(report["cases"]) > 0
    assert c["collected"] == sum(outcomes.get(k, 0) for k in ("passed", "failed", "skipped", "xfailed"))
    assert c["pass"] == outcomes.get("passed", 0)
    assert c["unsupported"] == outcomes.get("skipped", 0)
    assert sum(c[v] for v in DEVIATING) == outcomes.get("failed", 0) + outcomes.get("xfailed", 0)
    bad = {case["id"] for case in report["cases"] if case["verdict"] in DEVIATING}
    assert {f["id"] for f in report["failures"]} == bad
    assert sum(sum(cell["counts"].values()) for cell in report["matrix"]) == c["reported"]


def test_schema_is_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(model.schema())
    assert model.schema()["properties"]["schema_version"]["const"] == model.SCHEMA_VERSION


def test_onnxruntime_report(pytester: pytest.Pytester, group_golden: Path):
    result, report = run_report(pytester, "onnxruntime", group_golden, "-m", ORT_SUBSET)
    validate(report)
    check_counts(result, report)
    assert report["complete"] and not report["interrupted"]
    assert report["runner"]["name"] == "onnxruntime" and report["runner"]["version"]
    assert report["corpus"]["digest"] == corpus_mod.verify(group_golden)
    assert f"-m {ORT_SUBSET!r}" in report["invocation"]["filters"] and report["gate"]["min_cases"] == 0
    assert report["exit_status"] == result.ret
    assert {"pass", "unsupported"} <= {c["verdict"] for c in report["cases"]}
    for f in report["failures"]:
        assert f["clause"], f["id"]
        if f["verdict"] == "fail" and not f["problem"]:
            assert f["first_mismatches"] and f["mismatches"] >= len(f["first_mismatches"])
            m = f["first_mismatches"][0]
            assert m["expected_hex"] != m["actual_hex"] and m["inputs"]
        else:
            assert f["problem"]
    out = pytester.path / "out"
    assert "onnxruntime" in (out / "summary.md").read_text()
    assert (out / "report.html").read_text().startswith("<!DOCTYPE html>")


def test_wrong_runner_report(pytester: pytest.Pytester, small_golden: Path):
    result, report = run_report(pytester, f"{SUPPORT}:FlipInt8Runner", small_golden)
    validate(report)
    check_counts(result, report)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    int8 = {c.id for c in corpus_mod.load(small_golden).cases if c.output_types == ("int8",)}
    assert int8 and {f["id"] for f in report["failures"]} == int8
    assert set(report["gate"]["new_failures"]) == int8 and not report["gate"]["passed"]
    assert report["gate"]["min_cases"] == report["counts"]["collected"]  # unfiltered: the whole corpus
    for f in report["failures"]:
        assert f["verdict"] == "fail" and f["clause"]
        for m in f["first_mismatches"]:
            assert m["expected_bits"] ^ m["actual_bits"] == 1
            assert m["type"] == "int8" and len(m["actual_hex"]) == 4  # 0x.. : two hex digits for 8 bits
    status = {(c["op_version"], c["type_pair"]): c["status"] for c in report["matrix"]}
    assert all(status[(f["op_version"], f["type_pair"])] == "fail" for f in report["failures"])


def test_xdist_controller_sees_every_case(pytester: pytest.Pytester, small_golden: Path):
    """With test paths given, ``-n 2`` runs pytest-xdist workers (without, the corpus runs on the
    engine's own workers: the next test)."""
    _, plain = run_report(pytester, "cpu-ref", small_golden)
    result, dist = run_report(pytester, "cpu-ref", small_golden, "-n", "2", str(small_golden))
    validate(dist)
    check_counts(result, dist)
    assert dist["invocation"]["workers"] == 2 and dist["complete"]
    assert [(c["id"], c["verdict"]) for c in plain["cases"]] == [(c["id"], c["verdict"]) for c in dist["cases"]]


def test_n_over_the_corpus_alone_runs_on_the_engines_workers_and_says_so(pytester: pytest.Pytester,
                                                                         small_golden: Path):
    """``-n 2`` with no test paths: the session is the corpus, whose per-item cost xdist only adds to,
    so the two processes are the engine's runner workers; the header and the report say so."""
    _, plain = run_report(pytester, "cpu-ref", small_golden)
    result, taken = run_report(pytester, "cpu-ref", small_golden, "-n", "2", "--isolate=on")
    validate(taken)
    check_counts(result, taken)
    result.stdout.fnmatch_lines(["qconform: -n 2: the corpus's cases run on 2 runner workers in this pytest "
                                 "process, not on 2 pytest-xdist workers*give test paths to keep xdist)"])
    assert "bringing up nodes" not in result.stdout.str()
    assert taken["invocation"]["workers"] == 0 and taken["invocation"]["runner_workers"] == 2
    assert [(c["id"], c["verdict"]) for c in plain["cases"]] == [(c["id"], c["verdict"]) for c in taken["cases"]]


def test_not_run_cases_are_reported(pytester: pytest.Pytester, small_golden: Path):
    """-x stops after the first failure: the cases after it are in the report as not-run."""
    result, report = run_report(pytester, f"{SUPPORT}:FlipInt8Runner", small_golden, "-x")
    validate(report)
    c = report["counts"]
    assert c["collected"] == c["reported"] and c["fail"] == 1 and c["not-run"] > 0
    assert c["ran"] + c["not-run"] == c["collected"]
    assert not report["complete"] and not report["interrupted"]
    result.stdout.fnmatch_lines(["*INCOMPLETE*not run*"])


def test_report_options_need_a_runner(pytester: pytest.Pytester):
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--report=out")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--report needs --runner*"])


def test_case_without_a_result_is_an_error_not_a_gap(pytester: pytest.Pytester, small_golden: Path):
    """A case that fails before its runner is called (here: in setup) still gets a verdict."""
    pytester.makepyfile(breaksetup="""
        def pytest_runtest_setup(item):
            if item.name.endswith("/per-axis"):
                raise RuntimeError("setup broke")
    """)
    pytester.syspathinsert()
    result, report = run_report(pytester, "cpu-ref", small_golden, "-p", "breaksetup")
    validate(report)
    broken = [f for f in report["failures"] if f["id"].endswith("/per-axis")]
    assert broken and all(f["verdict"] == "error" and "setup broke" in f["problem"] for f in broken)
    assert {c["id"] for c in report["cases"] if c["verdict"] == "error"} == {f["id"] for f in broken}
    assert report["counts"]["collected"] == report["counts"]["reported"] and report["complete"]


def test_artifacts_stay_compact_and_the_summary_comes_last(pytester: pytest.Pytester, small_golden: Path):
    """No per-case JSON in pytest's own reports (so none in JUnit XML or on the xdist wire), short
    unsupported reasons in JUnit XML, each reason once in report.json, and the qconform summary after
    pytest's short summary."""
    xml = pytester.path / "junit.xml"
    result, report = run_report(pytester, f"{SUPPORT}:FlipInt8NoUint8Runner", small_golden, f"--junitxml={xml}",
                                "-rfs")
    text = xml.read_text()
    assert "<property" not in text
    skipped = re.findall(r'<skipped[^>]*message="([^"]*)"', text)
    assert skipped and all(len(m) <= 120 for m in skipped)
    assert len(report["reasons"]) == 1 and report["reasons"][0]["cases"] == report["counts"]["unsupported"]
    assert all(set(c) <= {"id", "verdict", "reading", "readings", "mismatches", "masked", "reason", "baseline"}
               for c in report["cases"])
    out = result.stdout.str()
    assert out.index("short test summary info") < out.index("qconform summary") < out.index("qconform report")
    assert out.rstrip().splitlines()[-1].startswith("=") and " failed" in out.rstrip().splitlines()[-1]


def test_a_runner_raising_megabytes_keeps_report_json_small(tmp_path):
    """A 6 MB message on every case: report.json stays under 10 MB, every case keeps its verdict,
    and the whole message is kept once, by its SHA-256, beside the report."""
    import json

    from conftest import run_pytest
    from support import LoudRunner

    from qconform.report import certificate

    golden = copy_group(tmp_path / "golden", "QuantizeLinear-10")
    out = tmp_path / "out"
    r = run_pytest(f"--runner={SUPPORT}:LoudRunner", f"--golden={golden}", f"--report={out}", "-q", "--tb=no",
                   "-p", "no:randomly", "-k", "int32", timeout=900)  # 26 cases: 160 MB of messages
    report = json.loads((out / "report.json").read_text())
    assert (out / "report.json").stat().st_size <= 10 * 1024 * 1024
    assert report["counts"]["error"] == report["counts"]["collected"] >= 20, (report["counts"], r.stdout[-2000:])
    assert all(c["verdict"] == "error" for c in report["cases"])
    (kept,) = {re.search(r"the whole text: (texts/\w+\.txt)\]$", f["problem"]).group(1) for f in report["failures"]}
    whole = (out / kept).read_text()
    assert whole.endswith(LoudRunner.MESSAGE) and model.text_digest(whole) in kept  # once, by its digest
    assert all(len(f["problem"]) <= model.FAILURE_PROBLEM_CHARS for f in report["failures"])
    assert len(r.stdout) < 10 * 1024 * 1024  # the terminal is not flooded either
    assert certificate.verify(out) == []


def test_an_unsupported_reason_is_its_cause_one_bucket_per_cause():
    """The line that says why, not a C++ frame; one cause refused in every generated subgraph is one
    reason with its count, in report.json and in summary.md."""
    from qconform.isolation import reason_line
    from qconform.report import markdown

    ep = ("Exception from src/inference/src/cpp/core.cpp:112:\n"
          "onnxruntime::OpenVINOExecutionProvider::Compile(const std::vector<FusedNodeAndGraph>&)\n"
          "[ GENERAL_ERROR ] OpenVINO-EP-subgraph_{n}_0: element type f8e4m3 is not supported")
    assert reason_line(ep.format(n=3)) == "[ GENERAL_ERROR ] OpenVINO-EP-subgraph_3_0: element type f8e4m3 is not supported"
    assert reason_line("  File \"x.py\", line 3, in f\nValueError: no int4") == "ValueError: no int4"
    assert reason_line("plain\nmore") == "plain"
    records = [{"id": f"QuantizeLinear-21/float32-float8e4m3fn/basic/c{n}", "verdict": "unsupported",
                "problem": reason_line(ep.format(n=n))} for n in range(12)]
    report = model.build(records, [{"id": r["id"]} for r in records], {})
    assert report["reasons"] == [{"text": "[ GENERAL_ERROR ] OpenVINO-EP-subgraph_N_N: element type f8e4m3 is not "
                                          "supported", "cases": 12}]
    report["gate"] = {}
    summary = markdown.render(report)
    assert "- 12 case(s): [ GENERAL_ERROR ] OpenVINO-EP-subgraph_N_N: element type f8e4m3" in summary

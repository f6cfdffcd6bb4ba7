"""``qconform certify``: the engine driven without a pytest item per case writes the report the
pytest front-end writes for the same run."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, run_pytest, terminated_once_started

#: A slice with passes, failures (diagnosed), errors, unsupported and information cases.
SLICE = "QuantizeLinear-21/*"
#: Fields that say how and when the run was driven, not what it found.
DRIVEN = ("invocation", "timing", "integrity")


def certify(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qconform.cli", "certify", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=900)


def _found(path: Path) -> dict:
    report = json.loads((path / "report.json").read_text())
    return {k: v for k, v in report.items() if k not in DRIVEN}


@pytest.mark.needs("onnxruntime")
def test_both_front_ends_write_the_same_report(tmp_path):
    c = certify("--runner", "onnxruntime", "--case", SLICE, "--report", str(tmp_path / "certify"), "-j", "2")
    assert c.returncode == 1, c.stdout + c.stderr  # onnxruntime deviates in this slice
    p = run_pytest("--runner=onnxruntime", "--case", SLICE, f"--report={tmp_path / 'pytest'}", "-q",
                   "--runner-workers=2")
    assert p.returncode == 1, p.stdout[-2000:]
    a, b = _found(tmp_path / "certify"), _found(tmp_path / "pytest")
    assert a["counts"]["fail"] and a["counts"]["error"] and a["counts"]["unsupported"] and a["counts"]["info"]
    assert a == b
    inv = json.loads((tmp_path / "certify" / "report.json").read_text())["invocation"]
    assert inv["command_line"].startswith("qconform certify --runner onnxruntime")  # as typed
    assert inv["front_end"] == "qconform certify" and inv["runner_workers"] == 2
    assert f"partial selection: {a['counts']['collected']:,} of" in c.stdout and "the cases that ran deviate from the ONNX specification" \
        in c.stdout and "wrote " in c.stdout


@pytest.mark.needs("onnxruntime")
def test_identity_names_the_runner_source_and_every_runtime_distribution(tmp_path):
    """Where an execution provider's settings live (the runner file) is hashed, and which onnxruntime
    distribution is installed is named: its variants share one import package."""
    import hashlib
    from importlib.metadata import version

    from qconform.runners import onnxruntime_runner

    c = certify("--runner", "onnxruntime", "--case", "QuantizeLinear-10/*", "--report", str(tmp_path))
    assert c.returncode in (0, 1), c.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    src = Path(onnxruntime_runner.__file__)
    assert report["runner"]["source"] == {"path": str(src), "sha256": hashlib.sha256(src.read_bytes()).hexdigest()}
    assert report["platform"]["packages"]["onnxruntime"] == version("onnxruntime")
    html = (tmp_path / "report.html").read_text()
    assert report["runner"]["source"]["sha256"] in html and "qconform certify --runner onnxruntime" in html


def test_pytest_only_options_run_through_pytest(tmp_path):
    c = certify("--runner", "cpu-ref", "--report", str(tmp_path), "-m", "opset_10 and family_basic", "-j", "1")
    assert c.returncode == 0, c.stdout[-2000:] + c.stderr
    assert "-m opset_10 and family_basic is pytest's: running through pytest" in c.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["counts"]["pass"] > 0 and "-m 'opset_10 and family_basic'" in report["invocation"]["filters"]


def test_bad_input_is_one_line_and_runs_nothing(tmp_path):
    for args, says in ((("--runner", "no-such-runner"), "unknown runner 'no-such-runner'"),
                       (("--runner", "cpu-ref", "--case", "NoSuchOp-1/*"), "no case of the corpus"),
                       (("--runner", "cpu-ref", "--runner-opt", "oops"), "is not KEY=VALUE")):
        c = certify(*args, "--report", str(tmp_path / "r"), cwd=tmp_path)
        assert c.returncode == 2 and c.stderr.count("\n") == 1 and says in c.stderr, (args, c.stderr)
        assert not (tmp_path / "r").exists()


def test_a_stopped_run_resumes_from_its_state_file(tmp_path):
    """``--state FILE``: the cases finished before a stop are read back, the rest run, and the report
    is the one an uninterrupted run writes; a state file of another run is refused in one line."""
    state = tmp_path / "state.jsonl"
    first = certify("--runner", "cpu-ref", "--case", "QuantizeLinear-13/*", "--state", str(state),
                    "--report", str(tmp_path / "part"))
    assert first.returncode == 0, first.stderr
    lines = state.read_text().splitlines()
    state.write_text("\n".join(lines) + '\n{"id": "QuantizeLinear-10/float32-uint8/basic/per-te')  # killed mid-write
    both = ("--case", "QuantizeLinear-13/*", "--case", "QuantizeLinear-10/*")
    resumed = certify("--runner", "cpu-ref", *both, "--state", str(state), "--report", str(tmp_path / "resumed"))
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(lines) - 1} of " in resumed.stderr and "read back" in resumed.stderr
    fresh = certify("--runner", "cpu-ref", *both, "--report", str(tmp_path / "fresh"))
    a, b = _found(tmp_path / "resumed"), _found(tmp_path / "fresh")
    assert a["counts"]["collected"] > len(lines) - 1
    assert {k: v for k, v in a.items() if k != "cases"} == {k: v for k, v in b.items() if k != "cases"}
    assert [{k: v for k, v in c.items() if k != "duration_s"} for c in a["cases"]] == \
        [{k: v for k, v in c.items() if k != "duration_s"} for c in b["cases"]]
    other = certify("--runner", "onnx-reference", *both, "--state", str(state), "--report", str(tmp_path / "x"))
    assert other.returncode == 2 and other.stderr.count("\n") == 1 and "written by another run" in other.stderr
    # written by another build of qconform (its comparison, its diagnosis): refused, never read back
    head, *rest = state.read_text().splitlines()
    header = json.loads(head)
    header["key"]["qconform"] = "0" * 64
    state.write_text("\n".join([json.dumps(header, sort_keys=True), *rest]) + "\n")
    older = certify("--runner", "cpu-ref", *both, "--state", str(state), "--report", str(tmp_path / "y"))
    assert older.returncode == 2 and "written by another run" in older.stderr


def test_a_selection_never_reads_as_conformance(tmp_path):
    """One case that passes certifies nothing about the runtime: every statement says it was a selection."""
    one = "QuantizeLinear-21/float32-uint8/basic/per-tensor"
    c = certify("--runner", "cpu-ref", "--case", one, "--report", str(tmp_path))
    assert c.returncode == 0, c.stdout + c.stderr  # the gate: nothing deviated
    report = json.loads((tmp_path / "report.json").read_text())
    total = report["corpus"]["cases"]
    said = f"partial selection: 1 of {total:,} cases"
    summary = (tmp_path / "summary.md").read_text()
    certificate = (tmp_path / "certificate.json").read_text()
    for text in (c.stdout, summary, (tmp_path / "report.html").read_text(), certificate):
        assert said in text and "conforms bit-exactly" not in text
        assert "conformant" not in text, "a selection never says an op version is conformant"
    assert "✅" not in summary


def test_certify_writes_a_certificate_beside_the_report(tmp_path):
    """certificate.json: the scoreboard's schema, its statement the report's, summed in SHA256SUMS."""
    one = "DequantizeLinear-21/int8-float32/basic/*"
    c = certify("--runner", "cpu-ref", "--case", one, "--report", str(tmp_path))
    assert c.returncode == 0, c.stdout + c.stderr
    cert = json.loads((tmp_path / "certificate.json").read_text())
    report = json.loads((tmp_path / "report.json").read_text())
    assert cert["format"] == "qconform-certificate/1" and cert["runtime"] == "cpu-ref"
    assert cert["corpus"]["digest"] == report["corpus"]["digest"] and cert["counts"] == report["counts"]
    assert cert["rows"] and all(r[0] == "DequantizeLinear-21" for r in cert["rows"])
    assert "certificate.json" in (tmp_path / "SHA256SUMS").read_text()


@pytest.mark.needs("onnxruntime")
def test_a_run_that_judged_nothing_never_reads_as_conformance(tmp_path):
    """onnxruntime refuses every opset-28 model (unsupported): a run of those judged no case."""
    c = certify("--runner", "onnxruntime", "--case", "QuantizeLinear-28/float32-uint8/basic/*", "--report", str(tmp_path))
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["counts"]["unsupported"] == report["counts"]["collected"] > 0, report["counts"]
    summary = (tmp_path / "summary.md").read_text()
    for text in (c.stdout, summary, (tmp_path / "report.html").read_text()):
        assert "no case judged" in text and "conforms bit-exactly" not in text
    assert "✅" not in summary


def test_a_report_path_that_is_a_file_fails_before_the_first_case(tmp_path):
    taken = tmp_path / "report"
    taken.write_text("not a directory")
    c = certify("--runner", "cpu-ref", "--case", "QuantizeLinear-21/*", "--report", str(taken))
    assert c.returncode == 2, c.stdout + c.stderr
    assert str(taken) in c.stderr and "Traceback" not in c.stderr and len(c.stderr.strip().splitlines()) == 1
    assert "cases" not in c.stdout  # no progress: nothing ran
    assert taken.read_text() == "not a directory"


def test_version_names_qconform_and_its_corpus():
    from qconform import __version__, corpus

    r = subprocess.run([sys.executable, "-m", "qconform.cli", "--version"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    idx = corpus.index(corpus.DEFAULT_ROOT)
    assert r.stdout.strip() == f"qconform {__version__}, corpus {idx.digest[:12]}… ({len(idx):,} cases)"


SHIFTING_RUNNER = '''
import os
from qconform.runners.cpu_ref import CpuRefRunner


class Shifting(CpuRefRunner):
    """cpu-ref whose describe() names the process it runs in: every worker resolves another runner than
    the controller's (as a Dask worker in another folder, or a device replaced since the start, does)."""

    def describe(self):
        return {**super().describe(), "build": str(os.getpid())}
'''


def test_a_worker_whose_runner_is_not_the_reports_runs_nothing(tmp_path):
    """Each runner worker resolves ``--runner`` again in its own process (a Dask worker in its own
    folder, on its own machine); where its identity (describe(), platform, source) is not the one the
    report names, it runs no case: every case not run, the run incomplete, exit 2, never a verdict
    credited to the runner the certificate names."""
    (tmp_path / "shifting.py").write_text(SHIFTING_RUNNER)
    r = certify("--runner", f"{tmp_path / 'shifting.py'}:Shifting", "-j", "1", "--case",
                "QuantizeLinear-21/float32-int8/*", "--report", str(tmp_path / "r"))
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert r.returncode == 2 and not report["complete"], r.stderr[-2000:]
    assert report["counts"]["not-run"] == report["counts"]["collected"] > 0
    assert "is not the one the run started with" in report["reasons"][0]["text"]


def test_an_in_process_pool_whose_runner_is_not_the_reports_answers_not_run():
    """A Dask worker's in-process pool (``pool.InProcessPool``) whose runner is not the report's answers
    every item *not run*, as an isolated worker does: never an exception the cluster would take for a
    crash of the case."""
    from qconform import corpus
    from qconform.execution import CorpusJob, Options
    from qconform.pool import InProcessPool

    job = CorpusJob(Options(str(corpus.DEFAULT_ROOT), "cpu-ref", runner_identity="0" * 64))
    pool = InProcessPool(job)
    case = "QuantizeLinear-21/float32-int8/basic/per-tensor"
    pool.submit([case])
    res = pool.result(case)
    assert res.verdict == "not-run" and "is not the one the run started with" in res.record.problem


def test_a_terminated_run_reports_the_cases_it_finished_and_says_it_was_interrupted(tmp_path):
    """SIGTERM (a CI timeout, a scheduler, `kill`; a run a shell started in the background ignores
    Ctrl-C) stops certify as Ctrl-C does: a report of the cases done, marked interrupted and not
    complete, exit status 2 — not a run that ends with no report at all."""
    report = tmp_path / "r"
    code, rest = terminated_once_started(
        [sys.executable, "-m", "qconform.cli", "certify", "--runner", "onnx-reference", "-j", "1", "--diagnose", "off",
         "--case", "QuantizeLinear-2*", "--report", str(report)],
        lambda line: line.startswith("certify: ") and " of " in line)  # the first progress line
    rep = json.loads((report / "report.json").read_text())
    assert code == 2, rest[-2000:]
    assert rep["interrupted"] and not rep["complete"]
    assert 0 < rep["counts"]["ran"] < rep["counts"]["collected"], rep["counts"]

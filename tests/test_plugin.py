"""The plugin end to end, in subprocesses: runners by every resolution path, errors, markers."""
from __future__ import annotations

import json
import textwrap

import pytest

from conftest import run_pytest
from qconform.plugin import default_golden

# A vendor runner: a complete plug-in, kept outside the repository (tmp_path).
VENDOR = textwrap.dedent('''
    from qconform.runners.cpu_ref import CpuRefRunner

    class Mine(CpuRefRunner):
        name = "mine"

        def __init__(self, flavour: str = "plain"):
            self.flavour = flavour

        def describe(self):
            return {"name": self.name, "version": "1.0", "device": "cpu", "options": {"flavour": self.flavour}}
''')

SUBSET = ["-m", "op_QuantizeLinear and opset_13 and family_examples"]


def test_file_runner_outside_the_repo(tmp_path):
    f = tmp_path / "vendor.py"
    f.write_text(VENDOR)
    r = run_pytest(f"--runner={f}:Mine", "--runner-opt", "flavour=odd", *SUBSET, "-q")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 passed" in r.stdout
    r = run_pytest(f"--runner={f}:Mine", *SUBSET, "--co", "-q")
    assert "QuantizeLinear-13/float32-uint8/examples/default" in r.stdout


def test_entry_point_of_an_installed_package(tmp_path):
    site = tmp_path / "site"
    (site / "vendor_pkg").mkdir(parents=True)
    (site / "vendor_pkg" / "__init__.py").write_text(VENDOR)
    dist = site / "vendor_pkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vendor-pkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[qconform.runners]\nmine = vendor_pkg:Mine\n")
    r = run_pytest("--runner=mine", *SUBSET, env={"PYTHONPATH": str(site)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 passed" in r.stdout and '"name": "mine"' in r.stdout  # the header names the runner


def test_module_attr_runner():
    r = run_pytest("--runner=qconform.runners.cpu_ref:CpuRefRunner", *SUBSET, "-q")
    assert r.returncode == 0 and "2 passed" in r.stdout


def _one_clear_line(r) -> str:
    assert r.returncode != 0
    assert "Traceback" not in r.stdout + r.stderr
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def test_misspelt_runner_gives_one_line():
    line = _one_clear_line(run_pytest("--runner=onnxrunime"))
    assert "unknown runner 'onnxrunime'" in line
    for bundled in ("onnxruntime", "onnx-reference", "cpu-ref"):
        assert bundled in line
    assert "path/to/file.py:Attr" in line


def test_plugin_that_fails_to_import_gives_one_line(tmp_path):
    f = tmp_path / "broken.py"
    f.write_text("import no_such_module_anywhere\n")
    line = _one_clear_line(run_pytest(f"--runner={f}:Mine"))
    assert "failed to load" in line and "no_such_module_anywhere" in line


def test_unknown_runner_option_gives_one_line():
    line = _one_clear_line(run_pytest("--runner=cpu-ref", "--runner-opt", "speed=11"))
    assert "rejected its options" in line and "speed" in line


def test_markers_select_cases():
    r = run_pytest("--runner=cpu-ref", "-m", "op_DequantizeLinear and opset_10", "--co", "-q")
    ids = [ln for ln in r.stdout.splitlines() if "::" in ln]
    assert ids and all("DequantizeLinear-10/" in i for i in ids)


def test_project_tests_do_not_collect_cases():
    r = run_pytest("--co", "-q", "tests/test_compare.py")
    assert "qconform/golden/MANIFEST" not in r.stdout


def test_xdist_runs_cases_in_parallel():
    """Given the corpus as a test path, ``-n 2`` is pytest-xdist's (without one, test_report's
    ``test_n_over_the_corpus_alone...``: the engine's workers)."""
    r = run_pytest("--runner=cpu-ref", "-n", "2", "-m", "opset_13 and family_basic", "-q", str(default_golden()))
    assert r.returncode == 0, r.stdout[-2000:]
    assert "passed" in r.stdout and "qconform summary" in r.stdout and "runner workers" not in r.stdout


def test_a_plugin_that_marks_cases_turns_the_pre_filters_off(tmp_path):
    """A vendor's conftest that marks some cases while they are collected (``known_issue``): ``-m`` and
    ``-k`` on that marker select exactly those, as pytest's own selection does; the corpus is then
    collected whole before pytest selects."""
    (tmp_path / "conftest.py").write_text(textwrap.dedent("""
        def pytest_configure(config):
            config.addinivalue_line("markers", "known_issue: the vendor's own")

        def pytest_collection_modifyitems(items):
            for item in items:
                if item.name.startswith("QuantizeLinear-13/float32-int8/"):
                    item.add_marker("known_issue")
    """))
    for how in (["-m", "known_issue"], ["-k", "known_issue and ties"]):
        r = run_pytest("--runner=cpu-ref", "--co", "-q", *how, cwd=tmp_path)
        got = [ln.split("::", 1)[1] for ln in r.stdout.splitlines() if "::" in ln]
        assert got and all(g.startswith("QuantizeLinear-13/float32-int8/") for g in got), (how, r.stdout[-2000:])
        assert how[0] == "-m" or all("/ties/" in g for g in got)


def test_cases_set_aside_while_collecting_are_reported_as_deselected(tmp_path):
    """The -k pre-filter is an optimisation: report.json's filters and the summary's count of
    deselected cases are those pytest's own deselection gives (pre-filter off: another plugin hooks
    collection)."""
    (tmp_path / "off").mkdir()
    (tmp_path / "off" / "conftest.py").write_text("def pytest_collection_modifyitems(items):\n    pass\n")
    (tmp_path / "on").mkdir()
    seen = {}
    for how in ("on", "off"):
        r = run_pytest("--runner=cpu-ref", "-q", "-k", "QuantizeLinear-13 and per-tensor",
                       f"--report={tmp_path / how / 'report'}", cwd=tmp_path / how)
        report = json.loads((tmp_path / how / "report" / "report.json").read_text())
        line = next(ln for ln in r.stdout.splitlines() if ln.startswith("collected "))
        seen[how] = (report["invocation"]["filters"], report["counts"]["collected"], line)
    filters, collected, line = seen["on"]
    assert seen["on"] == seen["off"]
    deselected = int(filters[-1].split()[0])
    assert filters[-1].endswith(" deselected") and collected > 0 and deselected > 10_000
    assert line.startswith(f"collected {collected} ({deselected:,} deselected), ")


def test_keyword_and_mark_selection_before_collection_agree_with_pytest(tmp_path):
    """``-k`` and ``-m`` are applied while the corpus is collected (not after every corpus item exists);
    together they must select exactly what pytest's own matchers select from the real items of a
    full collection."""
    subset = "opset_13 or opset_10"
    selections = [(subset, "QuantizeLinear-13 and per-tensor"), (subset, "not int8 and opset_13 or qlinear"),
                  (subset, "golden and MANIFEST and (ties or uint8 or family_examples)"),
                  ("op_DequantizeLinear and not opset_21 and family_ties or opset_1 or "
                   "(op_Conv and not types_int16_int8_int16)", "")]
    (tmp_path / "pytest_kmatch.py").write_text(textwrap.dedent(f"""
        import pytest
        from _pytest.mark import KeywordMatcher, MarkMatcher
        from _pytest.mark.expression import Expression

        @pytest.hookimpl(trylast=True)
        def pytest_collection_modifyitems(items):
            for i, (m, k) in enumerate({selections!r}):
                m, k = m and Expression.compile(m), k and Expression.compile(k)
                for item in items:
                    if ((not m or m.evaluate(MarkMatcher.from_markers(item.iter_markers())))
                            and (not k or k.evaluate(KeywordMatcher.from_item(item)))):
                        print("WANT", i, item.name)
    """))
    r = run_pytest("--runner=cpu-ref", "--co", "-q", "-p", "pytest_kmatch", env={"PYTHONPATH": str(tmp_path)})
    want_lines = [ln.split(" ", 2)[1:] for ln in r.stdout.splitlines() if ln.startswith("WANT ")]
    assert len(want_lines) > 20
    for i, (m, k) in enumerate(selections):
        want = {name for j, name in want_lines if j == str(i)}
        r = run_pytest("--runner=cpu-ref", "--co", "-q", *(["-m", m] if m else []), *(["-k", k] if k else []))
        got = {ln.split("::", 1)[1] for ln in r.stdout.splitlines() if "::" in ln}
        assert got == want and got, (m, k)


# -- what pytest shows and what the report says agree (a review of the plugin's verdict paths) ------
SKIP_AND_XFAIL = textwrap.dedent("""
    import pytest

    def pytest_collection_modifyitems(items):
        for item in items:
            if item.name == "QuantizeLinear-13/float32-int8/basic/per-tensor":
                item.add_marker(pytest.mark.skip(reason="known to crash the board"))
            if item.name == "QuantizeLinear-13/float32-int8/basic/per-axis":
                item.add_marker(pytest.mark.xfail(reason="vendor bug 9"))
""")
BASIC_13 = ["-m", "op_QuantizeLinear and opset_13 and family_basic"]


def test_a_conftests_skip_and_xfail_marks_on_cases_are_honoured(tmp_path):
    """A case a conftest marks ``skip`` is not run (the fast protocol ran it anyway; pytest's own
    protocol hit an INTERNALERROR: a case item had no line for the skip report); ``xfail`` is
    pytest's own xfail, whatever the protocol."""
    (tmp_path / "conftest.py").write_text(SKIP_AND_XFAIL)
    # the skipped case must not reach the runner at all (not even run ahead by the engine's plan)
    (tmp_path / "crash_on_skipped.py").write_text(textwrap.dedent("""
        import os
        from qconform.runners.cpu_ref import CpuRefRunner

        class CrashOnSkipped(CpuRefRunner):
            name = "crash-on-skipped"

            def prepare(self, model):
                if model.graph.name == "QuantizeLinear-13_float32-int8_basic_per-tensor":
                    open(os.environ["RAN_FILE"], "w").write("ran")
                return super().prepare(model)
    """))
    for protocol in ("auto", "pytest"):
        ran = tmp_path / f"ran-{protocol}"
        r = run_pytest("--runner=crash_on_skipped.py:CrashOnSkipped", *BASIC_13,
                       f"--case-protocol={protocol}", "-rsx", f"--report={tmp_path / protocol}", cwd=tmp_path,
                       env={"RAN_FILE": str(ran)})
        assert not ran.exists(), f"{protocol}: the skipped case reached the runner"
        assert "INTERNALERROR" not in r.stdout + r.stderr, (r.stdout + r.stderr)[-3000:]
        assert "SKIPPED" in r.stdout and "known to crash the board" in r.stdout, r.stdout[-3000:]
        assert "1 xpassed" in r.stdout or "1 xfailed" in r.stdout, r.stdout[-3000:]
        cases = {c["id"]: c["verdict"] for c in json.loads((tmp_path / protocol / "report.json").read_text())["cases"]}
        assert cases["QuantizeLinear-13/float32-int8/basic/per-tensor"] == "not-run"  # never run, and said so


def test_a_case_pytest_fails_after_its_verdict_is_no_pass_in_the_report(tmp_path):
    """A vendor's plugin that fails a case after the engine passed it (a post-check, a teardown): pytest
    says failed, so the report must not say pass (it did: the record's pass won)."""
    (tmp_path / "post_check.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_call(item):
            out = yield
            if item.name == "QuantizeLinear-13/float32-int8/basic/per-tensor":
                raise AssertionError("the board's post-check failed")
            return out
    """))
    r = run_pytest("-p", "post_check", "--runner=cpu-ref", *BASIC_13, f"--report={tmp_path / 'r'}", cwd=tmp_path,
                   env={"PYTHONPATH": str(tmp_path)})
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    case = next(c for c in report["cases"] if c["id"] == "QuantizeLinear-13/float32-int8/basic/per-tensor")
    assert r.returncode == 1 and case["verdict"] == "error" and not report["gate"]["passed"], r.stdout[-3000:]
    failure = next(f for f in report["failures"] if f["id"] == case["id"])
    assert "the board's post-check failed" in failure["problem"] and "after the engine's verdict pass" in failure["problem"]


def test_a_case_collected_twice_is_one_case_of_the_report(tmp_path):
    r = run_pytest("--runner=cpu-ref", *BASIC_13, "--keep-duplicates", str(default_golden()), str(default_golden()),
                   f"--report={tmp_path / 'r'}", cwd=tmp_path)
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    ids = [c["id"] for c in report["cases"]]
    assert r.returncode == 0 and ids and len(ids) == len(set(ids)) == report["counts"]["collected"], r.stdout[-2000:]


def test_a_run_of_no_case_says_why_its_gate_failed(tmp_path):
    """A test file instead of the corpus: the floor fails the run, and the terminal says so."""
    (tmp_path / "test_mine.py").write_text("def test_ok():\n    pass\n")
    r = run_pytest("--runner=cpu-ref", "test_mine.py", f"--report={tmp_path / 'r'}", cwd=tmp_path)
    assert r.returncode == 1 and "gate: only 0 case(s) collected" in r.stdout, r.stdout[-2000:]


def test_an_xdist_workers_records_reach_the_file_as_they_are_made(tmp_path):
    """Each record is on disk when made: a worker that crashes later (xdist restarts it) loses none."""
    from types import SimpleNamespace

    from qconform.plugin import WORKERINPUT_RECORDS, Records
    from qconform.record import CaseRecord

    config = SimpleNamespace(workerinput={WORKERINPUT_RECORDS: str(tmp_path), "workerid": "gw0"})
    records = Records(config)
    records.add(CaseRecord("QuantizeLinear-13/float32-int8/basic/per-tensor", verdict="fail"))
    assert "per-tensor" in (tmp_path / "gw0.jsonl").read_text()  # before close()
    records.close()


def test_lf_without_a_record_says_how_to_rerun_failures(tmp_path):
    """A plain ``pytest --runner`` run writes no .pytest_cache, so a later ``--lf`` would quietly run
    everything again: it says so in one line, with the report's rerun; --lf on every run keeps the record."""
    flip = str(__import__("pathlib").Path(__file__).resolve().parent / "support.py") + ":FlipInt8Runner"
    args = (f"--runner={flip}", "-m", "op_QuantizeLinear and opset_21 and family_basic", "-q", "--tb=no")
    first = run_pytest(*args, cwd=tmp_path, cache=True)
    assert first.returncode == 1 and not (tmp_path / ".pytest_cache").exists(), first.stdout[-2000:]
    again = run_pytest(*args, "--lf", cwd=tmp_path, cache=True)
    assert "--lf/--ff found no failures recorded" in again.stdout and "--from-report" in again.stdout
    failed = int(again.stdout.split(" failed")[0].split()[-1])
    kept = run_pytest(*args, "--lf", cwd=tmp_path, cache=True)
    assert "found no failures recorded" not in kept.stdout and f"{failed} failed" in kept.stdout and " passed" not in kept.stdout, \
        kept.stdout[-2000:]


@pytest.mark.needs("cc")  # cpu-kernel builds its C kernels when the runner is made
def test_a_runtime_with_a_declared_scope_runs_it_as_certify_does(tmp_path):
    """``pytest --runner=cpu-kernel`` with no selection collects the runtime's declared scope (the
    cases ``qconform certify`` runs), says so once, and the report carries the scope; any selection
    of the user's own (-k here) is taken as given."""
    from qconform import corpus as corpus_mod
    from qconform.declarations.runtimes import RUNTIMES

    r = run_pytest("--runner=cpu-kernel", "--collect-only", "-q", f"--report={tmp_path / 'r'}", cwd=tmp_path)
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    scope = report["invocation"]["scope"]
    index = corpus_mod.index(default_golden())
    from fnmatch import fnmatchcase

    inside = sum(1 for ref in index.refs if any(fnmatchcase(ref.id, g) for g in RUNTIMES["cpu-kernel"].scope))
    assert scope["cases"] == list(RUNTIMES["cpu-kernel"].scope) and scope["left_out"] == len(index) - inside > 0
    assert report["counts"]["collected"] == inside and "scope" in report["invocation"]["filters"]
    assert report["gate"]["min_cases"] == inside  # the floor: the scope, whole (a conftest dropping cases shows)
    assert "**Run in its declared scope**: qconform's own kernels" in (tmp_path / "r" / "summary.md").read_text()
    assert r.stdout.count("cpu-kernel is certified on its declared scope") == 1, r.stdout[-2000:]
    r = run_pytest("--runner=cpu-kernel", "--collect-only", cwd=tmp_path)  # no -q: the header too
    assert r.stdout.count("cpu-kernel is certified on its declared scope") == 1, r.stdout[-2000:]
    r = run_pytest("--runner=cpu-kernel", "--collect-only", "-q", "-k", "qdq", cwd=tmp_path)
    assert "declared scope" not in r.stdout and " collected" in r.stdout and "no tests" not in r.stdout, r.stdout[-2000:]


def test_a_terminated_pytest_run_reports_the_cases_it_finished_and_says_it_was_interrupted(tmp_path):
    """SIGTERM to ``pytest --runner=NAME --report=DIR`` (a CI job's timeout, ``kill``) stops it as
    Ctrl-C does, as it stops ``qconform certify``: the report holds the cases judged, marked
    interrupted and not complete — not a run that ends with no report at all."""
    import sys

    from conftest import terminated_once_started

    report = tmp_path / "r"
    code, rest = terminated_once_started(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "--runner=onnx-reference", "--diagnose=off",
         "-k", "QuantizeLinear-2", f"--report={report}"],
        lambda line: " PASSED" in line or " FAILED" in line)  # the first judged case
    rep = json.loads((report / "report.json").read_text())
    assert code == pytest.ExitCode.INTERRUPTED, rest[-2000:]
    assert rep["interrupted"] and not rep["complete"]
    assert 0 < rep["counts"]["ran"] < rep["counts"]["collected"], rep["counts"]

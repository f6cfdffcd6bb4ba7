"""Baseline gating, the collected-cases floor and ``qconform report diff``, shown with wrong runners.

The wrong runners are cpu-ref with one deliberate bug each: the low bit of int8 outputs flipped
(deviations), and uint8 outputs refused as Unsupported (a change of support status).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from qconform import cli
from qconform import corpus as corpus_mod
from qconform.apps import baseline as baseline_cli
from qconform.gating import baseline as baseline_mod
from qconform.record import behaviour
from support import SUPPORT, FlipInt8Runner, copy_group  # noqa: F401

pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve()
TODAY = __import__("datetime").date(2026, 1, 1)
FAST = ("-p", "no:randomly", "--isolate=off")


@pytest.fixture(scope="module")
def golden(tmp_path_factory) -> Path:
    """QuantizeLinear-21 cases with int8/uint8 outputs (basic and specials) from the bundled corpus."""
    group = corpus_mod.load(copy_group(tmp_path_factory.mktemp("group")))
    cases = [c for c in group.cases if c.output_types[0] in ("int8", "uint8") and c.family in ("basic", "specials")]
    root = tmp_path_factory.mktemp("golden")
    corpus_mod.write(cases, root)
    return root


@pytest.fixture(scope="module")
def ids(golden: Path) -> dict[str, set[str]]:
    cases = corpus_mod.load(golden).cases
    return {t: {c.id for c in cases if c.output_types[0] == t} for t in ("int8", "uint8")}


def run(pytester: pytest.Pytester, golden: Path, runner: str, *args: str, out: str = "out"):
    result = pytester.runpytest(f"--runner={runner}", f"--golden={golden}", f"--report={pytester.path / out}",
                                *FAST, *args)
    report_path = pytester.path / out / "report.json"
    return result, (json.loads(report_path.read_text()) if report_path.exists() else None)


def write_baseline(pytester: pytest.Pytester, *entries: dict) -> Path:
    path = pytester.path / "baseline.json"
    path.write_text(json.dumps({"qconform_baseline": 1, "entries": list(entries)}))
    return path


def test_wrong_runner_fails_without_baseline(pytester, golden, ids):
    result, report = run(pytester, golden, f"{SUPPORT}:FlipInt8Runner")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert set(report["gate"]["new_failures"]) == ids["int8"] and not report["gate"]["passed"]
    result.stdout.fnmatch_lines([f"*gate: {len(ids['int8'])} deviation(s) not covered by a baseline*"])


def test_baseline_covers_known_deviations_and_reports_stale_entries(pytester, golden, ids):
    path = write_baseline(
        pytester,
        {"id": "QuantizeLinear-21/*-int8/*", "reason": "known: int8 low bit", "expires": "2999-12-31"},
        {"id": "QuantizeLinear-21/*-uint8/*", "reason": "once broken, fixed since"},
        {"id": "NoSuchOp-1/*", "reason": "typo in a pattern"},
    )
    result, report = run(pytester, golden, f"{SUPPORT}:FlipInt8Runner", f"--baseline={path}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert result.parseoutcomes().get("xfailed") == len(ids["int8"])
    gate = report["gate"]
    assert gate["passed"] and gate["new_failures"] == [] and gate["baselined"] == len(ids["int8"])
    stale = {s["entry"]: s["why"] for s in gate["stale"]}
    assert stale == {2: "its cases now pass", 3: "matches no case in this run"}
    assert all(f["baseline"] == "known: int8 low bit" for f in report["failures"])
    result.stdout.fnmatch_lines(["*stale baseline entry 2 (QuantizeLinear-21/*-uint8/*): its cases now pass*",
                                 "*stale baseline entry 3 (NoSuchOp-1/*): matches no case in this run*"])


def test_a_blanket_baseline_never_reads_as_conformance(pytester, golden, ids):
    """A baseline that accepts every deviation passes the gate, but no document calls the runner
    conformant where it deviates, or shows that in a passing colour: not the HTML, not summary.md,
    not the machine-readable certificate."""
    import re

    from qconform.apps import scoreboard
    from qconform.report import certificate
    from qconform.report.html import SCOPE_COLOURS

    path = write_baseline(pytester, {"id": "*", "reason": "accept everything"})
    result, report = run(pytester, golden, f"{SUPPORT}:FlipInt8Runner", f"--baseline={path}")
    assert result.ret == pytest.ExitCode.OK and report["gate"]["passed"], result.stdout.str()
    out = pytester.path / "out"
    scoped = certificate.scopes(report)
    rows = [r for s in scoped for r in [s, *s["types"]]]
    assert any(r["accepted"] for r in rows) and any(r["verdict"] == certificate.CONFORMANT for r in rows)
    for r in rows:  # conformant only where nothing deviates
        assert (r["verdict"] == certificate.CONFORMANT) == (r["pass"] > 0 and not r["accepted"] and not r["new"]), r
        assert "conform" not in r["verdict"] or not r["accepted"], r
    assert all(r["accepted_unnamed"] == r["accepted"] for r in rows)  # a flipped bit: no model names it

    def honest(sentence: str) -> None:
        assert "conforms" not in sentence, sentence
        counted = re.findall(r"(\d+) of \d+ op versions conformant", sentence)
        assert counted == [str(sum(s["verdict"] == certificate.CONFORMANT for s in scoped))], sentence
        assert sentence.count("conformant") == 1, sentence
        assert f"{len(ids['int8'])} deviating cases accepted by baseline" in sentence
        assert f"{len(ids['int8'])} of them named by no diagnosis model" in sentence

    honest(certificate.overall(report, scoped))
    html = (out / "report.html").read_text()
    (statement,) = re.findall(r'<div class="overall (\w+)" id="overall">([^<]*)</div>', html)
    assert statement[0] == "bad"
    honest(statement[1].replace("&#x27;", "'"))
    greens = {SCOPE_COLOURS[certificate.CONFORMANT]}
    for cell in re.findall(r'<td class="sv[^"]*" style="background:([^"]+)">([^<]*)</td>', html):
        assert cell[0] not in greens or cell[1] == certificate.CONFORMANT, cell
    summary = (out / "summary.md").read_text()
    assert "✅" not in summary and "passed" not in summary.splitlines()[0], summary.splitlines()[0]
    assert f"{len(ids['int8'])} deviation(s), every one accepted by the baseline" in summary.splitlines()[0]
    (cert,) = scoreboard.build({"flip-int8": report})["runtimes"]
    honest(cert["overall"])
    for op_rows in cert["verdicts"]:
        for row in op_rows:
            values = dict(zip(scoreboard.CERTIFICATE_COLUMNS, row))
            assert values["verdict"] != certificate.CONFORMANT or not values["deviate"], values


def test_a_baseline_by_behaviour_never_accepts_another_bug_beside_it(pytester, golden):
    """``baseline create`` writes one entry per op version, types and diagnosis model; a later run
    with a second bug in the same cases' types fails on exactly the second bug."""
    _, first = run(pytester, golden, f"{SUPPORT}:TiesAway", "--diagnose-per-group=0", out="first")
    data = baseline_cli.create(first, reason="known: ties rounded away (vendor bug 12)")
    assert data["entries"] and all(e["diagnosis"] == "round-half-away" and e["id"].endswith("/*")
                                   for e in data["entries"])
    assert sum(e["cases"] for e in data["entries"]) == first["counts"]["fail"] > len(data["entries"])
    html = (pytester.path / "first" / "report.html").read_text()
    rollup = html[html.index('id="by-behaviour"'):html.index("</table>", html.index('id="by-behaviour"'))]
    assert ">round-half-away</b>" in rollup and f"</span></td><td>{first['counts']['fail']}</td>" in rollup
    assert f"| round-half-away | {first['counts']['fail']} | 0 |" in (pytester.path / "first" / "summary.md").read_text()
    path = pytester.path / "behaviour.json"
    path.write_text(baseline_cli.dumps(data))
    result, second = run(pytester, golden, f"{SUPPORT}:TiesAwayAndSpecialsFlipped", f"--baseline={path}",
                         out="second")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    named = {f["id"]: behaviour(f) for f in second["failures"]}
    new = set(second["gate"]["new_failures"])
    assert new and all(named[cid] != "round-half-away" for cid in new)  # the flipped specials, and only them
    assert {cid for cid, n in named.items() if n == "round-half-away"} == \
        {f["id"] for f in second["failures"] if f["baseline"]}
    for f in second["failures"]:  # every failure was diagnosed: the baseline names behaviours
        assert "diagnosis" in f, f["id"]


def test_an_entry_accepts_the_verdict_it_was_written_for(pytester, golden, ids):
    """A model the runtime rejected and wrong output bits on it are two bugs: a baseline made from a
    run that raised on the int8 cases accepts those errors, not the failures a later run gives on
    the same cases (then listed as new, the entries as changed), and the other way round."""
    _, raised = run(pytester, golden, f"{SUPPORT}:RaiseOnInt8Runner", out="raised")
    assert {c["id"] for c in raised["cases"] if c["verdict"] == "error"} == ids["int8"]
    data = baseline_cli.create(raised, reason="vendor bug 1: int8 models rejected")
    assert {e["verdict"] for e in data["entries"]} == {"error"} and len(data["entries"]) == len(ids["int8"])
    path = pytester.path / "errors.json"
    path.write_text(baseline_cli.dumps(data))
    result, again = run(pytester, golden, f"{SUPPORT}:RaiseOnInt8Runner", f"--baseline={path}", out="again")
    assert result.ret == pytest.ExitCode.OK and again["gate"]["baselined"] == len(ids["int8"])

    result, flipped = run(pytester, golden, f"{SUPPORT}:FlipInt8Runner", f"--baseline={path}", out="flipped")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert set(flipped["gate"]["new_failures"]) == ids["int8"] and flipped["gate"]["baselined"] == 0
    assert {s["state"] for s in flipped["gate"]["stale"]} == {"changed"}
    assert "another deviation than the error it accepts" in flipped["gate"]["stale"][0]["why"]

    fails = write_baseline(pytester, *({"id": cid, "reason": "vendor bug 2: low bit"} for cid in ids["int8"]))
    result, report = run(pytester, golden, f"{SUPPORT}:RaiseOnInt8Runner", f"--baseline={fails}", out="errors")
    assert result.ret == pytest.ExitCode.TESTS_FAILED and set(report["gate"]["new_failures"]) == ids["int8"]


def test_a_failure_no_model_names_is_accepted_case_by_case(pytester, golden, ids):
    """``baseline create`` writes one entry per unexplained failure (its own id), so a later run with
    more unexplained failures in the same op version and types fails on exactly those."""
    report = {"cases": [{"id": f"Q-21/float32-int8/basic/c{i}", "verdict": "fail"} for i in range(3)],
              "failures": [{"id": "Q-21/float32-int8/basic/c0", "verdict": "fail", "diagnosis": []},
                           {"id": "Q-21/float32-int8/basic/c1", "verdict": "fail", "diagnosis": ["round-half-away"]},
                           {"id": "Q-21/float32-int8/basic/c2", "verdict": "fail"}]}  # not diagnosed: budget
    data = baseline_cli.create(report, reason="r")
    assert data["entries"] == [
        {"id": "Q-21/float32-int8/*", "diagnosis": "round-half-away", "cases": 1, "reason": "r"},
        {"id": "Q-21/float32-int8/basic/c0", "diagnosis": "none", "reason": "r"},
        {"id": "Q-21/float32-int8/basic/c2", "reason": "r"}]
    assert baseline_cli.undiagnosed(report) == ["Q-21/float32-int8/basic/c2"]
    b = baseline_mod.parse(data)
    assert b.live_match("Q-21/float32-int8/basic/c0", "fail", TODAY, "none").number == 2
    assert b.live_match("Q-21/float32-int8/basic/c3", "fail", TODAY, "none") is None
    assert b.live_match("Q-21/float32-int8/basic/c2", "error", TODAY) is None  # its verdict only

    # refresh --add-new writes the entries create would, never a bare id for a diagnosed failure
    refreshed, _, new = baseline_cli.refresh({"qconform_baseline": 1, "entries": []}, report, add_new=True, reason="r")
    assert len(new) == 3 and refreshed["entries"] == data["entries"]


@pytest.mark.parametrize("entries, message", [
    ([{"id": "Q-21/*", "diagnosis": "none", "reason": "r"}], "accepted case by case"),
    ([{"id": "Q-21/*", "diagnosis": "round-half-awya", "reason": "r"}], "'round-half-awya' is no deviation model"),
    ([{"id": "Q-21/*", "diagnosis": "round-half-away+nope", "reason": "r"}], "'nope' is no deviation model"),
    ([{"id": "Q-21/*", "verdict": "unsupported", "reason": "r"}], "is not a deviating verdict"),
    ([{"id": "Q-21/*", "diagnosis": "round-half-away", "verdict": "error", "reason": "r"}], "must be fail"),
])
def test_a_baseline_entry_says_exactly_what_it_accepts(entries, message):
    with pytest.raises(baseline_mod.BaselineError, match=message):
        baseline_mod.parse({"qconform_baseline": 1, "entries": entries})


@pytest.mark.parametrize("text, message", [
    ('{"qconform_baseline": 1, "runtime": "onnxruntime", "entries": []}', "unknown top-level key(s) ['runtime']"),
    ('{"qconform_baseline": 1, "runner": 1, "entries": []}', "\"runner\" names the runner"),
    ('{"qconform_baseline": 1, "entries": [{"id": "A-1/*", "reason": "a"}], "entries": []}',
     "'entries' is given twice"),
    ('{"qconform_baseline": 1, "entries": [{"id": "A-1/*", "id": "B-1/*", "reason": "a"}]}', "'id' is given twice"),
])
def test_a_baseline_file_is_read_whole_or_refused(tmp_path, text, message):
    path = tmp_path / "baseline.json"
    path.write_text(text)
    with pytest.raises(baseline_mod.BaselineError) as exc:
        baseline_mod.load(path)
    assert message in str(exc.value) and str(path) in str(exc.value)


def test_a_baseline_written_for_another_runner_fails_the_gate(pytester, golden, ids):
    """``create`` records the runner; a run of another runtime with that file fails its gate (its
    known deviations are not this runtime's), and ``refresh`` from another runner's report is refused.
    A file without ``runner`` (written before it was recorded) is taken for any runner."""
    _, flipped = run(pytester, golden, f"{SUPPORT}:FlipInt8Runner", out="flipped")
    data = baseline_cli.create(flipped, reason="vendor bug 3: low bit")
    assert data["runner"] == "flip-int8"
    path = pytester.path / "flip.json"
    path.write_text(baseline_cli.dumps(data))
    result, same = run(pytester, golden, f"{SUPPORT}:FlipInt8Runner", f"--baseline={path}", out="same")
    assert result.ret == pytest.ExitCode.OK and same["gate"]["passed"], result.stdout.str()

    path.write_text(baseline_cli.dumps({**data, "runner": "onnxruntime"}))
    result, other = run(pytester, golden, f"{SUPPORT}:FlipInt8Runner", f"--baseline={path}", out="other")
    assert result.ret == pytest.ExitCode.TESTS_FAILED and not other["gate"]["passed"]
    result.stdout.fnmatch_lines(["*gate: baseline * was written for runner 'onnxruntime'; this run's runner is "
                                 "'flip-int8'*"])
    with pytest.raises(baseline_mod.BaselineError, match="written for runner 'onnxruntime', the report is of 'flip-int8'"):
        baseline_cli.refresh({**data, "runner": "onnxruntime"}, flipped)
    refreshed, dropped, new = baseline_cli.refresh({k: v for k, v in data.items() if k != "runner"}, flipped)
    assert "runner" not in refreshed and not dropped and not new  # a file for any runner stays one

    # the runtime, not describe()'s name: every onnxruntime variant's describe() says "onnxruntime"
    level = {"options": {"optimize": "ORT_DISABLE_ALL"}}  # describe()'s shape; no runtime needed installed
    qnn = {**flipped, "runner": {"name": "onnxruntime", "providers": ["QNNExecutionProvider"], **level}}
    cpu = {**flipped, "runner": {"name": "onnxruntime", "providers": ["CPUExecutionProvider"], **level}}
    assert qnn["runner"]["name"] == cpu["runner"]["name"] == "onnxruntime"
    from_qnn = baseline_cli.create(qnn, reason="r")
    assert from_qnn["runner"] == "onnxruntime-qnn"
    with pytest.raises(baseline_mod.BaselineError, match="'onnxruntime-qnn', the report is of 'onnxruntime'"):
        baseline_cli.refresh(from_qnn, cpu)
    gated = baseline_mod.gate(json.loads(json.dumps(cpu)), baseline_mod.parse(from_qnn), TODAY)
    assert not gated["passed"] and "written for runner 'onnxruntime-qnn'" in gated["messages"][-1]

    path.write_text(baseline_cli.dumps({k: v for k, v in data.items() if k != "runner"}))
    result, unnamed = run(pytester, golden, f"{SUPPORT}:FlipInt8Runner", f"--baseline={path}", out="unnamed")
    assert result.ret == pytest.ExitCode.OK and unnamed["gate"]["passed"]


def test_a_partial_run_passes_no_gate(pytester, golden, ids):
    """A report of a run that did not run its selection (here ``--collect-only``: every case not
    run) fails its gate and says why, although no case deviated (pytest's own exit status for a
    listing stays 0). Its cases that did not run show no baseline entry stale, and ``refresh``
    refuses it: what a run did not run shows nothing fixed."""
    _, full = run(pytester, golden, f"{SUPPORT}:FlipInt8Runner", out="full")
    path = pytester.path / "flip.json"
    path.write_text(baseline_cli.dumps(baseline_cli.create(full, reason="vendor bug 4: low bit")))
    result, report = run(pytester, golden, f"{SUPPORT}:FlipInt8Runner", "--collect-only", f"--baseline={path}")
    assert report is not None and not report["complete"] and report["counts"]["fail"] == 0
    assert not report["gate"]["passed"] and result.ret == pytest.ExitCode.OK
    assert any(m.startswith("the run is incomplete (0 of ") and m.endswith("a partial run passes no gate")
               for m in report["gate"]["messages"]), report["gate"]["messages"]
    assert report["gate"]["stale"] == []
    with pytest.raises(baseline_mod.BaselineError, match="did not complete"):
        baseline_cli.refresh(json.loads(path.read_text()), report)
    # stopped by -x at its first failure: the report says by what
    result, stopped = run(pytester, golden, f"{SUPPORT}:FlipInt8Runner", "-x", out="stopped")
    assert not stopped["complete"] and stopped["stopped"] == "pytest: stopping after 1 failures"
    assert "(pytest: stopping after 1 failures)" in (pytester.path / "stopped" / "summary.md").read_text()


def test_pytests_own_protocol_gates_as_the_report_does(pytester, golden):
    """With ``--case-protocol=pytest`` a deviation a behaviour entry accepts is accepted as in the
    fast protocol (the gate read the diagnosis from a result the item had let go)."""
    _, first = run(pytester, golden, f"{SUPPORT}:TiesAway", "--diagnose-per-group=0", out="first")
    path = pytester.path / "behaviour.json"
    path.write_text(baseline_cli.dumps(baseline_cli.create(first, reason="known: ties rounded away")))
    result, report = run(pytester, golden, f"{SUPPORT}:TiesAway", f"--baseline={path}", "--case-protocol=pytest",
                         out="second")
    assert report["gate"]["passed"] and report["gate"]["baselined"] == first["counts"]["fail"] > 0
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]


def test_a_baseline_with_placeholders_is_refused_with_every_unfilled_entry(pytester):
    path = write_baseline(pytester, {"id": "A-1/*", "reason": baseline_mod.PLACEHOLDER},
                          {"id": "B-2/*", "diagnosis": "round-half-away", "reason": baseline_mod.PLACEHOLDER},
                          {"id": "C-3/*", "reason": "known"})
    with pytest.raises(baseline_mod.BaselineError) as exc:
        baseline_mod.load(path)
    text = str(exc.value)
    assert "2 entries still have the placeholder reason" in text and "--reason TEXT" in text
    assert "entry 1: A-1/*" in text and "entry 2: B-2/* [round-half-away]" in text and "C-3" not in text


def test_uncovered_deviations_still_fail(pytester, golden, ids):
    covered = sorted(ids["int8"])[0]
    path = write_baseline(pytester, {"id": covered, "reason": "vendor bug 1234"})
    result, report = run(pytester, golden, f"{SUPPORT}:FlipInt8Runner", f"--baseline={path}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert set(report["gate"]["new_failures"]) == ids["int8"] - {covered}
    assert report["gate"]["baselined"] == 1


def test_expired_entries_fail_the_run(pytester, golden, ids):
    path = write_baseline(
        pytester,
        {"id": "QuantizeLinear-21/*-int8/*", "reason": "known: int8 low bit", "expires": "2000-01-31"},
    )
    result, report = run(pytester, golden, f"{SUPPORT}:FlipInt8Runner", f"--baseline={path}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    gate = report["gate"]
    assert [e["entry"] for e in gate["expired"]] == [1] and not gate["passed"]
    assert set(gate["new_failures"]) == ids["int8"]  # an expired entry covers nothing
    result.stdout.fnmatch_lines(["*gate: baseline entry 1 (QuantizeLinear-21/*-int8/*) expired on 2000-01-31*"])

    # An expired entry fails the run even when nothing deviates: the file must be kept honest.
    result, report = run(pytester, golden, "cpu-ref", f"--baseline={path}", out="out2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert report["gate"]["expired"] and report["gate"]["new_failures"] == []


@pytest.mark.parametrize("text, message", [
    ("{not json", "is not JSON: line 1"),
    ('{"qconform_baseline": 1, "entries": [{"id": "X-1/*"}]}', "entry 1 (X-1/*) needs a non-empty \"reason\""),
    ('{"qconform_baseline": 1, "entries": [{"id": "X-1/*", "reason": "r", "expires": "soon"}]}',
     "expires 'soon' is not an ISO date"),
    ('{"entries": []}', "expected \"qconform_baseline\": 1"),
])
def test_bad_baseline_is_one_line_usage_error(pytester, golden, text, message):
    path = pytester.path / "baseline.json"
    path.write_text(text)
    result, report = run(pytester, golden, "cpu-ref", f"--baseline={path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and report is None
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and str(path) in errors[0] and message in errors[0], result.stderr.str()


def test_floor_fails_a_run_that_collects_too_few_cases(pytester, golden):
    # A selection going wrong without any -k/-m: a conftest dropping most items. The default floor
    # (every corpus case, as no filter is given) catches it.
    pytester.makeconftest("""
        def pytest_collection_modifyitems(items):
            del items[3:]
    """)
    result, report = run(pytester, golden, "cpu-ref")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert report["counts"]["collected"] == 3 and not report["gate"]["floor_ok"]
    result.stdout.fnmatch_lines(["*gate: only 3 case(s) collected, fewer than the floor of *"])


def test_deliberate_deselection_is_not_a_broken_selection(pytester, golden):
    # A plugin that sets items aside through pytest_deselected (as -k, -m and --explore do) is a
    # selection: no default floor. (Under xdist the workers send their count to the controller.)
    pytester.makeconftest("""
        def pytest_collection_modifyitems(config, items):
            config.hook.pytest_deselected(items=items[3:])
            del items[3:]
    """)
    result, report = run(pytester, golden, "cpu-ref")
    assert result.ret == pytest.ExitCode.OK
    assert report["gate"]["min_cases"] == 0 and report["invocation"]["filters"][-1].endswith(" deselected")


def test_explicit_floor_applies_to_filtered_runs(pytester, golden):
    result, report = run(pytester, golden, "cpu-ref", "-k", "specials", "--min-cases=10000")
    assert result.ret == pytest.ExitCode.TESTS_FAILED and not report["gate"]["floor_ok"]
    result, report = run(pytester, golden, "cpu-ref", "-k", "specials", out="out2")
    assert result.ret == pytest.ExitCode.OK and report["gate"]["min_cases"] == 0


def test_report_diff(pytester, golden, ids, capsys):
    _, good = run(pytester, golden, "cpu-ref", out="good")
    _, bad = run(pytester, golden, f"{SUPPORT}:FlipInt8NoUint8Runner", out="bad")
    old, new = pytester.path / "good" / "report.json", pytester.path / "bad" / "report.json"
    capsys.readouterr()  # drop the in-process runs' output

    assert cli.main(["report", "diff", str(old), str(new), "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert {e["id"] for e in d["regressed"]} == ids["int8"]
    assert {e["id"] for e in d["support"]} == ids["uint8"]
    assert all((e["old"], e["new"]) == ("pass", "unsupported") for e in d["support"])
    assert d["fixed"] == [] and d["added"] == [] and d["removed"] == []

    assert cli.main(["report", "diff", str(new), str(old), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert {e["id"] for e in d["fixed"]} == ids["int8"] and d["regressed"] == []
    assert all((e["old"], e["new"]) == ("unsupported", "pass") for e in d["support"])

    # The console script, as CI calls it: text output, exit 1 on regressions.
    proc = subprocess.run([sys.executable, "-m", "qconform.cli", "report", "diff", str(old), str(new)],
                          capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr
    assert f"regressed (passed before, deviates now): {len(ids['int8'])}" in proc.stdout
    some = sorted(ids["int8"])[0]
    assert f"  {some}: pass → fail (" in proc.stdout


def test_report_diff_rejects_what_is_not_a_report(tmp_path, capsys):
    bogus = tmp_path / "x.json"
    bogus.write_text('{"schema_version": 99, "cases": []}')
    assert cli.main(["report", "diff", str(bogus), str(bogus)]) == 2
    assert "schema_version 99" in capsys.readouterr().err


def test_baseline_glob_and_expiry_rules():
    b = baseline_mod.parse([{"id": "Q-21/*/specials/*", "reason": "r", "expires": "2026-01-31"},
                            {"id": "Q-21/float32-int8/basic/per-axis", "reason": "exact"}])
    import datetime as dt

    day, after = dt.date(2026, 1, 31), dt.date(2026, 2, 1)
    assert b.live_match("Q-21/float16-int8/specials/extremes", "fail", day).number == 1  # expiry day inclusive
    assert b.live_match("Q-21/float16-int8/specials/extremes", "fail", after) is None
    assert b.live_match("Q-21/float32-int8/basic/per-axis", "fail", after).number == 2
    assert b.live_match("Q-21/float32-int8/basic/per-tensor", "fail", day) is None

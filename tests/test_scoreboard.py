"""``qconform scoreboard``: real runs of two real runners on a small slice of the corpus, then the
comparison checked against their report.json files, re-rendered bit for bit, and checked for staleness.

cpu-ref (qconform's oracle) and onnx-reference (onnx.reference) over QuantizeLinear-13 and
DequantizeLinear-13, families basic and specials: 21 cases each, with passes, failures the
diagnosis names and unsupported cases for onnx-reference. Nothing asserts on time.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import re
import shutil
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from qconform import cli
from qconform.apps import scoreboard
from qconform.report.model import load
from qconform.verdicts import DEVIATING

SLICE = "opset_13 and (family_basic or family_specials)"
RUNNERS = ("onnx-reference", "cpu-ref")  # the scoreboard's order: BUNDLED order


def _main(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(["scoreboard", *argv])
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def board(tmp_path_factory) -> dict:
    """One real scoreboard run, its report directories kept inside the output folder."""
    root = tmp_path_factory.mktemp("scoreboard")
    out = root / "board"
    rc, stdout, stderr = _main("--runners", ",".join(reversed(RUNNERS)), "--jobs", "2", "--out", str(out),
                               "--reports", str(out / "reports"), "-m", SLICE)
    assert rc == 0, stdout + stderr
    reports = {n: load(out / "reports" / n / "report.json") for n in RUNNERS}
    return {"root": root, "out": out, "stdout": stdout, "reports": reports, "bytes": _written(out)}


def _written(out: Path) -> dict[str, bytes]:
    """The scoreboard's files and its runtimes' pages and certificates, by path relative to ``out``."""
    pages = [p.relative_to(out).as_posix() for p in sorted((out / "runtimes").glob("*"))]
    return {f: (out / f).read_bytes() for f in (*scoreboard.FILES, *pages)}


def _table(md: str, heading: str) -> dict[str, list[str]]:
    """The Markdown table under ``## heading``: first cell -> the other cells."""
    section = md.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    return {cells[0]: cells[1:] for cells in ([c.strip() for c in r.strip("|").split(" | ")] for r in rows[1:])}


def test_progress_one_line_per_runner_at_start_and_end(board):
    lines = board["stdout"].splitlines()
    for name in RUNNERS:
        assert f"{name}: started" in lines
        (done,) = [line for line in lines if line.startswith(f"{name}: finished in ")]
        c = board["reports"][name]["counts"]
        assert f"{c['collected']} cases: {c['pass']} pass, {c['fail']} fail" in done
    assert sum(line.startswith("wrote ") for line in lines) == len(scoreboard.FILES) + 2 * len(RUNNERS)  # + pages, certificates


def test_headline_counts_are_the_reports_counts(board):
    md = board["bytes"]["scoreboard.md"].decode()
    head = _table(md, "Headline")
    assert list(head) == list(RUNNERS)
    for name, report in board["reports"].items():
        c = report["counts"]
        deviations = report["failures"]
        named = sum(1 for f in deviations if f.get("diagnosis"))
        failing = [f for f in deviations if f["verdict"] == "fail"]
        failing_named = sum(1 for f in failing if f.get("diagnosis"))
        assert len(deviations) == sum(c[v] for v in DEVIATING)
        expected = [str(c["collected"]), str(c["pass"]), str(c["fail"]), str(c["error"]), str(c["unsupported"]),
                    str(c["info"]), str(c["crashed"] + c["timeout"]),
                    f"{named} of {len(deviations)} ({100 * named / len(deviations):.1f}%)" if deviations else "–",
                    f"{failing_named} of {len(failing)} ({100 * failing_named / len(failing):.1f}%)" if failing else "–"]
        assert head[name] == expected
    # the slice is what it should be: every case of cpu-ref (the oracle) passes
    assert board["reports"]["cpu-ref"]["counts"]["pass"] == board["reports"]["cpu-ref"]["counts"]["collected"] > 0


def test_per_op_version_cells_count_the_cases(board):
    md = board["bytes"]["scoreboard.md"].decode()
    table = _table(md, "Per op version")
    expected: dict[str, dict[str, str]] = defaultdict(dict)
    for name, report in board["reports"].items():
        per: dict[str, Counter] = defaultdict(Counter)
        for case in report["cases"]:  # independently of the matrix the scoreboard reads
            v = case["verdict"]
            per[case["id"].split("/")[0]]["deviate" if v in DEVIATING else v] += 1
        for ov, cnt in per.items():
            expected[ov][name] = f"{cnt['pass']} / {cnt['deviate']} / {cnt['unsupported']}"
    assert set(table) == set(expected) == {"QuantizeLinear-13", "DequantizeLinear-13", "qdq.Add-13", "qdq.Mul-13",
                                           "qdq.MatMul-13", "qdq.Requant-13"}  # the opset-13 QDQ patterns too
    for ov, cells in table.items():
        assert cells == [expected[ov].get(n, "–") for n in RUNNERS]


def test_header_diagnosis_and_links(board):
    md = board["bytes"]["scoreboard.md"].decode()
    out, reports = board["out"], board["reports"]
    assert f"`{scoreboard.current_digest()}`" in md
    assert f"-m '{SLICE}'" in md and "a partial scoreboard" in md
    runtimes = _table(md, "Runtimes")
    for name, report in reports.items():
        r = report["runner"]
        assert runtimes[name][:3] == [r["name"], r["version"], r["device"]]
        for f in ("report.html", "summary.md", "report.json"):
            link = f"reports/{name}/{f}"
            assert f"]({link})" in md and (out / link).is_file()
    # per runtime, every model a failure names, with the number of failures naming it
    diag = md.split("## Diagnosis\n", 1)[1]
    for name, report in reports.items():
        section = diag.split(f"### {name}\n", 1)[1].split("\n### ", 1)[0]
        named = Counter(m for f in report["failures"] for m in set(f.get("diagnosis") or []))
        rows = {cells[0].strip("`"): cells[1] for cells in (re.split(r" \| ", line.strip("| "))
                                                            for line in section.splitlines() if line.startswith("| `"))}
        assert len(rows) == min(len(named), scoreboard.TOP)
        assert all(rows[m] == str(named[m]) for m in rows)
        if not report["failures"]:
            assert "No deviating case." in section
    data = json.loads(board["bytes"]["scoreboard.json"])
    assert [rt["name"] for rt in data["runtimes"]] == list(RUNNERS)
    assert {rt["name"]: rt["runner"]["version"] for rt in data["runtimes"]} == \
           {n: r["runner"]["version"] for n, r in reports.items()}
    html = board["bytes"]["scoreboard.html"].decode()
    for name, report in reports.items():
        c = report["counts"]
        assert f"<tr><td>{name}</td><td class=n>{c['collected']}</td><td class=n>{c['pass']}</td>" in html


def test_from_reports_renders_the_same_bytes_anywhere(board, tmp_path):
    out = board["out"]
    assert _main("--from-reports", str(out / "reports"), "--out", str(out))[0] == 0
    assert _written(out) == board["bytes"]
    moved = tmp_path / "elsewhere" / "board"
    shutil.copytree(out, moved)
    rc, stdout, _ = _main("--from-reports", str(moved / "reports"), "--out", str(moved))
    assert rc == 0 and "onnx-reference: started" not in stdout  # nothing ran
    assert _written(moved) == board["bytes"]
    for data in board["bytes"].values():
        assert str(board["root"]).encode() not in data and str(scoreboard.PKG).encode() not in data
    # reports outside the output folder: same tables, no links
    rc, _, _ = _main("--from-reports", str(moved / "reports"), "--out", str(tmp_path / "other"), "--runners", "cpu-ref")
    md = (tmp_path / "other" / "scoreboard.md").read_text()
    assert rc == 0 and "report.html" not in md and "onnx-reference" not in md.split("## Runtimes", 1)[1]
    assert sorted(p.name for p in (tmp_path / "other" / "runtimes").iterdir()) == ["cpu-ref.certificate.json",
                                                                                   "cpu-ref.md"]


def test_each_runtime_has_a_page_with_its_verdicts_and_deviating_types(board):
    """runtimes/NAME.md (linked from the Runtimes table) is that runtime's certification summary:
    the certificate's verdict per op version with the report's counts, and every deviating case
    counted once under its type combination, with the models that reproduce it."""
    from qconform.report import certificate

    md = board["bytes"]["scoreboard.md"].decode()
    for name, report in board["reports"].items():
        assert f"[certificate](runtimes/{name}.md)" in md
        page = board["bytes"][f"runtimes/{name}.md"].decode()
        assert certificate.overall(report) in page
        per_ov = _table(page, "Per op version")
        scopes = certificate.scopes(report)
        assert list(per_ov) == [s["op_version"] for s in scopes]
        for s in scopes:
            rows = [c for c in report["cases"] if c["id"].startswith(s["op_version"] + "/")]
            bad = sum(c["verdict"] in DEVIATING for c in rows)
            assert per_ov[s["op_version"]][:3] == [s["verdict"], str(sum(c["verdict"] == "pass" for c in rows)), str(bad)]
        types = page.split("## Deviating type combinations\n", 1)[1].split("\n## ", 1)[0]
        counted = Counter()
        for line in types.splitlines()[5:]:
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            counted[cells[0]] += int(cells[2])
        assert dict(counted) == {ov: n for ov, n in Counter(c["id"].split("/")[0] for c in report["cases"]
                                                              if c["verdict"] in DEVIATING).items()}
        assert counted or "No deviating case." in types


def test_each_runtime_has_a_machine_readable_certificate(board):
    """runtimes/NAME.certificate.json, linked beside the page: the certificate's verdict of every op
    version and type combination, exactly ``certificate.scopes`` of the report, with what ran on what
    and nothing that changes from run to run."""
    from qconform.report import certificate

    md = board["bytes"]["scoreboard.md"].decode()
    for name, report in board["reports"].items():
        assert f"[certificate.json](runtimes/{name}.certificate.json)" in md
        page = board["bytes"][f"runtimes/{name}.md"].decode()
        assert f"]({name}.certificate.json)" in page
        cert = json.loads(board["bytes"][f"runtimes/{name}.certificate.json"])
        assert cert["format"] == scoreboard.CERTIFICATE_FORMAT and cert["runtime"] == name
        assert cert["runner"]["version"] == report["runner"]["version"]
        assert cert["corpus"]["digest"] == report["corpus"]["digest"] and cert["counts"] == report["counts"]
        assert cert["overall"] == certificate.overall(report)
        rows = [dict(zip(cert["columns"], r)) for r in cert["rows"]]
        want = [(s["op_version"], "*", s["verdict"], s["cases"], s["pass"], s["new"] + s["accepted"])
                for s in certificate.scopes(report)]
        assert [(r["op_version"], r["types"], r["verdict"], r["cases"], r["pass"], r["deviate"])
                for r in rows if r["types"] == "*"] == want
        typed = [(s["op_version"], t["types"], t["verdict"], t["cases"]) for s in certificate.scopes(report)
                 for t in s["types"]]
        assert [(r["op_version"], r["types"], r["verdict"], r["cases"]) for r in rows if r["types"] != "*"] == typed
        assert sum(r["deviate"] for r in rows if r["types"] == "*") == sum(c["verdict"] in DEVIATING for c in report["cases"])
        text = board["bytes"][f"runtimes/{name}.certificate.json"].decode()
        for run_specific in ("started", "duration", "seconds", report["platform"].get("node") or "\0"):
            assert run_specific not in text


def _edit(src: Path, dst: Path, change) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("reports"))
    data = json.loads((dst / scoreboard.DATA).read_text())
    change(data)
    (dst / scoreboard.DATA).write_text(json.dumps(data))
    return dst


def test_check_flags_a_changed_digest_or_version(board, tmp_path):
    out = board["out"]
    assert scoreboard.stale(out) == []
    rc, stdout, _ = _main("--check", "--out", str(out))
    assert rc == 0 and "current" in stdout

    def digest(data):
        data["runtimes"][0]["corpus_digest"] = "0" * 64

    old = _edit(out, tmp_path / "digest", digest)
    (reason,) = scoreboard.stale(old)
    assert "corpus" in reason and "0" * 64 in reason and scoreboard.current_digest() in reason
    rc, _, stderr = _main("--check", "--out", str(old))
    assert rc == 1 and "0" * 64 in stderr

    def version(data):
        (rt,) = [rt for rt in data["runtimes"] if rt["name"] == "onnx-reference"]
        rt["runner"]["version"] = "0.0.1"

    installed = board["reports"]["onnx-reference"]["runner"]["version"]
    assert scoreboard.stale(_edit(out, tmp_path / "version", version)) == \
        [f"onnx-reference: measured version 0.0.1, installed {installed}"]

    def absent(data):  # a runtime that cannot start here is no reason to re-measure
        data["runtimes"].append({**data["runtimes"][0], "name": "no-such-runtime",
                                 "runner": {"name": "no-such-runtime", "version": "9"}})

    assert scoreboard.stale(_edit(out, tmp_path / "absent", absent)) == []
    assert scoreboard.stale(tmp_path / "nothing-here")  # no scoreboard at all: stale


def test_a_missing_runtime_is_skipped_in_one_line(tmp_path):
    missing = [n for n, mod in (("openvino", "openvino"), ("tract", "tract"), ("tinygrad", "tinygrad"))
               if importlib.util.find_spec(mod) is None]
    if not missing:
        pytest.skip("every optional runtime is installed here")
    rc, stdout, stderr = _main("--runners", missing[0], "--out", str(tmp_path))
    (line,) = [x for x in stdout.splitlines() if x.startswith(f"{missing[0]}: skipped: ")]
    assert f"pip install 'qconform[{missing[0]}]'" in line
    assert rc == 2 and "no runtime to run" in stderr and not (tmp_path / "scoreboard.md").exists()


def test_arguments_and_defaults(tmp_path):
    assert _main("--runners", "nope", "--from-reports", str(tmp_path))[0] == 2
    assert _main("--from-reports", str(tmp_path), "--out", str(tmp_path))[0] == 2  # no report there
    assert {"onnxruntime", "onnx-reference", "openvino", "tract", "tinygrad"} <= set(scoreboard.runtimes())
    assert not set(scoreboard.OWN) & set(scoreboard.runtimes())
    assert scoreboard.default_out() == Path(scoreboard.__file__).resolve().parents[2] / "docs" / "scoreboard"


def test_the_committed_scoreboard_is_current():
    """qconform/docs/scoreboard (linked from README) describes this corpus and every installed runtime
    at the version it was measured on; after a corpus change or a pin move, rerun `qconform scoreboard`."""
    from qconform.apps import scoreboard

    assert scoreboard.stale(scoreboard.default_out()) == []


def test_add_joins_a_runtime_measured_elsewhere_and_keeps_the_other_rows(board, tmp_path):
    """``--from-reports DIR --add``: a runtime measured in another environment (an onnxruntime variant
    with its execution provider) joins the scoreboard; the other rows, their cells and their pages stay
    as they were, and the new row's certificate says the command that certified it."""
    out = tmp_path / "board"
    shutil.copytree(board["out"], out, ignore=shutil.ignore_patterns("reports"))
    before = _written(out)
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(board["out"] / "reports" / "cpu-ref", elsewhere / "vendor-ep")
    data = json.loads((elsewhere / "vendor-ep" / "report.json").read_text())
    data["invocation"]["command_line"] = "qconform certify --runner onnxruntime --runner-opt providers=X --report /x/y"
    (elsewhere / "vendor-ep" / "report.json").write_text(json.dumps(data))
    for _ in range(2):  # adding it again replaces the row: the same bytes
        rc, stdout, stderr = _main("--from-reports", str(elsewhere), "--add", "--out", str(out))
        assert rc == 0, stdout + stderr
        after = _written(out)
        assert {k: v for k, v in after.items() if k.startswith("runtimes/") and "vendor-ep" not in k} == \
            {k: v for k, v in before.items() if k.startswith("runtimes/")}
        md = after["scoreboard.md"].decode()
        assert list(_table(md, "Headline")) == [*RUNNERS, "vendor-ep"]
        assert _table(md, "Headline")["vendor-ep"] == _table(md, "Headline")["cpu-ref"]
        cert = json.loads(after["runtimes/vendor-ep.certificate.json"])
        assert cert["full_report"].startswith("qconform certify --runner onnxruntime --runner-opt providers=X "
                                              "--report DIR")
    assert _main("--add", "--out", str(out))[0] == 2  # rows to add come from reports


def test_a_packed_run_says_so_in_its_row_page_and_certificate(tmp_path):
    """A row whose run asked ``--pack`` (what ``qconform scoreboard`` runs) says so in its command, and
    its page and certificate say what packing did: how many passes came from packed models, or why
    none could. A real ``certify --pack`` of cpu-ref (no packing measured for it: not packed), and the
    same report as a run that packed 7 cases would say it."""
    from qconform.apps.scoreboard.render import measured_by

    reports = tmp_path / "reports"
    rc = cli.main(["certify", "--runner", "cpu-ref", "--pack", "-j", "1", "--case", "QuantizeLinear-13/*/basic/*",
                   "--report", str(reports / "cpu-ref")])
    assert rc in (0, 1)
    report = json.loads((reports / "cpu-ref" / "report.json").read_text())
    assert report["invocation"]["packing"]["asked"] and not report["invocation"]["packing"]["used"]
    report["invocation"]["packing"].update(used=True, cases=7, why="measured equivalent here")
    shutil.copytree(reports / "cpu-ref", reports / "packed-ref")
    (reports / "packed-ref" / "report.json").write_text(json.dumps(report))
    rc, stdout, stderr = _main("--from-reports", str(reports), "--out", str(tmp_path / "board"))
    assert rc == 0, stdout + stderr
    data = json.loads((tmp_path / "board" / scoreboard.DATA).read_text())
    rows = {rt["name"]: rt for rt in data["runtimes"]}
    assert measured_by(rows["cpu-ref"]) == "qconform certify --runner cpu-ref --pack --report DIR"
    why = rows["cpu-ref"]["packing"]["why"]
    assert rows["cpu-ref"]["packing"] == {"used": False, "cases": 0, "why": why} and why
    page = (tmp_path / "board" / "runtimes" / "cpu-ref.md").read_text()
    assert f"- packing: not packed: {why}" in page
    assert "--pack --report DIR" in page
    cert = json.loads((tmp_path / "board" / "runtimes" / "packed-ref.certificate.json").read_text())
    assert cert["packing"] == "7 passing case(s) came from packed models: measured equivalent here"
    assert cert["full_report"].startswith("qconform certify --runner cpu-ref --pack -j 1 ")  # not a bundled name: its own

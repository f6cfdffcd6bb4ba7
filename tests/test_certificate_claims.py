"""A certificate never claims more than the run showed: a partial, empty or unauthenticated run, a run
against another corpus, an interrupted one and one read back from a state file each say so, in
report.html, summary.md and the statement alike; ``report verify`` sees a document rewritten with its
checksum line deleted; and a killed run leaves no finished report of an earlier run behind.

Most tests build report dicts with ``model.build``, as the front-ends do; a few run small real
selections (``qconform certify``, the pytest plugin) to show the front-ends go through the same code.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, run_pytest
from support import copy_group

from qconform.report import certificate, html, markdown, model, writer

#: This host, as a report names it: none of it may be shown as a device's platform.
HOST = {"cpu": "HOST-CPU-XYZ", "label": "host-label", "platform": "Host-OS-1", "python": "3.99",
        "features": ["hostfeature"], "packages": {"numpy": "9.9.9-host"}}
#: A device's own declaration (an offline results folder's device.json declares no packages).
DEVICE = {"cpu": "ACME NPU v3", "label": "aarch64 ACME", "features": ["acme"]}


def report_of(verdicts: dict[str, str], *, runner: dict | None = None, corpus: dict | None = None,
              interrupted: bool = False, resumed: int = 0, filters: tuple[str, ...] = ()) -> dict:
    """A report as the front-ends build it: a case per id with its verdict (not-run: no record);
    by default over the bundled corpus, as many cases as it holds."""
    records = [{"id": cid, "verdict": v} for cid, v in verdicts.items() if v != "not-run"]
    meta = {"runner": runner or {"name": "rt", "version": "1"}, "interrupted": interrupted,
            "corpus": corpus or {"digest": certificate.bundled_corpus_digest(), "cases": len(verdicts)},
            "platform": HOST, "qconform_version": "0.1.0",
            "invocation": {"args": [], "profile": "default", "filters": list(filters), "resumed": resumed},
            "timing": {"started": "2026-01-01T00:00:00+00:00", "finished": "", "duration_s": 1.0}}
    report = model.build(records, [{"id": cid} for cid in verdicts], meta)
    report["gate"] = {"passed": not any(v in ("fail", "error") for v in verdicts.values()) and report["complete"]}
    return report


def cases(op_version: str, n: int, verdict: str = "pass", name: str = "c") -> dict[str, str]:
    return {f"{op_version}/float32-uint8/basic/{name}{i}": verdict for i in range(n)}


def statement(page: str) -> tuple[str, str]:
    """report.html's statement box: its tone class and its text."""
    (found,) = re.findall(r'<div class="overall (\w+)" id="overall">([^<]*)</div>', page)
    return found[0], found[1].replace("&#x27;", "'")


def row(page: str, name: str) -> str:
    """One row of report.html's identity block."""
    m = re.search(rf"<tr><th>{re.escape(name)}</th><td>(.*?)</td></tr>", page)
    return m.group(1) if m else ""


def test_an_interrupted_run_calls_no_op_version_conformant_with_cases_not_run():
    """32 of an op version's 61 cases not run: 'not fully run' on its chip and row (with the count),
    and the statement counts no conformance beside 'no conformance is stated'."""
    verdicts = {**cases("DequantizeLinear-10", 29), **cases("DequantizeLinear-10", 32, "not-run", "later"),
                **cases("DequantizeLinear-19", 3), **cases("DequantizeLinear-21", 2, "not-run")}
    report = report_of(verdicts, interrupted=True)
    scoped = {s["op_version"]: s for s in certificate.scopes(report)}
    assert scoped["DequantizeLinear-10"]["verdict"] == certificate.NOT_FULLY_RUN
    assert scoped["DequantizeLinear-10"]["not-run"] == 32 and scoped["DequantizeLinear-10"]["pass"] == 29
    assert scoped["DequantizeLinear-19"]["verdict"] == certificate.CONFORMANT  # every case of it ran and passed
    said = certificate.overall(report)
    assert "no conformance is stated" in said and "op versions conformant" not in said, said
    assert "2 of 3 op versions not fully run" in said, said
    page = html.render(report)
    assert "<b>DequantizeLinear-10</b> not fully run</span>" in page
    assert "<b>32 not run</b>" in page
    assert statement(page)[0] == "bad"


def test_one_rule_decides_green_in_report_html_and_summary_md():
    """A selection, an unauthenticated device, another corpus: no green box and no tick; the whole
    bundled corpus, complete and authenticated: both green. The HTML's colour and the Markdown's tick
    never disagree."""
    whole = cases("QuantizeLinear-21", 4)
    other = {"digest": "ab" * 32, "cases": 4}
    runs = {
        "whole": (report_of(whole), "ok"),
        "selection": (report_of(whole, corpus={"digest": certificate.bundled_corpus_digest(), "cases": 25862},
                                filters=("--case",)), "warn"),
        "unauthenticated": (report_of(whole, runner={"name": "npu", "version": "1", "results": "off",
                                                     "authenticated": False, "platform": DEVICE}), "warn"),
        "other corpus": (report_of(whole, corpus=other), "warn"),
        "deviates": (report_of({**whole, "QuantizeLinear-21/float32-uint8/basic/x": "fail"}), "bad"),
    }
    for name, (report, want) in runs.items():
        assert certificate.tone(report) == want, name
        page, head = html.render(report), markdown.render(report).splitlines()[0]
        assert statement(page)[0] == want, name
        assert ("✅" in head) == (want == "ok"), (name, head)


def test_a_run_against_another_corpus_claims_conformance_only_against_it():
    other = {"digest": "5d3c0b6f2a1e9c7d" + "0" * 48, "cases": 61}
    report = report_of(cases("DequantizeLinear-10", 61), corpus=other)
    said = certificate.overall(report)
    assert "another corpus, not qconform's bundled one: digest 5d3c0b6f2a1e9c7d…, 61 cases" in said, said
    assert "conforms bit-exactly against that corpus" in said, said
    summary = markdown.render(report)
    assert "✅" not in summary and "**Another corpus**" in summary
    page = html.render(report)
    assert statement(page) == ("warn", said)
    bundled = certificate.overall(report_of(cases("DequantizeLinear-10", 61)))
    assert "another corpus" not in bundled and "conforms bit-exactly wherever" in bundled


def test_verdicts_read_back_from_a_state_file_are_said_to_be():
    report = report_of(cases("QuantizeLinear-21", 5), resumed=3)
    said = "3 of 5 cases were read back from an earlier run (--state), not run now"
    assert said in markdown.render(report)
    assert said in html.render(report)
    assert "read back" not in html.render(report_of(cases("QuantizeLinear-21", 5)))


@pytest.mark.parametrize("where", [{"results": "off", "authenticated": False}, {"remote": "10.0.0.2:7000",
                                                                                  "authenticated": True}])
def test_where_the_runtime_ran_elsewhere_the_platform_is_the_devices_never_this_hosts(where):
    device = {**DEVICE, "packages": {"numpy": "0.0.1"}} if "remote" in where else DEVICE
    report = report_of(cases("QuantizeLinear-21", 2), runner={"name": "npu", "version": "1", "platform": device, **where})
    page = html.render(report)
    platform, features, packages = row(page, "platform"), row(page, "ISA features"), row(page, "packages")
    assert "ACME NPU v3" in platform and "HOST-CPU-XYZ" not in platform and "declared by the device" in platform
    assert "acme" in features and "hostfeature" not in features
    assert "9.9.9-host" not in packages
    assert ("numpy 0.0.1" in packages) if "remote" in where else packages == "not declared by the device"
    assert ("not authenticated" in platform) == (where["authenticated"] is False)
    assert "host-label" in row(page, "controller")  # this host is named for what it did, apart
    footer = markdown.render(report).strip().splitlines()[-1]
    assert "aarch64 ACME" in footer and "host-label" not in footer and "declared by the device" in footer
    here = html.render(report_of(cases("QuantizeLinear-21", 2)))
    assert "HOST-CPU-XYZ" in row(here, "platform") and not row(here, "controller")


def _written(root: Path) -> dict:
    """A report directory with an evidence file, as the writer writes it."""
    report = report_of({**cases("QuantizeLinear-21", 2), "QuantizeLinear-21/float32-uint8/basic/x": "fail"})
    report["failures"][0]["evidence"] = [[0, "x", "1", "0x01", "2", "0x02"]]
    writer.write(root, report)
    return report


def test_verify_requires_every_file_the_writer_writes_to_be_listed(tmp_path):
    """Rewrite report.html and summary.md and delete their lines from SHA256SUMS: not intact. The same
    for an evidence file report.json names."""
    _written(tmp_path)
    assert certificate.verify(tmp_path) == []
    sums = tmp_path / certificate.SUMS
    original = sums.read_text()
    assert "evidence/" in original
    evidence = next((tmp_path / "evidence").iterdir())
    kept = {p: p.read_bytes() for p in (tmp_path / "summary.md", evidence)}
    for dropped, rewritten in ((("report.html", "summary.md"), tmp_path / "summary.md"), (("evidence/",), evidence)):
        sums.write_text("".join(line for line in original.splitlines(keepends=True)
                                if not any(d in line for d in dropped)))
        rewritten.write_text("## qconform: rt 1 — ✅ passed\n")
        problems = certificate.verify(tmp_path)
        assert problems and all("not listed in SHA256SUMS" in p for p in problems), problems
        assert len(problems) == len(dropped), problems
        sums.write_text(original)
        rewritten.write_bytes(kept[rewritten])
    assert certificate.verify(tmp_path) == []


def test_prepare_removes_an_earlier_runs_report_and_nothing_else(tmp_path):
    _written(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "evidence" / "mine.png").write_bytes(b"x")
    assert writer.prepare(tmp_path) == ""
    left = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    assert left == ["evidence", "evidence/mine.png", "notes.txt"], left


SLOW = """
import time
from qconform.runners.cpu_ref import CpuRefRunner


class Slow(CpuRefRunner):
    def prepare(self, model):
        run = super().prepare(model)

        def slow(inputs):
            time.sleep(0.3)
            return run(inputs)
        return slow
"""


def test_a_certify_run_killed_mid_run_leaves_no_earlier_report(tmp_path):
    """SIGKILL while cases run (nothing of certify's runs after it; SIGTERM writes the partial report,
    tests/test_certify.py): the directory no longer holds the earlier run's finished report."""
    out = tmp_path / "report"
    _written(out)
    assert certificate.verify(out) == []
    (tmp_path / "slow.py").write_text(SLOW)
    state = tmp_path / "state.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "qconform.cli", "certify", "--runner", f"{tmp_path / 'slow.py'}:Slow",
                             "-j", "1", "--case", "QuantizeLinear-21/*", "--state", str(state), "--report", str(out)],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if state.is_file() and '"id"' in state.read_text():  # a case finished: the run is under way
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the run ended before it could be killed"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert not (out / "report.json").exists() and not (out / "report.html").exists()
    assert certificate.verify(out) != []


def test_a_pytest_run_killed_mid_run_leaves_no_earlier_report(tmp_path):
    """The pytest front-end prepares the directory the same way before its first case."""
    golden = copy_group(tmp_path / "golden", "DequantizeLinear-10")
    out = tmp_path / "report"
    _written(out)
    (tmp_path / "killer.py").write_text("import os, signal\n\n\ndef pytest_runtest_setup(item):\n"
                                        "    os.kill(os.getpid(), signal.SIGKILL)\n")
    r = run_pytest("--runner=cpu-ref", f"--golden={golden}", f"--report={out}", "-p", "killer", "-p", "no:randomly",
                   cwd=tmp_path, env={"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])},
                   timeout=300)
    assert r.returncode == -signal.SIGKILL, r.stdout[-2000:] + r.stderr[-2000:]
    assert not (out / "report.json").exists() and not (out / "summary.md").exists()


def test_a_real_run_against_its_own_corpus_and_one_read_back(tmp_path):
    """``certify --golden`` with one group of the bundled corpus: the certificate says it is another
    corpus and gives no tick; rerun with the same ``--state``, it says the verdicts were read back;
    every file written is listed in SHA256SUMS and intact."""
    golden = copy_group(tmp_path / "golden", "DequantizeLinear-10")
    state = tmp_path / "state.jsonl"
    runs = {}
    for name in ("first", "again"):
        c = subprocess.run([sys.executable, "-m", "qconform.cli", "certify", "--runner", "cpu-ref", "-j", "1",
                            "--golden", str(golden), "--state", str(state), "--report", str(tmp_path / name)],
                           cwd=REPO, capture_output=True, text=True, timeout=600)
        assert c.returncode == 0, c.stdout[-2000:] + c.stderr[-2000:]
        assert certificate.verify(tmp_path / name) == []
        runs[name] = json.loads((tmp_path / name / "report.json").read_text())
    first, again = runs["first"], runs["again"]
    n = first["counts"]["collected"]
    assert first["invocation"]["resumed"] == 0 and again["invocation"]["resumed"] == n
    said = certificate.overall(first)
    assert f"another corpus, not qconform's bundled one: digest {first['corpus']['digest'][:16]}…, {n} cases" in said
    summary, page = (tmp_path / "first" / "summary.md").read_text(), (tmp_path / "first" / "report.html").read_text()
    assert "✅" not in summary and statement(page) == ("warn", said)
    read_back = f"{n} of {n} cases were read back from an earlier run"
    assert read_back in (tmp_path / "again" / "summary.md").read_text()
    assert read_back in (tmp_path / "again" / "report.html").read_text()
    assert read_back not in summary

"""qconform findings: the committed reproducers still reproduce, and the generator is deterministic.

Every committed finding (qconform/docs/findings/<runtime>/<key>/) whose runtime is installed here
is run as its maintainers would run it: ``python repro.py`` in its directory, in a subprocess. It
must exit 1 and print the same MISMATCH line (numbers aside) as when it was written. A finding is
skipped, with the reason, where the installed version is not one it was seen on (a bug fixed in a
later version must not fail the run: regenerate with ``qconform findings``), where its fact's
platform condition does not hold, or, for a finding of a runtime without facts, on another CPU
than the one it was measured on.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from qconform import corpus
from qconform import platform as plat
from qconform.apps import findings
from qconform.verdicts import CRASHED, TIMEOUT

ROOT = findings.default_out()
METAS = sorted(ROOT.glob(f"*/*/{findings.META}"))


def _meta(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _why_not(meta: dict) -> str:
    tpl = findings.TEMPLATES.get(meta["runtime"])
    if tpl is None:
        return f"no script template for {meta['runtime']}"
    version = tpl.installed_version()
    if version is None:
        return f"{tpl.package} is not installed here"
    if meta.get("fact") and findings.auto_status(meta.get("versions", "")).startswith("fixed") \
            and version not in meta["seen_on"]:
        from qconform.facts import in_range

        if not in_range(meta["versions"], version):
            return (f"{meta['fact']} holds for {tpl.package} {meta['versions']}; {version} is installed: "
                    f"{findings.auto_status(meta['versions'])}")
    if version not in meta["seen_on"]:
        return (f"{meta['runtime']}/{meta['key']} was seen on {tpl.package} {', '.join(meta['seen_on'])}, "
                f"{version} is installed (fixed there, or not measured): run `qconform findings --runners "
                f"{meta['runtime']}` to re-measure")
    if meta.get("platform") and not plat.condition_holds(meta["platform"]):
        return f"holds where {meta['platform']}; this machine is {plat.label()}"
    if not meta.get("fact") and meta.get("platform_label") != plat.label():
        return f"measured on {meta['platform_label']}; this machine is {plat.label()}"
    return ""


def _param(path: Path):
    """One finding, marked with the tools its runtime's script needs besides the runtime itself."""
    tpl = findings.TEMPLATES.get(_meta(path)["runtime"])
    return pytest.param(path, marks=pytest.mark.needs(*(tpl.tools if tpl else ())),
                        id=path.parent.relative_to(ROOT).as_posix())


@pytest.mark.parametrize("path", [_param(p) for p in METAS])
def test_reproducer_shows_the_mismatch(path: Path) -> None:
    meta = _meta(path)
    why = _why_not(meta)
    if why:
        pytest.skip(why)
    tpl = findings.TEMPLATES[meta["runtime"]]
    rc, output = findings.run_script(path.parent, tpl, timeout=240)
    assert rc == 1, f"repro.py exited {rc}, not 1:\n{output[-3000:]}"
    line = findings.mark_line(output)
    assert line, f"repro.py printed no {findings.MARK} line:\n{output[-3000:]}"
    assert findings.signature(line) == findings.signature(meta["shows"]), (line, meta["shows"])


def test_committed_findings_are_complete() -> None:
    """Every committed directory has its files, a script without qconform, and an index row."""
    if not METAS:
        pytest.skip(f"no findings under {ROOT}")
    index = (ROOT / findings.INDEX).read_text(encoding="utf-8")
    for path in METAS:
        d = path.parent
        meta = _meta(path)
        for name in ("model.onnx", "inputs.npz", "expected.npz", "repro.py", "README.md"):
            assert (d / name).is_file(), f"{d}: no {name}"
        script = (d / "repro.py").read_text(encoding="utf-8")
        assert "qconform" not in script, f"{d}/repro.py uses qconform"
        assert f"({meta['runtime']}/{meta['key']}/)" in index, f"{d} is not in {findings.INDEX}"
        assert findings.MARK in meta["shows"]


def test_index_is_current() -> None:
    if not METAS:
        pytest.skip(f"no findings under {ROOT}")
    assert (ROOT / findings.INDEX).read_text(encoding="utf-8") == findings.render_index(ROOT), (
        "qconform/docs/findings/index.md is stale: run `qconform findings --index-only`")


def test_readme_counts_the_committed_findings() -> None:
    """README's sentence on the index says how many findings each runtime has: the directories'."""
    import re

    from conftest import REPO

    text = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    m = re.search(r"lists (\d+) findings \(([^)]*)\)", text)
    assert m, "README no longer says how many findings the index lists"
    names = {"onnx.reference": "onnx-reference", "OpenVINO": "openvino", "TVM": "tvm", "IREE": "iree"}
    said = {names.get(n, n): int(k) for n, k in re.findall(r"([\w.-]+) (\d+)", m.group(2))}
    counts: dict[str, int] = {}
    for meta in METAS:
        counts[meta.parent.parent.name] = counts.get(meta.parent.parent.name, 0) + 1
    assert (int(m.group(1)), said) == (len(METAS), counts)


@pytest.mark.parametrize("runtime", list(findings.TEMPLATES))
def test_every_template_renders_python(runtime: str) -> None:
    """Each runtime's script compiles, for numpy-only models and for models with types numpy lacks."""
    from qconform import dtypes

    tpl = findings.TEMPLATES[runtime]
    compile(findings.render_script(tpl, "t", {}, False), f"{runtime}-native", "exec")
    compile(findings.render_script(tpl, "t", {}, True, must_reject="invalid"), f"{runtime}-reject", "exec")
    if tpl.codes is not None:
        carried = {n: dtypes.get(t) for n, t in (("x", "bfloat16"), ("y", "float8e4m3fn"), ("z", "int4"))
                   if tpl.codes(dtypes.get(t)) is not None}
        compile(findings.render_script(tpl, "t", carried, True), f"{runtime}-codes", "exec")


def test_auto_status() -> None:
    assert findings.auto_status("<1.32.0") == "fixed in 1.32.0"
    assert findings.auto_status(">=1.30,<1.32.0") == "fixed in 1.32.0"
    assert findings.auto_status("") == "new"
    assert findings.auto_status(">=1.32.0") == "new"


def test_packing_helpers_match_the_onnx_layout() -> None:
    """The scripts' own pack/unpack (numpy only) agree with qconform.adapt on every int4/uint2 code."""
    from qconform import adapt, dtypes

    ns: dict = {"np": np, "BITS": {"a": 4, "b": 2}, "expected": {}}
    exec(findings.templates._PACKED_HELPERS, ns)  # noqa: S102 - our own template text
    for name, t in (("a", "int4"), ("b", "uint2")):
        et = dtypes.get(t)
        codes = np.arange(1 << et.bits, dtype=np.uint8).repeat(3)[:-1]  # an odd count: a partial byte
        raw = ns["to_bytes"](name, codes)
        assert raw == adapt.pack(et.dtype, codes).tobytes()
        assert np.array_equal(ns["from_bytes"](name, raw, codes.shape), codes)


def _report(path: Path, failures: list[dict]) -> Path:
    digest = corpus.verify(corpus.DEFAULT_ROOT)
    path.write_text(json.dumps({"corpus": {"digest": digest}, "runner": {"name": "onnx-reference"},
                                "failures": failures}), encoding="utf-8")
    return path


def test_generator_is_deterministic(tmp_path: Path) -> None:
    """The same report gives the same bytes, twice (onnx.reference through the report route)."""
    pytest.importorskip("onnx.reference")
    report = _report(tmp_path / "report.json", [
        {"id": "QuantizeLinear-13/float32-int8/specials/extremes", "verdict": "fail",
         "diagnosis": ["cast-before-clip"]},
        {"id": "DynamicQuantizeLinear-11/float32-uint8-float32/shapes/empty-1d", "verdict": "error",
         "problem": "runner raised ValueError: zero-size array to reduction operation maximum which has no identity"},
    ])
    trees = []
    for name in ("a", "b"):
        out = tmp_path / name
        args = _args(["--runners", "onnx-reference", "--from-report", str(report), "--out", str(out)])
        assert findings.main(args) == 0
        trees.append({p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()})
    assert trees[0] == trees[1]
    keys = {k.split("/")[1] for k in trees[0] if k.count("/") == 2}
    assert keys == {"QuantizeLinear-cast-before-clip",
                    "DynamicQuantizeLinear-error-ValueError-zero-size-array-to-reduction-operation"}, keys
    meta = json.loads(trees[0]["onnx-reference/QuantizeLinear-cast-before-clip/finding.json"])
    assert meta["shows"].startswith(findings.MARK) and meta["seen_on"]


def _args(argv: list[str]):
    import argparse

    p = argparse.ArgumentParser()
    findings.add_arguments(p)
    return p.parse_args(argv)


def test_rediagnose_names_what_an_older_report_left_unnamed(tmp_path: Path) -> None:
    """A report made before a model existed says 'no model' ([]); --rediagnose runs such a case
    again and diagnoses it with this checkout's models, without it the report's word stands."""
    pytest.importorskip("onnx.reference")
    report = _report(tmp_path / "report.json", [
        {"id": "QuantizeLinear-13/float32-int8/specials/extremes", "verdict": "fail", "diagnosis": []}])
    keys = {}
    for flag in ([], ["--rediagnose"]):
        out = tmp_path / ("again" if flag else "as-is")
        args = _args(["--runners", "onnx-reference", "--from-report", str(report), "--out", str(out), *flag])
        assert findings.main(args) == 0
        keys[bool(flag)] = {p.parent.name for p in out.glob(f"onnx-reference/*/{findings.META}")}
    assert keys[False] == {"QuantizeLinear-unexplained"}
    assert len(keys[True]) == 1 and not any(k.endswith("-unexplained") for k in keys[True]), keys[True]


VENDOR_RUNNER = '''
"""A vendor's runtime: qconform's cpu-ref whose int8 QuantizeLinear saturates at 126 (the bug)."""
import numpy as np
from qconform.runners.cpu_ref import CpuRefRunner


class VendorNpu(CpuRefRunner):
    name = "vendor-npu"

    def __init__(self, ceiling="126"):
        super().__init__()
        self.ceiling = int(ceiling)

    def describe(self):
        return {"name": self.name, "version": "7.1", "options": {"ceiling": self.ceiling}}

    def prepare(self, model):
        run = super().prepare(model)
        return lambda inputs: [np.minimum(o, self.ceiling).astype(o.dtype) if o.dtype == np.int8 else o
                               for o in run(inputs)]
'''


def test_a_custom_runners_report_gives_reproducers_that_load_that_runner(tmp_path: Path) -> None:
    """A report of a vendor's runner (no template of its own): each failure group becomes a finding
    whose repro.py loads that runner by its path with the report's --runner-opt words, runs it and
    prints the mismatch; no other runtime runs."""
    from qconform import cli

    (tmp_path / "vendor").mkdir()
    runner_file = tmp_path / "vendor" / "npu_runner.py"
    runner_file.write_text(VENDOR_RUNNER, encoding="utf-8")
    report_dir = tmp_path / "report"
    argv = ["--runner", f"{runner_file}:VendorNpu", "--runner-opt", "ceiling=126", "-j", "1",
            "--case", "QuantizeLinear-13/float32-int8/basic/*", "--report", str(report_dir)]
    assert cli.main(["certify", *argv]) == 1
    load = json.loads((report_dir / "report.json").read_text())["runner"]["load"]
    assert load == {"runner": f"{runner_file.resolve()}:VendorNpu", "options": {"ceiling": "126"}}
    out = tmp_path / "out"
    assert findings.main(_args(["--from-report", str(report_dir), "--out", str(out)])) == 0
    metas = [_meta(p) for p in out.glob(f"*/*/{findings.META}")]
    assert metas and {m["runtime"] for m in metas} == {"vendor-npu"}, metas
    tpl = findings.generic_template("vendor-npu", {"load": load})
    for m in metas:
        directory = out / "vendor-npu" / m["key"]
        assert findings.MARK in m["shows"] and m["seen_on"] == ["7.1"]
        rc, output = findings.run_script(directory, tpl)
        assert rc == 1 and output.startswith("vendor-npu 7.1") and "actual 126" in output, output
        assert findings.mark_line(output) == m["shows"]


READING_RUNNER = '''
"""A runtime whose outputs are one permitted reading of the case ($READING: its index) or, unset,
every bit of the first reading inverted (a deviation)."""
import os

import numpy as np
from qconform import corpus
from qconform.runners.cpu_ref import CpuRefRunner


class ReadingNpu(CpuRefRunner):
    name = "reading-npu"

    def describe(self):
        return {"name": self.name, "version": "1.0"}

    def prepare(self, model):
        idx = corpus.index(corpus.DEFAULT_ROOT)
        case = next(idx.case(r.id) for r in idx.refs if r.id.replace("/", "_") == model.graph.name)

        def run(inputs):
            which = os.environ.get("READING")
            if which is None:
                return [~o.view(f"u{o.itemsize}") for o in case.readings[0].outputs]
            return [o.copy() for o in case.readings[int(which)].outputs]

        return run
'''


def test_a_reproducer_for_a_case_with_two_readings_prints_ok_for_either(tmp_path: Path, monkeypatch) -> None:
    """repro.py compares with every reading the text permits (readings.npz), dtype and shape first:
    a runtime giving any of them is OK, one giving none is a MISMATCH."""
    from qconform import cli

    # an int32 scale at 23+: the operands rounded to int32, or the exact quotient rounded once (43 or 42)
    case_id = "QuantizeLinear-23/float32-int32-uint8/basic/per-tensor"
    runner_file = tmp_path / "reading_runner.py"
    runner_file.write_text(READING_RUNNER, encoding="utf-8")
    monkeypatch.delenv("READING", raising=False)
    report_dir = tmp_path / "report"
    assert cli.main(["certify", "--runner", f"{runner_file}:ReadingNpu", "-j", "1", "--case", case_id,
                     "--report", str(report_dir)]) == 1
    out = tmp_path / "out"
    assert findings.main(_args(["--from-report", str(report_dir), "--out", str(out)])) == 0
    (directory,) = [p.parent for p in out.glob(f"*/*/{findings.META}")]
    assert (directory / "readings.npz").is_file()
    tpl = findings.generic_template("reading-npu", {"load": json.loads(
        (report_dir / "report.json").read_text())["runner"]["load"]})
    rc, output = findings.run_script(directory, tpl)
    assert rc == 1 and findings.MARK in output, output
    for which in ("0", "1"):
        monkeypatch.setenv("READING", which)
        rc, output = findings.run_script(directory, tpl)
        assert rc == 0 and "OK: the outputs are" in output and findings.MARK not in output, (which, output)


def test_a_report_that_cannot_say_how_to_load_its_runner_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    """An older report of a vendor's runner, with no ``load`` entry: one line, nothing run or written."""
    report = _report(tmp_path / "report.json", [{"id": "QuantizeLinear-13/float32-int8/specials/extremes",
                                                   "verdict": "fail", "diagnosis": []}])
    data = json.loads(report.read_text())
    data["runner"] = {"name": "my-npu"}
    report.write_text(json.dumps(data))
    out = tmp_path / "out"
    assert findings.main(_args(["--from-report", str(report), "--out", str(out)])) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not say how its runner was loaded" in err
    assert not out.exists()
    assert findings.main(_args(["--runners", "my-npu", "--out", str(out)])) == 2
    assert "no script template and no report of it" in capsys.readouterr().err


ABORTING_RUNNER = '''
"""A vendor's runtime that saturates int8 at 126 and aborts its process (an assertion, SIGABRT) on any
input holding -128: what onnxruntime does on some malformed nodes (fact E327)."""
import os

import numpy as np
from qconform.runners.cpu_ref import CpuRefRunner


class AbortingNpu(CpuRefRunner):
    name = "aborting-npu"

    def describe(self):
        return {"name": self.name, "version": "7.1", "options": {}}

    def prepare(self, model):
        run = super().prepare(model)

        def go(inputs):
            if any(np.any(np.asarray(v) == -128) for v in inputs.values()):
                os.abort()
            return [np.minimum(o, 126).astype(o.dtype) if o.dtype == np.int8 else o for o in run(inputs)]
        return go


class HangingNpu(AbortingNpu):
    """Hangs (a deadlocked driver) where the other aborts."""
    name = "hanging-npu"

    def prepare(self, model):
        run = super(AbortingNpu, self).prepare(model)

        def go(inputs):
            if any(np.any(np.asarray(v) == -128) for v in inputs.values()):  # a compiler subprocess that hangs
                import subprocess
                child = subprocess.Popen(["sleep", "3600"])
                with open(os.environ["HANGING_NPU_PIDFILE"], "w") as f:
                    f.write(str(child.pid))
                child.wait()
            return run(inputs)
        return go
'''


def _gone(pid: int, seconds: float = 10.0) -> bool:
    """Whether the process has ended (or is a zombie awaiting its reaper) within ``seconds``."""
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("runner, verdict, said, timeout", [("AbortingNpu", CRASHED, "ended the worker process", 600),
                                                             ("HangingNpu", TIMEOUT, "no result after 20 s", 20)])
def test_a_runtime_that_aborts_or_hangs_on_a_case_costs_that_case_not_the_findings_run(tmp_path: Path, monkeypatch, runner,
                                                                                     verdict, said, timeout) -> None:
    """The findings observe each candidate case in a worker process: a case that aborts the runtime is
    observed as crashed, one with no result within the observer's timeout as a timeout (its worker
    ended; a findings run of a runtime that hung used to wait forever), and the next case gets a
    fresh worker."""
    from qconform import corpus
    from qconform.apps.findings.observe import IsolatedObserver
    from qconform.verdicts import FAIL, PASS

    runner_file = tmp_path / "vendor_runner.py"
    runner_file.write_text(ABORTING_RUNNER, encoding="utf-8")
    pidfile = tmp_path / "compiler.pid"
    monkeypatch.setenv("HANGING_NPU_PIDFILE", str(pidfile))
    index = corpus.index(corpus.DEFAULT_ROOT)
    cases = index.cases_of([r.id for r in index.refs if r.id.startswith("DequantizeLinear-10/int8-float32/")])
    holding = [c for c in cases.values() if any(np.any(v == -128) for v in c.feeds.values())]
    clean = [c for c in cases.values() if c not in holding]
    assert holding and clean
    observer = IsolatedObserver((f"{runner_file}:{runner}", None), timeout=timeout)
    try:
        stopped = observer(holding[0])
        assert stopped.verdict == verdict and said in stopped.message
        if pidfile.exists():  # the hung compiler ended with its worker, not left running
            assert _gone(int(pidfile.read_text()))
        observer.timeout = 600  # a loaded machine may take long to start the fresh worker
        after = observer(clean[0])
        assert after.verdict in (PASS, FAIL) and after.outputs is not None
    finally:
        observer.close()

"""The offline round trip: ``qconform export backend-test``, outputs written by a device
team's own script that never imports qconform, ``qconform import-results`` -- the same verdicts as a
direct run of the same runtime.

The "device" is onnxruntime's numpy binding with a device bug (the lowest bit of every int8 output
flipped), driven by DEVICE_TOOL below exactly as the shipped example runner
(qconform/examples/my_runner.py) drives it; the direct run is that runner with the same bug."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from qconform import cli

REPO = Path(__file__).resolve().parents[1]
SLICE = "QuantizeLinear-21/*"

#: A device team's tool: onnx and onnxruntime only. It runs every exported case and writes what the
#: device returned as actual/output_N.pb, or why it could not as actual/unsupported.txt / error.txt.
DEVICE_TOOL = r'''
import json, sys
from pathlib import Path
import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

root = Path(sys.argv[1])
NUMPY = {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13}  # element types numpy carries
(root / "device.json").write_text(json.dumps({"name": "npu-sim", "version": ort.__version__, "device": "offline"}))
for case in json.loads((root / "index.json").read_text())["cases"]:
    d = root / case["readings"][0]["dir"]
    actual = d / "actual"
    actual.mkdir(exist_ok=True)
    model = onnx.load(d / "model.onnx")
    io = [v.type.tensor_type.elem_type for v in [*model.graph.input, *model.graph.output]]
    foreign = sorted(onnx.TensorProto.DataType.Name(t) for t in set(io) - NUMPY)
    if foreign:
        (actual / "unsupported.txt").write_text("not tried: numpy arrays cannot hold " + ", ".join(foreign))
        continue
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 4
    try:
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    except Exception as exc:
        (actual / "unsupported.txt").write_text(str(exc).strip().splitlines()[0])
        continue
    feeds = {}
    for n, vi in enumerate(model.graph.input):
        t = onnx.TensorProto()
        t.ParseFromString((d / "test_data_set_0" / f"input_{n}.pb").read_bytes())
        feeds[vi.name] = numpy_helper.to_array(t)
    try:
        outs = sess.run(None, feeds)
    except Exception as exc:
        text = " ".join(str(exc).split())
        if isinstance(exc, ort.capi.onnxruntime_pybind11_state.NotImplemented) or " was false. " in text:
            (actual / "unsupported.txt").write_text(text.split(" was false. ")[-1])
        else:
            (actual / "error.txt").write_text(text)
        continue
    for n, (o, arr) in enumerate(zip(model.graph.output, outs)):
        arr = np.asarray(arr)
        if arr.dtype == np.int8:  # the device's bug
            arr = (arr.view(np.uint8) ^ np.uint8(1)).view(np.int8)
        (actual / f"output_{n}.pb").write_bytes(numpy_helper.from_array(arr, o.name).SerializeToString())
'''

#: The same runtime and bug as a live runner: the shipped example, int8 outputs flipped the same way.
DIRECT = f'''
import numpy as np
import importlib.util
spec = importlib.util.spec_from_file_location("my_runner", {str(REPO / "qconform" / "examples" / "my_runner.py")!r})
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)


class Flipped(mod.MyRunner):
    def prepare(self, model):
        run = super().prepare(model)
        return lambda feeds: [(o.view(np.uint8) ^ np.uint8(1)).view(np.int8) if o.dtype == np.int8 else o
                              for o in run(feeds)]
'''


@pytest.mark.needs("onnxruntime")
def test_an_offline_round_trip_gives_the_direct_runs_verdicts(tmp_path):
    out = tmp_path / "export"
    assert cli.main(["export", "backend-test", str(out), "--case", SLICE]) == 0
    tool = tmp_path / "device_tool.py"
    tool.write_text(DEVICE_TOOL)
    r = subprocess.run([sys.executable, "-X", "importtime", str(tool), str(out)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert " qconform" not in r.stderr  # the device tool never imported qconform (python -X importtime)

    assert cli.main(["import-results", str(out), "--case", SLICE, "--report", str(tmp_path / "offline")]) in (0, 1)
    (tmp_path / "direct_runner.py").write_text(DIRECT)
    runner = f"{tmp_path / 'direct_runner.py'}:Flipped"
    assert cli.main(["certify", "--runner", runner, "--case", SLICE, "--report", str(tmp_path / "direct"),
                     "-j", "1"]) in (0, 1)
    offline = json.loads((tmp_path / "offline" / "report.json").read_text())
    direct = json.loads((tmp_path / "direct" / "report.json").read_text())
    verdicts = {c["id"]: c["verdict"] for c in offline["cases"]}
    assert verdicts == {c["id"]: c["verdict"] for c in direct["cases"]}
    assert offline["counts"]["pass"] and offline["counts"]["fail"] and offline["counts"]["unsupported"]
    assert offline["runner"]["name"] == "npu-sim" and offline["invocation"]["executor"].startswith("offline results")
    assert offline["invocation"]["command_line"].startswith("qconform import-results ")
    # a failure's evidence is the device's bits, as in the direct run
    by_id = {f["id"]: f for f in direct["failures"]}
    for f in offline["failures"]:
        if f["verdict"] == "fail":
            assert f["first_mismatches"] == by_id[f["id"]]["first_mismatches"]


def _export(tmp_path: Path, cases: str) -> Path:
    out = tmp_path / "export"
    assert cli.main(["export", "backend-test", str(out), "--case", cases]) == 0
    return out


def _results_dirs(out: Path) -> list[Path]:
    return [out / c["readings"][0]["dir"] for c in json.loads((out / "index.json").read_text())["cases"]]


def _write_outputs(out: Path, which: list[Path]) -> None:
    """The true outputs (cpu-ref's) of the cases whose result directories are ``which``."""
    import onnx

    from qconform import adapt
    from qconform.runners.cpu_ref import CpuRefRunner

    for d in which:
        model = onnx.load(d / "model.onnx")
        feeds = {}
        for n, vi in enumerate(model.graph.input):
            feeds[vi.name] = adapt.from_tensor_proto((d / "test_data_set_0" / f"input_{n}.pb").read_bytes())
        (d / "actual").mkdir(exist_ok=True)
        for n, arr in enumerate(CpuRefRunner().run(model, feeds)):
            (d / "actual" / f"output_{n}.pb").write_bytes(adapt.to_tensor_proto(arr))


BASIC = "QuantizeLinear-13/float32-int8/basic/*"


def test_missing_results_make_an_incomplete_run_never_a_pass_and_a_foreign_folder_is_refused(tmp_path, capsys):
    """A device tool that writes nothing for some cases (say, exactly the ones it would fail) gets no
    pass and no 'unsupported' for them: they are not run, the run is incomplete, exit 2, and the
    first line of the report and of the summary says so; the cause is named once, not per path."""
    out = _export(tmp_path, BASIC)
    dirs = _results_dirs(out)
    _write_outputs(out, dirs[:1])  # the second case: nothing written
    assert cli.main(["import-results", str(out), "--case", BASIC, "--report", str(tmp_path / "r")]) == 2
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["counts"]["pass"] == 1 and report["counts"]["not-run"] == 1 and not report["complete"]
    assert not report["counts"]["unsupported"]
    assert [x["text"] for x in report["reasons"]] == ["no result written by the device tool for this case"]
    from qconform.report.certificate import overall

    assert "incomplete run" in overall(report) and "conforms" not in overall(report)
    assert "incomplete" in (tmp_path / "r" / "summary.md").read_text().splitlines()[0]
    capsys.readouterr()
    assert cli.main(["import-results", str(tmp_path), "--report", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no index.json" in err


def test_a_stale_refusal_beside_real_outputs_is_not_run(tmp_path):
    out = _export(tmp_path, BASIC)
    dirs = _results_dirs(out)
    _write_outputs(out, dirs)
    (dirs[0] / "actual" / "unsupported.txt").write_text("left over from an older run")
    assert cli.main(["import-results", str(out), "--case", BASIC, "--report", str(tmp_path / "r")]) == 2
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["counts"]["pass"] == 1 and report["counts"]["not-run"] == 1
    assert "one of them is stale" in report["reasons"][0]["text"]


def test_the_device_identity_is_declared_unless_signed_with_the_secret(tmp_path, capsys):
    """device.json alone is a claim; results.sha256 + results.mac under the shared secret make it a
    verified identity, and any edit after signing refuses the import."""
    out = _export(tmp_path, BASIC)
    _write_outputs(out, _results_dirs(out))
    (out / "device.json").write_text(json.dumps({"name": "npu-sim", "version": "2.1"}))
    assert cli.main(["import-results", str(out), "--case", BASIC, "--report", str(tmp_path / "declared")]) == 0
    declared = json.loads((tmp_path / "declared" / "report.json").read_text())
    assert declared["runner"]["authenticated"] is False and "not verified" in declared["runner"]["identity"]
    assert "not authenticated" in (tmp_path / "declared" / "summary.md").read_text()

    secret = tmp_path / "lab.secret"
    assert cli.main(["secret", str(secret)]) == 0
    assert secret.stat().st_mode & 0o077 == 0
    assert cli.main(["export", "sign", str(out), "--secret-file", str(secret)]) == 0
    assert cli.main(["import-results", str(out), "--case", BASIC, "--secret-file", str(secret),
                     "--report", str(tmp_path / "verified")]) == 0
    verified = json.loads((tmp_path / "verified" / "report.json").read_text())
    assert verified["runner"]["authenticated"] is True
    assert "not authenticated" not in (tmp_path / "verified" / "summary.md").read_text()

    first = _results_dirs(out)[0] / "actual" / "output_0.pb"
    first.write_bytes(first.read_bytes()[:-1] + bytes([first.read_bytes()[-1] ^ 1]))  # an edit after signing
    capsys.readouterr()
    assert cli.main(["import-results", str(out), "--case", BASIC, "--secret-file", str(secret),
                     "--report", str(tmp_path / "edited")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "differs from the signed results.sha256" in err


def test_the_documented_shell_recipe_signs_results_the_import_verifies(tmp_path):
    """runners.md §11's sha256sum + openssl recipe (what a device tool in any language does) makes the
    same two files qconform verifies."""
    import re
    import shutil

    if not (shutil.which("openssl") and shutil.which("sha256sum")):
        pytest.skip("openssl and sha256sum are needed for the shell recipe (apt-get install openssl coreutils)")
    doc = (REPO / "qconform" / "docs" / "runners.md").read_text()
    recipe = re.search(r"```sh\ncd cases/\n(.*?)```", doc, re.S).group(1)
    out = _export(tmp_path, BASIC)
    _write_outputs(out, _results_dirs(out))
    (out / "device.json").write_text(json.dumps({"name": "npu-sim"}))
    (out / "lab.secret").write_text("f" * 64 + "\n")
    subprocess.run(["bash", "-euo", "pipefail", "-c", recipe], cwd=out, check=True, timeout=60)
    from qconform import offline

    assert offline.verify(out, ("f" * 64).encode()) == "verified"

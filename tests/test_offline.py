"""The offline round trip: ``qconform export backend-test``, outputs written by a device
team's own script that never imports qconform, ``qconform import-results`` -- the same verdicts as a
direct run of the same runtime.

The "device" is onnxruntime's numpy binding with a device bug (the lowest bit of every int8 output
flipped), driven by DEVICE_TOOL below exactly as the shipped example runner
(qconform/examples/my_runner.py) drives it; the direct run is that runner with the same bug."""
from __future__ import annotations

import hashlib
import hmac
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from qconform import cli, offline, wire

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

    if not (shutil.which("openssl") and shutil.which("sha256sum")):
        pytest.skip("openssl and sha256sum are needed for the shell recipe (apt-get install openssl coreutils)")
    doc = (REPO / "qconform" / "docs" / "runners.md").read_text()
    recipe = re.search(r"```sh\ncd cases/\n(.*?)```", doc, re.S).group(1)
    out = _export(tmp_path, BASIC)
    _write_outputs(out, _results_dirs(out))
    (out / "device.json").write_text(json.dumps({"name": "npu-sim"}))
    (tmp_path / "lab.secret").write_text("f" * 64 + "\n")  # outside the folder: every file in it is signed
    subprocess.run(["bash", "-euo", "pipefail", "-c", recipe], cwd=out, check=True, timeout=60)
    assert offline.verify(out, ("f" * 64).encode()) == "verified"


def _signed(tmp_path: Path, flip: bool = True) -> tuple[Path, Path]:
    """An export of BASIC with a device's results, signed: with ``flip``, the first case's output is
    wrong (a deviation a forger would like to hide)."""
    out = _export(tmp_path, BASIC)
    dirs = _results_dirs(out)
    _write_outputs(out, dirs)
    if flip:
        _flip(dirs[0] / "actual" / "output_0.pb")
    (out / "device.json").write_text(json.dumps({"name": "npu-sim", "version": "2.1"}))
    secret = tmp_path / "lab.secret"
    assert cli.main(["secret", str(secret)]) == 0
    assert cli.main(["export", "sign", str(out), "--secret-file", str(secret)]) == 0
    return out, secret


def _flip(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))


def _import(out: Path, report: Path, *extra: str) -> int:
    return cli.main(["import-results", str(out), "--case", BASIC, "--report", str(report), *extra])


def _refused(capsys, rc: int, *words: str) -> None:
    """Refused in one line (exit 2) naming ``words``."""
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and all(w in err for w in words), err


def test_a_forged_index_pointing_at_the_expected_outputs_is_refused_when_signed(tmp_path, capsys):
    """index.json is signed with the rest, so pointing a case at a folder of expected
    outputs (here outside the export) refuses the import instead of an authenticated all-pass."""
    out, secret = _signed(tmp_path)
    index = json.loads((out / "index.json").read_text())
    for c in index["cases"]:
        src = out / c["readings"][0]["dir"]
        forged = tmp_path / "forged" / src.name
        shutil.copytree(src, forged, ignore=shutil.ignore_patterns("actual"))
        shutil.copytree(src / "test_data_set_0", forged / "actual", ignore=shutil.ignore_patterns("input_*"))
        c["readings"][0]["dir"] = f"../forged/{src.name}"
    (out / "index.json").write_text(json.dumps(index))
    capsys.readouterr()
    _refused(capsys, _import(out, tmp_path / "r", "--secret-file", str(secret)),
             "index.json is missing or differs from the signed results.sha256")


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
def test_a_case_directory_outside_the_folder_is_refused(tmp_path, capsys, how):
    """Unsigned too: a case's results are read only from inside the folder."""
    out = _export(tmp_path, BASIC)
    _write_outputs(out, _results_dirs(out))
    index = json.loads((out / "index.json").read_text())
    src = out / index["cases"][0]["readings"][0]["dir"]
    outside = tmp_path / "elsewhere"
    shutil.copytree(src, outside)
    if how == "symlink":
        (out / "conformance" / "link").symlink_to(outside, target_is_directory=True)
    index["cases"][0]["readings"][0]["dir"] = {"dotdot": "../elsewhere", "absolute": str(outside),
                                               "symlink": "conformance/link"}[how]
    (out / "index.json").write_text(json.dumps(index))
    capsys.readouterr()
    _refused(capsys, _import(out, tmp_path / "r"), "is not inside")


def test_swapped_case_directories_give_no_verdict_signed_or_not(tmp_path, capsys):
    """index.json pointing each case at the other's directory: signed, the import is refused; unsigned,
    neither case has the corpus's model there, so neither gets a verdict (not run, exit 2)."""
    out, secret = _signed(tmp_path)
    index = json.loads((out / "index.json").read_text())
    a, b = index["cases"][0]["readings"][0], index["cases"][1]["readings"][0]
    a["dir"], b["dir"] = b["dir"], a["dir"]
    (out / "index.json").write_text(json.dumps(index))
    capsys.readouterr()
    _refused(capsys, _import(out, tmp_path / "signed", "--secret-file", str(secret)), "index.json")
    (out / "results.mac").unlink()
    (out / "results.sha256").unlink()
    assert _import(out, tmp_path / "unsigned") == 2
    report = json.loads((tmp_path / "unsigned" / "report.json").read_text())
    assert report["counts"]["not-run"] == 2 and not report["counts"]["pass"] and not report["counts"]["fail"]
    assert [x["text"] for x in report["reasons"]] == [offline.NOT_CORPUS]


def test_a_signed_device_that_ran_a_tampered_export_gets_no_verdict_for_it(tmp_path):
    """Suspected D: the export's model is replaced by one that returns the expected outputs as
    constants; the device runs it honestly and signs. The MAC verifies, but the model is not the
    corpus's: that case is not run, the run incomplete."""
    import onnx
    from onnx import helper

    out = _export(tmp_path, BASIC)
    dirs = _results_dirs(out)
    model = onnx.load(dirs[0] / "model.onnx")
    expected = onnx.TensorProto()
    expected.ParseFromString((dirs[0] / "test_data_set_0" / "output_0.pb").read_bytes())
    model.graph.ClearField("node")
    model.graph.node.append(helper.make_node("Constant", [], [model.graph.output[0].name], value=expected))
    onnx.save(model, dirs[0] / "model.onnx")
    _write_outputs(out, dirs[1:])
    (dirs[0] / "actual").mkdir()
    shutil.copy(dirs[0] / "test_data_set_0" / "output_0.pb", dirs[0] / "actual" / "output_0.pb")  # what it returns
    secret = tmp_path / "lab.secret"
    assert cli.main(["secret", str(secret)]) == 0
    assert cli.main(["export", "sign", str(out), "--secret-file", str(secret)]) == 0
    assert _import(out, tmp_path / "r", "--secret-file", str(secret)) == 2
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["runner"]["authenticated"] is True
    assert report["counts"]["pass"] == 1 and report["counts"]["not-run"] == 1
    assert [x["text"] for x in report["reasons"]] == [offline.NOT_CORPUS]


def test_a_secret_refuses_unsigned_or_partly_signed_results(tmp_path, capsys):
    """A job that gives the secret requires signed results; deleting the MAC (and putting
    the expected outputs in place) is refused, not reported as 'not authenticated' with exit 0. A folder
    signed by the older format (only actual/ and device.json listed) is refused with a line to sign again."""
    out, secret = _signed(tmp_path)
    for d in _results_dirs(out):
        shutil.copy(d / "test_data_set_0" / "output_0.pb", d / "actual" / "output_0.pb")
    (out / "results.mac").unlink()
    capsys.readouterr()
    _refused(capsys, _import(out, tmp_path / "r1", "--secret-file", str(secret)), "not signed", "results.mac")
    (out / "results.sha256").unlink()
    _refused(capsys, _import(out, tmp_path / "r2", "--secret-file", str(secret)), "not signed")
    assert _import(out, tmp_path / "r3") == 0  # without the secret: declared, not verified, as before
    assert json.loads((tmp_path / "r3" / "report.json").read_text())["runner"]["authenticated"] is False

    old = [n for n in offline.result_files(out) if "/actual/" in n or n == "device.json"]
    sums = "".join(f"{hashlib.sha256((out / n).read_bytes()).hexdigest()}  {n}\n" for n in old)
    (out / "results.sha256").write_text(sums)
    key = wire.read_secret(str(secret))
    (out / "results.mac").write_text(hmac.new(key, sums.encode(), hashlib.sha256).hexdigest() + "\n")
    with pytest.raises(offline.OfflineError, match="older qconform.*sign the folder again"):
        offline.verify(out, key)


def test_a_state_file_is_not_read_back_across_changed_results(tmp_path, capsys):
    """The offline identity carries a digest of every file, so --state written for the
    device's earlier results is refused once the results change (re-signed or not)."""
    out, secret = _signed(tmp_path, flip=False)
    state = tmp_path / "st.jsonl"
    assert _import(out, tmp_path / "a", "--secret-file", str(secret), "--state", str(state)) == 0
    _flip(_results_dirs(out)[0] / "actual" / "output_0.pb")  # the device's new run deviates; signed again
    assert cli.main(["export", "sign", str(out), "--secret-file", str(secret)]) == 0
    capsys.readouterr()
    _refused(capsys, _import(out, tmp_path / "b", "--secret-file", str(secret), "--state", str(state)),
             "written by another run")
    assert _import(out, tmp_path / "c", "--secret-file", str(secret)) == 1  # a fresh import shows the deviation

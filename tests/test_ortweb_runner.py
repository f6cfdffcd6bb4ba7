"""The bundled onnxruntime-web runner: the npm package (pinned) run by a Node.js child process.

It is not a pip extra, so tests/test_runtime_runners.py does not cover it. Where node and npm are
present (the package is installed into the qconform cache on first use), a slice of the corpus
runs through the real WASM runtime and every case gets a verdict; and a Node process that dies
mid-run turns that run into an error (not a hang), with a fresh process for the next one. Where
node/npm are absent or the install fails, the tests skip with the runner's own reason."""
from __future__ import annotations

import json
import threading
import time

import numpy as np
import onnx
import pytest
from conftest import run_pytest
from onnx import TensorProto as TP
from onnx import helper

from qconform.runner import RunnerError, resolve

SLICE = "opset_21 and (family_basic or family_specials or family_ties)"
pytestmark = pytest.mark.needs("node", "npm")


@pytest.fixture(scope="module")
def runner():
    try:
        return resolve("onnxruntime-web")
    except RunnerError as exc:
        if "cannot start here" in str(exc):  # npm install failed (no registry): said in one line
            pytest.skip(str(exc))
        raise


def test_ortweb_gives_every_case_of_a_slice_a_verdict(runner, tmp_path):
    ident = runner.describe()
    assert ident["name"] == "onnxruntime-web" and ident["version"] == "1.30.0" and ident["device"] == "wasm"
    assert ident["options"]["numThreads"] == 1 and ident["node"].startswith("v")
    r = run_pytest("--runner=onnxruntime-web", f"--report={tmp_path}", "-q", "--tb=no", "-p", "no:randomly",
                   "-m", SLICE, timeout=900)
    rep = json.loads((tmp_path / "report.json").read_text())
    counts = rep["counts"]
    assert counts["crashed"] == counts["timeout"] == 0, r.stdout[-3000:]
    assert counts["pass"] > 0 and counts["collected"] == len(rep["cases"]), counts
    assert "INTERNALERROR" not in r.stdout
    reasons = [rep["reasons"][c["reason"]]["text"] for c in rep["cases"] if c["verdict"] == "unsupported"]
    assert all(x and "\n" not in x for x in reasons), reasons  # the runtime's own reason, one line
    # Types the JS tensors cannot carry are named, not left to a cryptic failure.
    assert any("cannot carry BFLOAT16" in x for x in reasons), sorted(set(reasons))


def _qlinear_matmul() -> onnx.ModelProto:
    """A real uint8 QLinearMatMul with symbolic dims: tiny or as slow as we like with one model."""
    init = [helper.make_tensor(n, TP.FLOAT, [], [0.05]) for n in ("a_scale", "b_scale", "y_scale")]
    init += [helper.make_tensor(n, TP.UINT8, [], [128]) for n in ("a_zero_point", "b_zero_point", "y_zero_point")]
    node = helper.make_node("QLinearMatMul", ["a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point",
                                              "y_scale", "y_zero_point"], ["y"])
    graph = helper.make_graph(
        [node], "ortweb-restart",
        [helper.make_tensor_value_info("a", TP.UINT8, ["B", "M", "K"]),
         helper.make_tensor_value_info("b", TP.UINT8, ["B", "K", "N"])],
        [helper.make_tensor_value_info("y", TP.UINT8, ["B", "M", "N"])], init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)], ir_version=5)


def test_a_node_process_that_dies_mid_run_is_an_error_and_is_replaced(runner):
    # No runtime model reliably kills onnxruntime-web 1.30 (its C++ failures, std::bad_alloc
    # included, come back as errors), so the real Node process is killed from outside, as the OOM
    # killer would, while it runs a real model that takes seconds.
    run = runner.prepare(_qlinear_matmul())
    rng = np.random.default_rng(0)
    small = {"a": rng.integers(0, 256, (1, 2, 3), dtype=np.uint8), "b": rng.integers(0, 256, (1, 3, 4), dtype=np.uint8)}
    before = run(small)[0]
    assert before.dtype == np.uint8 and before.shape == (1, 2, 4)

    # An earlier case's complaint on stderr (a run-time shape error) is not part of a later case's error.
    srv = runner._holder["server"]
    with pytest.raises(Exception):
        run({"a": small["a"], "b": rng.integers(0, 256, (1, 4, 4), dtype=np.uint8)})
    deadline = time.monotonic() + 60
    while not any("Non-zero status code" in line for line in srv.tail) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any("Non-zero status code" in line for line in srv.tail), list(srv.tail)

    proc = srv.proc  # the live Node process
    big = {"a": rng.integers(0, 256, (8, 2048, 2048), dtype=np.uint8),
           "b": rng.integers(0, 256, (8, 2048, 2048), dtype=np.uint8)}
    killer = threading.Timer(1.5, proc.kill)
    killer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(RuntimeError, match=r"the Node process died \(killed by SIGKILL\)") as died:
            run(big)
    finally:
        killer.cancel()
    assert time.monotonic() - t0 < 60  # an error, not a hang
    assert "Non-zero status code" not in str(died.value), str(died.value)
    assert proc.poll() is not None

    # The next run starts a fresh process and re-creates this prepared model's session there.
    after = run(small)[0]
    assert runner._holder["server"].proc.pid != proc.pid
    np.testing.assert_array_equal(after, before)

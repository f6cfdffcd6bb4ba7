"""Each runtime is declared once, named after its runner (qconform/declarations/runtimes/<runner>.py,
collected by that package); the registry, facts, findings and the scoreboard read that declaration, and
importing a runner changes no environment."""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO

from qconform import facts, runner
from qconform.apps import findings, scoreboard
from qconform.declarations import runtimes
from qconform.declarations.runtimes.iree import IREE_SETTINGS, iree_flags
from qconform.declarations.runtimes.onnxruntime import ORT_SETTINGS
from qconform.declarations.runtimes.openvino import OPENVINO_SETTINGS
from qconform.declarations.runtimes.tvm import TVM_SETTINGS


def test_each_runtime_is_declared_in_the_module_named_after_its_runner():
    for name, rt in runtimes.RUNTIMES.items():
        module = rt.runner.partition(":")[0]
        stem = module.rpartition(".")[2].removesuffix("_runner")  # qconform.runners.tvm_runner: tvm
        beside = f"qconform.declarations.runtimes.{stem}"
        decl = importlib.import_module(beside)
        declared = [v for v in vars(decl).values() if v is rt or (isinstance(v, tuple) and rt in v)]
        assert declared, f"{name}: not declared in {beside}, the module named after its runner {module}"


def test_the_registry_facts_and_findings_read_the_declarations():
    rts = runtimes.RUNTIMES
    assert runner.BUNDLED == {n: rt.runner for n, rt in rts.items() if not rt.variant_of}
    assert set(runner.VARIANTS) == {n for n, rt in rts.items() if rt.variant_of}
    assert all(runner.EXTRAS[n] == rt.package for n, rt in rts.items() if rt.extra)
    assert {n for n, s in facts.SOURCES.items() if s.runner} == {n for n, rt in rts.items() if not rt.own}
    assert all(facts.SOURCES[n].runtime is rt for n, rt in rts.items() if not rt.own)
    assert findings.TEMPLATES == {n: rt.template for n, rt in rts.items() if rt.template}
    assert all(t.runtime == n and t.package == rts[n].dist for n, t in findings.TEMPLATES.items())
    assert set(scoreboard.OWN) == {n for n, rt in rts.items() if rt.own}


def test_a_reproducer_copies_its_runners_settings():
    ort, ov, iree, tvm = (findings.TEMPLATES[n] for n in ("onnxruntime", "openvino", "iree", "tvm"))
    level = ORT_SETTINGS["levels"][ORT_SETTINGS["optimize"]]
    assert f"ort.GraphOptimizationLevel.{level}" in ort.run
    assert json.dumps(dict(OPENVINO_SETTINGS["config"])) in ov.run
    assert json.dumps(iree_flags()) in iree.run and IREE_SETTINGS["driver"] in iree.run
    assert f'target="{TVM_SETTINGS["target"]}"' in tvm.run
    variant = findings.TEMPLATES["onnxruntime-openvino"]
    assert ORT_SETTINGS["no_fallback"][0] in variant.run and "OpenVINOExecutionProvider" in variant.run


def test_declarations_and_runner_modules_import_no_runtime_and_change_no_environment():
    """Listing the runtimes imports none of them; importing a runner module (not choosing it)
    leaves os.environ as it was."""
    code = ("import os, sys, json; before = dict(os.environ)\n"
            "from qconform import runner, facts\nfrom qconform.declarations import runtimes\n"
            "from qconform.apps import findings\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('onnxruntime', 'openvino', 'tvm', 'iree', 'tinygrad', 'tract'))\n"
            "import qconform.runners.tinygrad_runner, qconform.runners.tvm_runner\n"
            "print(json.dumps([heavy, {k: v for k, v in os.environ.items() if before.get(k) != v}]))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("DEV", "THREADS", "CC", "TVM_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    heavy, changed = json.loads(out.stdout.strip().splitlines()[-1])
    assert heavy == [] and changed == {}


@pytest.mark.needs("onnxruntime")
def test_an_ep_wheel_names_the_runtime_it_bundles(tmp_path):
    """onnxruntime-openvino's certificate names OpenVINO's own version (what computed the bits), read
    from the versioned library name its wheel ships in onnxruntime/capi."""
    from qconform.runners.onnxruntime_runner import bundled_sdk

    for name in ("libopenvino.so", "libopenvino.so.2541", "libopenvino.so.2025.4.1", "libopenvino_c.so.2025.4.1"):
        (tmp_path / name).write_bytes(b"")
    assert bundled_sdk("OpenVINOExecutionProvider", tmp_path) == "OpenVINO 2025.4.1"
    assert bundled_sdk("CUDAExecutionProvider", tmp_path) == ""
    assert bundled_sdk("OpenVINOExecutionProvider", tmp_path / "absent") == ""

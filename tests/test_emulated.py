"""The emulated aarch64 target: scripts/emulated-aarch64.sh builds a Debian arm64 rootfs,
installs onnxruntime's aarch64 wheel and qconform in it, serves it with ``qconform worker`` under
qemu-user, and certifies it from here over loopback. Needs root and ``--emulated-aarch64``."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO

SLICE = "QuantizeLinear-21/*"


@pytest.mark.needs("onnxruntime")
def test_onnxruntime_aarch64_under_qemu_gives_the_x86_verdicts(request, tmp_path):
    if not request.config.getoption("emulated_aarch64"):
        pytest.skip("the emulated aarch64 certification runs with --emulated-aarch64 (root, ~5 min the first time)")
    if os.geteuid() != 0:
        pytest.skip("the emulated aarch64 certification needs root (binfmt_misc, debootstrap, chroot)")
    env = {**os.environ, "PYTHON": sys.executable}
    p = subprocess.run(["bash", str(REPO / "scripts" / "emulated-aarch64.sh"), str(tmp_path / "arm64"), "--case", SLICE],
                       capture_output=True, text=True, timeout=1800, env=env)
    assert p.returncode in (0, 1), p.stdout[-2000:] + p.stderr[-3000:]
    subprocess.run([sys.executable, "-m", "qconform.cli", "certify", "--runner", "onnxruntime", "--case", SLICE,
                    "--report", str(tmp_path / "x86")], capture_output=True, timeout=900)
    arm = json.loads((tmp_path / "arm64" / "report.json").read_text())
    x86 = json.loads((tmp_path / "x86" / "report.json").read_text())
    assert arm["runner"]["platform"]["arch"] == "aarch64" and arm["runner"]["remote"].startswith("127.0.0.1:")
    assert {c["id"]: c["verdict"] for c in arm["cases"]} == {c["id"]: c["verdict"] for c in x86["cases"]}

"""qconform as a vendor installs it: the built wheel, in a fresh virtual environment, run from a
directory of their own that has its own ``runners/`` and ``conformance/`` packages.

One wheel per run (conftest's ``wheel``) and one environment per session (``wheel_env``); the dependencies come from pip's cache with
the project's constraints, so the run is the same one a vendor gets."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import REPO


def _run(cmd, cwd: Path, timeout: int = 600, **env) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    full.update(env)
    return subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full)


@pytest.fixture(scope="session")
def wheel_env(wheel, tmp_path_factory) -> Path:
    """A fresh venv with the wheel installed (dependencies pinned by constraints.txt); returns its python."""
    env = tmp_path_factory.mktemp("venv")
    r = _run([sys.executable, "-m", "venv", env], cwd=env)
    assert r.returncode == 0, r.stderr
    python = env / "bin" / "python"
    r = _run([python, "-m", "pip", "install", "-q", "-c", REPO / "constraints.txt", f"qconform[onnxruntime] @ {wheel.as_uri()}"],
             cwd=env, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return python


@pytest.fixture()
def vendor_dir(tmp_path) -> Path:
    """An empty directory of a vendor's own, with packages named like qconform's old top-level ones."""
    for pkg in ("runners", "conformance"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text(f'"""the vendor\'s own {pkg} package"""\nVENDOR = True\n')
    (tmp_path / "runners" / "onnxruntime_runner.py").write_text("raise ImportError('the vendor module was imported')\n")
    return tmp_path


def test_the_wheel_installs_one_namespace(wheel):
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert tops == {"qconform", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}, tops
    names = set(zipfile.ZipFile(wheel).namelist())
    for data in ("qconform/golden/MANIFEST", "qconform/docs/semantics.md", "qconform/facts/onnxruntime.toml",
                 "qconform/examples/my_runner.py", "qconform/examples/bytes_runner.py", "qconform/docs/runners.md",
                 "qconform/kernels/qkernels.h", "qconform/report/schema.json"):
        assert data in names, f"{data} is not in the wheel"


def test_what_readme_links_to_ships_whole(wheel):
    """Every README link into the package is in the wheel, and each shipped finding has the model and
    data its repro.py loads (the wheel matches the README)."""
    import re

    names = set(zipfile.ZipFile(wheel).namelist())
    links = re.findall(r"\]\((qconform/[^)#\s]+)", (REPO / "README.md").read_text(encoding="utf-8"))
    assert links
    for link in links:
        assert link in names or any(n.startswith(link.rstrip("/") + "/") for n in names), f"{link} is not in the wheel"
    findings = {n.rsplit("/", 1)[0] for n in names if n.startswith("qconform/docs/findings/") and n.endswith("/repro.py")}
    assert findings
    for d in sorted(findings):
        for member in ("model.onnx", "inputs.npz", "expected.npz", "README.md", "finding.json"):
            assert f"{d}/{member}" in names, f"{d}/{member} is not in the wheel"


def test_the_quick_start_from_the_wheel(wheel_env, vendor_dir):
    """README's wheel quick start (here on one op version): a certificate in ./qconform-report."""
    import json
    import re

    command = next(ln for ln in (REPO / "README.md").read_text(encoding="utf-8").splitlines()
                   if ln.startswith("python3 -m venv venv") and "certify" in ln)
    certify = re.search(r"venv/bin/qconform (certify .*)$", command)[1].split()
    r = _run([wheel_env.parent / "qconform", *certify, "--case", "QuantizeLinear-21/*"], cwd=vendor_dir)
    assert r.returncode in (0, 1), (r.stdout + r.stderr)[-3000:]
    report = json.loads((vendor_dir / "qconform-report" / "report.json").read_text())
    assert report["runner"]["name"] == "onnxruntime" and report["counts"]["pass"] > 0
    assert (vendor_dir / "qconform-report" / "report.html").is_file()


def test_python_dash_m_is_the_command(wheel_env, vendor_dir):
    """``python -m qconform`` is the ``qconform`` command, for an environment whose scripts are not on PATH."""
    by_module = _run([wheel_env, "-m", "qconform", "--version"], cwd=vendor_dir)
    by_script = _run([wheel_env.parent / "qconform", "--version"], cwd=vendor_dir)
    assert by_module.returncode == 0 and by_module.stdout == by_script.stdout and by_module.stdout.strip()


def test_installed_suite_runs_from_a_vendor_directory_with_its_own_runners_package(wheel_env, vendor_dir):
    r = _run([wheel_env, "-m", "pytest", "--runner=onnxruntime", "-k", "QuantizeLinear-13", "-q",
              "-p", "no:cacheprovider"], cwd=vendor_dir)
    out = r.stdout + r.stderr
    assert r.returncode in (0, 1), out[-3000:]
    assert "ModuleNotFoundError" not in out and "vendor module" not in out, out[-3000:]
    assert "qconform summary" in out and "QuantizeLinear-13" in out and " passed" in out, out[-3000:]
    # the vendor's packages are still theirs, and qconform's modules come from the wheel
    r = _run([wheel_env, "-c", "import runners, conformance, qconform.runners.onnxruntime_runner as o; "
                               "print(runners.VENDOR, conformance.VENDOR, o.__file__)"], cwd=vendor_dir)
    assert r.returncode == 0 and r.stdout.startswith("True True ") and "site-packages" in r.stdout, r.stderr


def test_the_vendor_path_from_the_wheel(wheel_env, vendor_dir):
    """Scaffold a runner, run it on a subset, paste a printed failing id back, create a baseline,
    fill in its reasons, rerun gated green -- from the wheel, in a directory of the vendor's own."""
    qconform = wheel_env.parent / "qconform"
    r = _run([qconform, "init-runner", "vendor_runner.py"], cwd=vendor_dir)
    assert r.returncode == 0 and "pytest --runner=vendor_runner.py:MyRunner" in r.stdout, r.stdout + r.stderr
    # the vendor's runtime has a bug: it adds one to every int8 output code (a real class of mistake)
    src = (vendor_dir / "vendor_runner.py").read_text()
    src = src.replace("return [np.asarray(y) for y in outputs]",
                      "return [np.asarray(y) + np.int8(1) if np.asarray(y).dtype == np.int8 else np.asarray(y)"
                      " for y in outputs]")
    (vendor_dir / "vendor_runner.py").write_text(src)
    run = [wheel_env, "-m", "pytest", "--runner=vendor_runner.py:MyRunner", "-m",
           "op_QuantizeLinear and opset_13 and family_basic"]
    r = _run([*run, "--report=rep", "-rf"], cwd=vendor_dir)
    out = r.stdout + r.stderr
    assert r.returncode == 1 and " failed" in out, out[-3000:]
    # pytest's own FAILED line, pasted back as is (a site-packages path) ...
    failed = next(ln.split()[1] for ln in out.splitlines() if ln.startswith("FAILED "))
    assert "::" in failed
    r = _run([*run, "--case", failed], cwd=vendor_dir)
    assert r.returncode == 1 and "1 failed" in r.stdout, r.stdout[-3000:]
    # ... and the form the qconform summary prints
    hint = next(ln for ln in out.splitlines() if ln.startswith("rerun one case:"))
    case_id = hint.rsplit("--case ", 1)[1].strip("'")
    r = _run([*run, "--case", case_id], cwd=vendor_dir)
    assert r.returncode == 1 and "1 failed" in r.stdout, r.stdout[-3000:]
    r = _run([*run, "--from-report", "rep/report.json"], cwd=vendor_dir)
    assert r.returncode == 1 and " passed" not in r.stdout.splitlines()[-1], r.stdout[-3000:]
    # a baseline from the report: refused until every reason is written, then gated green
    r = _run([qconform, "baseline", "create", "rep", "-o", "baseline.json"], cwd=vendor_dir)
    assert r.returncode == 0 and "placeholder" in r.stdout, r.stdout + r.stderr
    r = _run([*run, "--baseline=baseline.json"], cwd=vendor_dir)
    assert r.returncode != 0 and "placeholder reason" in r.stdout + r.stderr
    text = (vendor_dir / "baseline.json").read_text()
    (vendor_dir / "baseline.json").write_text(text.replace("TODO: why is this deviation accepted?",
                                                           "vendor bug 1234: int8 codes off by one"))
    r = _run([*run, "--baseline=baseline.json", "--report=rep2"], cwd=vendor_dir)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert not (vendor_dir / ".pytest_cache").exists()


#: An onnxruntime variant: the same import package as onnxruntime, another distribution.
VARIANT, VARIANT_EP = "onnxruntime-openvino==1.24.1", "OpenVINOExecutionProvider"


@pytest.fixture(scope="session")
def variant_env(wheel, tmp_path_factory) -> Path:
    """A fresh venv with onnxruntime-openvino, then qconform's wheel installed as its README says for
    a variant (without the onnxruntime extra); skips where the registry cannot be reached."""
    env = tmp_path_factory.mktemp("variant")
    assert _run([sys.executable, "-m", "venv", env], cwd=env).returncode == 0
    python = env / "bin" / "python"
    r = _run([python, "-m", "pip", "install", "-q", VARIANT], cwd=env, timeout=900)
    if r.returncode:
        pytest.skip(f"{VARIANT} cannot be installed here (no package registry?): {r.stderr.strip()[-300:]}")
    r = _run([python, "-m", "pip", "install", "-q", "-c", REPO / "constraints.txt", wheel], cwd=env, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return python


def test_installing_qconform_keeps_an_onnxruntime_variant_whose_cpu_fallback_is_never_credited(variant_env, tmp_path):
    """onnxruntime-openvino stays: its execution provider is there and pip check is clean. Then its
    EP with fallback off and forced on: the same passes, and what the CPU EP ran is unsupported, saying
    so (onnxruntime-openvino 1.24.1 on QuantizeLinear-21's basic cases, every type and granularity once:
    36 passes both ways; on all of QuantizeLinear-21, 179). One test, so that
    ``pytest -n`` builds this venv (a minute) once, not once per worker."""
    r = _run([variant_env, "-c", "import onnxruntime as o; from importlib import metadata as m; "
              "print(o.get_available_providers()); print(m.version('onnxruntime-openvino'))"], cwd=variant_env.parent)
    assert r.returncode == 0 and VARIANT_EP in r.stdout and "1.24.1" in r.stdout, r.stdout + r.stderr
    r = _run([variant_env, "-c", "from importlib import metadata as m; m.version('onnxruntime')"], cwd=variant_env.parent)
    assert r.returncode != 0 and "PackageNotFoundError" in r.stderr  # plain onnxruntime was not pulled in
    r = _run([variant_env, "-m", "pip", "check"], cwd=variant_env.parent)
    assert r.returncode == 0, r.stdout + r.stderr
    import json

    passes = {}
    for providers in (VARIANT_EP, f"{VARIANT_EP},CPUExecutionProvider"):
        out = tmp_path / providers.replace(",", "+")
        r = _run([variant_env, "-m", "qconform.cli", "certify", "--runner", "onnxruntime", "--runner-opt",
                  f"providers={providers}", "--case", "QuantizeLinear-21/*/basic/*", "--report", out, "-j", "2"],
                 cwd=tmp_path, timeout=900)
        assert r.returncode in (0, 1), r.stdout[-3000:] + r.stderr[-3000:]
        report = json.loads((out / "report.json").read_text())
        passes[providers] = {c["id"] for c in report["cases"] if c["verdict"] == "pass"}
        assert report["platform"]["packages"].get("onnxruntime-openvino") == "1.24.1"
        if "CPU" in providers:
            assert any("(CPU fallback), not on OpenVINOExecutionProvider" in x["text"] for x in report["reasons"])
    assert passes[VARIANT_EP] and passes[VARIANT_EP] == passes[f"{VARIANT_EP},CPUExecutionProvider"]

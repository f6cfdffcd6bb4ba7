"""qconform's own kernels on the GPU side (split from tests/test_kernels.py): the assembled source
compiles to clean PTX for four architectures, the lint fails fast-math and contracted builds, the
gpu-kernel runner loads only the PTX the lint passed (a planted .ftz or div.approx is refused before
it can run), and scripts/gpu-check.sh says plainly why it cannot run here."""
from __future__ import annotations

from pathlib import Path

import pytest

from qconform.declarations.operators import OPERATORS


# --------------------------------------------------------------------------------------------
# PTX for four architectures, the lint, the runner's one load path
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def nvrtc():
    from qconform.kernels import ptx

    try:
        ptx.nvrtc()
    except ptx.NvrtcUnavailable as exc:
        pytest.skip(f"NVRTC not installed here: {exc}")
    return ptx


@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90", "sm_100"])
def test_header_compiles_to_ptx_and_passes_the_lint(nvrtc, arch):
    built = nvrtc.build(arch)
    assert f".target {arch}" in built.text
    assert not built.issues, "\n".join(map(str, built.issues[:10]))
    assert "div.rn.f32" in built.text and built.digest == nvrtc.digest(built.text)
    for entry in nvrtc.ENTRY_POINTS:
        assert f".entry {entry}(" in built.text
    # the integer compute ops are linted too: their entry points are in the PTX the lint reads
    assert {"qk_conv_kernel", "qk_matmul_integer_kernel", "qk_qlinear_matmul_kernel"} <= set(nvrtc.ENTRY_POINTS)


def test_lint_fails_on_a_fast_math_build(nvrtc):
    built = nvrtc.build("sm_90", flags=("--use_fast_math",))
    rules = {i.rule for i in built.issues}
    assert "required div.rn.f32 not found" in rules
    assert any("approx" in r for r in rules) and any(".ftz" in r for r in rules)
    with pytest.raises(nvrtc.PtxRefused, match="refused"):
        nvrtc.approved(built.text)


def test_lint_catches_contracted_fma(nvrtc):
    src = 'extern "C" __global__ void qk_quantize_kernel(float*a){a[0]=a[1]*a[2]+a[3]; a[4]=a[5]/a[6];}'
    src += "".join(f'extern "C" __global__ void {e}(float*a){{}}' for e in nvrtc.ENTRY_POINTS[1:])
    assert any("fma" in i.rule for i in nvrtc.build("sm_80", flags=("--fmad=true",), source=src).issues)
    assert not nvrtc.build("sm_80", source=src).issues


def _ptx(body: str) -> str:
    """A PTX text with every entry point and an IEEE division: what the lint passes."""
    from qconform.kernels import ptx

    entries = "".join(f".visible .entry {e}(\n)\n{{\n\tret;\n}}\n" for e in ptx.ENTRY_POINTS)
    return f".version 8.0\n.target sm_90\n.address_size 64\n{entries}// body\n\t{body}\n"


@pytest.mark.parametrize("planted", ["div.approx.f32 \t%f3, %f1, %f2;", "div.rn.ftz.f32 \t%f3, %f1, %f2;",
                                     "mul.ftz.f32 \t%f3, %f1, %f2;", "rcp.approx.ftz.f64 \t%fd2, %fd1;",
                                     "ex2.approx.f32 \t%f3, %f1;", "add.f32 \t%f3, %f1, %f2;"])
def test_a_planted_ptx_is_refused_before_it_can_run(tmp_path, planted):
    """The load path lints the very text it writes: a PTX with .ftz, an approximate instruction or a
    fusable add is refused, and no file a module could load from is written (no NVRTC needed)."""
    from qconform.kernels import ptx

    clean = _ptx("div.rn.f32 \t%f3, %f1, %f2;")
    assert ptx.approved(clean, tmp_path).read_text() == clean
    with pytest.raises(ptx.PtxRefused, match="refused"):
        ptx.approved(_ptx("div.rn.f32 \t%f3, %f1, %f2;\n\t" + planted), tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


def test_the_runner_loads_the_linted_ptx_and_names_its_digest(nvrtc, tmp_path, monkeypatch):
    """gpu-kernel's module comes from ptx.build through ptx.approved, loaded by path: the file holds
    the built text byte for byte, and describe() names that text's digest. No other compile path
    exists in the package (no RawModule(code=...), no NVRTC call outside ptx.py)."""
    import ast
    import inspect

    import qconform
    import qconform.runners.gpu_kernel as g

    monkeypatch.setenv("QCONFORM_CACHE_DIR", str(tmp_path))
    src = g.module_source("sm_90")
    assert src.path.read_text() == src.built.text and not src.built.issues
    assert src.built.digest == nvrtc.digest(src.path.read_text()) == nvrtc.build("sm_90").digest
    runner = object.__new__(g.GpuKernelRunner)  # what __init__ sets besides the CUDA module itself
    runner.device, runner.arch, runner.device_name, runner.source = 0, "sm_90", "(no device)", src
    assert runner.describe()["options"]["ptx_sha256"] == src.built.digest
    init = inspect.getsource(g.GpuKernelRunner.__init__)
    assert "module_source(self.arch)" in init and "RawModule(path=str(self.source.path))" in init
    for path in Path(qconform.__file__).parent.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "RawModule":
                assert [k.arg for k in node.keywords] == ["path"], f"{path}: RawModule without path="
            if isinstance(node, ast.Attribute) and node.attr == "nvrtcCompileProgram":
                assert path.name == "ptx.py", f"{path}: an NVRTC compile outside ptx.build"


def test_nvrtc_is_found_one_way(tmp_path, monkeypatch):
    """QCONFORM_NVRTC first, a CUDA toolkit's lib64 among the places searched, and qconform.tools'
    "nvrtc" check is the PTX build's own finder."""
    from qconform import tools
    from qconform.kernels import ptx

    lib = tmp_path / "cuda" / "lib64" / "libnvrtc.so.13"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.setenv("QCONFORM_NVRTC", "/elsewhere/libnvrtc.so")
    found = ptx.candidates()
    assert found[0] == "/elsewhere/libnvrtc.so" and str(lib) in found
    assert tools.TOOLS["nvrtc"].locate() == ptx.find_nvrtc()


def test_gpu_kernel_shares_the_source():
    import qconform.runners.gpu_kernel as g
    from qconform.kernels import PARTS, source

    assert g.PARTS == PARTS and "extern \"C\" __global__ void qk_quantize_kernel" in source()


def test_single_block_launch_matches_the_header():
    """The device's one-block reduction is launched with the block size the header's loop assumes."""
    import re

    from qconform.kernels import SINGLE_BLOCK, source

    (threads,) = re.findall(r"#define QK_DQL_THREADS (\d+)", source())
    assert SINGLE_BLOCK == {"dql_params": int(threads)}


def test_gpu_check_says_plainly_that_no_cuda_device_is_present(tmp_path, wheel):
    """scripts/gpu-check.sh with this run's freshly built wheel on a machine without a CUDA device: it
    installs the wheel, still builds and lints the PTX where NVRTC is, says that no CUDA device is
    present, names every GPU step as skipped, and exits 2. (The script writes only under $OUT.)"""
    import os
    import subprocess
    import sys

    from conftest import REPO
    from qconform import tools

    if tools.find("cuda"):
        pytest.skip("this machine has a CUDA device: gpu-check.sh runs for real there")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    out = tmp_path / "out"
    env.update(OUT=str(out), PYTHON=sys.executable, GPU_CHECK_BUDGET="120", WHEEL=str(wheel))
    r = subprocess.run(["bash", "scripts/gpu-check.sh"], cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 2, r.stdout[-3000:] + r.stderr[-2000:]
    summary = (out / "summary.txt").read_text()
    assert "device: no CUDA device is present" in summary
    assert "verdict: NO DEVICE" in summary and "the full 2^32 sweeps (no CUDA device)" in summary
    assert "the compute ops through gpu-kernel (no CUDA device)" in summary
    assert "gpu-check-site" in summary.splitlines()[0]  # qconform came from the installed wheel
    if tools.find("nvrtc"):
        assert "lint OK" in summary and (out / "qkernels.sm_90.ptx").is_file()
    assert (out / "gpu-check.log").read_text().count("no CUDA device is present") >= 1


def test_gpu_check_runs_the_compute_ops_on_their_own():
    """scripts/gpu-check.sh certifies the compute ops in the kernels' scope apart from the whole corpus
    (their counts per op version and their own time): every declared contracting op the kernels implement,
    and onnxruntime's contrib compute ops in the scope."""
    import importlib.util
    import inspect

    from conftest import REPO

    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "scripts" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from qconform.case import MS_DOMAIN
    from qconform.declarations.operator import Kind

    contrib = {o for o in OPERATORS if o.domain == MS_DOMAIN and o.kind not in (Kind.QUANTIZE, Kind.DEQUANTIZE)}
    want = {f"{o.label}-*" for o in OPERATORS if o.kernel and (o.contraction or o in contrib)}
    assert set(mod.compute_globs()) == want and len(want) >= 4
    assert "compute_step(check)" in inspect.getsource(mod.run_steps)

"""qconform's own kernels (qconform/kernels/qkernels.h): the gcc build passes the whole corpus (every
op in scope) and the exhaustive sweeps, the same header compiles to clean PTX for four GPU
architectures, the gpu-kernel runner loads only the PTX the lint passed (a planted .ftz or
div.approx is refused before it can run), and it says plainly why it cannot start here."""
from __future__ import annotations

import ctypes
import json
import zlib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from qconform import dtypes
from qconform import kernels as K
from qconform.kernels import plan as P
from qconform import sweep as S
from qconform.compare import compare
from qconform.declarations.operators import OPERATORS, kernel_scope
from qconform.model import build_model
from qconform.runner import Unsupported, prepare

CPU = "qconform.runners.cpu_kernel:CpuKernelRunner"


@pytest.fixture(scope="module")
def cpu_kernel():
    from qconform.runners.cpu_kernel import CpuKernelRunner

    try:
        return CpuKernelRunner()
    except Unsupported as exc:  # a machine without a C compiler
        pytest.skip(str(exc))


# --------------------------------------------------------------------------------------------
# The kind table and the specials
# --------------------------------------------------------------------------------------------
def test_kernel_kind_table_matches_the_registry(cpu_kernel):
    out = (ctypes.c_int * 7)()
    for name, k in K.KIND.items():
        assert cpu_kernel.lib.qk_describe_kind(k, out) == 0, name
        style, width, ebits, mbits, bias, signed, max_code = list(out)
        t = dtypes.get(name)
        assert width == t.bits and bool(signed) == t.signed, name
        if t.is_integer:
            assert style == K.STYLE["int"], name
            continue
        fmt = t.float_format
        assert style == K.STYLE[fmt.nan_style] and (ebits, mbits, bias) == (fmt.ebits, fmt.mbits, fmt.bias), name
        if fmt.nan_style != "e8m0":
            from qconform.oracle import floats

            assert max_code == int(floats.encode(np.array([fmt.max_finite]), t)[0]), name


@pytest.mark.parametrize("t", ["float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float4e2m1",
                               "float6e2m3", "float6e3m2", "float16", "bfloat16"])
@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("fnuz_inf_saturates", [0, 1])
def test_specials_table_matches_the_oracle(cpu_kernel, t, saturate, fnuz_inf_saturates):
    """Every float32 special and the overflow edges, under both tables, against floats.encode."""
    from qconform.oracle import floats

    et = dtypes.get(t)
    mx = et.float_format.max_finite
    with np.errstate(over="ignore"):  # bfloat16's max * 1.25 is beyond float32: Inf, also a case
        vals = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, mx, -mx, mx * 1.0625, mx * 1.25, -mx * 1.5,
                         3e38, -3e38, 1e-45, -1e-45, 2.0**-130], dtype=np.float32)
    kw = dict(saturate=bool(saturate), fnuz_inf_saturates=bool(fnuz_inf_saturates))
    want = floats.encode(vals.astype(np.float64), et, **kw).astype(np.uint64)
    got = np.array([cpu_kernel.lib.qk_encode_f32_export(int(b), K.KIND[t], saturate, fnuz_inf_saturates)
                    for b in vals.view(np.uint32)], dtype=np.uint64)
    nan = et.is_nan_bits(want) & et.is_nan_bits(got)
    bad = (want != got) & ~nan
    assert not bad.any(), [(float(v), hex(int(w)), hex(int(g))) for v, w, g in zip(vals[bad], want[bad], got[bad])]


# --------------------------------------------------------------------------------------------
# The corpus
# --------------------------------------------------------------------------------------------
#: The corpus in groups by op, so that pytest-xdist spreads them over its workers: every operator
#: whose declaration says the kernels implement it (qconform/declarations/operators.py, ``kernel``).
CORPUS_GROUPS = tuple(glob.removesuffix("*") for glob in kernel_scope()[0])


@pytest.mark.parametrize("group", CORPUS_GROUPS)
def test_cpu_kernel_passes_the_whole_corpus(corpus, cpu_kernel, group):
    """Strict profile (the latest spec text's reading only), which implies the default profile.
    Every case of every op in scope runs and passes; none is declined. Invalid-by-text cases (the
    engine's *info*) are run and compared too: their outputs are still the reading compared."""
    cases = [c for c in corpus.cases if c.id.startswith(group)]
    assert cases, group
    verdicts: Counter = Counter()
    declined, failures = [], []
    for case in cases:
        try:
            outputs = prepare(cpu_kernel, build_model(case))(case.feeds)
        except Unsupported as exc:
            declined.append(f"{case.id}: {exc}")
            continue
        outcome = compare(case, outputs, profile="strict")
        verdicts[outcome.verdict] += 1
        if outcome.verdict != "pass":
            failures.append(outcome.message(case))
    assert not declined, "\n".join(declined[:10])
    assert not failures, "\n".join(failures[:10])
    assert verdicts["pass"] == len(cases)


def test_cpu_kernel_declines_what_it_does_not_implement(cpu_kernel):
    """An operator declared outside the kernels' scope (``kernel=False``), or none at all, is declined by name."""
    from onnx import TensorProto, helper

    outside = [o for o in OPERATORS if not o.kernel] + [None]
    op, domain = (outside[0].op, outside[0].domain) if outside[0] else ("NotAnOperator", "")
    node = helper.make_node(op, ["a", "b"], ["y"], domain=domain or None)
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", TensorProto.INT32, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(domain, 1 if domain else 21)])
    with pytest.raises(Unsupported, match=f"no kernel for {'' if not domain else domain + '.'}{op}"):
        cpu_kernel.prepare(model)


def test_the_kernel_scope_is_the_declarations():
    """Every operator the declarations put in the kernels' scope has a plan; the others name a reason."""
    from qconform.kernels.plan import CONTRACTIONS, KNOWN_ATTRS

    inside = {o.key for o in OPERATORS if o.kernel}
    assert inside == set(KNOWN_ATTRS)
    assert {o.key for o in OPERATORS if o.contraction == "conv"} <= set(CONTRACTIONS)
    assert all(o.kernel_reason for o in OPERATORS if not o.kernel)


def test_kernel_type_lists_cover_the_newest_schemas_types():
    """Q_X, Q_SCALE, ... are kernel facts (what qkernels.h implements), not type facts; today they are
    every type the newest schema allows, and a type the schemas add must be added to the kernels."""
    from qconform import schemas

    want = {"QuantizeLinear": (P.Q_X, P.Q_SCALE, P.Q_OUT), "DequantizeLinear": (P.DQ_X, P.DQ_SCALE, P.DQ_OUT)}
    for op, lists in want.items():
        spec = schemas.get(op, schemas.IN_SCOPE[("", op)][-1])
        formals = (spec.inputs[0], spec.inputs[1], spec.outputs[0])
        assert [set(ls) for ls in lists] == [set(spec.type_params[f.type_param]) for f in formals]


@pytest.mark.parametrize("opset", [9, 29])
def test_the_plan_declines_a_version_the_oracle_does_not_know(opset):
    """The plan's op rules are the oracle's version class's: an opset with no version in scope (before
    QuantizeLinear-10) or newer than the schemas know is Unsupported, not run as a neighbour's."""
    from onnx import TensorProto, helper

    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [2])],
                              initializer=[helper.make_tensor("s", TensorProto.FLOAT, [], [1.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    with pytest.raises(Unsupported, match="QuantizeLinear"):
        P.read_plan(model, "cpu-kernel")


@pytest.mark.parametrize("opset", [13, 21, 23, 24, 28])
def test_the_plan_reads_the_oracle_version_facts(opset):
    """axis, the fnuz Cast table, the output type and the quotient precision come from the version class."""
    from onnx import TensorProto, helper

    from qconform.oracle import oracle_for

    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=0)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FNUZ, [2])],
                              initializer=[helper.make_tensor("s", TensorProto.FLOAT16, [], [1.0]),
                                           helper.make_tensor("z", TensorProto.FLOAT8E4M3FNUZ, [], [0])])
    plan = P.read_plan(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), "cpu-kernel")
    oracle = oracle_for("", "QuantizeLinear", opset)
    assert (plan.axis, plan.fnuz_inf_saturates, plan.out_type, plan.prec) == (
        0, oracle.fnuz_inf_saturates, "float8e4m3fnuz", "float16")
    assert plan.fnuz_inf_saturates == (opset >= 24)


# --------------------------------------------------------------------------------------------
# Sweeps: every 16-bit input, the sampled float32 set, and whatever full-2^32 chunks have goldens
# --------------------------------------------------------------------------------------------
SWEEPS = S.all_sweeps()


def _assert_sweep(summary: S.Summary) -> None:
    bad = [r for r in summary.results if r.status not in ("ok", "reading")]
    assert not bad, "\n".join(summary.lines())


@pytest.mark.parametrize("op", ["QuantizeLinear", "DequantizeLinear"])
def test_sweeps_every_16bit_input(cpu_kernel, op):
    chosen = [s for s in SWEEPS if s.op == op and "all" in s.domains()]
    summary = S.check(chosen, ("all",), CPU)
    assert len(summary.results) == len(chosen)
    _assert_sweep(summary)


@pytest.mark.parametrize("target", ["float8", "float4", "int8", "int4", "int2", "int16"])
def test_sweeps_sampled_float32(cpu_kernel, target):
    chosen = [s for s in SWEEPS if s.x_type == "float32" and f"-{target}" in s.id]
    assert chosen
    summary = S.check(chosen, ("sampled",), CPU)
    assert len(summary.results) == 3 * len(chosen)
    _assert_sweep(summary)


def test_sampled_float32_domain_covers_every_exponent():
    dom = S.domain(S.select(["QuantizeLinear-25/float32-int8/scale=float32:1.0"])[0], "sampled")
    sweep = S.select(["QuantizeLinear-25/float32-int8/scale=float32:1.0"])[0]
    bits = np.concatenate([S.input_bits(sweep, dom, c) for c in range(dom.chunks)])
    assert bits.size == dom.size == len(np.unique(bits))
    assert np.array_equal(np.unique((bits >> 23) & 0xFF), np.arange(256))
    assert np.isin(np.array([0x7F800000, 0xFF800000, 0, 0x80000000, 1, 0x7F7FFFFF], np.uint32), bits).all()


#: Two whole chunks of 2^24 float32 inputs in the default run: 0x43000000.. (128 to 512: the float8
#: E4M3 limits and overflow, int8 saturation at every scale) and 0xBF000000.. (-0.5 to -2: negative
#: ties). All 256 chunks: --full-sweep.
DEFAULT_FULL_CHUNKS = (0x43, 0xBF)


def test_full_float32_chunks_in_the_default_run(cpu_kernel):
    chosen = [s for s in SWEEPS if "full" in s.domains()]
    assert len(chosen) == 28  # every QuantizeLinear-25 output type from float32 (sweep/table.py)
    for c in DEFAULT_FULL_CHUNKS:
        summary = S.check(chosen, ("full",), CPU, chunks=range(c, c + 1))
        assert len(summary.results) == len(chosen) and not summary.missing, "\n".join(summary.lines())
        _assert_sweep(summary)


FULL_RANGE = 32  # chunks of 2^24 per test: pytest-xdist hands each worker its own ranges


def pytest_generate_tests(metafunc):
    """With --full-sweep: one test per (full-domain sweep, range of 32 chunks); else one skip."""
    if "full_range" not in metafunc.fixturenames:
        return
    if not metafunc.config.getoption("--full-sweep"):
        metafunc.parametrize("full_range", [pytest.param(None, marks=pytest.mark.skip(
            reason="the full 2^32 float32 sweeps run with --full-sweep"))], ids=["off"])
        return
    params = [(s, range(a, a + FULL_RANGE)) for s in SWEEPS if "full" in s.domains()
              for a in range(0, S.domain(s, "full").chunks, FULL_RANGE)]
    metafunc.parametrize("full_range", params, ids=[f"{s.id}[{r.start}:{r.stop}]" for s, r in params])


def test_full_float32_sweep(cpu_kernel, full_range):
    """Every chunk of every full-domain sweep: 28 configurations x 2^32 inputs (~25 min on 2 cores)."""
    sweep, chunks = full_range
    summary = S.check([sweep], ("full",), CPU, chunks=chunks)
    assert len(summary.results) == len(chunks)
    assert not summary.missing, f"{len(summary.missing)} chunks have no golden (qconform sweep --regen --domain full)"
    _assert_sweep(summary)


def _isa_levels() -> list[str]:
    """The x86-64 ISA levels the host clones target that this process can run (v4: AVX-512, v3:
    AVX2), from cpuid as numpy reads it (/proc/cpuinfo shows the host's flags under an emulator)."""
    from qconform import platform as machine

    if machine.arch() != "x86_64":
        return []
    f = machine.features()
    levels = ["x86-64"]
    if {"avx2", "fma3", "bmi2"} <= f:
        levels.append("x86-64-v3")
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= f:
        levels.append("x86-64-v4")
    return levels


@pytest.mark.parametrize("level", ["x86-64", "x86-64-v3", "x86-64-v4"])
def test_every_vector_width_gives_the_golden_bits(cpu_kernel, level):
    """The host loops are cloned per ISA level and the CPU picks one at load time, so the sweeps
    above test only this machine's pick. Each level, built alone, must match the sampled goldens."""
    from qconform.runners.cpu_kernel import CpuKernelRunner

    if level not in _isa_levels():
        pytest.skip(f"this CPU cannot run {level} code")
    runner = CpuKernelRunner(extra_cflags=("-DQK_NO_CLONES", f"-march={level}"))
    hot = [s for s in SWEEPS if s.x_type == "float32" and s.opset == S.SWEEP_OPSET and s.op == "QuantizeLinear"
           and s.out_type in ("int8", "uint8", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz")]
    assert len(hot) == 14
    for sweep in hot:
        run = prepare(runner, S.sweep_model(sweep))
        dom = S.domain(sweep, "sampled")
        goldens = S.golden_digests(sweep, dom)
        for chunk in range(dom.chunks):
            x = S.inputs(sweep, dom, chunk)
            (y,) = run({"x": x})
            got = S.digest(S.Canonicaliser(dtypes.get(sweep.out_type))(y, S.dont_care(sweep, x)))
            assert got == goldens[chunk], f"{level}: {sweep.id} sampled chunk {chunk} differs from the golden"


@pytest.mark.needs("cc")  # TiesAwayRunner wraps cpu-kernel
def test_sweep_names_the_exact_inputs_of_a_deviation(tmp_path):
    """A runner that rounds ties away from zero: the digest differs, the oracle names the inputs."""
    sweep = S.select(["QuantizeLinear-25/float16-int8/scale=float16:1.0"])[0]
    summary = S.check([sweep], ("all",), f"{__file__}:TiesAwayRunner")
    (r,) = summary.results
    assert r.status == "mismatch" and r.mismatches > 0
    assert "y=0x03 (3), but should be 0x02 (2) [x=0x4100 (2.5)]" in r.detail, r.detail
    assert r.detail.startswith(f"{r.mismatches} of 65536 element(s) differ")


def test_sweep_state_file_resumes(tmp_path, cpu_kernel):
    chosen = [s for s in SWEEPS if s.op == "DequantizeLinear" and s.x_type == "int4"]
    state = tmp_path / "state.jsonl"
    first = S.check(chosen, ("all",), CPU, state=state)
    assert all(r.status == "ok" for r in first.results)
    lines = state.read_text().splitlines()
    assert json.loads(lines[0])["key"]["runner"] == CPU and len(lines) == 1 + len(chosen)
    again = S.check(chosen, ("all",), CPU, state=state)  # nothing left to run: read back
    assert [r.digest for r in again.results] == [r.digest for r in first.results]
    assert len(state.read_text().splitlines()) == len(lines)


def test_canonical_form_ignores_nan_encodings():
    t = dtypes.get("float8e4m3fn")
    canon = S.Canonicaliser(t)
    a = t.from_bits(np.array([0x7F, 0x01, 0x00]))
    b = t.from_bits(np.array([0xFF, 0x01, 0x00]))
    assert S.digest(canon(a, None)) == S.digest(canon(b, None))
    assert S.digest(canon(a, None)) != S.digest(canon(t.from_bits(np.array([0x7F, 0x02, 0x00])), None))


class TiesAwayRunner:
    """A plausible bug, for the deviation test: round(x / s) with ties away from zero."""

    name = "ties-away"

    def prepare(self, model):
        from qconform.runners.cpu_kernel import CpuKernelRunner

        inner = CpuKernelRunner().prepare(model)

        def run(feeds):
            x = np.nan_to_num(feeds["x"].astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
            y = inner(feeds)[0].astype(np.int64)
            tie = (np.abs(x - np.trunc(x)) == 0.5) & (np.abs(x) < 127)
            away = (np.trunc(x) + np.sign(x)).astype(np.int64)
            return [np.where(tie, away, y).astype(np.int8)]

        return run


# --------------------------------------------------------------------------------------------
# The GPU side: PTX for four architectures, the lint, the runner without a device
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


# --------------------------------------------------------------------------------------------
# QLinearMatMul beyond the corpus: accumulators wider than 64 bits
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("t", ["float8e5m2fnuz", "float8e5m2", "float8e4m3fn"])
@pytest.mark.parametrize("out", ["int8", "float8e4m3fn"])
def test_qlinear_matmul_accumulates_beyond_64_bits_exactly(cpu_kernel, t, out):
    """Extreme and tiny float8 values in one dot product: the exact sum needs more than 64 bits
    (e5m2fnuz: 2^-34 to 2^38), so the 128-bit accumulator and its one rounding to double are checked
    against the oracle, which sums Python integers."""
    from qconform.case import Arg, Draft
    from qconform.oracle import evaluate

    et = dtypes.get(t)
    rng = np.random.default_rng(46)
    all_codes = np.arange(256, dtype=np.uint8)
    vals = et.from_bits(all_codes).astype(np.float64)
    fmt = et.float_format
    finite = np.isfinite(vals) & ~et.is_nan_bits(all_codes)
    big = all_codes[finite & (np.abs(vals) >= fmt.max_finite / 8)]
    small = all_codes[finite & (vals != 0) & (np.abs(vals) < 2.0**fmt.emin)]
    k = 48
    pool = np.concatenate([big, small])
    a = et.from_bits(rng.choice(pool, size=(3, k)))
    b = et.from_bits(rng.choice(pool, size=(k, 4)))
    y_scale = 2.0 ** round(np.log2(fmt.max_finite**2 * k / 256))  # results across the output's range
    ot = dtypes.get(out)
    one = lambda v, ty: np.asarray(v, dtypes.get(ty).dtype)  # noqa: E731
    args = (Arg("a", t, a), Arg("a_scale", "float32", one(1.0, "float32")), Arg("a_zero_point", t, one(0, t)),
            Arg("b", t, b), Arg("b_scale", "float32", one(1.0, "float32")), Arg("b_zero_point", t, one(0, t)),
            Arg("y_scale", "float32", one(y_scale, "float32")), Arg("y_zero_point", out, np.zeros((), ot.dtype)))
    case = evaluate(Draft("QLinearMatMul", 21, f"{t}-{t}-float32-{out}", "wide", "acc", args))
    outputs = prepare(cpu_kernel, build_model(case))(case.feeds)
    outcome = compare(case, outputs, profile="strict")
    assert outcome.verdict == "pass", outcome.message(case)


# --------------------------------------------------------------------------------------------
# QuantizeLinear-23+ with an int32 scale: the division in int32 precision
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("x_type", ["float32", "float16", "bfloat16", "int32"])
@pytest.mark.parametrize("out", ["uint8", "int4", "float8e4m3fn", "float8e5m2fnuz", "float4e2m1"])
def test_int32_scale_divides_in_int32_precision(cpu_kernel, x_type, out):
    """x rounded to an integer (ties to even), then x / s rounded to an integer (ties to even), a zero
    quotient +0, non-finite x kept (qconform/docs/semantics.md#q-division, operands-rounded-to-int32):
    ties of x and of the quotient, large and non-finite x, negative and large scales, per axis."""
    from qconform.declarations.operators import QUANTIZE_LINEAR

    xt, ot = dtypes.get(x_type), dtypes.get(out)
    vals = [-256.5, -1.0, 2.5, 3.5, 4.5, -4.5, 7.5, 0.5, -0.5, 1.5, 13.0, -13.0, 100.0, -300.0, 65504.0, 0.0]
    if xt.is_float:
        vals += [-0.0, 2.0**20 + 0.5 if x_type == "float32" else 1000.0, float("inf"), float("-inf"), float("nan")]
    else:
        vals += [2**31 - 1, -(2**31), 123_456_789, -7]
    x = np.array([v for v in vals if xt.is_float or float(v).is_integer()], np.float64)
    x = np.stack([x, x[::-1]]).astype(xt.dtype)
    s = np.array([3, -2], np.int32)  # per axis 0: a positive and a negative scale
    zp_codes = {"uint8": [5, 250], "int4": [0xD, 0x2], "float4e2m1": [0x0, 0x1]}.get(out, [0x00, 0x38])  # -3, 2
    zp = ot.from_bits(np.array(zp_codes, np.uint8))
    _judged(cpu_kernel, QUANTIZE_LINEAR, dict(x=x, y_scale=s, y_zero_point=np.asarray(zp, ot.dtype)), dict(axis=0))
    big = np.array([1_000_003, -65_537], np.int32)
    _judged(cpu_kernel, QUANTIZE_LINEAR, dict(x=x, y_scale=big, y_zero_point=np.asarray(zp, ot.dtype)), dict(axis=0))


# --------------------------------------------------------------------------------------------
# The integer compute ops beyond the corpus: geometries and operand forms it does not combine
# --------------------------------------------------------------------------------------------
def _decl(contraction: str, requant: bool):
    from qconform.declarations.operator import Kind

    kind = Kind.REQUANTIZE if requant else Kind.INTEGER
    return next(o for o in OPERATORS if o.contraction == contraction and o.kind is kind and o.versions == (10,))


def _judged(runner, op, values: dict, attrs: dict | None = None) -> None:
    """A draft of ``op`` (a declaration) from input values by name, judged in the strict profile: the
    kernel must give the oracle's first reading bit for bit."""
    from qconform.case import Arg, Draft
    from qconform.oracle import evaluate

    args = tuple(Arg(i.name, dtypes.get(values[i.name].dtype).name, values[i.name]) if i.name in values else None
                 for i in op.inputs)
    while args and args[-1] is None:
        args = args[:-1]
    case = evaluate(Draft(op.op, op.versions[-1], "kernel-test", "beyond", "case", args, attrs or {}))
    outcome = compare(case, prepare(runner, build_model(case))(case.feeds), profile="strict")
    assert outcome.verdict == "pass", outcome.message(case)


#: (x shape, w shape, attributes): 1-D to 3-D, groups and depthwise, strides, dilations, asymmetric
#: pads and every auto_pad mode, batches; windows that leave the input on both sides.
CONV_GEOMETRIES = {
    "1d-grouped-strided-dilated": ((2, 4, 9), (6, 2, 3), dict(group=2, strides=[2], dilations=[2], pads=[3, 1])),
    "2d-same-lower-strided": ((1, 3, 7, 6), (4, 3, 3, 2), dict(auto_pad="SAME_LOWER", strides=[2, 3])),
    "2d-same-upper-dilated": ((1, 3, 7, 6), (4, 3, 3, 2), dict(auto_pad="SAME_UPPER", dilations=[2, 1])),
    "2d-valid-dilated": ((1, 2, 6, 5), (3, 2, 2, 2), dict(auto_pad="VALID", dilations=[3, 2])),
    "3d-depthwise-padded": ((2, 4, 5, 4, 6), (4, 1, 2, 3, 2), dict(group=4, pads=[1, 0, 2, 0, 1, 1], strides=[1, 2, 2])),
    "3d-kernel-shape": ((1, 2, 3, 4, 3), (2, 2, 2, 2, 2), dict(kernel_shape=[2, 2, 2], pads=[1, 1, 1, 1, 1, 1])),
}


@pytest.mark.parametrize("types", [("uint8", "int8", "uint8"), ("int8", "uint8", "int8")], ids="-".join)
@pytest.mark.parametrize("name", list(CONV_GEOMETRIES))
def test_convolutions_beyond_the_corpus(cpu_kernel, name, types):
    """QLinearConv (per-channel w parameters, a bias, a non-zero x zero point so that padding shows,
    calibrated scales: results over the whole output range, readings apart) and ConvInteger on the
    same operands, against the oracle's first reading."""
    from qconform.oracle.integer import conv_sums

    x_shape, w_shape, attrs = CONV_GEOMETRIES[name]
    tx, tw, ty = (dtypes.get(t) for t in types)
    rng = np.random.default_rng(zlib.crc32(f"{name}/{types}".encode()))
    lo = lambda t: int(t.qrange[0])  # noqa: E731
    hi = lambda t: int(t.qrange[1])  # noqa: E731
    x = rng.integers(lo(tx), hi(tx) + 1, x_shape).astype(tx.dtype)
    w = rng.integers(lo(tw), hi(tw) + 1, w_shape).astype(tw.dtype)
    m = w_shape[0]
    x_zp = np.array(lo(tx) + 37, tx.dtype)
    w_zp = rng.integers(lo(tw), hi(tw) + 1, m).astype(tw.dtype)
    bias = rng.integers(-3000, 3000, m).astype(np.int32)
    x_s, w_s = np.float32(0.0173), rng.uniform(0.002, 0.03, m).astype(np.float32)
    sums = conv_sums(x, x_zp, w, w_zp, attrs)
    peak = float(np.max(np.abs((sums + bias.reshape((1, -1) + (1,) * (len(x_shape) - 2))) * x_s
                               * w_s.reshape((1, -1) + (1,) * (len(x_shape) - 2)))))
    y_s = np.float32(peak / 150)  # some results saturate, the rest spread over the range
    y_zp = np.array(lo(ty) + 100, ty.dtype)
    qlconv = _decl("conv", requant=True)
    _judged(cpu_kernel, qlconv, dict(x=x, x_scale=np.array(x_s), x_zero_point=x_zp, w=w, w_scale=w_s,
                                     w_zero_point=w_zp, y_scale=np.array(y_s), y_zero_point=y_zp, B=bias), attrs)
    _judged(cpu_kernel, _decl("conv", requant=False), dict(x=x, w=w, x_zero_point=x_zp, w_zero_point=w_zp), attrs)
    _judged(cpu_kernel, _decl("conv", requant=False), dict(x=x, w=w), attrs)  # zero points absent: 0


def test_qlinear_conv_per_tensor_weights_without_bias(cpu_kernel):
    """w's scale and zero point as 1-element 1-D tensors (per tensor), no B, x's zero point at the top of
    its range (a padded pixel differs most from code 0), a 2-D grouped convolution."""
    rng = np.random.default_rng(67)
    x = rng.integers(0, 256, (2, 6, 5, 5)).astype(np.uint8)
    w = rng.integers(-128, 128, (4, 3, 3, 3)).astype(np.int8)
    one = lambda v, t: np.array([v], t)  # noqa: E731
    values = dict(x=x, x_scale=np.array(np.float32(0.05)), x_zero_point=np.array(255, np.uint8), w=w,
                  w_scale=one(0.01, np.float32), w_zero_point=one(3, np.int8), y_scale=np.array(np.float32(1.7)),
                  y_zero_point=np.array(-5, np.int8))
    _judged(cpu_kernel, _decl("conv", requant=True), values, dict(group=2, pads=[2, 1, 0, 2], strides=[2, 1]))


def _random_conv(rng: np.random.Generator) -> tuple[dict, dict]:
    """One random QLinearConv draw: 1-D to 3-D, groups, strides, dilations, explicit pads or an
    auto_pad mode, per-tensor or per-channel weights, a bias or none, every int8/uint8 combination."""
    sp, g, cg, mg = (int(rng.integers(1, 4)), int(rng.choice([1, 2, 3])), int(rng.integers(1, 4)),
                     int(rng.integers(1, 3)))
    attrs: dict = {"group": g}
    if rng.random() < 0.5:
        attrs["strides"] = [int(v) for v in rng.integers(1, 4, sp)]
    if rng.random() < 0.5:
        attrs["dilations"] = [int(v) for v in rng.integers(1, 3, sp)]
    mode = rng.choice(["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "pads"])
    if mode == "pads":
        attrs["pads"] = [int(v) for v in rng.integers(0, 3, 2 * sp)]
    else:
        attrs["auto_pad"] = str(mode)
    tx, tw, ty = (dtypes.get(str(rng.choice(["int8", "uint8"]))) for _ in range(3))
    draw = lambda t, shape: rng.integers(int(t.qrange[0]), int(t.qrange[1]) + 1, shape).astype(t.dtype)  # noqa: E731
    m = g * mg
    per = (m,) if rng.random() < 0.5 else ()
    values = dict(x=draw(tx, (int(rng.integers(1, 3)), g * cg, *rng.integers(1, 8, sp))), x_zero_point=draw(tx, ()),
                  x_scale=np.array(np.float32(rng.uniform(0.001, 0.1))), w=draw(tw, (m, cg, *rng.integers(1, 4, sp))),
                  w_scale=rng.uniform(0.001, 0.05, per).astype(np.float32), w_zero_point=draw(tw, per),
                  y_scale=np.array(np.float32(rng.uniform(0.01, 2.0))), y_zero_point=draw(ty, ()))
    if rng.random() < 0.5:
        values["B"] = rng.integers(-5000, 5000, m).astype(np.int32)
    return values, attrs


def test_random_convolutions_against_the_oracle(cpu_kernel):
    """60 seeded random geometries and operands (those the oracle finds invalid, e.g. a dilated kernel
    larger than the padded input, are drawn again): QLinearConv and ConvInteger on each, the oracle's
    first reading bit for bit."""
    from qconform.oracle.granularity import InvalidModel

    rng, judged = np.random.default_rng(1067), 0
    while judged < 60:
        values, attrs = _random_conv(rng)
        try:
            _judged(cpu_kernel, _decl("conv", requant=True), values, attrs)
        except InvalidModel:
            continue
        _judged(cpu_kernel, _decl("conv", requant=False),
                {k: values[k] for k in ("x", "w", "x_zero_point", "w_zero_point")}, attrs)
        judged += 1


def test_conv_geometry_is_the_oracles():
    """The planned output shape is the oracle's for every geometry above; a 4-D convolution is
    declined, an attribute that contradicts the tensors is the oracle's invalid model."""
    from qconform.kernels import CONV_GEOMETRY
    from qconform.kernels.contraction import geometry
    from qconform.oracle.granularity import InvalidModel
    from qconform.oracle.integer import conv_sums

    for x_shape, w_shape, attrs in CONV_GEOMETRIES.values():
        numbers, shape = geometry(x_shape, w_shape, attrs)
        z = np.zeros((), np.int64)
        assert shape == conv_sums(np.zeros(x_shape, np.int64), z, np.zeros(w_shape, np.int64), z, attrs).shape
        assert len(numbers) == sum(n for _, n in CONV_GEOMETRY)
    with pytest.raises(Unsupported, match="4-D"):
        geometry((1, 1, 2, 2, 2, 2), (1, 1, 1, 1, 1, 1), {})
    with pytest.raises(InvalidModel):
        geometry((1, 2, 5), (1, 3, 2), {})


def test_conv_geometry_matches_the_header():
    """The geometry array's layout is the header's QK_CG_* enum."""
    import re

    from qconform.kernels import CONV_GEOMETRY, source

    enum = dict((k, int(v)) for k, v in re.findall(r"QK_CG_(\w+) = (\d+)", source()))
    offset = 0
    for name, count in CONV_GEOMETRY:
        if name.upper() in enum:
            assert enum[name.upper()] == offset, name
        offset += count
    assert enum["LEN"] == offset and enum["D"] == 4


#: (A shape, B shape, a_zero_point shape, b_zero_point shape): 1-D operands on either side, batch
#: broadcast both ways, per-row and per-column zero points in the N-D and the 2-D vector forms.
MATMUL_FORMS = {
    "1d-a": ((5,), (5, 3), (), (1, 3)),
    "1d-b": ((4, 5), (5,), (4, 1), ()),
    "1d-both": ((7,), (7,), (), ()),
    "batch-broadcast": ((2, 1, 3, 5), (4, 5, 2), (2, 1, 3, 1), (4, 1, 2)),
    "vector-forms": ((3, 6), (6, 4), (3,), (4,)),
    "absent": ((2, 3, 4), (4, 5), None, None),
}


@pytest.mark.parametrize("types", [("uint8", "int8"), ("int8", "uint8"), ("int8", "int8")], ids="-".join)
@pytest.mark.parametrize("name", list(MATMUL_FORMS))
def test_matmul_integer_beyond_the_corpus(cpu_kernel, name, types):
    a_shape, b_shape, az_shape, bz_shape = MATMUL_FORMS[name]
    ta, tb = (dtypes.get(t) for t in types)
    rng = np.random.default_rng(zlib.crc32(f"{name}/{types}".encode()))
    draw = lambda t, shape: rng.integers(int(t.qrange[0]), int(t.qrange[1]) + 1, shape).astype(t.dtype)  # noqa: E731
    values = dict(A=draw(ta, a_shape), B=draw(tb, b_shape))
    if az_shape is not None:
        values.update(a_zero_point=draw(ta, az_shape), b_zero_point=draw(tb, bz_shape))
    _judged(cpu_kernel, _decl("matmul", requant=False), values)


def test_matmul_integer_wraps_in_32_bits(cpu_kernel):
    """K = 66 200 products of 255 * 255 (uint8 255 against zero points 0): the exact sum 4 304 655 000
    is past 2^32, and y is that sum modulo 2^32 as int32 (#integer-accumulation)."""
    k = 66_200
    a = np.full((1, k), 255, np.uint8)
    b = np.full((k, 2), 255, np.uint8)
    b[:, 1] = 0
    _judged(cpu_kernel, _decl("matmul", requant=False), dict(A=a, B=b, a_zero_point=np.array(0, np.uint8),
                                                             b_zero_point=np.array(0, np.uint8)))


def test_gpu_kernel_reports_unsupported_without_a_device():
    from qconform.runner import RunnerError, resolve
    from qconform.runners.gpu_kernel import GpuKernelRunner

    try:
        runner = GpuKernelRunner()
    except Unsupported as exc:
        assert str(exc).startswith(("no CUDA device (cupy: ", "NVRTC not available")), exc
        with pytest.raises(RunnerError, match="cannot start here"):
            resolve("qconform.runners.gpu_kernel:GpuKernelRunner")
        return
    # A machine with a CUDA device: then the same header must agree with the gcc build.
    sweep = S.select(["QuantizeLinear-25/float16-float8e4m3fn/scale=float16:1.0/saturate=1"])[0]
    _assert_sweep(S.check([sweep], ("all",), "qconform.runners.gpu_kernel:GpuKernelRunner"))
    assert runner.describe()["device"].startswith("cuda")


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

"""qconform's own kernels (qconform/kernels/: qkernels.h and its parts): the gcc build passes the whole
corpus (every op in scope) and the exhaustive sweeps at every vector width, the kind and specials tables
are the registry's, the plan declines what the kernels do not implement, and gpu-kernel says plainly why
it cannot start here. The GPU side's PTX and lint: tests/test_kernels_gpu.py; beyond the corpus:
tests/test_kernels_integer.py, _contrib.py, _pools.py, _functions.py."""
from __future__ import annotations

import ctypes
import json
from collections import Counter

import numpy as np
import pytest

from kernel_helpers import cpu_kernel  # noqa: F401 (a fixture)
from qconform import dtypes
from qconform import kernels as K
from qconform.kernels import plan as P
from qconform import sweep as S
from qconform.compare import compare
from qconform.declarations.operators import OPERATORS, kernel_scope
from qconform.model import build_model
from qconform.runner import Unsupported, prepare

CPU = "qconform.runners.cpu_kernel:CpuKernelRunner"


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

"""qconform's own kernels on onnxruntime's com.microsoft contrib ops beyond the corpus (issue 67): each
op's declaration in the kernels' scope, judged against the oracle's first reading bit for bit (strict
profile), on operand forms the corpus does not combine."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from kernel_helpers import cpu_kernel, judged  # noqa: F401 (a fixture)
from qconform import dtypes
from qconform.compare import compare
from qconform.declarations.operators import OPERATORS
from qconform.model import build_model
from qconform.runner import prepare


def _section(section: str):
    return next(o for o in OPERATORS if o.section == section)


BROADCASTS = {"same": ((3, 4), (3, 4)), "row": ((2, 3, 4), (4,)), "column": ((3, 1), (1, 5)),
              "scalar": ((), (2, 3)), "middle": ((2, 1, 3), (4, 1))}


@pytest.mark.parametrize("types", [("uint8", "uint8"), ("int8", "int8")], ids="-".join)
@pytest.mark.parametrize("shapes", list(BROADCASTS))
def test_qlinear_mul_broadcasts_and_requantises(cpu_kernel, shapes, types):
    """QLinearMul: numpy broadcasting planned on the host, zero points present and absent, scales
    giving results over the whole output range (some saturate), 1-element 1-D parameters."""
    op = _section("ms-qlinear-mul")
    t, ty = (dtypes.get(n) for n in types)
    rng = np.random.default_rng(zlib.crc32(f"{shapes}/{types}".encode()))
    a_shape, b_shape = BROADCASTS[shapes]
    lo, hi = int(t.qrange[0]), int(t.qrange[1])
    a = rng.integers(lo, hi + 1, a_shape).astype(t.dtype)
    b = rng.integers(lo, hi + 1, b_shape).astype(t.dtype)
    values = dict(A=a, A_scale=np.array(np.float32(0.031)), B=b, B_scale=np.array([np.float32(0.0077)]),
                  C_scale=np.array(np.float32(0.11)), A_zero_point=np.array(lo + 100, t.dtype),
                  B_zero_point=np.array([lo + 17], t.dtype))
    if ty != t:
        values["C_zero_point"] = np.array(int(ty.qrange[0]) + 60, ty.dtype)
    judged(cpu_kernel, op, values)
    judged(cpu_kernel, op, {k: v for k, v in values.items() if "zero_point" not in k or k.startswith("C")})


def test_qlinear_mul_ties_round_half_to_even(cpu_kernel):
    """Products whose requantised value is k + 1/2 exactly (scales of powers of two)."""
    op = _section("ms-qlinear-mul")
    a = np.arange(-128, 128, dtype=np.int8)
    b = np.array(3, np.int8)
    judged(cpu_kernel, op, dict(A=a, A_scale=np.array(np.float32(0.5)), B=b, B_scale=np.array(np.float32(1.0)),
                                C_scale=np.array(np.float32(4.0)), C_zero_point=np.array(1, np.int8)))


@pytest.mark.parametrize("trans", [(0, 0), (1, 0), (0, 1), (1, 1)], ids=lambda t: f"transA{t[0]}B{t[1]}")
@pytest.mark.parametrize("form", ["per-column-with-C", "per-tensor-float-output", "float-output-per-column-C"])
def test_qgemm_beyond_the_corpus(cpu_kernel, trans, form):
    """QGemm: transA / transB, alpha (a power of two, so alpha·a_scale stays a float32), b's parameters
    per column or per tensor, C broadcast from a row, and float32 Y where y_scale is absent."""
    op = _section("ms-qgemm")
    rng = np.random.default_rng(zlib.crc32(f"{trans}/{form}".encode()))
    m, k, n = 3, 7, 5
    a = rng.integers(0, 256, (k, m) if trans[0] else (m, k)).astype(np.uint8)
    b = rng.integers(-128, 128, (n, k) if trans[1] else (k, n)).astype(np.int8)
    per_column = "per-column" in form
    b_s = rng.uniform(0.001, 0.02, n).astype(np.float32) if per_column else np.array(np.float32(0.0123))
    b_zp = rng.integers(-5, 6, n).astype(np.int8) if per_column else np.array(2, np.int8)
    values = dict(A=a, a_scale=np.array(np.float32(0.043)), a_zero_point=np.array(131, np.uint8), B=b, b_scale=b_s,
                  b_zero_point=b_zp)
    if "C" in form:
        values["C"] = rng.integers(-20000, 20000, (1, n)).astype(np.int32)
    if "float" not in form:
        values.update(y_scale=np.array(np.float32(0.35)), y_zero_point=np.array(-3, np.int8))
    judged(cpu_kernel, op, values, dict(transA=trans[0], transB=trans[1], alpha=0.5))


@pytest.mark.parametrize("out", ["float32", "float16"])
@pytest.mark.parametrize("form", ["per-tensor", "per-column-bias", "per-k-a-zero-point-batched"])
def test_matmul_integer_to_float_beyond_the_corpus(cpu_kernel, out, form):
    """MatMulIntegerToFloat in its first reading (scales-multiplied-first): b's parameters per tensor or
    per column, a bias, a's zero point per K, batch broadcast; float16 outputs round every step in float16."""
    op = next(o for o in OPERATORS if o.section == "ms-scale-products" and o.kind.value == "integer")
    rng = np.random.default_rng(zlib.crc32(f"{out}/{form}".encode()))
    ft = np.float32 if out == "float32" else np.float16
    a_shape, (k, n) = ((2, 3, 6) if "batched" in form else (3, 6)), (6, 4)
    a = rng.integers(0, 256, a_shape).astype(np.uint8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    column = "per-column" in form
    values = dict(A=a, B=b, a_scale=np.array(ft(0.0213)),
                  b_scale=rng.uniform(0.001, 0.05, n).astype(ft) if column else np.array(ft(0.0071)),
                  a_zero_point=rng.integers(0, 256, k).astype(np.uint8) if "per-k" in form else np.array(120, np.uint8),
                  b_zero_point=rng.integers(-4, 5, n).astype(np.int8) if column else np.array(-1, np.int8))
    if "bias" in form:
        values["bias"] = rng.uniform(-3, 3, n).astype(ft)
    judged(cpu_kernel, op, values)


def test_dynamic_quantize_matmul_beyond_the_corpus(cpu_kernel):
    """DynamicQuantizeMatMul: A quantized by the kernels' dynamic quantizer, per-column b parameters, a bias."""
    op = next(o for o in OPERATORS if o.section == "ms-scale-products" and o.kind.value == "dynamic-quantize")
    rng = np.random.default_rng(671)
    values = dict(A=rng.normal(0, 2, (2, 3, 5)).astype(np.float32), B=rng.integers(0, 256, (5, 4)).astype(np.uint8),
                  b_scale=rng.uniform(0.001, 0.05, 4).astype(np.float32), b_zero_point=np.arange(4, dtype=np.uint8) + 126,
                  bias=rng.uniform(-1, 1, 4).astype(np.float32))
    judged(cpu_kernel, op, values)
    judged(cpu_kernel, op, {k: v for k, v in values.items() if k != "bias"})


def _scale(rng: np.random.Generator, lo: int, hi: int) -> np.ndarray:
    """A float32 scale of a random 24-bit (or short, tie-making) significand and exponent in [lo, hi]."""
    bits = int(rng.choice([1, 3, 24]))
    m = int(rng.integers(1 << (bits - 1), 1 << bits)) | 1
    return np.array(np.float32(np.ldexp(float(m), int(rng.integers(lo, hi + 1)) - bits)))


@pytest.mark.parametrize("gap", ["near", "wide", "beyond-90", "tiny-quotient"])
def test_qlinear_add_rounds_the_exact_value(cpu_kernel, gap):
    """QLinearAdd's exact-rational reading: every pair of 8-bit codes against B's fixed code set, scales whose
    exponents lie close (ties of short significands), far apart (the smaller term decides a tie or is
    a sticky bit beyond 90 binades) and quotients far below one."""
    op = _section("ms-qlinear-add")
    rng = np.random.default_rng(zlib.crc32(gap.encode()))
    ranges = {"near": ((-4, 0), (-4, 0), (-3, 0)), "wide": ((-30, -20), (-70, -60), (-28, -22)),
              "beyond-90": ((0, 4), (-120, -100), (-2, 2)), "tiny-quotient": ((-60, -50), (-62, -52), (-20, -10))}
    a = np.arange(-128, 128, dtype=np.int8).reshape(16, 16)
    for trial in range(6):
        b = rng.integers(-128, 128, (16, 1)).astype(np.int8)
        a_s, b_s, c_s = (_scale(rng, *r) for r in ranges[gap])
        judged(cpu_kernel, op, dict(A=a, A_scale=a_s, A_zero_point=np.array(int(rng.integers(-5, 5)), np.int8), B=b,
                                    B_scale=-b_s if trial % 2 else b_s, B_zero_point=np.array(3, np.int8),
                                    C_scale=c_s, C_zero_point=np.array(int(rng.integers(-20, 20)), np.int8)))


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 7, 8])
@pytest.mark.parametrize("zero", ["default", "packed", "float"])
def test_matmul_nbits_reads_every_width_and_zero_point_form(cpu_kernel, bits, zero):
    """MatMulNBits: B's codes as one bit stream per row (K not a multiple of block_size, so the last
    blob is padded), zero points absent (2^(bits-1)), packed or of A's type, a bias, a batch of A; values
    chosen exact (power-of-two scales, small integer A) as the oracle's cases are."""
    from qconform.declarations.contrib_blocked import pack_stream

    op = _section("ms-matmulnbits")
    rng = np.random.default_rng(zlib.crc32(f"{bits}/{zero}".encode()))
    k, n, bs = 40, 3, 16
    kb, blob = -(-k // bs), bs * bits // 8
    q = rng.integers(0, 1 << bits, (n, kb * bs))
    b = pack_stream(q, bits, kb * blob).reshape(n, kb, blob)
    values = dict(A=rng.integers(-3, 4, (2, 1, k)).astype(np.float32), B=b,
                  scales=np.exp2(rng.integers(-6, 0, (n, kb))).astype(np.float32),
                  bias=rng.integers(-8, 8, n).astype(np.float32))
    if zero == "packed":
        values["zero_points"] = pack_stream(rng.integers(0, 1 << bits, (n, kb)), bits, -(-kb * bits // 8))
    elif zero == "float":
        values["zero_points"] = rng.integers(0, 1 << bits, (n, kb)).astype(np.float32)
    judged(cpu_kernel, op, values, dict(K=k, N=n, bits=bits, block_size=bs))


@pytest.mark.parametrize("form", ["int4-zero-points-gather-axis-1", "uint8-bits-2-packed", "uint8-bits-4-packed",
                                  "uint8-bits-8", "float8e4m3fn-block-0", "uint4-default-zero"])
@pytest.mark.parametrize("out", ["float32", "float16", "bfloat16"])
def test_gather_block_quantized_beyond_the_corpus(cpu_kernel, form, out):
    """GatherBlockQuantized: negative and out-of-range indices (+0 rows), each data form (int4/uint4 per
    element, uint8 rows packed at 2 and 4 bits, float8 with one block), zero points given or default,
    multiply-in-output-type for each output type."""
    op = _section("ms-gather-block-quantized")
    rng = np.random.default_rng(zlib.crc32(f"{form}/{out}".encode()))
    ft = dtypes.get(out).dtype
    indices = np.array([[0, -1], [2, 7]], np.int64)
    attrs: dict = dict(block_size=16)
    if form.startswith("uint8"):
        bits = int(form.split("-")[2])
        data = rng.integers(0, 256, (3, 8 * bits)).astype(np.uint8)  # 64 logical codes per row
        attrs.update(bits=bits, gather_axis=0, quantize_axis=1)
        scales = rng.uniform(0.01, 2, (3, 4)).astype(ft)
        values = dict(data=data, indices=indices, scales=scales)
    elif form.startswith("float8"):
        t = dtypes.get("float8e4m3fn")
        data = t.from_bits(rng.integers(0, 256, (3, 40)).astype(np.uint8))
        attrs.update(block_size=0, quantize_axis=1)
        values = dict(data=data, indices=indices, scales=rng.uniform(0.01, 2, (3, 1)).astype(ft))
    else:
        t = dtypes.get(form.split("-")[0])
        lo, hi = (int(v) for v in t.qrange)
        data = rng.integers(lo, hi + 1, (5, 3, 40)).astype(t.dtype)
        values = dict(data=data, indices=indices, scales=rng.uniform(0.01, 2, (5, 3, 3)).astype(ft))
        if "zero-points" in form:
            values["zero_points"] = rng.integers(lo, hi + 1, (5, 3, 3)).astype(t.dtype)
            attrs.update(gather_axis=1, quantize_axis=2)
            values["indices"] = np.array([[0, -1], [2, 3]], np.int64)
        else:
            attrs.update(gather_axis=0, quantize_axis=2)
    judged(cpu_kernel, op, values, attrs)


@pytest.mark.parametrize("alpha", [0.01, 0.5, -1.25, 3.0])
@pytest.mark.parametrize("t", ["int8", "uint8"])
def test_qlinear_leaky_relu_every_code(cpu_kernel, alpha, t):
    """QLinearLeakyRelu: every code of X through dequantize, alpha·x in float32, quantize (ties of the
    quotient at scales of powers of two), then scales that are not."""
    op = next(o for o in OPERATORS if o.section == "ms-qlinear-composed" and "alpha" in o.arithmetic_attrs)
    et = dtypes.get(t)
    x = np.arange(int(et.qrange[0]), int(et.qrange[1]) + 1).astype(et.dtype)
    values = dict(X=x, X_scale=np.array(np.float32(0.25)), X_zero_point=np.array(int(et.qrange[0]) + 100, et.dtype),
                  Y_scale=np.array(np.float32(0.5)), Y_zero_point=np.array(int(et.qrange[0]) + 90, et.dtype))
    judged(cpu_kernel, op, values, dict(alpha=alpha))
    values.update(X_scale=np.array(np.float32(0.0371)), Y_scale=np.array(np.float32(0.113)))
    judged(cpu_kernel, op, values, dict(alpha=alpha))


def test_qlinear_concat_requantises_each_input(cpu_kernel):
    """QLinearConcat: three inputs of different scales and zero points along a middle axis, each
    dequantized, concatenated, quantized with Y's parameters (ties at power-of-two scales)."""
    op = _section("ms-qlinear-concat")
    rng = np.random.default_rng(6701)
    triples = []
    for i, (scale, zp) in enumerate(((0.5, 3), (0.0371, 250), (2.0, 0))):
        triples += [rng.integers(0, 256, (2, i + 1, 4)).astype(np.uint8), np.array(np.float32(scale)), np.array(zp, np.uint8)]
    from qconform.case import Arg, Draft
    from qconform.oracle import evaluate

    names = ["Y_scale", "Y_zero_point"] + [f"{k}{i}" for i in range(3) for k in ("x", "s", "z")]
    vals = [np.array(np.float32(0.25)), np.array(128, np.uint8)] + triples
    args = tuple(Arg(n, dtypes.get(v.dtype).name, v) for n, v in zip(names, vals))
    case = evaluate(Draft(op.op, op.versions[-1], "kernel-test", "beyond", "case", args, {"axis": -2}, domain=op.domain))
    outcome = compare(case, prepare(cpu_kernel, build_model(case))(case.feeds), profile="strict")
    assert outcome.verdict == "pass", outcome.message(case)

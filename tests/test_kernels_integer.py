"""qconform's own kernels beyond the corpus on the quantized matmul and the integer compute ops (split
from tests/test_kernels.py): QLinearMatMul's accumulators wider than 64 bits, QuantizeLinear's int32
scale, QLinearConv, ConvInteger and MatMulInteger on geometries and operand forms the corpus does not
combine, judged against the oracle's first reading bit for bit."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from kernel_helpers import cpu_kernel, judged  # noqa: F401 (a fixture)
from qconform import dtypes
from qconform.compare import compare
from qconform.declarations.operators import OPERATORS
from qconform.model import build_model
from qconform.runner import Unsupported, prepare


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
    judged(cpu_kernel, QUANTIZE_LINEAR, dict(x=x, y_scale=s, y_zero_point=np.asarray(zp, ot.dtype)), dict(axis=0))
    big = np.array([1_000_003, -65_537], np.int32)
    judged(cpu_kernel, QUANTIZE_LINEAR, dict(x=x, y_scale=big, y_zero_point=np.asarray(zp, ot.dtype)), dict(axis=0))


# --------------------------------------------------------------------------------------------
# The integer compute ops beyond the corpus: geometries and operand forms it does not combine
# --------------------------------------------------------------------------------------------
def _decl(contraction: str, requant: bool):
    from qconform.declarations.operator import Kind

    kind = Kind.REQUANTIZE if requant else Kind.INTEGER
    return next(o for o in OPERATORS if o.contraction == contraction and o.kind is kind and o.versions == (10,))


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
    judged(cpu_kernel, qlconv, dict(x=x, x_scale=np.array(x_s), x_zero_point=x_zp, w=w, w_scale=w_s,
                                    w_zero_point=w_zp, y_scale=np.array(y_s), y_zero_point=y_zp, B=bias), attrs)
    judged(cpu_kernel, _decl("conv", requant=False), dict(x=x, w=w, x_zero_point=x_zp, w_zero_point=w_zp), attrs)
    judged(cpu_kernel, _decl("conv", requant=False), dict(x=x, w=w), attrs)  # zero points absent: 0


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
    judged(cpu_kernel, _decl("conv", requant=True), values, dict(group=2, pads=[2, 1, 0, 2], strides=[2, 1]))


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

    rng, done = np.random.default_rng(1067), 0
    while done < 60:
        values, attrs = _random_conv(rng)
        try:
            judged(cpu_kernel, _decl("conv", requant=True), values, attrs)
        except InvalidModel:
            continue
        judged(cpu_kernel, _decl("conv", requant=False),
               {k: values[k] for k in ("x", "w", "x_zero_point", "w_zero_point")}, attrs)
        done += 1


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
    judged(cpu_kernel, _decl("matmul", requant=False), values)


def test_matmul_integer_wraps_in_32_bits(cpu_kernel):
    """K = 66 200 products of 255 * 255 (uint8 255 against zero points 0): the exact sum 4 304 655 000
    is past 2^32, and y is that sum modulo 2^32 as int32 (#integer-accumulation)."""
    k = 66_200
    a = np.full((1, k), 255, np.uint8)
    b = np.full((k, 2), 255, np.uint8)
    b[:, 1] = 0
    judged(cpu_kernel, _decl("matmul", requant=False), dict(A=a, B=b, a_zero_point=np.array(0, np.uint8),
                                                            b_zero_point=np.array(0, np.uint8)))

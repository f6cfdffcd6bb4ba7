"""qconform's own kernels on QLinearSigmoid (issue 67): the double sigmoid of qk_functions.h keeps its
stated error bound against 60-digit values, every element whose float32 rounding it decides is the
oracle's correctly rounded value, an element it cannot decide makes the case Unsupported (never a
guess), and QLinearSigmoid beyond the corpus is the oracle's reading bit for bit."""
from __future__ import annotations

import decimal
from fractions import Fraction

import numpy as np
import pytest

from kernel_helpers import cpu_kernel, draft  # noqa: F401 (a fixture)
from qconform import dtypes
from qconform.compare import compare
from qconform.declarations.operators import OPERATORS
from qconform.kernels import Launch
from qconform.model import build_model
from qconform.runner import Unsupported, prepare

#: The bound qk_functions.h states for its double sigmoid, and the margin it decides roundings with.
BOUND, MARGIN = 2.0**-46, 2.0**-40
#: A float32 x whose sigmoid lies within 2^-50 of a float32 rounding boundary (found by a search over
#: the float32 values of [-8, -0.5]): the double value cannot decide it.
UNDECIDABLE = float.fromhex("-0x1.32c9ap-1")


def _exact(x: float) -> Fraction:
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        return Fraction(1 / (1 + decimal.Decimal(-x).exp()))


def _samples() -> np.ndarray:
    """float32 values over the whole range the kernel computes, (-105, 20), every binade, and the
    clamps' sides."""
    rng = np.random.default_rng(6702)
    lo, hi = np.float32(-105).view(np.uint32), np.float32(20).view(np.uint32)
    neg = rng.integers(0xB000_0000, lo, 3000, dtype=np.uint32).view(np.float32)  # -2^-31 .. -105
    pos = rng.integers(0x3000_0000, hi, 3000, dtype=np.uint32).view(np.float32)  # 2^-31 .. 20
    edges = np.float32([0.0, -0.0, 20.0, np.nextafter(np.float32(20), np.float32(0)), -105.0, -104.0, -87.0,
                        -103.9, 1e-30, -1e-30, 30.0, -200.0, UNDECIDABLE])
    return np.concatenate([neg, pos, edges]).astype(np.float32)


def test_double_sigmoid_keeps_its_error_bound(cpu_kernel):
    f = cpu_kernel.lib.qk_sigmoid_f64_export
    worst = 0.0
    for x in _samples():
        x = float(x)
        if not -105 < x < 20:
            continue
        exact = _exact(x)
        worst = max(worst, float(abs(Fraction(f(x)) - exact) / exact))
    assert worst < BOUND, worst


def test_decided_elements_are_the_correctly_rounded_value(cpu_kernel):
    from qconform.oracle.graph_sums import _round_fraction_f32

    x = _samples()
    n = x.size
    res = cpu_kernel.execute(Launch("sigmoid", dict(x=x.view(np.uint32), n=n),
                                    {"y": (np.dtype(np.uint32), n), "status": (np.dtype(np.uint8), n)}, n))
    y, status = res["y"].view(np.float32), res["status"]
    assert status[x == np.float32(UNDECIDABLE)].all()
    assert np.count_nonzero(status) <= 3, x[status != 0]
    for xi, yi, si in zip(x, y, status):
        if si == 0:
            want = np.float32(_round_fraction_f32(_exact(float(xi))))
            assert yi.view(np.uint32) == want.view(np.uint32), (float(xi), float(yi), float(want))


def _sigmoid():
    return next(o for o in OPERATORS if o.section == "ms-qlinear-composed" and not o.arithmetic_attrs)


@pytest.mark.parametrize("scales", [(0.125, 2.0**-8), (0.0371, 1 / 255), (0.5, 2.0**-20), (1.7, 0.004)], ids=str)
@pytest.mark.parametrize("t", ["int8", "uint8"])
def test_qlinear_sigmoid_every_code(cpu_kernel, t, scales):
    from qconform.oracle import evaluate

    et = dtypes.get(t)
    lo = int(et.qrange[0])
    values = dict(X=np.arange(lo, int(et.qrange[1]) + 1).astype(et.dtype), X_scale=np.array(np.float32(scales[0])),
                  X_zero_point=np.array(lo + 128, et.dtype), Y_scale=np.array(np.float32(scales[1])),
                  Y_zero_point=np.array(lo, et.dtype))
    case = evaluate(draft(_sigmoid(), values))
    outcome = compare(case, prepare(cpu_kernel, build_model(case))(case.feeds), profile="strict")
    assert outcome.verdict == "pass", outcome.message(case)


def test_an_undecided_element_makes_the_case_unsupported(cpu_kernel):
    from qconform.oracle import evaluate

    values = dict(X=np.array([1, 0, -3], np.int8), X_scale=np.array(np.float32(UNDECIDABLE)),
                  X_zero_point=np.array(0, np.int8), Y_scale=np.array(np.float32(2.0**-24)),
                  Y_zero_point=np.array(-128, np.int8))
    case = evaluate(draft(_sigmoid(), values))
    with pytest.raises(Unsupported, match="1 element.*do not guess"):
        prepare(cpu_kernel, build_model(case))(case.feeds)


def _softmax():
    return next(o for o in OPERATORS if o.section == "ms-qlinear-composed" and "opset" in o.arithmetic_attrs)


@pytest.mark.parametrize("shape, attrs", [
    ((2, 5, 3), dict(opset=13, axis=1)),
    ((2, 5, 3), dict(opset=13, axis=-1)),
    ((3, 4, 2), dict(opset=11, axis=1)),  # coerced to 3 × 8
    ((2, 3, 2, 2), dict(opset=12, axis=2)),  # coerced to 6 × 4
    ((1, 300), dict(opset=13, axis=-1)),  # a long row: the sum's error grows with it
], ids=str)
@pytest.mark.parametrize("t", ["int8", "uint8"])
def test_qlinear_softmax_rows_beyond_the_corpus(cpu_kernel, t, shape, attrs):
    from qconform.case import Arg, Draft
    from qconform.oracle import evaluate

    op, et = _softmax(), dtypes.get(t)
    lo, hi = int(et.qrange[0]), int(et.qrange[1])
    rng = np.random.default_rng(6703 + len(shape) + attrs["opset"])
    values = dict(X=rng.integers(lo, hi + 1, shape).astype(et.dtype), X_scale=np.array(np.float32(0.0371)),
                  x_zero_point=np.array(lo + 128, et.dtype), y_scale=np.array(np.float32(1 / 256)),
                  y_zero_point=np.array(lo, et.dtype))
    args = tuple(Arg(i.name, dtypes.get(values[i.name].dtype).name, values[i.name]) for i in op.inputs)
    case = evaluate(Draft(op.op, op.versions[-1], "kernel-test", "beyond", "case", args, attrs, domain=op.domain))
    outcome = compare(case, prepare(cpu_kernel, build_model(case))(case.feeds), profile="strict")
    assert outcome.verdict == "pass", outcome.message(case)


def test_softmax_row_limit_matches_the_source():
    import re

    from qconform.kernels import source
    from qconform.kernels.composed import MAX_ROW

    assert re.findall(r"#define QK_SOFTMAX_MAX_ROW (\d+)", source()) == [str(MAX_ROW)]


def test_softmax_decided_elements_are_the_correctly_rounded_value(cpu_kernel):
    """Rows of float32 values of every size the rows meet (tiny beside large: t = x - top inexact in
    double), each decided element the exact value rounded once."""
    from qconform.oracle.graph_sums import _round_fraction_f32

    rng = np.random.default_rng(6704)
    d = 7
    rows = np.concatenate([rng.normal(0, s, (40, d)) for s in (0.01, 1.0, 10.0, 60.0)]).astype(np.float32)
    rows[::5, 0] = np.float32(1e-30)
    n = rows.size
    res = cpu_kernel.execute(Launch("softmax", dict(x=rows.reshape(-1).view(np.uint32), d=d, n=n),
                                    {"y": (np.dtype(np.uint32), n), "status": (np.dtype(np.uint8), n)}, n))
    y, status = res["y"].view(np.float32).reshape(rows.shape), res["status"].reshape(rows.shape)
    assert np.count_nonzero(status) <= 2
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        for row, yr, sr in zip(rows, y, status):
            top = Fraction(float(row.max()))
            ts = [Fraction(float(v)) - top for v in row]
            es = [Fraction((decimal.Decimal(t.numerator) / decimal.Decimal(t.denominator)).exp()) for t in ts]
            total = sum(es)
            for e, yi, si in zip(es, yr, sr):
                if si == 0:
                    want = np.float32(_round_fraction_f32(e / total))
                    assert yi.view(np.uint32) == want.view(np.uint32), (row, float(yi), float(want))

"""The quantized compute ops: QLinearMatMul-10/-21 (semantics.md §7), QLinearConv-10, ConvInteger-10
and MatMulInteger-10, each reading computed from its name.

QLinearMatMul / QLinearConv: acc exact (linalg), then per reading
  accumulation  accumulator-int32-wrap (the exact sum reduced mod 2^32 into int32) | accumulator-exact
                (integer operands only; float8 operands: one exact accumulation, not named)
  requant       multiplier-float32                  m = fl32(fl32(a_s·b_s)/y_s), v = fl32(fl32(acc)·m)
                multiplier-float64                  the same chain in float64
                exact-rational                      v = acc·a_s·b_s/y_s exactly (a zero is +0)
                multiplier-float32-product-float64  m as multiplier-float32, v = fl64(acc·m)
                multiplier-in-scale-type            (float16/bfloat16 scales, 21) m = fl_TS(fl_TS(a_s·b_s)/y_s),
                                                    v = fl_TS(acc·m)
  integer y     saturate(RNE(v) + y_zp)     (v NaN: undefined; ±Inf: saturates)
  float8 y      QuantizeLinear-21's table, saturate=1, of v + y_zp, the sum in the reading's precision
                (exact for exact-rational); zero-point-added | zero-point-skipped (y_zp +0 not added)
A reading whose chain overflows to ±Inf where the exact value is finite is not offered (§7.2).
An element whose dot product touches a NaN or ±Inf operand is don't-care (§7.3).
ConvInteger / MatMulInteger: y int32 = the exact sum mod 2^32, one reading `spec`.
"""
from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np

from .check import Computed, Model
from .linalg import MatMulShape, conv_acc, exact_ints, matmul_acc
from .values import (BF16, F16, F32, F64, FIN, FLOAT8, INF, INTS, UNDEF, cast_small_float, clamp_int, decode, fin,
                     hexcode, raw_bits, signed, v_add, v_div, v_mul)

REQUANTS = ("multiplier-float32", "multiplier-float64", "exact-rational", "multiplier-float32-product-float64",
            "multiplier-in-scale-type")
ACCS = ("accumulator-int32-wrap", "accumulator-exact")
ZPS = ("zero-point-added", "zero-point-skipped")
HALF = {"float16": F16, "bfloat16": BF16}


def wrap32(s: int) -> int:
    """The exact sum reduced modulo 2^32 into int32, two's complement."""
    return (s + (1 << 31)) % (1 << 32) - (1 << 31)


def values_of(arg) -> tuple[str, np.ndarray, list]:
    bits = raw_bits(arg.value).ravel()
    return arg.type, bits, [decode(arg.type, int(b)) for b in bits]


def requantise(rq: str, acc: Fraction, sa, sb, ys, ts_fmt):
    """(v, the precision its sum with y_zp is formed in (None: exact), intermediates to watch for overflow)."""
    if rq == "exact-rational":
        if all(s[0] == FIN for s in (sa, sb, ys)) and ys[2] != 0:
            return fin(acc * signed(sa) * signed(sb) / signed(ys)), None, ()
        return v_div(v_mul(v_mul(fin(acc), sa), sb), ys), None, ()
    if rq in ("multiplier-float32", "multiplier-float32-product-float64"):
        p = F32
    elif rq == "multiplier-float64":
        p = F64
    elif rq == "multiplier-in-scale-type" and ts_fmt is not None:
        p = ts_fmt
    else:
        raise KeyError(rq)
    prod = p.fl(v_mul(p.fl(sa), p.fl(sb)))
    m = p.fl(v_div(prod, p.fl(ys)))
    if rq == "multiplier-float32":
        v, q = F32.fl(v_mul(F32.fl(fin(acc)), m)), F32
    elif rq == "multiplier-float64":
        v, q = F64.fl(v_mul(F64.fl(fin(acc)), m)), F64
    elif rq == "multiplier-float32-product-float64":
        v, q = F64.fl(v_mul(fin(acc), m)), F64
    else:
        v, q = p.fl(v_mul(fin(acc), m)), p
    return v, q, (prod, m, v)


def requant_model(case, out_t: str, shape: tuple, accs: list, int_acc: bool, touched, sa_vals, ia, sb_vals, ib,
                  ys_val, yzp_val, ts_fmt, texts) -> Model:
    """The Model of a requantising op: accs exact per flat output element, ia / ib each element's
    index into the two input scales, touched: elements whose dot product touches NaN/±Inf."""
    requants = list(REQUANTS[:4]) + (["multiplier-in-scale-type"] if ts_fmt is not None else [])
    acc_list = list(ACCS) if int_acc else [""]
    zp_list = list(ZPS) if out_t in FLOAT8 else [""]
    keys = list(itertools.product(requants, acc_list, zp_list))
    acc_of = {"": accs, "accumulator-exact": accs}
    if int_acc:
        acc_of["accumulator-int32-wrap"] = [Fraction(wrap32(int(a))) for a in accs]
    zp_int = int(signed(yzp_val)) if out_t in INTS else None
    zp_plus0 = yzp_val[0] == FIN and yzp_val[2] == 0 and not yzp_val[1]
    vs: dict[tuple, list] = {}

    def values(rq: str, acc: str):
        """Per element (v, sum precision, overflowed?) under one requant and accumulation reading."""
        if (rq, acc) not in vs:
            out = []
            for i, a in enumerate(acc_of[acc]):
                sa, sb = sa_vals[ia[i]], sb_vals[ib[i]]
                v, q, mids = requantise(rq, a, sa, sb, ys_val, ts_fmt)
                exact = requantise("exact-rational", a, sa, sb, ys_val, ts_fmt)[0]
                over = exact[0] == FIN and any(x[0] == INF for x in mids)
                if out_t in FLOAT8 and exact[0] == FIN and not over:
                    s = v_add(v, yzp_val)
                    over = v_add(exact, yzp_val)[0] == FIN and (q.fl(s) if q else s)[0] == INF
                out.append((v, q, over and not touched[i]))
            vs[(rq, acc)] = out
        return vs[(rq, acc)]

    def compute(key) -> Computed:
        rq, acc, zpc = key
        if rq not in requants or acc not in acc_list or zpc not in zp_list:
            raise KeyError(key)
        codes = []
        for i, (v, q, _) in enumerate(values(rq, acc)):
            if touched[i]:
                codes.append(UNDEF)
            elif zp_int is not None:
                codes.append(clamp_int(out_t, v, zp_int))
            else:
                s = v if zpc == "zero-point-skipped" and zp_plus0 else v_add(v, yzp_val)
                codes.append(cast_small_float(out_t, q.fl(s) if q else s, 21, 1))
        return Computed(codes)

    alternatives, not_offered = [], {}
    for key in keys:
        over = [i for i, (_, _, o) in enumerate(values(key[0], key[1])) if o]
        if over:
            not_offered[key] = f"its chain overflows to ±Inf where the exact value is finite, element {over[0]}"
        else:
            alternatives.append(key)
    if not alternatives:
        alternatives = keys[:1]

    def parse(name: str) -> tuple:
        key = [requants[0], acc_list[0], zp_list[0]]
        if name != "spec":
            for part in name.split("+"):
                slot = 0 if part in REQUANTS else 1 if part in ACCS else 2 if part in ZPS else None
                if slot is None:
                    raise KeyError(part)
                key[slot] = part
        return tuple(key)

    return Model(out_t, shape, alternatives, parse, compute, ("exact-rational", acc_list[0], zp_list[0]),
                 "exact-rational", texts, not_offered)


def _arg(inputs, i):
    return inputs[i] if i < len(inputs) else None


def _hex(t, bits, i):
    return hexcode(t, int(bits[i]))


def qlinear_matmul_model(case) -> Model:
    """QLinearMatMul-10 / -21 (semantics.md §7)."""
    ins = list(case.inputs)
    a, as_, azp, b, bs, bzp, ys, yzp = (_arg(ins, i) for i in range(8))
    out_t = yzp.type if yzp is not None else a.type  # §7: absent y_zero_point: y takes a's type
    ta, _, av = values_of(a)
    tb, _, bv = values_of(b)
    azv = values_of(azp)[2] if azp is not None else [fin(Fraction(0))]
    bzv = values_of(bzp)[2] if bzp is not None else [fin(Fraction(0))]
    tsa, sab, sav = values_of(as_)
    tsb, sbb, sbv = values_of(bs)
    tys, ysb, ysv = values_of(ys)
    yzv = values_of(yzp)[2] if yzp is not None else [fin(Fraction(0))]
    if len(ysv) != 1 or len(yzv) != 1:
        raise ValueError("y_scale / y_zero_point are per-tensor only (§7.4)")
    shape = MatMulShape(a.value.shape, b.value.shape)
    accs, touched = matmul_acc(shape, av, azv, azp.value.shape if azp is not None else (),
                               bv, bzv, bzp.value.shape if bzp is not None else ())
    ia = shape.index_of(as_.value.shape, "a")
    ib = shape.index_of(bs.value.shape, "b")
    ts_fmt = HALF.get(tsa) if case.opset >= 21 else None
    yshape = shape.y

    def texts(i):
        at = np.unravel_index(i, yshape) if yshape else ()
        return (f"y{list(int(x) for x in at)} acc={accs[i]} a_s={_hex(tsa, sab, ia[i])} b_s={_hex(tsb, sbb, ib[i])} "
                f"y_s={_hex(tys, ysb, 0)}({tys}) y_zp={'absent' if yzp is None else _hex(out_t, values_of(yzp)[1], 0)}")

    return requant_model(case, out_t, yshape, accs, ta in INTS and tb in INTS, touched, sav, ia, sbv, ib,
                         ysv[0], yzv[0], ts_fmt, texts)


def _ints(arg) -> np.ndarray:
    """An integer tensor's values as an object array of Python integers."""
    ints, e, bad = exact_ints(values_of(arg)[2], arg.value.shape)
    assert e == 0 and not bad.any()
    return ints


def _conv_diffs(x, xzp, w, wzp):
    """x − x_zp and w − w_zp[m] (zero points per tensor; w's also one per output channel)."""
    dx = _ints(x) - (_ints(xzp).reshape(()) if xzp is not None else 0)
    dw = _ints(w)
    if wzp is not None:
        z = _ints(wzp).ravel()
        dw = dw - (z.reshape((-1,) + (1,) * (dw.ndim - 1)) if z.size > 1 else z.reshape(()))
    return dx, dw


def qlinear_conv_model(case) -> Model:
    """QLinearConv-10: acc = Σ (x − x_zp)(w − w_zp[m]) over the group's channels and the window
    (padding holds x's zero point, so contributes 0), + B[m]; then QLinearMatMul's readings."""
    ins = list(case.inputs)
    x, xs, xzp, w, ws, wzp, ys, yzp, bias = (_arg(ins, i) for i in range(9))
    out_t = yzp.type
    dx, dw = _conv_diffs(x, xzp, w, wzp)
    acc = conv_acc(dx, dw, case.attrs)
    if bias is not None:
        acc = acc + _ints(bias).reshape((1, -1) + (1,) * (acc.ndim - 2))
    mch = np.indices(acc.shape)[1].ravel()
    accs = [Fraction(int(s)) for s in acc.ravel()]
    txs, xsb, xsv = values_of(xs)
    tws, wsb, wsv = values_of(ws)
    tys, ysb, ysv = values_of(ys)
    yzv = values_of(yzp)[2]
    ia = np.zeros(len(accs), dtype=np.int64)
    ib = mch if len(wsv) > 1 else np.zeros(len(accs), dtype=np.int64)
    touched = np.zeros(len(accs), dtype=bool)

    def texts(i):
        at = [int(v) for v in np.unravel_index(i, acc.shape)]
        return (f"y{at} acc+B={accs[i]} x_s={_hex(txs, xsb, 0)} w_s={_hex(tws, wsb, ib[i])} "
                f"y_s={_hex(tys, ysb, 0)} y_zp={_hex(out_t, values_of(yzp)[1], 0)}")

    return requant_model(case, out_t, acc.shape, accs, True, touched, xsv, ia, wsv, ib, ysv[0], yzv[0], None, texts)


def _integer_model(accs: list, shape: tuple, texts) -> Model:
    codes = [wrap32(int(a)) & 0xFFFFFFFF for a in accs]

    def compute(key):
        if key != ("spec",):
            raise KeyError(key)
        return Computed(codes)

    def parse(name):
        if name != "spec":
            raise KeyError(name)
        return ("spec",)

    return Model("int32", shape, [("spec",)], parse, compute, ("spec",), "spec", texts)


def conv_integer_model(case) -> Model:
    """ConvInteger-10: y int32 = Σ (x − x_zp)(w − w_zp[m]) mod 2^32; zero points default 0."""
    ins = list(case.inputs)
    x, w, xzp, wzp = (_arg(ins, i) for i in range(4))
    dx, dw = _conv_diffs(x, xzp, w, wzp)
    acc = conv_acc(dx, dw, case.attrs)
    accs = [int(s) for s in acc.ravel()]
    return _integer_model(accs, acc.shape, lambda i: f"y{[int(v) for v in np.unravel_index(i, acc.shape)]} "
                                                     f"exact sum={accs[i]}")


def matmul_integer_model(case) -> Model:
    """MatMulInteger-10: numpy.matmul of (A − a_zp)(B − b_zp), y int32 = the exact sum mod 2^32."""
    ins = list(case.inputs)
    a, b, azp, bzp = (_arg(ins, i) for i in range(4))
    shape = MatMulShape(a.value.shape, b.value.shape)
    zero = [fin(Fraction(0))]
    accs, _ = matmul_acc(shape, values_of(a)[2], values_of(azp)[2] if azp is not None else zero,
                         azp.value.shape if azp is not None else (), values_of(b)[2],
                         values_of(bzp)[2] if bzp is not None else zero, bzp.value.shape if bzp is not None else ())
    yshape = shape.y
    return _integer_model(accs, yshape, lambda i: f"y{[int(v) for v in np.unravel_index(i, yshape)] if yshape else []} "
                                                  f"exact sum={accs[i]}")


MODELS = {"QLinearMatMul": qlinear_matmul_model, "QLinearConv": qlinear_conv_model,
          "ConvInteger": conv_integer_model, "MatMulInteger": matmul_integer_model}

"""onnxruntime's QOperator-format com.microsoft ops (semantics.md §9.4), each reading from its name and
the operator texts onnxruntime registers:

QLinearAdd   C = (A_s·(A − A_zp) + B_s·(B − B_zp)) / C_s + C_zp, numpy broadcasting
             exact-rational   v exactly                       (first)
             formula-float32  fl32(fl32(fl32(A_s·a) + fl32(B_s·b)) / C_s)
             then clamp(RNE(v) + C_zp)
QLinearMul   C = ((A − A_zp)·(B − B_zp))·(A_s·B_s)/C_s + C_zp: the quantized matmul's requantisation
             readings (compute.requant_model) on the exact product
QGemm        acc = Σ (A' − a_zp)(B' − b_zp[n]) + C; the same readings with alpha·a_s for a_s; float32 Y
             without y_scale: each reading's chain with y_s = 1, rounded once to float32 at its end
quantize(f(dequantize(x)))  QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QLinearAveragePool,
             QLinearGlobalAveragePool, QLinearConcat: d = fl32((x − x_zp)·x_s) (DequantizeLinear-21),
             f's exact value rounded once to float32 (sigmoid, alpha·d, softmax along axis or over the
             N × D coercion at opset ≤ 12, window sums over their counts, concatenation), then
             QuantizeLinear-21: `spec` q = fl32(f / y_s), `quotient-exact` q = f / y_s exactly;
             clamp(RNE(q) + y_zp).
The pools' windows come from the text's output-shape formulas (floor, ceil_mode, pads, auto_pad);
the count is the window's input elements, plus its stated padding under count_include_pad.
"""
from __future__ import annotations

import decimal
import itertools
from fractions import Fraction

import numpy as np

from .check import Computed, Model
from .compute import requant_model, requantise
from .values import F32, clamp_int, decode, fin, raw_bits, signed, v_add, v_div, v_mul

ZERO_V = fin(Fraction(0))


def _vals(arg) -> np.ndarray:
    """An input's values as an object array of value tuples, in its shape."""
    bits = raw_bits(arg.value)
    flat = [decode(arg.type, int(b)) for b in bits.ravel()]
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(bits.shape)


def _scalar(arg, default=ZERO_V):
    return default if arg is None else _vals(arg).ravel()[0]


def _ints(arr: np.ndarray) -> np.ndarray:
    return np.vectorize(lambda v: int(signed(v)), otypes=[object])(arr)


def _arg(inputs, i):
    return inputs[i] if i < len(inputs) else None


def _texts(parts: dict):
    def text(i: int) -> str:
        return ", ".join(f"{k}={v[i] if isinstance(v, list) else v}" for k, v in parts.items())
    return text


# -- QLinearAdd ----------------------------------------------------------------------------------------
def add_model(case) -> Model:
    ins = list(case.inputs)
    a, a_s, a_zp, b, b_s, b_zp, c_s, c_zp = (_arg(ins, i) for i in range(8))
    t = a.type
    da = _ints(_vals(a)) - int(signed(_scalar(a_zp)))
    db = _ints(_vals(b)) - int(signed(_scalar(b_zp)))
    da, db = np.broadcast_arrays(da, db)
    shape = da.shape
    da, db = list(da.ravel()), list(db.ravel())
    sa, sb, sc = _scalar(a_s), _scalar(b_s), _scalar(c_s)
    zc = int(signed(_scalar(c_zp)))

    def compute(key) -> Computed:
        out = []
        for x, y in zip(da, db):
            if key == ("exact-rational",):
                v = fin((signed(sa) * x + signed(sb) * y) / signed(sc))
            elif key == ("formula-float32",):
                v = F32.fl(v_div(F32.fl(v_add(F32.fl(v_mul(sa, fin(Fraction(x)))), F32.fl(v_mul(sb, fin(Fraction(y)))))),
                                 sc))
            else:
                raise KeyError(key)
            out.append(clamp_int(t, v, zc))
        return Computed(out)

    keys = [("exact-rational",), ("formula-float32",)]
    return Model(t, shape, keys, lambda n: keys[0] if n == "spec" else (n,), compute, keys[0], "exact-rational",
                 _texts({"A-A_zp": da, "B-B_zp": db}))


# -- QLinearMul, QGemm ---------------------------------------------------------------------------------
def mul_model(case) -> Model:
    ins = list(case.inputs)
    a, a_s, a_zp, b, b_s, b_zp, c_s, c_zp = (_arg(ins, i) for i in range(8))
    da = _ints(_vals(a)) - int(signed(_scalar(a_zp)))
    db = _ints(_vals(b)) - int(signed(_scalar(b_zp)))
    da, db = np.broadcast_arrays(da, db)
    accs = [Fraction(int(x) * int(y)) for x, y in zip(da.ravel(), db.ravel())]
    n = len(accs)
    zp = _scalar(c_zp)
    return requant_model(case, a.type, da.shape, accs, False, [False] * n, [_scalar(a_s)], [0] * n,
                         [_scalar(b_s)], [0] * n, _scalar(c_s), zp, None, _texts({"product": accs}))


def gemm_model(case) -> Model:
    ins = list(case.inputs)
    a, a_s, a_zp, b, b_s, b_zp, c, y_s, y_zp = (_arg(ins, i) for i in range(9))
    attrs = case.attrs
    av = _ints(_vals(a)) - int(signed(_scalar(a_zp)))
    bv = _ints(_vals(b))
    if attrs.get("transA", 0):
        av = av.T
    if attrs.get("transB", 0):
        bv = bv.T
    bz = [int(signed(v)) for v in _vals(b_zp).ravel()]
    bv = bv - np.asarray(bz if len(bz) > 1 else bz[0], dtype=object)
    m, n = av.shape[0], bv.shape[1]
    acc = np.zeros((m, n), dtype=object)
    for i in range(m):
        for j in range(n):
            acc[i, j] = sum(int(av[i, k]) * int(bv[k, j]) for k in range(av.shape[1]))
    if c is not None:
        acc = acc + np.broadcast_to(_ints(_vals(c)), (m, n))
    accs = [Fraction(int(x)) for x in acc.ravel()]
    alpha = Fraction(float(np.float32(attrs.get("alpha", 1.0))))
    sa = fin(alpha * signed(_scalar(a_s)))
    sbs = list(_vals(b_s).ravel())
    ib = [j % n if len(sbs) > 1 else 0 for j in range(m * n)]
    texts = _texts({"acc": accs})
    if y_s is not None:
        return requant_model(case, y_zp.type, (m, n), accs, False, [False] * (m * n), [sa], [0] * (m * n), sbs, ib,
                             _scalar(y_s), _scalar(y_zp), None, texts)
    one = fin(Fraction(1))
    rqs = ("multiplier-float32", "multiplier-float64", "exact-rational", "multiplier-float32-product-float64")

    def compute(key) -> Computed:
        if key[0] not in rqs:
            raise KeyError(key)
        out = []
        for i, x in enumerate(accs):
            v = requantise(key[0], x, sa, sbs[ib[i]], one, None)[0]
            out.append(F32.bits(F32.fl(v)))
        return Computed(out)

    keys = [(r,) for r in rqs]
    return Model("float32", (m, n), keys, lambda nm: keys[0] if nm == "spec" else (nm,), compute, ("exact-rational",),
                 "exact-rational", texts)


# -- the composed ops -----------------------------------------------------------------------------------
def _exp(x: Fraction) -> Fraction:
    with decimal.localcontext() as ctx:
        ctx.prec = 80
        return Fraction((decimal.Decimal(x.numerator) / decimal.Decimal(x.denominator)).exp())


def _r32(x: Fraction):
    return F32.fl(fin(x))


def _dequantize(x, s, zp) -> np.ndarray:
    """DequantizeLinear-21 into float32: fl32((x − zp)·s)."""
    sv, z = _scalar(s), int(signed(_scalar(zp)))
    return np.vectorize(lambda v: F32.fl(v_mul(fin(signed(v) - z), sv)), otypes=[object])(_vals(x))


def _sigmoid(d):
    return _r32(1 / (1 + _exp(-signed(d))))


def _leaky(alpha: Fraction):
    def f(d):
        return F32.fl(v_mul(fin(alpha), d)) if signed(d) < 0 else d
    return f


def _softmax(d: np.ndarray, attrs) -> np.ndarray:
    axis = int(attrs.get("axis", -1)) % d.ndim
    if int(attrs["opset"]) < 13:
        rows = d.reshape(int(np.prod(d.shape[:axis], dtype=np.int64)), -1)
        moved = None
    else:
        moved = np.moveaxis(d, axis, -1)
        rows = moved.reshape(-1, d.shape[axis])
    out = np.empty(rows.shape, dtype=object)
    for r, row in enumerate(rows):
        top = max(signed(v) for v in row)
        e = [_exp(signed(v) - top) for v in row]
        total = sum(e)
        for k, ek in enumerate(e):
            out[r, k] = _r32(ek / total)
    if moved is None:
        return out.reshape(d.shape)
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


def _windows(spatial, attrs):
    """Per spatial axis: (kernel, stride, pad_begin, pad_end, output size), the text's formulas."""
    nd = len(spatial)
    k = list(attrs["kernel_shape"])
    s = list(attrs.get("strides") or [1] * nd)
    auto = attrs.get("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    out = []
    for i, dim in enumerate(spatial):
        if auto == "VALID":
            o = -(-(dim - k[i] + 1) // s[i])
            out.append((k[i], s[i], 0, 0, o))
        elif auto in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-dim // s[i])
            pad = max(0, (o - 1) * s[i] + k[i] - dim)
            pb = pad // 2 if auto == "SAME_UPPER" else pad - pad // 2
            out.append((k[i], s[i], pb, pad - pb, o))
        else:
            pads = list(attrs.get("pads") or [0] * 2 * nd)
            span = dim + pads[i] + pads[i + nd] - k[i]
            o = (-(-span // s[i]) if attrs.get("ceil_mode", 0) else span // s[i]) + 1
            out.append((k[i], s[i], pads[i], pads[i + nd], o))
    return out


def _average_pool(d: np.ndarray, attrs) -> np.ndarray:
    last = attrs.get("channels_last", 0)
    x = np.moveaxis(d, -1, 1) if last else d
    spatial = x.shape[2:]
    geo = _windows(spatial, attrs)
    include = attrs.get("count_include_pad", 0)
    y = np.empty(x.shape[:2] + tuple(g[4] for g in geo), dtype=object)
    for idx in itertools.product(*(range(v) for v in y.shape)):
        ranges, count = [], 1
        for (k, s, pb, pe, _), o, dim in zip(geo, idx[2:], spatial):
            lo = o * s - pb
            inside = range(max(lo, 0), min(lo + k, dim))
            ranges.append(inside)
            count *= (min(lo + k, dim + pe) - lo) if include else len(inside)
        total = sum((signed(x[idx[:2] + p]) for p in itertools.product(*ranges)), Fraction(0))
        y[idx] = _r32(total / count)
    return np.moveaxis(y, 1, -1) if last else y


def _global_average_pool(d: np.ndarray, attrs) -> np.ndarray:
    last = attrs.get("channels_last", 0)
    x = np.moveaxis(d, -1, 1) if last else d
    y = np.empty(x.shape[:2] + (1,) * (x.ndim - 2), dtype=object)
    for n, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        vals = [signed(v) for v in x[n, c].ravel()]
        y[(n, c) + (0,) * (x.ndim - 2)] = _r32(sum(vals, Fraction(0)) / len(vals))
    return np.moveaxis(y, 1, -1) if last else y


def _quantize_model(out_t: str, f: np.ndarray, ys, yz, texts) -> Model:
    """QuantizeLinear-21 of the float32 values f: `spec` (the float32 quotient) or `quotient-exact`."""
    flat, zp = list(f.ravel()), int(signed(yz))

    def compute(key) -> Computed:
        if key == ("",):
            return Computed([clamp_int(out_t, F32.fl(v_div(v, ys)), zp) for v in flat])
        if key == ("quotient-exact",):
            return Computed([clamp_int(out_t, v_div(v, ys), zp) for v in flat])
        raise KeyError(key)

    keys = [("",), ("quotient-exact",)]
    return Model(out_t, f.shape, keys, lambda n: ("",) if n == "spec" else (n,), compute, ("quotient-exact",),
                 "quotient-exact", texts)


def composed_model(case) -> Model:
    ins = list(case.inputs)
    op, attrs = case.op, dict(case.attrs)
    if op == "QLinearConcat":
        ys, yz, *rest = ins
        parts = [_dequantize(rest[i], rest[i + 1], rest[i + 2]) for i in range(0, len(rest), 3)]
        f = np.concatenate(parts, axis=attrs["axis"])
        return _quantize_model(yz.type, f, _scalar(ys), _scalar(yz), _texts({}))
    x, xs, xz, ys, yz = (_arg(ins, i) for i in range(5))
    d = _dequantize(x, xs, xz)
    if op == "QLinearSigmoid":
        f = np.vectorize(_sigmoid, otypes=[object])(d)
    elif op == "QLinearLeakyRelu":
        f = np.vectorize(_leaky(Fraction(float(np.float32(attrs.get("alpha", 0.01))))), otypes=[object])(d)
    elif op == "QLinearSoftmax":
        f = _softmax(d, attrs)
    elif op == "QLinearAveragePool":
        f = _average_pool(d, attrs)
    elif op == "QLinearGlobalAveragePool":
        f = _global_average_pool(d, attrs)
    else:
        raise KeyError(op)
    texts = _texts({"dequantized": [str(signed(v)) for v in d.ravel()]} if d.shape == f.shape else {})
    return _quantize_model(x.type, f, _scalar(ys), _scalar(yz), texts)


MODELS = {"QLinearAdd": add_model, "QLinearMul": mul_model, "QGemm": gemm_model,
          **{op: composed_model for op in ("QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax",
                                           "QLinearAveragePool", "QLinearGlobalAveragePool", "QLinearConcat")}}


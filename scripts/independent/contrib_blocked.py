"""onnxruntime's weight-only and dynamic com.microsoft ops (semantics.md §9.5-9.7), from their doc text.

MatMulNBits-1      Y = Σ_k A·(q − zp)·scale + bias: q and packed zero points read as one bit stream
                   per row, low-order bits first ("the first 4 bits are stored in the lower 4 bits of
                   a byte"), the default zero point 2^(bits−1). `spec` is the sum in A's type from
                   the first term on (each partial sum rounded); `reverse` (the last term first) and,
                   at accuracy_level 1-4, A downcast or quantized to int8 per block (amax/127, ties
                   to even) are further permitted results the golden readings must contain.
GatherBlockQuantized-1  Gather, then (q − zp)·scale rounded to the output type per reading
                   (multiply-in-output-type | multiply-in-float32-then-round | multiply-exact-then-round),
                   out-of-range indices zeros (+0, or −0 under negative-zero-fill).
MatMulIntegerToFloat-1, DynamicQuantizeMatMul-1  acc exact, then acc·a_s·b_s (+ bias) per association
                   (scales-multiplied-first | scales-applied-in-turn | scaled-exactly), the bias in its
                   own rounding or fused (-fused-bias), float16 Y stepwise in float16 or in float32
                   (steps-in-float32); DynamicQuantizeMatMul's A through DynamicQuantizeLinear-11
                   (its y quotient in float32, or exact: quotient-exact).
"""
from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np

from .check import Computed, Model
from .values import F16, F32, BF16, FIN, FLOATS, UNDEF, decode, fin, raw_bits, rne_int, signed, v_add, v_mul

PREC = {"float32": F32, "float16": F16, "bfloat16": BF16}
ASSOC = ("scales-multiplied-first", "scales-applied-in-turn", "scaled-exactly")
GBQ_PRODUCTS = ("multiply-in-output-type", "multiply-in-float32-then-round", "multiply-exact-then-round")


def _arg(inputs, i):
    return inputs[i] if i < len(inputs) else None


def _vals(arg) -> list:
    return [decode(arg.type, int(b)) for b in raw_bits(arg.value).ravel()]


def _stream(row_bytes, bits: int, count: int) -> list[int]:
    """``count`` codes of ``bits`` bits from bytes, the first code in the low bits of the first byte."""
    acc = 0
    for i, b in enumerate(row_bytes):
        acc |= int(b) << (8 * i)
    return [(acc >> (bits * j)) & ((1 << bits) - 1) for j in range(count)]


def _code(fmt, v) -> int:
    return fmt.bits(v)


def _single(out_t, shape, keys, parse, compute, texts) -> Model:
    return Model(out_t, shape, keys, parse, compute, keys[0], keys[0][0], texts)


# -- MatMulNBits -----------------------------------------------------------------------------------
def matmul_nbits_model(case) -> Model:
    ins = list(case.inputs)
    a, b, scales, zps, _, bias = (_arg(ins, i) for i in range(6))
    k, n = int(case.attrs["K"]), int(case.attrs["N"])
    bits, bs = int(case.attrs.get("bits", 4)), int(case.attrs["block_size"])
    level = int(case.attrs.get("accuracy_level", 0))
    t1 = a.type
    p = PREC[t1]
    kb = -(-k // bs)
    braw = raw_bits(b.value).reshape(n, -1)
    q = [_stream(braw[i], bits, kb * bs)[:k] for i in range(n)]
    s = _vals(scales)
    if zps is None:
        z = [[Fraction(1 << (bits - 1))] * kb for _ in range(n)]
    elif zps.type == "uint8":
        zraw = raw_bits(zps.value).reshape(n, -1)
        z = [[Fraction(c) for c in _stream(zraw[i], bits, kb)] for i in range(n)]
    else:
        zv = [signed(v) for v in _vals(zps)]
        z = [zv[i * kb:(i + 1) * kb] for i in range(n)]
    # (q − zp) · scale: exact, a zero keeping IEEE's sign of the product
    w = [[v_mul(fin(q[i][j] - z[i][j // bs]), s[i * kb + j // bs]) for j in range(k)] for i in range(n)]
    av = _vals(a)
    rows = len(av) // k
    bv = [signed(v) for v in _vals(bias)] if bias is not None else None
    shape = tuple(a.value.shape[:-1]) + (n,)

    def a_as(key: str) -> list:
        """A as the key's computation sees it (exact Fractions; zeros keep their sign beside)."""
        if key == "a-downcast":
            fmt = {1: F32, 2: F16, 3: BF16}[level]
            return [fmt.fl(v) for v in av]
        if key == "a-int8":
            out = list(av)
            for r in range(rows):
                for blk in range(kb):
                    idx = range(r * k + blk * bs, r * k + min(k, (blk + 1) * bs))
                    amax = max(abs(signed(av[i])) for i in idx)
                    if amax == 0:
                        continue
                    step = amax / 127
                    for i in idx:
                        out[i] = fin(rne_int(signed(av[i]) / step) * step, av[i][1])
            return out
        return av

    def compute(key) -> Computed:
        (name,) = key
        src = a_as(name)
        codes = []
        for r in range(rows):
            for i in range(n):
                terms = [v_mul(src[r * k + j], w[i][j]) for j in range(k)]
                if bv is not None:
                    terms.append(fin(bv[i]))
                if name == "reverse":
                    terms = terms[::-1]
                total = terms[0]
                for t in terms[1:]:
                    total = p.fl(v_add(total, t))
                codes.append(_code(p, p.fl(total)))
        return Computed(codes)

    keys = [("spec",), ("reverse",)]
    if level in (1, 2, 3):
        keys.append(("a-downcast",))
    if level == 4:
        keys.append(("a-int8",))

    def parse(name):
        if name != "spec":
            raise KeyError(name)
        return ("spec",)

    return _single(t1, shape, keys, parse, compute, lambda i: f"Y flat {i}")


# -- GatherBlockQuantized ----------------------------------------------------------------------------
def gather_block_quantized_model(case) -> Model:
    ins = list(case.inputs)
    data, indices, scales, zps = (_arg(ins, i) for i in range(4))
    out_t = scales.type
    p = PREC[out_t]
    bits, bs = int(case.attrs.get("bits", 4)), int(case.attrs.get("block_size", 128))
    r = data.value.ndim
    ga, qa = int(case.attrs.get("gather_axis", 0)) % r, int(case.attrs.get("quantize_axis", 1)) % r
    is_float = data.type in FLOATS
    if data.type == "uint8" and bits < 8:
        raw = raw_bits(data.value)
        last = raw.shape[-1] * 8 // bits
        rows = raw.reshape(-1, raw.shape[-1])
        codes = np.array([_stream(row, bits, last) for row in rows], dtype=object).reshape(raw.shape[:-1] + (last,))
        vals = np.vectorize(lambda c: fin(Fraction(int(c))), otypes=[object])(codes)
    else:
        vals = np.empty(data.value.shape, dtype=object)
        vals.ravel()[:] = _vals(data)
    dshape = vals.shape
    sv = np.empty(scales.value.shape, dtype=object)
    sv.ravel()[:] = _vals(scales)
    if zps is not None:
        zv = np.empty(zps.value.shape, dtype=object)
        zv.ravel()[:] = [signed(v) for v in _vals(zps)]
    default_zp = Fraction(1 << (bits - 1)) if data.type == "uint8" else Fraction(0)
    d = dshape[qa]
    blk = d if bs == 0 else bs
    iv = [int(x) for x in np.asarray(indices.value).astype(np.int64).ravel()]
    s_axis = dshape[ga]
    out_shape = dshape[:ga] + tuple(indices.value.shape) + dshape[ga + 1:]
    outside_any = any(not (-s_axis <= x < s_axis) for x in iv)

    def element(coord, product: str):
        x = vals[coord]
        sc = list(coord)
        sc[qa] = coord[qa] // blk
        sc = tuple(0 if sv.shape[i] == 1 and i != qa else c for i, c in enumerate(sc))
        s = sv[sc]
        zp = default_zp if zps is None or is_float else zv[sc]
        diff = x if is_float else fin(signed(x) - zp)
        if product == GBQ_PRODUCTS[0]:
            return p.fl(v_mul(p.fl(diff), s))
        if product == GBQ_PRODUCTS[1]:
            return p.fl(F32.fl(v_mul(diff, s)))
        return p.fl(v_mul(diff, s))

    def compute(key) -> Computed:
        product, fill = key
        out = []
        for oc in itertools.product(*(range(e) for e in out_shape)):
            pre, idx_part, post = oc[:ga], oc[ga:ga + indices.value.ndim], oc[ga + indices.value.ndim:]
            flat = int(np.ravel_multi_index(idx_part, indices.value.shape)) if indices.value.ndim else 0
            ix = iv[flat]
            if not -s_axis <= ix < s_axis:
                out.append(_code(p, fin(Fraction(0), fill == "negative-zero-fill")))
                continue
            ix = ix + s_axis if ix < 0 else ix
            out.append(_code(p, element(pre + (ix,) + post, product)))
        return Computed(out)

    fills = ["", "negative-zero-fill"] if outside_any else [""]
    keys = [(pr, f) for f in fills for pr in GBQ_PRODUCTS]

    def parse(name):
        if name == "spec":
            return (GBQ_PRODUCTS[0], "")
        parts = name.split("+")
        product = next((x for x in parts if x in GBQ_PRODUCTS), GBQ_PRODUCTS[0])
        fill = "negative-zero-fill" if "negative-zero-fill" in parts else ""
        if any(x not in GBQ_PRODUCTS and x != "negative-zero-fill" for x in parts):
            raise KeyError(name)
        return (product, fill)

    return Model(out_t, out_shape, keys, parse, compute, keys[0], GBQ_PRODUCTS[0], lambda i: f"output flat {i}")


# -- MatMulIntegerToFloat, DynamicQuantizeMatMul ------------------------------------------------------
def _matmul(a_int: np.ndarray, b_int: np.ndarray) -> tuple[np.ndarray, tuple]:
    """numpy.matmul of object arrays of ints (1-D operands promoted and squeezed)."""
    sq = []
    if a_int.ndim == 1:
        a_int, sq = a_int[None, :], sq + [-2]
    if b_int.ndim == 1:
        b_int, sq = b_int[:, None], sq + [-1]
    y = np.matmul(a_int, b_int)
    for ax in sq:
        y = np.squeeze(y, axis=ax)
    return y, y.shape


def _dql(av: list, shape) -> list[tuple[str, np.ndarray, Fraction, int]]:
    """DynamicQuantizeLinear-11 of A (float32): per reading of its y quotient, (name, codes, scale, zp)."""
    xs = [signed(v) for v in av]
    hi, lo = max([Fraction(0)] + xs), min([Fraction(0)] + xs)
    scale = F32.fl(fin(F32.fl(fin(hi - lo))[2] / 255))
    sc = signed(scale)
    zp_f = F32.fl(fin(Fraction(0) - signed(F32.fl(fin(lo / sc)))))
    zp = rne_int(min(max(signed(zp_f), Fraction(0)), Fraction(255)))
    out = []
    for name in ("", "quotient-exact"):
        codes = []
        for x in xs:
            qv = x / sc if name else signed(F32.fl(fin(x / sc)))
            codes.append(min(max(rne_int(qv) + zp, 0), 255))
        out.append((name, np.array(codes, dtype=object).reshape(shape), sc, zp))
    return out


def scale_products_model(case) -> Model:
    ins = list(case.inputs)
    dynamic = case.op == "DynamicQuantizeMatMul"
    if dynamic:
        a, b, b_s, b_zp, bias = (_arg(ins, i) for i in range(5))
        a_s = a_zp = None
        out_t = "float32"
    else:
        a, b, a_s, b_s, a_zp, b_zp, bias = (_arg(ins, i) for i in range(7))
        out_t = a_s.type
    bvals = np.array([int(signed(v)) for v in _vals(b)], dtype=object).reshape(b.value.shape)
    n = b.value.shape[-1] if b.value.ndim > 1 else 1
    bz = np.array([int(signed(v)) for v in _vals(b_zp)], dtype=object) if b_zp is not None else np.array([0], dtype=object)
    bsv = [signed(v) for v in _vals(b_s)]
    bias_v = [signed(v) for v in _vals(bias)] if bias is not None else None
    quantized = []
    if dynamic:
        quantized = _dql(_vals(a), a.value.shape)
    else:
        av = np.array([int(signed(v)) for v in _vals(a)], dtype=object).reshape(a.value.shape)
        az = np.array([int(signed(v)) for v in _vals(a_zp)], dtype=object) if a_zp is not None else np.array([0], dtype=object)
        quantized = [("", av, signed(_vals(a_s)[0]), az if az.size > 1 else az[0])]
    accs = {}
    for name, codes, sa, zpa in quantized:
        y, yshape = _matmul(codes - zpa, bvals - (bz if bz.size > 1 else bz[0]))
        accs[name] = ([int(v) for v in np.asarray(y).ravel()], sa)
    steps = ["", "steps-in-float32"] if out_t != "float32" else [""]
    dqls = [q[0] for q in quantized]
    keys = [(asc, fused, st, dq) for dq in dqls for st in steps for fused in ("", "fused-bias")
            for asc in ASSOC if fused == "" or bias is not None]
    op = PREC[out_t]

    def value(asc, fused, st, acc: int, sa: Fraction, sb: Fraction, bias_i):
        p = F32 if st else op
        fa, vsa, vsb = p.fl(fin(Fraction(acc))), fin(sa), fin(sb)
        if asc == ASSOC[0]:
            x, y = fa, p.fl(v_mul(vsa, vsb))
        elif asc == ASSOC[1]:
            x, y = p.fl(v_mul(fa, vsa)), vsb
        else:
            x, y = fin(Fraction(acc) * sa), vsb
        prod = v_mul(x, y)
        if bias_i is None:
            v = p.fl(prod)
        elif fused:
            v = p.fl(v_add(prod, fin(bias_i)))
        else:
            v = p.fl(v_add(p.fl(prod), fin(bias_i)))
        return op.fl(v)

    def compute(key) -> Computed:
        asc, fused, st, dq = key
        acc_list, sa = accs[dq]
        out = []
        for i, acc in enumerate(acc_list):
            col = i % n
            sb = bsv[col] if len(bsv) > 1 else bsv[0]
            out.append(_code(op, value(asc, fused, st, acc, sa, sb, bias_v[col] if bias_v else None)))
        return Computed(out)

    def parse(name):
        key = [ASSOC[0], "", "", ""]
        if name == "spec":
            return tuple(key)
        for part in name.split("+"):
            if part.endswith("-fused-bias") and part[:-len("-fused-bias")] in ASSOC:
                key[0], key[1] = part[:-len("-fused-bias")], "fused-bias"
            elif part in ASSOC:
                key[0] = part
            elif part == "steps-in-float32":
                key[2] = part
            elif part == "quotient-exact":
                key[3] = part
            else:
                raise KeyError(name)
        return tuple(key)

    return Model(out_t, tuple(yshape), keys, parse, compute, keys[0], ASSOC[0], lambda i: f"Y flat {i}")


MODELS = {"MatMulNBits": matmul_nbits_model, "GatherBlockQuantized": gather_block_quantized_model,
          "MatMulIntegerToFloat": scale_products_model, "DynamicQuantizeMatMul": scale_products_model}

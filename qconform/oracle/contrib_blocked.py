"""The oracle of onnxruntime's weight-only and dynamic com.microsoft ops (MatMulNBits, GatherBlockQuantized, MatMulIntegerToFloat, DynamicQuantizeMatMul).

MatMulNBits-1 (qconform/docs/semantics.md#ms-matmulnbits):
    Y[.., n] = Σ_k A[.., k] · (q[n, k] − zp[n, k // block_size]) · scale[n, k // block_size] + bias[n]
    q unpacked from B's blobs (a bit stream, low-order bits first), zp from the packed uint8 stream,
    the unpacked float zero points or 2^(bits−1). The text leaves the order of the sum open, so a draft
    is a case only where every order (and every downcast or int8 quantization of A its
    ``accuracy_level`` permits) gives one value (#qdq-sum-order); otherwise ``NotExact``.
GatherBlockQuantized-1 (#ms-gather-block-quantized): Gather of the codes, then (q − zp) · scale per
    block in the output type, as DequantizeLinear's readings; out-of-range indices give zeros.
MatMulIntegerToFloat-1 and DynamicQuantizeMatMul-1 (com.microsoft): an exact integer matmul,
then a float scale product and a bias (qconform/docs/semantics.md#ms-scale-products).

    Y = acc · a_scale · b_scale[n] + bias[n],  acc = Σ_k (A[.., k] − a_zp) · (B[k, n] − b_zp[n])

Neither schema has a doc (only input descriptions), so the order of the three factors and how the
bias is added are open: every association is a reading (``scales-multiplied-first``: the product of
the scales first, onnxruntime's ``a_scale * b_scale`` multiplier; ``scales-applied-in-turn``;
``scaled-exactly``: one rounding), each with the bias added in its own rounding or fused into the
last multiplication's (``-fused-bias``). float16 outputs: each step in float16 (first) or in
float32 rounded once to float16 (``+steps-in-float32``). DynamicQuantizeMatMul's A is quantized
by the ai.onnx dynamic quantizer, version 11 (#dql-formula), first; its ``quotient-exact`` reading composes.
"""
from __future__ import annotations

import numpy as np

from qconform import dtypes
from qconform.case import MS_DOMAIN, Arg, Draft
from qconform.declarations.contrib_blocked import SCALE_READINGS, unpack_stream
from qconform.declarations.operators import DYNAMIC_QUANTIZE_LINEAR
from qconform.oracle import floats
from qconform.oracle.arith import as_float64, exact_fma, exact_product, fl, pack_output
from qconform.oracle import base
from qconform.oracle.base import Evaluation, OpOracle, register
from qconform.oracle.contrib_qlinear import per_tensor_or
from qconform.oracle.granularity import InvalidModel
from qconform.oracle.graph import NotExact
from qconform.oracle.integer import matmul_operands

#: Significand bits of each float type A may take (the exactness bound of its sums).
_PRECISION = {"float32": 24, "float16": 11, "bfloat16": 8}
#: accuracy_level -> the type A may be downcast to (4: int8 per block, checked apart).
_DOWNCAST = {1: "float32", 2: "float16", 3: "bfloat16"}


def _lsb_exponent(v: np.ndarray) -> np.ndarray:
    """The exponent of the lowest set bit of each nonzero float64 (a large value for zeros)."""
    m, e = np.frexp(np.abs(v))
    mant = (m * 2.0 ** 53).astype(np.int64)
    tz = np.zeros(mant.shape, np.int64)
    nz = mant != 0
    low = mant[nz] & -mant[nz]
    tz[nz] = np.log2(low.astype(np.float64)).astype(np.int64)
    out = e.astype(np.int64) - 53 + tz
    out[~nz] = 1 << 20
    return out


def exact_sums(terms: np.ndarray, precision: int, where: str) -> np.ndarray:
    """The sums over the last axis of exact float64 terms, checked to be the value of every order of
    summation in a float type of ``precision`` significand bits: all terms multiples of one power of
    two u and the magnitudes below 2^precision · u (the rule of #qdq-sum-order, per output element)."""
    if terms.shape[-1] == 0:
        return np.zeros(terms.shape[:-1])
    u = _lsb_exponent(terms).min(axis=-1, keepdims=True)
    u = np.where(u > 1 << 19, 0, u)
    units = np.abs(terms) / np.exp2(u.astype(np.float64))
    if np.any(units.sum(axis=-1) >= 2.0 ** precision):
        raise NotExact(f"{where}: a sum the text leaves unordered is not exact in {precision}-bit floats for every order")
    if np.any(np.all((terms == 0) & np.signbit(terms), axis=-1)):
        # every term −0: a sum that starts from its first term is −0, an accumulator started at +0 gives +0
        raise NotExact(f"{where}: a sum of −0 terms only, whose sign depends on the accumulator's start")
    return terms.sum(axis=-1)


def _values(arg: Arg) -> np.ndarray:
    """A tensor's values as float64 (integers exactly)."""
    return as_float64(arg.value, arg.type)


def output(y: np.ndarray, t: str) -> np.ndarray:
    """float64 values already rounded to float type ``t``, as an array of ``t``."""
    return pack_output(floats.encode(np.asarray(y, np.float64), dtypes.get(t), saturate=False), t)


class MatMulNBits(OpOracle):
    domain = MS_DOMAIN
    op = "MatMulNBits"
    since = 1
    output_names = ("Y",)
    has_axis = False

    def weight_codes(self, b: np.ndarray, k: int, bits: int, bs: int) -> np.ndarray:
        """B's codes [N, K]: each row's blobs one bit stream, the last blob's padding dropped."""
        n, kb, blob = b.shape
        return unpack_stream(b.reshape(n, kb * blob), bits, kb * bs)[:, :k]

    def packed_zero_points(self, zp: np.ndarray, kb: int, bits: int) -> np.ndarray:
        """uint8 zero points [N, ceil(k_blocks·bits/8)] -> [N, k_blocks]: one stream per row."""
        return unpack_stream(zp, bits, kb).astype(np.float64)

    def default_zero_point(self, bits: int) -> float:
        """"If not provided, a default zero point is used: 2^(bits - 1)"."""
        return float(1 << (bits - 1))

    def block_sums(self, terms: np.ndarray, precision: int, where: str, block_size: int) -> np.ndarray:
        """Y's sums over K (and the bias), checked exact in every order."""
        return exact_sums(terms, precision, where)

    def weights(self, draft: Draft) -> tuple[np.ndarray, str]:
        """The dequantized weights [N, K] (exact float64) and, where the model is valid but outside
        the current text, why (an information case)."""
        _, b, scales, zp, g_idx, _ = (list(draft.inputs) + [None] * 6)[:6]
        k, n = int(draft.attrs["K"]), int(draft.attrs["N"])
        bits, bs = int(draft.attrs.get("bits", 4)), int(draft.attrs["block_size"])
        t1 = draft.inputs[0].type
        if not 2 <= bits <= 8:
            raise InvalidModel(f"bits={bits}: 'bits' can take values from 2 to 8")
        if bs < 16 or bs & (bs - 1):
            raise InvalidModel(f"block_size={bs}: must be a power of 2 and not smaller than 16")
        if int(draft.attrs.get("weight_prepacked", 0)) != 0:
            raise InvalidModel("weight_prepacked != 0: an EP-specific layout, not in the text's arithmetic")
        kb, blob = -(-k // bs), bs * bits // 8
        if b.value.shape != (n, kb, blob):
            raise InvalidModel(f"B of shape {b.value.shape}: (N, k_blocks, blob_size) = {(n, kb, blob)}")
        q = self.weight_codes(b.value, k, bits, bs)
        info = ""
        s = _values(scales)
        if s.shape != (n, kb):
            if s.shape == (n * kb,):
                info = "scales of shape (N·k_blocks): the text's shape is (N, k_blocks)"
            else:
                raise InvalidModel(f"scales of shape {s.shape}: (N, k_blocks) = {(n, kb)}")
            s = s.reshape(n, kb)
        if zp is None:
            z = np.full((n, kb), self.default_zero_point(bits))
        elif zp.type == "uint8":
            want = (n, -(-kb * bits // 8))
            if zp.value.shape != want:
                if zp.value.size == want[0] * want[1]:
                    info = info or f"packed zero points of shape {zp.value.shape}: the text's shape is {want}"
                else:
                    raise InvalidModel(f"packed zero_points of shape {zp.value.shape}: (N, ceil(k_blocks·bits/8)) = {want}")
            z = self.packed_zero_points(zp.value.reshape(want), kb, bits)
        else:
            if zp.type != t1:
                raise InvalidModel(f"unpacked zero_points of type {zp.type}: the same type as A ({t1})")
            z = _values(zp)
            if z.shape != (n, kb):
                raise InvalidModel(f"zero_points of shape {z.shape}: (N, k_blocks) = {(n, kb)}")
        if g_idx is not None:
            gi = g_idx.value.astype(np.int64)
            if gi.shape != (k,) or not np.array_equal(gi, np.arange(k) // bs):
                info = info or "g_idx other than k // block_size: the text gives the deprecated input no meaning"
        blk = np.arange(k) // bs
        diff = q - z[:, blk]
        if np.any(fl(t1, diff) != diff):
            raise NotExact(f"{draft.id}: q − zero_point not exact in {t1}")
        w = diff * s[:, blk]
        if np.any(fl(t1, w) != w):
            raise NotExact(f"{draft.id}: (q − zero_point) · scale not exact in {t1}: its rounding is unstated")
        return w, info

    def check_a(self, a: np.ndarray, level: int, bs: int, t1: str, where: str) -> None:
        """A's values unchanged by whatever ``accuracy_level`` permits (#ms-matmulnbits-accuracy)."""
        if level in _DOWNCAST and np.any(fl(_DOWNCAST[level], a) != a):
            raise NotExact(f"{where}: accuracy_level {level} permits A downcast to {_DOWNCAST[level]}, which changes it")
        if level == 4:
            k = a.shape[-1]
            pad = (-k) % bs
            blocks = np.concatenate([a, np.zeros(a.shape[:-1] + (pad,))], axis=-1).reshape(a.shape[:-1] + (-1, bs))
            amax = np.abs(blocks).max(axis=-1, keepdims=True)
            step = np.where(amax == 0, 1.0, amax / 127.0)
            e = np.log2(step)
            if np.any(e != np.round(e)) or np.any(blocks / step != np.round(blocks / step)):
                raise NotExact(f"{where}: accuracy_level 4 permits A quantized to int8 per block, which changes it")

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        a, _, _, _, _, bias = (list(draft.inputs) + [None] * 6)[:6]
        k, n = int(draft.attrs["K"]), int(draft.attrs["N"])
        t1 = a.type
        av = _values(a)
        if av.ndim < 1 or av.shape[-1] != k:
            raise InvalidModel(f"A of shape {av.shape}: its last dimension is K = {k}")
        w, info = self.weights(draft)
        level = int(draft.attrs.get("accuracy_level", 0))
        if not 0 <= level <= 4:
            raise InvalidModel(f"accuracy_level={level}: 0 to 4")
        self.check_a(av, level, int(draft.attrs["block_size"]), t1, draft.id)
        terms = av[..., None, :] * w  # [..., N, K]; products of two float32s are exact in float64
        if bias is not None:
            bv = _values(bias)
            if bv.shape != (n,):
                raise InvalidModel(f"bias of shape {bv.shape}: [N] = [{n}]")
            terms = np.concatenate([terms, np.broadcast_to(bv[:, None], terms.shape[:-1] + (1,))], axis=-1)
        y = self.block_sums(terms, _PRECISION[t1], draft.id, int(draft.attrs["block_size"]))
        if np.any(fl(t1, y) != y):
            raise NotExact(f"{draft.id}: the sum is not representable in {t1}")
        ev = Evaluation(clause="ms-matmulnbits", primary_only=primary_only, information=info)
        ev.add("spec", (output(y, t1),))
        return ev



def gbq_attributes(data_type: str, rank: int, attrs, has_zero_points: bool) -> tuple[int, int, int, int]:
    """GatherBlockQuantized's gather axis, quantize axis, block size and bits, normalised, as its
    schema constrains them (InvalidModel otherwise): the one check the oracle and qconform's kernels
    both make."""
    t = dtypes.get(data_type)
    if rank < 1:
        raise InvalidModel("data of rank 0: rank r >= 1")
    ga, qa = int(attrs.get("gather_axis", 0)), int(attrs.get("quantize_axis", 1))
    if not (-rank <= ga < rank and -rank <= qa < rank):
        raise InvalidModel(f"gather_axis {ga} / quantize_axis {qa} outside [-{rank}, {rank - 1}]")
    ga, qa = ga % rank, qa % rank
    bs, bits = int(attrs.get("block_size", 128)), int(attrs.get("bits", 4))
    if t.is_float:
        if has_zero_points:
            raise InvalidModel("zero_points must not be provided when data is an FP8 or FP4 type")
        if bs != 0 and (bs < 16 or bs & (bs - 1)):
            raise InvalidModel(f"block_size={bs}: a power of 2 not smaller than 16, or 0")
        return ga, qa, bs, bits
    if bs < 16 or bs & (bs - 1):
        raise InvalidModel(f"block_size={bs}: a power of 2 not smaller than 16 (0 only for FP8/FP4 data)")
    if data_type == "uint8":
        if bits not in (2, 4, 8):
            raise InvalidModel(f"bits={bits}: must be 2, 4 or 8")
        if ga != 0:
            raise InvalidModel("for uint8 data, the gather_axis must be 0")
        if bits < 8 and ga == qa:
            raise InvalidModel("uint8 data with bits < 8: gather_axis and quantize_axis must differ")
    return ga, qa, bs, bits

class GatherBlockQuantized(OpOracle):
    domain = MS_DOMAIN
    op = "GatherBlockQuantized"
    since = 1
    output_names = ("output",)
    has_axis = False

    def default_zero_point(self, data_type: str, bits: int) -> float:
        """"If `zero_points` is not provided, the default value is 0 for int4/uint4, or 2^(bits-1) for uint8"."""
        return float(1 << (bits - 1)) if data_type == "uint8" else 0.0

    def codes(self, draft: Draft) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int, str]:
        """(codes or float values of data, zero points, scales) expanded to data's logical shape,
        the gather axis, and why the case is information ("" where it is not)."""
        data, _, scales, zp = (list(draft.inputs) + [None] * 4)[:4]
        t = dtypes.get(data.type)
        r = data.value.ndim
        ga, qa, bs, bits = gbq_attributes(data.type, r, draft.attrs, zp is not None)
        info = ""
        if not t.is_float and data.type == "uint8" and bits < 8:
            last = data.value.shape[-1] * 8 // bits
            values = unpack_stream(data.value, bits, last).astype(np.float64)
            if zp is not None:
                info = "a uint8 zero point with bits < 8: the text does not say whether it is packed"
        else:
            values = _values(data)
        shape = values.shape
        d = shape[qa]
        nblk = 1 if bs == 0 else -(-d // bs)
        s = _values(scales)
        if s.ndim != r:
            raise InvalidModel(f"scales of rank {s.ndim}: the same rank as data ({r})")
        for i in range(r):
            ok = s.shape[i] == (nblk if i == qa else shape[i]) or (t.is_float and i != qa and s.shape[i] == 1)
            if not ok:
                raise InvalidModel(f"scales of shape {s.shape} for data of shape {shape} (quantize_axis {qa}, block_size {bs})")
        idx = np.arange(d) // (d if bs == 0 else bs)
        s_full = np.broadcast_to(np.take(s, idx, axis=qa), shape)
        if zp is None:
            z_full = np.full(shape, self.default_zero_point(data.type, bits))
        elif data.type == "uint8" and bits < 8:
            z_full = np.full(shape, float(1 << (bits - 1)))  # information case: never judged
        else:
            z = _values(zp)
            if z.shape != s.shape:
                raise InvalidModel(f"zero_points of shape {z.shape}: the shape of scales {s.shape}")
            z_full = np.broadcast_to(np.take(z, idx, axis=qa), shape)
        return values, z_full, s_full, ga, info

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        _, indices, scales, _ = (list(draft.inputs) + [None] * 4)[:4]
        values, z, s, ga, info = self.codes(draft)
        out_t = scales.type
        d = values.shape[ga]
        iv = indices.value.astype(np.int64)
        outside = (iv < -d) | (iv >= d)
        picked = np.where(outside, 0, np.where(iv < 0, iv + d, iv))
        diff = values - z
        candidates = [("multiply-in-output-type", fl(out_t, fl(out_t, diff) * fl(out_t, s))),
                      ("multiply-in-float32-then-round", fl(out_t, fl("float32", diff * s))),
                      ("multiply-exact-then-round", fl(out_t, diff * s))]
        # rows of an out-of-range index: zeros (output shape: data[:ga] + indices + data[ga+1:])
        mask = outside.reshape((1,) * ga + outside.shape + (1,) * (values.ndim - ga - 1))
        ev = Evaluation(clause="ms-gather-block-quantized", primary_only=primary_only, information=info)
        fills = [("", 0.0)] + ([("negative-zero-fill", -0.0)] if outside.any() else [])
        for suffix, zero in fills:
            for name, full in candidates:
                y = np.where(mask, zero, np.take(full, picked, axis=ga))
                label = name if not suffix else (suffix if name == candidates[0][0] else f"{name}+{suffix}")
                ev.add(label, (output(y, out_t),))
        return ev


HALF_STEPS = "steps-in-float32"


def scale_readings(acc: np.ndarray, a_s: np.ndarray, b_s: np.ndarray, bias: np.ndarray | None,
                   out_t: str) -> list[tuple[str, np.ndarray]]:
    """Every permitted value of acc · a_s · b_s (+ bias) in ``out_t``, named (#ms-scale-products)."""
    acc = np.asarray(acc, np.float64)
    a_s, b_s = np.broadcast_to(a_s, acc.shape), np.broadcast_to(b_s, acc.shape)
    steps = [(out_t, "")] + ([("float32", "+" + HALF_STEPS)] if out_t != "float32" else [])
    found: list[tuple[str, np.ndarray]] = []
    for p, suffix in steps:
        facc = fl(p, acc)
        m = exact_product(p, a_s, b_s)
        first = exact_product(p, facc, a_s)
        raw = acc * a_s  # exact in float64: |acc| < 2^29 and a 24-bit scale
        products = {SCALE_READINGS[0]: (facc, m), SCALE_READINGS[1]: (first, b_s), SCALE_READINGS[2]: (raw, b_s)}
        zero = np.zeros(acc.shape)
        for name, (x, y) in products.items():
            scaled = exact_fma(p, x, y, zero)
            if bias is None:
                found.append((name + suffix, fl(out_t, scaled)))
                continue
            bv = np.broadcast_to(bias, acc.shape)
            found.append((name + suffix, fl(out_t, exact_fma(p, scaled, np.ones(acc.shape), bv))))
            found.append((f"{name}-fused-bias{suffix}", fl(out_t, exact_fma(p, x, y, bv))))
    order = {n: i for i, n in enumerate(SCALE_READINGS)}
    return sorted(found, key=lambda r: (HALF_STEPS in r[0], order.get(r[0].split("+")[0], 9)))


def _ints(arg: Arg | None) -> np.ndarray:
    return np.zeros((), np.int64) if arg is None else np.asarray(arg.value).astype(np.int64)


def _column_param(name: str, arg: Arg | None, n: int, values: np.ndarray | None = None) -> np.ndarray:
    """A parameter of B: a scalar (or one element) per tensor, or N elements per column."""
    v = _ints(arg) if values is None else values
    return per_tensor_or(v, (n,), f"{name} of shape {v.shape}: a scalar or a 1-D tensor of N = {n} elements")


def _bias(arg: Arg | None, n: int) -> np.ndarray | None:
    if arg is None:
        return None
    v = as_float64(arg.value, arg.type)
    if v.shape != (n,):
        raise InvalidModel(f"bias of shape {v.shape}: 1-D, B's last dimension ({n})")
    return v


def _accumulate(a: np.ndarray, a_zp: np.ndarray, b: np.ndarray, b_zp: np.ndarray) -> tuple[np.ndarray, int]:
    av, bv, squeeze, _ = matmul_operands(a, b, ("A", "B"))
    acc = np.matmul(av - a_zp, bv - b_zp)
    if np.any(np.abs(acc) >= 2 ** 31):
        raise InvalidModel("an integer sum beyond int32: the schema states no accumulator")
    if squeeze:
        acc = np.squeeze(acc, axis=squeeze)
    return acc, bv.shape[-1]


class MatMulIntegerToFloat(OpOracle):
    domain = MS_DOMAIN
    op = "MatMulIntegerToFloat"
    since = 1
    output_names = ("Y",)
    has_axis = False

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        a, b, a_s, b_s, a_zp, b_zp, bias = (list(draft.inputs) + [None] * 7)[:7]
        if a_s.value.size != 1:
            raise InvalidModel("a per-column scale of A (K elements) scales the terms, not the integer sum: "
                               "a float sum in an open order (qconform/docs/semantics.md#ms-scale-products)")
        av, bv = _ints(a), _ints(b)
        k = av.shape[-1]
        azp = _ints(a_zp)
        azp = per_tensor_or(azp, (k,), f"a_zero_point of shape {azp.shape}: a scalar or K = {k} elements")
        n = bv.shape[-1] if bv.ndim > 1 else 1
        bzp = _column_param("b_zero_point", b_zp, n)
        acc, n = _accumulate(av, azp, bv, bzp)
        out_t = a_s.type
        scale_b = _column_param("b_scale", None, n, as_float64(b_s.value, b_s.type))
        ev = Evaluation(clause="ms-scale-products", primary_only=primary_only)
        for name, y in scale_readings(acc, float(as_float64(a_s.value, out_t).reshape(())), scale_b,
                                      _bias(bias, n), out_t):
            ev.add(name, (output(y, out_t),))
        return ev


class DynamicQuantizeMatMul(OpOracle):
    domain = MS_DOMAIN
    op = "DynamicQuantizeMatMul"
    since = 1
    output_names = ("Y",)
    has_axis = False

    def quantized_a(self, a: Arg) -> list[tuple[str, np.ndarray, float, int]]:
        """A through the ai.onnx dynamic quantizer (version 11), per reading of it: (name, codes, scale, zero point)."""
        d = Draft(op=DYNAMIC_QUANTIZE_LINEAR.op, opset=DYNAMIC_QUANTIZE_LINEAR.versions[0], types="float32", family="dynamic-quantize-matmul",
                  name="A", inputs=(Arg("x", "float32", a.value),))
        case = base.evaluate(d)
        out = []
        for r in case.readings:
            if any(m is not None and np.any(m) for m in r.dont_care):
                raise InvalidModel("the dynamic quantizer leaves A's codes undefined (NaN, ±Inf or a zero range)")
            y, s, z = r.outputs
            out.append((r.name, y.astype(np.int64), float(as_float64(s, "float32").reshape(())), int(z)))
        return out

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        a, b, b_s, b_zp, bias = (list(draft.inputs) + [None] * 5)[:5]
        bv = _ints(b)
        n = bv.shape[-1] if bv.ndim > 1 else 1
        bzp = _column_param("b_zero_point", b_zp, n)
        scale_b = _column_param("b_scale", None, n, as_float64(b_s.value, b_s.type))
        ev = Evaluation(clause="ms-scale-products", primary_only=primary_only)
        for i, (dql, codes, a_s, a_zp) in enumerate(self.quantized_a(a)):
            acc, n = _accumulate(codes, np.asarray(a_zp, np.int64), bv, bzp)
            for name, y in scale_readings(acc, a_s, scale_b, _bias(bias, n), "float32"):
                ev.add(name if i == 0 else f"{name}+{dql}", (output(y, "float32"),))
        return ev


register(MatMulNBits(), GatherBlockQuantized(), MatMulIntegerToFloat(), DynamicQuantizeMatMul())

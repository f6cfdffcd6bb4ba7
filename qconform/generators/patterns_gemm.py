"""QDQ Gemm and MatMul patterns at depth (issue 64): Gemm's transA, transB, alpha, beta and C's shapes;
MatMul's operand shapes (1-D, batched, broadcast); accumulators past float32's 2^24 (raw integer
accumulators a fused kernel forms before subtracting zero points, while every order of the float sum
stays exact: code differences on a grid of 16); the LLM weight pattern DQ(blocked int4/uint4 weight,
axis 0) → MatMul with block sizes 16 to 2,048 and K tails (onnxruntime fuses it into MatMulNBits:
DQMatMulToMatMulNBitsRules, onnxruntime/core/optimizer/qdq_transformer/selectors_actions/
qdq_selector_action_transformer.cc); DQ → Gather (quantized embeddings); MatMul → Relu/Clip → Q."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from qconform import dtypes
from qconform.case import Arg, Draft, Node
from qconform.generators.common import array
from qconform.generators.patterns_common import (F32, FOUR_BIT, WEIGHTS, _act_codes, _codes, _dq, _draft, _f32, _mid,
                                          _q, _rng, _scale, _sy_for, _weight_args, _with_weights, _zp)

C_SHAPES = {"none": None, "scalar": (), "row": ("n",), "row-2d": (1, "n"), "column": ("m", 1), "full": ("m", "n")}


def _gemm(family: str, name: str, ta: str, tw: str, rng, trans_a: int, trans_b: int, alpha: float, beta: float,
          c_shape, sy: float, zy: int, act: str = "", within: int = 0) -> Draft:
    """DQ(x), DQ(w)[, DQ(C)] → Gemm [→ Relu | Clip] → Q; ``within``: codes of x and w at most this
    far from their zero points and C's small (ties without saturation)."""
    m, k, n = 6, 16, 8
    sx = 2.0**-4
    xshape = (k, m) if trans_a else (m, k)
    x = _act_codes(rng, ta, xshape, k) if not within else array(ta, _mid(ta) + rng.integers(-within, within + 1,
                                                                                              size=xshape))
    wshape = (n, k) if trans_b else (k, n)
    gran = "per-axis" if c_shape == ("n",) else "per-tensor"
    wargs, wattrs = _weight_args(rng, tw, wshape, gran, 0 if trans_b else 1)
    if within:
        zw = int(np.asarray(wargs[2].value).reshape(-1)[0])
        wargs[0] = Arg("w", tw, array(tw, zw + rng.integers(-within, within + 1, size=wshape)), initializer=True)
        if gran == "per-tensor":
            wargs[1] = _f32("sw", 2.0**-7)
    nodes = [_dq("x", "sx", "zx", "fx"), _dq("w", "sw", "zw", "fw", **wattrs)]
    inputs: list[Arg] = [Arg("x", ta, x), _f32("sx", sx), _zp("zx", ta, _mid(ta)), *wargs]
    ins = ["fx", "fw"]
    if c_shape is not None:
        shape = tuple({"m": m, "n": n}.get(d, d) for d in c_shape)
        sw = wargs[1].value.astype(np.float64)
        sb = (sx * sw).astype(np.float32) if sw.ndim == 1 else np.float32(sx * float(sw))
        codes = rng.integers(-2**10, 2**10, size=shape).astype(np.int32) if not within else \
            rng.integers(-4 * within, 4 * within + 1, size=shape).astype(np.int32)
        inputs += [Arg("bias", "int32", codes, initializer=True), _f32("sb", sb, np.shape(sb)),
                   Arg("zb", "int32", np.zeros(np.shape(sb), np.int32), initializer=True)]
        nodes.append(_dq("bias", "sb", "zb", "fb", **({"axis": 0} if np.ndim(sb) else {})))
        ins.append("fb")
    attrs = {k_: v for k_, v in (("transA", trans_a), ("transB", trans_b), ("alpha", alpha), ("beta", beta))
             if v != {"alpha": 1.0, "beta": 1.0}.get(k_, 0)}
    nodes.append(Node("Gemm", tuple(ins), ("g",), attrs))
    out = "g"
    if act == "relu":
        nodes.append(Node("Relu", ("g",), ("h",)))
        out = "h"
    elif act == "clip":  # ReLU6-like: [0, half of the output's positive range]
        inputs += [_f32("lo", 0.0), _f32("hi", float(np.float32(sy * (dtypes.get(ta).qrange[1] - _mid(ta)) / 2)))]
        nodes.append(Node("Clip", ("g", "lo", "hi"), ("h",)))
        out = "h"
    inputs += [_f32("sy", sy), _zp("zy", ta, zy)]
    nodes.append(_q(out, "sy", "zy", "y"))
    return _draft("Gemm", f"{ta}-{tw}-{ta}", family, name, inputs, nodes, "qdq-sum-order")


def gemm_depth() -> Iterator[Draft]:
    """transA × transB × alpha × beta × C's shape, and the fused activations."""
    for ta in ("uint8", "int8", "int16"):
        tw = WEIGHTS[ta][-1]
        for ta_ in (0, 1):
            for tb in (0, 1):
                for alpha in (1.0, 0.5, 2.0, 0.75):
                    for cname, cshape in C_SHAPES.items():
                        for beta in ((1.0, 0.5, 0.0, 1.5) if cname in ("row", "full") else (1.0,)):
                            rng = _rng("gemm-depth", ta, ta_, tb, alpha, cname, beta)
                            sy = _sy_for(rng, ta, 16) * max(alpha, 1.0)
                            yield _gemm("attributes", f"transA-{ta_}-transB-{tb}-alpha-{alpha}-beta-{beta}-C-{cname}",
                                        ta, tw, rng, ta_, tb, alpha, beta, cshape, sy, _mid(ta) + int(rng.integers(-2, 3)))
        for tw in WEIGHTS[ta] + (FOUR_BIT if ta != "int16" else ()):
            for cname in ("none", "row"):
                rng = _rng("gemm-ties", ta, tw, cname)
                w = 2 if dtypes.get(tw).bits <= 4 else 3
                for parity, zy in (("even", _mid(ta)), ("odd", _mid(ta) + 1)):
                    yield _gemm("ties", f"C-{cname}-half-zero-point-{parity}", ta, tw, rng, 0, 1, 1.0, 1.0,
                                C_SHAPES[cname], 2.0**-10, zy, within=w)
                    yield _gemm("fold", f"C-{cname}-unit-zero-point-{parity}", ta, tw, rng, 0, 1, 1.0, 1.0,
                                C_SHAPES[cname], 2.0**-11, zy, within=w)
                wmax = min(128, max(abs(v) for v in dtypes.get(tw).qrange))
                for act in ("relu", "clip"):
                    lo = dtypes.get(ta).qrange[0]
                    for zn, zy in (("qmin", lo), ("mid-odd", _mid(ta) + 1)):
                        yield _gemm("fused-activation", f"C-{cname}-{act}-{zn}", ta, tw, rng, 0, 0, 1.0, 1.0,
                                    C_SHAPES[cname], _sy_for(rng, ta, 16, 2.0**-7 * wmax / 128), zy, act=act)


def matmul_depth() -> Iterator[Draft]:
    """Operand shapes numpy.matmul admits, weight granularities, ties with odd and even zero points,
    and accumulators past 2^24."""
    shapes = (("2d", (6, 16), (16, 8)), ("1d-activation", (16,), (16, 8)), ("batched-3d", (2, 4, 16), (16, 8)),
              ("batched-4d", (2, 3, 2, 16), (16, 4)), ("k-1", (6, 1), (1, 8)), ("k-33", (4, 33), (33, 8)))
    for ta, tws in WEIGHTS.items():
        for tw in tws + (FOUR_BIT if ta in ("uint8", "int8") else ()):
            for sname, xs, ws in shapes:
                for gran, axis, block in (("per-tensor", 1, 0), ("per-axis", 1, 0), ("blocked", 0, 4)):
                    rng = _rng("matmul-depth", ta, tw, sname, gran)
                    k = ws[0]
                    x = _act_codes(rng, ta, xs, k)
                    yield _with_weights("MatMul", "shapes", f"{sname}-{gran}", ta, tw, x, ws, gran, axis, block, rng,
                                        _sy_for(rng, ta, k), _mid(ta))
            rng = _rng("matmul-ties-depth", ta, tw)
            x = array(ta, _mid(ta) + rng.integers(-3, 4, size=(6, 16)))  # small sums: ties, no saturation
            for parity, zy in (("even", _mid(ta)), ("odd", _mid(ta) + 1)):
                for rel, sy in (("half", 2.0**-4 * 2.0**-7 * 2), ("quarter", 2.0**-4 * 2.0**-7 * 4)):
                    d = _with_weights("MatMul", "ties", f"{rel}-zero-point-{parity}", ta, tw, x, (16, 8), "per-tensor",
                                      1, 0, _rng("mm-ties", ta, tw), sy, zy)
                    yield _small_weights(_fix_sw(d, 2.0**-7), _rng("mm-ties-w", ta, tw), 2)


def _small_weights(d: Draft, rng, within: int) -> Draft:
    """The draft's weights redrawn within ``within`` codes of their zero point."""
    args = {a.name: a for a in d.inputs}
    w, zw = args["w"], int(np.asarray(args["zw"].value).reshape(-1)[0])
    args["w"] = Arg("w", w.type, array(w.type, zw + rng.integers(-within, within + 1, size=w.value.shape)),
                    initializer=True)
    return Draft(**{**d.__dict__, "inputs": tuple(args[a.name] for a in d.inputs)})


def _fix_sw(d: Draft, sw: float) -> Draft:
    args = tuple(_f32("sw", sw) if a is not None and a.name == "sw" else a for a in d.inputs)
    return Draft(**{**d.__dict__, "inputs": args})


def large_accumulators() -> Iterator[Draft]:
    """K up to 4,096 with activation and weight codes 16 apart around their zero points: the raw sums a
    u8×s8 kernel forms (Σx·w, then the zero-point terms) pass 2^24 and int16 pair sums saturate, while
    the float sum stays exact for every order (its terms are multiples of 2^8 units)."""
    for ta, tw in (("uint8", "int8"), ("int8", "int8"), ("uint8", "uint8")):
        for k in (1024, 2048, 4096):
            rng = _rng("big-acc", ta, tw, k)
            ea, ew = dtypes.get(ta), dtypes.get(tw)
            za, zw = _mid(ta), _mid(tw)
            xa = np.clip(za + 16 * rng.integers(-8, 8, size=(2, k)), *ea.qrange)
            w = np.clip(zw + 16 * rng.integers(-7, 8, size=(k, 4)), *ew.qrange)
            sx, sw = 2.0**-4, 2.0**-7
            acc = (xa - za) @ (w - zw)
            sy = float(np.float32(np.abs(acc).max() * sx * sw / 100))
            inputs = [Arg("x", ta, array(ta, xa)), _f32("sx", sx), _zp("zx", ta, za), Arg("w", tw, array(tw, w), True),
                      _f32("sw", sw), _zp("zw", tw, zw), _f32("sy", sy), _zp("zy", ta, za)]
            nodes = [_dq("x", "sx", "zx", "fx"), _dq("w", "sw", "zw", "fw"), Node("MatMul", ("fx", "fw"), ("g",)),
                     _q("g", "sy", "zy", "y")]
            yield _draft("MatMul", f"{ta}-{tw}-{ta}", "large-accumulator", f"k-{k}", inputs, nodes, "qdq-sum-order")


def blocked_weights() -> Iterator[Draft]:
    """DQ(int4/uint4 weight, blocked on axis 0) → MatMul with a float activation: block sizes 16 to
    2,048, K a multiple of the block and K with a tail (a last, shorter block)."""
    for tw in FOUR_BIT:
        for block in (16, 32, 64, 128, 256, 512, 1024, 2048):
            for tail_name, k in (("whole", 2 * block if block < 2048 else block), ("tail", block + block // 2 + 3)):
                for zp in ("default", "explicit"):
                    rng = _rng("nbits", tw, block, tail_name, zp)
                    n = 4
                    a = (rng.integers(-15, 16, size=(2, k)) * 2.0**-4).astype(np.float32)
                    w = _codes(rng, tw, (k, n))
                    nb = -(-k // block)
                    sw = (2.0 ** rng.integers(-8, -6, size=(nb, n))).astype(np.float32)
                    inputs = [Arg("a", F32, a), Arg("w", tw, w, initializer=True), _f32("sw", sw, (nb, n))]
                    dq_ins = ("w", "sw")
                    if zp == "explicit":
                        inputs.append(Arg("zw", tw, array(tw, rng.integers(*dtypes.get(tw).qrange, size=(nb, n))),
                                          initializer=True))
                        dq_ins = ("w", "sw", "zw")
                    nodes = [Node("DequantizeLinear", dq_ins, ("fw",), {"axis": 0, "block_size": block}),
                             Node("MatMul", ("a", "fw"), ("y",))]
                    yield _draft("MatMul", f"float32-{tw}-float32", "blocked-weight",
                                 f"block-{block}-k-{k}-zero-point-{zp}", inputs, nodes, "qdq-sum-order")


def dq_gather() -> Iterator[Draft]:
    """DQ(table) → Gather (a quantized embedding, float out) and DQ → Gather → Q: per tensor, per row
    (axis 0) and blocked along the row (axis 1)."""
    idx = Arg("idx", "int64", np.array([[3, 0], [15, 7], [7, 1]], np.int64), initializer=True)
    for tt in ("uint8", "int8", "int4", "uint4"):
        for gran, axis, block in (("per-tensor", 0, 0), ("per-axis", 0, 0), ("blocked", 1, 8)):
            rng = _rng("gather", tt, gran)
            wargs, wattrs = _weight_args(rng, tt, (16, 32), gran, axis, block)
            table = Arg("x", tt, wargs[0].value)  # the table is the pattern's data
            for out in ("float", "requantised"):
                nodes = [_dq("x", "sw", "zw", "f", **wattrs), Node("Gather", ("f", "idx"), ("g",), {"axis": 0})]
                inputs = [table, wargs[1], wargs[2], idx]
                types = f"{tt}-float32"
                if out == "requantised":
                    inputs += [_f32("sy", _scale(rng)), _zp("zy", "uint8", 128)]
                    nodes.append(_q("g", "sy", "zy", "y"))
                    types = f"{tt}-uint8"
                yield _draft("Gather", types, "dequantized-table", f"{gran}-{out}", inputs, nodes, "qdq-graph")


def requant_chains() -> Iterator[Draft]:
    """DQ → Q → DQ → Q: two requantisations a runtime may fold into one (s1 → s2 → s3)."""
    for a, b, c in (("uint8", "uint8", "uint8"), ("int8", "int8", "int8"), ("uint8", "int8", "uint8"),
                    ("uint16", "uint8", "uint16"), ("int16", "int16", "int8")):
        ea = dtypes.get(a)
        lo, hi = ea.qrange
        every = np.arange(lo, hi + 1) if hi - lo < 256 else np.linspace(lo, hi, 2048).round().astype(np.int64)
        x = array(a, every)
        rng = _rng("chain", a, b, c)
        s1 = _scale(rng)
        rels = {"calibrated": (_scale(rng), _scale(rng)), "equal": (s1, s1), "ratio-2-then-half": (s1 * 2, s1),
                "ratio-half-then-2": (s1 / 2, s1), "ratio-3-then-2": (float(np.float32(s1 * 3)), s1 * 2)}
        for rel, (s2, s3) in rels.items():
            for zn, (z2, z3) in (("mid", (_mid(b), _mid(c))), ("odd", (_mid(b) + 1, _mid(c) + 3))):
                nodes = [_dq("x", "s1", "z1", "f1"), _q("f1", "s2", "z2", "q2"), _dq("q2", "s2", "z2", "f2"),
                         _q("f2", "s3", "z3", "y")]
                inputs = [Arg("x", a, x), _f32("s1", s1), _zp("z1", a, _mid(a)), _f32("s2", float(np.float32(s2))),
                          _zp("z2", b, z2), _f32("s3", float(np.float32(s3))), _zp("z3", c, z3)]
                yield _draft("Requant", f"{a}-{b}-{c}", "chain", f"{rel}-zero-points-{zn}", inputs, nodes, "qdq-graph")


#: The opset whose DequantizeLinear (25) first admits 2-bit weights.
TWO_BIT_OPSET = 25


def two_bit_weights() -> Iterator[Draft]:
    """int2/uint2 weights (DequantizeLinear-25): MatMul per tensor, per output channel and blocked,
    Conv per output channel, and the weight-only DQ(blocked) → MatMul with a float activation."""
    from qconform.generators.patterns_conv import GEOMETRIES, conv_draft

    for ta in ("uint8", "int8"):
        for tw in ("int2", "uint2"):
            for gran, axis, block in (("per-tensor", 1, 0), ("per-axis", 1, 0), ("blocked", 0, 16)):
                rng = _rng("two-bit", ta, tw, gran)
                x = _act_codes(rng, ta, (6, 32), 32)
                d = _with_weights("MatMul", "two-bit-weights", gran, ta, tw, x, (32, 8), gran, axis, block, rng,
                                  _sy_for(rng, ta, 32, 2.0**-9), _mid(ta), opset=TWO_BIT_OPSET)
                yield d
            for name, xs, ws, attrs in GEOMETRIES[4:8]:
                rng = _rng("two-bit-conv", ta, tw, name)
                x = _act_codes(rng, ta, xs, int(np.prod(ws[1:])))
                d = conv_draft("two-bit-weights", name, ta, tw, x, ws, attrs, "per-axis", rng,
                               _sy_for(rng, ta, int(np.prod(ws[1:])), 2.0**-9), _mid(ta))
                yield Draft(**{**d.__dict__, "opset": TWO_BIT_OPSET})
    for tw in ("int2", "uint2"):
        for block in (16, 64, 256):
            rng = _rng("nbits-2", tw, block)
            k, n = block * 2 + 5, 4
            a = (rng.integers(-15, 16, size=(2, k)) * 2.0**-4).astype(np.float32)
            nb = -(-k // block)
            sw = (2.0 ** rng.integers(-8, -6, size=(nb, n))).astype(np.float32)
            inputs = [Arg("a", F32, a), Arg("w", tw, _codes(rng, tw, (k, n)), initializer=True), _f32("sw", sw, (nb, n))]
            nodes = [Node("DequantizeLinear", ("w", "sw"), ("fw",), {"axis": 0, "block_size": block}),
                     Node("MatMul", ("a", "fw"), ("y",))]
            yield _draft("MatMul", f"float32-{tw}-float32", "blocked-weight", f"block-{block}-k-{k}", inputs, nodes,
                         "qdq-sum-order", opset=TWO_BIT_OPSET)


def float8_weights() -> Iterator[Draft]:
    """float8 weights (DequantizeLinear-21 admits them): MatMul per tensor and per output channel, and a
    Conv, with weight values between 1/8 and 8 in magnitude (a few binades, so every sum stays exact)."""
    from qconform.generators.patterns_conv import conv_draft

    for tw in ("float8e4m3fn", "float8e5m2"):
        for ta in ("uint8", "int8"):
            for gran in ("per-tensor", "per-axis"):
                rng = _rng("fp8-weights", tw, ta, gran)
                x = _act_codes(rng, ta, (6, 16), 16)
                d = _with_weights("MatMul", "float8-weights", gran, ta, tw, x, (16, 8), gran, 1, 0, rng,
                                  _sy_for(rng, ta, 16, 2.0**-13), _mid(ta))  # weights ~ 2 · s_w
                yield _fp8(d, tw, rng)
                xc = _act_codes(rng, ta, (1, 4, 6, 6), 36)
                d = conv_draft("float8-weights", f"2d-k3x3-pads-1-{gran}", ta, tw, xc, (4, 4, 3, 3),
                               {"pads": [1, 1, 1, 1]}, gran, rng, _sy_for(rng, ta, 36, 2.0**-13), _mid(ta), bias=False)
                yield _fp8(d, tw, rng)


def sixteen_bit_weights() -> Iterator[Draft]:
    """uint16/int16 weights (DequantizeLinear-21 admits them; 16-bit weight and activation models, as
    NPUs run them): MatMul per tensor and per output channel and a Conv, the codes of both operands
    within 96 of their zero points so every sum stays exact (#qdq-sum-order)."""
    from qconform.generators.patterns_conv import conv_draft

    for ta in ("uint16", "int16"):
        for tw in ("uint16", "int16"):
            for gran in ("per-tensor", "per-axis"):
                rng = _rng("w16", ta, tw, gran)
                x = array(ta, _mid(ta) + rng.integers(-96, 97, size=(6, 16)))
                d = _with_weights("MatMul", "sixteen-bit-weights", gran, ta, tw, x, (16, 8), gran, 1, 0, rng,
                                  _sy_for(rng, ta, 16, 2.0**-8), _mid(ta))
                yield _small_weights(d, rng, 96)
                xc = array(ta, _mid(ta) + rng.integers(-96, 97, size=(1, 4, 6, 6)))
                d = conv_draft("sixteen-bit-weights", f"2d-k3x3-pads-1-{gran}", ta, tw, xc, (4, 4, 3, 3),
                               {"pads": [1, 1, 1, 1]}, gran, rng, _sy_for(rng, ta, 36, 2.0**-8), _mid(ta), within=96)
                yield d


def _fp8(d: Draft, tw: str, rng) -> Draft:
    """The draft's float8 weights redrawn as ±2^e·(1 + m/8), e in −3 … 2, and zero point 0."""
    args = {a.name: a for a in d.inputs}
    shape = args["w"].value.shape
    v = np.sign(rng.uniform(-1, 1, size=shape)) * 2.0 ** rng.integers(-3, 3, size=shape) * \
        (1 + rng.integers(0, 4, size=shape) / 8)
    args["w"] = Arg("w", tw, array(tw, v), initializer=True)
    zshape = args["zw"].value.shape
    args["zw"] = Arg("zw", tw, array(tw, np.zeros(zshape)), initializer=True)
    return Draft(**{**d.__dict__, "inputs": tuple(args[a.name] for a in d.inputs)})


__all__ = ["TWO_BIT_OPSET", "float8_weights", "sixteen_bit_weights", "blocked_weights", "two_bit_weights", "dq_gather", "gemm_depth", "large_accumulators", "matmul_depth", "requant_chains"]

"""QDQ patterns: the small graphs of ONNX's QDQ format in which NPUs and fusing runtimes run the
quantization operators (qconform/docs/semantics.md#qdq-graph).

``x → Q → DQ`` (fake quantisation), ``DQ → Q`` (requantisation) and ``DQ … → op → Q`` for the ops
runtimes fuse, each with the edges that matter to a fused integer kernel: results on or next to a
rounding tie after the float op (scales in power-of-two relations, as a quantisation tool that
derives one scale from another makes them), saturation of the output, zero points at the type's
ends, per-axis and blocked weights, 4-bit weights, 16-bit activations and float8 where the opset
admits them, full-range int8 weights (the u8×s8 pair saturation of x86 kernels).

Where the text leaves a sum's order open (MatMul, Gemm, Conv, the pools, Resize's weighted
average), the inputs of the sum are dequantized with power-of-two scales, so every product and
partial sum is exact in float32 and the case has one value whatever the order
(#qdq-sum-order; ``qconform.oracle.graph.exact_sum`` refuses a draft that breaks this); the output
scale is arbitrary, so the requantisation after the sum is where a fused kernel's arithmetic shows.
Every draw is seeded: the corpus is the same bytes on every machine.
"""
from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from qconform import dtypes
from qconform.case import Arg, Draft, Node
from qconform.generators import patterns_conv as conv, patterns_gemm as gemm, patterns_ops as ops, \
    patterns_pool as pool
from qconform.generators.common import array
from qconform.generators.patterns_common import (  # noqa: F401  (re-exported: the pattern helpers)
    ACTS, F32, FOUR_BIT, LEGACY, OPSET, WEIGHTS, _act_codes, _binary, _codes, _dq, _draft, _f32, _mid, _pow2, _q,
    _rng, _scale, _sy_for, _unary, _weight_args, _with_weights, _zp)


# ----------------------------------------------------------------------------------------------
# Q → DQ and DQ → Q
# ----------------------------------------------------------------------------------------------
def fake_quant() -> Iterator[Draft]:
    """x (float32) → Q → DQ → y: a Q/DQ pair is not an identity; y holds x rounded to the grid and
    saturated to the type's range."""
    for t in ("uint8", "int8", "uint16", "int16", "float8e4m3fn"):
        et = dtypes.get(t)
        rng = _rng("fake", t)
        s = _scale(rng, 2.0**-7, 2.0**-2)
        zp = _mid(t)
        if et.is_float:
            lo_v, hi_v = -500.0 * s, 500.0 * s
        else:
            lo_v, hi_v = (et.qrange[0] - zp - 8) * s, (et.qrange[1] - zp + 8) * s
        x = np.float32(rng.uniform(lo_v, hi_v, size=(16, 16)))
        nodes = [_q("x", "s", "zp", "q"), _dq("q", "s", "zp", "y")]
        yield _draft("FakeQuant", f"float32-{t}", "basic", "uniform",
                     [Arg("x", F32, x.astype(np.float32)), _f32("s", s), _zp("zp", t, zp)], nodes, "qdq-graph")
        if not et.is_float:  # exact ties of the division: x = (k + 1/2)·s in float32
            k = rng.integers(et.qrange[0] - zp, et.qrange[1] - zp, size=(16, 16))
            s2 = _pow2(-5)
            ties = ((k + 0.5) * s2).astype(np.float32)
            yield _draft("FakeQuant", f"float32-{t}", "ties", "half-codes",
                         [Arg("x", F32, ties), _f32("s", s2), _zp("zp", t, zp)], nodes, "qdq-graph")
            for end, v in (("low", et.qrange[0]), ("high", et.qrange[1])):
                yield _draft("FakeQuant", f"float32-{t}", "zero-points", f"zero-point-{end}",
                             [Arg("x", F32, x), _f32("s", s), _zp("zp", t, v)], nodes, "qdq-graph")


def fake_quant_attributes() -> Iterator[Draft]:
    """x → Q → DQ with QuantizeLinear-21's attributes: per-axis and blocked scales (axis,
    block_size), the output type named by output_dtype (no zero point), and float8 with saturate = 0."""
    rng = _rng("fake-attrs")
    x = np.float32(rng.uniform(-40, 40, size=(4, 16)))
    s_axis = (2.0 ** rng.integers(-4, 0, size=4)).astype(np.float32)
    for t in ("uint8", "int8", "int4"):
        for gran, sshape, attrs in (("per-axis", (4,), {"axis": 0}), ("blocked", (4, 4), {"axis": 1, "block_size": 4}),
                                    ("per-axis-last", (16,), {"axis": -1})):
            s = np.float32(_scale(rng, 2.0**-4, 2.0**-1)) * np.ones(sshape, np.float32)
            s = (s * (s_axis[:, None] if sshape == (4, 4) else 1)).astype(np.float32) if sshape != (4,) else \
                (s * s_axis).astype(np.float32)
            zp = np.full(sshape, _mid(t) + 1)
            nodes = [_q("x", "s", "zp", "q", **attrs), _dq("q", "s", "zp", "y", **attrs)]
            yield _draft("FakeQuant", f"float32-{t}", "attributes", gran,
                         [Arg("x", F32, x), _f32("s", s, sshape), _zp("zp", t, zp, sshape)], nodes, "qdq-graph")
    for t, code in (("int8", 3), ("uint16", 4), ("int4", 22)):  # output_dtype: y's type with no zero point
        s = _scale(rng, 2.0**-4, 2.0**-1)
        nodes = [Node("QuantizeLinear", ("x", "s"), ("q",), {"output_dtype": code}), Node("DequantizeLinear", ("q", "s"),
                                                                                          ("y",))]
        yield _draft("FakeQuant", f"float32-{t}", "attributes", "output-dtype", [Arg("x", F32, x), _f32("s", s)], nodes,
                     "qdq-graph")
    for t in ("float8e4m3fn", "float8e5m2"):  # saturate = 0: out of range goes to Inf or NaN, not the largest
        s = 2.0**-6
        big = np.float32(rng.uniform(-2.0e6, 2.0e6, size=(4, 16)) * s)
        nodes = [_q("x", "s", "zp", "q", saturate=0), _dq("q", "s", "zp", "y")]
        yield _draft("FakeQuant", f"float32-{t}", "attributes", "saturate-0",
                     [Arg("x", F32, big), _f32("s", s), _zp("zp", t, 0)], nodes, "qdq-graph")


def requant() -> Iterator[Draft]:
    """DQ (s1, z1) → Q (s2, z2): every code through a change of scale (a runtime fuses the pair into
    one requantisation)."""
    combos = [("uint8", "uint8"), ("int8", "int8"), ("uint8", "int8"), ("uint16", "uint16"), ("int16", "int16"),
              ("uint8", "uint16")]
    for a, b in combos:
        ea = dtypes.get(a)
        lo, hi = ea.qrange
        every = np.arange(lo, hi + 1) if hi - lo < 256 else np.linspace(lo, hi, 4096).round().astype(np.int64)
        x = array(a, every)
        nodes = [_dq("x", "s1", "z1", "f"), _q("f", "s2", "z2", "y")]
        for i in range(3):
            rng = _rng("requant", a, b, i)
            s1, s2 = _scale(rng), _scale(rng)
            yield _draft("Requant", f"{a}-{b}", "basic", f"draw-{i}",
                         [Arg("x", a, x), _f32("s1", s1), _zp("z1", a, _mid(a) + int(rng.integers(-3, 4))),
                          _f32("s2", s2), _zp("z2", b, _mid(b) + int(rng.integers(-3, 4)))], nodes, "qdq-graph")
        rng = _rng("requant-ties", a, b)
        s1 = _scale(rng)
        for k in (1, 2, 3):  # s2 = s1·2^k: the quotients are exact multiples of 2^-k, half of them ties
            yield _draft("Requant", f"{a}-{b}", "ties", f"scale-ratio-2^{k}",
                         [Arg("x", a, x), _f32("s1", s1), _zp("z1", a, _mid(a)),
                          _f32("s2", float(np.float32(s1 * 2.0**k))), _zp("z2", b, _mid(b))], nodes, "qdq-graph")
        yield _draft("Requant", f"{a}-{b}", "saturation", "narrower-range",
                     [Arg("x", a, x), _f32("s1", s1), _zp("z1", a, _mid(a)),
                      _f32("s2", float(np.float32(s1 / 3))), _zp("z2", b, _mid(b))], nodes, "qdq-graph")
    # the measured QNN HTP deviation (issue report): uint8 0.0372/121 -> 0.0291/3
    x = array("uint8", np.arange(256))
    yield _draft("Requant", "uint8-uint8", "basic", "reported-0.0372-121-to-0.0291-3",
                 [Arg("x", "uint8", x), _f32("s1", 0.0372), _zp("z1", "uint8", 121), _f32("s2", 0.0291),
                  _zp("z2", "uint8", 3)], [_dq("x", "s1", "z1", "f"), _q("f", "s2", "z2", "y")], "qdq-graph")
    yield _draft("Requant", "uint8-uint8", "basic", "legacy-opset-13",
                 [Arg("x", "uint8", x), _f32("s1", 0.0372), _zp("z1", "uint8", 121), _f32("s2", 0.0291),
                  _zp("z2", "uint8", 3)], [_dq("x", "s1", "z1", "f"), _q("f", "s2", "z2", "y")], "qdq-graph",
                 opset=LEGACY)


# ----------------------------------------------------------------------------------------------
# DQ → op → Q, one input
# ----------------------------------------------------------------------------------------------


def elementwise_unary() -> Iterator[Draft]:
    """Identity, Relu, Clip, Sigmoid: one element in, one out."""
    for op in ("Identity", "Relu", "Clip", "Sigmoid"):
        for t in ACTS:
            rng = _rng("unary", op, t)
            x = _codes(rng, t, (16, 16))
            sx = _scale(rng)
            extra, ins = [], ()
            if op == "Clip":  # bounds just inside the output range (ORT drops a Clip it judges redundant)
                lo, hi = dtypes.get(t).qrange
                extra = [_f32("lo", np.float32((lo - _mid(t) + 3) * sx)), _f32("hi", np.float32((hi - _mid(t) - 5) * sx))]
                ins = ("lo", "hi")
            clause = "qdq-sigmoid" if op == "Sigmoid" else "qdq-graph"
            if op == "Sigmoid":  # the grid a calibrating tool picks for [0, 1]: (max - min) / (qmax - qmin)
                et = dtypes.get(t)
                span = et.qrange[1] - et.qrange[0]
                sy, zy = float(np.float32(1.0 / span)), et.qrange[0]
            else:
                sy, zy = _scale(rng), _mid(t) + int(rng.integers(-2, 3))
            yield _unary(op, "basic", "random", t, x, sx, _mid(t), sy, zy, extra, ins, clause=clause)
            if op != "Sigmoid":
                for k in (1, 2):  # s_y = s_x·2^k: quotients exact multiples of 2^-k
                    yield _unary(op, "ties", f"scale-ratio-2^{k}", t, x, sx, _mid(t),
                                 float(np.float32(sx * 2.0**k)), _mid(t), extra, ins)
                yield _unary(op, "saturation", "output-range-third", t, x, sx, _mid(t), float(np.float32(sx / 3)),
                             _mid(t), extra, ins)
                lo, hi = dtypes.get(t).qrange
                yield _unary(op, "zero-points", "output-zero-point-low", t, x, sx, _mid(t), sx * 2, lo, extra, ins)
    # the measured QNN HTP pattern: Q → DQ → Relu → Q from float input
    rng = _rng("qdq-relu")
    x = np.float32(rng.normal(0, 3, size=(64, 64)))
    nodes = [_q("x", "s1", "z1", "q"), _dq("q", "s1", "z1", "f"), Node("Relu", ("f",), ("g",)),
             _q("g", "s2", "z2", "y")]
    yield _draft("Relu", "float32-uint8", "basic", "from-float-input",
                 [Arg("x", F32, x.astype(np.float32)), _f32("s1", 0.0372), _zp("z1", "uint8", 121),
                  _f32("s2", 0.0291), _zp("z2", "uint8", 3)], nodes, "qdq-graph")


def data_movement() -> Iterator[Draft]:
    """Reshape, Transpose, Gather, MaxPool: the values move, none is computed; with the output Q
    equal to the input DQ a runtime may drop the pair (no value may change)."""
    for t in ACTS:
        rng = _rng("move", t)
        sx = _scale(rng)
        for same in (True, False):
            sy, zy = (sx, _mid(t)) if same else (_scale(rng), _mid(t) + 1)
            fam, nm = ("basic", "same-qparams") if same else ("basic", "other-qparams")
            x = _codes(rng, t, (16, 16))
            yield _unary("Reshape", fam, nm, t, x, sx, _mid(t), sy, zy,
                         [Arg("shape", "int64", np.array([4, 64], np.int64), initializer=True)], ("shape",))
            for az in (0, 1):  # a 0 in shape copies the input's dimension unless allowzero = 1 (no 0 then)
                shape = [0, 4, 4] if az == 0 else [16, 4, 4]
                yield _unary("Reshape", fam, f"{nm}-allowzero-{az}", t, x, sx, _mid(t), sy, zy,
                             [Arg("shape", "int64", np.array(shape, np.int64), initializer=True)], ("shape",),
                             attrs={"allowzero": az})
            x4 = _codes(rng, t, (1, 4, 8, 8))
            yield _unary("Transpose", fam, nm, t, x4, sx, _mid(t), sy, zy, attrs={"perm": [0, 2, 3, 1]})
            yield _unary("Gather", fam, nm, t, x, sx, _mid(t), sy, zy,
                         [Arg("idx", "int64", np.array([3, 0, 15, 7, 7], np.int64), initializer=True)], ("idx",),
                         attrs={"axis": 0})
            x4 = _codes(rng, t, (1, 4, 16, 16))
            yield _unary("MaxPool", fam, nm, t, x4, sx, _mid(t), sy, zy,
                         attrs={"kernel_shape": [2, 2], "strides": [2, 2]})


def pools_and_resize() -> Iterator[Draft]:
    """AveragePool, GlobalAveragePool, Resize: sums in an order the text leaves open, kept exact
    (power-of-two input scale); the division by the count and the requantisation are where kernels
    differ (a reciprocal multiply, the zero point added before rounding)."""
    for t in ACTS:
        rng = _rng("pool", t)
        sx = _pow2(-6)
        x4 = _codes(rng, t, (1, 4, 16, 16), full=False)
        for k, stride, nm in ((2, 2, "kernel-2x2"), (3, 3, "kernel-3x3")):
            xs = x4 if k == 2 else _codes(rng, t, (1, 4, 15, 15), full=False)
            yield _unary("AveragePool", "basic", nm, t, xs, sx, _mid(t), _scale(rng), _mid(t) + 2,
                         attrs={"kernel_shape": [k, k], "strides": [stride, stride]}, clause="qdq-sum-order")
        yield _unary("AveragePool", "ties", "kernel-2x2-scale-ratio-2", t, x4, sx, _mid(t), sx * 2, _mid(t),
                     attrs={"kernel_shape": [2, 2], "strides": [2, 2]}, clause="qdq-sum-order")
        for hw, nm in ((4, "4x4"), (3, "3x3")):
            xg = _codes(rng, t, (1, 64, hw, hw), full=False)
            yield _unary("GlobalAveragePool", "basic", nm, t, xg, sx, _mid(t), _scale(rng), _mid(t) - 1,
                         clause="qdq-sum-order")
        xr = _codes(rng, t, (1, 4, 8, 8), full=False)
        scales = Arg("scales", F32, np.array([1, 1, 2, 2], np.float32), initializer=True)
        yield _unary("Resize", "basic", "nearest-2x", t, xr, sx, _mid(t), _scale(rng), _mid(t), [scales],
                     ("", "scales"), attrs={"mode": "nearest"}, clause="qdq-graph")
        yield _unary("Resize", "basic", "linear-2x-half-pixel", t, xr, sx, _mid(t), _scale(rng), _mid(t), [scales],
                     ("", "scales"), attrs={"mode": "linear", "coordinate_transformation_mode": "half_pixel"},
                     clause="qdq-sum-order")


# ----------------------------------------------------------------------------------------------
# DQ, DQ → op → Q
# ----------------------------------------------------------------------------------------------


def binary() -> Iterator[Draft]:
    """Add, Sub, Mul (and Concat): two dequantized inputs, one requantised result."""
    for op in ("Add", "Sub", "Mul"):
        for t in ACTS:
            for i in range(2):
                rng = _rng("binary", op, t, i)
                a, b = _codes(rng, t, (16, 16)), _codes(rng, t, (16, 16))
                sa, sb = _scale(rng), _scale(rng)
                sy = _scale(rng, 2.0**-6, 2.0**-1) if op == "Mul" else _scale(rng)
                yield _binary(op, "basic", f"draw-{i}", t, t, t, a, b, sa, _mid(t) + 1, sb, _mid(t) - 2, sy, _mid(t))
            rng = _rng("binary-ties", op, t)
            sa = _scale(rng)
            for j, k in ((0, 1), (1, 2), (-1, 1)):  # tie-rich: s_b = s_a·2^j, s_y from s_a (or s_a·s_b)
                a, b = _codes(rng, t, (16, 16)), _codes(rng, t, (16, 16))
                sb = float(np.float32(sa * 2.0**j))
                base = float(np.float32(sa * sb)) if op == "Mul" else sa
                yield _binary(op, "ties", f"scale-relation-{j}-{k}", t, t, t, a, b, sa, _mid(t), sb, _mid(t),
                              float(np.float32(base * 2.0**k)), _mid(t))
            a, b = _codes(rng, t, (16, 16)), _codes(rng, t, (16, 16))
            yield _binary(op, "saturation", "output-scale-small", t, t, t, a, b, sa, _mid(t), sa, _mid(t),
                          float(np.float32(sa / 5)), _mid(t))
            lo, hi = dtypes.get(t).qrange
            for end, v in (("low", lo), ("high", hi)):
                yield _binary(op, "zero-points", f"zero-points-{end}", t, t, t, a, b, sa, v, sa, v, sa * 2, v)
    rng = _rng("binary-legacy")
    a, b = _codes(rng, "uint8", (16, 16)), _codes(rng, "uint8", (16, 16))
    for op in ("Add", "Mul"):
        yield _binary(op, "basic", "legacy-opset-13", "uint8", "uint8", "uint8", a, b, 0.0372, 121, 0.0291, 3,
                      0.05 if op == "Add" else 0.002, 128, opset=LEGACY)
    rng = _rng("binary-f8")
    t = "float8e4m3fn"
    a, b = _codes(rng, t, (16, 16)), _codes(rng, t, (16, 16))
    yield _binary("Add", "floatkinds", "float8e4m3fn", t, t, t, a, b, _scale(rng), 0, _scale(rng), 0, _scale(rng), 0)
    for t in ACTS:
        rng = _rng("concat", t)
        a, b = _codes(rng, t, (8, 16)), _codes(rng, t, (8, 16))
        sa, sb = _scale(rng), _scale(rng)
        yield _binary("Concat", "basic", "two-scales", t, t, t, a, b, sa, _mid(t), sb, _mid(t) + 1, _scale(rng),
                      _mid(t), attrs={"axis": 0})
        yield _binary("Concat", "basic", "same-qparams", t, t, t, a, b, sa, _mid(t), sa, _mid(t), sa, _mid(t),
                      attrs={"axis": 0})


# ----------------------------------------------------------------------------------------------
# MatMul, Gemm, Conv: an activation and constant weights
# ----------------------------------------------------------------------------------------------


def matmul_family() -> Iterator[Draft]:
    """MatMul and Gemm: x (activation) × w (constant weights) [+ bias], requantised."""
    k = 16
    for ta, tws in WEIGHTS.items():
        for tw in tws + (FOUR_BIT if ta in ("uint8", "int8") else ()):
            for gran, axis, block in (("per-tensor", 1, 0), ("per-axis", 1, 0), ("blocked", 0, 4)):
                rng = _rng("matmul", ta, tw, gran)
                x = _act_codes(rng, ta, (16, k), k)
                sy = _sy_for(rng, ta, k)
                fam = "granularity" if gran != "per-tensor" else "basic"
                yield _with_weights("MatMul", fam, gran, ta, tw, x, (k, 16), gran, axis, block, rng, sy, _mid(ta))
            rng = _rng("gemm", ta, tw)
            x = _act_codes(rng, ta, (8, k), k)
            yield _with_weights("Gemm", "basic", "per-axis-bias", ta, tw, x, (k, 8), "per-axis", 1, 0, rng,
                                _sy_for(rng, ta, k), _mid(ta), bias=True)
        rng = _rng("matmul-ties", ta)
        x = _act_codes(rng, ta, (16, k), k)
        tw = tws[-1]
        # s_y = s_x·s_w·2^k: every requantisation an exact multiple of 2^-k (ties for half of them)
        yield _with_weights("MatMul", "ties", "scale-product-2^3", ta, tw, x, (k, 16), "per-tensor", 1, 0, rng,
                            float(2.0**-4 * 2.0**-7 * 2.0**3), _mid(ta))
        yield _with_weights("MatMul", "saturation", "output-scale-small", ta, tw, x, (k, 16), "per-tensor", 1, 0,
                            rng, float(np.float32(_sy_for(rng, ta, k) / 16)), _mid(ta))
        if ta == "uint8":  # the accumulator as the bias alone (weights dequantize to 0), next to a tie
            rng = _rng("gemm-near-tie", ta)
            sy, hits = _near_tie_scale(11)
            x = _act_codes(rng, ta, (8, k), k)
            d = _with_weights("Gemm", "ties", "requantisation-near-tie", ta, "uint8", x, (k, 8), "per-tensor", 1, 0,
                              rng, sy, _mid(ta), bias=True)
            args = {a.name: a for a in d.inputs}
            w = args["w"]
            codes = np.resize(np.array(hits + [-h for h in hits]), 8).astype(np.int32)
            args["w"] = Arg("w", w.type, np.full_like(w.value, args["zw"].value), initializer=True)
            args["bias"] = Arg("bias", "int32", codes, initializer=True)
            args["sb"] = _f32("sb", np.full(8, 2.0**-11, np.float32), (8,))
            args["sx"] = _f32("sx", 2.0**-4)
            args["sw"] = _f32("sw", 2.0**-7)
            yield Draft(**{**d.__dict__, "inputs": tuple(args[a.name] for a in d.inputs)})
        rng = _rng("gemm-bias-scale", ta)
        x = _act_codes(rng, ta, (8, k), k)
        yield _with_weights("Gemm", "basic", "bias-scale-not-product", ta, tws[-1], x, (k, 8), "per-axis", 1, 0, rng,
                            _sy_for(rng, ta, k), _mid(ta), bias=True, bias_scale_factor=0.75)
    rng = _rng("matmul-legacy")
    x = _codes(rng, "uint8", (16, k))
    yield _with_weights("MatMul", "basic", "legacy-opset-13", "uint8", "int8", x, (k, 16), "per-tensor", 1, 0, rng,
                        _sy_for(rng, "uint8", k), 128, opset=LEGACY)


def _near_tie_scale(k: int) -> tuple[float, list[int]]:
    """An output scale s_y and accumulators acc for which acc·2^-k / s_y, computed as the graph does
    (one float32 division of the exact float32 value), and acc · fl32(2^-k / s_y), as a fused kernel's
    float32 multiplier does, round to different integers: a requantisation within 2^-24 of a tie
    (searched, seeded; such accumulators are rare, about one in 4,000)."""
    rng = _rng("near-tie-scale", k)
    acc = np.arange(-4096, 4096)
    for _ in range(20000):
        sy = np.float32(2.0**-k * rng.uniform(20, 40))
        x = (acc * 2.0**-k).astype(np.float32)
        graph = np.rint((x.astype(np.float64) / np.float64(sy)).astype(np.float32))
        fused = np.rint((acc.astype(np.float32) * np.float32(np.float32(2.0**-k) / sy)).astype(np.float32))
        exact = np.rint(acc * 2.0**-k / np.float64(sy))  # the division's other reading (quotient-exact)
        hits = acc[(graph != fused) & (exact != fused) & (np.abs(graph) <= 100)]
        if len(hits) >= 2:
            return float(sy), [int(a) for a in hits]
    raise RuntimeError("no near-tie output scale found")


def conv_family() -> Iterator[Draft]:
    """Conv: a 3×3 convolution with per-output-channel weights and an int32 bias."""
    for ta, tws in WEIGHTS.items():
        for tw in tws + (FOUR_BIT if ta in ("uint8", "int8") else ()):
            for gran in ("per-tensor", "per-axis"):
                rng = _rng("conv", ta, tw, gran)
                x = _act_codes(rng, ta, (1, 4, 8, 8), 36)
                yield _with_weights("Conv", "granularity" if gran == "per-axis" else "basic", f"{gran}-bias", ta, tw,
                                    x, (8, 4, 3, 3), gran, 0, 0, rng, _sy_for(rng, ta, 36), _mid(ta),
                                    attrs={"kernel_shape": [3, 3]}, bias=True)


FAMILIES: dict[str, Callable[[], Iterator[Draft]]] = {
    "fake-quant": fake_quant,
    "fake-quant-attributes": fake_quant_attributes,
    "requant": requant,
    "unary": elementwise_unary,
    "data-movement": data_movement,
    "pools-resize": pools_and_resize,
    "binary": binary,
    "matmul-gemm": matmul_family,
    "conv": conv_family,
}


def depth_families() -> dict[str, Callable[[], Iterator[Draft]]]:
    """The patterns at the depth of the single ops and the fused patterns (issue 64), in modules of
    their own (patterns_<group>.py, on the helpers of patterns_common.py)."""
    return {"conv-depth": conv.conv_depth, "conv-ties": conv.conv_ties, "conv-activations": conv.conv_activations,
            "conv-large-accumulators": conv.conv_large_accumulators,
            "pool-depth": pool.pool_depth, "global-pool": pool.global_pool, "gemm-depth": gemm.gemm_depth,
            "matmul-depth": gemm.matmul_depth, "large-accumulators": gemm.large_accumulators,
            "blocked-weights": gemm.blocked_weights, "dq-gather": gemm.dq_gather,
            "requant-chains": gemm.requant_chains, "two-bit-weights": gemm.two_bit_weights,
            "float8-weights": gemm.float8_weights, "sixteen-bit-weights": gemm.sixteen_bit_weights, "leaky-relu": ops.leaky_relu, "hard-swish": ops.hard_swish,
            "softmax": ops.softmax, "first-ops-depth": ops.first_ops_depth,
            "where": ops.where, "movements": ops.movements, "split": ops.split, "resize-depth": ops.resize_depth}


def entries() -> dict[str, Callable[[], Iterator[Draft]]]:
    """One ``generators.FAMILIES`` entry per pattern group, keyed "patterns:<group>"."""
    return {f"patterns:{k}": v for k, v in {**FAMILIES, **depth_families()}.items()}


__all__ = ["FAMILIES", "LEGACY", "OPSET", "entries"]

"""Builders for small QDQ patterns: DQ(inputs) -> op -> Q, plus Q->DQ and DQ->Q.

Output quantisation parameters are calibrated like a quantisation tool would (min/max of the float
result of the same graph without its final Q), so outputs use the code range instead of saturating.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import TP, cpu_session, helper, init, model, np, onnx, vi  # noqa: E402

ELEM = {"uint8": TP.UINT8, "int8": TP.INT8, "uint16": TP.UINT16, "int16": TP.INT16,
        "int4": TP.INT4, "uint4": TP.UINT4, "int32": TP.INT32}
RANGE = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767),
         "int4": (-8, 7), "uint4": (0, 15), "int32": (-2**31, 2**31 - 1)}
NP = {"uint8": np.uint8, "int8": np.int8, "uint16": np.uint16, "int16": np.int16, "int32": np.int32,
      "int4": np.int8, "uint4": np.uint8}  # 4-bit codes are held unpacked; make_tensor packs them

OPS = ["Identity", "Relu", "Clip", "Add", "Sub", "Mul", "MatMul", "Gemm", "Conv", "MaxPool", "AveragePool",
       "GlobalAveragePool", "Concat", "Reshape", "Transpose", "Gather", "Resize", "Sigmoid"]
WEIGHTED = {"MatMul", "Gemm", "Conv"}


def _codes(rng, t, shape):
    lo, hi = RANGE[t]
    return rng.integers(lo, hi + 1, size=shape).astype(NP[t])


def _zp(t, rng, symmetric=False):
    lo, hi = RANGE[t]
    if symmetric or lo < 0:
        return 0
    return int(rng.integers(lo + (hi - lo) // 4, hi - (hi - lo) // 4))


def _zp_tensor(name, t, value, shape=None):
    """A zero point initializer of type t (sub-byte types through make_tensor)."""
    vals = np.full(shape or (), value)
    if t in ("int4", "uint4"):
        return helper.make_tensor(name, ELEM[t], list(vals.shape), vals.ravel().tolist())
    return init(name, vals.astype(NP[t]))


def _weight_tensor(name, t, codes):
    if t in ("int4", "uint4"):
        return helper.make_tensor(name, ELEM[t], list(codes.shape), codes.ravel().astype(int).tolist())
    return init(name, codes.astype(NP[t]))


class Pattern:
    """One pattern: graph bytes, feeds, description."""

    def __init__(self, name, nodes, inputs, outputs, inits, feeds, opset=21):
        self.name, self.feeds = name, feeds
        self.nodes, self.inputs, self.outputs, self.inits, self.opset = nodes, inputs, outputs, inits, opset

    def bytes(self) -> bytes:
        return model(self.nodes, self.inputs, self.outputs, self.inits, self.opset)


def build(op: str, act: str = "uint8", wt: str | None = None, granularity: str = "tensor",
          seed: int = 0, opset: int = 21, prefix: str = "", bias_scale: str = "product",
          same_qparams: bool = False, mode: str = "linear") -> Pattern:
    """DQ(act inputs[, weight]) -> op -> Q(act). granularity: tensor | axis | block (weights only).

    bias_scale: "product" = s_a*s_w (per channel with per-axis weights; what quantisation tools emit),
    "other" = s_a/100 (legal ONNX, but not the product), "none" = no bias input.
    same_qparams: the output Q reuses the input DQ's scale and zero point (single-input ops), the
    case where runtimes drop the Q/DQ pair around data-movement ops.
    prefix renames every tensor and node so many patterns can share one graph (packing)."""
    rng = np.random.default_rng(seed)
    P = prefix
    wt = wt or act
    nodes, inputs, inits, feeds = [], [], [], {}
    s_in = float(np.float32(rng.uniform(0.01, 0.05)))
    if act in ("uint16", "int16"):
        s_in = float(np.float32(s_in / 256))

    def act_input(tag, shape):
        name = f"{P}{tag}"
        zp = _zp(act, rng)
        sc = float(np.float32(s_in * rng.uniform(0.8, 1.25)))
        inputs.append(vi(name, ELEM[act], shape))
        inits.extend([init(f"{name}_s", np.float32(sc)), _zp_tensor(f"{name}_z", act, zp)])
        feeds[name] = _codes(rng, act, shape)
        nodes.append(helper.make_node("DequantizeLinear", [name, f"{name}_s", f"{name}_z"], [f"{name}_f"],
                                      name=f"{name}_DQ"))
        return f"{name}_f", sc

    wscale = {}

    def weight(shape, axis, block_axis=None):
        name = f"{P}W"
        codes = _codes(rng, wt, shape)
        zp = _zp(wt, rng, symmetric=True)
        attrs = {}
        if granularity == "tensor":
            sc = init(f"{name}_s", np.float32(rng.uniform(0.002, 0.02)))
            zpt = _zp_tensor(f"{name}_z", wt, zp)
        elif granularity == "axis":
            n = shape[axis]
            sc = init(f"{name}_s", rng.uniform(0.002, 0.02, n).astype(np.float32))
            zpt = _zp_tensor(f"{name}_z", wt, zp, (n,))
            attrs["axis"] = axis
        else:  # block along block_axis, block size 16
            bs = 16
            sshape = list(shape)
            sshape[block_axis] = -(-shape[block_axis] // bs)
            sc = init(f"{name}_s", rng.uniform(0.002, 0.02, sshape).astype(np.float32))
            zpt = _zp_tensor(f"{name}_z", wt, zp, tuple(sshape))
            attrs.update(axis=block_axis, block_size=bs)
        inits.extend([_weight_tensor(name, wt, codes), sc, zpt])
        wscale["s"], wscale["axis"] = np.asarray(onnx.numpy_helper.to_array(sc)), granularity
        nodes.append(helper.make_node("DequantizeLinear", [name, f"{name}_s", f"{name}_z"], [f"{name}_f"],
                                      name=f"{name}_DQ", **attrs))
        return f"{name}_f"

    def bias(n, s_a):
        """int32 bias; scale s_a*s_w (per channel for per-axis weights) or, "other", s_a/100."""
        if bias_scale == "none":
            return None
        name = f"{P}bias"
        ws = wscale["s"]
        if bias_scale == "other":
            bs, attrs = np.float32(s_a * 0.01), {}
        elif wscale["axis"] == "axis":
            bs, attrs = (np.float32(s_a) * ws).astype(np.float32), {"axis": 0}
        elif wscale["axis"] == "tensor":
            bs, attrs = np.float32(np.float32(s_a) * ws), {}
        else:  # blocked weights have no single product scale: use the first block's
            bs, attrs = np.float32(np.float32(s_a) * ws.ravel()[0]), {}
        inits.extend([init(name, rng.integers(-2000, 2000, n).astype(np.int32)), init(f"{name}_s", bs)])
        nodes.append(helper.make_node("DequantizeLinear", [name, f"{name}_s"], [f"{name}_f"],
                                      name=f"{name}_DQ", **attrs))
        return f"{name}_f"

    y = f"{P}y_f"
    attrs = {}
    if op in ("Identity", "Relu", "Sigmoid"):
        x, _ = act_input("x", [1, 4, 8, 8])
        args = [x]
    elif op == "Clip":
        x, _ = act_input("x", [1, 4, 8, 8])
        inits.extend([init(f"{P}cmin", np.float32(-1.0)), init(f"{P}cmax", np.float32(2.0))])
        args = [x, f"{P}cmin", f"{P}cmax"]
    elif op in ("Add", "Sub", "Mul"):
        a, _ = act_input("a", [1, 4, 8, 8])
        b, _ = act_input("b", [1, 4, 8, 8])
        args = [a, b]
    elif op == "Concat":
        a, _ = act_input("a", [1, 4, 8, 8])
        b, _ = act_input("b", [1, 4, 8, 8])
        args, attrs = [a, b], {"axis": 1}
    elif op == "MatMul":
        a, sa = act_input("a", [1, 16, 32])
        args = [a, weight([32, 16], axis=1, block_axis=0)]
    elif op == "Gemm":
        a, sa = act_input("a", [4, 32])
        args, attrs = [a, weight([16, 32], axis=0, block_axis=1), bias(16, sa)], {"transB": 1}
        args = [x for x in args if x]
    elif op == "Conv":
        a, sa = act_input("x", [1, 4, 8, 8])
        args = [a, weight([8, 4, 3, 3], axis=0, block_axis=1), bias(8, sa)]
        args = [x for x in args if x]
        attrs = {"pads": [1, 1, 1, 1]}
    elif op in ("MaxPool", "AveragePool"):
        x, _ = act_input("x", [1, 4, 8, 8])
        args, attrs = [x], {"kernel_shape": [2, 2], "strides": [2, 2]}
    elif op == "GlobalAveragePool":
        x, _ = act_input("x", [1, 4, 8, 8])
        args = [x]
    elif op == "Reshape":
        x, _ = act_input("x", [1, 4, 8, 8])
        inits.append(init(f"{P}shape", np.array([1, 16, 16], np.int64)))
        args = [x, f"{P}shape"]
    elif op == "Transpose":
        x, _ = act_input("x", [1, 4, 8, 8])
        args, attrs = [x], {"perm": [0, 2, 3, 1]}
    elif op == "Gather":
        x, _ = act_input("x", [1, 4, 8, 8])
        inits.append(init(f"{P}idx", np.array([3, 0, 2], np.int64)))
        args, attrs = [x, f"{P}idx"], {"axis": 1}
    elif op == "Resize":
        x, _ = act_input("x", [1, 4, 8, 8])
        inits.append(init(f"{P}scales", np.array([1, 1, 2, 2], np.float32)))
        args, attrs = [x, "", f"{P}scales"], {"mode": mode}
    else:
        raise ValueError(op)
    nodes.append(helper.make_node(op, args, [y], name=f"{P}{op}", **attrs))
    # calibrate the output Q on the float result (min/max, like a calibrator)
    float_out = vi(y, TP.FLOAT, None)
    fm = model(nodes, inputs, [float_out], inits, opset)
    f = cpu_session(fm).run(None, feeds)[0]
    lo, hi = RANGE[act]
    fmin, fmax = min(float(f.min()), 0.0), max(float(f.max()), 0.0)
    sy = np.float32((fmax - fmin) / (hi - lo) or 1.0)
    zy = int(np.clip(round(lo - fmin / float(sy)), lo, hi))
    if same_qparams:
        src = next(i for i in inits if i.name.endswith("_s") and not i.name.startswith(f"{P}W"))
        sy = np.float32(onnx.numpy_helper.to_array(src))
        zy = int(onnx.numpy_helper.to_array(next(i for i in inits if i.name == src.name[:-2] + "_z")))
    inits.extend([init(f"{P}y_s", sy), _zp_tensor(f"{P}y_z", act, zy)])
    nodes.append(helper.make_node("QuantizeLinear", [y, f"{P}y_s", f"{P}y_z"], [f"{P}y"], name=f"{P}{op}_Q"))
    outputs = [vi(f"{P}y", ELEM[act], None)]
    name = f"{op}/{act}/{wt if op in WEIGHTED else '-'}/{granularity if op in WEIGHTED else '-'}"
    if op in ("Gemm", "Conv") and bias_scale != "product":
        name += f"/bias-{bias_scale}"
    if same_qparams:
        name += "/same-qparams"
    if op == "Resize":
        name += f"/{mode}"
    return Pattern(name, nodes, inputs, outputs, inits, feeds, opset)


def q_dq(act="uint8", seed=0, prefix="", n=256) -> Pattern:
    rng = np.random.default_rng(seed)
    P = prefix
    sc, zp = float(np.float32(rng.uniform(0.01, 0.05))), _zp(act, rng)
    lo, hi = RANGE[act]
    x = rng.uniform((lo - zp) * sc * 1.1, (hi - zp) * sc * 1.1, n).astype(np.float32)
    nodes = [helper.make_node("QuantizeLinear", [f"{P}x", f"{P}s", f"{P}z"], [f"{P}q"], name=f"{P}Q"),
             helper.make_node("DequantizeLinear", [f"{P}q", f"{P}s", f"{P}z"], [f"{P}y"], name=f"{P}DQ")]
    return Pattern(f"Q-DQ/{act}", nodes, [vi(f"{P}x", TP.FLOAT, [n])], [vi(f"{P}y", TP.FLOAT, [n])],
                   [init(f"{P}s", np.float32(sc)), _zp_tensor(f"{P}z", act, zp)], {f"{P}x": x})


def dq_q(act="uint8", seed=0, prefix="", out=None) -> Pattern:
    rng = np.random.default_rng(seed)
    P = prefix
    out = out or act
    lo, hi = RANGE[act]
    a = np.arange(lo, hi + 1).astype(NP[act]) if hi - lo < 4096 else _codes(rng, act, [4096])
    s1, s2 = (float(np.float32(rng.uniform(0.01, 0.05))) for _ in range(2))
    nodes = [helper.make_node("DequantizeLinear", [f"{P}a", f"{P}s1", f"{P}z1"], [f"{P}f"], name=f"{P}DQ"),
             helper.make_node("QuantizeLinear", [f"{P}f", f"{P}s2", f"{P}z2"], [f"{P}y"], name=f"{P}Q")]
    return Pattern(f"DQ-Q/{act}->{out}", nodes, [vi(f"{P}a", ELEM[act], [a.size])], [vi(f"{P}y", ELEM[out], [a.size])],
                   [init(f"{P}s1", np.float32(s1)), _zp_tensor(f"{P}z1", act, _zp(act, rng)),
                    init(f"{P}s2", np.float32(s2)), _zp_tensor(f"{P}z2", out, _zp(out, rng))], {f"{P}a": a})

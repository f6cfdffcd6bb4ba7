"""QDQ Conv patterns at depth (issue 64): every attribute of Conv that changes its arithmetic
(strides, pads, auto_pad, dilations, group up to depthwise, kernel shapes, 1-D/2-D/3-D), per-tensor
and per-channel weights of every type the opset admits, ties after the convolution with odd and
even output zero points, the scale relations that invite a runtime to fold a pair, the fused
activations (Conv → Relu/Clip → Q: onnxruntime's ReluQuantFusion and ClipQuantFusion,
onnxruntime/core/optimizer/qdq_transformer/relu_quantizelinear.cc, clip_quantizelinear.cc) and
the residual Add of two convolutions' quantized outputs (BinaryNodeGroupSelector → QLinearAdd,
qdq_selector_action_transformer.cc). Power-of-two input and weight scales keep every sum exact
for every order (#qdq-sum-order)."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from qconform import dtypes
from qconform.case import Arg, Draft, Node
from qconform.generators.common import array
from qconform.generators.patterns_common import (FOUR_BIT, WEIGHTS, _act_codes, _dq, _draft, _f32, _mid, _q, _rng,
                                          _weight_args, _zp)

#: (name, x shape, w shape, attributes): the geometries of a convolution the text's attributes give.
GEOMETRIES: tuple[tuple[str, tuple, tuple, dict], ...] = (
    ("1d-k3", (1, 4, 10), (4, 4, 3), {}),
    ("1d-k3-stride-2-pads", (1, 4, 11), (4, 4, 3), {"strides": [2], "pads": [1, 1]}),
    ("1d-k3-dilation-2", (1, 4, 12), (4, 4, 3), {"dilations": [2]}),
    ("1d-k1", (1, 4, 6), (4, 4, 1), {}),
    ("2d-k1x1", (1, 4, 5, 5), (4, 4, 1, 1), {}),
    ("2d-k3x3-pads-1", (1, 4, 6, 6), (4, 4, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("2d-k3x3-stride-2-pads-1", (1, 4, 7, 7), (4, 4, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("2d-k5x5-pads-2", (1, 2, 6, 6), (4, 2, 5, 5), {"pads": [2, 2, 2, 2]}),
    ("2d-k1x3-pads", (1, 4, 5, 6), (4, 4, 1, 3), {"pads": [0, 1, 0, 1]}),
    ("2d-k3x1", (1, 4, 6, 5), (4, 4, 3, 1), {}),
    ("2d-stride-1x2", (1, 4, 6, 7), (4, 4, 3, 3), {"strides": [1, 2]}),
    ("2d-dilation-2", (1, 4, 7, 7), (4, 4, 3, 3), {"dilations": [2, 2]}),
    ("2d-dilation-2x1-pads", (1, 4, 6, 6), (4, 4, 3, 3), {"dilations": [2, 1], "pads": [2, 1, 2, 1]}),
    ("2d-asymmetric-pads", (1, 4, 6, 6), (4, 4, 3, 3), {"pads": [0, 1, 2, 0]}),
    ("2d-same-upper-stride-2", (1, 4, 6, 6), (4, 4, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ("2d-same-lower-stride-2", (1, 4, 6, 6), (4, 4, 4, 4), {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    ("2d-same-upper-k2", (1, 4, 5, 5), (4, 4, 2, 2), {"auto_pad": "SAME_UPPER"}),
    ("2d-valid", (1, 4, 6, 6), (4, 4, 3, 3), {"auto_pad": "VALID", "pads": None}),
    ("2d-group-2", (1, 4, 6, 6), (4, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    ("2d-depthwise", (1, 4, 6, 6), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
    ("2d-depthwise-multiplier-2", (1, 4, 6, 6), (8, 1, 3, 3), {"group": 4}),
    ("2d-depthwise-k5-stride-2", (1, 4, 9, 9), (4, 1, 5, 5), {"group": 4, "strides": [2, 2], "pads": [2, 2, 2, 2]}),
    ("2d-batch-2", (2, 4, 5, 5), (4, 4, 3, 3), {}),
    ("3d-k3-pads-1", (1, 2, 4, 4, 4), (4, 2, 3, 3, 3), {"pads": [1] * 6}),
    ("3d-k1", (1, 4, 3, 3, 3), (4, 4, 1, 1, 1), {}),
    ("3d-k2-stride-2", (1, 2, 4, 4, 4), (4, 2, 2, 2, 2), {"strides": [2, 2, 2]}),
    ("3d-depthwise", (1, 4, 3, 4, 4), (4, 1, 3, 3, 3), {"group": 4, "pads": [1] * 6}),
)


def _attrs(attrs: dict, w_shape: tuple) -> dict:
    out = {k: v for k, v in attrs.items() if v is not None}
    out["kernel_shape"] = list(w_shape[2:])
    return out


def conv_draft(family: str, name: str, ta: str, tw: str, x: np.ndarray, w_shape: tuple, attrs: dict,
               gran: str, rng, sy: float, zy: int, bias: bool = True, act: str = "", residual: bool = False,
               sw_fixed: float | None = None, within: int = 0) -> Draft:
    """DQ(x), DQ(w)[, DQ(bias)] → Conv [→ Relu | Clip] → Q; ``residual``: → Q → DQ → Add(DQ(x')) → Q.
    ``within``: weight codes at most this far from their zero point (sums small enough to hold many
    ties without saturating)."""
    sx = 2.0**-4
    wargs, wattrs = _weight_args(rng, tw, w_shape, gran, 0)
    if within:
        zw = int(np.asarray(wargs[2].value).reshape(-1)[0])
        wargs[0] = Arg("w", tw, array(tw, zw + rng.integers(-within, within + 1, size=w_shape)), initializer=True)
    if sw_fixed is not None:
        wargs[1] = _f32("sw", np.full(wargs[1].value.shape, sw_fixed, np.float32), wargs[1].value.shape)
    nodes = [_dq("x", "sx", "zx", "fx"), _dq("w", "sw", "zw", "fw", **wattrs)]
    inputs: list[Arg] = [Arg("x", ta, x), _f32("sx", sx), _zp("zx", ta, _mid(ta)), *wargs]
    ins = ["fx", "fw"]
    m = w_shape[0]
    if bias:
        sw = wargs[1].value.astype(np.float64)
        per = sw if sw.ndim == 1 else np.full(m, float(sw))
        inputs += [Arg("bias", "int32", rng.integers(-2**10, 2**10, size=m).astype(np.int32), initializer=True),
                   _f32("sb", (sx * per).astype(np.float32), (m,)), Arg("zb", "int32", np.zeros(m, np.int32),
                                                                      initializer=True)]
        nodes.append(_dq("bias", "sb", "zb", "fb", axis=0))
        ins.append("fb")
    nodes.append(Node("Conv", tuple(ins), ("g",), _attrs(attrs, w_shape)))
    out = "g"
    if act == "relu":
        nodes.append(Node("Relu", ("g",), ("h",)))
        out = "h"
    elif act.startswith("clip"):
        # bounds inside the output's range (half of it above zero is sy·span/2): ReLU6-like [0, upper]
        # and a band around zero
        half = sy * (dtypes.get(ta).qrange[1] - dtypes.get(ta).qrange[0]) / 2
        lo, hi = (0.0, float(np.float32(0.5 * half))) if act == "clip-0-upper" else \
            (float(np.float32(-0.25 * half)), float(np.float32(0.375 * half)))
        inputs += [_f32("lo", lo), _f32("hi", hi)]
        nodes.append(Node("Clip", ("g", "lo", "hi"), ("h",)))
        out = "h"
    if residual:  # the convolution's output quantized, then added to the block's input, requantised
        inputs += [_f32("sq", sy), _zp("zq", ta, zy)]
        nodes += [_q(out, "sq", "zq", "q"), _dq("q", "sq", "zq", "fq"), Node("Add", ("fq", "fx"), ("r",))]
        out = "r"
    inputs += [_f32("sy", sy), _zp("zy", ta, zy)]
    nodes.append(_q(out, "sy", "zy", "y"))
    op = "Add" if residual else "Conv"
    return _draft(op, f"{ta}-{tw}-{ta}", family, name, inputs, nodes, "qdq-sum-order")


def _sy(rng, ta: str, k: int, tw: str = "int8") -> float:
    """An output scale about the spread of a K-term sum of full-range codes (weights of ``tw``)."""
    span = dtypes.get(ta).qrange[1] - dtypes.get(ta).qrange[0]
    wmax = max(abs(v) for v in dtypes.get(tw).qrange) if dtypes.get(tw).is_integer else 128
    wmax = min(wmax, 128)
    return float(np.float32(rng.uniform(0.5, 2.0) * 2.0**-11 * wmax * np.sqrt(k) * 2 * 255 / span))


def _k(w_shape: tuple) -> int:
    return int(np.prod(w_shape[1:]))


def conv_depth() -> Iterator[Draft]:
    """Every geometry × activation and weight type × per-tensor and per-channel weights."""
    for ta, tws in WEIGHTS.items():
        four = FOUR_BIT if ta in ("uint8", "int8") else ()
        for tw in tws + four:
            for name, xs, ws, attrs in GEOMETRIES:
                if dtypes.get(ta).bits > 8 and not name.startswith(("2d-k3x3-pads", "2d-depthwise", "1d-k3",
                                                                       "3d-k1", "2d-same-upper-stride")):
                    continue
                for gran in ("per-tensor", "per-axis"):
                    rng = _rng("conv-depth", ta, tw, name, gran)
                    x = _act_codes(rng, ta, xs, _k(ws))
                    yield conv_draft("geometry" if gran == "per-axis" else "geometry-per-tensor", name, ta, tw, x,
                                     ws, attrs, gran, rng, _sy(rng, ta, _k(ws), tw), _mid(ta) + int(rng.integers(-3, 4)),
                                     bias=bool(rng.integers(0, 2)) or "depthwise" in name)


def conv_ties() -> Iterator[Draft]:
    """s_y = 2·s_x·s_w: every odd accumulator lands on a half after the convolution, with even and odd
    output zero points; s_y = s_x·s_w (one code per accumulator unit: a runtime may fold)."""
    for ta in ("uint8", "int8", "uint16", "int16"):
        tw = WEIGHTS[ta][-1]
        for name, xs, ws, attrs in GEOMETRIES[::3]:
            rng = _rng("conv-ties", ta, name)
            x = array(ta, _mid(ta) + rng.integers(-4, 5, size=xs))  # small sums: ties without saturation
            for rel, sy in (("half", 2.0**-10), ("quarter", 2.0**-9), ("unit", 2.0**-11)):
                for parity, zy in (("even", _mid(ta)), ("odd", _mid(ta) + 1)):
                    yield conv_draft("ties", f"{name}-{rel}-zero-point-{parity}", ta, tw, x, ws, attrs, "per-tensor",
                                     _rng("conv-ties", ta, name, rel), sy, zy, sw_fixed=2.0**-7, within=3,
                                     bias=False)


def conv_activations() -> Iterator[Draft]:
    """Conv → Relu/Clip → Q (fused activations) and the residual Add of a quantized convolution and its
    input."""
    for ta, tws in WEIGHTS.items():
        for tw in tws[-1:] + (("int4",) if ta in ("uint8", "int8") else ()):
            for name, xs, ws, attrs in GEOMETRIES[1::4]:
                rng = _rng("conv-act", ta, tw, name)
                x = _act_codes(rng, ta, xs, _k(ws))
                sy = _sy(rng, ta, _k(ws), tw)
                lo = dtypes.get(ta).qrange[0]
                for act in ("relu", "clip-0-upper", "clip-wide"):
                    for zn, zy in (("qmin", lo), ("mid-odd", _mid(ta) + 1)):
                        yield conv_draft("fused-activation", f"{name}-{act}-{zn}", ta, tw, x, ws, attrs, "per-axis",
                                         _rng("conv-act", ta, tw, name, act), sy, zy, act=act)
            for name, xs, ws, attrs in GEOMETRIES:
                same = ws[0] == xs[1] and attrs.get("strides") is None and (
                    attrs.get("pads") or attrs.get("auto_pad") == "SAME_UPPER" or ws[2:] == (1,) * (len(ws) - 2))
                pads = attrs.get("pads") or []
                if pads[:len(pads) // 2] != pads[len(pads) // 2:]:
                    continue
                if not same or ws[2:] != tuple([ws[2]] * (len(ws) - 2)) or any(
                        d != 1 for d in attrs.get("dilations", [1])):
                    continue
                rng = _rng("conv-residual", ta, tw, name)
                x = _act_codes(rng, ta, xs, _k(ws))
                for rel, sy in (("calibrated", _sy(rng, ta, _k(ws), tw)), ("equal-to-input", 2.0**-4)):
                    yield conv_draft("residual-conv", f"{name}-{rel}", ta, tw, x, ws, attrs, "per-axis",
                                     _rng("conv-res", ta, tw, name, rel), sy, _mid(ta), residual=True)


def conv_large_accumulators() -> Iterator[Draft]:
    """128 input channels × 3×3 (K = 1,152) with activation and weight codes 16 apart around their zero
    points: the raw sums Σx·w an integer kernel forms pass 2^24 while every order of the float sum
    stays exact (#qdq-sum-order, accumulators past 2^24)."""
    for ta, tw in (("uint8", "int8"), ("int8", "int8"), ("uint8", "uint8")):
        for gran in ("per-tensor", "per-axis"):
            rng = _rng("conv-big-acc", ta, tw, gran)
            ea, ew = dtypes.get(ta), dtypes.get(tw)
            za, zw = _mid(ta), _mid(tw)
            x = np.clip(za + 16 * rng.integers(-8, 8, size=(1, 128, 4, 4)), *ea.qrange)
            ws = (4, 128, 3, 3)
            d = conv_draft("large-accumulator", gran, ta, tw, array(ta, x), ws, {"pads": [1, 1, 1, 1]}, gran, rng,
                           2.0**-4 * 2.0**-7 * 2.0**10 * float(rng.uniform(1, 2)), za, bias=False)
            args = {a.name: a for a in d.inputs}
            w = np.clip(zw + 16 * rng.integers(-8, 8, size=ws), *ew.qrange)
            args["w"] = Arg("w", tw, array(tw, w), initializer=True)
            args["zw"] = _zp("zw", tw, np.full(args["zw"].value.shape, zw), args["zw"].value.shape)
            yield Draft(**{**d.__dict__, "inputs": tuple(args[a.name] for a in d.inputs)})


__all__ = ["GEOMETRIES", "conv_activations", "conv_large_accumulators", "conv_depth", "conv_draft", "conv_ties"]

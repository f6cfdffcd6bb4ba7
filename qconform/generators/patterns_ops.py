"""QDQ patterns of the ops runtimes fuse that the first patterns lacked (issue 64), each cited where
onnxruntime selects it (onnxruntime/core/optimizer/qdq_transformer/selectors_actions/
qdq_selector_action_transformer.cc): LeakyRelu and Softmax (UnarySelector → QLinearLeakyRelu,
QLinearSoftmax), Slice, Squeeze, Unsqueeze (DropQDQNodesSelector: the pair dropped), Split
(SplitSelector, dropSplitQDQ), Pad, DepthToSpace and HardSwish (QDQ groups of the execution
providers' shared selectors, selectors_actions/shared/utils.cc), and Resize at every mode and
coordinate transformation (DropQDQNodesSelector "drop_no_int16_support"). Each with a calibrated
output scale, ties after the op (s_y = s_x·2^k) with odd and even zero points, and equal scales
and zero points (the relation that lets a runtime drop the pair)."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from qconform import dtypes
from qconform.case import Arg, Draft, Node
from qconform.generators.common import array
from qconform.generators.patterns_common import (ACTS, _binary, _codes, _dq, _draft, _f32, _mid, _q, _rng, _scale,
                                          _unary, _zp)

I64 = "int64"


def _i64(name: str, v) -> Arg:
    return Arg(name, I64, np.asarray(v, np.int64), initializer=True)


def _relations(rng, t: str, sx: float):
    """(family, name, s_y, z_y): calibrated, ties with even and odd zero points, equal (fold)."""
    mid = _mid(t)
    yield "basic", "calibrated", _scale(rng), mid + int(rng.integers(-3, 4))
    for k in (1, 2):
        for parity, zy in (("even", mid), ("odd", mid + 1)):
            yield "ties", f"scale-ratio-2^{k}-zero-point-{parity}", float(np.float32(sx * 2.0**k)), zy
    yield "fold", "equal-qparams", sx, mid


def leaky_relu() -> Iterator[Draft]:
    for alpha in (0.01, 0.1, 0.2, 0.125, 0.5):
        for t in ACTS:
            rng = _rng("leaky", alpha, t)
            x = _codes(rng, t, (8, 16))
            sx = _scale(rng)
            for fam, nm, sy, zy in _relations(rng, t, sx):
                yield _unary("LeakyRelu", fam, f"alpha-{alpha}-{nm}", t, x, sx, _mid(t), sy, zy, attrs={"alpha": alpha})


def hard_swish() -> Iterator[Draft]:
    for t in ACTS:
        rng = _rng("hardswish", t)
        x = _codes(rng, t, (8, 16))
        for sname, sx in (("arbitrary", _scale(rng, 2.0**-6, 2.0**-3)), ("power-of-two", 2.0**-5)):
            for fam, nm, sy, zy in _relations(rng, t, sx):
                yield _unary("HardSwish", fam, f"input-{sname}-{nm}", t, x, sx, _mid(t), sy, zy, clause="qdq-hardswish")


def softmax() -> Iterator[Draft]:
    """Softmax-13 along each axis; the output grid a calibrating tool picks for [0, 1]."""
    for t in ("uint8", "int8", "uint16"):
        et = dtypes.get(t)
        span = et.qrange[1] - et.qrange[0]
        for axis in (-1, 0, 1, 2):
            rng = _rng("softmax", t, axis)
            x = _codes(rng, t, (3, 4, 6))
            sx = _scale(rng, 2.0**-7, 2.0**-5)
            for nm, sy, zy in (("grid-1-over-span", float(np.float32(1.0 / span)), et.qrange[0]),
                               ("grid-2^-8", 2.0**-8, et.qrange[0]), ("grid-2^-8-odd-zero-point", 2.0**-8,
                                                                       et.qrange[0] + 1)):
                yield _unary("Softmax", "axis", f"axis-{axis}-{nm}", t, x, sx, _mid(t), sy, zy, attrs={"axis": axis},
                             clause="qdq-softmax")


def _moves() -> list[tuple[str, str, tuple, list[Arg], tuple, dict]]:
    """(op, name, x shape, extra inputs, op inputs, attributes)."""
    out = []
    for mode in ("constant", "reflect", "edge", "wrap"):
        out.append(("Pad", f"{mode}", (1, 3, 5, 5), [_i64("pads", [0, 0, 1, 2, 0, 0, 2, 1])], ("pads",), {"mode": mode}))
    out.append(("Pad", "constant-value", (1, 3, 5, 5), [_i64("pads", [0, 0, 1, 1, 0, 0, 1, 1]), _f32("cv", 0.75)],
                ("pads", "cv"), {"mode": "constant"}))
    out.append(("Pad", "negative-pads", (1, 3, 6, 6), [_i64("pads", [0, 0, -1, 2, 0, 0, 1, -2])], ("pads",), {}))
    out.append(("Pad", "axes", (1, 3, 5, 5), [_i64("pads", [2, 1]), _f32("cv", 0.0), _i64("axes", [3])],
                ("pads", "cv", "axes"), {}))
    for nm, st, en, ax, sp in (("first-axis", [1], [3], [0], [1]), ("negative-start", [-3], [100], [1], [1]),
                               ("step-2", [0, 1], [8, 8], [0, 1], [2, 3]), ("negative-step", [-1], [-100], [1], [-1]),
                               ("negative-step-2", [6, 7], [0, 1], [0, 1], [-2, -3])):
        out.append(("Slice", nm, (8, 8), [_i64("starts", st), _i64("ends", en), _i64("axes", ax), _i64("steps", sp)],
                    ("starts", "ends", "axes", "steps"), {}))
    for nm, shape, axes in (("one-axis", (4, 1, 8), [1]), ("two-axes", (1, 4, 1, 8), [0, -2])):
        out.append(("Squeeze", nm, shape, [_i64("axes", axes)], ("axes",), {}))
    for nm, axes in (("front", [0]), ("middle-and-end", [1, -1])):
        out.append(("Unsqueeze", nm, (4, 8), [_i64("axes", axes)], ("axes",), {}))
    for mode in ("DCR", "CRD"):
        for b in (2, 3):
            out.append(("DepthToSpace", f"{mode}-blocksize-{b}", (1, 2 * b * b, 3, 3), [], (), {"blocksize": b,
                                                                                            "mode": mode}))
    return out


def movements() -> Iterator[Draft]:
    """Pad, Slice, Squeeze, Unsqueeze, DepthToSpace: values move, none is computed."""
    for op, nm, shape, extra, op_ins, attrs in _moves():
        for t in ACTS:
            rng = _rng("moves", op, nm, t)
            x = _codes(rng, t, shape)
            sx = _scale(rng)
            for fam, rel, sy, zy in _relations(rng, t, sx):
                yield _unary(op, fam, f"{nm}-{rel}", t, x, sx, _mid(t), sy, zy, list(extra), op_ins, attrs=dict(attrs))


def split() -> Iterator[Draft]:
    """Split → Q on every output (the outputs of the graph)."""
    for nm, axis, sizes, num in (("axis-0-two", 0, None, 2), ("axis-1-three-uneven", 1, None, 3),
                                 ("axis-1-sizes", 1, [2, 5, 1], None)):
        for t in ACTS:
            rng = _rng("split", nm, t)
            x = _codes(rng, t, (4, 8))
            sx = _scale(rng)
            for fam, rel, sy, zy in _relations(rng, t, sx):
                k = num or len(sizes)
                outs = tuple(f"g{i}" for i in range(k))
                attrs = {"axis": axis, **({"num_outputs": num} if num else {})}
                ins = ("f", "split") if sizes else ("f",)
                nodes = [_dq("x", "sx", "zx", "f"), Node("Split", ins, outs, attrs)]
                nodes += [_q(o, "sy", "zy", f"y{i}") for i, o in enumerate(outs)]
                inputs = [Arg("x", t, x), _f32("sx", sx), _zp("zx", t, _mid(t))]
                inputs += [_i64("split", sizes)] if sizes else []
                inputs += [_f32("sy", sy), _zp("zy", t, zy)]
                yield _draft("Split", f"{t}-{t}", fam, f"{nm}-{rel}", inputs, nodes, "qdq-graph")


def _resize_variants() -> list[tuple[str, tuple, dict, list[Arg], tuple]]:
    """(name, x shape, attributes, extra inputs, op inputs) for Resize: every mode × coordinate
    transformation, nearest roundings, scales and sizes, axes, keep_aspect_ratio_policy."""
    out = []
    up = _f32("scales", [1, 1, 2, 2], (4,))
    down = _f32("scales", [1, 1, 0.5, 0.5], (4,))
    ctms = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "asymmetric")
    for mode in ("nearest", "linear", "cubic"):
        for ctm in ctms:
            for sname, sc in (("up-2", up), ("down-2", down)):
                attrs = {"mode": mode, "coordinate_transformation_mode": ctm}
                out.append((f"{mode}-{ctm}-{sname}", (1, 2, 4, 4), attrs, [sc], ("", "scales")))
        # align_corners: lengths 5 → 9 (ratio 1/2), and 9 → 5 (ratio 2)
        attrs = {"mode": mode, "coordinate_transformation_mode": "align_corners"}
        out.append((f"{mode}-align_corners-5-to-9", (1, 2, 5, 5), attrs, [_i64("sizes", [1, 2, 9, 9])],
                    ("", "", "sizes")))
        out.append((f"{mode}-align_corners-9-to-5", (1, 2, 9, 9), attrs, [_i64("sizes", [1, 2, 5, 5])],
                    ("", "", "sizes")))
        # tf_crop_and_resize: a region of interest, points outside take extrapolation_value
        attrs = {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 0.5}
        roi = _f32("roi", [0, 0, -0.125, 0.25, 1, 1, 0.875, 1.25], (8,))
        # the height keeps its length (scale 1: onnxruntime skips the transformation there, PR #5303)
        out.append((f"{mode}-tf_crop_and_resize", (1, 2, 9, 9), attrs, [roi, _i64("sizes", [1, 2, 9, 5])],
                    ("roi", "", "sizes")))
        out.append((f"{mode}-tf_crop_and_resize-every-axis", (1, 2, 9, 9), attrs,
                    [roi, _i64("sizes", [1, 2, 5, 5])], ("roi", "", "sizes")))
    for nm in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
        attrs = {"mode": "nearest", "nearest_mode": nm, "coordinate_transformation_mode": "asymmetric"}
        out.append((f"nearest-{nm}-asymmetric-up", (1, 2, 4, 4), attrs, [up], ("", "scales")))
        attrs = {"mode": "nearest", "nearest_mode": nm, "coordinate_transformation_mode": "half_pixel"}
        out.append((f"nearest-{nm}-half_pixel-up", (1, 2, 4, 4), attrs, [up], ("", "scales")))
    for a in (-0.75, -0.5):
        attrs = {"mode": "cubic", "cubic_coeff_a": a}
        out.append((f"cubic-a-{a}", (1, 2, 4, 4), attrs, [up], ("", "scales")))
    # exclude_outside=1 renormalises the edge weights: binary fractions only where what falls outside
    # sums to one minus a power of two (asymmetric, scale 2: a/8 with a = -8 or 4) (#qdq-resize)
    for a in (-8.0, 4.0):
        for ex in (0, 1):
            attrs = {"mode": "cubic", "cubic_coeff_a": a, "exclude_outside": ex,
                     "coordinate_transformation_mode": "asymmetric"}
            out.append((f"cubic-a-{a}-asymmetric-exclude-outside-{ex}", (1, 2, 4, 4), attrs, [up], ("", "scales")))
    # antialias: the filter stretched by 1/scale when downscaling (kernel weights k(d/2)/2)
    for mode in ("linear", "cubic"):
        for ctm in ctms:
            attrs = {"mode": mode, "antialias": 1, "coordinate_transformation_mode": ctm}
            # cubic's stretched weights are sixteenths of sixteenths: one axis keeps its sums exact
            sc = down if mode == "linear" else _f32("scales", [1, 1, 1, 0.5], (4,))
            out.append((f"{mode}-antialias-{ctm}-down-2", (1, 2, 8, 8), attrs, [sc], ("", "scales")))
    attrs = {"mode": "linear", "axes": [2, 3]}
    out.append(("linear-axes-2-3", (1, 2, 4, 4), attrs, [_f32("scales", [2, 2], (2,))], ("", "scales")))
    for policy in ("not_larger", "not_smaller"):
        attrs = {"mode": "nearest", "axes": [2, 3], "keep_aspect_ratio_policy": policy}
        out.append((f"nearest-keep-aspect-{policy}", (1, 2, 4, 8), attrs, [_i64("sizes", [8, 8])], ("", "", "sizes")))
    return out


def resize_depth() -> Iterator[Draft]:
    for name, shape, attrs, extra, op_ins in _resize_variants():
        for t in ("uint8", "int8"):
            rng = _rng("resize-depth", name, t)
            x = _codes(rng, t, shape, full=False)
            sx = 2.0**-6
            for fam, rel, sy, zy in _relations(rng, t, sx):
                if fam == "ties" and "2^2" in rel:
                    continue
                if name.endswith("tf_crop_and_resize") and (t != "uint8" or fam != "basic"):
                    continue  # an axis of scale 1: one case per mode shows onnxruntime's copy (PR #5303)
                yield _unary("Resize", fam, f"{name}-{rel}", t, x, sx, _mid(t), sy, zy, list(extra), op_ins,
                             attrs=dict(attrs), clause="qdq-resize")


def first_ops_depth() -> Iterator[Draft]:
    """The first patterns' ops with what they lacked: ties after the op with an odd output zero point
    beside the even one, and equal scales and zero points on every side (the relation that lets a
    runtime drop or fold the pairs)."""
    for t in ACTS:
        mid = _mid(t)
        for op in ("Add", "Sub", "Mul", "Concat"):
            rng = _rng("first-ops", op, t)
            if op == "Mul":  # codes near the zero points: products that neither saturate nor vanish
                a, b = (array(t, _mid(t) + rng.integers(-11, 12, size=(8, 16))) for _ in range(2))
            else:
                a, b = _codes(rng, t, (8, 16)), _codes(rng, t, (8, 16))
            sa = _scale(rng)
            attrs = {"axis": 0} if op == "Concat" else None
            for j in (0, 1):
                sb = float(np.float32(sa * 2.0**j))
                base = float(np.float32(sa * sb)) if op == "Mul" else sa
                for parity, zy in (("even", mid), ("odd", mid + 1)):
                    yield _binary(op, "ties", f"scale-b-2^{j}-y-2^1-zero-point-{parity}", t, t, t, a, b, sa, mid, sb,
                                  mid, float(np.float32(base * 2)), zy, attrs=attrs)
            sy = float(np.float32(sa * sa)) if op == "Mul" else sa
            yield _binary(op, "fold", "equal-qparams", t, t, t, a, b, sa, mid + 1, sa, mid + 1, sy, mid + 1, attrs=attrs)
        for op, extra, ins, attrs, shape in (
                ("Identity", [], (), None, (8, 16)), ("Relu", [], (), None, (8, 16)),
                ("Transpose", [], (), {"perm": [1, 0]}, (8, 16)),
                ("Gather", [Arg("idx", I64, np.array([3, 0, 7, 7], np.int64), initializer=True)], ("idx",),
                 {"axis": 1}, (8, 16)),
                ("Reshape", [_i64("shape", [4, 32])], ("shape",), None, (8, 16)),
                ("Clip", [_f32("lo", -1.0), _f32("hi", 1.5)], ("lo", "hi"), None, (8, 16))):
            rng = _rng("first-unary", op, t)
            x = _codes(rng, t, shape)
            sx = _scale(rng)
            for fam, nm, sy, zy in _relations(rng, t, sx):
                if fam == "basic":
                    continue
                yield _unary(op, fam, f"{nm}-depth", t, x, sx, mid, sy, zy, list(extra), ins, attrs=attrs)


def where() -> Iterator[Draft]:
    """Where(a > t, DQ(a), DQ(b)) → Q: a selection between two dequantized inputs (the condition from a
    comparison inside the graph, as a converted model computes it; onnxruntime's shared QDQ
    selectors group DQ → Where → Q, selectors_actions/shared/utils.cc)."""
    for t in ACTS:
        mid = _mid(t)
        rng = _rng("where", t)
        a, b = _codes(rng, t, (8, 16)), _codes(rng, t, (8, 16))
        sa = _scale(rng)
        for qp, (sb, zb) in (("same-input-qparams", (sa, mid)), ("other-input-qparams", (_scale(rng), mid + 2))):
            for fam, nm, sy, zy in _relations(rng, t, sa):
                nodes = [_dq("a", "sa", "za", "fa"), _dq("b", "sb", "zb", "fb"), Node("Greater", ("fa", "th"), ("c",)),
                         Node("Where", ("c", "fa", "fb"), ("g",)), _q("g", "sy", "zy", "y")]
                inputs = [Arg("a", t, a), Arg("b", t, b), _f32("sa", sa), _zp("za", t, mid), _f32("sb", sb),
                          _zp("zb", t, zb), _f32("th", float(np.float32(sa * 3))), _f32("sy", sy), _zp("zy", t, zy)]
                yield _draft("Where", f"{t}-{t}-{t}", fam, f"{qp}-{nm}", inputs, nodes, "qdq-graph")


__all__ = ["first_ops_depth", "where", "hard_swish", "leaky_relu", "movements", "resize_depth", "softmax", "split"]

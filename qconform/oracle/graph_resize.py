"""Resize in the QDQ patterns (Resize-19, #qdq-resize): every mode, coordinate transformation and
nearest rounding, with the weights of the text's formulas computed exactly (rationals) and the
weighted average a sum whose order the text leaves open (#qdq-sum-order, #qdq-sum-bound).

The coordinate formulas are the text's own; a case is built so that every float evaluation of them
gives the exact coordinate (scales and lengths whose ratios are binary fractions): a coordinate or
a weight that is not a binary fraction is refused (NotExact), since its value would depend on how
an implementation evaluates the formula, which the text does not say.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from qconform.oracle.graph_sums import row_sums, rounded
from qconform.oracle.granularity import InvalidModel


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else v


def _dyadic(f: Fraction) -> bool:
    return not (f.denominator & (f.denominator - 1))


def original(mode: str, i: int, scale: Fraction, n_in: int, n_out: int, roi: tuple[Fraction, Fraction]) -> Fraction:
    """x_original of output index i (Resize-19, coordinate_transformation_mode)."""
    if mode == "half_pixel":
        return (i + Fraction(1, 2)) / scale - Fraction(1, 2)
    if mode == "half_pixel_symmetric":
        adjustment = Fraction(n_out) / (scale * n_in)
        center = Fraction(n_in, 2)
        offset = center * (1 - adjustment)
        return offset + (i + Fraction(1, 2)) / scale - Fraction(1, 2)
    if mode == "pytorch_half_pixel":
        return (i + Fraction(1, 2)) / scale - Fraction(1, 2) if n_out > 1 else Fraction(0)
    if mode == "align_corners":
        return Fraction(i * (n_in - 1), n_out - 1) if n_out > 1 else Fraction(0)
    if mode == "asymmetric":
        return i / scale
    if mode == "tf_crop_and_resize":
        start, end = roi
        if n_out > 1:
            return start * (n_in - 1) + i * (end - start) * (n_in - 1) / (n_out - 1)
        return (start + end) * (n_in - 1) / 2
    raise InvalidModel(f"coordinate_transformation_mode {mode!r}")


def _nearest(x: Fraction, how: str) -> int:
    fl = math.floor(x)
    if how == "floor":
        return fl
    if how == "ceil":
        return math.ceil(x)
    frac = x - fl
    if frac == Fraction(1, 2):
        return fl if how == "round_prefer_floor" else fl + 1
    return fl if frac < Fraction(1, 2) else fl + 1


def _cubic(t: Fraction, a: Fraction) -> list[Fraction]:
    """The cubic convolution weights of the four taps floor−1 … floor+2 (Keys; Resize's cubic_coeff_a)."""
    def near(d: Fraction) -> Fraction:
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d: Fraction) -> Fraction:
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _kernel(mode: str, d: Fraction, a: Fraction) -> Fraction:
    """The interpolation kernel at distance d: linear's triangle, cubic's Keys kernel."""
    d = abs(d)
    if mode == "linear":
        return max(Fraction(0), 1 - d)
    if d < 1:
        return ((a + 2) * d - (a + 3)) * d * d + 1
    if d < 2:
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return Fraction(0)


def taps(attrs, x_ori: Fraction, n_in: int, scale: Fraction = Fraction(1)) -> list[tuple[int, Fraction]] | None:
    """(input index, weight) pairs for one output coordinate; None where tf_crop_and_resize reads
    outside the input (extrapolation_value). ``antialias`` when downscaling: the kernel stretched by
    1/scale ("stretching the resampling filter by a factor max(1, 1 / scale)"), k(d·scale)·scale."""
    mode = _s(attrs.get("mode", "nearest"))
    if _s(attrs.get("coordinate_transformation_mode", "half_pixel")) == "tf_crop_and_resize" and \
            not 0 <= x_ori <= n_in - 1:
        return None
    if mode == "nearest":
        j = _nearest(x_ori, _s(attrs.get("nearest_mode", "round_prefer_floor")))
        return [(min(max(j, 0), n_in - 1), Fraction(1))]
    fl = math.floor(x_ori)
    t = x_ori - fl
    a = Fraction(float(np.float32(attrs.get("cubic_coeff_a", -0.75))))
    if attrs.get("antialias", 0) and mode in ("linear", "cubic") and scale < 1:
        reach = (1 if mode == "linear" else 2) * math.ceil(1 / scale)
        pairs = [(j, _kernel(mode, (j - x_ori) * scale, a) * scale) for j in range(fl - reach, fl + reach + 2)]
    elif mode == "linear":
        pairs = [(fl, 1 - t), (fl + 1, t)]
    elif mode == "cubic":
        pairs = list(zip(range(fl - 1, fl + 3), _cubic(t, a)))
    else:
        raise InvalidModel(f"Resize mode {mode!r}")
    if attrs.get("exclude_outside", 0):
        inside = [(j, w) for j, w in pairs if 0 <= j < n_in]
        total = sum(w for _, w in inside)
        pairs = [(j, w / total) for j, w in inside]
    return [(min(max(j, 0), n_in - 1), w) for j, w in pairs if w]


def _lengths(x: np.ndarray, attrs, ins) -> tuple[list[int], list[Fraction], list[int]]:
    axes = [a % x.ndim for a in attrs.get("axes", range(x.ndim))]
    scales_in = ins[2] if len(ins) > 2 and ins[2] is not None and np.size(ins[2]) else None
    sizes_in = ins[3] if len(ins) > 3 and ins[3] is not None else None
    dims = [x.shape[a] for a in axes]
    if scales_in is not None:
        # "output_dimension = floor(input_dimension * (roi_end - roi_start) * scale)"
        scales = [Fraction(float(s)) for s in scales_in]
        roi = ins[1] if len(ins) > 1 and ins[1] is not None and np.size(ins[1]) and \
            _s(attrs.get("coordinate_transformation_mode", "half_pixel")) == "tf_crop_and_resize" else None
        spans = [Fraction(float(roi[k + len(axes)])) - Fraction(float(roi[k])) for k in range(len(axes))] \
            if roi is not None else [Fraction(1)] * len(axes)
        outs = [math.floor(d * r * s) for d, r, s in zip(dims, spans, scales)]
    elif sizes_in is not None:
        outs = [int(v) for v in sizes_in]
        scales = [Fraction(o, d) for o, d in zip(outs, dims)]
        policy = _s(attrs.get("keep_aspect_ratio_policy", "stretch"))
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            s = pick(scales)
            scales = [s] * len(dims)
            outs = [_round_half_up(s * d) for d in dims]
    else:
        raise InvalidModel("Resize needs scales or sizes")
    return axes, scales, outs


def _round_half_up(v: Fraction) -> int:
    """"round_int stands for computing the nearest integer value, rounding halfway cases up"."""
    return math.floor(v + Fraction(1, 2))


def op_resize(node, ins, where) -> list:
    x = ins[0].astype(np.float64)
    attrs = node.attrs
    axes, scales, outs = _lengths(x, attrs, ins)
    roi = ins[1] if len(ins) > 1 and ins[1] is not None and np.size(ins[1]) else None
    ctm = _s(attrs.get("coordinate_transformation_mode", "half_pixel"))
    terms = x[..., None]
    outside = np.zeros(x.shape, bool)
    for k, (a, s, n_out) in enumerate(zip(axes, scales, outs)):
        n_in = x.shape[a]
        r = (Fraction(float(roi[k])), Fraction(float(roi[k + len(axes)]))) if roi is not None else (Fraction(0), Fraction(1))
        rows = []
        for i in range(n_out):
            xo = original(ctm, i, s, n_in, n_out, r)
            if not _dyadic(xo):
                raise InvalidModel(f"{where}: x_original {xo} is not a binary fraction (#qdq-resize)")
            rows.append(taps(attrs, xo, n_in, s))
        width = max((len(t) for t in rows if t is not None), default=1)
        idx = np.zeros((n_out, width), np.int64)
        wts = np.zeros((n_out, width), np.float64)
        miss = np.zeros(n_out, bool)
        for i, t in enumerate(rows):
            if t is None:
                miss[i] = True
                continue
            for j, (src, w) in enumerate(t):
                if not _dyadic(w):
                    raise InvalidModel(f"{where}: a weight {w} is not a binary fraction (#qdq-resize)")
                idx[i, j], wts[i, j] = src, float(w)
        terms = np.take(terms, idx, axis=a)  # axis a becomes (n_out, width)
        shape = [1] * terms.ndim
        shape[a], shape[a + 1] = n_out, width
        terms = terms * wts.reshape(shape)
        terms = np.moveaxis(terms, a + 1, -1)
        terms = terms.reshape(terms.shape[:-2] + (-1,))
        outside = np.take(outside, np.arange(n_out) % max(n_in, 1), axis=a) if n_out else outside
        mshape = [1] * outside.ndim
        mshape[a] = n_out
        outside = outside | miss.reshape(mshape)
    res = rounded(row_sums(terms), where)
    fill = np.float32(attrs.get("extrapolation_value", 0.0))

    def put(o: np.ndarray) -> np.ndarray:
        return np.where(outside, fill, o).astype(np.float32) if outside.any() else o

    if res and isinstance(res[0], tuple):
        return [(name, [put(o) for o in outs_]) for name, outs_ in res]
    return [put(o) for o in res]


__all__ = ["op_resize", "original", "taps"]

"""Broadcasting the scale and zero point (per-axis, blocked, the axis) done another way."""
from __future__ import annotations

import numpy as np

from qconform.case import Reading
from qconform.oracle import granularity
from qconform.diagnosis.models.base import _blocked, _dev, _negative_axis, _nonscalar_params
from qconform.diagnosis.models.common import DQ, DQL, Q


class ScalarAs1D:
    """A rank-0 data input comes back as a one-element 1-D tensor."""

    def evaluate(self, draft, primary_only: bool = False):
        ev = super().evaluate(draft, primary_only)
        x = draft.inputs[0] if draft.inputs else None
        if x is None or x.value.ndim != 0:
            return ev
        first = lambda seq: (None if seq[0] is None else np.reshape(seq[0], (1,)),) + tuple(seq[1:])  # noqa: E731
        ev.readings = [Reading(r.name, first(r.outputs), first(r.dont_care)) for r in ev.readings]
        if ev.dont_care:
            ev.dont_care = list(first(ev.dont_care))
        return ev


class PerAxisFirstScale:
    def expand(self, p, shape, axis, block):
        if p.size > 1:
            return np.broadcast_to(p.reshape(-1)[0], shape)
        return super().expand(p, shape, axis, block)


class BlockedInterleaved:
    def expand(self, p, shape, axis, block):
        full = super().expand(p, shape, axis, block)  # validates; the spec's mapping
        if not block or granularity.granularity(shape, p.shape, axis, block) != "blocked":
            return full
        ax = axis % len(shape)
        return np.take(p, np.arange(shape[ax]) % p.shape[ax], axis=ax)


class NegativeAxisOffByOne:
    def axis(self, attrs, rank):
        a = super().axis(attrs, rank)
        return a + rank - 1 if a is not None and a < 0 else a


class PerAxisWrongAxis:
    """A per-axis scale applied along another axis of the same length (the first one found)."""

    def expand(self, p, shape, axis, block):
        if block or p.ndim != 1 or p.size <= 1 or axis is None:
            return super().expand(p, shape, axis, block)
        a = axis % len(shape)
        other = [i for i, n in enumerate(shape) if n == p.size and i != a]
        return super().expand(p, shape, other[0] if other else axis, block)


class BlockedIndexPerElement:
    """Blocked parameters of a 1-D x read at the element's own index (i, not i // block_size); a
    read past the end of the parameter tensor gives 0. Higher ranks were right in the report."""

    def expand(self, p, shape, axis, block):
        if not block or np.ndim(p) != 1 or len(shape) != 1:
            return super().expand(p, shape, axis, block)
        idx = np.arange(shape[0])
        return np.where(idx < p.size, p[np.minimum(idx, p.size - 1)], 0.0)


class NegativeAxisAbsolute:
    """axis = -k read as k (|axis|, counted from the front)."""

    def axis(self, attrs, rank):
        a = super().axis(attrs, rank)
        return -a if a is not None and a < 0 else a


class NegativeAxisFromFront:
    """axis = -k read as k - 1: the position from the back used as a position from the front
    (the index of a reversed, innermost-first dimension list used on the outermost-first one)."""

    def axis(self, attrs, rank):
        a = super().axis(attrs, rank)
        return -a - 1 if a is not None and a < 0 else a


class BlockedPartialBlockPrevious:
    """Blocks counted as floor(D / block_size) and the block index clamped to the last of them:
    the elements of a partial last block take the previous block's parameters."""

    def expand(self, p, shape, axis, block):
        full = super().expand(p, shape, axis, block)  # validates; the spec's mapping
        if not block or granularity.granularity(shape, p.shape, axis, block) != "blocked":
            return full
        ax = axis % len(shape)
        full_blocks = shape[ax] // block
        if full_blocks < 1 or shape[ax] % block == 0:
            return full
        idx = np.minimum(np.arange(shape[ax]) // block, full_blocks - 1)
        return np.take(p, idx, axis=ax)


class BlockedScaleSqueezedBroadcast:
    """A blocked scale (and zero point) with its size-1 dimensions dropped and, where the rest
    broadcasts to x numpy-style (right-aligned), used that way instead of the blocked mapping;
    otherwise the blocked mapping. Valid but wrong where x's trailing dimensions are square: a
    one-block scale of shape [N, 1] for x [N, N] lands on the last axis."""

    def expand(self, p, shape, axis, block):
        full = super().expand(p, shape, axis, block)  # validates; the spec's mapping
        if not block or granularity.granularity(shape, p.shape, axis, block) != "blocked":
            return full
        try:
            return np.broadcast_to(np.squeeze(p), shape)
        except ValueError:
            return full


def _partial_block(d) -> bool:
    if not _blocked(d) or d.inputs[1].value.ndim == 0:
        return False
    shape, b = d.inputs[0].value.shape, d.attrs["block_size"]
    ax = d.attrs.get("axis", 1)
    if not -len(shape) <= ax < len(shape):
        return False
    n = shape[ax % len(shape)]
    return n % b != 0 and n // b >= 1


def _squeezable_blocked(d) -> bool:
    return _blocked(d) and 1 in d.inputs[1].value.shape


#: The deviations of this step, each beside its mixin above (the registry's order: ``ORDER``).
DEVIATIONS = [
    _dev("scalar-as-1d", (Q, DQ, DQL),
         "Your kernel returns the result of a rank-0 (scalar) input as a one-element 1-D tensor of shape [1] "
         "instead of a scalar of shape [].",
         "qconform's own onnxruntime adapter did this until it was fixed: numpy.ascontiguousarray returns "
         "at least 1-D arrays, so a rank-0 input was fed as shape [1] (qconform/docs/diagnosis.md); "
         "openvinotoolkit/openvino#5260 and apache/tvm#20126 (scalar Q/DQ inputs reshaped or rejected).",
         "DequantizeLinear int8->float32, x=np.int8(5) of shape [], x_scale=2: shape [] expected, [1] given",
         ScalarAs1D, lambda d: d.inputs[0].value.ndim == 0, ("shapes",)),
    _dev("per-axis-first-scale", (Q, DQ),
         "Your kernel ignores per-axis and blocked parameters and uses the first scale and zero point for "
         "every element.",
         "sonos/tract#2849 (QuantizeLinear/DequantizeLinear read only as_slice()[0] and never read axis).",
         "DequantizeLinear int8->float32, x=[[1],[1]], x_scale=[1, 2], axis=0: [1, 2] expected, [1, 1] given",
         PerAxisFirstScale, _nonscalar_params, ("basic", "granularity")),
    _dev("blocked-interleaved", (Q, DQ),
         "Your blocked kernel assigns element j of the blocked axis to block j mod num_blocks instead of "
         "j div block_size (the data was reshaped as [block_size, num_blocks]).",
         "openvinotoolkit/openvino#32918 (DequantizeLinear-21 blocked: elements interleaved for axis 1).",
         "DequantizeLinear-21 int8->float32, x=[[9]*8], x_scale=[[1,2,3,4]], axis=1, block_size=2",
         BlockedInterleaved, _blocked, ("granularity",)),
    _dev("negative-axis-off-by-one", (Q, DQ),
         "Your kernel normalises a negative axis as axis + rank - 1 instead of axis + rank, so per-axis "
         "parameters land on the neighbouring dimension.",
         "apple/coreai-torch#24 (negative axis normalised as axis + rank - 1; wrong channel, silently, "
         "when neighbouring dims share a size); ROCm/AMDMIGraphX#703 (review: negative axis not handled).",
         "DequantizeLinear int8->float32, x of shape [3, 3], x_scale=[1, 2, 4], axis=-1 (equal neighbouring dims)",
         NegativeAxisOffByOne, _negative_axis, ("negative-axis", "granularity")),
    _dev("per-axis-wrong-axis", (Q, DQ),
         "Your kernel applies the per-axis scale along another axis of the same length than the one "
         "'axis' names.",
         "NVIDIA/TensorRT#1694 (ConvTranspose INT8: the per-channel weight scale taken along the wrong axis).",
         "DequantizeLinear int8->float32, x of shape [3, 3], x_scale=[1, 2, 4], axis=0",
         PerAxisWrongAxis, _nonscalar_params, ("granularity", "specials")),
    _dev("blocked-index-per-element", DQ,
         "Your blocked DequantizeLinear of a 1-D x reads the scale and zero point at the element's own "
         "index (i, not i // block_size), and a read past the end of the parameters gives 0.",
         "microsoft/onnxruntime#32730 (WebGPU EP 1.30.0: DequantizeLinear-21 int8, x=[10..80], block_size=4, "
         "scale=[0.5, 2], zero point [0, 10] gives [5, 20, 0, 0, 0, 0, 0, 0]; the wasm EP and the CPU are "
         "right).",
         "DequantizeLinear-21 int8->float32, x=[10, 20, ..., 80], axis=0, block_size=4, x_scale=[0.5, 2], "
         "x_zero_point=[0, 10]: [5, 10, 15, 20, 80, 100, 120, 140] expected, [5, 20, 0, 0, 0, 0, 0, 0] given",
         BlockedIndexPerElement, lambda d: _blocked(d) and d.op == DQ and d.inputs[0].value.ndim == 1,
         ("granularity-edges", "blocked")),
    _dev("negative-axis-absolute", (Q, DQ),
         "Your kernel reads a negative axis -k as k (its absolute value, counted from the front) instead of "
         "rank - k, so per-axis parameters land on another dimension of the same length.",
         "Plausible rather than reported for Q/DQ: microsoft/CNTK's Python ops map a negative axis with "
         "abs(axis) (cntk/ops/__init__.py, slice and splice: right for its column-major, innermost-first axes), "
         "the mapping that goes wrong in an outermost-first kernel; the same family as apple/coreai-torch#24 "
         "(negative axis normalised as axis + rank - 1).",
         "DequantizeLinear int8->float32, x of shape [5, 5, 3, 5], x_scale of length 5, axis=-1: scale along "
         "axis 3 expected, along axis 1 given",
         NegativeAxisAbsolute, _negative_axis, ("negative-axis", "granularity")),
    _dev("negative-axis-from-front", (Q, DQ),
         "Your kernel reads a negative axis -k as k - 1 (the position from the back used as a position from the "
         "front) instead of rank - k, so per-axis parameters land on another dimension of the same length.",
         "Plausible rather than reported for Q/DQ: runtimes that keep dimensions innermost first (ggml's ne[0], "
         "CNTK's column-major axes) map ONNX axis -k to their dimension k - 1, which is wrong where that index "
         "is then used outermost first; the same family as apple/coreai-torch#24 (negative axis normalised as "
         "axis + rank - 1).",
         "DequantizeLinear int8->float32, x of shape [5, 5, 3, 5, 2], x_scale of length 5, axis=-2: scale along "
         "axis 3 expected, along axis 1 given",
         NegativeAxisFromFront, _negative_axis, ("negative-axis", "granularity")),
    _dev("blocked-partial-block-previous-scale", (Q, DQ),
         "Your blocked kernel gives the elements of a partial last block (when block_size does not divide the "
         "axis) the previous block's scale and zero point: it counts floor(D / block_size) blocks and clamps "
         "the block index to the last of them.",
         "Plausible rather than reported for ONNX: partial last blocks are where block-wise kernels go wrong "
         "(NVIDIA/TensorRT-Model-Connect#1115 review: a block extent derived from the shapes 'is applied to the "
         "wrong elements' when the trailing block is partial; ROCm/AMDMIGraphX#3412 slices the expanded scale "
         "for a short final block); counting full blocks with integer division is the natural slip.",
         "DequantizeLinear-21 int8->float32, x of shape [7], axis=0, block_size=3, x_scale=[1, 2, 4]: element 6 "
         "scaled by 4 expected, by 2 given",
         BlockedPartialBlockPrevious, _partial_block, ("granularity", "granularity-edges")),
    _dev("blocked-scale-squeezed-broadcast", (Q, DQ),
         "Your kernel drops a blocked scale's size-1 dimensions and, where the rest broadcasts to x numpy-style "
         "(right-aligned), uses that broadcast instead of the blocked mapping: for x of shape [N, N] a one-block "
         "scale of shape [N, 1] (axis 1) is applied along the last axis instead of the first.",
         "Plausible rather than reported: squeezing parameter shapes and then broadcasting them is how "
         "per-tensor and per-axis scales are commonly normalised, and right-aligned broadcasting accepts the "
         "squeezed blocked scale exactly when x's trailing dimensions are square; scale-layout confusions of the "
         "same kind: microsoft/onnxruntime#28522 (review: blocked scales returned as (n_blocks, other) instead of "
         "x's order, valid only when the two sizes agree).",
         "DequantizeLinear-21 int8->float32, x of shape [4, 4], axis=1, block_size=4, x_scale of shape [4, 1]: "
         "row i scaled by x_scale[i] expected, column j by x_scale[j] given",
         BlockedScaleSqueezedBroadcast, _squeezable_blocked, ("granularity-edges", "granularity")),
]

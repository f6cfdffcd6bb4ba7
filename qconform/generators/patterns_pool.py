"""QDQ pool patterns at depth (issue 64): AveragePool and MaxPool with every attribute that changes
their arithmetic (kernel sizes, strides, pads, auto_pad, dilations, ceil_mode, count_include_pad;
1-D, 2-D, 3-D), GlobalAveragePool of every rank, ties after the average with odd and even output
zero points, and the equal scales that invite a runtime to drop the pair (MaxPool: onnxruntime's
DropQDQNodesSelector; AveragePool: UnarySelector → QLinearAveragePool,
onnxruntime/core/optimizer/qdq_transformer/selectors_actions/qdq_selector_action_transformer.cc)."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from qconform import dtypes
from qconform.case import Draft
from qconform.generators.patterns_common import ACTS, _codes, _mid, _rng, _scale, _unary

#: (name, x shape, attributes). ceil_mode with count_include_pad=1 only where ceil_mode adds no
#: position (the count of an added position is open, #qdq-sum-order).
POOLS: tuple[tuple[str, tuple, dict], ...] = (
    ("1d-k3-stride-2", (1, 3, 11), {"kernel_shape": [3], "strides": [2]}),
    ("1d-k2-pads", (1, 3, 8), {"kernel_shape": [2], "pads": [1, 1]}),
    ("2d-k2-stride-1", (1, 3, 5, 5), {"kernel_shape": [2, 2]}),
    ("2d-k3-stride-2", (1, 3, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2]}),
    ("2d-k3-pads-1", (1, 3, 6, 6), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ("2d-k3-pads-1-count-include-pad", (1, 3, 6, 6), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                                                      "count_include_pad": 1}),
    ("2d-k3-stride-2-pads-asymmetric", (1, 3, 6, 6), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [0, 1, 1, 0]}),
    ("2d-k3-stride-2-pads-asymmetric-count-include-pad", (1, 3, 6, 6),
     {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [0, 1, 1, 0], "count_include_pad": 1}),
    ("2d-k3-stride-2-ceil", (1, 3, 6, 6), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("2d-k2-stride-2-ceil-odd", (1, 3, 7, 7), {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ("2d-k3-stride-2-ceil-no-overhang-count-include-pad", (1, 3, 7, 7),
     {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1, "count_include_pad": 1, "pads": [1, 1, 1, 1]}),
    ("2d-k5-pads-2", (1, 2, 7, 7), {"kernel_shape": [5, 5], "pads": [2, 2, 2, 2]}),
    ("2d-k2x3", (1, 3, 6, 6), {"kernel_shape": [2, 3], "strides": [2, 3]}),
    ("2d-dilation-2", (1, 3, 7, 7), {"kernel_shape": [2, 2], "dilations": [2, 2]}),
    ("2d-same-upper-stride-2", (1, 3, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ("2d-same-lower-k2", (1, 3, 5, 5), {"kernel_shape": [2, 2], "auto_pad": "SAME_LOWER"}),
    ("2d-valid-stride-2", (1, 3, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "VALID"}),
    ("3d-k2-stride-2", (1, 2, 4, 4, 4), {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]}),
    ("3d-k3-pads-1", (1, 2, 3, 4, 4), {"kernel_shape": [3, 3, 3], "pads": [1] * 6}),
)

AVERAGE_ONLY = ("count_include_pad",)


def _calibrated(rng, t: str, sx: float, spread: float = 1.0) -> float:
    """An output scale a calibrating tool would pick for inputs within 100 codes of the middle (means
    over many elements spread less: ``spread``), never a power of two."""
    et = dtypes.get(t)
    span = et.qrange[1] - et.qrange[0]
    return float(np.float32(sx * 200 * spread / span * rng.uniform(0.8, 1.25)))


def pool_depth() -> Iterator[Draft]:
    """Each geometry × activation type × {a calibrated output scale, ties (s_y = s_x/2^k·…), equal
    scales}, for AveragePool and MaxPool."""
    for op in ("AveragePool", "MaxPool"):
        for name, xs, attrs in POOLS:
            if op == "MaxPool" and any(a in attrs for a in AVERAGE_ONLY):
                continue
            for t in ACTS:
                rng = _rng("pool-depth", op, name, t)
                sx = 2.0**-6
                x = _codes(rng, t, xs, within=100)
                mid = _mid(t)
                clause = "qdq-sum-order" if op == "AveragePool" else "qdq-graph"
                yield _unary(op, "geometry", name, t, x, sx, mid, _calibrated(rng, t, sx), mid + 2, attrs=attrs,
                             clause=clause)
                for parity, zy in (("even", mid), ("odd", mid + 1)):
                    yield _unary(op, "ties", f"{name}-scale-ratio-2-zero-point-{parity}", t, x, sx, mid, sx * 2, zy,
                                 attrs=attrs, clause=clause)
                yield _unary(op, "fold", f"{name}-equal-qparams", t, x, sx, mid, sx, mid, attrs=attrs, clause=clause)


def global_pool() -> Iterator[Draft]:
    """GlobalAveragePool over 1-D, 2-D and 3-D inputs, counts that divide exactly and ones that round."""
    for name, xs in (("1d-8", (1, 8, 8)), ("1d-7", (1, 8, 7)), ("2d-5x5", (1, 8, 5, 5)), ("2d-2x8", (1, 8, 2, 8)),
                     ("3d-2x3x3", (1, 4, 2, 3, 3)), ("batch-2-3x3", (2, 4, 3, 3))):
        for t in ACTS:
            rng = _rng("gap-depth", name, t)
            sx = 2.0**-6
            x = _codes(rng, t, xs, within=100)
            mid = _mid(t)
            yield _unary("GlobalAveragePool", "geometry", name, t, x, sx, mid, _calibrated(rng, t, sx, 0.25), mid - 1,
                         clause="qdq-sum-order")
            for parity, zy in (("even", mid), ("odd", mid + 1)):
                yield _unary("GlobalAveragePool", "ties", f"{name}-scale-ratio-2-zero-point-{parity}", t, x, sx, mid,
                             sx * 2, zy, clause="qdq-sum-order")


__all__ = ["POOLS", "global_pool", "pool_depth"]

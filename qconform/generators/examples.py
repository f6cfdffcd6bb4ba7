"""The seed documents' worked examples, with their expected outputs written out by hand.

They are cases like any other (the oracle computes their goldens); tests/test_oracle.py also checks
the oracle against the hand-written values below, so the oracle cannot drift from the spec's own
examples unnoticed. Clause: qconform/docs/semantics.md#examples."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from qconform import schemas
from qconform.case import Draft
from qconform.generators.common import draft

FAMILY = "examples"


@dataclass(frozen=True)
class Example:
    name: str
    op: str
    versions: tuple[int, ...]
    combo: dict[str, str]
    values: dict[str, Any]
    expected: list
    attrs: dict[str, Any] = field(default_factory=dict)
    source: str = ""


_AXIS_X = [[[[-162, 10], [-100, 232], [-20, -50]],
            [[-76, 0], [0, 252], [32, -44]],
            [[245, -485], [-960, -270], [-375, -470]]]]

EXAMPLES = [
    Example("default", "QuantizeLinear", (10, 13), {"T1": "float32", "tensor(float)": "float32", "T2": "uint8"},
            {"x": [0, 2, 3, 1000, -254, -1000], "y_scale": 2.0, "y_zero_point": 128},
            [128, 129, 130, 255, 1, 0], source="shared/seeds/000 (QuantizeLinear-13, test_quantizelinear)"),
    Example("axis", "QuantizeLinear", (13,), {"T1": "float32", "tensor(float)": "float32", "T2": "uint8"},
            {"x": _AXIS_X, "y_scale": [2, 4, 5], "y_zero_point": [84, 24, 196]},
            [[[[3, 89], [34, 200], [74, 59]],
              [[5, 24], [24, 87], [32, 13]],
              [[245, 99], [4, 142], [121, 102]]]],
            source="shared/seeds/000 (QuantizeLinear-13, test_quantizelinear_axis)"),
    Example("default", "DequantizeLinear", (10, 13), {"T": "uint8", "tensor(float)": "float32"},
            {"x": [0, 3, 128, 255], "x_scale": 2.0, "x_zero_point": 128},
            [-256.0, -250.0, 0.0, 254.0], source="ONNX DequantizeLinear-13 doc example test_dequantizelinear"),
    Example("axis", "DequantizeLinear", (13,), {"T": "uint8", "tensor(float)": "float32"},
            {"x": [[[[3, 89], [34, 200], [74, 59]], [[5, 24], [24, 87], [32, 13]],
                    [[245, 99], [4, 142], [121, 102]]]],
             "x_scale": [2, 4, 5], "x_zero_point": [84, 24, 196]},
            [[[[-162.0, 10.0], [-100.0, 232.0], [-20.0, -50.0]],
              [[-76.0, 0.0], [0.0, 252.0], [32.0, -44.0]],
              [[245.0, -485.0], [-960.0, -270.0], [-375.0, -470.0]]]],
            source="ONNX DequantizeLinear-13 doc example test_dequantizelinear_axis"),
]


def example_drafts() -> Iterator[tuple[Example, Draft]]:
    for ex in EXAMPLES:
        for v in ex.versions:
            spec = schemas.get(ex.op, v)
            combo = {k: ex.combo[k] for k in spec.type_params}
            yield ex, draft(spec, combo, FAMILY, ex.name, ex.values, ex.attrs, clause="examples",
                            provenance=ex.source)


def generate() -> Iterator[Draft]:
    for _ex, d in example_drafts():
        yield d

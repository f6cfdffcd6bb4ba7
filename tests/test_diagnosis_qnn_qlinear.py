"""The QNN HTP model of single QLinearConv and QLinearMatMul nodes
(qconform/diagnosis/models/qnn_htp_qlinear.py): its weight requantisation and accumulator-grid
arithmetic on hand-computed values, where it applies, and, run as a runtime over corpus cases that
expose it, failed and named first."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from test_diagnosis_qnn import assert_failed_and_named_first

from qconform import corpus as corpus_mod
from qconform.diagnosis.models import MODELS
from qconform.diagnosis.models.qnn_htp_qlinear import symmetric_int8
from qconform.diagnosis.models.qnn_htp_requant import requantise_on_accumulator_grid
from qconform.plugin import default_golden

NAME = "htp-qlinear-weights-symmetric-int8"


@pytest.fixture(scope="module")
def index():
    return corpus_mod.index(default_golden())


def test_channels_that_fit_int8_are_kept_and_others_go_symmetric():
    one = [Fraction(1)] * 3
    kept, scales = symmetric_int8(np.array([[-128, 127, 0], [5, -3, 0], [1, 2, 3]]), one)
    assert kept.tolist() == [[-128, 127, 0], [5, -3, 0], [1, 2, 3]] and scales == one
    # uint8 weights with zero point 0: 140 is the channel's largest, so 140/127 per code, half up;
    # a channel of negative differences (int8 zero point 127) reaches −128 at its largest magnitude;
    # a channel that fits keeps its codes and scale beside them
    codes, scales = symmetric_int8(np.array([[100, 140, 18], [-255, -1, 0], [38, -114, 13]]), one)
    assert codes.tolist() == [[91, 127, 16], [-128, -1, 0], [38, -114, 13]]
    assert scales == [Fraction(140, 127), Fraction(255, 128), Fraction(1)]


def test_the_grid_is_in_accumulator_units_and_the_offset_is_rounded_to_one():
    # the witness: x − z_x = [2, 115, −95] against the held weights [91, 127, 16] (u = 140/127),
    # s_y = 512, z_y = 128 (uint8): the exact 156.496 rounds to 156 by the text, 157 here
    acc = 2 * 91 + 115 * 127 - 95 * 16
    assert round(Fraction(2 * 100 + 115 * 140 - 95 * 18, 512) + 128) == 156
    assert requantise_on_accumulator_grid(acc, Fraction(0), Fraction(140, 127), Fraction(512), 128, 0, 255) == 157
    # int8 QLinearConv random draw-19 (weights kept): the offset 128·s_y/u is 74594.9…, added as
    # 74595, so acc = 32416 lands on grid step 1672 (⌊…/2^6⌋) where the exact offset gives 1671
    sx, sw, sy = (Fraction(float(np.float32(v))) for v in (0.04013372, 0.00363601, 0.08503883))
    assert requantise_on_accumulator_grid(32416, Fraction(0), sx * sw, sy, 0, -128, 127) == 56


#: Corpus cases the model changes: uint8 weights with zero point 0 (converted), int8 weights with
#: zero point 127 (converted), int8 weights kept (the grid and the rounded offset alone), QLinearMatMul.
EXPOSED = ["QLinearConv-10/uint8-uint8-uint8-int32-float32/attributes/auto-notset",
           "QLinearConv-10/int8-int8-int8-int32-float32/zero-points/x-127-w-127",
           "QLinearConv-10/int8-int8-int8-int32-float32/random/draw-19",
           "QLinearMatMul-10/uint8-uint8-uint8-float32/zero-points/a-qmax-b-qmax",
           "QLinearMatMul-21/float16-int8-uint8-int8/zero-points/a-qmax-b-qmax"]


def test_a_runtime_with_the_deviation_fails_and_the_model_is_named_first(index):
    assert_failed_and_named_first(NAME, EXPOSED, index)


def test_it_applies_to_8_bit_nodes_with_per_tensor_activations_only(index):
    model = MODELS[NAME]
    assert model.applies(index.case(EXPOSED[0]).draft)
    wide = [r.id for r in index.refs if r.id.startswith("QLinearMatMul-21/float32-float8")][:3]
    assert not any(model.applies(c.draft) for c in index.cases_of(wide).values())

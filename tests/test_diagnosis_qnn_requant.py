"""The QNN HTP requantisation models (qconform/diagnosis/models/qnn_htp_requant.py): their arithmetic
on the witnesses their declarations give, where they apply, and each one run as a runtime over corpus
cases that expose it is failed and named first."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from test_diagnosis_qnn import assert_failed_and_named_first

from qconform import corpus as corpus_mod
from qconform.diagnosis.models import MODELS
from qconform.diagnosis.models.qnn_htp_requant import float16_ratio, requantise, requantise_on_accumulator_grid
from qconform.plugin import default_golden


@pytest.fixture(scope="module")
def index():
    return corpus_mod.index(default_golden())


def test_the_16_bit_requantisation_drops_the_low_byte_and_the_zero_point_below_it():
    # s_x·s_w = s_y (m = 1), z_y = 1, int16 (qmin −32768): the offset (1 + 32768)·s_y is floored on the
    # grid 2^8·s_x·s_w apart from the accumulator, so z_y's 1 is lost, and acc = 19 gives ⌊19/256⌋ = 0
    s = Fraction(1, 2048)
    grid = 256 * s
    assert requantise(19 * s, (1 + 32768) * s, grid, s, 2, -32768) == 0
    assert requantise(-2 * s, (1 + 32768) * s, grid, s, 2, -32768) == -256
    assert requantise(256 * s, (1 + 32768) * s, grid, s, 2, -32768) == 256


def test_the_8_bit_requantisation_floors_on_an_eighth_of_the_output_scales_power_of_two():
    # u = s_x·s_w = 2^-11, s_y in [1, 2): the grid is 2^8 accumulator units, 2^-3 in real units; the
    # accumulator 12936 (132.5168 codes with z_y = 127) plus the offset 127·s_y/u (rounded) floors to
    # 1060 eighths and rounds to 132 where the text rounds to 133
    sy = Fraction(float(np.float32(1.144973)))
    u = Fraction(1, 2048)
    assert round(12936 * u / sy + 127) == 133
    assert requantise_on_accumulator_grid(12936, Fraction(0), u, sy, 127, 0, 255) == 132
    assert float16_ratio(256 * u / sy) == Fraction(float(np.float16(0.125 / 1.144973)))


#: Corpus cases each model changes (a Conv → Relu → Q with z_y = qmin, the Relu fused; a Gemm bias
#: whose scale is not s_x·s_w, folded at s_x·s_w).
EXPOSED = {
    "htp-accumulator-low-byte-dropped": ["qdq.Conv-21/int16-int8-int16/ties/1d-k1-unit-zero-point-odd",
                                         "qdq.Conv-21/uint16-int8-uint16/geometry/2d-k3x3-pads-1"],
    "htp-eighth-code-intermediate": ["qdq.Conv-21/uint8-uint8-uint8/geometry/3d-k3-pads-1",
                                     "qdq.Conv-21/int8-int8-int8/geometry/2d-k3x3-pads-1",
                                     "qdq.Conv-21/uint8-int8-uint8/fused-activation/2d-k3x3-pads-1-relu-qmin",
                                     "qdq.Gemm-21/int8-int8-int8/basic/bias-scale-not-product"],
    "htp-convert-mixed-width-half-down": ["qdq.Requant-21/uint8-uint16/ties/scale-ratio-2^1",
                                          "qdq.Requant-21/uint16-uint8-uint16/chain/ratio-2-then-half-zero-points-odd"],
    "htp-per-axis-bias-codes-as-reals": ["qdq.Conv-21/int8-int8-int8/geometry-per-tensor/1d-k3",
                                         "qdq.Conv-21/uint16-int8-uint16/basic/per-tensor-bias"],
}


@pytest.mark.parametrize("name", sorted(EXPOSED))
def test_a_runtime_with_the_deviation_fails_and_the_model_is_named_first(name, index):
    assert_failed_and_named_first(name, EXPOSED[name], index)


def test_each_width_applies_to_its_own_activations_only(index):
    low, eighth = MODELS["htp-accumulator-low-byte-dropped"], MODELS["htp-eighth-code-intermediate"]
    c16 = index.case("qdq.Conv-21/int16-int8-int16/ties/1d-k1-unit-zero-point-odd")
    c8 = index.case("qdq.Conv-21/uint8-uint8-uint8/geometry/3d-k3-pads-1")
    assert low.applies(c16.draft) and not eighth.applies(c16.draft)
    assert eighth.applies(c8.draft) and not low.applies(c8.draft)
    per_axis = MODELS["htp-per-axis-bias-codes-as-reals"]
    assert not per_axis.applies(c8.draft)  # per-channel weights: the bias's scales are read


def test_a_gemm_bias_is_folded_at_the_accumulators_scale_whatever_its_own(index):
    """onnxruntime/onnxruntime-qnn#739: the HTP adds the int32 bias codes at s_x·s_w; a Gemm's bias
    of another scale reaches it unchanged (gemm_op_builder.cc requantises none)."""
    from qconform.diagnosis.models.fused_pattern import pattern
    from qconform.diagnosis.models.qnn_htp_requant import bias_as_folded

    p = pattern(index.case("qdq.Gemm-21/int8-int8-int8/basic/bias-scale-not-product").draft)
    b = bias_as_folded(p)
    assert np.array_equal(np.asarray(b.codes, np.int64), np.asarray(p.operands[2].codes, np.int64))
    expected = np.float32(p.operands[0].scale) * np.asarray(p.operands[1].scale, np.float32)
    assert np.array_equal(np.asarray(b.scale, np.float32).reshape(-1), expected.reshape(-1))
    assert not np.array_equal(np.asarray(p.operands[2].scale, np.float32).reshape(-1), expected.reshape(-1))

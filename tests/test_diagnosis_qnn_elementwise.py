"""The QNN HTP elementwise models (qconform/diagnosis/models/qnn_htp_elementwise.py) and the linear and
cubic Resize ones of qnn_htp.py: their arithmetic on the witnesses their declarations give, and each one
run as a runtime over corpus cases that expose it is failed and named first."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from test_diagnosis_qnn import assert_failed_and_named_first

from qconform import corpus as corpus_mod
from qconform.diagnosis.models import MODELS
from qconform.diagnosis.models.fused_pattern import Operand
from qconform.diagnosis.models.qnn_htp import requantise_codes
from qconform.diagnosis.models.qnn_htp_elementwise import (add_codes, common_shift_multipliers, hard_swish_code,
                                                           leaky_relu_16_multipliers, leaky_relu_code)
from qconform.plugin import default_golden


@pytest.fixture(scope="module")
def index():
    return corpus_mod.index(default_golden())


def test_add_multipliers_share_one_shift_the_larger_keeping_15_bits():
    # the uint16 draw: 5.137188·2^12 = 21041.9 → 21042 < 2^15; 0.254006·2^12 = 1040.4 → 1040 (11 bits)
    ratios = [Fraction(0.2540059197161478), Fraction(5.137187802163122)]
    assert common_shift_multipliers(ratios) == ([1040, 21042], 12)
    assert common_shift_multipliers([Fraction(1), Fraction(85, 1)]) == ([256, 21760], 8)


def test_add_rounds_the_shifted_sum_half_up_with_the_smaller_ratio_coarse():
    sy = np.float32(1.0)
    a = Operand(np.asarray([42768, 32768, 32769], np.uint16), "uint16", np.float32(0.2540059197161478), np.uint16(32768), {})
    b = Operand(np.asarray([32768, 32768, 32768], np.uint16), "uint16", np.float32(5.137187802163122), np.uint16(32768), {})
    y = add_codes([a, b], sy, 32768, "uint16")
    # 1040·10000/4096 = 2539.06 (the exact 2540.06); 0 stays 0; 1040/4096 = 0.254 → 0
    assert list(y) == [32768 + 2539, 32768, 32768]


def test_leaky_relu_multiplies_in_float32_and_rounds_the_code_half_to_even():
    sx = Fraction(float(np.float32(0.00910579226911068)))
    # −85·fl32(0.1) is −8.5 in float32 (exactly −8.5000001267 in reals): a tie, then z_y = 128 + half even
    v = leaky_relu_code(-85, 0.1, sx, sx)
    assert v == Fraction(-17, 2)
    assert round(v + 128) == 120
    assert leaky_relu_code(55, 0.01, sx, 2 * sx) == Fraction(55, 2)  # 27.5 + z_y 129 = 156.5: even code 156


def test_16_bit_leaky_relu_floors_both_multipliers_on_one_grid():
    # s_y = s_x: n = 15, the slope 0.01 floors to 327/2^15; −31680 gives −316.15 → −316 (the text −317)
    pos, neg, n = leaky_relu_16_multipliers(0.01, Fraction(1))
    assert (pos, neg, n) == (1, Fraction(327, 2**15), 15)
    assert (neg * -31680 + Fraction(1, 2)).__floor__() == -316
    # s_x/s_y = 14.5: four integer bits, n = 11; 0.125·14.5 = 1.8125 on the 2^-11 grid
    pos, neg, n = leaky_relu_16_multipliers(0.125, Fraction(29, 2))
    assert n == 11 and neg == Fraction(3712, 2**11)


def test_hard_swish_is_exact():
    s = Fraction(1, 4)
    assert hard_swish_code(-4, s, s) == Fraction(-1 * 2, 6) * 4  # x = −1: −1·2/6 over 1/4
    assert hard_swish_code(16, s, s) == 16  # x = 4: clamp gives 6, x itself
    assert hard_swish_code(-16, s, s) == 0


def test_an_8_bit_resize_requantises_through_float16_then_half_away():
    v = -59 * Fraction(1.6523564415021448)  # −97.489 codes: float16 has 2^-4 steps there, −97.5
    assert requantise_codes(v, "uint8") == -98
    assert requantise_codes(v, "uint16") == -97  # 16-bit: exact
    assert requantise_codes(Fraction(5, 2), "int8") == 3 and requantise_codes(Fraction(-5, 2), "int8") == -3


#: Corpus cases each model changes.
EXPOSED = {
    "htp-add-15-bit-common-shift": ["qdq.Add-21/uint16-uint16-uint16/basic/draw-1",
                                    "qdq.Add-21/uint16-int8-uint16/residual-conv/2d-k1x1-calibrated"],
    "htp-leaky-relu-float32-ratio-half-even": [
        "qdq.LeakyRelu-21/uint8-uint8/ties/alpha-0.01-scale-ratio-2^1-zero-point-odd",
        "qdq.LeakyRelu-21/uint8-uint8/ties/alpha-0.2-scale-ratio-2^1-zero-point-even"],
    "htp-leaky-relu-16-bit-floored-multipliers": ["qdq.LeakyRelu-21/uint16-uint16/fold/alpha-0.01-equal-qparams",
                                                  "qdq.LeakyRelu-21/uint16-uint16/basic/alpha-0.125-calibrated"],
    "htp-hard-swish-exact-half-even": [
        "qdq.HardSwish-21/uint8-uint8/ties/input-arbitrary-scale-ratio-2^1-zero-point-odd",
        "qdq.HardSwish-21/int8-int8/ties/input-power-of-two-scale-ratio-2^1-zero-point-odd"],
    "resize-requantised-through-float16": ["qdq.Resize-21/uint8-uint8/basic/linear-2x-half-pixel",
                                           "qdq.Resize-21/int8-int8/basic/cubic-a--0.5-calibrated"],
    "linear-resize-codes-exact-half-up": ["qdq.Resize-21/uint8-uint8/fold/linear-asymmetric-up-2-equal-qparams",
                                          "qdq.Resize-21/int8-int8/fold/linear-half_pixel-up-2-equal-qparams"],
}


@pytest.mark.parametrize("name", sorted(EXPOSED))
def test_a_runtime_with_the_deviation_fails_and_the_model_is_named_first(name, index):
    assert_failed_and_named_first(name, EXPOSED[name], index)


def test_the_unary_models_apply_to_their_own_widths_only(index):
    lr, hs = MODELS["htp-leaky-relu-float32-ratio-half-even"], MODELS["htp-hard-swish-exact-half-even"]
    lr16 = MODELS["htp-leaky-relu-16-bit-floored-multipliers"]
    c16 = index.case("qdq.LeakyRelu-21/uint16-uint16/fold/alpha-0.1-equal-qparams")
    assert not lr.applies(c16.draft) and lr16.applies(c16.draft)
    assert not lr16.applies(index.case("qdq.LeakyRelu-21/uint8-uint8/fold/alpha-0.1-equal-qparams").draft)
    assert not hs.applies(index.case("qdq.HardSwish-21/uint16-uint16/fold/input-arbitrary-equal-qparams").draft)

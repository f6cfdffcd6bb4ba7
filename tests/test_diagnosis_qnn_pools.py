"""The QNN HTP pooling models (qconform/diagnosis/models/qnn_htp_pools.py): their arithmetic on the
values measured, where each applies, and each one run as a runtime over corpus cases that expose it is
failed and named first."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from test_diagnosis_qnn import assert_failed_and_named_first

from qconform import corpus as corpus_mod
from qconform.diagnosis.models import MODELS
from qconform.diagnosis.models.qnn_htp_pools import average_code, half_away_float16, reciprocal_15_bit
from qconform.plugin import default_golden


@pytest.fixture(scope="module")
def index():
    return corpus_mod.index(default_golden())


def test_the_maximum_is_requantised_through_float16_then_half_away():
    # uint8 basic/other-qparams: s_x/s_y = 0.90387, d = ±99: exactly ±89.4829, float16 ±89.5 (spacing
    # 1/16 there), then away from zero: ±90 where the text gives ±89
    ratio = Fraction(float(np.float32(0.002421061974018812))) / Fraction(float(np.float32(0.002678557299077511)))
    assert round(float(99 * ratio), 4) == 89.4829
    assert half_away_float16(99, ratio) == 90 and half_away_float16(-99, ratio) == -90
    # s_x/s_y = 1.5343: 29 → 44.4957, float16 44.5 (spacing 1/32), 45; exact ties go away from zero
    ratio = Fraction(1, 64) / Fraction(float(np.float32(0.010183559730648994)))
    assert half_away_float16(29, ratio) == 45
    assert half_away_float16(-3, Fraction(1, 2)) == -2 and half_away_float16(3, Fraction(1, 2)) == 2
    assert half_away_float16(0, Fraction(1, 2)) == 0


def test_the_small_padded_kernel_reads_multiples_of_four_one_code_higher(index):
    """uint8, s_y = 2·s_x, z_x = z_y = 128, 3×3, pads 1 on 6×6: the maxima 180, 184, 212, 220, 224 and
    228 (d ≡ 0 mod 4) come out one code above the text, the others as the text (ties up, away from 0)."""
    case = index.case("qdq.MaxPool-21/uint8-uint8/ties/2d-k3-pads-1-scale-ratio-2-zero-point-even")
    model = MODELS["htp-max-pool-small-padded-code-bump"]
    assert model.applies(case.draft) and not MODELS["htp-max-pool-float16-requant"].applies(case.draft)
    from qconform.oracle.graph_ops import pool_windows

    x = next(a for a in case.draft.inputs if a.name == "x").value.astype(np.int64)
    top = pool_windows(x.astype(np.float64), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, -np.inf)[0].max(-1)
    got = model.outputs(case.draft)[0].astype(np.int64)
    d = top.astype(np.int64) - 128
    bumped = (d % 4 == 0) & (d != 0)
    assert bumped.any() and (~bumped).any()
    want = np.floor((d + bumped) / 2 + 0.5).astype(np.int64) + 128  # d ≥ 0 here where it matters
    assert np.array_equal(got[d >= 0], want[d >= 0])


def test_where_each_8_bit_kernel_applies(index):
    small = MODELS["htp-max-pool-small-padded-code-bump"]
    plain = MODELS["htp-max-pool-float16-requant"]
    for cid, bump in [("qdq.MaxPool-21/int8-int8/geometry/1d-k2-pads", True),  # 1-D: height 1, pads at the end
                      ("qdq.MaxPool-21/uint8-uint8/geometry/2d-k2-stride-2-ceil-odd", True),  # ceil_mode
                      ("qdq.MaxPool-21/uint8-uint8/geometry/2d-same-lower-k2", False),  # the beginnings padded only
                      ("qdq.MaxPool-21/uint8-uint8/basic/other-qparams", False)]:  # no padding
        draft = index.case(cid).draft
        assert small.applies(draft) is bump and plain.applies(draft) is not bump, cid
    sixteen = index.case("qdq.MaxPool-21/int16-int16/geometry/1d-k2-pads").draft
    assert not small.applies(sixteen) and not plain.applies(sixteen)
    assert MODELS["max-pool-pads-read-as-zero"].applies(sixteen)
    assert not MODELS["max-pool-pads-read-as-zero"].applies(index.case("qdq.MaxPool-21/int8-int8/geometry/1d-k2-pads").draft)


def test_the_average_multiplies_by_a_15_bit_reciprocal_and_adds_a_constant():
    # s_x/(s_y·N) = 1/12 (2×3 windows, s_y = 2·s_x): M = 21845 < 2^15 at 2^-18, just under 1/12, so the
    # exact tie 18/12 = 1.5 lands below it (1), and a sum of 6 (0.5) stays above it thanks to 2^-16 (1)
    assert reciprocal_15_bit(Fraction(1, 12)) == Fraction(21845, 2 ** 18)
    assert average_code(18, 6, Fraction(1, 2)) == 1 and average_code(6, 6, Fraction(1, 2)) == 1
    assert average_code(-90, 6, Fraction(1, 2)) == -7  # −7.5 + 2^-16·… rounds up
    # 1/18 (3×3, s_y = 2·s_x): 29127·2^-19, 2^-16·… under it; the constant 2^-16 lifts the ties up to
    # 3.5 (a sum of 63) back over them, not 4.5 (a sum of 81), measured so on every code sum
    assert average_code(63, 9, Fraction(1, 2)) == 4 and average_code(81, 9, Fraction(1, 2)) == 4
    # a 2×2 window with s_x/s_y < 2: the constant 2^(⌊log₂ r⌋ − 5), r = 0.2169: −13.5019 rounds to −13
    ratio = Fraction(1, 64) / Fraction(float(np.float32(0.07203830778598785)))
    assert average_code(-249, 4, ratio) == -13 and round(float(-249 * ratio / 4), 4) == -13.5019


def test_the_average_model_applies_to_tiling_windows_only(index):
    model = MODELS["htp-average-15-bit-reciprocal"]
    for cid, applies in [("qdq.AveragePool-21/uint8-uint8/ties/2d-k2x3-scale-ratio-2-zero-point-even", True),
                         ("qdq.GlobalAveragePool-21/uint16-uint16/basic/3x3", True),
                         ("qdq.AveragePool-21/uint8-uint8/ties/2d-k3-stride-2-scale-ratio-2-zero-point-even", False),
                         ("qdq.AveragePool-21/uint8-uint8/geometry/2d-k3-pads-1", False),
                         ("qdq.AveragePool-21/uint8-uint8/ties/3d-k2-stride-2-scale-ratio-2-zero-point-odd", False)]:
        assert model.applies(index.case(cid).draft) is applies, cid


#: Corpus cases each model changes: float16 spacing next to a tie, the small padded kernel's bump, the
#: average's 15-bit reciprocal next to a tie.
EXPOSED = {
    "htp-max-pool-float16-requant": ["qdq.MaxPool-21/uint8-uint8/basic/other-qparams",
                                     "qdq.MaxPool-21/int8-int8/geometry/2d-valid-stride-2"],
    "htp-max-pool-small-padded-code-bump": ["qdq.MaxPool-21/int8-int8/geometry/2d-k3-pads-1",
                                            "qdq.MaxPool-21/uint8-uint8/ties/2d-k5-pads-2-scale-ratio-2-zero-point-odd"],
    "htp-average-15-bit-reciprocal": ["qdq.AveragePool-21/uint8-uint8/ties/2d-k2x3-scale-ratio-2-zero-point-even",
                                      "qdq.AveragePool-21/uint16-uint16/basic/kernel-2x2",
                                      "qdq.GlobalAveragePool-21/uint16-uint16/basic/3x3"],
}


@pytest.mark.parametrize("name", sorted(EXPOSED))
def test_a_runtime_with_the_deviation_fails_and_the_model_is_named_first(name, index):
    assert_failed_and_named_first(name, EXPOSED[name], index)

"""The integer-kernel vocabulary (qconform/diagnosis/models/fixed_point.py) at the level of its
arithmetic: gemmlowp's and TFLite's roundings as their sources define them, a pattern's exact value
and what the exact-requantisation models make of it, and the characterisation's rule for positions.
The corpus-wide checks (each model run as a runtime, failed and named first) are
tests/test_diagnosis.py's."""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from qconform.case import Arg, Draft, Node, PATTERN_DOMAIN
from qconform.declarations import operators
from qconform.diagnosis.features import Column, Rows
from qconform.diagnosis.features_pattern import exact_places
from qconform.diagnosis.models import MODELS
from qconform.diagnosis.models.fixed_point_kernels import single_rounding
from qconform.diagnosis.models.matmul import _fixed_point_multiply, _quantize_multiplier
from qconform.diagnosis.search import POSITION_ONLY_SUPPORT, describe

Q, DQ = operators.QDQ


def _arg(name, t, v, init=True):
    return Arg(name, t, np.asarray(v, dtype={"float32": np.float32, "uint8": np.uint8, "int8": np.int8,
                                             "int64": np.int64}[t]), initializer=init)


def _chain(op: str, x, sx, zx, sy, zy, extra=(), attrs=None, t="uint8") -> Draft:
    nodes = (Node(DQ, ("x", "sx", "zx"), ("f",)), Node(op, ("f", *[a.name for a in extra]), ("g",), attrs or {}),
             Node(Q, ("g", "sy", "zy"), ("y",)))
    inputs = (_arg("x", t, x, init=False), _arg("sx", "float32", sx), _arg("zx", t, zx), *extra,
              _arg("sy", "float32", sy), _arg("zy", t, zy))
    return Draft(op=op, opset=21, types=f"{t}-{t}", family="test", name="t", inputs=inputs, domain=PATTERN_DOMAIN,
                 graph=nodes)


def test_gemmlowp_and_tflite_roundings_as_their_sources_define_them():
    """SaturatingRoundingDoublingHighMul's nudge 1 − 2^30 truncates a negative tie toward zero (ties go
    toward +∞); RoundingDivideByPOT rounds ties away from zero; together they round twice (0.25 → 1);
    TFLITE_SINGLE_ROUNDING rounds once, half up."""
    half = 1 << 30  # q of 0.5 at shift 0
    assert [_fixed_point_multiply(x, half, 0) for x in (1, -1, 3, -3)] == [1, 0, 2, -1]
    assert _fixed_point_multiply(1, half, -1) == 1  # 0.25: 0.5 after the high multiply, then away from zero
    assert [single_rounding(x, half, -1) for x in (1, 2, -2, 6)] == [0, 1, 0, 2]  # 0.25, 0.5, -0.5, 1.5
    q, shift = _quantize_multiplier(0.7)
    assert Fraction(q, 1 << 31) * 2**shift - Fraction(0.7) < Fraction(1, 1 << 31)


def test_exact_value_sees_ties_the_graph_float_steps_hide():
    """s_y = 2·s_x with s_x not a power of two: (x − z)/2 is a tie for every odd difference, whatever
    fl32((x − z)·s_x)/s_y makes of it; the exact-requantisation models round those ties their way."""
    x = np.arange(100, 140, dtype=np.uint8)
    d = _chain("Identity", x, 0.0291, 128, np.float32(2 * np.float32(0.0291)), 128)
    places = exact_places(d)
    diffs = x.astype(int) - 128
    assert np.array_equal(places == 4, diffs % 2 == 1)  # 4: an exact tie
    up = MODELS["pattern-exact-half-up"].outputs(d)[0].astype(int) - 128
    away = MODELS["pattern-exact-half-away"].outputs(d)[0].astype(int) - 128
    assert np.array_equal(up, np.floor(diffs / 2 + 0.5))
    assert np.array_equal(away, np.sign(diffs) * np.floor(np.abs(diffs) / 2 + 0.5))


def test_split_parts_are_requantised_each_with_its_own_parameters():
    x = np.arange(0, 16, dtype=np.uint8).reshape(2, 8)
    nodes = (Node(DQ, ("x", "sx", "zx"), ("f",)), Node("Split", ("f", "parts"), ("a", "b"), {"axis": 1}),
             Node(Q, ("a", "sa", "za"), ("ya",)), Node(Q, ("b", "sb", "zb"), ("yb",)))
    inputs = (_arg("x", "uint8", x, init=False), _arg("sx", "float32", 0.5), _arg("zx", "uint8", 4),
              _arg("parts", "int64", [3, 5]), _arg("sa", "float32", 1.0), _arg("za", "uint8", 10),
              _arg("sb", "float32", 0.25), _arg("zb", "uint8", 0))
    d = Draft(op="Split", opset=21, types="uint8-uint8", family="test", name="t", inputs=inputs,
              domain=PATTERN_DOMAIN, graph=nodes)
    ya, yb = MODELS["pattern-exact-half-up"].outputs(d)
    diffs = x.astype(int) - 4
    assert np.array_equal(ya, np.clip(np.floor(diffs[:, :3] * 0.5 + 0.5) + 10, 0, 255))
    assert np.array_equal(yb, np.clip(diffs[:, 3:] * 2, 0, 255))


def test_moved_codes_keep_the_input_codes():
    x = np.arange(0, 16, dtype=np.uint8).reshape(1, 4, 2, 2)
    d = _chain("DepthToSpace", x, 0.1, 3, 0.3, 7, attrs={"blocksize": 2, "mode": "DCR"})
    (y,) = MODELS["moved-codes-unrequantised"].outputs(d)
    n, c, h, w = x.shape
    dcr = x.reshape(n, 2, 2, c // 4, h, w).transpose(0, 3, 4, 1, 5, 2).reshape(n, c // 4, h * 2, w * 2)
    assert np.array_equal(y, dcr)
    assert not MODELS["moved-codes-unrequantised"].applies(_chain("DepthToSpace", x, 0.1, 3, 0.1, 3,
                                                                  attrs={"blocksize": 2}))


def test_positions_alone_are_said_only_when_exact_and_well_supported():
    """One deviating element singled out by a lane is noise to a vendor; a whole loop tail is not."""
    lane = Column("position:flat:mod16", "position", "the flat index mod 16", str)
    value = Column("value:near", "value", "", lambda v: "near a tie" if v else "not near a tie")
    n = 256
    idx = np.arange(n)
    for deviating, want_position in ((idx == 43, False), (idx % 16 == 11, True)):
        rows = Rows(n, {lane.key: idx % 16, value.key: ((idx % 7 == 1) | deviating).astype(np.int64)}, deviating)
        found = describe(rows, {lane.key: lane, value.key: value})
        said_position_alone = any(all(t.key == lane.key for t in d.terms) for d in found)
        assert said_position_alone == want_position, [d.text for d in found]
        assert want_position or np.count_nonzero(deviating) < POSITION_ONLY_SUPPORT


def test_pattern_features_read_every_pattern_of_the_corpus(corpus):
    """The pattern columns are computed for each pattern group's cases without raising (a blocked
    weight's zero points, a Split's several outputs, a float output): one exception would take the
    whole characterisation section of a report with it."""
    from qconform.diagnosis.features_pattern import columns

    seen = set()
    for c in corpus.cases:
        key = (c.op, c.types, c.family)
        if not c.is_graph or key in seen:
            continue
        seen.add(key)
        size = int(c.readings[0].outputs[0].size)
        columns(c.draft, size, np.arange(min(size, 4)))
    assert len(seen) > 100

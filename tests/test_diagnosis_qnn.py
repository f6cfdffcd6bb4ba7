"""The QNN HTP models (qconform/diagnosis/models/qnn_htp.py): their index rule and padding as their
sources define them, and each one run as a runtime over corpus cases that expose it is failed and
named first. (The corpus-wide version of the last point, for every model, is
tests/test_diagnosis.py; this one reads only the few groups these models touch.)"""
from __future__ import annotations

import numpy as np
import pytest

from qconform import corpus as corpus_mod
from qconform.compare import compare
from qconform.diagnosis import diagnose as dg
from qconform.diagnosis.models import MODELS
from qconform.diagnosis.models.qnn_htp import nearest_neighbor_indices
from qconform.plugin import default_golden


@pytest.fixture(scope="module")
def index():
    return corpus_mod.index(default_golden())


def test_nearest_neighbor_indices_follow_tensorflow_resize_nearest_neighbor():
    # half_pixel_centers: floor((y + 0.5)·in/out); the text's half_pixel with nearest_mode ceil would
    # read input 1 for output 1 (ceil(1.5/2 − 0.5) = 1), TensorFlow's rule input 0
    assert nearest_neighbor_indices(4, 8, False, True) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert nearest_neighbor_indices(4, 2, False, True) == [1, 3]  # floor(0.5·2), floor(1.5·2)
    # asymmetric (and pytorch_half_pixel, which keeps neither flag): floor(y·in/out)
    assert nearest_neighbor_indices(4, 8, False, False) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert nearest_neighbor_indices(8, 4, False, False) == [0, 2, 4, 6]
    # align_corners: roundf(y·(in − 1)/(out − 1)), halves away from zero
    assert nearest_neighbor_indices(5, 9, True, False) == [0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert nearest_neighbor_indices(9, 5, True, False) == [0, 2, 4, 6, 8]


#: Corpus cases each model changes: nearest_mode ceil and floor (dropped), a 16-bit MaxPool whose
#: padding meets negative values, a cubic Resize whose outside weights the text sets to 0.
EXPOSED = {
    "resize-nearest-neighbor-flags-only": ["qdq.Resize-21/uint8-uint8/fold/nearest-ceil-half_pixel-up-equal-qparams",
                                           "qdq.Resize-21/int8-int8/basic/nearest-round_prefer_ceil-asymmetric-up-calibrated"],
    "cubic-resize-exclude-outside-ignored": [
        "qdq.Resize-21/int8-int8/ties/cubic-a--8.0-asymmetric-exclude-outside-1-scale-ratio-2^1-zero-point-even",
        "qdq.Resize-21/uint8-uint8/ties/cubic-a-4.0-asymmetric-exclude-outside-1-scale-ratio-2^1-zero-point-odd"],
    "max-pool-pads-read-as-zero": ["qdq.MaxPool-21/int16-int16/geometry/1d-k2-pads",
                                   "qdq.MaxPool-21/int16-int16/geometry/2d-k2-stride-2-ceil-odd"],
}


@pytest.mark.parametrize("name", sorted(EXPOSED))
def test_a_runtime_with_the_deviation_fails_and_the_model_is_named_first(name, index):
    assert_failed_and_named_first(name, EXPOSED[name], index)


def assert_failed_and_named_first(name: str, ids: list[str], index) -> None:
    """A runtime computing model ``name`` fails each of these corpus cases, and the diagnosis names
    the model on each and first over all of them (the guide's test for a new model)."""
    model = MODELS[name]
    cases = index.cases_of(ids)
    assert len(cases) == len(ids), f"corpus cases missing: {set(ids) - set(cases)}"
    records = []
    for case in cases.values():
        assert model.applies(case.draft), case.id
        out = list(model.outputs(case.draft))
        outcome = compare(case, out)
        assert outcome.verdict == "fail", f"{case.id}: {name} gives a permitted reading"
        names = [d.model for d in dg.diagnose_case(case, out)]
        assert name in names, f"{case.id}: {names}"
        records.append({"id": case.id, "domain": case.domain, "op": case.op, "opset": case.opset,
                        "types": case.types, "verdict": "fail", "diagnosis": names})
    top = dg.overall(dg.rank(records, cases))
    assert top[0].model == name, [(o.model, o.key()) for o in top[:3]]


def test_max_pool_padding_is_the_zero_point_only_where_the_window_leaves_the_input(index):
    """Where no window reads outside the input the model computes the pattern exactly (half away):
    it does not apply there, so the text's MaxPool stands."""
    model = MODELS["max-pool-pads-read-as-zero"]
    case = index.case("qdq.MaxPool-21/int16-int16/geometry/1d-k2-pads")
    out = model.outputs(case.draft)[0]
    assert out.dtype == np.int16 and out.shape == case.expected[0].shape
    unpadded = [r.id for r in index.refs if r.id.startswith("qdq.MaxPool-21/int16-int16/ties/2d-k2x3")]
    assert unpadded and not any(model.applies(c.draft) for c in index.cases_of(unpadded).values())

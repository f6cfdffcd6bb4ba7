"""The oracle reproduces the spec's own worked examples, hand-checked in generators/examples.py."""
from __future__ import annotations

import numpy as np
import pytest

from qconform.generators.examples import example_drafts
from qconform.oracle import evaluate
from qconform.oracle.arith import as_float64

EXAMPLES = list(example_drafts())


@pytest.mark.parametrize("example, draft", EXAMPLES, ids=[d.id for _, d in EXAMPLES])
def test_seed_example(example, draft):
    case = evaluate(draft)
    assert len(case.readings) == 1
    got = as_float64(case.expected[0], case.output_types[0])
    np.testing.assert_array_equal(got, np.asarray(example.expected, dtype=np.float64))

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


def test_the_oracle_registry_is_the_schemas_scope():
    """Every op version in scope has its oracle class and no other is registered beside the
    patterns' float ops (FloatOp, one registry)."""
    from qconform import schemas
    from qconform.oracle import ORACLES, oracle_for
    from qconform.oracle.graph import FloatOp

    assert sorted(k for k, o in ORACLES.items() if not isinstance(o, FloatOp)) == sorted((d, op, v) for (d, op), vs in schemas.IN_SCOPE.items() for v in vs)
    for (d, op), vs in schemas.IN_SCOPE.items():  # each version answers with its own class and schema
        for v in vs:
            assert oracle_for(d, op, v).since == v == schemas.get(op, v, d).since


def test_an_opset_the_schemas_do_not_know_raises():
    """opset 29 may bring a QuantizeLinear-29: never answered with version 28's class."""
    import onnx.defs
    import pytest

    from qconform.oracle import oracle_for

    newest = onnx.defs.onnx_opset_version()
    assert oracle_for("", "QuantizeLinear", newest).since == max(v for v in (10, 13, 19, 21, 23, 24, 25, 28)
                                                                    if v <= newest)
    assert oracle_for("", "QuantizeLinear", 22).since == 21  # a model importing opset 22 runs version 21
    with pytest.raises(LookupError, match="newer than the schemas know"):
        oracle_for("", "QuantizeLinear", newest + 1)
    with pytest.raises(LookupError, match="newer than the schemas know"):
        oracle_for("com.microsoft", "QuantizeLinear", 2)
    with pytest.raises(LookupError, match="no version in scope"):  # QuantizeLinear begins at 10
        oracle_for("", "QuantizeLinear", 9)
    with pytest.raises(LookupError, match="no version in scope"):
        oracle_for("", "Cast", 21)

"""Probes: drafts for behaviour the corpus does not exercise (yet), named by facts as ``probe:NAME``.

A probe is a model the corpus does not hold: a must-reject model the spec makes invalid, a decision
the corpus has no case for yet, or a model built at an opset no op version starts at (a runtime's
opset support is a fact too). ``probe_case`` turns one into a Case the facts machinery runs like a
corpus case."""
from __future__ import annotations

import functools

import numpy as np

from qconform import dtypes
from qconform.case import Arg, Case, Draft, Reading


def _arg(name: str, t: str, value, initializer: bool = False) -> Arg:
    return Arg(name, t, np.asarray(value, dtype=dtypes.get(t).dtype), initializer)


def _probe(op: str, opset: int, types: str, name: str, inputs, attrs=None) -> Draft:
    return Draft(op, opset, types, "probe", name, tuple(inputs), dict(attrs or {}))


def _quantize(opset: int, out: str, name: str) -> Draft:
    return _probe("QuantizeLinear", opset, f"float32-{out}", name,
                  [_arg("x", "float32", [0.0, 1.5, -2.5, 300.0]), _arg("y_scale", "float32", 1.0, True),
                   _arg("y_zero_point", out, 0, True)])


PROBES: dict[str, Draft] = {
    # (x - zp) * s with a non-zero float8 zero point: reference raises, ORT fails at run time.
    "dq-float8-zero-point": _probe(
        "DequantizeLinear", 21, "float8e4m3fn-float32", "dq-float8-zero-point",
        [_arg("x", "float8e4m3fn", [1.0, 2.0, -3.0]), _arg("x_scale", "float32", 2.0, True),
         _arg("x_zero_point", "float8e4m3fn", 1.0, True)]),
    # the reference ignores a float4 zero point: x = 1, zp = 1, s = 2 gives 2 instead of 0.
    "dq-float4-zero-point": _probe(
        "DequantizeLinear", 23, "float4e2m1-float32", "dq-float4-zero-point",
        [_arg("x", "float4e2m1", [1.0, 2.0, -3.0]), _arg("x_scale", "float32", 2.0, True),
         _arg("x_zero_point", "float4e2m1", 1.0, True)]),
    # must-reject: D = 4, S = 3, B = 2 (accepted block sizes for S = 3 are [ceil(4/3), ceil(4/2) - 1] = []).
    "blocked-bad-block-size": _probe(
        "QuantizeLinear", 21, "float32-uint8", "blocked-bad-block-size",
        [_arg("x", "float32", [1.0, 2.0, 3.0, 4.0]), _arg("y_scale", "float32", [1.0, 1.0, 1.0], True),
         _arg("y_zero_point", "uint8", [0, 0, 0], True)], {"axis": 0, "block_size": 2}),
    # must-reject: an e8m0 scale without output_dtype would make the output float8e8m0 (not in T3).
    "dq-e8m0-no-output-dtype": _probe(
        "DequantizeLinear", 24, "uint8-float8e8m0", "dq-e8m0-no-output-dtype",
        [_arg("x", "uint8", [1, 2, 3]), _arg("x_scale", "float8e8m0", 1.0, True)]),
    # opset support: a model importing ai.onnx 27 (no op version starts there: QuantizeLinear-25 applies).
    "opset-27": _quantize(27, "int8", "opset-27"),
}
#: Output type of a must-reject probe's model (the oracle refuses to compute one).
MUST_REJECT_OUTPUT = {"blocked-bad-block-size": "uint8", "dq-e8m0-no-output-dtype": "float8e8m0"}


@functools.cache
def probe_case(name: str) -> tuple[Case, bool]:
    """The probe as a Case, and whether the oracle calls it an invalid model (must-reject)."""
    from qconform.oracle import InvalidModel, evaluate

    draft = PROBES[name]
    try:
        return evaluate(draft), False
    except InvalidModel:
        out = dtypes.get(MUST_REJECT_OUTPUT[name])
        shape = draft.inputs[0].value.shape
        dummy = Reading("none", (out.from_bits(np.zeros(shape, dtype=np.uint64)),))
        return Case(draft, ("y",), (dummy,), "principles"), True


__all__ = ["MUST_REJECT_OUTPUT", "PROBES", "probe_case"]

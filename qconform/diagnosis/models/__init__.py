"""Deviation models: the oracle with one step done the way a real implementation got it wrong.

How a model is built
--------------------
The oracle's op classes (``qconform.oracle``) compute each op in one ``evaluate`` body, and every
step that implementations differ on -- reading the data, broadcasting parameters, the division, the
rounding, the zero-point addition, the saturation, the minifloat encoding, rounding to an
intermediate float type, the element order of packed types -- is a method of
``qconform.oracle.steps.Steps`` (or of the op's own class) whose default is the spec.

A deviation is a small mixin class overriding one step (``RoundHalfAway.rounding``,
``ReciprocalMultiply.quotient``...). ``Deviation.evaluate(draft)`` composes ``(mixin, version
class)``: the version's facts (axis or not, which Cast table, which division readings) and its
arithmetic come from the oracle itself, the one deviating step from the mixin. There is no second
copy of the arithmetic. The result is an ``Evaluation`` with one output per reading of the spec,
each computed the deviating way: a runtime that computes the quotient in float32 *and* rounds half
away from zero is recognised whichever reading it follows.

Every model carries ``name`` (kebab-case), ``ops``, ``explanation`` (one sentence for a vendor),
``evidence`` (where it was seen, or why it is plausible) and ``witness`` (an input that exposes it,
also a ready-made case for a generator family).

Where each one lives
--------------------
One module per step a deviation overrides, each model declared (``DEVIATIONS``) beside its mixin:
``rounding``, ``division`` (the quotient and the precision it is computed in), ``zero_point``,
``saturation``, ``encoding`` (the float8/float4/float6 encoders), ``inputs`` (reading codes,
layouts and constants), ``granularity`` (broadcasting scale and zero point), ``output_type``,
``dequantize``, ``dynamic`` (the dynamic quantizer's range and scale), ``matmul`` (the accumulating operators'
sums and requantisation), ``fused`` (what fused kernels do to a QDQ pattern: its mixins in
``fused_kernels``, the pattern read by ``fused_pattern``). ``base`` composes a mixin with the oracle and holds the
predicates that say where a deviation can matter; ``common`` the helpers several steps share;
``encoding_arith`` the encoding models' arithmetic (real encoders' bit-level algorithms).
``MODELS`` is the explicit registry, in ``ORDER`` (the order ties are broken in); a model missing
from ``ORDER``, or listed there and declared nowhere, fails at import.
"""
from __future__ import annotations

import functools

from qconform.diagnosis.models import rounding, division, zero_point, saturation, encoding, inputs, granularity, output_type, dequantize, dynamic, matmul, fused, fixed_point
from qconform.diagnosis.models import blocked
from qconform.diagnosis.models import contrib_qlinear
from qconform.diagnosis.models import qnn_htp
from qconform.diagnosis.models import qnn_htp_requant
from qconform.diagnosis.models import qnn_htp_elementwise
from qconform.diagnosis.models import qnn_htp_pools
from qconform.diagnosis.models import qnn_htp_qlinear
from qconform.diagnosis.models.base import Deviation, Spec, compose, deviating_oracle
from qconform.diagnosis.models.common import swap_slots
from qconform.diagnosis.models.dequantize import bfloat16_half_up_if_odd
from qconform.diagnosis.models.encoding_arith import truncf_bit_emulation
from qconform.oracle.arith import round_fraction, round_with

#: Every model by name, in the registry's order (the order the diagnosis breaks ties in).
ORDER = (
    "round-half-away",
    "round-half-up",
    "round-toward-zero",
    "reciprocal-multiply",
    "zero-point-before-rounding",
    "divide-in-float64",
    "narrow-signed-range",
    "wrap-around",
    "cast-before-clip",
    "int32-cast-then-zero-point",
    "float8e5m2-rounding-overflow-to-nan",
    "float8-saturate-ignored",
    "float8e4m3fn-nan-code-to-max",
    "float8-never-saturate",
    "fnuz-inf-wrong-table",
    "float8-round-toward-zero",
    "fnuz-negative-zero",
    "quotient-in-float32",
    "float8-zero-point-ignored",
    "zero-point-skipped",
    "scalar-as-1d",
    "bfloat16-truncation",
    "flush-denormals",
    "per-axis-first-scale",
    "blocked-interleaved",
    "negative-axis-off-by-one",
    "sub-byte-high-nibble-first",
    "scale-inverted",
    "dq-bias-form",
    "dq-subtract-wraps",
    "dq-subtract-in-output-type",
    "dql-range-excludes-zero",
    "qlinearmatmul-fixed-point-multiplier",
    "qlinearmatmul-u8s8-pair-saturation",
    "qlinearmatmul-column-scale-by-row",
    "zero-point-added-in-scale-type",
    "dq-saturating-float-cast",
    "dq-multiply-in-scale-type",
    "fake-quantize",
    "bfloat16-half-up-if-odd",
    "bfloat16-emulated-half-up-if-odd",
    "constant-subnormals-flushed",
    "dq-fused-bias",
    "add-just-under-half-then-truncate",
    "add-just-under-half-fused-reciprocal",
    "clamp-and-cast-in-quotient-type",
    "dql-scale-reciprocal",
    "dq-output-dtype-ignored",
    "qlinearmatmul-zero-point-before-rounding",
    "float8-convert-saturating-nan-to-lowest",
    "qlinearmatmul-requantise-in-half",
    "int32-saturating-cast-then-zero-point",
    "q-output-dtype-ignored-without-zero-point",
    "minifloat-input-subnormals-flushed",
    "minifloat-input-nan-as-finite",
    "float8-extf-bit-emulation",
    "fnuz-nan-code-as-negative-zero",
    "sub-byte-zero-extended",
    "negative-infinity-to-max",
    "per-axis-wrong-axis",
    "float8-truncf-bit-emulation",
    "quotient-in-input-type",
    "half-products-flushed",
    "minifloat-double-rounding",
    "saturate-before-zero-point",
    "unsigned-zero-point-read-as-signed",
    "qlinearmatmul-zero-points-ignored",
    "minifloat-ties-away",
    "blocked-index-per-element",
    "dq-minifloat-zero-point-ignored",
    "minifloat-double-rounding-via-bfloat16",
    "qlinearmatmul-accumulate-in-float32",
    "minifloat-underflow-shift-wraps",
    "minifloat-subnormal-rounded-one-bit-low",
    "minifloat-subnormal-sticky-lost",
    "minifloat-subnormal-double-rounding",
    "minifloat-overflow-before-rounding",
    "fnuz-saturate-nan-to-max",
    "minifloat-quotient-rounded-to-integer",
    "float4-signed-code-subnormal-test",
    "int4-read-as-offset-binary",
    "int4-pack-saturating-narrow",
    "negative-axis-absolute",
    "negative-axis-from-front",
    "blocked-partial-block-previous-scale",
    "blocked-scale-squeezed-broadcast",
    "float8e4m3fn-overflow-tested-before-rounding",
    "dql-scale-in-float64",
    "scalar-tail-rounds-half-away",
    "vector-body-rounds-half-away",
    "int64-saturating-cast-then-zero-point",
    "dql-zero-range-scale-one",
    "dql-zero-range-unit-range",
    "qlinearmatmul-float8-inputs-truncated",
    "conv-padding-with-code-zero",
    "integer-zero-points-ignored",
    "int32-accumulator-saturates",
    "qlinearconv-zero-point-before-rounding-float64",
    "qlinearconv-fixed-point-multiplier",
    "minifloat-cast-without-type-notes",
    "fused-qlinear-mul-float-multiplier",
    "fused-qlinear-add-fma",
    "fused-integer-requantisation",
    "fused-u8s8-pair-saturation",
    "fused-bias-codes-without-scale",
    "requantise-half-up",
    "requantise-half-up-biased",
    "requantise-through-fakequantize-bounds",
    "relu-through-fakequantize-bounds",
    "clip-through-fakequantize-bounds",
    "requantise-fixed-point",
    "quantize-nodes-reciprocal-multiply",
    "qdq-pair-removed",
    "qdq-pair-as-clamp",
    "input-quantise-float16-half-up",
    "fused-requantise-q31-double-rounding",
    "fused-requantise-q31-single-rounding",
    "fused-add-operands-rescaled-first",
    "average-float-reciprocal",
    "average-fixed-point-reciprocal",
    "pattern-exact-half-up",
    "pattern-exact-half-up-biased",
    "pattern-exact-half-away",
    "pattern-exact-half-even",
    "moved-codes-unrequantised",
    "resize-nearest-neighbor-flags-only",
    "max-pool-pads-read-as-zero",
    "htp-max-pool-float16-requant",
    "htp-max-pool-small-padded-code-bump",
    "htp-average-15-bit-reciprocal",
    "cubic-resize-exclude-outside-ignored",
    "linear-resize-codes-exact-half-up",
    "resize-requantised-through-float16",
    "htp-accumulator-low-byte-dropped",
    "htp-eighth-code-intermediate",
    "htp-per-axis-bias-codes-as-reals",
    "htp-convert-mixed-width-half-down",
    "htp-qlinear-weights-symmetric-int8",
    "htp-add-15-bit-common-shift",
    "htp-leaky-relu-float32-ratio-half-even",
    "htp-leaky-relu-16-bit-floored-multipliers",
    "htp-hard-swish-exact-half-even",
    "nbits-row-stride-from-k",
    "nbits-zero-points-packed-across-rows",
    "nbits-large-block-zeros",
    "gbq-unsigned-default-zero-point-midpoint",
    "gbq-uint8-default-zero-point-zero",
    "dqmm-a-not-quantized",
    "qlinear-add-float-ratios",
    "qlinear-add-float-ratios-unfused",
    "qlinear-add-float-formula",
    "qlinear-add-fixed-point",
    "qlinear-mul-zero-point-before-rounding",
    "sigmoid-table-mlas-logistic",
    "sigmoid-table-mlas-logistic-unfused",
    "average-pool-zero-point-before-rounding",
    "global-average-pool-float-reciprocal",
    "global-average-pool-fixed-point-reciprocal",
    "softmax-floor-reciprocal-scale",
    "softmax-int8-saturation-wraps",
)
STEPS = (rounding, division, zero_point, saturation, encoding, inputs, granularity, output_type, dequantize, dynamic, matmul,
         fused, fixed_point, blocked, contrib_qlinear, qnn_htp, qnn_htp_requant, qnn_htp_elementwise,
         qnn_htp_pools, qnn_htp_qlinear)


def _registry() -> dict[str, Deviation]:
    declared: dict[str, Deviation] = {}
    for step in STEPS:
        for m in step.DEVIATIONS:
            if m.name in declared or "+" in m.name:
                raise KeyError(f"deviation model {m.name!r} declared twice or has a '+' (reserved for pairs)")
            declared[m.name] = m
    if set(declared) != set(ORDER) or len(ORDER) != len(set(ORDER)):
        raise KeyError(f"ORDER and the declared models differ: {sorted(set(declared) ^ set(ORDER))}")
    return {name: declared[name] for name in ORDER}


MODELS: dict[str, Deviation] = _registry()


def _hooks(mixin: type) -> set[str]:
    return {k for c in mixin.__mro__ if c is not object for k in vars(c) if not k.startswith("__")}


@functools.cache
def combine(a: str, b: str) -> Deviation | None:
    """Two deviations at once (``a+b``), when they change different steps; else None."""
    ma, mb = MODELS[a], MODELS[b]
    if _hooks(ma.mixin) & _hooks(mb.mixin) or not (ma.ops & mb.ops):
        return None
    mixin = type(f"{ma.mixin.__name__}+{mb.mixin.__name__}", (ma.mixin, mb.mixin), {})
    return Deviation(f"{a}+{b}", ma.ops & mb.ops, f"Two deviations at once. {ma.explanation} {mb.explanation}",
                     f"{a}: {ma.evidence} {b}: {mb.evidence}", f"{ma.witness}; {mb.witness}", mixin,
                     lambda d: ma.applies(d) and mb.applies(d), ma.families + mb.families)


def get(name: str) -> Deviation:
    """A registered model, or a pair written ``a+b``."""
    if name in MODELS:
        return MODELS[name]
    a, plus, b = name.partition("+")
    pair = combine(a, b) if plus and a in MODELS and b in MODELS else None
    if pair is None:
        raise KeyError(f"unknown deviation model {name!r}; known: {', '.join(MODELS)} (or a+b)")
    return pair


__all__ = ["Deviation", "MODELS", "ORDER", "Spec", "bfloat16_half_up_if_odd", "combine", "compose", "deviating_oracle", "get",
           "round_fraction", "round_with", "swap_slots", "truncf_bit_emulation"]

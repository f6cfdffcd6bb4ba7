"""Every operator in qconform's scope, declared once (what a declaration holds:
``qconform.declarations.operator``; adding one: qconform/docs/guide-op.md).

This is the one list of operator names: schemas' scope, generators' input roles, the diagnosis'
predicates, the facts drift and the kernels' scope read it. The order is every listing's order.
"""
from __future__ import annotations

from qconform.case import MS_DOMAIN, ONNX_DOMAIN
from qconform.declarations.operator import Input, Kind, Operator, Role
from qconform.declarations import contrib_blocked, contrib_qlinear

D, W, S, Z, B = Role.DATA, Role.WEIGHT, Role.SCALE, Role.ZERO_POINT, Role.BIAS

_Q_READINGS = ("quotient-in-float16", "quotient-in-bfloat16", "quotient-in-float32", "int32-via-float32",
               "int32-via-float64", "zero-point-added", "zero-point-skipped",
               "operands-rounded-to-float32", "operands-rounded-to-float16", "operands-rounded-to-bfloat16",
               "quotient-rounded-once-to-float32", "quotient-rounded-once-to-float16",
               "quotient-rounded-once-to-bfloat16", "division-in-float32", "division-in-float16",
               "division-in-bfloat16", "division-in-float64", "operands-rounded-to-int32",
               "quotient-rounded-once-to-int32", "quotient-exact")
_DQ_READINGS = ("multiply-in-output-type", "multiply-in-float32-then-round", "multiply-exact-then-round")
#: QLinearMatMul's and QLinearConv's requantisation (semantics.md#qlmm-requant) and accumulation
#: (#qlmm-accumulation) readings; a case names a combination ``requant+accumulation``.
REQUANT_READINGS = ("multiplier-float32", "multiplier-float64", "exact-rational",
                    "multiplier-float32-product-float64", "multiplier-in-scale-type")
ACCUMULATION_READINGS = ("accumulator-int32-wrap", "accumulator-exact")

QUANTIZE_LINEAR = Operator(
    ONNX_DOMAIN, "QuantizeLinear", (10, 13, 19, 21, 23, 24, 25, 28), Kind.QUANTIZE,
    (Input("x", D), Input("y_scale", S, "y", "axis"), Input("y_zero_point", Z, "y", "axis")), ("y",),
    "q-formula", _Q_READINGS, output_like="y_zero_point",
    arithmetic_attrs=("axis", "block_size", "output_dtype", "saturate", "precision"))
DEQUANTIZE_LINEAR = Operator(
    ONNX_DOMAIN, "DequantizeLinear", (10, 13, 19, 21, 23, 24, 25, 28), Kind.DEQUANTIZE,
    (Input("x", D), Input("x_scale", S, "x", "axis"), Input("x_zero_point", Z, "x", "axis")), ("y",),
    "dq-formula", _DQ_READINGS, arithmetic_attrs=("axis", "block_size", "output_dtype"))
DYNAMIC_QUANTIZE_LINEAR = Operator(
    ONNX_DOMAIN, "DynamicQuantizeLinear", (11,), Kind.DYNAMIC, (Input("x", D),),
    ("y", "y_scale", "y_zero_point"), "dql-formula",
    ("scale-plus-zero", "scale-minus-zero", "quotient-exact"), output_type="uint8")
QLINEAR_MATMUL = Operator(
    ONNX_DOMAIN, "QLinearMatMul", (10, 21), Kind.REQUANTIZE,
    (Input("a", D), Input("a_scale", S, "a", -2), Input("a_zero_point", Z, "a", -2),
     Input("b", D), Input("b_scale", S, "b", -1), Input("b_zero_point", Z, "b", -1),
     Input("y_scale", S, "y"), Input("y_zero_point", Z, "y")), ("y",),
    "qlmm-formula", REQUANT_READINGS + ACCUMULATION_READINGS + ("zero-point-added", "zero-point-skipped"),
    output_like="y_zero_point", contraction="matmul")
_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
QLINEAR_CONV = Operator(
    ONNX_DOMAIN, "QLinearConv", (10,), Kind.REQUANTIZE,
    (Input("x", D), Input("x_scale", S, "x"), Input("x_zero_point", Z, "x"),
     Input("w", W), Input("w_scale", S, "w", 0), Input("w_zero_point", Z, "w", 0),
     Input("y_scale", S, "y"), Input("y_zero_point", Z, "y"), Input("B", B)), ("y",),
    "qlconv-formula", REQUANT_READINGS[:4] + ACCUMULATION_READINGS, output_like="y_zero_point",
    contraction="conv", arithmetic_attrs=_CONV_ATTRS)
CONV_INTEGER = Operator(
    ONNX_DOMAIN, "ConvInteger", (10,), Kind.INTEGER,
    (Input("x", D), Input("w", W), Input("x_zero_point", Z, "x"), Input("w_zero_point", Z, "w", 0)), ("y",),
    "integer-accumulation", output_type="int32", contraction="conv", arithmetic_attrs=_CONV_ATTRS)
MATMUL_INTEGER = Operator(
    ONNX_DOMAIN, "MatMulInteger", (10,), Kind.INTEGER,
    (Input("A", D), Input("B", W), Input("a_zero_point", Z, "A", -2), Input("b_zero_point", Z, "B", -1)), ("Y",),
    "integer-accumulation", output_type="int32", contraction="matmul")
# com.microsoft ops, version 1, as onnxruntime's docs/ContribOperators.md lists them (and the seed
# page shared/seeds/002 for DequantizeLinear). onnx.defs has no entry for them: their ``schema`` is
# the one table (inputs: name, type parameter, optional; outputs; attributes and defaults; types).
_MS_QUANT = ("int8", "uint8", "int16", "uint16", "int4", "uint4")
MS_QUANTIZE_LINEAR = Operator(
    MS_DOMAIN, "QuantizeLinear", (1,), Kind.QUANTIZE,
    (Input("x", D), Input("y_scale", S, "y", "axis"), Input("y_zero_point", Z, "y", "axis")), ("y",),
    "ms-quantize", _Q_READINGS, output_like="y_zero_point", arithmetic_attrs=("axis",),
    schema={"inputs": (("x", "T1", False), ("y_scale", "T1", False), ("y_zero_point", "T2", True)),
            "outputs": (("y", "T2"),), "attrs": {"axis": None},
            "types": {"T1": ("float32", "float16"), "T2": _MS_QUANT}})
MS_DEQUANTIZE_LINEAR = Operator(
    MS_DOMAIN, "DequantizeLinear", (1,), Kind.DEQUANTIZE,
    (Input("x", D), Input("x_scale", S, "x", "axis"), Input("x_zero_point", Z, "x", "axis")), ("y",),
    "ms-dequantize", _DQ_READINGS, arithmetic_attrs=("axis",),
    schema={"inputs": (("x", "T1", False), ("x_scale", "T2", False), ("x_zero_point", "T1", True)),
            "outputs": (("y", "T2"),), "attrs": {"axis": None},
            "types": {"T1": _MS_QUANT + ("int32",), "T2": ("float32", "float16")}})

#: The ai.onnx opset a com.microsoft model imports beside its contrib ops (what onnxruntime's contrib
#: ops are built against): the model builder imports it, and the composed contrib ops' oracle reads
#: the text's "quantize" and "dequantize" as QuantizeLinear and DequantizeLinear of this version.
MS_COMPANION_OPSET = 21

#: The two quantization boundary operators by name, in the order a fake quantisation runs them
#: (x → QuantizeLinear → DequantizeLinear): the QDQ patterns are built from them in either domain.
QDQ: tuple[str, str] = (QUANTIZE_LINEAR.op, DEQUANTIZE_LINEAR.op)

#: Every operator, in the order of every listing.
OPERATORS: tuple[Operator, ...] = (
    QUANTIZE_LINEAR, DEQUANTIZE_LINEAR, DYNAMIC_QUANTIZE_LINEAR, QLINEAR_MATMUL, QLINEAR_CONV, CONV_INTEGER,
    MATMUL_INTEGER, MS_QUANTIZE_LINEAR, MS_DEQUANTIZE_LINEAR,
) + contrib_qlinear.OPERATORS + contrib_blocked.OPERATORS
_BY_KEY = {o.key: o for o in OPERATORS}


def get(domain: str, op: str) -> Operator:
    """The declaration of ``op`` in ``domain`` (KeyError: not in qconform's scope)."""
    try:
        return _BY_KEY[(domain, op)]
    except KeyError:
        raise KeyError(f"{domain or 'ai.onnx'} {op} is not an operator in qconform's scope") from None


def find(domain: str, op: str) -> Operator | None:
    """The declaration, or None for an op qconform does not certify (a pattern's float op)."""
    return _BY_KEY.get((domain, op))


def names() -> frozenset[str]:
    """Every declared operator's name (either domain)."""
    return frozenset(o.op for o in OPERATORS)


def of_kind(*kinds: Kind) -> tuple[Operator, ...]:
    return tuple(o for o in OPERATORS if o.kind in kinds)


def in_scope() -> dict[tuple[str, str], tuple[int, ...]]:
    """(domain, op) -> the since_versions in scope (schemas.IN_SCOPE)."""
    return {o.key: o.versions for o in OPERATORS}


def kernel_scope() -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The groups qconform's own kernels implement (globs over a case's group) and, for each
    operator they do not, (glob, reason)."""
    inside = tuple(f"{o.label}-*" for o in OPERATORS if o.kernel)
    outside = tuple((f"{o.label}-*", o.kernel_reason) for o in OPERATORS if not o.kernel)
    return inside, outside

"""The declarations of onnxruntime's QOperator-format com.microsoft ops (QLinearAdd, QLinearMul, the pools, QLinearConcat, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QGemm): one ``Operator`` each, joined to
``operators.OPERATORS``. Their schema is onnxruntime's registered one (version 1, com.microsoft).

Each ``schema`` table is onnxruntime 1.32.0's ``get_all_operator_schema()`` entry, stored because
onnxruntime is an optional dependency: inputs (name, type parameter or fixed type, optional),
outputs, attributes with their defaults (None: no default), type constraints (plus the fixed
``tensor(float)`` of the scales, as the one type its parameter admits), and ``variadic`` for the
formal parameters that take a list (QLinearConcat's ``inputs``). tests/test_contrib_qlinear.py
compares every com.microsoft table with the installed onnxruntime's. The semantics of each op:
qconform/docs/semantics.md#ms-qlinear.
"""
from __future__ import annotations

from typing import Any

from qconform.case import MS_DOMAIN
from qconform.declarations.operator import Input, Kind, Operator, Role

D, W, S, Z, B = Role.DATA, Role.WEIGHT, Role.SCALE, Role.ZERO_POINT, Role.BIAS
_F = "tensor(float)"
_T = {"T": ("uint8", "int8"), _F: ("float32",)}

#: QLinearMul's and QGemm's requantisation readings: the quantized matmul's (#qlmm-requant) with float32 scales
#: (semantics.md#ms-qlinear-mul, #ms-qgemm).
MUL_READINGS = ("multiplier-float32", "multiplier-float64", "exact-rational", "multiplier-float32-product-float64")
#: QLinearAdd's readings (semantics.md#ms-qlinear-add).
ADD_READINGS = ("exact-rational", "formula-float32")
#: The ops defined as quantize(f(dequantize(x))): QuantizeLinear-21's float32 readings, through
#: the graph oracle (semantics.md#ms-qlinear-composed).
COMPOSED_READINGS = ("quotient-exact",)


def _table(inputs: tuple[tuple[str, str, bool], ...], outputs: tuple[tuple[str, str], ...], attrs: dict[str, Any],
           types: dict[str, tuple[str, ...]], variadic: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"inputs": inputs, "outputs": outputs, "attrs": attrs, "types": types, "variadic": variadic}


def _unary(x: str, xs: str, xz: str, ys: str, yz: str) -> tuple[Input, ...]:
    return (Input(x, D), Input(xs, S, x), Input(xz, Z, x), Input(ys, S, "y"), Input(yz, Z, "y"))


def _unary_table(x: str, xs: str, xz: str, ys: str, yz: str, attrs: dict[str, Any], xz_optional: bool = True,
                 yz_optional: bool = True) -> dict[str, Any]:
    return _table(((x, "T", False), (xs, _F, False), (xz, "T", xz_optional), (ys, _F, False), (yz, "T", yz_optional)),
                  (("Y", "T"),), attrs, dict(_T))


_BINARY_INPUTS = (Input("A", D), Input("A_scale", S, "A"), Input("A_zero_point", Z, "A"), Input("B", D),
                  Input("B_scale", S, "B"), Input("B_zero_point", Z, "B"), Input("C_scale", S, "y"),
                  Input("C_zero_point", Z, "y"))
_BINARY_TABLE = _table((("A", "T", False), ("A_scale", _F, False), ("A_zero_point", "T", True), ("B", "T", False),
                        ("B_scale", _F, False), ("B_zero_point", "T", True), ("C_scale", _F, False),
                        ("C_zero_point", "T", True)), (("C", "T"),), {}, dict(_T))

QLINEAR_ADD = Operator(
    MS_DOMAIN, "QLinearAdd", (1,), Kind.REQUANTIZE, _BINARY_INPUTS, ("C",), "ms-qlinear-add", ADD_READINGS,
    output_like="C_zero_point", kernel=True, schema=_BINARY_TABLE)
QLINEAR_MUL = Operator(
    MS_DOMAIN, "QLinearMul", (1,), Kind.REQUANTIZE, _BINARY_INPUTS, ("C",), "ms-qlinear-mul", MUL_READINGS,
    output_like="C_zero_point", kernel=True, schema=_BINARY_TABLE)
QLINEAR_SIGMOID = Operator(
    MS_DOMAIN, "QLinearSigmoid", (1,), Kind.REQUANTIZE, _unary("X", "X_scale", "X_zero_point", "Y_scale", "Y_zero_point"),
    ("Y",), "ms-qlinear-composed", COMPOSED_READINGS, output_like="Y_zero_point", kernel=True,
    schema=_unary_table("X", "X_scale", "X_zero_point", "Y_scale", "Y_zero_point", {}))
QLINEAR_LEAKY_RELU = Operator(
    MS_DOMAIN, "QLinearLeakyRelu", (1,), Kind.REQUANTIZE,
    _unary("X", "X_scale", "X_zero_point", "Y_scale", "Y_zero_point"), ("Y",), "ms-qlinear-composed",
    COMPOSED_READINGS, output_like="Y_zero_point", kernel=True, arithmetic_attrs=("alpha",),
    schema=_unary_table("X", "X_scale", "X_zero_point", "Y_scale", "Y_zero_point", {"alpha": 0.009999999776482582}))
POOL_ATTRS = ("auto_pad", "ceil_mode", "channels_last", "count_include_pad", "kernel_shape", "pads", "strides")
QLINEAR_AVERAGE_POOL = Operator(
    MS_DOMAIN, "QLinearAveragePool", (1,), Kind.REQUANTIZE,
    _unary("X", "x_scale", "x_zero_point", "y_scale", "y_zero_point"), ("Y",), "ms-qlinear-pool",
    COMPOSED_READINGS, output_like="y_zero_point", kernel=True, arithmetic_attrs=POOL_ATTRS,
    schema=_unary_table("X", "x_scale", "x_zero_point", "y_scale", "y_zero_point",
                        {"ceil_mode": 0, "pads": None, "auto_pad": "NOTSET", "strides": None, "kernel_shape": None,
                         "channels_last": 0, "count_include_pad": 0}))
QLINEAR_GLOBAL_AVERAGE_POOL = Operator(
    MS_DOMAIN, "QLinearGlobalAveragePool", (1,), Kind.REQUANTIZE,
    _unary("X", "x_scale", "x_zero_point", "y_scale", "y_zero_point"), ("Y",), "ms-qlinear-pool",
    COMPOSED_READINGS, output_like="y_zero_point", kernel=True, arithmetic_attrs=("channels_last",),
    schema=_unary_table("X", "x_scale", "x_zero_point", "y_scale", "y_zero_point", {"channels_last": 0},
                        xz_optional=False, yz_optional=False))
QLINEAR_SOFTMAX = Operator(
    MS_DOMAIN, "QLinearSoftmax", (1,), Kind.REQUANTIZE,
    _unary("X", "X_scale", "x_zero_point", "y_scale", "y_zero_point"), ("Y",), "ms-qlinear-composed",
    COMPOSED_READINGS, output_like="y_zero_point", kernel=True, arithmetic_attrs=("axis", "opset"),
    schema=_unary_table("X", "X_scale", "x_zero_point", "y_scale", "y_zero_point", {"opset": None, "axis": -1},
                        yz_optional=False))
QLINEAR_CONCAT = Operator(
    MS_DOMAIN, "QLinearConcat", (1,), Kind.REQUANTIZE,
    (Input("Y_scale", S, "y"), Input("Y_zero_point", Z, "y"), Input("inputs", D)), ("Y",), "ms-qlinear-concat",
    COMPOSED_READINGS, output_like="Y_zero_point", kernel=True, arithmetic_attrs=("axis",),
    schema=_table((("Y_scale", "TF", False), ("Y_zero_point", "T8", False), ("inputs", "TV", False)), (("Y", "T8"),),
                  {"axis": None}, {"T8": ("uint8", "int8"), "TF": ("float32",), "TV": ("uint8", "int8", "float32")},
                  variadic=("inputs",)))
QGEMM = Operator(
    MS_DOMAIN, "QGemm", (1,), Kind.REQUANTIZE,
    (Input("A", D), Input("a_scale", S, "A"), Input("a_zero_point", Z, "A"), Input("B", W),
     Input("b_scale", S, "B", -1), Input("b_zero_point", Z, "B", -1), Input("C", B), Input("y_scale", S, "y"),
     Input("y_zero_point", Z, "y")), ("Y",), "ms-qgemm", MUL_READINGS, output_like="y_zero_point",
    contraction="matmul", kernel=True, arithmetic_attrs=("alpha", "transA", "transB"),
    schema=_table((("A", "TA", False), ("a_scale", "T", False), ("a_zero_point", "TA", False), ("B", "TB", False),
                   ("b_scale", "T", False), ("b_zero_point", "TB", False), ("C", "TC", True), ("y_scale", "T", True),
                   ("y_zero_point", "TYZ", True)), (("Y", "TY"),), {"transB": 0, "alpha": 1.0, "transA": 0},
                  {"T": ("float32",), "TA": ("uint8", "int8"), "TB": ("uint8", "int8"), "TC": ("int32",),
                   "TYZ": ("uint8", "int8"), "TY": ("float32", "uint8", "int8")}))

OPERATORS: tuple[Operator, ...] = (
    QLINEAR_ADD, QLINEAR_MUL, QLINEAR_SIGMOID, QLINEAR_LEAKY_RELU, QLINEAR_AVERAGE_POOL, QLINEAR_GLOBAL_AVERAGE_POOL,
    QLINEAR_CONCAT, QLINEAR_SOFTMAX, QGEMM,
)

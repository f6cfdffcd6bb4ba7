"""Graph cases (QDQ patterns): the graph computed node by node, as the ONNX text defines a graph.

"The values of node outputs are computed by the node's operator" (IR.md): each intermediate tensor
is the value its producing operator defines, in its declared type, and the graph's outputs are those
values (qconform/docs/semantics.md#qdq-graph). The walk is ``base.Walk`` (every case's: a single-node
case is a one-node graph), every node through the one registry ``base.ORACLES``: QuantizeLinear and
DequantizeLinear nodes by their own version classes (the very oracle of the single-node cases, every
reading of theirs kept), and the float operators between them by the ``FloatOp`` entries registered
here, whose values are the methods of ``FloatOps`` here and in ``graph_ops`` (Conv, MatMul, Gemm,
the pools), ``graph_resize`` and ``graph_shape`` (data movement, LeakyRelu, HardSwish, Softmax), each
result the exact real value rounded once to float32 (an IEEE single operation). Where the text
leaves a float computation open:

* the order of a sum (MatMul, Gemm, Conv, the pools, Resize's weighted average): the generators keep
  every product and partial sum exact in float32 (``graph_sums.row_sums`` checks it per element and
  the draft is refused where it does not hold), so every order gives the one value the case holds
  (#qdq-sum-order);
* HardSwish's formula and its function body: two readings (#qdq-hardswish).

Readings of several nodes combine (every combination, identical results collapsed). A deviation
model for a fused kernel overrides ``fused``: given the draft and the graph's input values it returns
the pattern's outputs computed its way, or None where it does not apply (qconform.diagnosis); one for
a node overrides ``node_oracle`` (a quantized node) or ``float_oracle`` (a float node).
"""
from __future__ import annotations

import decimal
import math
from fractions import Fraction
from typing import Callable

import numpy as np

from qconform.declarations import operators
from qconform.case import Draft, Node
from qconform.oracle import base
from qconform.oracle import graph_exact as exact
from qconform.oracle.base import GRAPH_CLAUSE, Evaluation, OpOracle, Walk, graph_outputs, node_draft, register  # noqa: F401
from qconform.oracle.arith import fl
from qconform.oracle.granularity import InvalidModel
from qconform.oracle.graph_ops import SumOps
from qconform.oracle.graph_sums import NotExact, _round_fraction_f32  # noqa: F401  (their home is graph_sums)
from qconform.oracle.graph_resize import op_resize
from qconform.oracle.graph_shape import ShapeOps

QDQ_OPS = operators.QDQ
F32 = "float32"




#: A dyadic rational m * 2**e (m an int): the oracle's sums are exact on these, in integers.
Dyadic = tuple[int, int]


def _of_fraction(t: Fraction) -> Dyadic:
    den = t.denominator
    if den & (den - 1):
        raise NotExact("a term is not a binary fraction")
    return t.numerator, 1 - den.bit_length()


def _of_float(x: float) -> Dyadic:
    """x exactly as m * 2**e (frexp's 53-bit mantissa scaled to an integer)."""
    m, e = math.frexp(x)
    return int(m * 9007199254740992.0), e - 53


def _product(a: float, b: float) -> Dyadic:
    (ma, ea), (mb, eb) = _of_float(a), _of_float(b)
    return ma * mb, ea + eb


def exact_sum(terms: list[list[Fraction]], where: str) -> list[Fraction]:
    """Per output element, the exact sum of its terms, checked to be the value of every evaluation
    order in float32: all terms multiples of one power of two u = 2^k and the sum of their magnitudes
    below 2^24·u, so every partial sum, in any order, is a float32 (#qdq-sum-order)."""
    return _dyadic_sum([[_of_fraction(t) for t in ts] for ts in terms], where)


def _dyadic_sum(terms: list[list[Dyadic]], where: str) -> list[Fraction]:
    """``exact_sum`` on terms m * 2**e, in integers: each nonzero term reduced to an odd m, scaled to
    the smallest exponent k among them (u = 2^k); the same check and the same exact sums as on
    Fractions, without a gcd per term (the QDQ pattern corpus's convolutions spend their time here)."""
    out = []
    for ts in terms:
        odd = []
        for m, e in ts:
            if m:
                tz = (m & -m).bit_length() - 1
                odd.append((m >> tz, e + tz))
        if not odd:
            out.append(Fraction(0))
            continue
        k = min(e for _, e in odd)
        units = [m << (e - k) for m, e in odd]
        if sum(map(abs, units)) >= 1 << 24:
            raise NotExact(f"{where}: a sum the text leaves unordered is not exact in float32 for every order")
        total = sum(units)
        out.append(Fraction(total << k) if k >= 0 else Fraction(total, 1 << -k))
    return out


def _fractions(a: np.ndarray) -> np.ndarray:
    return np.vectorize(Fraction, otypes=[object])(np.asarray(a, np.float64))


def _f32(values: np.ndarray | Fraction | list) -> np.ndarray:
    """Exact values (Fractions, or floats exact in float64) rounded once to float32, as float32."""
    arr = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
    if arr.dtype == object:
        flat = [_round_fraction_f32(v) for v in arr.reshape(-1)]
        return np.asarray(flat, np.float32).reshape(arr.shape)
    return fl(F32, arr).astype(np.float32)


class FloatOps(SumOps, ShapeOps):
    """The values of the float operators of the patterns, on float32 values, each result rounded once
    to float32: ``op_<Name>(node, ins, where) -> outputs, or a list of (reading, outputs)``; most ops
    have one reading ("spec"). The walk reaches them through their ``FloatOp`` registrations only."""

    # -- exact elementwise -------------------------------------------------------------------------
    def op_Identity(self, node, ins, where):
        return [ins[0].copy()]

    def op_Relu(self, node, ins, where):
        x = ins[0]
        return [np.where(x > 0, x, np.float32(0)).astype(np.float32)]

    def op_Clip(self, node, ins, where):
        x = ins[0]
        lo = ins[1] if len(ins) > 1 and ins[1] is not None else None
        hi = ins[2] if len(ins) > 2 and ins[2] is not None else None
        y = x
        if lo is not None:
            y = np.where(y < lo, lo, y)
        if hi is not None:
            y = np.where(y > hi, hi, y)
        return [np.asarray(y, np.float32)]

    def _binary(self, ins, fn) -> list[np.ndarray]:
        a, b = np.broadcast_arrays(ins[0], ins[1])
        fa, fb = _fractions(a), _fractions(b)
        return [_f32(np.frompyfunc(fn, 2, 1)(fa, fb))]

    def op_Add(self, node, ins, where):
        return self._binary(ins, lambda x, y: x + y)

    def op_Sub(self, node, ins, where):
        return self._binary(ins, lambda x, y: x - y)

    def op_Mul(self, node, ins, where):
        return self._binary(ins, lambda x, y: x * y)

    # -- data movement -----------------------------------------------------------------------------
    def op_Reshape(self, node, ins, where):
        """"A dimension could also be 0, in which case the actual dimension value is unchanged (i.e.
        taken from the input tensor)", unless allowzero = 1 (Reshape-14)."""
        shape = [int(d) for d in ins[1]]
        if not node.attrs.get("allowzero", 0):
            shape = [ins[0].shape[i] if d == 0 else d for i, d in enumerate(shape)]
        return [ins[0].reshape(shape)]

    def op_Transpose(self, node, ins, where):
        perm = node.attrs.get("perm")
        return [np.transpose(ins[0], perm).copy()]

    def op_Gather(self, node, ins, where):
        return [np.take(ins[0], np.asarray(ins[1], np.int64), axis=node.attrs.get("axis", 0)).astype(np.float32)]

    def op_Concat(self, node, ins, where):
        return [np.concatenate([i for i in ins if i is not None], axis=node.attrs["axis"]).astype(np.float32)]

    def op_Resize(self, node, ins, where):
        return op_resize(node, ins, where)

    # -- an accuracy the text leaves open ----------------------------------------------------------
    def op_Sigmoid(self, node, ins, where):
        """"y = 1 / (1 + exp(-x))": the exact sigmoid rounded once to float32, as every float node's
        value is; the text states no accuracy, so it permits no other (#qdq-sigmoid)."""
        x = ins[0].reshape(-1)
        once = np.asarray([_round_fraction_f32(1 / (1 + _exp_fraction(-Fraction(float(v))))) for v in x], np.float32)
        return [("spec", [once.reshape(ins[0].shape)])]


def _exp_fraction(x: Fraction) -> Fraction:
    """exp(x) to 60 significant digits, as a rational: far beyond float32's rounding needs (a float32
    result within 10^-50 of a midpoint does not occur for the inputs patterns use; ``_sigmoid_safe``
    in the tests checks it)."""
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        d = (decimal.Decimal(x.numerator) / decimal.Decimal(x.denominator)).exp()
    return Fraction(d)


class FloatOp(OpOracle):
    """A float op of the patterns in the one registry (``base.ORACLES``, beside the quantized ops):
    ``compute(node, ins, where)`` its value (a method of ``FloatOps``), for every version since
    ``since`` (the versions the patterns use differ in where an operand is given, which the method
    reads, not in a value; ``oracle_for`` takes the newest class at or below a model's opset)."""

    output_names = ()

    def __init__(self, op: str, compute: Callable, since: int = 1, domain: str = "",
                 terms: Callable[[tuple[int, ...] | None], int] | None = None, *, unary: bool = False,
                 moves: bool = False, clamps: bool = False, adds: bool = False, averages: bool = False,
                 bias: bool = False, exact: Callable | None = None) -> None:
        self.op, self.compute, self.since, self.domain = op, compute, since, domain
        #: Where the op's value is an exact sum (#qdq-sum-order): how many terms one output element
        #: adds, from its weight's shape (None: the node has none); 0 where every element of its
        #: input may be one. None for an op that sums nothing. What bounds the work of a sum the
        #: oracle adds in Python integers (a user's model group: ``gating.model_cases``).
        self.terms = terms
        #: Its value is a function of its first input alone; any other input is a parameter given as
        #: it is (a shape, indices, bounds, pads), not a value a pattern dequantizes.
        self.unary = unary
        #: Its one output takes every element from its one data input (moves or selects it; Relu and
        #: MaxPool by comparing with 0 or each other; Resize in its nearest mode) and computes none, so
        #: it commutes with x -> s·x, s > 0: a kernel may run it on the codes (``fixed_point``'s models).
        self.moves = moves
        #: Its value is its one data input clamped to an interval (Identity's the whole line): a
        #: QuantizeLinear after it is one with narrower bounds, as fused kernels run it (``fused``).
        self.clamps = clamps
        #: Its value is its two operands added or subtracted (a ± b): a kernel may rescale each to
        #: the output's scale first (``fixed_point``'s models).
        self.adds = adds
        #: Its value is the mean of a window of its one input, every term weighted alike.
        self.averages = averages
        #: It adds a bias operand to its sum (Conv's B, Gemm's C): a fused kernel may add its codes.
        self.bias = bias
        #: Its value on exact rationals (``graph_exact``), where the text's real arithmetic gives one:
        #: what a kernel requantising once in exact arithmetic starts from (``fixed_point``'s models).
        self.exact = exact

    @property
    def accumulates(self) -> bool:
        """Its value sums products of two dequantized operands (an input and a weight), what an
        integer kernel's accumulator computes: a sum (``terms``) over more than one data input."""
        return self.terms is not None and not self.unary

    def values(self, node: Node, ins: list[np.ndarray | None], where: str) -> list[tuple[str, list[np.ndarray]]]:
        """(reading, outputs) per reading of the node on ``ins``."""
        got = self.compute(node, ins, where)
        return got if isinstance(got, list) and got and isinstance(got[0], tuple) else [("spec", got)]

    def on_node(self, walk: Walk, node: Node, sub: Callable[[], Draft], ins: list[np.ndarray | None], where: str,
                primary_only: bool):
        """The node's values by this op, or by the float op the walk's ``float_oracle`` step names."""
        results = (walk.float_oracle(node) or self).values(node, ins, f"{where}: {node.op}")
        return [(name, o, [None] * len(o)) for name, o in results], Evaluation(clause=GRAPH_CLAUSE)

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        raise InvalidModel(f"{self.op}: a float op of the patterns is computed inside a graph only")


class GraphOracle(Walk):
    """A graph, node by node (``base.Walk``), with an oracle's interface (``evaluate``): what a
    deviation model of a pattern composes its mixin with."""

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        """The oracle's interface (``OpOracle.evaluate``): every reading's outputs as an Evaluation."""
        return self.walk(draft, primary_only)


def pattern_name(nodes: tuple[Node, ...]) -> str:
    """The pattern a graph is, as its id names it (every pattern id of the corpus is this name of
    its nodes: tests/test_walk.py): FakeQuant (x → Q → DQ), Requant (Q and DQ nodes alone from a
    DequantizeLinear: DQ → Q, or a chain of them), else the last float op that reads a
    DequantizeLinear's output (the op between the DequantizeLinear nodes and the final
    QuantizeLinear: a fused activation's Conv or Gemm, a residual's Add)."""
    ops = [n.op for n in nodes]
    if ops == list(QDQ_OPS):
        return "FakeQuant"
    if all(o in QDQ_OPS for o in ops):
        return "Requant" if ops[0] == QDQ_OPS[1] else "Graph"
    dequantized = {o for n in nodes if n.op == QDQ_OPS[1] for o in n.outputs}
    central = [n.op for n in nodes if n.op not in QDQ_OPS and any(i in dequantized for i in n.inputs)]
    return central[-1] if central else "Graph"


ORACLE = GraphOracle()
_VALUES = FloatOps()


def _filter_terms(w: tuple[int, ...] | None) -> int:
    """A convolution's output element: one filter's weights (W is [M, C/group, k...])."""
    return int(np.prod(w[1:])) if w else 1


def _k_terms(w: tuple[int, ...] | None) -> int:
    """MatMul's output element: K terms (its weight B is [K, N])."""
    return w[0] if w else 1


def _gemm_terms(w: tuple[int, ...] | None) -> int:
    """Gemm's output element: K terms, K either dimension of B as transB has it (the larger: a bound)."""
    return max(w) if w else 1


def _window_terms(w: tuple[int, ...] | None) -> int:
    """A pool's or Resize's output element: a window or taps of the input, at most all of it (0)."""
    return 0


#: Every float op of the patterns, once, with what it is (the diagnosis' scopes read these fields).
register(
    FloatOp("Identity", _VALUES.op_Identity, exact=exact.identity, unary=True, moves=True, clamps=True),
    FloatOp("Relu", _VALUES.op_Relu, exact=exact.relu, unary=True, moves=True, clamps=True),
    FloatOp("Clip", _VALUES.op_Clip, exact=exact.clip, unary=True, clamps=True),
    FloatOp("Add", _VALUES.op_Add, exact=exact.add, adds=True),
    FloatOp("Sub", _VALUES.op_Sub, exact=exact.sub, adds=True),
    FloatOp("Mul", _VALUES.op_Mul, exact=exact.mul),
    FloatOp("Reshape", _VALUES.op_Reshape, exact=exact.reshape, unary=True, moves=True),
    FloatOp("Transpose", _VALUES.op_Transpose, exact=exact.transpose, unary=True, moves=True),
    FloatOp("Gather", _VALUES.op_Gather, exact=exact.gather, unary=True, moves=True),
    FloatOp("Concat", _VALUES.op_Concat, exact=exact.concat),
    FloatOp("Resize", _VALUES.op_Resize, terms=_window_terms, unary=True, moves=True),
    FloatOp("Sigmoid", _VALUES.op_Sigmoid, unary=True),
    FloatOp("Conv", _VALUES.op_Conv, exact=exact.conv, terms=_filter_terms, bias=True),
    FloatOp("MatMul", _VALUES.op_MatMul, exact=exact.mat_mul, terms=_k_terms),
    FloatOp("Gemm", _VALUES.op_Gemm, exact=exact.gemm, terms=_gemm_terms, bias=True),
    FloatOp("MaxPool", _VALUES.op_MaxPool, exact=exact.max_pool, unary=True, moves=True),
    FloatOp("AveragePool", _VALUES.op_AveragePool, exact=exact.average_pool, terms=_window_terms, unary=True,
            averages=True),
    FloatOp("GlobalAveragePool", _VALUES.op_GlobalAveragePool, exact=exact.global_average_pool,
            terms=_window_terms, unary=True, averages=True),
    FloatOp("LeakyRelu", _VALUES.op_LeakyRelu, exact=exact.leaky_relu, unary=True),
    FloatOp("HardSwish", _VALUES.op_HardSwish, unary=True),
    FloatOp("Softmax", _VALUES.op_Softmax, unary=True),
    FloatOp("Greater", _VALUES.op_Greater), FloatOp("Where", _VALUES.op_Where),
    FloatOp("Pad", _VALUES.op_Pad, unary=True, moves=True), FloatOp("Slice", _VALUES.op_Slice, unary=True, moves=True),
    FloatOp("Squeeze", _VALUES.op_Squeeze, unary=True, moves=True),
    FloatOp("Unsqueeze", _VALUES.op_Unsqueeze, unary=True, moves=True),
    FloatOp("Split", _VALUES.op_Split, unary=True),  # several outputs: moves none into one
    FloatOp("DepthToSpace", _VALUES.op_DepthToSpace, unary=True, moves=True))


def float_ops() -> tuple[FloatOp, ...]:
    """The float ops the registry holds (what a pattern's central op must be one of)."""
    return tuple(o for o in base.ORACLES.values() if isinstance(o, FloatOp))


__all__ = ["FloatOp", "FloatOps", "GraphOracle", "NotExact", "ORACLE", "QDQ_OPS", "exact_sum", "float_ops",
           "graph_outputs", "node_draft", "pattern_name"]


"""Graph cases (QDQ patterns): the graph computed node by node, as the ONNX text defines a graph.

"The values of node outputs are computed by the node's operator" (IR.md): each intermediate tensor
is the value its producing operator defines, in its declared type, and the graph's outputs are those
values (qconform/docs/semantics.md#qdq-graph). So QuantizeLinear and DequantizeLinear nodes are
computed by their own version classes (the very oracle of the single-node cases, every reading of
theirs kept), and the float operators between them here and in ``graph_ops`` (Conv, MatMul, Gemm,
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
the pattern's outputs computed its way, or None where it does not apply (qconform.diagnosis).
"""
from __future__ import annotations

import decimal
import math
from fractions import Fraction
from typing import Any, Callable, Mapping

import numpy as np

from qconform.declarations import operators
from qconform import dtypes
from qconform.case import Arg, Draft, Node, Reading
from qconform.oracle import base
from qconform.oracle.arith import as_float64, fl
from qconform.oracle.granularity import InvalidModel
from qconform.oracle.graph_ops import SumOps
from qconform.oracle.graph_sums import NotExact, _round_fraction_f32  # noqa: F401  (their home is graph_sums)
from qconform.oracle.graph_resize import op_resize
from qconform.oracle.graph_shape import ShapeOps

QDQ_OPS = operators.QDQ
F32 = "float32"

Values = dict[str, np.ndarray]
#: (reading name parts, tensor values by name, don't-care masks by name)
State = tuple[tuple[str, ...], Values, dict[str, np.ndarray]]



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
    """The float operators of the patterns, on float32 values, each result rounded once to float32.
    ``op_<Name>(node, ins) -> list of (reading, outputs)``; most ops have one reading ("spec")."""

    def float_node(self, node: Node, ins: list[np.ndarray | None], where: str) -> list[tuple[str, list[np.ndarray]]]:
        fn: Callable | None = getattr(self, f"op_{node.op}", None)
        if fn is None:
            raise InvalidModel(f"{where}: no float semantics for {node.op} in a pattern")
        got = fn(node, ins, where)
        return got if isinstance(got, list) and got and isinstance(got[0], tuple) else [("spec", got)]

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


def node_draft(node: Node, opset: int, ins: list[np.ndarray | None], types: Mapping[str, str]) -> Draft:
    """One node of a graph as a single-node draft on the tensors that reach it (what its op's own
    oracle, or a single-node deviation model, computes it from)."""
    args = tuple(None if v is None else Arg(name, types[name], v, initializer=False) for name, v in zip(node.inputs, ins))
    while args and args[-1] is None:
        args = args[:-1]
    return Draft(op=node.op, opset=opset, types="", family="", name="", inputs=args, attrs=dict(node.attrs),
                 domain=node.domain)


class GraphOracle(FloatOps):
    """A graph, node by node. ``fused`` is the one hook a deviation model overrides."""

    def fused(self, draft: Draft, inputs: Mapping[str, np.ndarray]) -> list[tuple[str, list[np.ndarray]]] | None:
        """The pattern computed as one fused kernel would, per reading (None: node by node, the spec)."""
        return None

    def evaluate(self, draft: Draft, primary_only: bool = False):
        """The oracle's interface (``OpOracle.evaluate``): every reading's outputs as an Evaluation."""
        from qconform.oracle.base import Evaluation

        with np.errstate(all="ignore"):
            readings = self.run(draft, primary_only)
        return Evaluation(readings=readings, clause="qdq-graph", primary_only=primary_only)

    def oracle_node(self, node: Node, opset: int, ins: list[np.ndarray | None], types: dict[str, str], where: str):
        """A node of an op the oracle has (QuantizeLinear, DequantizeLinear, and whatever else a packed
        model holds), by its own version class: [(reading, outs, masks)]."""
        from qconform.oracle.base import evaluate

        sub = node_draft(node, opset, ins, types)
        case = evaluate(sub, oracle=self.node_oracle(sub))
        if case.information:
            raise InvalidModel(f"{where}: node {node.op}: {case.information}")
        return [(r.name, list(r.outputs), list(r.dont_care)) for r in case.readings]

    def node_oracle(self, sub: Draft):
        """The oracle a node of an op the oracle has is computed by (None: its op version's own): the
        step a deviation model replaces to run a single-node deviation inside the graph."""
        return None

    def has_oracle(self, node: Node, opset: int) -> bool:
        from qconform.oracle.base import oracle_for

        try:
            oracle_for(node.domain, node.op, opset)
        except LookupError:
            return False
        return True

    def run_nodes(self, nodes: tuple[Node, ...], opsets: Mapping[str, int], inputs: Mapping[str, np.ndarray],
                  where: str, primary_only: bool = False) -> list[State]:
        """Every reading's tensors: (reading name parts, values by name, don't-care masks by name)."""
        types = {k: dtypes.get(v.dtype).name for k, v in inputs.items()}
        states: list[State] = [((), dict(inputs), {})]
        for node in nodes:
            opset = opsets.get(node.domain, opsets.get("", 0))
            oracle_op = self.has_oracle(node, opset)
            nxt: list[State] = []
            for parts, values, masks in states:
                ins = [values[i] if i else None for i in node.inputs]
                if oracle_op:
                    results = self.oracle_node(node, opset, ins, types, where)
                else:
                    results = [(name, o, [None] * len(o)) for name, o in self.float_node(node, ins, f"{where}: {node.op}")]
                if primary_only:
                    results = results[:1]
                for name, o, m in results:
                    label = () if name == "spec" else tuple(name.split("+"))
                    nv, nm = dict(values), dict(masks)
                    for out_name, arr, mask in zip(node.outputs, o, m):
                        nv[out_name] = arr
                        types[out_name] = "bool" if arr.dtype == np.bool_ else dtypes.get(arr.dtype).name
                        if mask is not None and np.any(mask):
                            nm[out_name] = mask
                    nxt.append((parts + label, nv, nm))
            states = nxt
        return states

    def run(self, draft: Draft, primary_only: bool = False) -> list[Reading]:
        """Every reading's graph outputs, each with the don't-care masks its own path through the
        nodes gave them."""
        inputs = {a.name: a.value for a in draft.inputs if a is not None}
        outs = list(graph_outputs(draft.graph))
        fused = self.fused(draft, inputs)
        if fused is not None:
            return [Reading(name, tuple(o)) for name, o in fused][:1 if primary_only else None]
        states = self.run_nodes(draft.graph, {"": draft.opset}, inputs, draft.id, primary_only)
        return [Reading("+".join(parts) or "spec", tuple(values[o] for o in outs),
                        tuple(masks.get(o) for o in outs)) for parts, values, masks in states]


def graph_outputs(nodes: tuple[Node, ...]) -> tuple[str, ...]:
    """The graph's outputs: every node output no later node reads (the last node's alone in a
    chain; each QuantizeLinear's after a Split)."""
    read = {i for n in nodes for i in n.inputs}
    return tuple(o for n in nodes for o in n.outputs if o and o not in read)


def pattern_name(nodes: tuple[Node, ...]) -> str:
    """The pattern a graph is, as ids name it: FakeQuant (Q → DQ), Requant (DQ → Q), else the op
    between the DequantizeLinear nodes and the final QuantizeLinear."""
    ops = [n.op for n in nodes]
    if ops == list(QDQ_OPS):
        return "FakeQuant"
    if ops == list(QDQ_OPS[::-1]):
        return "Requant"
    central = [o for o in ops if o not in QDQ_OPS]
    return central[-1] if central else "Graph"


ORACLE = GraphOracle()


def evaluate_graph(draft: Draft, primary_only: bool = False, oracle: GraphOracle | None = None):
    """(readings, output names) of a graph draft."""
    with np.errstate(all="ignore"):
        readings = (oracle or ORACLE).run(draft, primary_only)
    return readings, graph_outputs(draft.graph)


base.GRAPHS["evaluate"] = evaluate_graph  # base.evaluate computes a pattern through it

__all__ = ["FloatOps", "GraphOracle", "NotExact", "ORACLE", "QDQ_OPS", "evaluate_graph", "exact_sum", "graph_outputs", "node_draft",
           "pattern_name"]


"""A user's quantized model, read as untrusted input, and the node groups qconform has an oracle for.

Why a module of its own: ``qconform certify --model FILE`` and ``pytest --runner NAME --model FILE``
read a file nobody vetted (both front-ends share this module, below either of them), so every check
that can refuse it (unreadable or truncated bytes, an opset newer than the schemas know, external
data outside the model's folder, cycles, inputs nothing produces, absurd sizes) happens here, each as
one ``ModelError`` line, before anything is drafted or written; ``model_cases`` then turns the
groups into cases. Nothing outside the model's directory is read: the model is loaded without its
external data and each ``location`` is checked and read here.

A group is either one node of a declared operator (``qconform.declarations.operators``) or a QDQ
group ``DequantizeLinear(s) → op → QuantizeLinear`` whose central op the graph oracle computes
(a ``FloatOp`` of the oracle's registry), with the model's own constants, attributes and inferred shapes.
"""
from __future__ import annotations

import graphlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from qconform import dtypes
from qconform.case import MS_DOMAIN, ONNX_DOMAIN, Node
from qconform.declarations import operators
from qconform.oracle.graph import float_ops

#: The most elements a tensor of a group may hold (a model claiming more is refused, not drafted).
MAX_ELEMENTS = 10**7
#: Protobuf's own limit on one message; a bigger model file is not an ONNX model this reads.
MAX_FILE_BYTES = 2**31 - 1
_Q, _DQ = operators.QDQ
#: The two QDQ operators' names, from their declarations (drafting reads which group input each holds).
QUANTIZE, DEQUANTIZE = _Q, _DQ


class ModelError(Exception):
    """The model file cannot be certified at all: one line saying why (exit status 2)."""


def _domain(d: str) -> str:
    return ONNX_DOMAIN if d in ("", "ai.onnx") else d


def _sane(name: str) -> str:
    return re.sub(r"\W+", "_", name).strip("_") or "t"


@dataclass
class Info:
    """What the model states: its nodes, opsets, tensor types and shapes, constants, producers."""

    path: Path
    model: onnx.ModelProto
    opsets: dict[str, int]
    types: dict[str, str | None] = field(default_factory=dict)
    shapes: dict[str, tuple[int, ...] | None] = field(default_factory=dict)
    constants: dict[str, onnx.TensorProto] = field(default_factory=dict)
    producers: dict[str, int] = field(default_factory=dict)
    consumers: dict[str, list[int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: node index -> its position in a topological order of the graph (a file need not list them sorted)
    order: dict[int, int] = field(default_factory=dict)
    _values: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def nodes(self):
        return self.model.graph.node

    def value(self, name: str) -> np.ndarray:
        if name not in self._values:
            try:
                self._values[name] = numpy_helper.to_array(self.constants[name])
            except Exception as exc:
                raise ModelError(f"{self.path}: constant {name!r} is malformed: {_line(exc)}") from None
        return self._values[name]


def _line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def read(path: str | Path) -> Info:
    """The model at ``path``, checked (ModelError otherwise), external data read from its own folder,
    symbolic input dimensions set to 1, shapes inferred."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path}: no such model file")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ModelError(f"{path}: {path.stat().st_size:,} bytes, more than one ONNX model can hold")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:
        raise ModelError(f"{path}: not a readable ONNX model (truncated or malformed): {_line(exc)}") from None
    if model.ir_version <= 0 or not model.graph.node:
        raise ModelError(f"{path}: not an ONNX model (no IR version or no node): truncated or malformed")
    opsets = _opsets(path, model)
    _external_data(path, model)
    order = _structure(path, model)
    info = Info(path, model, opsets, order=order)
    _fix_symbolic(info)
    try:
        inferred = shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as exc:
        raise ModelError(f"{path}: shape inference failed: {_line(exc)}") from None
    info.model = model = inferred
    _tables(info)
    return info


def _opsets(path: Path, model: onnx.ModelProto) -> dict[str, int]:
    newest = {ONNX_DOMAIN: onnx.defs.onnx_opset_version(), MS_DOMAIN: 1}
    opsets = {}
    for o in model.opset_import:
        d = _domain(o.domain)
        if d in newest and o.version > newest[d]:
            raise ModelError(f"{path}: {d or 'ai.onnx'} opset {o.version} is newer than qconform knows "
                             f"({newest[d]})")
        opsets[d] = o.version
    if ONNX_DOMAIN not in opsets:
        raise ModelError(f"{path}: the model imports no ai.onnx opset")
    return opsets


def _tensors(graph: onnx.GraphProto):
    """Every TensorProto of a graph and its subgraphs (initializers, Constant values, attributes)."""
    yield from graph.initializer
    for s in graph.sparse_initializer:
        yield s.values
        yield s.indices
    for node in graph.node:
        for a in node.attribute:
            if a.HasField("t"):
                yield a.t
            yield from a.tensors
            if a.HasField("sparse_tensor"):
                yield a.sparse_tensor.values
                yield a.sparse_tensor.indices
            if a.HasField("g"):
                yield from _tensors(a.g)
            for g in a.graphs:
                yield from _tensors(g)


def _external_data(path: Path, model: onnx.ModelProto) -> None:
    """Each external tensor's ``location`` checked to stay inside the model's folder, then read from
    it (never through onnx's loader, which would follow whatever the file says)."""
    base = path.resolve().parent
    for t in _tensors(model.graph):
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in t.external_data}
        loc = info.get("location", "")
        target = (base / loc).resolve()
        if not loc or Path(loc).is_absolute() or not target.is_relative_to(base) or target == base:
            raise ModelError(f"{path}: tensor {t.name!r}: external data location {loc!r} leaves the model's "
                             f"directory")
        if not target.is_file():
            raise ModelError(f"{path}: tensor {t.name!r}: external data file {loc!r} is missing")
        try:
            offset, size = int(info.get("offset", 0)), int(info.get("length", target.stat().st_size))
        except ValueError:
            raise ModelError(f"{path}: tensor {t.name!r}: malformed external data offset or length") from None
        if offset < 0 or size < 0 or offset + size > target.stat().st_size or size > MAX_ELEMENTS * 8:
            raise ModelError(f"{path}: tensor {t.name!r}: external data range {offset}+{size} is outside "
                             f"{loc!r} or absurdly large")
        with open(target, "rb") as f:
            f.seek(offset)
            t.raw_data = f.read(size)
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT


def _structure(path: Path, model: onnx.ModelProto) -> dict[int, int]:
    """Every node input produced by a node or held by an initializer or graph input, one producer
    per tensor, no negative dimension, and no cycle; returns each node's topological position."""
    g = model.graph
    known = {i.name for i in g.input} | {t.name for t in g.initializer} | {s.values.name for s in g.sparse_initializer}
    for t in g.initializer:
        if any(d < 0 for d in t.dims):
            raise ModelError(f"{path}: initializer {t.name!r} has a negative dimension {list(t.dims)}")
    producer: dict[str, int] = {}
    for i, n in enumerate(g.node):
        for o in n.output:
            if o and (o in producer or o in known):
                raise ModelError(f"{path}: tensor {o!r} is produced twice (node {n.name or i})")
            if o:
                producer[o] = i
    deps: dict[int, set[int]] = {}
    for i, n in enumerate(g.node):
        deps[i] = set()
        for x in n.input:
            if not x or x in known:
                continue
            if x not in producer:
                raise ModelError(f"{path}: node {n.name or i} ({n.op_type}): input {x!r} is produced by no node "
                                 f"and held by no initializer or graph input")
            deps[i].add(producer[x])
    try:
        return {node: k for k, node in enumerate(graphlib.TopologicalSorter(deps).static_order())}
    except graphlib.CycleError as exc:
        stuck = exc.args[1][0]
        raise ModelError(f"{path}: the graph has a cycle (through node {g.node[stuck].name or stuck}, "
                         f"{g.node[stuck].op_type})") from None


def _fix_symbolic(info: Info) -> None:
    """A graph input's symbolic or unknown dimension is set to 1 (said in groups.md)."""
    inits = {t.name for t in info.model.graph.initializer}
    for vi in info.model.graph.input:
        if vi.name in inits or not vi.type.tensor_type.HasField("shape"):
            continue
        for k, d in enumerate(vi.type.tensor_type.shape.dim):
            if not d.HasField("dim_value"):
                info.notes.append(f"input {vi.name}: dimension {k} ({d.dim_param or '?'}) set to 1")
                d.Clear()
                d.dim_value = 1


def _tables(info: Info) -> None:
    g = info.model.graph
    for vi in [*g.input, *g.value_info, *g.output]:
        tt = vi.type.tensor_type
        et = dtypes.BY_ONNX.get(tt.elem_type)
        info.types[vi.name] = et.name if et else None
        dims = tt.shape.dim if tt.HasField("shape") else None
        info.shapes[vi.name] = None if dims is None or any(not d.HasField("dim_value") for d in dims) \
            else tuple(d.dim_value for d in dims)
    for t in g.initializer:
        et = dtypes.BY_ONNX.get(t.data_type)
        info.types[t.name], info.shapes[t.name] = (et.name if et else None), tuple(t.dims)
        info.constants[t.name] = t
    for i, n in enumerate(g.node):
        for o in n.output:
            info.producers[o] = i
        for x in n.input:
            info.consumers.setdefault(x, []).append(i)
        if n.op_type == "Constant" and _domain(n.domain) == ONNX_DOMAIN and n.output:
            t = next((a.t for a in n.attribute if a.name == "value" and a.HasField("t")), None)
            if t is not None:
                info.constants[n.output[0]] = t
                et = dtypes.BY_ONNX.get(t.data_type)
                info.types[n.output[0]], info.shapes[n.output[0]] = (et.name if et else None), tuple(t.dims)


@dataclass
class Slot:
    """One tensor a group reads from outside it: its name in the case, in the model, type, shape,
    and the constant's value (None: a data input, which becomes a graph input of the case)."""

    local: str
    name: str
    type: str
    shape: tuple[int, ...]
    value: np.ndarray | None


@dataclass
class Group:
    """A node group: ``kind`` "node" (one declared op) or "qdq"; ``reason`` non-empty where it cannot
    be judged. ``slots``, ``nodes`` (case-local names) and ``attrs`` are filled by ``prepare``."""

    kind: str
    members: list[int]
    label: str = ""
    op: str = ""
    domain: str = ONNX_DOMAIN
    reason: str = ""
    slots: list[Slot] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    attrs: dict = field(default_factory=dict)
    #: the model's names of the tensors the group outputs (its QuantizeLinear's, or its node's)
    outputs: list[str] = field(default_factory=list)

    def position(self, info: Info) -> int:
        """Where the group stands in the graph's topological order (its last node's position)."""
        return max(info.order.get(i, i) for i in self.members)

    def describe(self, info: Info) -> str:
        return ", ".join(f"{info.nodes[i].name or f'#{i}'} ({info.nodes[i].op_type})" for i in self.members)


def _is(node: onnx.NodeProto, op: str) -> bool:
    return node.op_type == op and _domain(node.domain) == ONNX_DOMAIN


def qdq_groups(info: Info) -> list[Group]:
    """Every ``DequantizeLinear(s) → op → QuantizeLinear`` of the model: each non-constant input of the
    op is a DequantizeLinear's output, and a QuantizeLinear reads its first output."""
    groups = []
    for i, n in enumerate(info.nodes):
        if _domain(n.domain) != ONNX_DOMAIN or n.op_type in (_Q, _DQ, "Constant") or not n.output:
            continue
        qs = [j for j in info.consumers.get(n.output[0], []) if _is(info.nodes[j], _Q)
              and info.nodes[j].input[0] == n.output[0]]
        dqs: list[int] = []
        for x in n.input:
            p = info.producers.get(x)
            if not x or (x in info.constants and p is None) or (p is not None and info.nodes[p].op_type == "Constant"):
                continue
            if p is None or not _is(info.nodes[p], _DQ):
                dqs = []
                break
            if p not in dqs:
                dqs.append(p)
        if not qs or not dqs:
            continue
        g = Group("qdq", [*dqs, i, qs[0]], op=n.op_type)
        if n.op_type not in {o.op for o in float_ops()}:
            g.reason = f"no oracle for {n.op_type} between QDQ nodes"
        groups.append(g)
    return groups


def single_groups(info: Info, covered: set[int], grouped: set[int]) -> list[Group]:
    """Every node of a declared operator not inside a group already judged (``covered``), and every
    other node in no QDQ group (``grouped``) as a group of kind "other" that has no oracle: each node
    of the model is accounted for once."""
    out = []
    for i, n in enumerate(info.nodes):
        d = _domain(n.domain)
        if i in covered:
            continue
        if operators.find(d, n.op_type) is not None:
            out.append(Group("node", [i], op=n.op_type, domain=d))
        elif i not in grouped and not (n.op_type == "Constant" and d == ONNX_DOMAIN):
            out.append(Group("other", [i], op=n.op_type, domain=d,
                             reason=f"no oracle for {d or 'ai.onnx'} {n.op_type} outside a QDQ group"))
    return out


def _attrs(node: onnx.NodeProto) -> dict:
    out = {}
    for a in node.attribute:
        if a.type not in (onnx.AttributeProto.INT, onnx.AttributeProto.INTS, onnx.AttributeProto.FLOAT,
                          onnx.AttributeProto.FLOATS, onnx.AttributeProto.STRING, onnx.AttributeProto.STRINGS):
            raise ValueError(f"attribute {a.name} of node {node.name} is a tensor or graph")
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif isinstance(v, list):
            v = [x.decode("utf-8", "replace") if isinstance(x, bytes) else x for x in v]
        out[a.name] = v
    return out


def _checked(info: Info, x: str, n: onnx.NodeProto) -> tuple[int, ...] | None:
    """A tensor's shape, refused (ModelError) where it holds more than MAX_ELEMENTS elements."""
    shape = info.shapes.get(x)
    if shape is not None and int(np.prod(shape, dtype=object)) > MAX_ELEMENTS:
        raise ModelError(f"{info.path}: tensor {x!r} of node {n.name}: shape {list(shape)} holds more "
                         f"than {MAX_ELEMENTS:,} elements")
    return shape


def prepare(info: Info, group: Group, used_labels: set[str]) -> None:
    """Fill the group's label, slots and nodes (case-local tensor names); set ``reason`` where a type
    or shape is not known; raise ModelError where a tensor of it is absurdly large."""
    nodes = [info.nodes[i] for i in group.members]
    central = nodes[-2] if group.kind == "qdq" else nodes[0]
    base = _sane(central.name or f"{central.op_type}{group.members[-2 if group.kind == 'qdq' else 0]}")
    label, k = base, 2
    while label in used_labels:
        label, k = f"{base}_{k}", k + 1
    used_labels.add(label)
    group.label = label
    if group.kind == "other":
        return
    produced = {o for n in nodes for o in (n.output[:1] if n is central and group.kind == "qdq" else n.output)}
    local: dict[str, str] = {}

    def name_of(x: str) -> str:
        if x not in local:
            want, k = _sane(x), 2
            cand = want
            while cand in local.values():
                cand, k = f"{want}_{k}", k + 1
            local[x] = cand
        return local[x]

    for n in nodes:
        for x in n.input:
            if x and x not in produced and x not in {s.name for s in group.slots}:
                t, shape = info.types.get(x), _checked(info, x, n)
                if t is None or shape is None:
                    group.reason = group.reason or f"the {'type' if t is None else 'shape'} of {x!r} is not " \
                                                   f"inferred (a dynamic shape)"
                    continue
                value = info.value(x) if x in info.constants else None
                group.slots.append(Slot(name_of(x), x, t, shape, value))
        outs = n.output[:1] if n is central and group.kind == "qdq" else n.output
        for o in outs:
            _checked(info, o, n)
        group.outputs = [o for o in outs if o]
        try:
            attrs = _attrs(n)
        except ValueError as exc:
            group.reason = group.reason or str(exc)
            attrs = {}
        if group.kind == "node":
            group.attrs = attrs
        group.nodes.append(Node(n.op_type, tuple(name_of(x) if x else "" for x in n.input),
                                tuple(name_of(o) for o in outs), attrs, _domain(n.domain)))


__all__ = ["DEQUANTIZE", "Group", "Info", "MAX_ELEMENTS", "ModelError", "QUANTIZE", "Slot", "prepare", "qdq_groups", "read",
           "single_groups"]

"""A user's model turned into a corpus of its own node groups: the part both front-ends share.

Why here, below either front-end: ``qconform certify --model FILE`` (``qconform.apps.model_certify``)
and ``pytest --runner NAME --model FILE`` (``qconform.plugin.model``) must judge the same cases the same
way, so the model is read (``model_groups``: every refusal before anything is written), each group is
drafted at the model's own parameters over the inputs that matter (the whole code range tiled over the
input's shape, both saturation ends, seeded random codes, and with a calibration input the values it
gives there), the oracle gives every permitted reading, and ``build`` writes the cases as a corpus
that either front-end then certifies with the unchanged engine. Case ids are named after the
group's nodes; ``groups_md`` lists every group with its nodes and verdicts, or why it could not be judged.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from qconform import dtypes
from qconform.case import Arg, Case, Draft, PATTERN_DOMAIN
from qconform.gating import model_groups as mg
from qconform.oracle import InvalidModel, evaluate
from qconform.oracle.graph import float_ops, pattern_name

FAMILY = "model"
#: A code range longer than an input's element count is split over at most this many cases.
MAX_CHUNKS = 16
#: Products one exact-oracle evaluation of a QDQ group may sum (the graph oracle works in Python integers).
MAX_WORK = 4 * 10**6
#: Where a front-end writes the model's corpus and its groups' list, inside the report directory.
CORPUS_DIR = "model-corpus"
GROUPS_FILE = "groups.md"


@dataclass
class Built:
    """A model read and drafted: its groups (each judged, or with the reason it is not), their cases,
    and the calibration values where ``--inputs`` gave some."""

    info: mg.Info
    groups: list[mg.Group]
    cases: list[Case]
    calib: dict[str, np.ndarray] | None = None
    judged: list[mg.Group] = field(default_factory=list)
    #: the whole-model check's outcome (``model_check.Check``), set by a front-end once it has run: in the
    #: report's ``invocation.model`` and so in its gate (``model_check.gate``) before the report is written
    whole: Any = None

    def not_judged_lines(self) -> list[str]:
        """One line per group without a verdict: its nodes and why (each said once)."""
        return [f"not judged: {g.describe(self.info)}: {g.reason}" for g in self.groups if g.reason]

    def scope(self) -> dict:
        """The model as a report's invocation names it (a model states no conformance of an op version),
        with the whole-model check's outcome once it has run."""
        out: dict[str, Any] = {"file": self.info.path.name, "groups": len(self.judged)}
        if self.whole is not None:
            out["whole"] = self.whole.record(self.info)
        return out


def build(model: str | Path, inputs: str | Path | None = None) -> Built:
    """Read and check the model (ModelError: one line, nothing written), find its groups, draft and
    evaluate each at the model's own parameters."""
    info = mg.read(model)
    fill_from_run(info)
    groups = mg.qdq_groups(info)
    labels: set[str] = set()
    for g in groups:
        mg.prepare(info, g, labels)
        _too_large(info, g)
    calib = calibration(info, str(inputs)) if inputs else None
    cases: list[Case] = []
    covered: set[int] = set()
    for g in groups:
        if not g.reason:
            got = _cases(info, g, calib)
            cases += got
            if got:
                covered.update(g.members)
    singles = mg.single_groups(info, covered, {i for g in groups for i in g.members})
    for g in singles:
        mg.prepare(info, g, labels)
    for g in singles:
        if not g.reason:
            cases += _cases(info, g, calib)
    groups += singles
    groups.sort(key=lambda g: g.position(info))
    return Built(info, groups, cases, calib, [g for g in groups if not g.reason])


def write_corpus(built: Built, root: Path) -> Path:
    """The model's cases as a corpus at ``root`` (``corpus.write``: the one writer)."""
    from qconform import corpus

    corpus.write(built.cases, root)
    return root


def _too_large(info: mg.Info, group: mg.Group) -> None:
    """A QDQ group whose sums are too many products for the exact oracle gets a reason, not cases:
    the float ops that sum say how many terms an output element adds (``FloatOp.terms``)."""
    float_op = next((o for o in float_ops() if o.op == group.op), None)
    if float_op is None or float_op.terms is None or group.reason:
        return
    central = info.nodes[group.members[-2]]
    w = next((s for s in group.slots if s.value is not None and len(s.shape) >= 2), None)
    reduce = float_op.terms(tuple(w.shape) if w else None)
    if not reduce:  # a window of the input (pools, Resize): every input element
        reduce = max((int(np.prod(s.shape)) for s in group.slots), default=1)
    work = int(np.prod(info.shapes.get(central.output[0]) or (1,))) * reduce
    if work > MAX_WORK:
        group.reason = f"too large for the exact oracle ({work:,} products, at most {MAX_WORK:,})"


# ----------------------------------------------------------------------------------------------
# inputs
# ----------------------------------------------------------------------------------------------
def rng(*key: object) -> np.random.Generator:
    """A generator seeded from ``key`` (the group and the tensor): the same model drafts the same cases."""
    return np.random.default_rng(int.from_bytes(hashlib.sha256("|".join(map(str, key)).encode()).digest()[:8], "little"))


def _quantizer(info: mg.Info, group: mg.Group, slot: mg.Slot):
    """(scale broadcast to the slot's shape, zero point, quantized type) of the QuantizeLinear that
    reads a float data input, or None."""
    for n in group.nodes:
        if n.op == mg.QUANTIZE and n.inputs[0] == slot.local:
            by = {s.local: s for s in group.slots}
            s = by.get(n.inputs[1])
            z = by.get(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
            if s is None or s.value is None or (z is not None and z.value is None):
                return None
            scale = np.asarray(s.value, np.float64)
            zp = np.zeros_like(scale) if z is None else np.asarray(z.value, np.float64)
            t = z.type if z is not None else n.attrs.get("output_dtype") and dtypes.BY_ONNX[n.attrs["output_dtype"]].name
            t = t or "uint8"
            if scale.ndim == 1 and len(slot.shape) > 0 and scale.shape[0] > 1:
                axis = n.attrs.get("axis", 1) % len(slot.shape)
                if scale.shape[0] != slot.shape[axis]:
                    return None  # blocked: no per-element grid here
                view = [1] * len(slot.shape)
                view[axis] = -1
                scale, zp = scale.reshape(view), zp.reshape(view)
            elif scale.ndim > 1:
                return None
            return scale, zp, t
    return None


def as_array(t: str, values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``values`` as an array of type ``t`` and ``shape`` (integers rounded and clipped to the type's range)."""
    et = dtypes.get(t)
    if et.is_integer:
        lo, hi = et.qrange
        values = np.clip(np.asarray(values, np.float64).round(), lo, hi)
        return values.astype(np.int64).astype(et.dtype).reshape(shape)
    return np.asarray(values, np.float64).astype(et.dtype).reshape(shape)


def input_sets(info: mg.Info, group: mg.Group) -> list[tuple[str, dict[str, np.ndarray]]]:
    """Named sets of values for the group's data inputs: ``codes-K`` (the whole code range, tiled over
    the shape, split where the shape holds fewer elements), ``min`` and ``max`` (saturation at both
    ends), ``random-K`` (seeded). A float input read by a QuantizeLinear gets the values its codes and
    the half-way ties between them dequantize to, and values beyond both ends of its range."""
    data = [s for s in group.slots if s.value is None]
    if not data:
        return [("model-values", {})]
    plans: dict[str, list[np.ndarray]] = {}
    for k, s in enumerate(data):
        n = int(np.prod(s.shape, dtype=np.int64))
        et = dtypes.get(s.type)
        q = _quantizer(info, group, s) if et.is_float else None
        draw = rng(group.label, s.name)
        if et.is_integer and et.bits <= 16:
            lo, hi = et.qrange
            every = np.arange(lo, hi + 1, dtype=np.float64)
        elif et.is_integer:
            lo, hi = -(1 << 20), 1 << 20
            every = np.linspace(lo, hi, 4096).round()
        elif q is not None:
            scale, zp, qt = q
            qlo, qhi = dtypes.get(qt).qrange if dtypes.get(qt).is_integer else (-448, 448)
            codes = np.arange(qlo, qhi + 1, 0.5)
            every = codes
        else:
            every = np.concatenate([np.linspace(-8, 8, 255), [0.0]])
        every = np.roll(every, 97 * k)  # several inputs: other pairs of codes meet
        sets = []
        if n:
            chunks = [every] if n >= every.size else \
                [every[i:i + n] for i in range(0, min(every.size, n * MAX_CHUNKS), n)]
            sets = [np.resize(c, n) for c in chunks]
        low, high = (every.min(), every.max()) if q is None else (every.min() - 4, every.max() + 4)
        sets += [np.full(n, low), np.full(n, high)]
        if et.is_integer:
            sets += [draw.integers(int(every.min()), int(every.max()) + 1, size=n).astype(np.float64) for _ in range(2)]
        else:
            sets += [draw.uniform(low, high, size=n) for _ in range(2)]
        arrays = []
        for v in sets:
            v = v.reshape(s.shape)
            if q is not None:  # codes (and half codes) to the values they dequantize to
                scale, zp, _ = q
                v = (v - zp) * scale
            arrays.append(as_array(s.type, v, s.shape))
        plans[s.local] = arrays
    nchunks = max(len(a) - 4 for a in plans.values())
    names = [f"codes-{i}" for i in range(nchunks)] + ["min", "max", "random-0", "random-1"]
    out = []
    for j, name in enumerate(names):
        vals = {}
        for local, arrays in plans.items():
            nc = len(arrays) - 4
            vals[local] = arrays[min(j, nc - 1)] if j < nchunks and nc else arrays[nc + j - nchunks]
        out.append((name, vals))
    return out


#: Sparse input sets tried where the oracle refuses a group's dense ones.
SPARSE_SETS = 8


def _zero_code(info: mg.Info, group: mg.Group, slot: mg.Slot):
    """The value of ``slot`` that stands for 0 in the group's arithmetic (a data input's zero point,
    read from the DequantizeLinear or the op's declared zero point that belongs to it; 0.0 for a float
    input), or None where it is not one number."""
    from qconform.declarations import operators
    from qconform.declarations.operator import Role

    if dtypes.get(slot.type).is_float:
        return 0.0
    by = {s.local: s for s in group.slots}
    zp_local = None
    for n in group.nodes:
        if group.kind == "qdq" and n.op == mg.DEQUANTIZE and n.inputs and n.inputs[0] == slot.local:
            zp_local = n.inputs[2] if len(n.inputs) > 2 and n.inputs[2] else ""
        elif group.kind == "node" and slot.local in n.inputs:
            decl = operators.find(n.domain, n.op)
            if decl is None:
                return None
            mine = decl.inputs[n.inputs.index(slot.local)].name
            k = next((j for j, i in enumerate(decl.inputs) if i.role is Role.ZERO_POINT and i.of == mine), None)
            zp_local = n.inputs[k] if k is not None and k < len(n.inputs) and n.inputs[k] else ""
    if zp_local is None:
        return None
    if zp_local == "":
        return 0
    zp = by.get(zp_local)
    if zp is None or zp.value is None or np.size(zp.value) != 1:
        return None
    return int(np.asarray(zp.value).reshape(-1)[0])


def sparse_sets(info: mg.Info, group: mg.Group) -> list[tuple[str, dict[str, np.ndarray]]]:
    """``sparse-K``: the group's first data input holding the value that stands for 0 everywhere but at
    one element (a code at either end of its range, then seeded codes), the others their seeded
    random values. Every sum a reducing op (a convolution, a matrix product, a pool) then makes holds
    at most one term besides its bias, exact in float32 whatever the order: the requantisation of the
    model's own weights, bias and scales is judged where the dense sets' sums are refused."""
    data = [s for s in group.slots if s.value is None]
    dense = dict(input_sets(info, group)).get("random-0")
    if not data or dense is None:
        return []
    first = data[0]
    zero = _zero_code(info, group, first)
    n = int(np.prod(first.shape, dtype=np.int64))
    if zero is None or not n:
        return []
    et = dtypes.get(first.type)
    q = _quantizer(info, group, first) if et.is_float else None
    draw = rng(group.label, first.name, "sparse")
    out = []
    for k in range(SPARSE_SETS):
        v = np.full(n, float(zero))
        at = int(draw.integers(n))
        if et.is_integer:
            lo, hi = et.qrange if et.bits <= 16 else (-(1 << 20), 1 << 20)
            v[at] = (lo, hi)[k] if k < 2 else float(draw.integers(lo, hi, endpoint=True))
        elif q is not None:
            scale, zp, qt = q
            qlo, qhi = dtypes.get(qt).qrange if dtypes.get(qt).is_integer else (-448, 448)
            code = (qlo, qhi)[k] if k < 2 else float(draw.integers(int(qlo), int(qhi), endpoint=True))
            s_at = np.broadcast_to(scale, first.shape).reshape(-1)[at]
            z_at = np.broadcast_to(zp, first.shape).reshape(-1)[at]
            v[at] = (code - z_at) * s_at
        else:
            v[at] = draw.normal(0, 4)
        out.append((f"sparse-{k}", {**dense, first.local: as_array(first.type, v, first.shape)}))
    return out


def calibration(info: mg.Info, path: str) -> dict[str, np.ndarray]:
    """Every tensor of the model on the graph inputs ``path`` holds (an .npz, read without pickles)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            feeds = {k: z[k] for k in z.files}
    except Exception as exc:
        raise mg.ModelError(f"--inputs {path}: not a readable .npz: {mg._line(exc)}") from None
    return {**feeds, **_run_all(info, feeds, f"--inputs {path}")}


def _run_all(info: mg.Info, feeds: dict[str, np.ndarray], what: str) -> dict[str, np.ndarray]:
    """The model run whole on onnxruntime, graph optimisations off, every node output a graph output."""
    import onnx

    model = onnx.ModelProto()
    model.CopyFrom(info.model)
    del model.graph.output[:]
    for n in model.graph.node:
        for o in n.output:
            if o and n.op_type != "Constant":
                model.graph.output.add().name = o
    inits = {t.name for t in model.graph.initializer}
    missing = [vi.name for vi in model.graph.input if vi.name not in inits and vi.name not in feeds]
    if missing:
        raise mg.ModelError(f"{what}: no array for graph input {missing[0]!r}")
    try:
        import onnxruntime as ort
    except ImportError:
        raise mg.ModelError(f"{what}: running the model needs onnxruntime (pip install onnxruntime)") from None
    try:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.log_severity_level = 3
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        got = sess.run(names, {i.name: feeds[i.name] for i in sess.get_inputs()})
    except Exception as exc:
        raise mg.ModelError(f"{what}: the model did not run: {mg._line(exc)}") from None
    return dict(zip(names, got))


def fill_from_run(info: mg.Info) -> None:
    """Types and shapes onnx's inference left unknown (it does not know com.microsoft ops) taken from
    one onnxruntime run of the model on zeros, where onnxruntime is installed."""
    unknown = [o for n in info.nodes for o in n.output if o and (info.types.get(o) is None or info.shapes.get(o) is None)]
    if not unknown:
        return
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return
    feeds, total = {}, 0
    inits = set(info.constants)
    for vi in info.model.graph.input:
        if vi.name in inits:
            continue
        t, shape = info.types.get(vi.name), info.shapes.get(vi.name)
        if t is None or shape is None:
            return
        total += int(np.prod(shape, dtype=object))
        if total > mg.MAX_ELEMENTS:
            raise mg.ModelError(f"{info.path}: graph input {vi.name!r}: shape {list(shape)} is absurdly large")
        feeds[vi.name] = np.zeros(shape, dtypes.get(t).dtype)
    try:
        values = _run_all(info, feeds, f"{info.path}")
    except mg.ModelError as exc:
        info.notes.append(f"shapes not inferred by onnx stay unknown: {exc}")
        return
    filled = 0
    for name in unknown:
        v = values.get(name)
        et = dtypes.BY_DTYPE.get(v.dtype) if v is not None else None
        if v is not None and et is not None:
            info.types[name], info.shapes[name] = et.name, tuple(v.shape)
            filled += 1
    if filled:
        info.notes.append(f"types and shapes of {filled} tensors onnx's shape inference left unknown were taken "
                          f"from one onnxruntime run of the model on zero inputs")


# ----------------------------------------------------------------------------------------------
# drafts and cases
# ----------------------------------------------------------------------------------------------
def draft(info: mg.Info, group: mg.Group, set_name: str, values: dict[str, np.ndarray]) -> Draft:
    args = [Arg(s.local, s.type, values[s.local] if s.value is None else s.value, initializer=s.value is not None)
            for s in group.slots]
    types = "-".join(dict.fromkeys(s.type for s in group.slots)) or "none"
    note = f"model {info.path.name}: nodes {group.describe(info)}"
    if group.kind == "qdq":
        nodes = tuple(group.nodes)
        return Draft(op=pattern_name(nodes), opset=info.opsets[""], types=types, family=FAMILY,
                     name=f"{group.label}.{set_name}", inputs=tuple(args), domain=PATTERN_DOMAIN, graph=nodes,
                     note=note, provenance=f"model:{info.path.name}")
    node = group.nodes[0]
    by = {a.name: a for a in args}
    positional = [by[x] if x else None for x in node.inputs]
    while positional and positional[-1] is None:
        positional.pop()
    return Draft(op=node.op, opset=info.opsets.get(node.domain, 1), types=types, family=FAMILY,
                 name=f"{group.label}.{set_name}", inputs=tuple(positional), attrs=dict(group.attrs),
                 domain=node.domain, note=note, provenance=f"model:{info.path.name}")


def _cases(info: mg.Info, group: mg.Group, calib: dict[str, np.ndarray] | None) -> list[Case]:
    """The group's cases, one per input set the oracle can judge; where none, ``group.reason`` says why."""
    sets = input_sets(info, group)
    if calib is not None:
        data = [s for s in group.slots if s.value is None]
        if data and all(s.name in calib and np.shape(calib[s.name]) == s.shape for s in data):
            sets.append(("calibration", {s.local: as_array(s.type, calib[s.name], s.shape)
                                         if dtypes.get(s.type).is_integer else np.asarray(calib[s.name]).astype(
                                             dtypes.get(s.type).dtype) for s in data}))
    out, why = [], ""
    tried_sparse = False
    while sets:
        for name, values in sets:
            try:
                out.append(evaluate(draft(info, group, name, values)))
            except (InvalidModel, LookupError, ValueError, TypeError, KeyError, IndexError) as exc:
                why = why or f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        sets = []
        if why and not tried_sparse:  # dense sums refused: the sparse sets' sums hold one term
            tried_sparse, sets = True, sparse_sets(info, group)
    if not out:
        group.reason = f"the oracle refuses it: {why}"
    return out


__all__ = ["Built", "CORPUS_DIR", "FAMILY", "GROUPS_FILE", "as_array", "build", "calibration", "draft", "input_sets", "rng",
           "sparse_sets", "write_corpus"]

"""Random QDQ graphs for ``qconform explore graphs`` (qconform/apps/explore_graphs.py): each corpus
pattern (``generators.patterns``' drafts) is a template whose structure is kept -- its nodes, its
types, which tensors are weights -- and whose parameters are drawn again as a quantisation tool
would set them:

- scales from a calibrated range, (max − min)/(qmax − qmin) in the scale's type, or powers of two
  (a template's power-of-two scale stays one: the sums the text leaves unordered stay exact,
  #qdq-sum-order); an output scale sometimes derived from an input scale by 2^k (ties after the
  float op) or equal to it, zero point too (a Q/DQ pair a runtime may fold);
- zero points from the calibrated minimum (asymmetric), the middle code (symmetric) or a type's end;
  weights stay symmetric as tools emit them, per tensor or per channel as the template;
- codes uniform over the type (weights and activations), shapes of elementwise patterns and the
  spatial size of windowed ones drawn again;
- the pattern op's attributes that change its arithmetic (``ATTRIBUTES``: a convolution's kernel,
  strides, pads, dilations and group; a pool's kernel, strides, pads, ``ceil_mode`` and
  ``count_include_pad``; Gemm's transposes; an axis; a permutation; Resize's modes).

A draw is a ``Draft`` of family "explored"; whether the oracle can compute it (``InvalidModel``,
``NotExact``) is the explorer's question, not this module's. Everything is seeded from the caller's
``numpy.random.Generator``."""
from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any, Callable

import numpy as np

from qconform import dtypes
from qconform.case import Arg, Draft, Node
from qconform.declarations import operators
from qconform.generators.common import array

FAMILY = "explored"
DQ, Q = operators.QDQ[1], operators.QDQ[0]


@functools.lru_cache(maxsize=1)
def templates() -> dict[str, tuple[Draft, ...]]:
    """Every pattern draft of the corpus's generators, by pattern (the id's op)."""
    from qconform.generators import FAMILIES

    out: dict[str, list[Draft]] = {}
    for key, gen in FAMILIES.items():
        if key.startswith("patterns"):
            for d in gen():
                if d.graph:
                    out.setdefault(d.op, []).append(d)
    return {k: tuple(v) for k, v in sorted(out.items())}


# ----------------------------------------------------------------------------------------------
# What each tensor of a template is
# ----------------------------------------------------------------------------------------------
def roles(d: Draft) -> dict[str, str]:
    """Each named input's role: "act" (codes a DequantizeLinear reads from a graph input), "weight"
    (integer codes of an initializer), "bias" (int32 codes), "float-in" (a float graph input a
    QuantizeLinear reads), "scale-in"/"scale-w"/"scale-b"/"scale-out", "zp-in"/"zp-w"/"zp-b"/"zp-out";
    anything else ("other": shapes, indices, bounds) is kept."""
    values = {a.name: a for a in d.inputs if a is not None}
    out: dict[str, str] = {}
    for n in d.graph:
        if n.op == DQ and n.inputs[0] in values:
            x = values[n.inputs[0]]
            kind = "bias" if x.type == "int32" else ("weight" if x.initializer else "act")
            tag = {"act": "in", "weight": "w", "bias": "b"}[kind]
            out.setdefault(x.name, kind)
            for i, r in zip(n.inputs[1:], ("scale", "zp")):
                if i in values:
                    out.setdefault(i, f"{r}-{tag}")
        elif n.op == Q:
            if n.inputs[0] in values:
                out.setdefault(n.inputs[0], "float-in")
            for i, r in zip(n.inputs[1:], ("scale", "zp")):
                if i in values:
                    out.setdefault(i, f"{r}-{'in' if n.inputs[0] in values else 'out'}")
    for name in values:
        out.setdefault(name, "other")
    return out


def _pow2(v: float) -> bool:
    return v > 0 and float(np.frexp(v)[0]) == 0.5


def _fl(t: str, v) -> np.ndarray:
    return np.asarray(array(t, np.asarray(v, np.float64)))


def _span(t: str) -> int:
    lo, hi = dtypes.get(t).qrange
    return hi - lo


# ----------------------------------------------------------------------------------------------
# Parameters drawn as a quantiser sets them
# ----------------------------------------------------------------------------------------------
def draw_scale(rng: np.random.Generator, like: np.ndarray, t: str, code_t: str | None) -> np.ndarray:
    """A scale of like's shape: a power of two where the template's is one (within a factor of 4),
    else a calibrated one, (max − min)/(qmax − qmin) for a range within a factor of 4 of the
    template's, rounded to the scale's type."""
    like = np.asarray(like, np.float64)
    flat = like.reshape(-1)
    out = np.empty(flat.shape)
    for i, s in enumerate(flat):
        if _pow2(float(s)):
            out[i] = 2.0 ** (int(np.frexp(s)[1]) - 1 + int(rng.integers(-2, 3)))
        else:
            span = _span(code_t) if code_t and dtypes.get(code_t).is_integer else 1
            rng_width = float(s) * span * float(np.exp(rng.uniform(np.log(0.25), np.log(4.0))))
            out[i] = rng_width / span
    return _fl(t, out.reshape(like.shape))


def draw_zero_point(rng: np.random.Generator, like: np.ndarray, t: str) -> np.ndarray:
    """An activation's zero point: from a calibrated minimum (asymmetric: qmin − min/scale, the
    minimum a random fraction of the range below 0), the middle code (symmetric) or an end."""
    et = dtypes.get(t)
    if not et.is_integer:
        return np.asarray(like).copy()
    lo, hi = et.qrange
    u = rng.random()
    if u < 0.5:
        v = lo + int(round(rng.random() * (hi - lo)))
    elif u < 0.8:
        v = (lo + hi + 1) // 2 if not et.signed else 0
    else:
        v = lo if rng.random() < 0.5 else hi
    return array(t, np.full(np.shape(like), v))


def draw_codes(rng: np.random.Generator, t: str, shape: tuple[int, ...], centre: int = 0, within: int = 0) -> np.ndarray:
    """Codes of t: uniform over the type, or (``within``) within that many codes of ``centre``."""
    et = dtypes.get(t)
    if et.is_float:
        return array(t, rng.uniform(-448, 448, size=shape) if et.bits == 8 else rng.normal(0, 4, size=shape))
    lo, hi = et.qrange
    if within:
        lo, hi = max(lo, centre - within), min(hi, centre + within)
    return array(t, rng.integers(lo, hi + 1, size=shape))


# ----------------------------------------------------------------------------------------------
# The pattern op's attributes
# ----------------------------------------------------------------------------------------------
#: (central node, the template's values by name, rng) -> (new attrs, new shapes of inputs by name)
AttrDraw = Callable[[Node, dict[str, Arg], np.random.Generator], tuple[dict[str, Any], dict[str, tuple[int, ...]]]]


def _spatial(rng, x: Arg, lo: int = 3, hi: int = 12) -> tuple[int, ...]:
    return tuple(x.value.shape[:2]) + tuple(int(rng.integers(lo, hi + 1)) for _ in x.value.shape[2:])


def _window_attrs(rng, n: int, kernel: list[int], pads: bool = True) -> dict[str, Any]:
    attrs: dict[str, Any] = {"strides": [int(rng.integers(1, 4)) for _ in range(n)]}
    if pads and rng.random() < 0.6:
        attrs["pads"] = [int(rng.integers(0, k)) for k in kernel] * 2
        attrs["pads"] = attrs["pads"][:n] + [int(rng.integers(0, k)) for k in kernel]
    return attrs


def _conv(node: Node, values: dict[str, Arg], rng) -> tuple[dict, dict]:
    x, w = values[node.inputs[0]], values[node.inputs[1]]
    n = x.value.ndim - 2
    m, c = w.value.shape[0], x.value.shape[1]
    groups = [g for g in range(1, c + 1) if c % g == 0 and m % g == 0]
    group = int(rng.choice(groups)) if rng.random() < 0.4 else 1
    kernel = [int(rng.integers(1, 4)) for _ in range(n)]
    attrs = {"kernel_shape": kernel, **_window_attrs(rng, n, kernel)}
    if rng.random() < 0.3:
        attrs["dilations"] = [int(rng.integers(1, 3)) for _ in range(n)]
    if group != 1:
        attrs["group"] = group
    return attrs, {x.name: _spatial(rng, x, 4), w.name: (m, c // group, *kernel)}


def _pool(node: Node, values: dict[str, Arg], rng) -> tuple[dict, dict]:
    x = values[node.inputs[0]]
    n = x.value.ndim - 2
    kernel = [int(rng.integers(1, 4)) for _ in range(n)]
    attrs = {"kernel_shape": kernel, **_window_attrs(rng, n, kernel)}
    if rng.random() < 0.3:
        attrs["ceil_mode"] = 1
    if node.op == "AveragePool" and rng.random() < 0.5:
        attrs["count_include_pad"] = 1
    return attrs, {x.name: _spatial(rng, x, 4)}


def _global(node: Node, values: dict[str, Arg], rng) -> tuple[dict, dict]:
    x = values[node.inputs[0]]
    return dict(node.attrs), {x.name: _spatial(rng, x, 1, 9)}


def _gemm(node: Node, values: dict[str, Arg], rng) -> tuple[dict, dict]:
    attrs = dict(node.attrs)
    x = values[node.inputs[0]]
    shapes = {}
    if rng.random() < 0.5:
        attrs["transA"] = 1 - int(attrs.get("transA", 0))
        shapes[x.name] = tuple(reversed(x.value.shape))
    return attrs, shapes


def _axis(node: Node, values: dict[str, Arg], rng) -> tuple[dict, dict]:
    """An ``axis`` drawn again where only dequantized tensors reach the op (a Split's sizes, a
    Gather's indices, a Slice's starts hold for the template's axis alone)."""
    x = values.get(node.inputs[0])
    attrs = dict(node.attrs)
    only_data = all(i in values and values[i].type != "int64" for i in node.inputs if i)
    if x is not None and "axis" in attrs and only_data and not node.outputs[1:]:
        r = x.value.ndim
        attrs["axis"] = int(rng.integers(-r, r))
    return attrs, {}


def _perm(node: Node, values: dict[str, Arg], rng) -> tuple[dict, dict]:
    x = values[node.inputs[0]]
    return {**node.attrs, "perm": [int(p) for p in rng.permutation(x.value.ndim)]}, {}


def _resize(node: Node, values: dict[str, Arg], rng) -> tuple[dict, dict]:
    """Resize's mode and coordinate transformation drawn again (the template's cubic and antialias
    settings go with a mode they do not belong to: onnxruntime refuses exclude_outside elsewhere)."""
    attrs = dict(node.attrs)
    if rng.random() < 0.3:
        return attrs, {}
    for k in ("exclude_outside", "cubic_coeff_a", "antialias"):
        attrs.pop(k, None)
    attrs["mode"] = str(rng.choice(["nearest", "linear", "cubic"]))
    attrs["coordinate_transformation_mode"] = str(rng.choice(["half_pixel", "asymmetric", "align_corners",
                                                              "pytorch_half_pixel"]))
    if attrs["mode"] == "nearest":
        attrs["nearest_mode"] = str(rng.choice(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]))
    return attrs, {}


#: The pattern ops whose attributes change the arithmetic, and how each is drawn; an op not named
#: keeps its template's attributes (an ``axis`` among them is drawn again).
ATTRIBUTES: dict[str, AttrDraw] = {
    "Conv": _conv, "AveragePool": _pool, "MaxPool": _pool, "GlobalAveragePool": _global, "Gemm": _gemm,
    "Transpose": _perm, "Resize": _resize,
}

# ----------------------------------------------------------------------------------------------
# A template drawn again
# ----------------------------------------------------------------------------------------------
def central(d: Draft) -> Node | None:
    """The pattern's op node (None for FakeQuant and Requant, which have none)."""
    found = [n for n in d.graph if n.op not in operators.QDQ]
    return found[-1] if found else None


def _elementwise(node: Node | None, seen: dict[str, Arg], role: dict[str, str]) -> bool:
    """Every input of the op node a dequantized activation of one shape (rank 2 at most), no
    attribute: the shape may change."""
    if node is None or node.attrs:
        return False
    srcs = [seen.get(i) for i in node.inputs if i]
    return bool(srcs) and all(a is not None and role.get(a.name) == "act" for a in srcs) and \
        len({a.value.shape for a in srcs}) == 1 and srcs[0].value.ndim <= 2


def redraw(t: Draft, rng: np.random.Generator, name: str, narrow: bool = False) -> Draft:
    """The template ``t`` with its parameters drawn again (module docstring). ``narrow``: activation
    codes within the template's spread of their zero point, for sums that must stay exact."""
    values = {a.name: a for a in t.inputs if a is not None}
    role = roles(t)
    src = {n.outputs[0]: n.inputs[0] for n in t.graph if n.op == DQ}
    seen = {**values, **{o: values[i] for o, i in src.items() if i in values}}  # a tensor the op reads, by its source
    node = central(t)
    attrs, shapes = (dict(node.attrs), {}) if node is not None else ({}, {})
    if node is not None:
        draw_attrs = ATTRIBUTES.get(node.op, _axis)
        attrs, shapes = draw_attrs(node, seen, rng)
        if _elementwise(node, seen, role) and rng.random() < 0.7:
            shape = tuple(int(rng.integers(1, 9)) for _ in seen[node.inputs[0]].value.shape[:-1]) + \
                (int(rng.integers(1, 70)),)
            shapes = {src[i]: shape for i in node.inputs if i}
    new: dict[str, Arg] = {}
    zp_of = {n.inputs[0]: n.inputs[2] for n in t.graph if n.op == DQ and len(n.inputs) > 2}
    # zero points and scales first: codes are drawn around their zero point
    for nm, a in values.items():
        r = role[nm]
        if r in ("zp-in", "zp-out"):
            new[nm] = replace(a, value=draw_zero_point(rng, a.value, a.type))
    code_type = {n.inputs[1]: values[n.inputs[2]].type for n in t.graph
                 if n.op in operators.QDQ and len(n.inputs) > 2 and n.inputs[2] in values and n.inputs[1] in values}
    for nm, a in values.items():
        if role[nm] in ("scale-in", "scale-out", "scale-w"):
            new[nm] = replace(a, value=draw_scale(rng, a.value, a.type, code_type.get(nm)))
    _relate_output(t, values, new, role, rng)
    for nm, a in values.items():
        r = role[nm]
        shape = shapes.get(nm, a.value.shape)
        if r == "act":
            z = new.get(zp_of.get(nm, ""), values.get(zp_of.get(nm, "")))
            centre = int(np.asarray(z.value).astype(np.int64).reshape(-1)[0]) if z is not None and \
                dtypes.get(z.type).is_integer else 0
            within = 0
            if narrow:
                tz = values.get(zp_of.get(nm, ""))
                tcentre = int(np.asarray(tz.value).astype(np.int64).reshape(-1)[0]) if tz is not None and \
                    dtypes.get(tz.type).is_integer else 0
                within = max(1, int(np.max(np.abs(a.value.astype(np.int64) - tcentre)))) if \
                    dtypes.get(a.type).is_integer else 0
            new[nm] = replace(a, value=draw_codes(rng, a.type, shape, centre, within))
        elif r == "weight":
            v = draw_codes(rng, a.type, shape)
            new[nm] = replace(a, value=v)
        elif r == "bias":
            new[nm] = replace(a, value=np.asarray(rng.integers(-2**12, 2**12, size=shape), np.int32))
        elif r == "float-in":
            s = next((new[n.inputs[1]] for n in t.graph if n.op == Q and n.inputs[0] == nm), None)
            sv = float(np.asarray(s.value, np.float64).reshape(-1)[0]) if s is not None else 1.0
            zt = code_type.get(s.name) if s is not None else None
            width = (_span(zt) if zt and dtypes.get(zt).is_integer else 256) * sv
            x = rng.uniform(-0.6 * width, 0.6 * width, size=shape)
            if rng.random() < 0.4:  # exact ties of the quotient: (k + 1/2)·s
                x = (np.round(x / sv) + 0.5) * sv
            new[nm] = replace(a, value=np.asarray(x, np.float32))
    for nm, a in values.items():  # a bias scale stays s_x·s_w times the template's factor
        if role[nm] == "scale-b":
            new[nm] = _bias_scale(t, values, new, nm)
    _reshape_qparams(t, values, new, shapes)
    graph = tuple(replace(n, attrs=attrs) if n is node else n for n in t.graph)
    inputs = tuple(None if a is None else new.get(a.name, a) for a in t.inputs)
    return replace(t, family=FAMILY, name=name, inputs=inputs, graph=graph, provenance=f"explore-graphs:{t.id}",
                   note="")


def _relate_output(t: Draft, values: dict[str, Arg], new: dict[str, Arg], role: dict[str, str], rng) -> None:
    """Sometimes the output scale is an input scale times 2^k (ties after the float op), or equal to
    it with the same zero point (a pair a runtime may fold), as a tool deriving one from another."""
    outs = [n for n in values if role[n] == "scale-out"]
    ins = [n for n in values if role[n] == "scale-in" and np.size(values[n].value) == 1]
    if not outs or not ins or rng.random() < 0.55:
        return
    so, si = outs[-1], ins[int(rng.integers(len(ins)))]
    if np.size(values[so].value) != 1:
        return
    k = 0 if rng.random() < 0.3 else int(rng.integers(-2, 4))
    a = values[so]
    new[so] = replace(a, value=_fl(a.type, np.asarray(new[si].value, np.float64).reshape(a.value.shape) * 2.0**k))
    if k == 0:
        zo = next((n.inputs[2] for n in t.graph if n.op == Q and n.inputs[1] == so and len(n.inputs) > 2), None)
        zi = next((n.inputs[2] for n in t.graph if n.inputs[1:2] == (si,) and len(n.inputs) > 2), None)
        if zo in new and zi in new and new[zo].type == new[zi].type:
            new[zo] = replace(new[zo], value=new[zi].value.copy())


def _bias_scale(t: Draft, values: dict[str, Arg], new: dict[str, Arg], nm: str) -> Arg:
    a = values[nm]
    dq = [n for n in t.graph if n.op == DQ]
    sx = next((n.inputs[1] for n in dq if roles(t).get(n.inputs[0]) == "act"), None)
    sw = next((n.inputs[1] for n in dq if roles(t).get(n.inputs[0]) == "weight"), None)
    if sx is None or sw is None:
        return a
    old = np.asarray(values[sx].value, np.float64) * np.asarray(values[sw].value, np.float64).reshape(-1)
    cur = np.asarray(new[sx].value, np.float64) * np.asarray(new[sw].value, np.float64).reshape(-1)
    factor = np.asarray(a.value, np.float64).reshape(-1) / np.broadcast_to(old, np.shape(a.value.reshape(-1)))
    return replace(a, value=_fl(a.type, (np.broadcast_to(cur, factor.shape) * factor).reshape(a.value.shape)))


def _reshape_qparams(t: Draft, values: dict[str, Arg], new: dict[str, Arg], shapes: dict[str, tuple[int, ...]]) -> None:
    """Per-axis parameters follow a weight whose shape changed (a transposed Gemm weight's axis is not
    drawn: its shape keeps its axis)."""
    for n in t.graph:
        if n.op != DQ or n.inputs[0] not in shapes:
            continue
        axis = n.attrs.get("axis", 1)
        shape = shapes[n.inputs[0]]
        for i in n.inputs[1:3]:
            if i in new and np.ndim(new[i].value) == 1 and "block_size" not in n.attrs:
                want = shape[axis]
                if new[i].value.shape[0] != want:
                    v = np.resize(new[i].value, (want,))
                    new[i] = replace(new[i], value=v.astype(new[i].value.dtype))


def draw(rng: np.random.Generator, name: str, ops: tuple[str, ...] | None = None,
         narrow: bool = False) -> Draft:
    """One random graph: a pattern (uniform over the patterns, or over ``ops``), one of its
    templates, drawn again."""
    table = templates()
    names = [o for o in table if ops is None or o in ops]
    if not names:
        raise ValueError(f"no pattern among {ops}; known: {', '.join(table)}")
    op = names[int(rng.integers(len(names)))]
    group = table[op]
    return redraw(group[int(rng.integers(len(group)))], rng, name, narrow)


__all__ = ["ATTRIBUTES", "FAMILY", "central", "draw", "redraw", "roles", "templates"]

"""The helpers every QDQ pattern module draws its drafts with (qconform/generators/patterns.py and
its patterns_<group>.py modules): seeded draws, scales as a quantisation tool makes them, codes,
Q/DQ nodes, the one-input, two-input and weighted pattern shapes. A module of its own so the group
modules and patterns.py's registry import it without importing each other."""
from __future__ import annotations

import hashlib

import numpy as np

from qconform import dtypes
from qconform.case import Arg, Draft, Node, PATTERN_DOMAIN
from qconform.generators.common import array


#: The opset patterns are built in: 21 admits 16-bit and 4-bit types and blocked weights, and is the
#: newest opset every fusing runtime in scope loads; legacy 8-bit models are opset 13.
OPSET, LEGACY = 21, 13


F32 = "float32"


def _rng(*key: object) -> np.random.Generator:
    seed = int.from_bytes(hashlib.sha256("|".join(map(str, key)).encode()).digest()[:8], "little")
    return np.random.default_rng(seed)


def _scale(rng: np.random.Generator, lo: float = 2.0**-9, hi: float = 2.0**-3) -> float:
    """An arbitrary float32 scale (log-uniform), never a power of two."""
    while True:
        s = float(np.float32(np.exp(rng.uniform(np.log(lo), np.log(hi)))))
        if np.frexp(s)[0] != 0.5:
            return s


def _codes(rng: np.random.Generator, t: str, shape: tuple[int, ...], full: bool = True, within: int = 0) -> np.ndarray:
    """Random codes of t: the full range, half of it (``full=False``), or ``within`` codes either side
    of the middle (16-bit activations of a sum that must stay exact in float32)."""
    et = dtypes.get(t)
    if et.is_float:  # float8: values across the finite range, rounded to the type
        return array(t, rng.uniform(-448, 448, size=shape))
    lo, hi = et.qrange
    if within:
        lo, hi = max(lo, _mid(t) - within), min(hi, _mid(t) + within)
    elif not full:
        lo, hi = lo // 2, hi // 2
    return array(t, rng.integers(lo, hi + 1, size=shape))


#: An activation's codes in a K-term sum: 16-bit ones stay within this many codes of the middle, so
#: K products with 8-bit weights stay below 2^24 units (#qdq-sum-order).
def _act_codes(rng: np.random.Generator, t: str, shape: tuple[int, ...], k: int) -> np.ndarray:
    if dtypes.get(t).bits <= 8:
        return _codes(rng, t, shape)
    return _codes(rng, t, shape, within=(1 << 24) // (k * 128 * 8))


def _f32(name: str, value, shape=None) -> Arg:
    return Arg(name, F32, np.asarray(value, np.float32).reshape(shape if shape is not None else np.shape(value)),
               initializer=True)


def _zp(name: str, t: str, value, shape=()) -> Arg:
    return Arg(name, t, array(t, np.full(shape, value) if np.ndim(value) == 0 else value), initializer=True)


def _mid(t: str) -> int:
    et = dtypes.get(t)
    if et.is_float:
        return 0
    lo, hi = et.qrange
    return (lo + hi + 1) // 2 if not et.signed else 0


def _dq(x: str, s: str, zp: str, out: str, **attrs) -> Node:
    return Node("DequantizeLinear", (x, s, zp), (out,), attrs)


def _q(x: str, s: str, zp: str, out: str, **attrs) -> Node:
    return Node("QuantizeLinear", (x, s, zp), (out,), attrs)


def _draft(op: str, types: str, family: str, name: str, inputs: list[Arg], nodes: list[Node], clause: str,
           opset: int = OPSET, note: str = "") -> Draft:
    return Draft(op=op, opset=opset, types=types, family=family, name=name, inputs=tuple(inputs),
                 domain=PATTERN_DOMAIN, clause=clause, graph=tuple(nodes), note=note,
                 provenance=f"patterns:{family}")


def _pow2(k: int) -> float:
    return float(2.0**k)


ACTS = ("uint8", "int8", "uint16", "int16")


def _unary(op: str, family: str, name: str, t: str, x: np.ndarray, sx: float, zx: int, sy: float, zy: int,
           extra_inputs: list[Arg] = (), op_inputs: tuple[str, ...] = (), attrs: dict | None = None,
           clause: str = "qdq-graph", out_t: str | None = None, opset: int = OPSET) -> Draft:
    out_t = out_t or t
    nodes = [_dq("x", "sx", "zx", "f"), Node(op, ("f", *op_inputs), ("g",), attrs or {}),
             _q("g", "sy", "zy", "y")]
    inputs = [Arg("x", t, x), _f32("sx", sx), _zp("zx", t, zx), *extra_inputs, _f32("sy", sy), _zp("zy", out_t, zy)]
    return _draft(op, f"{t}-{out_t}", family, name, inputs, nodes, clause, opset)


def _binary(op: str, family: str, name: str, ta: str, tb: str, ty: str, a, b, sa, za, sb, zb, sy, zy,
            attrs=None, opset: int = OPSET) -> Draft:
    nodes = [_dq("a", "sa", "za", "fa"), _dq("b", "sb", "zb", "fb"), Node(op, ("fa", "fb"), ("g",), attrs or {}),
             _q("g", "sy", "zy", "y")]
    inputs = [Arg("a", ta, a), Arg("b", tb, b), _f32("sa", sa), _zp("za", ta, za), _f32("sb", sb), _zp("zb", tb, zb),
              _f32("sy", sy), _zp("zy", ty, zy)]
    return _draft(op, f"{ta}-{tb}-{ty}", family, name, inputs, nodes, "qdq-graph", opset)


WEIGHTS = {"uint8": ("uint8", "int8"), "int8": ("int8",), "uint16": ("uint8", "int8"), "int16": ("int8",)}


FOUR_BIT = ("int4", "uint4")


def _weight_args(rng, tw: str, shape, granularity: str, axis: int, block: int = 0) -> tuple[list[Arg], dict]:
    """Weight codes (full range) with power-of-two scales per tensor, per output channel or per
    block, zero point 0 (symmetric, as quantisation tools emit weights) or the mid code (unsigned)."""
    w = _codes(rng, tw, shape)
    zp = 0 if dtypes.get(tw).signed else _mid(tw)
    if granularity == "per-tensor":
        sshape, attrs = (), {}
    elif granularity == "per-axis":
        sshape, attrs = (shape[axis],), {"axis": axis}
    else:
        sshape = tuple(-(-d // block) if i == axis else d for i, d in enumerate(shape))  # a last, shorter block
        attrs = {"axis": axis, "block_size": block}
    scales = np.float32(2.0 ** rng.integers(-9, -5, size=sshape)) if sshape else np.float32(2.0**-7)
    return [Arg("w", tw, w, initializer=True), _f32("sw", scales, sshape),
            _zp("zw", tw, np.full(sshape, zp) if sshape else zp, sshape)], attrs


def _with_weights(op: str, family: str, name: str, ta: str, tw: str, x: np.ndarray, wshape, granularity: str,
                  axis: int, block: int, rng, sy: float, zy: int, attrs=None, bias: bool = False,
                  bias_scale_factor: float = 1.0, opset: int = OPSET) -> Draft:
    sx = _pow2(-4)
    wargs, wattrs = _weight_args(rng, tw, wshape, granularity, axis, block)
    nodes = [_dq("x", "sx", "zx", "fx"), _dq("w", "sw", "zw", "fw", **wattrs)]
    inputs = [Arg("x", ta, x), _f32("sx", sx), _zp("zx", ta, _mid(ta)), *wargs]
    op_ins = ["fx", "fw"]
    if bias:
        n = wshape[0] if op == "Conv" else wshape[1]
        sw = wargs[1].value.astype(np.float64)
        per_channel = sw if sw.ndim == 1 else np.full(n, float(sw))
        bscale = (sx * per_channel * bias_scale_factor).astype(np.float32)
        codes = rng.integers(-2**12, 2**12, size=n)
        inputs += [Arg("bias", "int32", codes.astype(np.int32), initializer=True), _f32("sb", bscale, (n,)),
                   Arg("zb", "int32", np.zeros(n, np.int32), initializer=True)]
        nodes.append(_dq("bias", "sb", "zb", "fb", axis=0))
        op_ins.append("fb")
    nodes += [Node(op, tuple(op_ins), ("g",), attrs or {}), _q("g", "sy", "zy", "y")]
    inputs += [_f32("sy", sy), _zp("zy", ta, zy)]
    return _draft(op, f"{ta}-{tw}-{ta}", family, name, inputs, nodes, "qdq-sum-order", opset)


def _sy_for(rng, ta: str, k: int, sw_hint: float = 2.0**-7) -> float:
    """An output scale that keeps most results in range: about the accumulation's spread."""
    span = dtypes.get(ta).qrange[1] - dtypes.get(ta).qrange[0]
    return float(np.float32(_scale(rng, 0.5, 2.0) * 2.0**-4 * sw_hint * 128 * np.sqrt(k) * 2 * 255 / span))


__all__ = ["ACTS", "F32", "FOUR_BIT", "LEGACY", "OPSET", "WEIGHTS", "_act_codes", "_binary", "_codes", "_dq", "_draft", "_f32", "_mid", "_pow2", "_q", "_rng", "_scale", "_sy_for", "_unary", "_weight_args", "_with_weights", "_zp"]

"""QLinearConv-10, ConvInteger-10 and MatMulInteger-10 families (qconform/docs/semantics.md#qlconv-formula,
#integer-accumulation), over every type combination of their schemas.

- ``basic``: an ordinary case and ONNX's own node tests (onnx/backend/test/case/node/*.py);
- ``attributes`` (the convolutions): every attribute that changes the arithmetic — strides, pads and
  each ``auto_pad`` mode, dilations, ``group`` up to depthwise, kernel shapes 1×1 to 7×7, 1-D, 2-D
  and 3-D, batches (Conv's text);
- ``geometry`` (QLinearConv): those attributes crossed — kernels 1 to 7 × strides 1 to 3 × dilations
  1 and 2 × three paddings, the factorised kernels (1×7, 7×1, …), depthwise over channel counts
  1 … 65, 1-D and 3-D sweeps — where kernels specialise (pointwise, depthwise, im2col paths);
- ``per-channel``: w's scale and zero point per output channel ("or 1-D tensors (per output channel)");
  MatMulInteger's per-row a and per-column b zero points;
- ``bias``: B at the int32 extremes and at ±2^24 ("Bias must be quantized using scale = x_scale * w_scale");
- ``ties``: power-of-two multipliers with accumulators placing the exact result on k + 1/2 over the
  output range, odd and even output zero points (#qlconv-requant: round half to even);
- ``saturation``: results beyond both ends of y's type;
- ``accumulator``: sums past 2^24 (float32 loses bits) and past 2^31 (the int32 accumulator wraps:
  "The accumulation may overflow if and only if in 32 bits");
- ``tails``: channel and K counts that are not multiples of 4, 8, 16, 32 or 64 (vector-loop tails);
- ``zero-points``: zero points at both ends of each type, and padding where x's zero point is not 0
  (#qlconv-padding);
- ``readings`` (QLinearConv): a multiplier 1/6 whose float32 value moves exact ties;
- ``random``: seeded draws of every parameter, scales as a quantizer calibrates them.

QLinearConv's depth goes where quantized models are: every family is drafted on the three formats onnxruntime's quantizer documents ("ONNX
Runtime quantization on CPU can run U8U8, U8S8 and S8S8", docs/performance/model-optimizations/
quantization.md), y in the activation's type as its QOperator format writes it; the schema's five
other combinations get ``basic`` and ``saturation`` only, the families whose arithmetic turns on y's
type (semantics.md#qlconv-formula says so).

Module contract (read by the coverage table): ``FAMILIES``, ``applies(spec, combo, family=None)``,
``generate(family=None)``, ``entries()``.
"""
from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from qconform import dtypes
from qconform.case import Draft
from qconform.declarations import operators
from qconform.dtypes import ElemType
from qconform.generators.common import ComboFamilies, draft, family_entries
from qconform.oracle.integer import conv_sums
from qconform.schemas import OpSpec

OPS = (operators.QLINEAR_CONV, operators.CONV_INTEGER, operators.MATMUL_INTEGER)
FAMILIES = ("basic", "attributes", "geometry", "per-channel", "bias", "ties", "saturation", "accumulator",
            "tails", "zero-points", "readings", "random")
_CONV_ONLY = {"attributes", "geometry", "bias"}
_REQUANT_ONLY = {"ties", "readings", "bias", "geometry"}
#: QLinearConv's (x, w) formats onnxruntime's quantizer documents, y of x's type: every family.
_DEPLOYED = {("uint8", "uint8"), ("uint8", "int8"), ("int8", "int8")}
#: The families QLinearConv's other type combinations get.
_EVERY_COMBINATION = {"basic", "saturation"}


@dataclass(frozen=True)
class Combo:
    spec: OpSpec
    types: Mapping[str, str]

    @property
    def conv(self) -> bool:
        return operators.get(self.spec.domain, self.spec.op).contraction == "conv"

    @property
    def requant(self) -> bool:
        return operators.get(self.spec.domain, self.spec.op).kind.value == "requantize"

    @property
    def deployed(self) -> bool:
        """A format quantizers write (every combination of the ops without a requantisation)."""
        t = self.types
        return not self.requant or (t["T1"] == t["T3"] and (t["T1"], t["T2"]) in _DEPLOYED)

    @property
    def x(self) -> ElemType:
        return dtypes.get(self.types["T1"])

    @property
    def w(self) -> ElemType:
        return dtypes.get(self.types["T2"])

    @property
    def y(self) -> ElemType:
        return dtypes.get(self.types["T3"])

    def names(self) -> tuple[str, str, str, str]:
        """(data, weight, data's zero point, weight's zero point) input names."""
        return ("x", "w", "x_zero_point", "w_zero_point") if self.conv else ("A", "B", "a_zero_point", "b_zero_point")

    def rng(self, family: str, name: str) -> np.random.Generator:
        seed = hashlib.sha256(f"{self.spec.key}/{dict(self.types)}/{family}/{name}".encode()).digest()
        return np.random.default_rng(int.from_bytes(seed[:8], "little"))

    def draft(self, family: str, name: str, values: Mapping[str, Any], attrs: Mapping[str, Any] | None = None,
              clause: str = "", note: str = "", provenance: str = "") -> Draft:
        return draft(self.spec, self.types, family, name, values, attrs or {}, clause=clause, note=note,
                     provenance=provenance)


def _mid(t: ElemType) -> int:
    lo, hi = t.qrange
    return int((lo + hi + 1) // 2)


def _codes(t: ElemType, shape, rng: np.random.Generator) -> np.ndarray:
    lo, hi = t.qrange
    return rng.integers(int(lo), int(hi) + 1, shape).astype(t.dtype)


def _pow2_at_least(v: float) -> float:
    return float(2.0 ** int(np.ceil(np.log2(max(v, 1.0)))))


class _Case:
    """One draft's values being put together: the data, the weights, the zero points, the
    attributes; ``values`` derives the scales (power-of-two multipliers, every reading agreeing,
    unless ``calibrated``) from the exact sums."""

    def __init__(self, c: Combo, x: np.ndarray, w: np.ndarray, attrs: Mapping[str, Any] | None = None,
                 x_zp: Any = 0, w_zp: Any = 0, bias: np.ndarray | None = None):
        self.c, self.x, self.w, self.attrs = c, x, w, dict(attrs or {})
        self.x_zp, self.w_zp, self.bias = np.asarray(x_zp), np.asarray(w_zp), bias

    def sums(self) -> np.ndarray:
        if self.c.conv:
            acc = conv_sums(self.x, self.x_zp, self.w, self.w_zp, self.attrs)
            if self.bias is not None:
                acc = acc + self.bias.astype(np.int64).reshape((1, -1) + (1,) * (acc.ndim - 2))
            return acc
        return np.matmul(self.x.astype(np.int64) - self.x_zp.astype(np.int64).reshape(()),
                         self.w.astype(np.int64) - self.w_zp.astype(np.int64))

    def values(self, multiplier: float | None = None, y_zp: Any = None, calibrated: bool = False,
               w_scale: np.ndarray | None = None) -> dict[str, Any]:
        c = self.c
        dn, wn, xzn, wzn = c.names()
        v: dict[str, Any] = {dn: self.x, wn: self.w, xzn: self.x_zp.astype(c.x.dtype),
                             wzn: self.w_zp.astype(c.w.dtype)}
        if not c.requant:
            return v
        zy = _mid(c.y) if y_zp is None else y_zp
        span = float(c.y.qrange[1] - c.y.qrange[0]) / 2
        big = float(np.max(np.abs(self.sums()), initial=1))
        if calibrated:  # as a quantizer would: ranges observed, scales not powers of two
            rng = c.rng("scales", str(self.x.shape))
            xs = np.float32(rng.uniform(0.002, 0.05))
            ws = (w_scale if w_scale is not None else np.float32(rng.uniform(0.001, 0.02)))
            ys = np.float32(xs * float(np.max(ws)) * big / span * rng.uniform(0.7, 1.3))
            v.update(x_scale=xs, w_scale=ws, y_scale=ys)
        else:
            m = multiplier if multiplier is not None else 1.0 / _pow2_at_least(big / span)
            ws = np.float32(1.0) if w_scale is None else w_scale
            v.update(x_scale=np.float32(1.0), w_scale=ws, y_scale=np.float32(float(np.max(ws)) / m))
        v.update(y_zero_point=np.asarray(zy).astype(c.y.dtype), B=self.bias)
        if np.ndim(v["w_scale"]) == 0 and np.ndim(self.w_zp) == 1:  # a scale and zero point pair share a shape
            v["w_scale"] = np.full(self.w_zp.shape, v["w_scale"], np.float32)
        elif np.ndim(v["w_scale"]) == 1 and np.ndim(self.w_zp) == 0:
            v[wzn] = np.full(np.shape(v["w_scale"]), self.w_zp).astype(c.w.dtype)
        return v


# -- shapes ----------------------------------------------------------------------------------------
def _conv_operands(c: Combo, rng, n=1, ch=3, m=4, spatial=(6, 6), kernel=(3, 3), group=1):
    x = _codes(c.x, (n, ch) + tuple(spatial), rng)
    w = _codes(c.w, (m, ch // group) + tuple(kernel), rng)
    return x, w


def _ordinary(c: Combo, family: str, name: str, note: str, attrs=None, calibrated=True, **shape) -> Draft:
    rng = c.rng(family, name)
    if c.conv:
        x, w = _conv_operands(c, rng, **shape)
    else:
        x, w = _codes(c.x, shape.get("a", (3, 5)), rng), _codes(c.w, shape.get("b", (5, 4)), rng)
    case = _Case(c, x, w, attrs, _mid(c.x), _mid(c.w) if not c.conv or not c.requant else 0)
    return c.draft(family, name, case.values(calibrated=calibrated), attrs, note=note)


# -- families --------------------------------------------------------------------------------------
#: Each operator's node tests: onnx.backend.test.case.node.<module>.<class>.export*
_NODE_TESTS = {o.op: (o.op.lower(), o.op) for o in OPS}


def _node_tests(c: Combo) -> Iterator[Draft]:
    """ONNX's own node tests of the op, run through its ``expect`` captured (their values exactly)."""
    module, cls = _NODE_TESTS[c.spec.op]
    mod = importlib.import_module(f"onnx.backend.test.case.node.{module}")
    got: list[tuple[Any, list, str]] = []
    saved = mod.expect
    mod.expect = lambda node, inputs, outputs, name, **kw: got.append((node, inputs, name))
    try:
        for attr in sorted(vars(getattr(mod, cls))):
            if attr.startswith("export"):
                getattr(getattr(mod, cls), attr)()
    finally:
        mod.expect = saved
    for node, inputs, name in got:
        vals = {f.name: np.asarray(v) for f, v in zip(c.spec.inputs, inputs)}
        types = {f.name: c.spec.type_params[f.type_param] for f in c.spec.inputs}
        if any(vals[k].dtype != dtypes.get(types[k][0] if len(types[k]) == 1 else c.types[f.type_param]).dtype
               for f in c.spec.inputs if (k := f.name) in vals):
            continue  # another type combination's test
        attrs = {a.name: _attr_value(a) for a in node.attribute}
        yield c.draft("basic", f"onnx-node-{name}", vals, attrs, note="ONNX node test",
                      provenance=f"onnx/backend/test/case/node/{module}.py:{name}")


def _attr_value(a) -> Any:
    from onnx import helper
    v = helper.get_attribute_value(a)
    return v.decode() if isinstance(v, bytes) else (list(v) if isinstance(v, (list, tuple)) else v)


def _basic(c: Combo) -> Iterator[Draft]:
    yield _ordinary(c, "basic", "ordinary", "ordinary values, calibrated scales")
    yield _ordinary(c, "basic", "ordinary-pow2", "ordinary values, a power-of-two multiplier", calibrated=False)
    yield from _node_tests(c)


_ATTRS: list[tuple[str, dict, dict]] = [  # (name, attributes, shape)
    ("strides-2", {"strides": [2, 2]}, {"spatial": (7, 7)}),
    ("strides-3-1", {"strides": [3, 1]}, {"spatial": (8, 5)}),
    ("pads-1", {"pads": [1, 1, 1, 1]}, {}),
    ("pads-asymmetric", {"pads": [0, 1, 2, 0]}, {}),
    ("pads-3", {"pads": [3, 3, 3, 3]}, {"spatial": (4, 4)}),
    ("pads-strides", {"pads": [1, 2, 1, 0], "strides": [2, 3]}, {"spatial": (7, 8)}),
    ("auto-same-upper", {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, {"spatial": (6, 7), "kernel": (2, 3)}),
    ("auto-same-lower", {"auto_pad": "SAME_LOWER", "strides": [2, 2]}, {"spatial": (6, 7), "kernel": (2, 3)}),
    ("auto-same-upper-even-kernel", {"auto_pad": "SAME_UPPER"}, {"kernel": (2, 2)}),
    ("auto-same-lower-even-kernel", {"auto_pad": "SAME_LOWER"}, {"kernel": (2, 2)}),
    ("auto-valid", {"auto_pad": "VALID", "strides": [2, 1]}, {"spatial": (7, 6)}),
    ("auto-notset", {"auto_pad": "NOTSET", "pads": [1, 0, 1, 0]}, {}),
    ("dilations-2", {"dilations": [2, 2]}, {"spatial": (7, 7)}),
    ("dilations-1-3", {"dilations": [1, 3], "pads": [0, 2, 0, 2]}, {"spatial": (5, 7)}),
    ("group-2", {"group": 2}, {"ch": 4, "m": 4, "group": 2}),
    ("group-3", {"group": 3}, {"ch": 6, "m": 9, "group": 3}),
    ("depthwise", {"group": 8}, {"ch": 8, "m": 8, "group": 8}),
    ("depthwise-multiplier-2", {"group": 4, "pads": [1, 1, 1, 1]}, {"ch": 4, "m": 8, "group": 4}),
    ("kernel-1x1", {}, {"kernel": (1, 1)}),
    ("kernel-2x2", {}, {"kernel": (2, 2)}),
    ("kernel-5x5", {"pads": [2, 2, 2, 2]}, {"kernel": (5, 5)}),
    ("kernel-7x7", {"pads": [3, 3, 3, 3], "strides": [2, 2]}, {"kernel": (7, 7), "spatial": (9, 9), "ch": 2}),
    ("kernel-1x3", {}, {"kernel": (1, 3)}),
    ("kernel-3x1", {"kernel_shape": [3, 1]}, {"kernel": (3, 1)}),
    ("conv-1d", {}, {"spatial": (9,), "kernel": (3,)}),
    ("conv-1d-strides-pads", {"strides": [2], "pads": [1, 2], "dilations": [2]}, {"spatial": (11,), "kernel": (3,)}),
    ("conv-3d", {}, {"spatial": (4, 4, 4), "kernel": (3, 3, 3), "ch": 2, "m": 3}),
    ("conv-3d-strides-pads", {"strides": [2, 1, 2], "pads": [1, 0, 1, 1, 0, 1]},
     {"spatial": (5, 4, 5), "kernel": (3, 2, 3), "ch": 2, "m": 2}),
    ("batch-3", {}, {"n": 3}),
]


def _attributes(c: Combo) -> Iterator[Draft]:
    for name, attrs, shape in _ATTRS:
        yield _ordinary(c, "attributes", name, f"Conv attributes {attrs or 'defaults'}", attrs, calibrated=False,
                        **shape)


def _geometry(c: Combo) -> Iterator[Draft]:
    """Conv's attributes crossed, explicit pads only (each ``auto_pad`` mode is in ``attributes``)."""
    for k in range(1, 8):
        for s in (1, 2, 3):
            for d in (1, 2):
                ext = (k - 1) * d + 1
                half = max(1, ext // 2)
                for pname, pads in (("pads-0", [0, 0, 0, 0]), (f"pads-{half}", [half] * 4),
                                    ("pads-asymmetric", [1, 2, 0, 1])):
                    attrs = {"kernel_shape": [k, k], "strides": [s, s], "dilations": [d, d], "pads": pads}
                    side = ext + s + 1
                    yield _ordinary(c, "geometry", f"k{k}-s{s}-d{d}-{pname}", f"Conv attributes {attrs}", attrs,
                                    calibrated=False, kernel=(k, k), spatial=(side, side + 1))
    for kh, kw in ((1, 3), (3, 1), (1, 5), (5, 1), (1, 7), (7, 1), (2, 3), (3, 2)):  # Inception's factorised kernels
        for s in (1, 2):
            for d in (1, 2):
                attrs = {"strides": [s, s], "dilations": [d, d], "pads": [kh // 2, kw // 2] * 2}
                yield _ordinary(c, "geometry", f"k{kh}x{kw}-s{s}-d{d}", f"Conv attributes {attrs}", attrs,
                                calibrated=False, kernel=(kh, kw),
                                spatial=((kh - 1) * d + 2 + s, (kw - 1) * d + 3 + s))
    for ch in (1, 3, 7, 8, 9, 15, 16, 17, 24, 25, 31, 32, 33, 63, 64, 65):
        for k, s in ((3, 1), (5, 2)):
            attrs = {"group": ch, "strides": [s, s], "pads": [k // 2] * 4}
            yield _ordinary(c, "geometry", f"depthwise-c{ch}-k{k}", f"depthwise, C = M = {ch}", attrs,
                            calibrated=False, ch=ch, m=ch, group=ch, kernel=(k, k), spatial=(5, 5))
    for k in (1, 2, 3, 5, 7):
        for s in (1, 2):
            for d in (1, 2):
                attrs = {"strides": [s], "dilations": [d], "pads": [1, 0]}
                yield _ordinary(c, "geometry", f"1d-k{k}-s{s}-d{d}", f"1-D Conv attributes {attrs}", attrs,
                                calibrated=False, kernel=(k,), spatial=((k - 1) * d + 2 + s,))
    for k in (1, 2, 3):
        for s in (1, 2):
            attrs = {"strides": [s] * 3, "pads": [1, 0, 1, 0, 1, 1]}
            yield _ordinary(c, "geometry", f"3d-k{k}-s{s}", f"3-D Conv attributes {attrs}", attrs, calibrated=False,
                            ch=2, m=3, kernel=(k,) * 3, spatial=(k + s + 1,) * 3)


def _per_channel(c: Combo) -> Iterator[Draft]:
    rng = c.rng("per-channel", "")
    if not c.conv:
        a, b = _codes(c.x, (4, 6), rng), _codes(c.w, (6, 5), rng)
        for name, azp, bzp in (("per-row-a", _codes(c.x, (4,), rng), _mid(c.w)),
                               ("per-column-b", _mid(c.x), _codes(c.w, (5,), rng)),
                               ("per-row-and-column", _codes(c.x, (4,), rng), _codes(c.w, (5,), rng))):
            yield c.draft("per-channel", name, _Case(c, a, b, None, azp, bzp).values(), note=name)
        a3, b3 = _codes(c.x, (2, 3, 4), rng), _codes(c.w, (2, 4, 3), rng)
        yield c.draft("per-channel", "batched-per-row-column",
                      _Case(c, a3, b3, None, _codes(c.x, (2, 3, 1), rng), _codes(c.w, (2, 1, 3), rng)).values(),
                      note="[D, M, 1] and [D, 1, N] zero points")
        return
    for name, group, ch, m in (("per-channel", 1, 3, 5), ("per-channel-depthwise", 4, 4, 4)):
        x, w = _conv_operands(c, rng, ch=ch, m=m, group=group)
        attrs = {"group": group, "pads": [1, 1, 1, 1]}
        ws = (2.0 ** -rng.integers(0, 4, m)).astype(np.float32)  # powers of two: normative
        yield c.draft("per-channel", f"{name}-scale", _Case(c, x, w, attrs, _mid(c.x), np.zeros(m, int)).values(
            w_scale=ws) if c.requant else _Case(c, x, w, attrs, _mid(c.x), np.zeros(m, int)).values(),
            attrs, note="w scale per output channel")
        zps = _codes(c.w, (m,), rng)
        case = _Case(c, x, w, attrs, _mid(c.x), zps)
        yield c.draft("per-channel", f"{name}-zero-point", case.values(w_scale=ws) if c.requant else case.values(),
                      attrs, note="w zero point per output channel")


def _bias(c: Combo) -> Iterator[Draft]:
    rng = c.rng("bias", "")
    x, w = _conv_operands(c, rng, m=4, kernel=(1, 1), spatial=(3, 3))
    lo, hi = -(2 ** 31), 2 ** 31 - 1
    for name, b in (("int32-extremes", [hi, lo, hi - 70000, lo + 70000]),
                    ("around-2^24", [2 ** 24, -(2 ** 24), 2 ** 24 + 1, -(2 ** 24) - 3]),
                    ("ordinary", rng.integers(-3000, 3000, 4))):
        bias = np.asarray(b, np.int64).astype(np.int32)
        case = _Case(c, x, w, None, _mid(c.x), 0, bias)
        yield c.draft("bias", name, case.values(), note=f"B = {bias.tolist()}")


def _one_by_one(c: Combo, diffs: np.ndarray, wdiff: int, x_zp: int) -> tuple[np.ndarray, np.ndarray, int]:
    """A 1×1 convolution (or [1, K]·[K, 1] product) whose sums are ``diffs · wdiff``: x codes from the
    differences and x's zero point, one weight code, the weight's zero point."""
    x = (np.asarray(diffs) + x_zp).astype(c.x.dtype)
    w_zp = 0 if c.w.signed or wdiff >= 0 else 255
    wcode = np.asarray(wdiff + w_zp).astype(c.w.dtype)
    if c.conv:
        return x.reshape(1, 1, 1, -1), wcode.reshape(1, 1, 1, 1), w_zp
    return x.reshape(-1, 1), wcode.reshape(1, 1), w_zp


def _ties(c: Combo) -> Iterator[Draft]:
    lo, hi = (int(v) for v in c.x.qrange)
    x_zp = _mid(c.x)
    diffs = np.arange(lo, hi + 1) - x_zp
    for wdiff in (1, -1):
        x, w, w_zp = _one_by_one(c, diffs, wdiff, x_zp)
        for zy in (_mid(c.y), _mid(c.y) + 1):
            case = _Case(c, x, w, None, x_zp, w_zp)
            yield c.draft("ties", f"halves-w{wdiff:+d}-y-zero-point-{'odd' if zy % 2 else 'even'}",
                          case.values(0.5, zy), note="multiplier 1/2: every odd sum is a tie k + 1/2")
    rng = c.rng("ties", "eighths")
    x, w = _conv_operands(c, rng) if c.conv else (_codes(c.x, (4, 9), rng), _codes(c.w, (9, 3), rng))
    case = _Case(c, x, w, None, x_zp, 0 if c.conv else _mid(c.w))
    big = float(np.max(np.abs(case.sums()), initial=1))
    m = 1.0 / _pow2_at_least(big / 100)
    yield c.draft("ties", "power-of-two", case.values(m), note="a power-of-two multiplier: sums on ties are exact")


def _saturation(c: Combo) -> Iterator[Draft]:
    lo, hi = (int(v) for v in c.x.qrange)
    for x_zp in (lo, hi):
        diffs = np.arange(lo, hi + 1) - x_zp
        for wdiff in (1, -1, 2):
            x, w, w_zp = _one_by_one(c, diffs, wdiff, x_zp)
            case = _Case(c, x, w, None, x_zp, w_zp)
            if c.requant:
                for zy in c.y.qrange:
                    yield c.draft("saturation", f"x-zp-{x_zp}-w{wdiff:+d}-y-zp-{int(zy)}", case.values(1.0, int(zy)),
                                  note="multiplier 1: results beyond both ends of y")
            else:
                yield c.draft("saturation", f"x-zp-{x_zp}-w{wdiff:+d}", case.values(), note="extreme differences")


def _accumulator(c: Combo) -> Iterator[Draft]:
    lo, hi = (int(v) for v in c.x.qrange)
    wlo, whi = (int(v) for v in c.w.qrange)
    for name, k, m in (("past-2^24", 300, 2.0 ** -18), ("past-2^31", 33100, 2.0 ** -25)):
        x = np.full(k, hi, c.x.dtype)
        w = np.full(k, whi, c.w.dtype)
        if c.conv:
            x, w = x.reshape(1, k, 1, 1), w.reshape(1, k, 1, 1)
        else:
            x, w = x.reshape(1, k), w.reshape(k, 1)
        case = _Case(c, x, w, None, lo, wlo)
        note = f"K = {k} products of {hi - lo}·{whi - wlo}: the exact sum {int(case.sums().reshape(-1)[0])}"
        yield c.draft("accumulator", name, case.values(m), note=note)


def _tails(c: Combo) -> Iterator[Draft]:
    rng = c.rng("tails", "")
    if c.conv:
        for ch in (1, 3, 5, 7, 9, 15, 17, 31, 33, 63, 65):
            x, w = _conv_operands(c, rng, ch=ch, m=3, spatial=(4, 4), kernel=(1, 1) if ch > 16 else (3, 3))
            yield c.draft("tails", f"channels-{ch}", _Case(c, x, w, None, _mid(c.x), 0).values(), note=f"C = {ch}")
        for m in (1, 5, 17, 33):
            x, w = _conv_operands(c, rng, ch=2, m=m, spatial=(3, 3))
            yield c.draft("tails", f"outputs-{m}", _Case(c, x, w, None, _mid(c.x), 0).values(), note=f"M = {m}")
        return
    for k in (1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 129, 255, 257, 515):
        a, b = _codes(c.x, (3, k), rng), _codes(c.w, (k, 5), rng)
        yield c.draft("tails", f"k-{k}", _Case(c, a, b, None, _mid(c.x), _mid(c.w)).values(), note=f"K = {k}")
    for n in (1, 17, 33):
        a, b = _codes(c.x, (2, 4), rng), _codes(c.w, (4, n), rng)
        yield c.draft("tails", f"n-{n}", _Case(c, a, b, None, _mid(c.x), _mid(c.w)).values(), note=f"N = {n}")
    for name, sa, sb in (("a-1d", (4,), (4, 3)), ("b-1d", (2, 4), (4,)), ("batched", (2, 3, 4), (4, 2)),
                         ("broadcast-batch", (2, 1, 3, 4), (3, 4, 2))):
        a, b = _codes(c.x, sa, rng), _codes(c.w, sb, rng)
        yield c.draft("tails", name, _Case(c, a, b, None, _mid(c.x), _mid(c.w)).values(), note=f"{sa} @ {sb}")


def _zero_points(c: Combo) -> Iterator[Draft]:
    rng = c.rng("zero-points", "")
    for xz in (int(v) for v in c.x.qrange):
        for wz in ((int(v) for v in c.w.qrange) if not (c.requant and c.conv) else (0, int(c.w.qrange[1]))):
            x, w = _conv_operands(c, rng, spatial=(4, 4)) if c.conv else (_codes(c.x, (3, 6), rng),
                                                                          _codes(c.w, (6, 2), rng))
            case = _Case(c, x, w, None, xz, wz)
            yield c.draft("zero-points", f"x-{xz}-w-{wz}", case.values(), note="zero points at the types' ends")
    if c.conv:
        for xz in (int(c.x.qrange[0]), _mid(c.x) + 17, int(c.x.qrange[1])):
            x, w = _conv_operands(c, rng, spatial=(3, 3))
            attrs = {"pads": [2, 1, 1, 2]}
            yield c.draft("zero-points", f"padding-x-zero-point-{xz}", _Case(c, x, w, attrs, xz, 0).values(), attrs,
                          note="padded positions hold x's zero point (contribute 0)")


def _readings(c: Combo) -> Iterator[Draft]:
    lo, hi = (int(v) for v in c.x.qrange)
    x_zp = _mid(c.x)
    diffs = 3 * (np.arange(lo, hi + 1)[::3][:80] - x_zp) // 3
    x, w, w_zp = _one_by_one(c, diffs, 3, x_zp)
    case = _Case(c, x, w, None, x_zp, w_zp)
    v = case.values(1.0 / 6.0, _mid(c.y))
    v.update(x_scale=np.float32(1.0), w_scale=np.float32(0.5), y_scale=np.float32(3.0))
    yield c.draft("readings", "thirds", v, note="multiplier 1/6: exact ties j/2 the float readings may move")


def _random(c: Combo) -> Iterator[Draft]:
    count = 50 if c.requant else (20 if c.conv else 45)
    for i in range(count):
        rng = c.rng("random", str(i))
        if not c.conv:
            k = int(rng.integers(1, 40))
            a, b = _codes(c.x, (int(rng.integers(1, 6)), k), rng), _codes(c.w, (k, int(rng.integers(1, 6))), rng)
            yield c.draft("random", f"draw-{i}", _Case(c, a, b, None, _codes(c.x, (), rng),
                                                        _codes(c.w, (), rng)).values(), note="a seeded draw")
            continue
        nd = int(rng.choice([1, 2, 2, 2, 3]))
        group = int(rng.choice([1, 1, 2, 3]))
        ch, m = group * int(rng.integers(1, 4)), group * int(rng.integers(1, 4))
        kernel = tuple(int(k) for k in rng.integers(1, 4, nd))
        strides = [int(s) for s in rng.integers(1, 3, nd)]
        dil = [int(d) for d in rng.integers(1, 3, nd)]
        pads = [int(p) for p in rng.integers(0, 3, 2 * nd)]
        spatial = tuple(int((k - 1) * d + 1 + rng.integers(0, 4)) for k, d in zip(kernel, dil))
        attrs: dict[str, Any] = {"strides": strides, "dilations": dil, "group": group}
        mode = rng.choice(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])
        if mode == "NOTSET":
            attrs["pads"] = pads
        else:
            attrs["auto_pad"] = str(mode)
        x, w = _conv_operands(c, rng, n=int(rng.integers(1, 3)), ch=ch, m=m, spatial=spatial, kernel=kernel,
                              group=group)
        per = bool(rng.integers(0, 2))
        ws = rng.uniform(0.001, 0.02, m).astype(np.float32) if per else None
        bias = rng.integers(-20000, 20000, m).astype(np.int32) if c.requant and rng.integers(0, 2) else None
        case = _Case(c, x, w, attrs, _codes(c.x, (), rng), 0 if c.requant else _codes(c.w, (), rng), bias)
        yield c.draft("random", f"draw-{i}", case.values(calibrated=True, w_scale=ws), attrs,
                      note="a seeded draw: geometry, zero points and scales as a quantizer calibrates them")


_FAMILY_GEN: dict[str, Callable[[Combo], Iterator[Draft]]] = {
    "basic": _basic, "attributes": _attributes, "geometry": _geometry, "per-channel": _per_channel,
    "bias": _bias, "ties": _ties, "saturation": _saturation, "accumulator": _accumulator, "tails": _tails, "zero-points": _zero_points,
    "readings": _readings, "random": _random,
}


def _applies(c: Combo, family: str) -> bool:
    if not c.deployed and family not in _EVERY_COMBINATION:
        return False
    if family in _CONV_ONLY and not c.conv:
        return False
    return not (family in _REQUANT_ONLY and not c.requant)


_GENERATOR = ComboFamilies((o.key for o in OPS), FAMILIES, Combo, _applies, lambda c, fam: _FAMILY_GEN[fam](c))
combos, applies, generate = _GENERATOR.combos, _GENERATOR.applies, _GENERATOR.generate


def entries() -> dict[str, Callable[[], Iterator[Draft]]]:
    """One ``generators.FAMILIES`` entry per family, keyed "conv:<family>"."""
    return family_entries("conv", FAMILIES, generate)

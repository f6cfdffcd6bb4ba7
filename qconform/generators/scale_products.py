"""MatMulIntegerToFloat-1 and DynamicQuantizeMatMul-1 families (qconform/docs/semantics.md#ms-scale-products):

- ``basic``: per-tensor scales and zero points, every type combination;
- ``per-column``: b_scale and b_zero_point of N elements ("per-column quantization"); MatMulIntegerToFloat's
  a_zero_point of K elements ("the number of columns of input 'A'");
- ``zero-points``: zero points at both ends of each type;
- ``bias``: "1D input tensor, whose dimension is same as B's last dimension";
- ``readings``: scales whose product rounds (the association of acc · a_scale · b_scale matters) and
  biases that a fused multiply-add would round differently;
- ``batch``: A of rank 1 to 4 (numpy.matmul's rules);
- ``dynamic`` (DynamicQuantizeMatMul): A whose dynamic-quantizer codes are exact, and A that rounds;
- ``random``: seeded draws.
"""
from __future__ import annotations

import hashlib
from typing import Any, Callable, Iterator

import numpy as np

from qconform.case import Draft
from qconform.declarations.contrib_blocked import DYNAMIC_QUANTIZE_MATMUL, MATMUL_INTEGER_TO_FLOAT
from qconform.generators.common import ComboFamilies, array, draft, family_entries

FAMILIES = ("basic", "per-column", "zero-points", "bias", "readings", "batch", "dynamic", "random")
_OPS = (MATMUL_INTEGER_TO_FLOAT, DYNAMIC_QUANTIZE_MATMUL)


def _rng(*key: Any) -> np.random.Generator:
    seed = hashlib.sha256("/".join(map(str, ("scale-products",) + key)).encode()).digest()
    return np.random.default_rng(int.from_bytes(seed[:8], "little"))


def _range(t: str) -> tuple[int, int]:
    return (-128, 127) if t == "int8" else (0, 255)


class _Combo:
    def __init__(self, spec, types: dict[str, str]):
        self.spec, self.types = spec, types
        self.dynamic = spec.op == DYNAMIC_QUANTIZE_MATMUL.op
        self.ta = types.get("T1") if not self.dynamic else "float32"
        self.tb = types["T2"]
        self.ts = types.get("T3", "float32") if not self.dynamic else "float32"

    def make(self, family: str, name: str, rng, m: int = 3, k: int = 8, n: int = 5, a_shape: tuple[int, ...] | None = None,
             a_s: float = 0.5, b_s: Any = 0.25, a_zp: Any = None, b_zp: Any = None, bias: Any = None,
             a: np.ndarray | None = None, note: str = "") -> Draft:
        lo, hi = _range(self.tb)
        b = rng.integers(lo, hi + 1, (k, n))
        shape = a_shape if a_shape is not None else (m, k)
        if self.dynamic:
            if a is None:
                codes = rng.integers(0, 256, shape)
                flat = codes.reshape(-1)
                flat[0] = 255
                flat[1:2] = 0
                zp = int(rng.integers(0, 255))
                a = (codes - zp) * a_s
            values = {"A": array("float32", a), "B": array(self.tb, b), "b_scale": array("float32", b_s),
                      "b_zero_point": None if b_zp is None else array(self.tb, b_zp),
                      "bias": None if bias is None else array("float32", bias)}
        else:
            la, ha = _range(self.ta)
            av = rng.integers(la, ha + 1, shape) if a is None else a
            values = {"A": array(self.ta, av), "B": array(self.tb, b), "a_scale": array(self.ts, a_s),
                      "b_scale": array(self.ts, b_s), "a_zero_point": None if a_zp is None else array(self.ta, a_zp),
                      "b_zero_point": None if b_zp is None else array(self.tb, b_zp),
                      "bias": None if bias is None else array(self.ts, bias)}
        return draft(self.spec, self.types, family, name, values, {}, clause="ms-scale-products", note=note)


def _basic(c: _Combo) -> Iterator[Draft]:
    for i, (m, k, n) in enumerate(((1, 1, 1), (3, 8, 5), (4, 33, 17), (2, 64, 3))):
        rng = _rng(c.spec.key, c.types, "basic", i)
        yield c.make("basic", f"{m}x{k}x{n}", rng, m, k, n, note="per-tensor parameters")


def _per_column(c: _Combo) -> Iterator[Draft]:
    for i in range(3):
        rng = _rng(c.spec.key, c.types, "per-column", i)
        lo, hi = _range(c.tb)
        n = 5 + 4 * i
        b_s = np.exp2(rng.integers(-4, 1, n).astype(float)) * rng.choice([1.0, 0.75, 1.25], n)
        yield c.make("per-column", f"b-{n}", rng, n=n, b_s=b_s, b_zp=rng.integers(lo, hi + 1, n),
                     note="b_scale and b_zero_point per column")
        if not c.dynamic and i == 0:  # onnxruntime refuses these ("Per-Channel is not supported yet"): one says so
            la, ha = _range(c.ta)
            yield c.make("per-column", f"a-zero-point-{i}", rng, k=8, a_zp=rng.integers(la, ha + 1, 8),
                         note="a_zero_point per column of A")


def _zero_points(c: _Combo) -> Iterator[Draft]:
    lo, hi = _range(c.tb)
    for i, bz in enumerate((lo, hi, 0)):
        rng = _rng(c.spec.key, c.types, "zero-points", i)
        if c.dynamic:
            yield c.make("zero-points", f"{i}-b{bz}", rng, b_zp=bz, note="b_zero_point at an end of its type")
        else:
            la, ha = _range(c.ta)
            yield c.make("zero-points", f"{i}-a{[la, ha, 0][i]}-b{bz}", rng, a_zp=[la, ha, 0][i], b_zp=bz,
                         note="zero points at the ends of their types")


def _bias(c: _Combo) -> Iterator[Draft]:
    for i, kind in enumerate(("small", "large", "fraction")):
        rng = _rng(c.spec.key, c.types, "bias", i)
        b = {"small": rng.integers(-4, 5, 5).astype(float), "large": np.array([1024.0, -2048, 512, 0, 4096]),
             "fraction": np.array([0.1, -0.3, 1 / 3, 2.7, -0.01])}[kind]
        yield c.make("bias", kind, rng, n=5, bias=b, note=f"bias ({kind})")


def _readings(c: _Combo) -> Iterator[Draft]:
    """Scales whose product is not exact, and biases a fused multiply-add rounds once."""
    pairs = ((0.1, 0.3), (1 / 3, 0.7), (0.017, 0.0041), (0.2, 0.2), (1.1, 0.9))
    for i, (sa, sb) in enumerate(pairs):
        for with_bias in (False, True):
            rng = _rng(c.spec.key, c.types, "readings", i, with_bias)
            bias = rng.normal(0, 3, 5) if with_bias else None
            if c.dynamic:
                yield c.make("readings", f"{i}" + ("-bias" if with_bias else ""), rng, a_s=sa, b_s=sb, bias=bias,
                             note="a product of scales that rounds")
            else:
                yield c.make("readings", f"{i}" + ("-bias" if with_bias else ""), rng, k=16, a_s=sa, b_s=sb,
                             bias=bias, note="a product of scales that rounds")


def _batch(c: _Combo) -> Iterator[Draft]:
    for shape in ((8,), (2, 3, 8), (2, 1, 2, 8)):
        rng = _rng(c.spec.key, c.types, "batch", shape)
        yield c.make("batch", "x".join(map(str, shape)), rng, a_shape=shape, note=f"A of rank {len(shape)}")


def _dynamic(c: _Combo) -> Iterator[Draft]:
    if not c.dynamic:
        return
    for i in range(12):
        rng = _rng(c.spec.key, c.types, "dynamic", i)
        if i < 6:  # codes exact: A = (q - zp) · 2^e spanning 255 steps
            yield c.make("dynamic", f"exact-{i}", rng, a_s=float(2.0 ** -(i + 1)), note="A's codes exact")
        else:
            a = rng.normal(0, 2, (3, 8)) * (i - 5)
            if i % 2:
                a = np.abs(a)
            yield c.make("dynamic", f"rounded-{i}", rng, a=a, note="A rounded by the dynamic quantizer")
    for i in range(8):  # small integers: A·dequantize(B) is exact in float32, the quantized path rounds its
        # scale 5/255 (a range of 5: 255·x/5 = 51·x is never a tie, so the quotient readings agree)
        rng = _rng(c.spec.key, c.types, "dynamic-small", i)
        a = rng.integers(-2, 4, (3, 8)).astype(float)
        a[0, 0], a[0, 1] = 3.0, -2.0
        bias = rng.integers(-8, 9, 5) / 2 if i % 2 else None
        yield c.make("dynamic", f"small-integers-{i}", rng, a=a, bias=bias,
                     note="A of small integers: its scale (max - min) / 255 rounds")


def _random(c: _Combo) -> Iterator[Draft]:
    count = 24 if c.dynamic else 2
    for i in range(count):
        rng = _rng(c.spec.key, c.types, "random", i)
        m, k, n = (int(v) for v in rng.integers(1, 20, 3))
        b_s = float(rng.uniform(0.001, 0.1)) if rng.random() < 0.6 else rng.uniform(0.001, 0.1, n)
        lo, hi = _range(c.tb)
        b_zp = int(rng.integers(lo, hi + 1)) if rng.random() < 0.7 else None
        bias = rng.normal(0, 1, n) if rng.random() < 0.5 else None
        if c.dynamic:
            a = rng.normal(0, float(rng.uniform(0.1, 10)), (m, k))
            yield c.make("random", f"{i:03d}", rng, m, k, n, b_s=b_s, b_zp=b_zp, bias=bias, a=a, note="seeded draw")
        else:
            la, ha = _range(c.ta)
            yield c.make("random", f"{i:03d}", rng, m, k, n, a_s=float(rng.uniform(0.001, 0.1)), b_s=b_s,
                         a_zp=int(rng.integers(la, ha + 1)), b_zp=b_zp, bias=bias, note="seeded draw")


_GEN: dict[str, Callable[[_Combo], Iterator[Draft]]] = {
    "basic": _basic, "per-column": _per_column, "zero-points": _zero_points, "bias": _bias, "readings": _readings,
    "batch": _batch, "dynamic": _dynamic, "random": _random}


def _applies(c: _Combo, family: str) -> bool:
    """int8 A with uint8 B (MatMulIntegerToFloat): every family but ``basic`` skipped, since
    onnxruntime registers no kernel for it and its refusals would outnumber what it judges."""
    if family == "dynamic":
        return c.dynamic
    return family == "basic" or c.dynamic or not (c.ta == "int8" and c.tb == "uint8")


_GENERATOR = ComboFamilies((o.key for o in _OPS), FAMILIES, _Combo, _applies, lambda c, fam: _GEN[fam](c))
combos, applies, generate = _GENERATOR.combos, _GENERATOR.applies, _GENERATOR.generate


def entries() -> dict[str, Callable[[], Iterator[Draft]]]:
    """One ``generators.FAMILIES`` entry per family, keyed "scale-products:<family>"."""
    return family_entries("scale-products", FAMILIES, generate)

"""QLinearMatMul-10 and -21 families (qconform/docs/semantics.md#qlmm-formula .. #qlmm-shapes).

- ``basic``: one ordinary case for every valid type combination (656); every finite value of each
  float8 kind through an identity product; ONNX's own node tests;
- ``ties``: requantised values exactly k + 0.5 (integer y) or exactly between two float8 values,
  over the whole output range, with power-of-two multipliers (every reading agrees);
- ``saturation``: results landing on qmin-1 .. qmin+1 and qmax-1 .. qmax+1 (and far beyond), zero
  points at both ends; float8 outputs at, between and beyond the largest finite value;
- ``accumulator``: accumulators near 2^24 (where float32 stops holding every integer) and beyond
  2^31 (where the int32 accumulator wraps);
- ``k-sizes``: K = 1 and K = 515;
- ``broadcast``: numpy.matmul batch broadcasting and 1-D operands;
- ``zero-points``: zero points at both ends of each type (float8: non-zero and extreme);
- ``per-row-column``: per-row a and per-column b scales and zero points, 2-D and batched, square so
  that a per-column scale applied per row shows;
- ``readings``: placed where the requantisation readings part (ties under exact arithmetic with an
  inexact multiplier; accumulators above 2^24); each case carries every reading, named.

Ordinary cases draw seeded values and keep the first draw on which every reading agrees
(normative), so only ``readings`` and the beyond-2^31 accumulator case carry several readings.

Module contract (read by the coverage table): ``FAMILIES``, ``applies(spec, combo, family=None)``,
``generate(family=None)``."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from qconform import dtypes
from qconform.case import ONNX_DOMAIN, Draft
from qconform.dtypes import ElemType
from qconform.generators.common import draft, specs
from qconform.oracle import floats
from qconform.schemas import OpSpec

OP = "QLinearMatMul"
VERSIONS = (10, 21)
FAMILIES = ("basic", "ties", "saturation", "accumulator", "k-sizes", "broadcast", "zero-points",
            "per-row-column", "readings")


@dataclass(frozen=True)
class Combo:
    spec: OpSpec
    types: Mapping[str, str]

    @property
    def a(self) -> ElemType:
        return dtypes.get(self.types["T1"])

    @property
    def b(self) -> ElemType:
        return dtypes.get(self.types["T2"])

    @property
    def y(self) -> ElemType:
        return dtypes.get(self.types["T3"])

    @property
    def s(self) -> str:
        """The scale type: TS at 21, tensor(float) at 10."""
        return self.types.get("TS", "float32")

    @property
    def integer_inputs(self) -> bool:
        return self.a.is_integer and self.b.is_integer

    @property
    def float8_square(self) -> bool:
        """a, b and y of one float8 kind, float32 scales: the float8 representative of a family."""
        return self.a.is_float and self.a == self.b == self.y and self.s == "float32"

    @property
    def key(self) -> str:
        return f"{self.spec.key}/{'-'.join(self.types[k] for k in self.spec.type_params)}"

    def draft(self, family: str, name: str, values: Mapping[str, Any], clause: str, note: str = "",
              provenance: str = "") -> Draft:
        return draft(self.spec, self.types, family, name, values, clause=clause, note=note, provenance=provenance)


_RULES: dict[str, Callable[[Combo], bool]] = {
    "basic": lambda c: True,
    "ties": lambda c: c.integer_inputs,
    "saturation": lambda c: c.a == c.b,
    "accumulator": lambda c: c.integer_inputs and c.y.is_integer,
    "k-sizes": lambda c: c.integer_inputs or c.float8_square,
    "broadcast": lambda c: (c.integer_inputs and c.y.is_integer and c.s == "float32") or c.float8_square,
    "zero-points": lambda c: c.integer_inputs or c.float8_square,
    "per-row-column": lambda c: c.integer_inputs or c.float8_square,
    "readings": lambda c: c.integer_inputs,
}


def applies(spec: OpSpec, combo: dict[str, str], family: str | None = None) -> bool:
    if spec.domain != ONNX_DOMAIN or spec.op != OP:
        return False
    c = Combo(spec, combo)
    return any(_RULES[f](c) for f in (FAMILIES if family is None else (family,)))


# --------------------------------------------------------------------------------------------
# values
# --------------------------------------------------------------------------------------------
def _rng(c: Combo, family: str, name: str, attempt: int = 0) -> np.random.Generator:
    digest = hashlib.sha256(f"{c.key}/{family}/{name}/{attempt}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _mid(t: ElemType) -> float:
    """An ordinary zero point: mid-range for uint8, a small offset for int8, 0 for float8."""
    if t.is_float:
        return 0.0
    lo, hi = t.qrange
    return float((lo + hi + 1) // 2) if lo == 0 else 3.0


def _finite(t: ElemType, limit: float | None = None) -> np.ndarray:
    vals = floats.all_finite_values(t)
    vals = vals[~((vals == 0) & np.signbit(vals))]
    return vals if limit is None else vals[np.abs(vals) <= limit]


def _draw(t: ElemType, shape, rng: np.random.Generator) -> np.ndarray:
    if t.is_integer:
        lo, hi = t.qrange
        return rng.integers(lo, hi + 1, size=shape).astype(np.float64)
    return rng.choice(_finite(t, 16.0), size=shape)


def _round_to(t: str, v: float) -> float:
    """v rounded to a scale of type t, to three significant digits first (a readable scale)."""
    v = float(f"{v:.3g}")
    return float(floats.decode(floats.encode(np.array([v]), dtypes.get(t), saturate=False), dtypes.get(t))[0])


def _split(target: float, t: ElemType, zp: float, k: int) -> list[float]:
    """k values of t whose differences from zp sum exactly to target (greedy, largest first;
    float8 zero points are 0 here)."""
    out, rem = [], target
    if t.is_integer:
        lo, hi = t.qrange
        for _ in range(k):
            d = min(max(rem, lo - zp), hi - zp)
            out.append(zp + d)
            rem -= d
    else:
        mags = _finite(t)
        mags = mags[mags > 0]
        for _ in range(k):
            fit = mags[mags <= abs(rem)]
            d = float(fit[-1]) if fit.size else 0.0
            d = d if rem >= 0 else -d
            out.append(zp + d)
            rem -= d
    if rem != 0:
        raise ValueError(f"{target} is not a sum of {k} {t.name} differences from {zp}")
    return out


def _weighted_rows(targets: list[int], k: int, dlo: int, dhi: int, w: int) -> list[list[int]]:
    """Integer rows d (k entries in [dlo, dhi]) with w * sum(d[:-1]) + d[-1] = target."""
    rows = []
    for t in targets:
        r = dlo + (t - dlo) % w  # r = t (mod w), r in [dlo, dlo + w)
        if r > dhi:
            raise ValueError(f"remainder {r} of {t} outside [{dlo}, {dhi}]")
        q, row = (t - r) // w, []
        for _ in range(k - 1):
            d = min(max(q, dlo), dhi)
            row.append(d)
            q -= d
        if q:
            raise ValueError(f"{t} needs more than k = {k}")
        rows.append(row + [r])
    return rows


Scales = tuple[float, float, float]


def _pow2_scales(m: int) -> Scales:
    """(a_scale, b_scale, y_scale) with a_scale * b_scale / y_scale = 2^m exactly, in every TS."""
    half = m // 2
    return 2.0 ** half, 2.0 ** (m - half + 1), 2.0


def _column(c: Combo, diffs, b_diffs, zps: tuple[float, float, float], scales: Scales) -> dict[str, Any]:
    """K = 1: a = [N, 1] with the given differences from a_zp, b = [1, len(b_diffs)]."""
    a_zp, b_zp, y_zp = zps
    return {"a": [[a_zp + d] for d in diffs], "a_scale": scales[0], "a_zero_point": a_zp,
            "b": [[b_zp + d for d in b_diffs]], "b_scale": scales[1], "b_zero_point": b_zp,
            "y_scale": scales[2], "y_zero_point": y_zp}


def _sums(c: Combo, targets, k: int, zps: tuple[float, float, float], scales: Scales) -> dict[str, Any]:
    """Rows of a whose differences sum to each target; b a column of k differences 1."""
    a_zp, b_zp, y_zp = zps
    return {"a": [_split(t, c.a, a_zp, k) for t in targets], "a_scale": scales[0], "a_zero_point": a_zp,
            "b": [[b_zp + 1.0]] * k, "b_scale": scales[1], "b_zero_point": b_zp,
            "y_scale": scales[2], "y_zero_point": y_zp}


def _accumulators(c: Combo, targets: list[int], k: int, a_zp: float, y_zp: float, scales: Scales) -> dict[str, Any]:
    """Exact accumulators: b = k - 1 differences of 255 and a last 1 (b_zp at qmin); a rows with
    255 * sum(d[:-1]) + d[-1] = target."""
    alo, ahi = c.a.qrange
    blo, _ = c.b.qrange
    rows = _weighted_rows(targets, k, int(alo - a_zp), int(ahi - a_zp), 255)
    return {"a": [[a_zp + d for d in row] for row in rows], "a_scale": scales[0], "a_zero_point": a_zp,
            "b": [[blo + 255.0]] * (k - 1) + [[blo + 1.0]], "b_scale": scales[1], "b_zero_point": float(blo),
            "y_scale": scales[2], "y_zero_point": y_zp}


def _ordinary(c: Combo, a_shape: tuple, b_shape: tuple, *, zps: tuple[float, float, float] | None = None,
              a_param: tuple | None = None, b_param: tuple | None = None, target: float = 100.0):
    """A builder of ordinary values: a and b seeded; a_scale/b_scale ordinary (and varied per row /
    per column when a_param / b_param give those shapes); y_scale such that the largest |result|
    is about ``target``."""
    a_zp0, b_zp0, y_zp = zps if zps is not None else (_mid(c.a), _mid(c.b), _mid(c.y))

    def param(shape, base, step, lo_hi=None, zp=None):
        if shape is None:
            return base if zp is None else zp
        i = np.arange(int(np.prod(shape))).reshape(shape)
        if zp is None:
            return base * (1 + step * (i % 5))
        return np.clip(zp + step * (i % 3), *lo_hi) if lo_hi else np.full(shape, zp)

    def build(rng: np.random.Generator) -> dict[str, Any]:
        a, b = _draw(c.a, a_shape, rng), _draw(c.b, b_shape, rng)
        a_s0 = 0.0066 if c.a.is_integer else 0.5
        b_s0 = 0.00705 if c.b.is_integer else 0.75
        rnd = np.vectorize(lambda v: _round_to(c.s, v), otypes=[np.float64])
        a_s, b_s = rnd(param(a_param, a_s0, 0.25)), rnd(param(b_param, b_s0, -0.125))
        a_zp = param(a_param, 0, 7, c.a.qrange if c.a.is_integer else None, a_zp0)
        b_zp = param(b_param, 0, -5, c.b.qrange if c.b.is_integer else None, b_zp0)
        row = (lambda p: np.reshape(p, (-1, 1))) if a_param is not None and len(a_param) == 1 else np.asarray
        exact = np.matmul(a - row(a_zp), b - b_zp)  # a 1-D per-row vector runs down a's rows
        if a.ndim == 1 or b.ndim == 1:
            big = float(np.max(np.abs(exact))) * float(np.max(a_s)) * float(np.max(b_s))
        else:
            big = float(np.max(np.abs(exact * row(a_s) * b_s))) if exact.size else 1.0
        y_s = _round_to(c.s, max(big, 1e-3) / target)
        return {"a": a, "a_scale": a_s, "a_zero_point": a_zp, "b": b, "b_scale": b_s, "b_zero_point": b_zp,
                "y_scale": y_s, "y_zero_point": y_zp}

    return build


def _normative(c: Combo, family: str, name: str, build: Callable[[np.random.Generator], dict[str, Any]],
               clause: str, note: str, tries: int = 64) -> Draft:
    """The first seeded draw on which every reading agrees (qconform/docs/semantics.md#qlmm-requant)."""
    from qconform.oracle import evaluate  # the oracle decides which draws are normative

    for attempt in range(tries):
        d = c.draft(family, name, build(_rng(c, family, name, attempt)), clause,
                    note=f"{note} (seeded draw {attempt})")
        if len(evaluate(d).readings) == 1:
            return d
    raise RuntimeError(f"{c.key}/{family}/{name}: no normative draw in {tries} tries")


def _ordinary_case(c: Combo, family: str, name: str, a_shape: tuple, b_shape: tuple, clause: str, note: str,
                   **kw) -> Draft:
    """An ordinary normative case; results of about +-100, or +-10 where that finds none (bfloat16
    scales: the multiplier-in-scale-type reading rounds v to 8 bits)."""
    first = kw.pop("target", 100.0)
    for target in (first, first / 10):
        try:
            return _normative(c, family, name, _ordinary(c, a_shape, b_shape, target=target, **kw), clause, note)
        except RuntimeError:
            continue
    raise RuntimeError(f"{c.key}/{family}/{name}: no normative draw")


# --------------------------------------------------------------------------------------------
# families
# --------------------------------------------------------------------------------------------
#: ONNX's node tests (onnx/backend/test/case/node/qlinearmatmul.py): (name suffix, type, values).
_NODE_TESTS = {
    "uint8": {"a": [[208, 236, 0, 238], [3, 214, 255, 29]], "a_scale": 0.0066, "a_zero_point": 113,
              "b": [[152, 51, 244], [60, 26, 255], [0, 127, 246], [127, 254, 247]], "b_scale": 0.00705,
              "b_zero_point": 114, "y_scale": 0.0107, "y_zero_point": 118},
    "int8": {"a": [[81, 109, -127, 111], [-124, 87, -128, -98]], "a_scale": 0.0066, "a_zero_point": -14,
             "b": [[25, -76, 117], [-67, -101, -128], [-127, 0, 119], [0, 127, 120]], "b_scale": 0.00705,
             "b_zero_point": -13, "y_scale": 0.0107, "y_zero_point": -9},
}


def _basic(c: Combo) -> Iterator[Draft]:
    yield _ordinary_case(c, "basic", "ordinary", (2, 3), (3, 2), "qlmm-formula", "ordinary values")
    if c.a.is_float and c.a == c.b == c.y:
        vals = _finite(c.a)
        yield c.draft("basic", "every-value", _column(c, vals, [1.0], (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)),
                      "qlmm-float8", note=f"every finite {c.a.name} value times 1: y = a")
    t = c.a.name
    if c.a == c.b == c.y and t in _NODE_TESTS and c.s in ("float32", "float16"):
        for dims in ("2D", "3D"):
            v = dict(_NODE_TESTS[t])
            if dims == "3D":
                v["a"], v["b"] = [v["a"], v["a"]], [v["b"], v["b"]]
            test = f"test_qlinearmatmul_{dims}_{t}_{c.s}"
            yield c.draft("basic", f"onnx-node-{test}", v, "qlmm-formula",
                          note="ONNX node test (expected values in tests/test_qlinear_matmul.py)",
                          provenance=f"onnx/backend/test/case/node/qlinearmatmul.py:{test}")


def _ties(c: Combo) -> Iterator[Draft]:
    """acc covers [-255, 255] (a all 256 values, a_zp at qmin, b differences +1 and -1)."""
    alo, ahi = c.a.qrange
    diffs = np.arange(0, ahi - alo + 1, dtype=np.float64)
    b_zp = 1.0 if c.b.qrange[0] == 0 else 0.0
    if c.y.is_integer:
        variants = (("half-multiplier", -1, "v = acc / 2: every odd acc is a tie"),
                    ("eighth-multiplier", -3, "v = acc / 8: ties, quarters and eighths"))
    else:
        variants = (("sixteenth-multiplier", -4, "v = acc / 16: midpoints between float8 values below 16"),
                    ("unit-multiplier", 0, "v = acc: midpoints between float8 values above 16"))
    for name, m, note in variants:
        zps = (float(alo), b_zp, _mid(c.y))
        yield c.draft("ties", name, _column(c, diffs, [1.0, -1.0], zps, _pow2_scales(m)), "qlmm-requant", note)


def _saturation(c: Combo) -> Iterator[Draft]:
    azp, bzp = _mid(c.a), _mid(c.b)
    k = 6
    if c.y.is_integer:
        lo, hi = c.y.qrange
        for zp_name, zp in (("y-zero-point-qmin", lo), ("y-zero-point-qmax", hi)):
            ys = [lo - 300, lo - 2, lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, hi + 2, hi + 300]
            targets = [float(t - zp) for t in ys]
            yield c.draft("saturation", zp_name, _sums(c, targets, k, (azp, bzp, float(zp)), _pow2_scales(0)),
                          "qlmm-formula", "results around qmin and qmax and beyond, after the zero point")
    else:
        fmt = c.y.float_format
        e = fmt.emax - fmt.mbits - 1  # half an ulp at the largest finite value
        top = int(fmt.max_finite / 2.0 ** e)
        units = [top - 2, top - 1, top, top + 1, top + 2, 2 * top, 10 * top]
        for zp_name, zp in (("y-zero-point-0", 0.0), ("y-zero-point-minus-half-max", -fmt.max_finite / 2)):
            shift = int(zp / 2.0 ** e)
            targets = [float(s * u - shift) for u in units for s in (1, -1)]
            if c.a.is_integer and max(abs(t) for t in targets) > k * 127:
                targets = [t for t in targets if abs(t) <= k * 127]
            yield c.draft("saturation", zp_name, _sums(c, targets, k, (azp, bzp, zp), _pow2_scales(e)),
                          "qlmm-float8", "results at, between and beyond +-max finite (saturate=1)")


def _accumulator(c: Combo) -> Iterator[Draft]:
    y_zp = _mid(c.y)
    targets = [2 ** 24 - 1, 2 ** 24, 2 ** 24 + 1, 2 ** 24 + 3, 2 ** 24 + 2 ** 17 - 1, -(2 ** 24 + 5)]
    yield c.draft("accumulator", "near-2^24", _accumulators(c, targets, 600, _mid(c.a), y_zp, _pow2_scales(-18)),
                  "qlmm-accumulation", "accumulators around 2^24 with v = acc / 2^18; every reading agrees")
    if c.s == "float32":
        lo, _ = c.a.qrange
        targets = [2 ** 31, 2 ** 31 + 3 * 2 ** 23]
        yield c.draft("accumulator", "beyond-2^31",
                      _accumulators(c, targets, 33_420, float(lo), y_zp, _pow2_scales(-25)), "qlmm-accumulation",
                      "accumulators 2^31 and 2^31 + 0.75 * 2^25 with v = acc / 2^25 (before the zero point): "
                      "int32 wrap gives -64, -63; a wider accumulator 64, 65; a saturating one 64, 64")


def _k_sizes(c: Combo) -> Iterator[Draft]:
    for k in (1, 515):
        yield _ordinary_case(c, "k-sizes", f"k-{k}", (3, k), (k, 2), "qlmm-formula", f"K = {k}")


def _broadcast(c: Combo) -> Iterator[Draft]:
    shapes = (("batch-2x1-by-3", (2, 1, 2, 3), (3, 3, 2)), ("a-2d-b-batched", (2, 3), (4, 3, 2)),
              ("a-batched-b-2d", (3, 2, 4), (4, 2)), ("a-1d", (3,), (2, 3, 2)), ("b-1d", (2, 2, 3), (3,)),
              ("both-1d", (4,), (4,)))
    for name, a_shape, b_shape in shapes:
        yield _ordinary_case(c, "broadcast", name, a_shape, b_shape, "qlmm-shapes", f"a {a_shape} x b {b_shape}")


def _zero_points(c: Combo) -> Iterator[Draft]:
    if c.integer_inputs:
        # a and b zero points at the ends make every difference one-signed; y's zero point sits at
        # the end the results move away from, so they sweep the whole output range
        for name, (pa, pb) in (("a-qmin-b-qmin", (0, 0)), ("a-qmax-b-qmax", (1, 1)),
                               ("a-qmin-b-qmax", (0, 1)), ("a-qmax-b-qmin", (1, 0))):
            py = 0 if pa == pb else 1  # acc >= 0 when both differences share a sign
            zps = (float(c.a.qrange[pa]), float(c.b.qrange[pb]), float(c.y.qrange[py]) if c.y.is_integer else 0.0)
            target = 0.9 * (c.y.qrange[1] - c.y.qrange[0]) if c.y.is_integer else 100.0
            yield _ordinary_case(c, "zero-points", name, (3, 4), (4, 3), "qlmm-formula",
                                 f"zero points (a, b, y) = {zps}", zps=zps, target=target)
    else:
        m = c.a.float_format.max_finite
        for name, zps in (("nonzero", (1.5, -2.0, 0.5)), ("extremes", (m, -1.0, -m / 4))):
            zps = tuple(_round_to(c.a.name, z) for z in zps)
            yield _ordinary_case(c, "zero-points", name, (3, 4), (4, 3), "qlmm-float8", f"float8 zero points {zps}",
                                 zps=zps)


def _per_row_column(c: Combo) -> Iterator[Draft]:
    variants = (("per-row-a", (3, 4), (4, 3), (3, 1), None),
                ("per-column-b", (3, 4), (4, 3), None, (1, 3)),
                ("both-batched", (2, 3, 4), (2, 4, 3), (2, 3, 1), (2, 1, 3)),
                # the 2-D sentence's vector forms: "an M element vector ... for per row quantization",
                # one element per column of b
                ("per-row-a-vector", (3, 4), (4, 3), (3,), None),
                ("per-column-b-vector", (3, 4), (4, 3), None, (3,)))
    for name, a_shape, b_shape, a_param, b_param in variants:
        yield _ordinary_case(c, "per-row-column", name, a_shape, b_shape, "qlmm-shapes",
                             f"a {a_shape} params {a_param or 'scalar'}, b {b_shape} params {b_param or 'scalar'}; "
                             "square so that per-row and per-column cannot be confused",
                             a_param=a_param, b_param=b_param)


def _readings(c: Combo) -> Iterator[Draft]:
    alo, ahi = c.a.qrange
    azp = float(alo + ahi + 1) // 2 if alo == 0 else 0.0
    bzp = 1.0 if c.b.qrange[0] == 0 else 0.0
    ylo_div = 2 if c.y.is_integer else 16
    # exact value j / 2 (or j / 16): m = 1 / (3 * ylo_div) is inexact in binary, acc = 3 j
    js = [j for j in range(-200, 201) if alo - azp <= 3 * j <= ahi - azp]
    scales = (1.0, 1.0 / ylo_div, 3.0)
    yield c.draft("readings", "thirds", _column(c, [3.0 * j for j in js], [1.0], (azp, bzp, _mid(c.y)), scales),
                  "qlmm-requant", f"acc = 3j, multiplier 1/{3 * ylo_div}: exact results j/{ylo_div} are ties "
                  "the float readings may move off")
    if c.y.is_integer:
        targets, m = [2 ** 24 + 2 ** 17 + 1, 2 ** 24 + 3 * 2 ** 17 - 1, -(2 ** 24 + 2 ** 17 + 1)], -18
    else:
        p = c.y.float_format.mbits
        half = 2 ** 24 // 2 ** (p + 1)
        targets, m = [2 ** 24 + half + 1, 2 ** 24 + 3 * half - 1, -(2 ** 24 + half + 1)], -24
    yield c.draft("readings", "above-2^24", _accumulators(c, targets, 800, _mid(c.a), _mid(c.y), _pow2_scales(m)),
                  "qlmm-requant", "accumulators above 2^24: fl32(acc) rounds onto a tie of the output")


_FAMILY_GEN: dict[str, Callable[[Combo], Iterator[Draft]]] = {
    "basic": _basic, "ties": _ties, "saturation": _saturation, "accumulator": _accumulator,
    "k-sizes": _k_sizes, "broadcast": _broadcast, "zero-points": _zero_points,
    "per-row-column": _per_row_column, "readings": _readings,
}


def combos() -> Iterator[Combo]:
    for spec in (s for s in specs() if s.op == OP and not s.domain and s.since in VERSIONS):
        for types in spec.combinations():
            yield Combo(spec, types)


def generate(family: str | None = None) -> Iterator[Draft]:
    for fam in (FAMILIES if family is None else (family,)):
        for c in combos():
            if _RULES[fam](c):
                yield from _FAMILY_GEN[fam](c)


def entries() -> dict[str, Callable[[], Iterator[Draft]]]:
    """One ``generators.FAMILIES`` entry per family, keyed "<module>:<family>" (family names such as
    "ties" are shared with the QuantizeLinear/DequantizeLinear modules)."""
    return {f"{__name__.rsplit('.', 1)[-1]}:{fam}": (lambda fam=fam: generate(fam)) for fam in FAMILIES}

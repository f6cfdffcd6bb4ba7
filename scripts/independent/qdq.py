"""QuantizeLinear and DequantizeLinear: the readings of semantics.md §2, §3, §5, §8, §9."""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from .check import Computed, Model
from .values import (BF16, F32, F16, F64, FIN, FLOATS, INF, INTS, NAN, ONNX_CODE, UNDEF, cast_small_float,
                     clamp_int, decode, fin, hexcode, raw_bits, rne_int, signed, v_add, v_div, v_mul, v_neg)

# ------------------------------------------------------------------------------------------------
# QuantizeLinear: the division readings (semantics.md q-division, q-division-half, q-int32-input)
# ------------------------------------------------------------------------------------------------
PFMT = {"float32": F32, "float16": F16, "bfloat16": BF16, "float64": F64}
INT_DIV = ("operands-rounded-to-int32", "quotient-rounded-once-to-int32")


def to_int_value(q):
    """An integer quotient: +-Inf and NaN stay as they are, a finite value rounds (ties to even)
    to an integer, which has no -0."""
    return fin(Fraction(rne_int(signed(q)))) if q[0] == FIN else q


def quotient(comp: str, xv, sv):
    """q for one division reading, from x and the scale as given."""
    if comp in ("float32-quotient", "int32-via-float32"):
        return F32.fl(v_div(F32.fl(xv), F32.fl(sv)))
    if comp in ("int32-via-float64", "division-in-float64"):
        return F64.fl(v_div(xv, sv))
    if comp == "quotient-exact":
        return v_div(xv, sv)
    if comp.startswith("quotient-in-"):
        return PFMT[comp[len("quotient-in-"):]].fl(v_div(xv, sv))
    if comp == "operands-rounded-to-int32":
        return to_int_value(v_div(to_int_value(xv), sv))
    if comp == "quotient-rounded-once-to-int32":
        return to_int_value(v_div(xv, sv))
    for pre in ("operands-rounded-to-", "division-in-"):
        if comp.startswith(pre):
            p = PFMT[comp[len(pre):]]
            return p.fl(v_div(p.fl(xv), p.fl(sv)))
    if comp.startswith("quotient-rounded-once-to-"):
        return PFMT[comp[len("quotient-rounded-once-to-"):]].fl(v_div(xv, sv))
    raise KeyError(comp)


def ql_divisions(opset: int, domain: str, tx: str, ts: str, prec: int) -> list[str]:
    """The division readings semantics.md permits for this case, first one first."""
    half = tx in ("float16", "bfloat16")
    if domain == "com.microsoft":
        return ["quotient-in-float16", "quotient-in-float32"] if ts == "float16" else ["float32-quotient"]
    if opset in (10, 13):
        return ["int32-via-float32", "int32-via-float64"] if tx == "int32" else ["float32-quotient", "quotient-exact"]
    if opset in (19, 21):
        if ts == "int32":
            return ["division-in-float32", "division-in-float64"]
        if ts == "float32":
            return ["float32-quotient", "quotient-exact"]
        if ts == "float16":
            return ["quotient-in-float16", "quotient-in-float32"]
        return ["quotient-in-bfloat16", "quotient-in-float32", "quotient-exact"]
    if prec:
        p = ONNX_CODE[prec]
        return [f"operands-rounded-to-{p}", f"quotient-rounded-once-to-{p}"]
    if ts in PFMT:
        return [f"operands-rounded-to-{ts}", f"quotient-rounded-once-to-{ts}"]
    if ts == "int32":  # the scale's type is the precision: an integer division (Q2), no float one
        return list(INT_DIV)
    return ["division-in-float32"] + ([f"division-in-{tx}"] if half else []) + ["division-in-float64"]


ZP_READINGS = ("zero-point-added", "zero-point-skipped")


def division_precision(comp: str):
    """The precision a float division reading computes q in (None: exact, or an integer quotient)."""
    if comp == "float32-quotient":
        return F32
    for pre in ("quotient-in-", "operands-rounded-to-", "quotient-rounded-once-to-", "division-in-"):
        if comp.startswith(pre):
            return PFMT.get(comp[len(pre):])
    return None


def parse_reading(name: str, first: list[str]) -> tuple[str, str]:
    """(division, zero-point) components of a reading name; 'spec' and omitted parts are first."""
    div, zp = first[0], ZP_READINGS[0]
    if name != "spec":
        for part in name.split("+"):
            if part in ZP_READINGS:
                zp = part
            else:
                div = part
    return div, zp


# ------------------------------------------------------------------------------------------------
# One case
# ------------------------------------------------------------------------------------------------
def scale_index(xshape, sshape, axis: int, block: int) -> np.ndarray:
    """Flat index into the scale for every element of x (semantics.md granularity-*)."""
    n = int(np.prod(xshape, dtype=np.int64))
    if len(sshape) == 0 or int(np.prod(sshape)) == 1 and not (block and len(sshape) == len(xshape)):
        return np.zeros(n, dtype=np.int64)
    a = axis + len(xshape) if axis < 0 else axis
    idx = np.indices(xshape).reshape(len(xshape), -1)
    if block and len(sshape) == len(xshape):
        idx = idx.copy()
        idx[a] //= block
        return np.ravel_multi_index(tuple(idx), sshape)
    return idx[a]


def flat_bits(arg) -> tuple[str, np.ndarray]:
    return arg.type, raw_bits(arg.value).ravel()



def operands(case, absent_zp_type: str):
    """x, scale and zero point as raw codes and decoded values, and each element's scale index.
    An absent zero point is 0 of absent_zp_type."""
    x, s, zp = (list(case.inputs) + [None, None])[:3]
    attrs = case.attrs
    tx, xb = flat_bits(x)
    ts, sb = flat_bits(s)
    if zp is not None:
        tz, zb = flat_bits(zp)
    else:
        tz, zb = absent_zp_type, np.zeros(max(len(sb), 1), dtype=np.uint64)
    sidx = scale_index(x.value.shape, s.value.shape, attrs.get("axis", 1), attrs.get("block_size", 0))
    values = ([decode(tx, int(b)) for b in xb], [decode(ts, int(b)) for b in sb], [decode(tz, int(b)) for b in zb])
    return (xb, tx, sb, ts, zb, tz, sidx), values


def compute_ql(case, out_t: str):
    raw, (xs, ss, zs) = operands(case, out_t)
    _, tx, _, ts, _, _, sidx = raw
    opset, sat = case.opset, case.attrs.get("saturate", 1)
    divs = ql_divisions(opset, case.domain, tx, ts, case.attrs.get("precision", 0))
    is_int = out_t in INTS

    cache: dict[str, list] = {}

    def qs(div):
        if div not in cache:
            cache[div] = [quotient(div, xs[i], ss[si]) for i, si in enumerate(sidx)]
        return cache[div]

    def reading(div: str, zpc: str) -> Computed:
        q = qs(div)
        p = division_precision(div)
        codes, rounded_sum = [], 0
        for i, si in enumerate(sidx):
            z = zs[si]
            if is_int:
                codes.append(clamp_int(out_t, q[i], int(signed(z))))
                continue
            if zpc == "zero-point-skipped" and z[0] == FIN and z[2] == 0 and not z[1]:
                v = q[i]
            else:
                v = v_add(q[i], z)
            codes.append(cast_small_float(out_t, v, opset, sat))
            # semantics.md q-float8: "+ zp" is an IEEE addition in P, and generators keep only
            # inputs where that and the exact sum convert alike; this counts where they do not
            if p is not None and codes[-1] is not UNDEF and not (z[0] == FIN and z[2] == 0) and \
                    cast_small_float(out_t, p.fl(v), opset, sat) != codes[-1]:
                rounded_sum += 1
        iz = [qi[0] == FIN and qi[2] == 0 for qi in q] if div in INT_DIV else None
        c = Computed(codes, iz)
        c.rounded_sum = rounded_sum
        return c

    # Q5: the zero point is added, +0 included ("the quantization formula remains the same"); the name
    # zero-point-skipped is still parsed, and a case carrying it is reported under (e)
    alternatives = [(d, ZP_READINGS[0]) for d in divs]
    # the plain reading: the exact quotient rounded once, in the precision the text names where it names one
    plain = next((d for d in divs if d.startswith("quotient-rounded-once-to-")), "quotient-exact")
    return divs, reading, alternatives, (plain, "zero-point-added"), raw


DQ_READINGS = ("multiply-in-output-type", "multiply-in-float32-then-round", "multiply-exact-then-round")


def compute_dq(case, out_t: str):
    raw, (xs, ss, zs) = operands(case, case.inputs[0].type)
    tx, sidx = raw[1], raw[6]
    T = PFMT[out_t]
    ds = [v_add(xs[i], v_neg(zs[si])) if tx in FLOATS else fin(signed(xs[i]) - signed(zs[si]))
          for i, si in enumerate(sidx)]

    def reading(comp: str, _zp: str = "") -> Computed:
        out = []
        for i, si in enumerate(sidx):
            d, sv = ds[i], ss[si]
            if comp == "multiply-in-output-type":
                y = T.fl(v_mul(T.fl(d), T.fl(sv)))
            elif comp == "multiply-in-float32-then-round":
                y = T.fl(F32.fl(v_mul(F32.fl(d), F32.fl(sv))))
            elif comp == "multiply-exact-then-round":
                y = T.fl(v_mul(d, sv))
            else:
                raise KeyError(comp)
            out.append(T.bits(y))
        return Computed(out)

    comps = list(DQ_READINGS if out_t in ("float16", "bfloat16") else (DQ_READINGS[0], DQ_READINGS[2]))
    return comps, reading, [(c, "") for c in comps], ("multiply-exact-then-round", ""), raw


def output_type(case) -> str:
    x, s, zp = (list(case.inputs) + [None, None])[:3]
    od = case.attrs.get("output_dtype", 0)
    if case.op == "QuantizeLinear":
        if od and case.opset >= 21:
            return ONNX_CODE[od]
        return zp.type if zp is not None else "uint8"
    if case.opset in (10, 13) and case.domain == "":
        return "float32"
    if od and case.opset >= 23:
        return ONNX_CODE[od]
    return s.type



def model(case) -> Model:
    """The Model of a single-node QuantizeLinear / DequantizeLinear case."""
    out_t = output_type(case)
    compute = compute_ql if case.op == "QuantizeLinear" else compute_dq
    firsts, reading, alternatives, plain_key, raw = compute(case, out_t)
    xb, tx, sb, ts, zb, tz, sidx = raw
    has_zp = bool(alternatives[0][1])

    def parse(name: str) -> tuple:
        if case.op == "QuantizeLinear":
            key = parse_reading(name, firsts)
        else:
            key = (firsts[0] if name == "spec" else name, "")
        return key[0], key[1] if has_zp else ""

    def inputs_text(i):
        si = sidx[i]
        return (f"x={hexcode(tx, xb[i])}({tx}) s={hexcode(ts, sb[si])}({ts}) "
                f"zp={hexcode(tz, zb[si]) if case.inputs[2:3] and case.inputs[2] is not None else 'absent'}")

    return Model(out_t, case.inputs[0].value.shape, alternatives, parse, lambda key: reading(*key),
                 plain_key, firsts[0], inputs_text)

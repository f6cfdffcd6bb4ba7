"""Numpy models of the fused integer kernels, checked bit for bit against the measured outputs.

Needs the files deviations.py and collect_dqq.py write (research/qdq/out/). Run:
    .venv/bin/python research/qdq/models.py [--qnn]   (--qnn: also the live QNN checks)
"""
from __future__ import annotations

import json
import os
import sys
from fractions import Fraction

import numpy as np

OUT = os.path.join(os.path.dirname(__file__), "out")
f32 = np.float32


def fma32(x, y, z):
    """float32 fused multiply-add, exactly rounded once (Fraction arithmetic, then one rounding)."""
    x, y, z = (np.asarray(v, np.float32) for v in np.broadcast_arrays(x, y, z))
    out = np.empty(x.shape, np.float32)
    for i in np.ndindex(x.shape):
        exact = Fraction(float(x[i])) * Fraction(float(y[i])) + Fraction(float(z[i]))
        out[i] = _round_f32(exact)
    return out


def _round_f32(q: Fraction) -> np.float32:
    """Round a rational to the nearest float32, ties to even (via float64 only when exact enough)."""
    d = float(q)  # nearest float64
    f = np.float32(d)
    if Fraction(float(f)) == q:
        return f
    # float64 rounding can create a false tie: decide on the exact value
    lo = np.nextafter(f, np.float32(-np.inf)) if Fraction(float(f)) > q else f
    hi = np.nextafter(lo, np.float32(np.inf))
    dlo, dhi = q - Fraction(float(lo)), Fraction(float(hi)) - q
    if dlo < dhi:
        return lo
    if dhi < dlo:
        return hi
    return lo if int(lo.view(np.uint32)) % 2 == 0 else hi


def cvtps_epi32(v):
    """_mm_cvtps_epi32 under the default MXCSR: round half to even."""
    return np.rint(np.asarray(v, np.float32)).astype(np.int64)


def sat(v, lo, hi):
    return np.clip(v, lo, hi)


# --- onnxruntime 1.32 CPU: QLinearMul (MLAS qlmul.cpp, SSE2 path used on x86-64) ---------------
def ort_qlinearmul_x86(a, b, sa, za, sb, zb, sy, zy, lo=0, hi=255):
    """p = (a-za)*(b-zb) exact in int32; y = cvtps(float(p) * fl(fl(sa*sb)/sy) + float(zy)), two
    separate float32 roundings (mul, add; no FMA), RNE; pack with saturation to int16 then 8 bits."""
    ratio = f32(f32(f32(sa) * f32(sb)) / f32(sy))
    p = (a.astype(np.int64) - za) * (b.astype(np.int64) - zb)
    v = (p.astype(f32) * ratio).astype(f32)
    v = (v + f32(zy)).astype(f32)
    return sat(sat(cvtps_epi32(v), -32768, 32767), lo, hi)


# --- onnxruntime 1.32 CPU: QLinearAdd (MLAS intrinsics/avx2/qladd_avx2.cpp) ----------------------
def ort_qlinearadd_avx2(a, b, sa, za, sb, zb, sy, zy, lo=0, hi=255, fixed="plain"):
    """rA = fl(sa/sy), rB = fl(sb/sy); fixed = fl(zy - (rA*za + rB*zb)) (fixed="plain": every step
    rounded; "fma-a"/"fma-b": the compiler contracted one product into an FMA);
    t = fma(b, rB, fixed); t = fma(a, rA, t); y = cvtps(t) RNE, saturated."""
    rA, rB = f32(f32(sa) / f32(sy)), f32(f32(sb) / f32(sy))
    pa, pb = f32(rA * f32(za)), f32(rB * f32(zb))
    if fixed == "plain":
        s = f32(pa + pb)
    elif fixed == "fma-a":
        s = fma32(rA, f32(za), pb)[()]
    else:
        s = fma32(rB, f32(zb), pa)[()]
    fx = f32(f32(zy) - s)
    t = fma32(b.astype(f32), rB, fx)
    t = fma32(a.astype(f32), rA, t)
    return sat(sat(cvtps_epi32(t), -32768, 32767), lo, hi)


# --- QNN HTP (onnxruntime-qnn 2.7.0, simulator) ------------------------------------------------
def qnn_q_dq_pair(x, s, zp, lo=0, hi=255):
    """Q->DQ on float input: the rounding is dropped, the saturation kept (a clamp in float)."""
    return np.clip(x, f32((lo - zp) * f32(s)), f32((hi - zp) * f32(s)))


def qnn_input_quantize(x, s, zp, lo=0, hi=255):
    """A QuantizeLinear fed by a float graph input: the quotient x/s rounded to float16 first, then
    half up to an integer (double rounding through float16)."""
    q = (x.astype(np.float64) / float(f32(s))).astype(np.float16).astype(np.float64)
    return sat(np.floor(q + 0.5) + zp, lo, hi)


def qnn_convert_u8(a, s1, z1, s2, z2, bias=2.0 ** -7):
    """DQ->Q requantisation (QNN Convert): round half up with a positive bias of about 2^-7 codes
    (approximate: see the report for the residual)."""
    v = (a.astype(np.float64) - z1) * float(f32(s1)) / float(f32(s2)) + z2
    return sat(np.floor(v + 0.5 + bias), 0, 255)


def qnn_sigmoid16_encoding(x_real, signed: bool):
    """16-bit Sigmoid: the EP overrides the output encoding to scale 1/65536 (uint16) or 1/32768
    (int16), offset 0, whatever the graph's Q says (simple_op_builder.cc OverrideQuantParams)."""
    s = 1 / 32768 if signed else 1 / 65536
    lo, hi = (-32768, 32767) if signed else (0, 65535)
    return sat(np.rint(1 / (1 + np.exp(-x_real.astype(np.float64))) / s), lo, hi)


def u8s8_pair_saturation_matmul(A, W, za):
    """x86 AVX2 without VNNI (MLAS and oneDNN): u8 x s8 products summed in adjacent pairs with int16
    saturation (VPMADDUBSW), then int32; the zero point folded in afterwards: acc = sum - za*colsum(W)
    (W symmetric, zero point 0)."""
    A, W = A.astype(np.int64), W.astype(np.int64)
    acc = np.zeros((A.shape[0], W.shape[1]), np.int64)
    for k in range(0, A.shape[1], 2):
        acc += np.clip(A[:, k:k + 1] * W[k:k + 1, :] + A[:, k + 1:k + 2] * W[k + 1:k + 2, :], -32768, 32767)
    return acc - za * W.sum(0)[None, :]


def check_u8s8() -> dict:
    """DQ(u8 act), DQ(s8 weight) -> MatMul -> Q: ORT_ENABLE_ALL's QLinearMatMul and OpenVINO's LPT
    FullyConnected against the pair-saturation model, requantised in float32 (RNE)."""
    sys.path.insert(0, os.path.dirname(__file__))
    import onnxruntime as ort
    import openvino as ov
    from onnx import numpy_helper as nh
    from common import cpu_session
    from patterns import build
    p = build("MatMul", "uint8", "int8", "tensor")
    I = {i.name: nh.to_array(i) for i in p.inits}
    A, W = p.feeds["a"][0], I["W"]
    acc = u8s8_pair_saturation_matmul(A, W, int(I["a_z"]))
    scale = f32(f32(I["a_s"]) * f32(I["W_s"]) / f32(I["y_s"]))
    y = sat(np.rint((acc.astype(f32) * scale).astype(f32)) + int(I["y_z"]), 0, 255)
    fz = cpu_session(p.bytes(), ort.GraphOptimizationLevel.ORT_ENABLE_ALL).run(None, p.feeds)[0][0]
    ref = cpu_session(p.bytes()).run(None, p.feeds)[0][0]
    core = ov.Core()
    cm = core.compile_model(core.read_model(p.bytes()), "CPU", {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1})
    oy = np.asarray(list(cm.create_infer_request().infer(p.feeds).values())[0])[0]
    return {"u8s8_pair_saturation[ort_all QLinearMatMul]": {"model_mismatches": int((y != fz).sum()), "of": y.size,
                                                            "ort_all_vs_reference": int((fz != ref).sum())},
            "u8s8_pair_saturation[openvino FullyConnected]": {"model_mismatches": int((y != oy).sum()), "of": y.size,
                                                              "openvino_vs_reference": int((oy != ref).sum())}}


def check_files() -> dict:
    res = {}
    for tag in ("", "_ties"):
        for op, fn in (("mul", ort_qlinearmul_x86), ("add", ort_qlinearadd_avx2)):
            path = os.path.join(OUT, f"draws_{op}{tag}.json")
            if not os.path.exists(path):
                continue
            D = json.load(open(path))
            variants = ["plain", "fma-a", "fma-b"] if op == "add" else [None]
            for var in variants:
                bad = 0
                for d in D:
                    a, b = np.array(d["a"]), np.array(d["b"])
                    kw = {"fixed": var} if var else {}
                    y = fn(a, b, d["sa"], d["za"], d["sb"], d["zb"], d["sy"], d["zy"], **kw)
                    bad += int((y != np.array(d["ort_all"])).sum())
                key = f"ort_{op}{tag}" + (f"[{var}]" if var else "")
                res[key] = {"model_mismatches": bad, "of": 256 * len(D),
                            "ort_all_vs_reference": sum(int((np.array(d["ort_all"]) != np.array(d["ref"])).sum())
                                                        for d in D)}
    path = os.path.join(OUT, "dqq.json")
    if os.path.exists(path):
        rows = json.load(open(path))
        a = np.arange(256)
        for bias in (0.0, 2.0 ** -7):
            bad = sum(int((qnn_convert_u8(a, *r["p"], bias=bias) != np.array(r["qnn"])).sum()) for r in rows)
            res[f"qnn_convert_u8[bias={bias}]"] = {"model_mismatches": bad, "of": 256 * len(rows),
                                                   "qnn_vs_reference": sum(int((np.array(r["qnn"]) != np.array(r["ref"])).sum()) for r in rows)}
        bad = sum(int((np.clip(np.rint((a - r["p"][1]) * float(f32(r["p"][0])) / float(f32(r["p"][2])) + r["p"][3]), 0, 255)
                       != np.array(r["qnn"])).sum()) for r in rows)
        res["qnn_convert_u8[exact, half-even]"] = {"model_mismatches": bad, "of": 256 * len(rows)}
    return res


def check_qnn_live() -> dict:
    sys.path.insert(0, os.path.dirname(__file__))
    from common import cpu_session, qnn_session
    from patterns import build, q_dq
    res = {}
    for act in ("uint8", "int8", "uint16", "int16"):
        p = q_dq(act, seed=3)
        x = next(iter(p.feeds.values()))
        y = qnn_session(p.bytes()).run(None, p.feeds)[0]
        s = float(onnx_get(p, "s"))
        zp = int(onnx_get(p, "z"))
        from patterns import RANGE
        lo, hi = RANGE[act]
        res[f"qnn_q_dq[{act}]"] = {"model_mismatches": int((qnn_q_dq_pair(x, s, zp, lo, hi) != y).sum()), "of": y.size}
    # Q -> DQ -> Relu -> Q: input quantisation, Relu on codes, Convert (bias 0 here)
    from common import TP, helper, init, model, vi
    rng = np.random.default_rng(11)
    bad = tot = dev = 0
    for _ in range(12):
        s1, s2 = (float(f32(2.0 ** rng.uniform(-6, -3))) for _ in range(2))
        z1, z2 = int(rng.integers(0, 256)), int(rng.integers(0, 64))
        inits = [init("s1", f32(s1)), init("z1", np.uint8(z1)), init("s2", f32(s2)), init("z2", np.uint8(z2))]
        mb = model([helper.make_node("QuantizeLinear", ["x", "s1", "z1"], ["q"]),
                    helper.make_node("DequantizeLinear", ["q", "s1", "z1"], ["f"]),
                    helper.make_node("Relu", ["f"], ["g"]),
                    helper.make_node("QuantizeLinear", ["g", "s2", "z2"], ["y"])],
                   [vi("x", TP.FLOAT, [4096])], [vi("y", TP.UINT8, [4096])], inits)
        x = rng.normal(0, 1, 4096).astype(f32) * f32(s1 * 100)
        y = qnn_session(mb).run(None, {"x": x})[0]
        ref = cpu_session(mb).run(None, {"x": x})[0]
        q = np.maximum(qnn_input_quantize(x, s1, z1), z1)
        m = qnn_convert_u8(q, s1, z1, s2, z2, bias=0.0)
        bad += int((m != y).sum())
        dev += int((ref != y).sum())
        tot += y.size
    res["qnn_q_dq_relu_q[input-fp16-half-up, relu on codes, convert]"] = {"model_mismatches": bad, "of": tot,
                                                                           "qnn_vs_reference": dev}
    for act in ("uint16", "int16"):
        p = build("Sigmoid", act)
        # the float input of Sigmoid, as the reference computes it (DQ output)
        import onnx
        m = onnx.load_from_string(p.bytes())
        xname = [n for n in m.graph.node if n.op_type == "Sigmoid"][0].input[0]
        from common import model, vi, TP
        fm = model(p.nodes[:-2], p.inputs, [vi(xname, TP.FLOAT, None)], p.inits[:-2])
        xr = cpu_session(fm).run(None, p.feeds)[0]
        y = qnn_session(p.bytes()).run(None, p.feeds)[0]
        mdl = qnn_sigmoid16_encoding(xr, act == "int16")
        res[f"qnn_sigmoid16[{act}]"] = {"model_mismatches": int((mdl != y).sum()), "of": y.size,
                                        "max_code_diff": int(np.abs(mdl.astype(np.int64) - y.astype(np.int64)).max())}
    return res


def onnx_get(p, suffix):
    from onnx import numpy_helper
    return numpy_helper.to_array(next(i for i in p.inits if i.name.endswith(suffix)))


if __name__ == "__main__":
    out = check_files()
    out.update(check_u8s8())
    if "--qnn" in sys.argv:
        out.update(check_qnn_live())
    print(json.dumps(out, indent=1))

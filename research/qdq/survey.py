"""Which QDQ patterns each runtime accepts/fuses, and how many output codes differ from the
node-by-node reference (onnxruntime CPU EP, ORT_DISABLE_ALL).

Runtimes: ORT_ENABLE_ALL (CPU EP; the ops left after fusion), QNN EP HTP (fallback off; the EP's
reason when refused), OpenVINO CPU with qconform's f32 hint (the runtime model's precision of the
main op: u8/i8 = low-precision transformations ran).
Run: .venv/bin/python research/qdq/survey.py [--no-qnn]   (writes research/qdq/out/survey.json)
"""
from __future__ import annotations

import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402
from common import cpu_session, np, onnx, ort, qnn_session  # noqa: E402
from patterns import OPS, WEIGHTED, build, dq_q, q_dq  # noqa: E402

ALL = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
USE_QNN = "--no-qnn" not in sys.argv
BOILER = re.compile(r"File mapped weights|EPContext encryption|fallback to CPU EP has been explicitly|"
                    r"Unsupported nodes in QNN EP: $")


def patterns():
    for act in ("uint8", "int8", "uint16", "int16"):
        yield q_dq(act)
        yield dq_q(act)
    for op in OPS:
        for act in ("uint8", "int8", "uint16", "int16"):
            if op not in WEIGHTED:
                yield build(op, act)
                continue
            wts = {"uint8": ["uint8", "int8", "int4", "uint4"], "int8": ["int8", "int4"],
                   "uint16": ["uint8", "int8", "uint16"], "int16": ["int8", "int16"]}[act]
            for wt in wts:
                for gran in ("tensor", "axis", "block"):
                    if gran == "block" and wt not in ("int4", "uint4", "int8", "uint8"):
                        continue
                    try:
                        yield build(op, act, wt, gran)
                    except Exception as e:  # noqa: BLE001
                        yield f"{op}/{act}/{wt}/{gran}: build failed: {str(e).splitlines()[0][:160]}"
    # the bias cases: a bias scale that is not s_a*s_w, and no bias
    for op in ("Gemm", "Conv"):
        for act, wt in (("uint8", "uint8"), ("uint8", "int8"), ("int8", "int8")):
            for b in ("other", "none"):
                yield build(op, act, wt, "tensor", bias_scale=b)
    # data movement with the output Q equal to the input DQ (runtimes drop the pair)
    for op in ("Identity", "Relu", "MaxPool", "Reshape", "Transpose", "Gather", "Resize", "Concat", "AveragePool"):
        for act in ("uint8", "int8", "uint16", "int16"):
            yield build(op, act, same_qparams=True)
    for act in ("uint8", "int8"):
        yield build("Resize", act, mode="nearest")
        yield build("Resize", act, mode="nearest", same_qparams=True)


def ort_all(mb, feeds, ref):
    with tempfile.TemporaryDirectory() as d:
        so = ort.SessionOptions()
        so.graph_optimization_level = ALL
        so.optimized_model_filepath = os.path.join(d, "o.onnx")
        so.log_severity_level = 3
        s = ort.InferenceSession(mb, so, providers=["CPUExecutionProvider"])
        ops = [n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node]
    return {"ops": ops, **diff(ref, s.run(None, feeds)[0])}


def qnn(mb, feeds, ref):
    common.LOG.clear()
    try:
        s = qnn_session(mb)
    except Exception as e:  # noqa: BLE001
        why = [m for sev, w, m in common.LOG if sev >= 1 and not BOILER.search(m)
               and ("qnn" in w.lower() or "QNN" in m)]
        return {"refused": (why[-1] if why else str(e)).strip()[:200]}
    eps = {ep for ep, _ in common.assignment(s)}
    return {"eps": sorted(eps), **diff(ref, s.run(None, feeds)[0])}


def openvino(mb, feeds, ref, core):
    try:
        cm = core.compile_model(core.read_model(mb), "CPU",
                                {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1})
    except Exception as e:  # noqa: BLE001
        return {"refused": str(e).strip().splitlines()[-1][:200]}
    rows = []
    for n in cm.get_runtime_model().get_ordered_ops():
        rt = n.get_rt_info()
        lt = rt["layerType"].astype(str) if "layerType" in rt else "?"
        if lt not in ("Input", "Output", "Parameter", "Result", "Const", "Reorder"):
            rows.append(f"{lt}:{rt['runtimePrecision'].astype(str) if 'runtimePrecision' in rt else '?'}")
    req = cm.create_infer_request()
    out = req.infer({k: v for k, v in feeds.items()})
    y = np.asarray(list(out.values())[0])
    return {"exec": rows, **diff(ref, y)}


def diff(ref, y):
    if y.dtype != ref.dtype or y.shape != ref.shape:
        return {"bad_output": f"{y.dtype}{list(y.shape)} vs {ref.dtype}{list(ref.shape)}"}
    ne = ~common.bits_equal(ref, y)
    d = {"differ": int(ne.sum()), "of": int(ref.size)}
    if ne.any() and ref.dtype.kind in "iu":
        d["max"] = int(np.abs(ref.astype(np.int64) - y.astype(np.int64)).max())
    elif ne.any():
        d["max_abs"] = float(np.abs(ref.astype(np.float64) - y.astype(np.float64)).max())
    return d


def main():
    import openvino as ov
    core = ov.Core()
    if USE_QNN:
        common.capture_log(1)
    rows = []
    for p in patterns():
        if isinstance(p, str):
            rows.append({"pattern": p})
            continue
        mb = p.bytes()
        row = {"pattern": p.name}
        try:
            ref = cpu_session(mb).run(None, p.feeds)[0]
        except Exception as e:  # noqa: BLE001
            row["ref_error"] = str(e).splitlines()[0][:200]
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
            continue
        row["ort_all"] = ort_all(mb, p.feeds, ref)
        if USE_QNN:
            row["qnn"] = qnn(mb, p.feeds, ref)
        row["openvino"] = openvino(mb, p.feeds, ref, core)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    out = os.path.join(os.path.dirname(__file__), "out", "survey.json")
    json.dump(rows, open(out, "w"), indent=1)  # a file: the QNN libraries print to stdout


if __name__ == "__main__":
    main()

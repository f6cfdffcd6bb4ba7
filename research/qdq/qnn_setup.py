"""QNN EP (HTP simulator) setup facts: assignment read-back, refusals, cost, processes, determinism.

Run: .venv/bin/python research/qdq/qnn_setup.py   (needs `pip install onnxruntime-qnn==2.7.0`)
"""
from __future__ import annotations

import glob
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402
from common import TP, cpu_session, helper, init, model, np, ort, qnn_options, qnn_session, vi  # noqa: E402


def qdq_pair(n=4096) -> bytes:
    inits = [init("s", np.float32(0.0372)), init("z", np.uint8(121))]
    return model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="Q"),
                  helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="DQ")],
                 [vi("x", TP.FLOAT, [1, n])], [vi("y", TP.FLOAT, [1, n])], inits)


def lone_q() -> bytes:
    inits = [init("s", np.float32(0.0372)), init("z", np.uint8(121))]
    return model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="Q")],
                 [vi("x", TP.FLOAT, [16])], [vi("q", TP.UINT8, [16])], inits)


def dq_add_q() -> bytes:
    inits = [init("sa", np.float32(0.02)), init("za", np.uint8(128)), init("sb", np.float32(0.03)),
             init("zb", np.uint8(100)), init("sy", np.float32(0.05)), init("zy", np.uint8(110))]
    return model([helper.make_node("DequantizeLinear", ["a", "sa", "za"], ["fa"], name="DQa"),
                  helper.make_node("DequantizeLinear", ["b", "sb", "zb"], ["fb"], name="DQb"),
                  helper.make_node("Add", ["fa", "fb"], ["f"], name="add"),
                  helper.make_node("QuantizeLinear", ["f", "sy", "zy"], ["y"], name="Qy")],
                 [vi("a", TP.UINT8, [256]), vi("b", TP.UINT8, [256])], [vi("y", TP.UINT8, [256])], inits)


def child_run(_=None):
    """Run inside a child process: register, create, run; return the output bytes."""
    s = qnn_session(qdq_pair())
    x = np.linspace(-6, 6, 4096, dtype=np.float32)[None]
    return s.run(None, {"x": x})[0].tobytes()


def main():
    out = {}
    t = time.perf_counter()
    import onnxruntime_qnn
    out["import_onnxruntime_qnn_s"] = round(time.perf_counter() - t, 4)
    t = time.perf_counter()
    common.register_qnn()
    out["register_s"] = round(time.perf_counter() - t, 4)
    out["versions"] = [ort.__version__, onnxruntime_qnn.__version__,
                       onnxruntime_qnn.build_and_package_info.qnn_version]
    out["ep_devices"] = [(d.ep_name, d.ep_vendor, str(d.device.type), d.ep_metadata.get("version"))
                         for d in ort.get_ep_devices()]
    common.capture_log(2)

    # session creation cost: first, then repeated
    times = []
    for i in range(6):
        t = time.perf_counter()
        s = qnn_session(dq_add_q() if i % 2 else qdq_pair())
        times.append(round(time.perf_counter() - t, 3))
    out["session_create_s_first_then_repeats"] = times
    a = np.arange(256, dtype=np.uint8)
    s = qnn_session(dq_add_q())
    t = time.perf_counter()
    for _ in range(20):
        s.run(None, {"a": a, "b": a[::-1].copy()})
    out["run_s_mean_of_20"] = round((time.perf_counter() - t) / 20, 5)

    # assignment info (the node -> EP map)
    out["assignment_dq_add_q"] = common.assignment(s)
    out["providers"] = s.get_providers()

    # profiling: what does the per-node event show?
    with tempfile.TemporaryDirectory() as d:
        so = qnn_options()
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(d, "p")
        sp = ort.InferenceSession(dq_add_q(), so)
        sp.run(None, {"a": a, "b": a})
        prof = json.load(open(sp.end_profiling()))
        out["profile_node_events"] = sorted({(e["name"], e["args"].get("op_name"), e["args"].get("provider"))
                                            for e in prof if e.get("cat") == "Node"})
        # optimized model file with a compiling EP
        so = qnn_options()
        so.optimized_model_filepath = os.path.join(d, "opt.onnx")
        try:
            ort.InferenceSession(dq_add_q(), so)
            import onnx
            m = onnx.load(so.optimized_model_filepath)
            out["optimized_model"] = [(n.op_type, n.domain) for n in m.graph.node]
        except Exception as e:  # noqa: BLE001
            out["optimized_model"] = f"{type(e).__name__}: {e}"
        # EP context model: the partitions as EPContext nodes
        so = qnn_options()
        so.add_session_config_entry("ep.context_enable", "1")
        so.add_session_config_entry("ep.context_file_path", os.path.join(d, "ctx.onnx"))
        try:
            ort.InferenceSession(dq_add_q(), so)
            import onnx
            m = onnx.load(os.path.join(d, "ctx.onnx"))
            out["ep_context_model"] = [(n.op_type, n.domain, n.name) for n in m.graph.node]
            out["ep_context_files"] = sorted(os.path.basename(p) for p in glob.glob(os.path.join(d, "*")))
        except Exception as e:  # noqa: BLE001
            out["ep_context_model"] = f"{type(e).__name__}: {e}"

    # refusals: exception + the log line that carries the reason
    for name, mb in [("lone_Q", lone_q())]:
        common.LOG.clear()
        try:
            qnn_session(mb)
            out[f"refusal_{name}"] = "accepted"
        except Exception as e:  # noqa: BLE001
            out[f"refusal_{name}"] = {"type": f"{type(e).__module__}.{type(e).__name__}", "msg": str(e),
                                      "log": [m for m in common.LOG if "EpContextIo" not in m[1]
                                              and "File mapped" not in m[2]]}

    # determinism: same session 5 runs, 5 fresh sessions
    x = np.random.default_rng(1).normal(0, 3, (1, 4096)).astype(np.float32)
    s = qnn_session(qdq_pair())
    same = {s.run(None, {"x": x})[0].tobytes() for _ in range(5)}
    fresh = {qnn_session(qdq_pair()).run(None, {"x": x})[0].tobytes() for _ in range(3)}
    b = np.random.default_rng(2).integers(0, 256, 256, dtype=np.uint8)
    s2 = qnn_session(dq_add_q())
    same2 = {s2.run(None, {"a": a, "b": b})[0].tobytes() for _ in range(5)}
    fresh2 = {qnn_session(dq_add_q()).run(None, {"a": a, "b": b})[0].tobytes() for _ in range(3)}
    out["deterministic"] = {"qdq_same_session": len(same) == 1, "qdq_fresh": len(fresh) == 1 and fresh == same,
                            "add_same_session": len(same2) == 1, "add_fresh": len(fresh2) == 1 and fresh2 == same2}

    # processes: spawn and fork (fork after the parent already registered and used the EP)
    ref = child_run()
    for method in ("spawn", "fork", "forkserver"):
        t = time.perf_counter()
        try:
            with mp.get_context(method).Pool(1) as pool:
                r = pool.apply_async(child_run).get(timeout=120)
            out[f"child_{method}"] = {"ok": r == ref, "s": round(time.perf_counter() - t, 2)}
        except Exception as e:  # noqa: BLE001
            out[f"child_{method}"] = f"{type(e).__name__}: {e}"
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()

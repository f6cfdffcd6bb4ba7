"""Packing feasibility (issue 45): many independent cases as nodes of one model, one session.

1. onnxruntime CPU EP, ORT_DISABLE_ALL, through qconform's own runner (its byte adapter): a seeded
   sample of corpus cases, each run alone and packed N to a model; every output compared by bits.
2. QNN EP HTP: accepted QDQ patterns alone and packed 100 to a model; bits and session times.
Run: .venv/bin/python research/qdq/packing.py [ort|qnn] [sample-size]
"""
from __future__ import annotations

import json
import os
import random
import sys
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(__file__))
import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import compose, helper  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "out")


def same_bits(a, b) -> bool:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def pack(models: list[onnx.ModelProto], prefixes: list[str]) -> onnx.ModelProto:
    """One model whose graph is the union of the prefixed graphs (no edges between them)."""
    nodes, inputs, outputs, inits, vinfo = [], [], [], [], []
    imports: dict[str, int] = {}
    for m, p in zip(models, prefixes):
        g = compose.add_prefix(m, p).graph
        nodes += g.node
        inputs += g.input
        outputs += g.output
        inits += g.initializer
        vinfo += g.value_info
        for o in m.opset_import:
            if imports.setdefault(o.domain, o.version) != o.version:
                raise ValueError(f"opset clash in domain {o.domain!r}")
    g = helper.make_graph(nodes, "packed", inputs, outputs, inits, value_info=vinfo)
    out = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in imports.items()])
    out.ir_version = max(m.ir_version for m in models)
    return out


def ort_packing(sample: int, per_model: int = 50, seed: int = 45) -> dict:
    from qconform import corpus
    from qconform.model import build_model
    from qconform.runner import resolve

    runner = resolve("onnxruntime")
    idx = corpus.index(corpus.DEFAULT_ROOT)
    rng = random.Random(seed)
    ids = rng.sample([r.id for r in idx.refs], sample)
    cases = idx.cases_of(ids)
    alone, models, t_alone, t_ran, refused = {}, {}, 0.0, 0.0, 0
    for cid in ids:
        c = cases[cid]
        m = build_model(c)
        t = time.perf_counter()
        try:
            alone[cid] = runner.run(m, c.feeds)
            models[cid] = m
            t_ran += time.perf_counter() - t
        except Exception:  # noqa: BLE001  (refusals and errors: not packable)
            refused += 1
        t_alone += time.perf_counter() - t
    # group by the opset imports (one model has one version per domain)
    groups = defaultdict(list)
    for cid, m in models.items():
        groups[tuple(sorted((o.domain, o.version) for o in m.opset_import))].append(cid)
    same = differ = packed_errors = 0
    t_packed = 0.0
    bad = []
    for key, cids in groups.items():
        for i in range(0, len(cids), per_model):
            chunk = cids[i:i + per_model]
            prefixes = [f"c{j}_" for j in range(len(chunk))]
            pm = pack([models[c] for c in chunk], prefixes)
            feeds = {p + k: v for c, p in zip(chunk, prefixes) for k, v in cases[c].feeds.items()}
            t = time.perf_counter()
            try:
                outs = runner.run(pm, feeds)
            except Exception as e:  # noqa: BLE001
                packed_errors += 1
                bad.append({"chunk": chunk[:3], "error": str(e)[:200]})
                t_packed += time.perf_counter() - t
                continue
            t_packed += time.perf_counter() - t
            k = 0
            for c in chunk:
                n = len(alone[c])
                if all(same_bits(a, b) for a, b in zip(alone[c], outs[k:k + n])):
                    same += 1
                else:
                    differ += 1
                    bad.append({"case": c})
                k += n
    return {"sampled": sample, "ran_alone": len(models), "refused_or_error_alone": refused,
            "packed_models": sum(-(-len(v) // per_model) for v in groups.values()), "per_model": per_model,
            "identical": same, "differ": differ, "packed_model_errors": packed_errors, "examples": bad[:10],
            "seconds_alone_all_sampled": round(t_alone, 2), "seconds_alone_those_packed": round(t_ran, 2),
            "seconds_packed": round(t_packed, 2)}


def qnn_packing(n: int = 100) -> dict:
    import common
    from common import qnn_session
    from patterns import build, dq_q, q_dq

    common.capture_log(3)
    makers = [lambda p, s: build("Add", "uint8", seed=s, prefix=p), lambda p, s: build("Mul", "uint8", seed=s, prefix=p),
              lambda p, s: dq_q("uint8", seed=s, prefix=p), lambda p, s: build("Relu", "uint8", seed=s, prefix=p),
              lambda p, s: build("MatMul", "uint8", "int8", seed=s, prefix=p),
              lambda p, s: build("AveragePool", "uint8", seed=s, prefix=p),
              lambda p, s: build("Concat", "uint16", seed=s, prefix=p), lambda p, s: q_dq("uint8", seed=s, prefix=p),
              lambda p, s: build("Conv", "uint8", "int8", seed=s, prefix=p),
              lambda p, s: build("Sigmoid", "uint8", seed=s, prefix=p)]
    pats = [makers[i % len(makers)](f"p{i}_", i) for i in range(n)]
    alone, t_alone, t_first = [], [], None
    for p in pats:
        t = time.perf_counter()
        s = qnn_session(p.bytes())
        t_alone.append(time.perf_counter() - t)
        alone.append(s.run(None, p.feeds))
    models = [onnx.load_from_string(p.bytes()) for p in pats]
    pm = pack(models, [""] * n)  # names are already prefixed
    feeds = {k: v for p in pats for k, v in p.feeds.items()}
    t = time.perf_counter()
    s = qnn_session(pm.SerializeToString())
    t_packed_session = time.perf_counter() - t
    eps = common.assignment(s)
    t = time.perf_counter()
    outs = s.run(None, feeds)
    t_packed_run = time.perf_counter() - t
    names = [o.name for o in s.get_outputs()]
    by_name = dict(zip(names, outs))
    differ = []
    for i, (p, a) in enumerate(zip(pats, alone)):
        got = [by_name[o.name] for o in p.outputs]
        if not all(same_bits(x, y) for x, y in zip(a, got)):
            differ.append(p.name)
    return {"patterns": n, "identical": n - len(differ), "differ": differ,
            "partitions": [(ep, len(nodes)) for ep, nodes in eps],
            "session_s_alone_each": [round(x, 3) for x in t_alone[:5]] + ["..."],
            "session_s_alone_total": round(sum(t_alone), 2), "session_s_alone_median": round(float(np.median(t_alone)), 3),
            "session_s_packed": round(t_packed_session, 2), "run_s_packed": round(t_packed_run, 3)}


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "ort"
    res = ort_packing(int(sys.argv[2]) if len(sys.argv) > 2 else 600) if what == "ort" else qnn_packing()
    os.makedirs(OUT, exist_ok=True)
    json.dump(res, open(os.path.join(OUT, f"packing_{what}.json"), "w"), indent=1)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()

"""Own kernels vs peers on 16M elements: cpu-kernel vs onnxruntime (float32 -> int8, -> float8e4m3fn)
and vs the numpy / ml_dtypes cast doing the same conversion. Prints figures, asserts nothing.

Each contender runs in its own child process (the same data, generated from a fixed seed), so the
peak RSS printed is that contender's own, from the OS (wait4 rusage). Times are the best of --repeat
runs of the prepared callable (model already prepared: a session for ORT, the compiled library for
cpu-kernel). Goal: cpu-kernel within 2x of ORT and faster than the ml_dtypes cast.

    python benchmarks/bench_kernels.py [--n 16777216] [--repeat 5]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _common  # noqa: E402

TARGETS = {"int8": "QuantizeLinear-25/float32-int8/scale=float32:0.1",
           "float8e4m3fn": "QuantizeLinear-25/float32-float8e4m3fn/scale=float32:0.1/saturate=1"}


def one(contender: str, target: str, n: int, repeat: int) -> dict:
    import numpy as np

    rng = np.random.default_rng(1234)
    x = rng.standard_normal(n, dtype=np.float32)  # in float32 and in place: no float64 temporary
    x *= np.float32(20)  # inflates every contender's peak RSS (the input alone is 4n bytes)
    s = np.float32(0.1)
    if contender in ("cpu-kernel", "onnxruntime"):
        from qconform import sweep as S
        from qconform.runner import prepare, resolve

        sw = S.Sweep("QuantizeLinear", 25, "float32", "float32", 0.1, target, 0.0, 1 if target != "int8" else None)
        spec = "qconform.runners.cpu_kernel:CpuKernelRunner" if contender == "cpu-kernel" else "onnxruntime"
        f = prepare(resolve(spec), S.sweep_model(sw))
        call = lambda: f({"x": x})[0]  # noqa: E731
    elif target == "int8":  # numpy: the same formula with numpy's IEEE float32 ops
        call = lambda: np.clip(np.rint(x / s), -128, 127).astype(np.int8)  # noqa: E731
    else:  # ml_dtypes' cast (non-saturating; the division by numpy)
        import ml_dtypes

        call = lambda: (x / s).astype(ml_dtypes.float8_e4m3fn)  # noqa: E731
    call()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t0)
    return {"seconds": best, "peak_rss_mib": _common.peak_rss_mib()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--one", nargs=2, metavar=("CONTENDER", "TARGET"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.one[0], a.one[1], a.n, a.repeat)))
        return 0
    print(f"machine: {_common.machine()}")
    print(f"{a.n:,} float32 elements, per-tensor scale 0.1, best of {a.repeat}, one thread each")
    for target in TARGETS:
        peer = "numpy" if target == "int8" else "ml_dtypes"
        res = {}
        for c in ("cpu-kernel", "onnxruntime", peer):
            _, rss, rc, out = _common.run_child([_common.python(), __file__, "--one", c, target, "--n", str(a.n),
                                                 "--repeat", str(a.repeat)])
            if rc != 0:
                print(f"  {c}: failed\n{out}")
                continue
            res[c] = json.loads(out.strip().splitlines()[-1])
            res[c]["peak_rss_mib"] = rss
        print(f"float32 -> {target}:")
        for c, r in res.items():
            print(f"  {c:12} {r['seconds'] * 1e3:9.1f} ms  {a.n / r['seconds'] / 1e6:8.1f} M elem/s  "
                  f"peak RSS {r['peak_rss_mib']:7.0f} MiB")
        if "cpu-kernel" in res and "onnxruntime" in res:
            k = res["cpu-kernel"]["seconds"]
            print(f"  ratio cpu-kernel / onnxruntime = {k / res['onnxruntime']['seconds']:.2f}  (goal <= 2.0)")
            if peer in res:
                print(f"  ratio cpu-kernel / {peer} = {k / res[peer]['seconds']:.2f}  (goal < 1.0)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

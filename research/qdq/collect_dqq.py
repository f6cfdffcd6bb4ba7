"""Collect QNN HTP's DQ→Q (uint8→uint8 requantisation) over all 256 codes for seeded random
parameters, to fit a model of its arithmetic. Writes out/dqq.json."""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import TP, cpu_session, helper, init, model, np, qnn_session, vi  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "out")


def dqq(s1, z1, s2, z2, n=256) -> bytes:
    inits = [init("s1", np.float32(s1)), init("z1", np.uint8(z1)), init("s2", np.float32(s2)), init("z2", np.uint8(z2))]
    return model([helper.make_node("DequantizeLinear", ["a", "s1", "z1"], ["f"]),
                  helper.make_node("QuantizeLinear", ["f", "s2", "z2"], ["y"])],
                 [vi("a", TP.UINT8, [n])], [vi("y", TP.UINT8, [n])], inits)


def main(n=int(sys.argv[1]) if len(sys.argv) > 1 else 150):
    rng = np.random.default_rng(7)
    a = np.arange(256, dtype=np.uint8)
    rows = [(0.0372, 121, 0.0291, 3)]
    for i in range(n):
        if i % 3 == 0:   # 4-decimal scales, as people write them
            s1, s2 = round(rng.uniform(0.001, 0.1), 4), round(rng.uniform(0.001, 0.1), 4)
        elif i % 3 == 1:  # arbitrary float32 scales
            s1, s2 = (float(np.float32(2.0 ** rng.uniform(-10, -2))) for _ in range(2))
        else:             # ratio a power of two (exact ties in the exact arithmetic)
            s1 = float(np.float32(2.0 ** rng.uniform(-10, -2)))
            s2 = float(np.float32(s1 * 2.0 ** rng.integers(-1, 3)))
        rows.append((s1, int(rng.integers(0, 256)), s2, int(rng.integers(0, 256))))
    out = []
    for s1, z1, s2, z2 in rows:
        mb = dqq(s1, z1, s2, z2)
        out.append({"p": [s1, z1, s2, z2], "ref": cpu_session(mb).run(None, {"a": a})[0].tolist(),
                    "qnn": qnn_session(mb).run(None, {"a": a})[0].tolist()})
    os.makedirs(OUT, exist_ok=True)
    json.dump(out, open(os.path.join(OUT, "dqq.json"), "w"))
    d = sum(int((np.array(r["ref"]) != np.array(r["qnn"])).sum()) for r in out)
    print(f"{len(out)} parameter sets, {d} of {256 * len(out)} codes differ")


if __name__ == "__main__":
    main()

"""``qconform certify --model``: a model of 20 quantized groups certified end to end, and how long it took.

The models are ``tests/model_builders.group_stack`` (20 elementwise layers, Add, Mul and Sigmoid in turn)
and ``conv_stack`` (20 padded 3x3 convolutions with bias and Relu, whose dense sums the oracle mostly
refuses at calibrated scales, so each group is also drafted on its sparse sets), quantized by
onnxruntime's ``quantize_static`` in the QDQ and the QOperator format; each is certified on
onnxruntime with ``-j 1`` and ``-j 2`` (reading the model, drafting every group at its parameters, the
oracle, the engine, the report, groups.md and the whole-model check), each run a child process. Prints
the wall time, the groups judged and the cases, and the ratio to the target; asserts nothing.
Target: <= 60 s on 2 cores (issue 66).

    python benchmarks/bench_model_certify.py [--groups 20] [-j 1] [-j 2]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import _common  # noqa: E402

TARGET_S = 60.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=20, help="quantized layers in the model (default 20)")
    ap.add_argument("-j", type=int, action="append", default=None, help="worker counts (default: 1 and 2)")
    a = ap.parse_args()
    from functools import partial

    from model_builders import conv_stack, group_stack, quantized

    print(f"machine: {_common.machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for base, fmt in [(b, f) for b in (group_stack, conv_stack) for f in ("QDQ", "QOperator")]:
            builder = partial(base, groups=a.groups)
            builder.__name__ = f"{base.__name__}{a.groups}"  # type: ignore[attr-defined]
            model = quantized(folder, builder, fmt)
            for jobs in a.j or [1, 2]:
                report = folder / f"report-{base.__name__}-{fmt}-{jobs}"
                wall, rss, rc, out = _common.run_child([_common.python(), "-m", "qconform.cli", "certify", "--model",
                                                        str(model), "--runner", "onnxruntime", "-j", str(jobs),
                                                        "--report", str(report)])
                data = json.loads((report / "report.json").read_text()) if (report / "report.json").is_file() else {}
                groups = (data.get("invocation") or {}).get("model", {}).get("groups", 0)
                whole = next((ln for ln in out.splitlines() if ln.startswith("whole-model check: the model run")), "")
                print(f"{base.__name__} {fmt} ({a.groups} layers), -j {jobs}: {wall:.1f} s wall ({wall / TARGET_S:.2f}x the "
                      f"{TARGET_S:.0f} s target), peak RSS {rss:.0f} MiB, exit {rc}: {groups} groups judged, "
                      f"{len(data.get('cases') or ()):,} cases")
                if whole:
                    print(f"  {whole}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

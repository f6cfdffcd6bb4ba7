"""Suite overhead: wall time of the whole default corpus against onnxruntime (`pytest --runner=onnxruntime`,
one process) vs the time onnxruntime itself spends creating sessions and running the same models.
Prints figures, asserts nothing. Goal: ratio <= 1.3.

The second figure is measured in this process, case by case, on the same corpus: the time inside
``onnxruntime.InferenceSession(...)`` plus ``session.run`` (via IOBinding, as the runner does), with
the model bytes and the input OrtValues made beforehand, so it is ORT's own work only.

    python benchmarks/bench_suite_overhead.py
"""
from __future__ import annotations

import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _common  # noqa: E402


def ort_own_seconds() -> tuple[float, int]:
    import numpy as np
    import onnxruntime as ort

    from qconform import corpus, dtypes
    from qconform.model import build_model
    from qconform.plugin import default_golden
    from runners import onnxruntime_runner as R

    ort.set_default_logger_severity(4)  # the corpus holds models ORT rejects: no log line for each
    runner = R.OnnxRuntimeRunner()
    total, n = 0.0, 0
    for case in corpus.load(default_golden()).cases:
        model = build_model(case)
        if any(code and not R._ort_has_type(code) for code in R._model_types(model)):
            continue
        data = model.SerializeToString()
        values = {}
        for name, arr in case.feeds.items():
            t = R._ADAPTED.get(dtypes.BY_DTYPE[arr.dtype].onnx) if arr.dtype in dtypes.BY_DTYPE else None
            values[name] = R._to_ortvalue(t, arr) if t else ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(arr))
        so = runner._session_options()
        t0 = time.perf_counter()
        try:
            sess = ort.InferenceSession(data, so, providers=runner.providers)
            b = sess.io_binding()
            for name, v in values.items():
                b.bind_ortvalue_input(name, v)
            for o in sess.get_outputs():
                b.bind_output(o.name, "cpu")
            sess.run_with_iobinding(b)
        except Exception:  # unsupported by ORT: its time still counts (it is ORT's work)
            pass
        total += time.perf_counter() - t0
        n += 1
    return total, n


def main() -> int:
    print(f"machine: {_common.machine()}")
    wall, rss, rc, out = _common.run_child([_common.python(), "-m", "pytest", "--runner=onnxruntime", "-q",
                                           "-p", "no:cacheprovider", "-p", "no:randomly"])
    tail = [ln for ln in out.splitlines() if re.search(r"\d+ (passed|failed|skipped)", ln)]
    print(f"suite: pytest --runner=onnxruntime (1 process): {wall:.1f} s wall, peak RSS {rss:.0f} MiB, "
          f"exit {rc}: {tail[-1] if tail else '?'}")
    t0 = time.perf_counter()
    own, n = ort_own_seconds()
    print(f"onnxruntime's own time (session creation + run) over the same {n} models: {own:.1f} s "
          f"(measured in {time.perf_counter() - t0:.1f} s, peak RSS {_common.peak_rss_mib():.0f} MiB)")
    print(f"ratio suite wall / ORT's own time = {wall / own:.2f}  (goal <= 1.3)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

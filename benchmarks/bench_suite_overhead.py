"""Suite overhead: what a certification run costs beyond the runtime's own work, and what it leaves.

Prints figures and the targets side by side (ratios against onnxruntime's own time measured in the
same run); asserts nothing.

* suite wall time, `pytest --runner=onnxruntime` on the whole default corpus, one process, with
  isolation on (the default) and off, against onnxruntime's own session creation + run on the same
  models (measured here, model bytes and input OrtValues made beforehand, so it is ORT's work only);
* `qconform certify --runner onnxruntime` (the engine without a pytest item per case) with -j 1 and
  -j 2: its ratio to onnxruntime's own time, and what the second worker buys;
* the artifacts of the isolated run: report.json and report.html sizes; the same run again with
  ``--junitxml`` for the JUnit XML's size and what pytest's own JUnit writer adds to the wall time;
* peak RSS of the run (the largest of its processes);
* a `-k` run selecting about ten cases, end to end;
* printing failures: the same ~2,000 failing cases of a deliberately wrong runner with the FAILURES
  section on and off (`--tb=no`); the difference is what printing them costs.

    python benchmarks/bench_suite_overhead.py [--quick] [--certify-only | --pytest-only]
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _common  # noqa: E402

PYTEST = [_common.python(), "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q"]
CERTIFY = [_common.python(), "-m", "qconform.cli", "certify", "--runner", "onnxruntime"]
FLIP = f"{Path(__file__).resolve().with_name('_runners.py')}:FlipIntegerRunner"
#: ~2,500 failures of the flip runner: every integer output of these op versions is wrong.
FAILING_SELECTION = "op_QuantizeLinear and (opset_21 or opset_23 or opset_24 or opset_25)"
TEN_CASES = "QuantizeLinear-13 and per-tensor"


def ort_own_seconds() -> tuple[float, int]:
    """onnxruntime's own session creation + run over the corpus, in child processes: a model on which
    onnxruntime aborts the process (the corpus has some: the report's "crashed" cases) ends one child,
    is left out, and the next child goes on after it."""
    import subprocess
    total, n, start, left_out = 0.0, 0, 0, 0
    while True:
        proc = subprocess.run([_common.python(), __file__, "--ort-own-from", str(start)],
                              capture_output=True, text=True)
        done = [ln.split() for ln in proc.stdout.splitlines() if ln.startswith("case ")]
        for _, i, t, counted in done:
            total += float(t)
            n += int(counted)
        if proc.returncode == 0:
            break
        start = (int(done[-1][1]) if done else start - 1) + 2  # past the case that ended the child
        left_out += 1
    if left_out:
        print(f"onnxruntime's own time: {left_out} case(s) left out, each ended its process")
    return total, n


def _ort_own_from(start: int) -> None:
    import numpy as np
    import onnxruntime as ort

    from qconform import corpus, dtypes
    from qconform.model import build_model
    from qconform.runners import onnxruntime_runner as R

    ort.set_default_logger_severity(4)  # the corpus holds models ORT rejects: no log line for each
    runner = R.OnnxRuntimeRunner()
    for i, case in enumerate(corpus.load(corpus.DEFAULT_ROOT).cases):
        if i < start:
            continue
        model = build_model(case)
        if any(code and not R._ort_has_type(code) for code in R._model_types(model)):
            print(f"case {i} 0 0", flush=True)
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
        print(f"case {i} {time.perf_counter() - t0} 1", flush=True)


def _tail(out: str) -> str:
    tail = [ln for ln in out.splitlines() if re.search(r"\d+ (passed|failed|skipped|deselected)", ln)]
    return tail[-1].strip("= ") if tail else "?"


def _mib(path: Path) -> float:
    return path.stat().st_size / 2**20 if path.exists() else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="skip the --isolate=off run")
    only = ap.add_mutually_exclusive_group()
    only.add_argument("--certify-only", action="store_true",
                    help="only onnxruntime's own time and qconform certify -j 1 / -j 2 (a few minutes)")
    only.add_argument("--pytest-only", action="store_true",
                    help="only onnxruntime's own time and the two pytest --runner=onnxruntime runs (a few minutes)")
    ap.add_argument("--ort-own-from", type=int, help=argparse.SUPPRESS)  # the child of ort_own_seconds
    a = ap.parse_args()
    if a.ort_own_from is not None:
        _ort_own_from(a.ort_own_from)
        return 0
    print(f"machine: {_common.machine()}")
    own, n = ort_own_seconds()
    print(f"onnxruntime's own time (session creation + run) over {n} models: {own:.1f} s")

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        if not a.certify_only:
            # the run the target names (with qconform's report), then the same with pytest's own JUnit
            # writer, whose XML tree of every item costs its process seconds and memory of its own
            wall, rss, rc, text = _common.run_child([*PYTEST, "--runner=onnxruntime", f"--report={out / 'rep'}"])
            print(f"suite, isolation on (1 process): {wall:.1f} s wall, peak RSS {rss:.0f} MiB, exit {rc}: {_tail(text)}")
            print(f"  ratio to onnxruntime's own time: {wall / own:.2f}  (target <= 3.0)")
            print(f"  peak RSS {rss:.0f} MiB  (target <= 400)")
            print(f"  report.json {_mib(out / 'rep' / 'report.json'):.1f} MiB  (target <= 5); "
                  f"report.html {_mib(out / 'rep' / 'report.html'):.1f} MiB")
            wall_j, rss_j, _, _ = _common.run_child([*PYTEST, "--runner=onnxruntime", f"--report={out / 'repj'}",
                                                     f"--junitxml={out / 'junit.xml'}"])
            print(f"  the same with --junitxml: {wall_j:.1f} s wall ({wall_j / own:.2f}x), peak RSS {rss_j:.0f} MiB; "
                  f"JUnit XML {_mib(out / 'junit.xml'):.1f} MiB  (target <= 5)")
        if a.pytest_only:
            return 0
        j1, rss1, rc1, text1 = _common.run_child([*CERTIFY, "-j", "1", "--report", str(out / "c1")])
        j2, rss2, rc2, _ = _common.run_child([*CERTIFY, "-j", "2", "--report", str(out / "c2")])
        first = next((ln for ln in text1.splitlines() if " cases in " in ln), "?")
        print(f"qconform certify -j 1: {j1:.1f} s wall, peak RSS {rss1:.0f} MiB, exit {rc1}: {first}")
        print(f"  ratio to onnxruntime's own time: {j1 / own:.2f}  (target <= 1.5, moonshot 1.2)")
        print(f"qconform certify -j 2: {j2:.1f} s wall, peak RSS {rss2:.0f} MiB, exit {rc2}")
        print(f"  -j 2 is {j1 / j2:.2f}x faster than -j 1  (target >= 1.7 on 2 cores)")
        print(f"  report.json {_mib(out / 'c2' / 'report.json'):.1f} MiB  (target <= 5)")
        if a.certify_only:
            return 0
        if not a.quick:
            wall_off, rss_off, rc, text = _common.run_child([*PYTEST, "--runner=onnxruntime", "--isolate=off"])
            print(f"suite, isolation off (1 process): {wall_off:.1f} s wall, peak RSS {rss_off:.0f} MiB: {_tail(text)}")
            print(f"  ratio to onnxruntime's own time: {wall_off / own:.2f}  (target <= 1.5)")

        k_cmd = [*PYTEST, "--runner=onnxruntime", "-k", TEN_CASES]
        wall_k, _, _, text = _common.run_child(k_cmd)
        print(f"-k {TEN_CASES!r}: {wall_k:.2f} s end to end: {_tail(text)}  (target <= 2 s for ~10 cases)")
        if os.environ.get("PYTHONDONTWRITEBYTECODE"):  # this shell compiles every module at every start
            _common.run_child(k_cmd, env={"PYTHONDONTWRITEBYTECODE": None})  # writes the bytecode caches
            warm, _, _, _ = _common.run_child(k_cmd, env={"PYTHONDONTWRITEBYTECODE": None})
            print(f"  {warm:.2f} s with Python's bytecode cache (PYTHONDONTWRITEBYTECODE is set in this shell)")

        shown, _, _, text = _common.run_child([*PYTEST, f"--runner={FLIP}", "-m", FAILING_SELECTION])
        m = re.search(r"(\d+) failed", _tail(text))
        failed = int(m.group(1)) if m else 0
        silent, _, _, _ = _common.run_child([*PYTEST, f"--runner={FLIP}", "-m", FAILING_SELECTION, "--tb=no"])
        cost = shown - silent
        per2000 = max(0.0, cost) * 2000 / failed if failed else float("nan")
        print(f"printing {failed} failures: {cost:+.1f} s ({shown:.1f} s with the FAILURES section, {silent:.1f} s "
              f"with --tb=no; a difference below ~2 s is run-to-run noise), {per2000:.1f} s per 2,000  "
              f"(target <= 5 s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

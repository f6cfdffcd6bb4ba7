"""The body of scripts/gpu-check.sh, run with the installed wheel on PYTHONPATH (see that script's
header for how to run it). Each step runs only while the budget lasts; what did not run is named.

Steps: the device (name, driver, CUDA versions); the linted PTX for its architecture (digest,
NVRTC, lint) and the runner's own describe() digest; the whole corpus through gpu-kernel
(``qconform certify``); the compute ops again on their own (QLinearMatMul, QLinearConv, ConvInteger,
MatMulInteger: counts per op version and their time); every default-domain sweep; every full 2^32 sweep (stored digests checked
first); then, with time left, benchmarks/bench_sweep.py: one full 2^32 sweep on the GPU against
onnxruntime on the CPU. Ends with one line per figure in summary.txt.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_NO_DEVICE, EXIT_SETUP, EXIT_BUDGET = 0, 1, 2, 3, 4
FULL = "QuantizeLinear-25/float32-"
BENCH_SWEEP = "QuantizeLinear-25/float32-float8e4m3fn/scale=float32:1.0/saturate=1"
#: Files certify writes that are not kept (the device returns at most 8 files; report.json has it all).
CERTIFY_DROP = ("report.html", "semantics.html", "summary.md", "SHA256SUMS")


class Check:
    """The budget, the report folder and the summary lines."""

    def __init__(self, out: Path, deadline: float, jobs: int, runner: str) -> None:
        self.out, self.deadline, self.jobs, self.runner = out, deadline, jobs, runner
        self.lines: list[str] = []
        self.skipped: list[str] = []
        self.failed = False

    def left(self) -> float:
        return self.deadline - time.time()

    def figure(self, line: str) -> None:
        self.lines.append(line)
        print(f"== {line}", flush=True)

    def skip(self, what: str, why: str) -> None:
        self.skipped.append(f"{what} ({why})")
        print(f"== skipped: {what} ({why})", flush=True)

    def qconform(self, args: list[str], need: float, what: str) -> tuple[int | None, float]:
        """``qconform ARGS`` from the installed wheel, killed (with its workers) when the budget ends.
        Returns (exit status or None when it ran out of time, seconds)."""
        if self.left() < need:
            self.skip(what, f"{max(self.left(), 0):.0f} s left, it needs about {need:.0f} s")
            return None, 0.0
        # -P: the working folder (a checkout) is not importable, only the installed wheel
        cmd = [sys.executable, "-P", "-c", "from qconform.cli import run; run()", *args]
        print(f"$ qconform {' '.join(args)}", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, start_new_session=True)
        try:
            rc = proc.wait(timeout=max(self.left(), 1))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
        return rc, time.perf_counter() - t0


def device(check: Check) -> str | None:
    """The device line, or None (and the reason printed) when no CUDA device is present."""
    smi = ""
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - no cupy, no driver, no device
        reason = f"{type(exc).__name__}: {exc}".strip()
        check.figure(f"device: no CUDA device is present ({reason.splitlines()[0][:200]}); nothing ran on a GPU")
        return None
    if not count:
        check.figure("device: no CUDA device is present (cupy sees 0 devices); nothing ran on a GPU")
        return None
    rt = cupy.cuda.runtime
    props = rt.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    arch = f"sm_{props['major']}{props['minor']}"

    def ver(v: int) -> str:
        return f"{v // 1000}.{v % 1000 // 10}"

    driver = smi.split(",")[1].strip() if smi.count(",") >= 1 else "?"
    check.figure(f"device: {name} ({arch}, {count} device(s)), driver {driver}, CUDA driver API "
                 f"{ver(rt.driverGetVersion())}, CUDA runtime {ver(rt.runtimeGetVersion())}, CuPy {cupy.__version__}")
    return arch


def ptx_step(check: Check, arch: str) -> str | None:
    """Build and lint the PTX for ``arch``; save it; return its digest (None: no NVRTC)."""
    from qconform.kernels import ptx

    try:
        built = ptx.build(arch)
    except ptx.NvrtcUnavailable as exc:
        check.figure(f"ptx: not built, {exc}")
        check.failed = True
        return None
    (check.out / f"qkernels.{arch}.ptx").write_text(built.text)
    lint = "lint OK" if not built.issues else f"{len(built.issues)} lint issue(s): {built.issues[0]}"
    check.failed |= bool(built.issues)
    check.figure(f"ptx: sha256 {built.digest}, {arch}, NVRTC {built.nvrtc} ({ptx.library_path()}), "
                 f"{len(built.text.splitlines())} lines, {lint}")
    return built.digest


def runner_step(check: Check, digest: str | None) -> bool:
    """Start gpu-kernel itself: its describe() must name the digest the lint read."""
    from qconform.runner import Unsupported
    from qconform.runners.gpu_kernel import GpuKernelRunner

    try:
        info = GpuKernelRunner().describe()
    except Unsupported as exc:
        check.figure(f"runner: gpu-kernel cannot start: {exc}")
        check.failed = True
        return False
    got = info["options"]["ptx_sha256"]
    same = "the same PTX the lint read" if got == digest else f"NOT the linted PTX {digest}"
    check.failed |= got != digest
    check.figure(f"runner: gpu-kernel loaded PTX sha256 {got} from a file ({same}); {info['implementation']}")
    return got == digest


def corpus_step(check: Check) -> None:
    report = check.out / "certify"
    rc, secs = check.qconform(["certify", "--runner", check.runner, "-j", str(min(check.jobs, 8)),
                               "--report", str(report)], 30, f"the whole corpus through {check.runner}")
    if rc is None and secs == 0:
        return
    for name in CERTIFY_DROP:
        (report / name).unlink(missing_ok=True)
    path = report / "report.json"
    if rc is None or not path.is_file():
        check.figure(f"corpus: {check.runner} did not finish ({'out of time' if rc is None else f'exit {rc}'}, {secs:.0f} s)")
        check.failed = True
        return
    data = json.loads(path.read_text())
    c = data["counts"]
    bad = c["fail"] + c["error"] + c["crashed"] + c["timeout"]
    check.failed |= bool(bad or c["unsupported"])
    check.figure(f"corpus: {check.runner} {c['pass']:,} pass, {c['fail']:,} fail, {c['error']:,} error, "
                 f"{c['unsupported']:,} unsupported, {c['info']:,} info of {c['collected']:,} cases in {secs:.1f} s "
                 f"(-j {min(check.jobs, 8)}; runner ptx {data['runner'].get('options', {}).get('ptx_sha256', '?')[:12]})")


def compute_globs() -> list[str]:
    """The compute ops in the kernels' scope, as certify --case globs: every operator whose declaration
    says the kernels implement it and that contracts (a matmul or a convolution), and onnxruntime's
    com.microsoft contrib ops in the scope (issue 67: QLinearAdd/Mul, MatMulNBits, GatherBlockQuantized,
    the composed ones), whose own QuantizeLinear/DequantizeLinear are left to the whole-corpus step."""
    from qconform.case import MS_DOMAIN
    from qconform.declarations.operators import OPERATORS

    contrib = lambda o: o.domain == MS_DOMAIN and o.kind.value not in ("quantize", "dequantize")  # noqa: E731
    return [f"{o.label}-*" for o in OPERATORS if o.kernel and (o.contraction or contrib(o))]


def compute_step(check: Check) -> None:
    """The compute ops alone (QLinearMatMul, QLinearConv, ConvInteger, MatMulInteger, ...): their
    counts per op version and their own time, apart from the whole corpus's."""
    globs = compute_globs()
    report = Path(tempfile.mkdtemp(prefix="gpu-check-compute-"))  # not kept: the whole corpus's report has every case
    args = ["certify", "--runner", check.runner, "-j", str(min(check.jobs, 8)), "--report", str(report)]
    for g in globs:
        args += ["--case", g]
    rc, secs = check.qconform(args, 20, f"the compute ops through {check.runner}")
    if rc is None and secs == 0:
        shutil.rmtree(report, ignore_errors=True)
        return
    path = report / "report.json"
    if rc is None or not path.is_file():
        shutil.rmtree(report, ignore_errors=True)
        check.figure(f"compute ops: {check.runner} did not finish ({'out of time' if rc is None else f'exit {rc}'}, "
                     f"{secs:.0f} s)")
        check.failed = True
        return
    data = json.loads(path.read_text())
    shutil.rmtree(report, ignore_errors=True)
    per: dict[str, dict[str, int]] = {}
    for row in data["matrix"]:
        counts = per.setdefault(row["op_version"], {})
        for verdict, n in row["counts"].items():
            counts[verdict] = counts.get(verdict, 0) + n
    c = data["counts"]
    bad = c["fail"] + c["error"] + c["crashed"] + c["timeout"]
    check.failed |= bool(bad or c["unsupported"]) or not per
    ops = "; ".join(f"{op} " + ", ".join(f"{n:,} {v}" for v, n in sorted(counts.items())) for op, counts in per.items())
    check.figure(f"compute ops: {check.runner} {c['pass']:,} pass, {bad:,} failing, {c['unsupported']:,} unsupported of "
                 f"{c['collected']:,} cases in {secs:.1f} s (-j {min(check.jobs, 8)}): {ops or 'no case ran'}")


def stored_digests(check: Check) -> bool:
    """Every full sweep's 256 chunk digests are in the installed package."""
    from qconform.sweep.domains import domain
    from qconform.sweep.goldens import golden_digests
    from qconform.sweep.table import select

    sweeps = select([FULL])
    missing = []
    for s in sweeps:
        dom = domain(s, "full")
        have = sum(g is not None for g in golden_digests(s, dom))
        if have != dom.chunks:
            missing.append(f"{s.id} {have}/{dom.chunks}")
    check.figure(f"stored digests: {len(sweeps)} full 2^32 configurations, "
                 + ("every chunk's digest is in the wheel" if not missing else f"missing: {'; '.join(missing)}"))
    check.failed |= bool(missing)
    return not missing


def sweep_step(check: Check, domain_name: str, select: list[str], label: str, need: float) -> None:
    state = check.out / f"sweep-{domain_name}.jsonl"
    state.unlink(missing_ok=True)
    rc, secs = check.qconform(["sweep", "--runner", check.runner, "--domain", domain_name, "-j", str(check.jobs),
                               "--state", str(state), "--no-progress", *select], need, label)
    if rc is None and secs == 0:
        return
    from qconform.sweep.table import select as choose
    from qconform.sweep.units import units

    doms = {"default": ("all", "sampled"), "full": ("full",)}[domain_name]
    total = units(choose(select), doms, None)
    results = [json.loads(ln) for ln in state.read_text().splitlines()[1:]] if state.is_file() else []
    counts: dict[str, int] = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    configs = {r["sweep"] for r in results}
    n = sum(r["elements"] for r in results)
    deviating = sum(r.get("mismatches", 0) for r in results)
    bad = counts.get("mismatch", 0) + counts.get("error", 0)
    check.failed |= bool(bad or counts.get("no-golden", 0) or counts.get("unsupported", 0))
    done = "" if len(results) == len(total) else f" (out of time: {len(total) - len(results)} chunks not run)"
    if done:
        check.skipped.append(f"{label}: {len(total) - len(results)} of {len(total)} chunks")
    check.figure(f"{label}: {len(configs)} configurations, {len(results)} of {len(total)} chunks, {n / 1e9:.2f} G inputs, "
                 f"{deviating:,} deviating inputs, {bad} chunks deviating or in error, {counts.get('reading', 0)} "
                 f"following a later reading, {counts.get('no-golden', 0)} without goldens, {secs:.1f} s{done}")


def bench_step(check: Check) -> None:
    bench = Path("benchmarks/bench_sweep.py")
    if not bench.is_file():
        check.skip("benchmark GPU vs onnxruntime", "benchmarks/ is not in this folder")
        return
    if check.left() < 60:
        check.skip("benchmark GPU vs onnxruntime", f"{max(check.left(), 0):.0f} s left, it needs about 60 s")
        return
    log = check.out / "bench-sweep.txt"
    cmd = [sys.executable, str(bench), "--runners", f"{check.runner},onnxruntime", "--jobs", str(check.jobs),
           "--sweep", BENCH_SWEEP, "--deadline", str(check.deadline - 5)]
    print(f"$ {' '.join(cmd[1:])}", flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max(check.left(), 1))
    log.write_text(proc.stdout + proc.stderr)
    print(proc.stdout + proc.stderr, flush=True)
    side = [ln for ln in proc.stdout.splitlines() if ln.startswith("side by side:")]
    check.figure("benchmark: " + (side[-1].removeprefix("side by side:").strip() if side else
                                  f"no figure (exit {proc.returncode}; see bench-sweep.txt)"))


def main() -> int:
    out = Path(os.environ.get("OUT") or "/tmp/gpu-check")
    out.mkdir(parents=True, exist_ok=True)
    deadline = float(os.environ.get("GPU_CHECK_DEADLINE") or time.time() + 300)
    jobs = int(os.environ.get("GPU_CHECK_JOBS") or os.cpu_count() or 1)
    # A rehearsal of every step on a machine without a GPU: GPU_CHECK_RUNNER=cpu-kernel (the same
    # header built by gcc); its figures say so and never stand for the GPU's.
    runner = os.environ.get("GPU_CHECK_RUNNER") or "gpu-kernel"
    check = Check(out, deadline, jobs, runner)
    import qconform

    where = Path(qconform.__file__).resolve().parent
    site = os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]
    check.figure(f"qconform {qconform.__version__} from {where}, Python {sys.version.split()[0]}")
    if site and not str(where).startswith(str(Path(site).resolve())):
        check.figure(f"setup: qconform was not imported from the installed wheel ({site})")
        return finish(check, EXIT_SETUP)
    if runner != "gpu-kernel":
        check.figure(f"device: none, a rehearsal of the steps with {runner} on the CPU (no figure here is a GPU's)")
        ptx_step(check, "sm_90")
        return run_steps(check)
    arch = device(check)
    if arch is None:
        ptx_step(check, "sm_90")  # the lint still runs where NVRTC is
        for what in ("the runner's PTX digest", "the whole corpus through gpu-kernel",
                     "the compute ops through gpu-kernel", "the default-domain sweeps",
                     "the full 2^32 sweeps", "the benchmark GPU vs onnxruntime"):
            check.skipped.append(f"{what} (no CUDA device)")
        return finish(check, EXIT_NO_DEVICE)
    digest = ptx_step(check, arch)
    if not runner_step(check, digest):
        return finish(check, EXIT_FAILED)
    return run_steps(check)


def run_steps(check: Check) -> int:
    """The corpus, the sweeps and the benchmark, each while the budget lasts."""
    corpus_step(check)
    compute_step(check)
    sweep_step(check, "default", [], "sweeps, default domain (16-bit and sampled float32)", 20)
    if stored_digests(check):
        sweep_step(check, "full", [FULL], "sweeps, full 2^32", 30)
    bench_step(check)
    return finish(check, EXIT_FAILED if check.failed else (EXIT_BUDGET if check.skipped else EXIT_OK))


def finish(check: Check, code: int) -> int:
    verdict = {EXIT_OK: "PASS: every check ran and passed", EXIT_FAILED: "FAIL: see the lines above",
               EXIT_SETUP: "SETUP FAILED: see the lines above",
               EXIT_NO_DEVICE: "NO DEVICE: no CUDA device is present, nothing was measured on a GPU",
               EXIT_BUDGET: "INCOMPLETE: the time budget ran out, see skipped"}[code]
    lines = check.lines + [f"skipped: {'; '.join(check.skipped) if check.skipped else 'nothing'}", f"verdict: {verdict}"]
    (check.out / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n== gpu-check summary ==\n" + "\n".join(lines), flush=True)
    return code


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env bash
# gpu-check.sh: everything a machine with a CUDA device has to show about qconform's own GPU
# kernels, in one go, from a wheel, without network, within a time budget: the device (name,
# driver, CUDA versions), the linted PTX (digest, NVRTC, lint) and the digest gpu-kernel reports
# for the module it loaded, the whole corpus through gpu-kernel, the compute ops (QLinearMatMul,
# QLinearConv, ConvInteger, MatMulInteger and onnxruntime's contrib ops in the kernels' scope: QGemm,
# QLinearAdd/Mul, MatMulNBits, GatherBlockQuantized, the average pools, QLinearSigmoid, QLinearSoftmax, ...:
# every contrib op, read off the declarations by scripts/gpu_check.py) again on their own with their counts and time, every
# default-domain sweep, every full 2^32 sweep (after checking the wheel holds their stored
# digests), and one full 2^32 sweep on the GPU against onnxruntime on the CPU
# (benchmarks/bench_sweep.py; onnxruntime may be absent, then only the GPU's figure). It ends with
# one line per figure (summary.txt).
#
# Build the carry folder here, in the repository root (gpu-carry/ is ignored by git):
#     rm -rf gpu-carry build && .venv/bin/pip wheel --no-deps -w gpu-carry .
# Run it on the GPU machine, in the repository root, with gpu-carry/ carried along:
#     bash scripts/gpu-check.sh
# That machine needs Python 3.11-3.13 with numpy, onnx, ml_dtypes, pytest, hypothesis, packaging
# (qconform's own dependencies, not installed from the wheel: --no-deps), CuPy and an NVRTC
# (CuPy 14's CUDA 13 wheels bring both); pytest-xdist and onnxruntime are not needed.
#
# Environment:
#   OUT               folder for the report (default /tmp/gpu-check): gpu-check.log, summary.txt,
#                     qkernels.<arch>.ptx, certify/report.json, sweep-default.jsonl (the sweep
#                     state: one line per chunk), sweep-full.jsonl, bench-sweep.txt (7 files)
#   GPU_CHECK_BUDGET  seconds for the whole script, install included (default 300); a step that
#                     would not fit is skipped and named, a step running out of time is stopped
#   GPU_CHECK_JOBS    worker processes (default: every core)
#   WHEEL             the wheel to install (default: the newest gpu-carry/qconform-*.whl)
#   PYTHON            the interpreter (default python3)
# Exit status: 0 every check ran and passed; 1 a check failed; 2 no CUDA device is present (the
# PTX is still built and linted where NVRTC is); 3 setup failed (no wheel, install failed);
# 4 the budget ran out before every check ran.
set -u
start=$(date +%s)
budget=${GPU_CHECK_BUDGET:-300}
out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
exec > >(tee "$out/gpu-check.log") 2>&1

py=${PYTHON:-python3}
wheel=${WHEEL:-$(ls -t gpu-carry/qconform-*.whl 2>/dev/null | head -n 1)}
if [ -z "$wheel" ] || [ ! -f "$wheel" ]; then
  echo "gpu-check: no wheel (looked for gpu-carry/qconform-*.whl; set WHEEL=...). Build it where the"
  echo "repository has its venv: rm -rf gpu-carry build && .venv/bin/pip wheel --no-deps -w gpu-carry ."
  exit 3
fi
site=$(mktemp -d /tmp/gpu-check-site.XXXXXX)
trap 'rm -rf "$site"' EXIT
echo "== installing $wheel into $site (pip install --no-deps --no-index --target)"
if ! "$py" -m pip install --quiet --no-deps --no-index --target "$site" "$wheel"; then
  echo "gpu-check: installing $wheel failed"
  exit 3
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
export QCONFORM_CACHE_DIR="${QCONFORM_CACHE_DIR:-$site/.cache}"
export GPU_CHECK_DEADLINE=$((start + budget))
export OUT="$out"
# Not the checkout's qconform: run from a folder where only the installed wheel is importable.
scripts_dir=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$scripts_dir/.." && pwd)
cd "$repo" && "$py" -P "$scripts_dir/gpu_check.py"

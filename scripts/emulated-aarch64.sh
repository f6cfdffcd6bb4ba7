#!/usr/bin/env bash
# Certify onnxruntime's aarch64 build, emulated by qemu-user, from this x86-64 machine (issue 34):
# a Debian arm64 rootfs (debootstrap), onnxruntime's aarch64 wheel and qconform installed in it
# offline, `qconform worker` started inside, and `qconform certify --runner remote:127.0.0.1:PORT`
# run here. What emulation shows: the aarch64 build's arithmetic (its kernels, its NaN encodings);
# what it cannot: the chip's timing or any hardware it lacks (qemu runs the instructions, not a core).
#
#   sudo scripts/emulated-aarch64.sh [REPORT_DIR [CERTIFY OPTIONS...]]   # default: qconform-report-aarch64
#
# Needs root (binfmt_misc, debootstrap, chroot, mounts); from a clean clone it first makes the host's
# .venv as README's quick start does.
# QCONFORM_ARM64_DIR (default /var/tmp/qconform-arm64) keeps the rootfs and wheels between runs.
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
WORK=${QCONFORM_ARM64_DIR:-/var/tmp/qconform-arm64}
ROOTFS=$WORK/rootfs
REPORT=${1:-qconform-report-aarch64}
shift || true
PORT=${QCONFORM_ARM64_PORT:-7768}
PY=${PYTHON:-$HERE/.venv/bin/python}
say() { echo "emulated-aarch64: $*" >&2; }
[ "$(id -u)" = 0 ] || { say "needs root (binfmt_misc, debootstrap, chroot, mounts); run it with sudo"; exit 2; }
if [ ! -x "$PY" ]; then  # a clean clone: the host side as README's quick start makes it
  say "creating the host's .venv (qconform with the onnxruntime extra, pinned)"
  python3 -m venv "$HERE/.venv"
  "$HERE/.venv/bin/pip" install -q -c "$HERE/constraints.txt" -e "$HERE[onnxruntime]"
  PY=$HERE/.venv/bin/python
fi

if ! command -v debootstrap >/dev/null || [ ! -e /usr/bin/qemu-aarch64-static ]; then
  say "installing debootstrap and qemu-user-static"
  apt-get install -y -q debootstrap qemu-user-static binfmt-support >/dev/null
fi
mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || { say "qemu-aarch64 is not registered with binfmt_misc"; exit 2; }

if [ ! -x "$ROOTFS/usr/bin/python3" ]; then
  say "building the arm64 rootfs in $ROOTFS (debootstrap, a few minutes)"
  mkdir -p "$WORK"
  debootstrap --arch=arm64 --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$ROOTFS" \
    http://deb.debian.org/debian >"$WORK/debootstrap.log"
fi

say "fetching the pinned aarch64 wheels and building qconform's"
mkdir -p "$ROOTFS/wheels"
"$PY" -m pip download -q -d "$ROOTFS/wheels" --platform manylinux_2_28_aarch64 --platform manylinux2014_aarch64 \
  --python-version 3.11 --only-binary=:all: -c "$HERE/constraints.txt" onnxruntime numpy onnx ml_dtypes packaging \
  pytest hypothesis 2>/dev/null
rm -f "$ROOTFS"/wheels/qconform-*.whl
"$PY" -m pip wheel -q --no-deps -w "$ROOTFS/wheels" "$HERE" 2>/dev/null

cleanup() {
  [ -n "${WORKER:-}" ] && kill "$WORKER" 2>/dev/null || true
  umount -l "$ROOTFS/dev" 2>/dev/null || true
  umount -l "$ROOTFS/proc" 2>/dev/null || true
}
trap cleanup EXIT
mountpoint -q "$ROOTFS/proc" || mount -t proc proc "$ROOTFS/proc"
mountpoint -q "$ROOTFS/dev" || mount --rbind /dev "$ROOTFS/dev"
# Not /sys: onnxruntime's cpuinfo reads the host's sysfs under qemu and segfaults; without it, it warns and runs.

say "installing qconform and onnxruntime in the rootfs (offline, from the wheels)"
chroot "$ROOTFS" /bin/sh -c 'test -x /venv/bin/python || python3 -m venv /venv'
chroot "$ROOTFS" /bin/sh -c 'W=$(ls /wheels/qconform-*.whl) && /venv/bin/pip install -q --no-index --find-links /wheels \
  "$W[onnxruntime]" && /venv/bin/pip install -q --no-index --no-deps --force-reinstall "$W"'

# As a board on a network (qconform/docs/device.md): QCONFORM_ARM64_HOST=ADDRESS (one of this machine's
# own: the rootfs shares its network) and QCONFORM_ARM64_SECRET=FILE (qconform secret FILE).
HOST=${QCONFORM_ARM64_HOST:-127.0.0.1}
WORKER_ARGS=(--host "$HOST")
CONTROLLER_ARGS=()
if [ -n "${QCONFORM_ARM64_SECRET:-}" ]; then
  install -m 600 "$QCONFORM_ARM64_SECRET" "$ROOTFS/lab.secret"
  WORKER_ARGS+=(--secret-file /lab.secret)
  CONTROLLER_ARGS+=(--runner-opt "secret_file=$QCONFORM_ARM64_SECRET")
fi
say "starting the worker inside (aarch64, emulated) on $HOST:$PORT"
chroot "$ROOTFS" /venv/bin/python -m qconform.cli worker --runner onnxruntime --port "$PORT" "${WORKER_ARGS[@]}" \
  >"$WORK/worker.log" 2>&1 &
WORKER=$!
for _ in $(seq 1 300); do grep -q "serving" "$WORK/worker.log" 2>/dev/null && break; sleep 1; done
grep -q "serving" "$WORK/worker.log" || { say "the worker did not start:"; tail -5 "$WORK/worker.log" >&2; exit 1; }

say "certifying from x86-64 over $HOST:$PORT into $REPORT"
set +e
"$PY" -m qconform.cli certify --runner "remote:$HOST:$PORT" "${CONTROLLER_ARGS[@]}" --report "$REPORT" -j 2 \
  --case-timeout 600 "$@"
status=$?
set -e
exit $status

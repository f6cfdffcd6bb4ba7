"""What the remote tests share (``tests/test_remote.py``, the worker end on the wire, and
``tests/test_remote_runs.py``, certify driving it): the simulated device's runner, a ``qconform
worker`` subprocess, its secret, and the ``device`` fixture that starts workers and stops them."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from qconform import corpus

SLICE = "QuantizeLinear-21/float32-int8/*"
CRASH, HANG = "QuantizeLinear-21/float32-int8/basic/per-axis", "QuantizeLinear-21/float32-int8/basic/per-tensor"

DEVICE_RUNNER = '''
"""cpu-ref on the "device": crashes on one model, hangs on another, notes every model it prepares."""
import os
import time
from pathlib import Path

from qconform.runners.cpu_ref import CpuRefRunner


class Device(CpuRefRunner):
    name = "npu-sim"

    def __init__(self, crash="", hang="", marker="", delay="0", pidfile="", kill_worker_after=""):
        super().__init__()
        self.crash, self.hang, self.marker, self.delay, self.pidfile = crash, hang, marker, float(delay), pidfile
        self.kill_after = int(kill_worker_after or 0)
        self.calls = 0

    def prepare(self, model):
        if self.marker:
            Path(self.marker).write_text("a model was prepared")
        run = super().prepare(model)
        key = model.SerializeToString().hex()

        def go(feeds):
            self.calls += 1
            if self.calls == self.kill_after:  # the whole worker dies (its machine rebooted, say)
                import signal
                os.kill(os.getppid(), signal.SIGKILL)
                time.sleep(60)
            if self.pidfile:
                Path(self.pidfile).write_text(str(os.getpid()))
            if key == self.crash:
                os._exit(7)
            if key == self.hang:
                time.sleep(60)
            time.sleep(self.delay)
            return run(feeds)

        return go
'''


def model_hex(case_id: str) -> str:
    from qconform.model import build_model

    return build_model(corpus.index(corpus.DEFAULT_ROOT).case(case_id), check=False).SerializeToString().hex()


SECRET = "0123456789abcdef0123456789abcdef-lab"  # 36 characters: long enough


def secret_file(path: Path, secret: str) -> Path:
    path.write_text(secret)
    path.chmod(0o600)
    return path


class WorkerProcess:
    """``qconform worker`` in a subprocess on a free port (read from its first line); its log (stderr)
    is collected by a thread."""

    def __init__(self, *args: str, env: dict | None = None, port: int = 0, preexec_fn=None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "qconform.cli", "worker", "--port", str(port), *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, **(env or {})}, preexec_fn=preexec_fn)
        line = self.proc.stdout.readline()
        self.log: list[str] = []
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()
        assert " on 127.0.0.1:" in line, line + "".join(self.log)
        self.port = int(line.split(" on 127.0.0.1:")[1].split()[0])

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def device(tmp_path):
    (tmp_path / "device.py").write_text(DEVICE_RUNNER)
    started = []

    def start(*opts: str, secret: str | None = None, args: tuple = (), port: int = 0, **popen) -> WorkerProcess:
        words = ["--runner", f"{tmp_path / 'device.py'}:Device", *[w for o in opts for w in ("--runner-opt", o)]]
        if secret is not None:
            words += ["--secret-file", str(secret_file(tmp_path / "secret", secret))]
        w = WorkerProcess(*words, "--case-timeout", "3", *args, port=port, **popen)
        started.append(w)
        return w

    yield start
    for w in started:
        w.stop()

"""Running a runner so that nothing it does can lose a result.

``execute`` is the one place a runner is called: it classifies every way a call can go wrong
(Unsupported, an exception, not a list, None outputs, outputs aliasing or inputs mutated) as a
verdict instead of an exception inside qconform. ``Worker`` runs ``execute`` in a child process
(its own session and temporary directory): a crash (signal, abort, ``os._exit``) becomes the verdict
*crashed* with the signal, a hang past the case timeout becomes *timeout*; a fresh child takes over
and the run goes on. Results cross the pipe as numpy arrays (multiprocessing's own framing).
"""
from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import signal
import tempfile
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import onnx

from qconform.runner import Unsupported, prepare, resolve


@dataclass
class CallResult:
    kind: str  # "ok" | "unsupported" | "error" | "crashed" | "timeout"
    outputs: list[np.ndarray] | None = None
    message: str = ""


def _structure(outputs: Any, feeds: Mapping[str, np.ndarray]) -> str:
    if not isinstance(outputs, (list, tuple)):
        return f"runner returned {type(outputs).__name__}, not a list of arrays"
    for i, out in enumerate(outputs):
        if not isinstance(out, np.ndarray):
            return f"output {i} is {type(out).__name__}, not a numpy array"
        for name, arr in feeds.items():
            if np.shares_memory(out, arr):
                return f"output {i} aliases input {name!r} (the runner must return its own arrays)"
    return ""


def execute(runner: Any, model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> CallResult:
    """Call the runner once; never raises for anything the runner does."""
    handed = {k: np.array(v, copy=True) for k, v in feeds.items()}
    try:
        outputs = prepare(runner, model)(handed)
    except Unsupported as exc:
        return CallResult("unsupported", message=str(exc).strip().splitlines()[0] if str(exc).strip() else "unsupported")
    except MemoryError as exc:
        return CallResult("error", message=f"runner ran out of memory: {exc}")
    except Exception as exc:  # noqa: BLE001 — any runner exception is that case's error
        first = (str(exc).strip().splitlines() or [""])[0]
        return CallResult("error", message=f"runner raised {type(exc).__name__}: {first}")
    problem = _structure(outputs, handed)
    if problem:
        return CallResult("error", message=problem)
    for name, original in feeds.items():
        if handed[name].shape != np.shape(original) or handed[name].tobytes() != np.ascontiguousarray(original).tobytes():
            return CallResult("error", message=f"runner mutated its input {name!r}")
    return CallResult("ok", outputs=[np.array(o, copy=True) for o in outputs])


def _child(conn, runner_name: str, options: dict, memory_mb: int, tmp: str) -> None:
    os.setsid()  # its own process group: whatever it starts is killed with it
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the controller's to handle
    os.environ["TMPDIR"] = tmp
    tempfile.tempdir = tmp
    if memory_mb:
        import resource

        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        runner = resolve(runner_name, options)
        while True:
            msg = conn.recv()
            if msg is None:
                break
            model_bytes, feeds = msg
            result = execute(runner, onnx.load_from_string(model_bytes), feeds)
            try:
                conn.send(result)
            except Exception as exc:  # e.g. an output that cannot cross the pipe
                conn.send(CallResult("error", message=f"runner output cannot be transferred: {exc}"))
    except Exception as exc:  # the runner cannot even start in the child: every case says so
        while True:
            msg = conn.recv()
            if msg is None:
                break
            conn.send(CallResult("error", message=f"runner failed to start in its worker: {exc}"))


class Worker:
    """One child process running the runner; restarted after a crash or a timeout."""

    def __init__(self, runner_name: str, options: Mapping[str, str], timeout: float | None, memory_mb: int = 0):
        self.runner_name, self.options = runner_name, dict(options)
        self.timeout, self.memory_mb = timeout, memory_mb
        self._ctx = mp.get_context("spawn")
        self._proc = None
        self._conn = None
        self._tmp = ""
        self.restarts = 0

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        self._tmp = tempfile.mkdtemp(prefix="qconform-worker-")
        self._proc = self._ctx.Process(target=_child, args=(child, self.runner_name, self.options, self.memory_mb,
                                                            self._tmp), daemon=True, name="qconform-runner")
        self._proc.start()
        child.close()
        self._conn = parent

    def call(self, model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> CallResult:
        if self._proc is None or not self._proc.is_alive():
            if self._proc is not None:
                self.restarts += 1
            self._start()
        try:
            self._conn.send((model.SerializeToString(), {k: np.asarray(v) for k, v in feeds.items()}))
            if not self._conn.poll(self.timeout):
                self.kill()
                return CallResult("timeout", message=f"no result within --case-timeout={self.timeout:g}s; worker killed")
            return self._conn.recv()
        except (EOFError, ConnectionError, BrokenPipeError):
            code = self._wait_exit()
            self.kill()
            return CallResult("crashed", message=_describe_exit(code))

    def _wait_exit(self) -> int | None:
        proc = self._proc
        proc.join(5)
        if proc.is_alive():
            self.kill()
        return proc.exitcode

    def kill(self) -> None:
        """Kill the worker with its process group, and remove its temporary directory."""
        if self._proc is not None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self._proc.join(5)
            self._proc = None
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = ""

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(5)
            except (BrokenPipeError, OSError):
                pass
        self.kill()


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "worker vanished"
    if code < 0:
        try:
            return f"worker killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"worker killed by signal {-code}"
    return f"worker exited with status {code}"

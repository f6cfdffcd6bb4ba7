"""Running a runner so that nothing it does can lose a result.

``call`` is the one place a prepared runner is called: it classifies every way a call can go wrong
(Unsupported, an exception -- kept with its traceback --, not a list, None outputs, outputs aliasing
or inputs mutated) as a verdict instead of an exception inside qconform (the engine's ``Pipeline``
prepares each model and calls through it). ``Child`` is a worker process (its own session, process
group and temporary directory, optionally an address-space limit) that a crash (signal, abort,
``os._exit``) or a hang can take down without taking the run with it: ``receive`` then says so,
and the caller starts a fresh one.
"""
from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import queue
import re
import shutil
import signal
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from qconform.runner import CaseFault, NotRun, Unsupported
from qconform.verdicts import Call


@dataclass
class CallResult:
    kind: Call  # what the call did: outputs (OK), or the verdict it gives without them
    outputs: list[np.ndarray] | None = None
    message: str = ""
    traceback: str = ""  # the runner's own traceback, when it raised
    stop: bool = False  # not-run because the device is gone: the front-end stops the run


def _as_arrays(outputs: Any) -> Any:
    """numpy scalars (``np.generic``, e.g. a rank-0 result a binding returns unwrapped) are 0-d arrays
    of their dtype: the same value, so they are accepted as such."""
    if isinstance(outputs, (list, tuple)):
        return [np.asarray(o) if isinstance(o, np.generic) else o for o in outputs]
    return outputs


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


#: A line of an exception's text that locates rather than says: a stack frame, a source position.
_FRAME = re.compile(r"""^(\s*(at\s|File\s"|\#\d+\s|Traceback\b|Stack\s?trace)|\S+\.(cpp|cc|cxx|c|h|hpp|py):\d+:?$
                     |Exception\sfrom\s\S+$|\S+::\S+\(.*\)\s*(const)?\s*$|\s*0x[0-9a-fA-F]+\s)""", re.X)
# (a position alone on its line locates; ORT's own messages carry "model.cc:181" inside the line that
# says why, and that line is kept)


def reason_line(text: str) -> str:
    """The line of a runner's refusal that says why: the first one that is not a stack frame or a
    source position (an execution provider often puts a C++ frame first and the cause last)."""
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    said = [ln for ln in lines if not _FRAME.match(ln)]
    return (said or lines or [str(Call.UNSUPPORTED)])[0]


def _raised(exc: BaseException) -> CallResult:
    first = (str(exc).strip().splitlines() or [""])[0]
    return CallResult(Call.ERROR, message=f"runner raised {type(exc).__name__}: {first}",
                      traceback="".join(traceback.format_exception(exc)))


def call(run: Callable, feeds: Mapping[str, np.ndarray]) -> CallResult:
    """Call a prepared runner once on copies of the feeds; never raises for anything the runner does."""
    handed = {k: np.array(v, copy=True) for k, v in feeds.items()}
    try:
        outputs = _as_arrays(run(handed))
    except Unsupported as exc:
        return CallResult(Call.UNSUPPORTED, message=reason_line(str(exc)))
    except CaseFault as exc:  # it crashed or hung where it really ran (a device worker)
        return CallResult(Call(exc.kind), message=str(exc))
    except NotRun as exc:  # the infrastructure, not the runtime: no verdict on the runtime
        return CallResult(Call.NOT_RUN, message=str(exc), stop=exc.stop)
    except MemoryError as exc:
        return CallResult(Call.ERROR, message=f"runner ran out of memory: {exc}")
    except Exception as exc:  # noqa: BLE001 — any runner exception is that case's error
        return _raised(exc)
    problem = _structure(outputs, handed)
    if problem:
        return CallResult(Call.ERROR, message=problem)
    for name, original in feeds.items():
        if handed[name].shape != np.shape(original) or handed[name].tobytes() != np.ascontiguousarray(original).tobytes():
            return CallResult(Call.ERROR, message=f"runner mutated its input {name!r}")
    return CallResult(Call.OK, outputs=[_native(np.array(o, copy=True)) for o in outputs])


def _native(a: np.ndarray) -> np.ndarray:
    """An output in this machine's byte order: a binding may hand back big-endian ``>f4`` holding the
    runtime's very values; compared as they are, their element type read as another and every element's
    bits swapped. The values (and each one's bits) are the same either way."""
    return a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))


# ----------------------------------------------------------------------------------------------
# A worker process
# ----------------------------------------------------------------------------------------------
#: A worker's temporary directory (its TMPDIR) is ``<temp dir>/qconform-worker-XXXXXXXX``. It goes
#: when the worker ends: removed by the controller (``Child.kill``: crashed, hung or done), by the
#: worker itself when it ends on its own (its controller gone: killed, its Dask worker or its machine
#: lost), and otherwise (the worker killed together with its controller: SIGKILL, the OOM killer, a
#: device worker's runner dying with it) by the next ``Child.start`` on the machine (``sweep``). Its
#: ``LOCK`` file is held (a shared ``flock``) by the controller and by the worker while either lives:
#: a directory whose lock can be taken exclusively belongs to nobody any more.
PREFIX = "qconform-worker-"
LOCK = ".qconform-worker.lock"
#: ``Child.start`` sweeps its temp directory at most once in this many seconds (per process).
SWEEP_EVERY = 60.0
_last_sweep: dict[str, float] = {}


def _hold(fd: int) -> bool:
    """A shared lock on the directory's lock file: False where the file system has no ``flock``."""
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_SH)
        return True
    except (ImportError, OSError):
        return False


def _new_dir() -> tuple[str, int | None]:
    """A fresh worker directory and the controller's lock on it; the lock file gets its name only once
    locked, so a sweep never sees it free."""
    tmp = tempfile.mkdtemp(prefix=PREFIX)
    fd = None
    try:
        fresh = os.path.join(tmp, LOCK + ".new")
        fd = os.open(fresh, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        if _hold(fd):
            os.rename(fresh, os.path.join(tmp, LOCK))
    except OSError:  # no lock: the directory is still removed by the controller and the worker, never swept
        pass
    return tmp, fd


def sweep(root: str | None = None) -> list[str]:
    """Remove the temporary directories of this user's workers that are gone (their lock is free: no
    controller or worker holds it; a directory without a lock file is never touched). The removed paths."""
    try:
        import fcntl
    except ImportError:
        return []
    root = os.path.realpath(root or tempfile.gettempdir())
    removed: list[str] = []
    try:
        entries = [e for e in os.scandir(root) if e.name.startswith(PREFIX)]
    except OSError:
        return removed
    uid = os.getuid()
    # this process's own are passed over (where flock is emulated by POSIX locks, they would not conflict)
    mine = {os.path.realpath(child._tmp) for child in list(_LIVE) if child._tmp}
    for entry in entries:
        try:
            if entry.path in mine or not entry.is_dir(follow_symlinks=False) or \
                    entry.stat(follow_symlinks=False).st_uid != uid:
                continue
            fd = os.open(os.path.join(entry.path, LOCK), os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError: a controller or worker lives
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def _orphan_watch(controller: int, tmp: str) -> None:
    """End this worker, and its process group, once its controller is gone. A controller killed
    outright (SIGTERM, SIGKILL, a CI job's timeout) runs no cleanup, and a worker in the middle of a
    batch would otherwise compute on for minutes before it next reads its closed pipe."""
    while os.getppid() == controller:
        time.sleep(1)
    shutil.rmtree(tmp, ignore_errors=True)
    os.killpg(0, signal.SIGKILL)


def _child_main(conn, target: Callable, args: tuple, memory_mb: int, tmp: str) -> None:
    os.setsid()  # its own process group: whatever it starts is killed with it
    threading.Thread(target=_orphan_watch, args=(os.getppid(), tmp), daemon=True, name="qconform-orphan-watch").start()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the controller's to handle
    try:
        lock = os.open(os.path.join(tmp, LOCK), os.O_RDONLY)  # held while this process lives (never closed)
        _hold(lock)
    except OSError:  # no lock file (no flock here), or the directory is already gone with the controller
        pass
    os.environ["TMPDIR"] = tmp
    tempfile.tempdir = tmp
    try:
        if memory_mb:
            import resource

            limit = memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        target(conn, *args)
    finally:  # ended on its own (done, or its controller gone): nothing of it is needed any more
        shutil.rmtree(tmp, ignore_errors=True)


class Child:
    """One worker process running ``target(conn, *args)``; killed with its process group on demand.

    A reader thread drains the worker's messages into an inbox as they come, so a worker that runs
    ahead is never held up by a full pipe while the controller is busy; ``last_arrival`` is when the
    latest message arrived (a hang is measured from it)."""

    TIMEOUT = object()  # receive(): nothing within the timeout
    GONE = object()  # receive(): the process died (crash, abort, exit)

    def __init__(self, target: Callable, args: tuple = (), memory_mb: int = 0) -> None:
        self.target, self.args, self.memory_mb = target, args, memory_mb
        self._ctx = mp.get_context("spawn")
        self._proc = None
        self._conn = None
        self._inbox: queue.Queue | None = None
        self._tmp = ""
        self._lock: int | None = None
        self.started = 0
        self.last_arrival = time.monotonic()

    def start(self) -> None:
        self.kill()
        root = tempfile.gettempdir()
        if time.monotonic() - _last_sweep.get(root, -SWEEP_EVERY) >= SWEEP_EVERY:
            _last_sweep[root] = time.monotonic()
            sweep(root)
        parent, child = self._ctx.Pipe()
        self._tmp, self._lock = _new_dir()
        _LIVE.add(self)
        proc = self._ctx.Process(target=_child_main, args=(child, self.target, self.args, self.memory_mb, self._tmp),
                                 daemon=True, name="qconform-runner")
        try:
            proc.start()
        except BaseException:  # no worker: nothing of it is left (its directory with it)
            parent.close()
            self.kill()
            raise
        finally:
            child.close()
        self._proc = proc
        self._conn = parent
        self._inbox = queue.Queue()
        self.last_arrival = time.monotonic()
        threading.Thread(target=self._drain, args=(parent, self._inbox), daemon=True,
                         name="qconform-runner-reader").start()
        self.started += 1

    def _drain(self, conn, inbox: queue.Queue) -> None:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, ConnectionError, BrokenPipeError, OSError, TypeError):
                inbox.put(Child.GONE)
                return
            self.last_arrival = time.monotonic()
            inbox.put(msg)

    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    def send(self, msg: Any) -> bool:
        """False when the worker is gone (its pipe is closed)."""
        try:
            self._conn.send(msg)
            return True
        except (BrokenPipeError, ConnectionError, OSError):
            return False

    def inbox_empty(self) -> bool:
        return self._inbox is None or self._inbox.empty()

    def receive(self, timeout: float | None) -> Any:
        """The next message, ``TIMEOUT`` or ``GONE``."""
        try:
            return self._inbox.get(timeout=timeout)
        except queue.Empty:
            return Child.TIMEOUT

    def wait_exit(self) -> int | None:
        proc = self._proc
        if proc is None:
            return None
        proc.join(5)
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
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = ""
        if self._lock is not None:  # released only once the directory is gone
            os.close(self._lock)
            self._lock = None
        _LIVE.discard(self)

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self.send(None)
            self._proc.join(5)
        self.kill()


#: Children not killed or closed yet: killed at interpreter exit (a pool its owner never closed),
#: their directories with them.
_LIVE: set[Child] = set()


@atexit.register
def _kill_live() -> None:
    for child in list(_LIVE):
        try:
            child.kill()
        except Exception:  # noqa: BLE001 - the others are still killed
            pass


def describe_exit(code: int | None) -> str:
    if code is None:
        return "worker vanished"
    if code < 0:
        try:
            return f"worker killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"worker killed by signal {-code}"
    return f"worker exited with status {code}"

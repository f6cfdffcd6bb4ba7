"""onnxruntime-web (the npm package, at the version its declaration pins), WASM backend, run by Node.js.

Why a Node child process: onnxruntime-web is JavaScript around a WebAssembly build of ONNX
Runtime; nothing in Python can load it. One long-lived ``node`` process per runner instance
(``ortweb_server.mjs``, shipped next to this file) loads the package once and serves requests,
one JSON line each way on stdin/stdout: create a session from the model's bytes, run it with raw
tensor bytes, release it. Starting Node and instantiating the WASM per case would cost far more
than the case.

Installation, on first use: ``npm install onnxruntime-web@VERSION`` into
``$QCONFORM_CACHE_DIR/onnxruntime-web-VERSION`` (default ``$XDG_CACHE_HOME/qconform/...``, else
``~/.cache/qconform/...``), under a file lock, into a temporary folder renamed into place, so
concurrent workers install once and never see half an install. ``node`` and ``npm`` come from
PATH; without them, or when the install fails, the constructor raises ``Unsupported`` (qconform
says "runner 'onnxruntime-web' cannot start here: ...").

What runs: ``InferenceSession.create(bytes, {executionProviders: ['wasm'],
graphOptimizationLevel: 'disabled'})`` with ``ort.env.wasm.numThreads = 1`` (one thread: results
reproducible, no worker threads; qconform runs two workers anyway). Options
(``--runner-opt``): ``threads`` (default 1), ``optimize`` (0 = 'disabled', the default; 1 = 'all'),
``timeout`` (seconds one request may take before the Node process is killed and the case is an
error, default 300; 0: no limit).

Types: onnxruntime-web's tensors carry float32, float16 (as its uint16 bits: Node 20 has no
Float16Array), int8/uint8/int16/uint16/int32 and packed int4/uint4 (a Uint8Array of
ceil(n/2) bytes, LSB-first like ONNX), besides types qconform never hands out. Its WASM binding
has no bfloat16, float8, float8e8m0, float4, float6 or 2-bit tensor types, so a graph input of
those is Unsupported before the runtime sees it; a graph output of those makes
``InferenceSession.create`` itself fail ("unsupported data type: 16"). int4/uint4 *outputs* pass
create but cannot be read back on the CPU ("unsupported type: int4" from the JS layer after
OrtRun): Unsupported too. Every input and output travels as its raw bytes in the ONNX layout
(``qconform.adapt``); outputs are returned in the element type the runtime reports, never
converted to the declared one.

Verdicts: a failing ``InferenceSession.create`` is Unsupported with ORT's message on one line
(its status named, the JS wrapper and the C++ source location dropped: "NOT_IMPLEMENTED: Could
not find an implementation for QuantizeLinear(25) node ..."); every other failure of a run is an
error with the full text (opset-23 models whose scale type differs from x's or y's fail in OrtRun
with "Tensor type mismatch": errors, not aborts, in 1.30.0). If the WebAssembly traps (an
``abort()`` in the runtime) or the Node process dies, the case is an error carrying the tail of
Node's stderr, and a fresh process is started for the next request (sessions of a prepared model
are re-created there transparently).
"""
from __future__ import annotations

import base64
import collections
import contextlib
import json
import os
import queue
import re
import shutil
import subprocess
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from qconform import adapt, platform, tools
from qconform.kernels.build import cache_root
from qconform.runner import BaseRunner, Inputs, Outputs, Prepared, Unsupported
from qconform.declarations.runtimes.ortweb import ONNXRUNTIME_WEB

TP = onnx.TensorProto
PACKAGE = str(ONNXRUNTIME_WEB.dist)
VERSION = str(ONNXRUNTIME_WEB.pin)
SERVER = Path(__file__).with_name("ortweb_server.mjs")
TAG = "@qconform-ortweb "

#: ONNX element type -> onnxruntime-web tensor type, for the types qconform hands out that its
#: JS tensors carry (bytes in the ONNX layout either way).
_JS_OF_ONNX = {
    TP.FLOAT: "float32", TP.FLOAT16: "float16", TP.INT8: "int8", TP.UINT8: "uint8",
    TP.INT16: "int16", TP.UINT16: "uint16", TP.INT32: "int32", TP.INT4: "int4", TP.UINT4: "uint4",
    TP.INT64: "int64",  # BigInt64Array (GatherBlockQuantized's indices)
}
_ONNX_OF_JS = {v: k for k, v in _JS_OF_ONNX.items()}
#: Tensor types onnxruntime-web may report that qconform's type registry lacks: plain numpy.
_NUMPY_OF_JS = {"float64": "<f8", "int64": "<i8", "uint32": "<u4", "uint64": "<u8", "bool": "?"}


def install_dir() -> Path:
    return cache_root() / f"{PACKAGE}-{VERSION}"


def pinned_version() -> str | None:
    """The version this runner runs where it can (Node.js and npm on PATH: it installs that version
    on first use), else None: what qconform's facts key onnxruntime-web's rows by."""
    return VERSION if tools.find("node") and tools.find("npm") else None


def installed_version() -> str | None:
    """The version installed in qconform's cache where node can run it (what a finding's script
    runs), else None; unlike ``pinned_version`` it installs nothing and promises nothing."""
    return _installed_version(install_dir()) if tools.find("node") else None


def _installed_version(prefix: Path) -> str | None:
    try:
        meta = json.loads((prefix / "node_modules" / PACKAGE / "package.json").read_text())
    except (OSError, ValueError):
        return None
    return meta.get("version")


@contextlib.contextmanager
def _file_lock(path: Path):
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: the temporary-folder rename still keeps installs whole
        yield
        return
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure_installed() -> Path:
    """The install prefix holding node_modules/onnxruntime-web at VERSION, installed if absent."""
    dest = install_dir()
    if _installed_version(dest) == VERSION:
        return dest
    npm = tools.find("npm")
    if npm is None:
        raise Unsupported(tools.missing("npm"))
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise Unsupported(f"cannot create the cache folder {dest.parent}: {exc}") from None
    with _file_lock(dest.parent / f".{dest.name}.lock"):
        if _installed_version(dest) == VERSION:  # another worker installed it meanwhile
            return dest
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
        try:
            cmd = [npm, "install", "--prefix", str(tmp), "--no-save", "--no-package-lock", "--no-audit",
                   "--no-fund", "--ignore-scripts", "--loglevel=error", f"{PACKAGE}@{VERSION}"]
            try:
                r = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=900,
                                   stdin=subprocess.DEVNULL)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise Unsupported(f"npm install {PACKAGE}@{VERSION} into {dest} failed: {exc}") from None
            if r.returncode != 0 or _installed_version(tmp) != VERSION:
                raise Unsupported(f"npm install {PACKAGE}@{VERSION} into {dest} failed: {_npm_reason(r)}")
            if dest.exists():
                shutil.rmtree(dest)
            tmp.chmod(0o755)  # mkdtemp made it private
            os.replace(tmp, dest)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _npm_reason(r: subprocess.CompletedProcess) -> str:
    """npm's error code and first message line ("code ETARGET; notarget No matching version ...")."""
    lines = [ln.removeprefix("npm error").strip() for ln in r.stderr.splitlines() if ln.startswith("npm error")]
    code = next((ln for ln in lines if ln.startswith("code ")), None)
    msg = next((ln for ln in lines if ln and not re.match(r"(code|syscall|errno|at) ", ln)
                and not ln.startswith(("A complete log", "{", "}"))), None)
    why = "; ".join(x for x in (code, msg) if x)
    if why:
        return why
    rest = [ln.strip() for ln in (r.stderr + r.stdout).splitlines() if ln.strip()]
    return " | ".join(rest[-3:]) or f"exit status {r.returncode}"


class _Died(Exception):
    """The Node process ended (or was killed) before replying."""


class _Server:
    """One Node process running ortweb_server.mjs; requests and replies in order."""

    def __init__(self, node: str, prefix: Path):
        self.proc = subprocess.Popen(
            [node, str(SERVER), str(prefix / "node_modules")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.tail: collections.deque[str] = collections.deque(maxlen=40)
        self.replies: queue.Queue = queue.Queue()
        self.stderr_done = threading.Event()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        self.info: dict[str, Any] = {}

    def _read_stdout(self) -> None:
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace")
            if line.startswith(TAG):
                self.replies.put(json.loads(line[len(TAG):]))
            elif line.strip():
                self.tail.append("stdout: " + line.rstrip())
        self.replies.put(None)

    def _read_stderr(self) -> None:
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                self.tail.append(line)
        self.stderr_done.set()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr_tail(self) -> str:
        self.stderr_done.wait(5)
        return " | ".join(self.tail) or "(nothing on stderr)"

    def exit_text(self) -> str:
        try:
            code = self.proc.wait(10)
        except subprocess.TimeoutExpired:
            return "still running"
        if code < 0:
            import signal
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit status {code}"

    def request(self, req: dict[str, Any], timeout: float) -> dict[str, Any]:
        try:
            self.proc.stdin.write(json.dumps(req, separators=(",", ":")).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it died; the reader says so below
        try:
            reply = self.replies.get(timeout=timeout if timeout > 0 else None)
        except queue.Empty:
            self.kill()
            raise _Died(f"no reply within {timeout:g} s (the Node process was killed)") from None
        if reply is None:
            raise _Died(f"the Node process died ({self.exit_text()})")
        return reply

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(Exception):
            self.proc.wait(10)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.kill()


def _shutdown(holder: dict) -> None:
    srv = holder.get("server")
    if srv is not None:
        srv.close()


#: OrtErrorCode names (onnxruntime_c_api.h), for the numbers onnxruntime-web puts in its messages.
_ORT_STATUS = {1: "FAIL", 2: "INVALID_ARGUMENT", 3: "NO_SUCHFILE", 4: "NO_MODEL", 5: "ENGINE_ERROR",
               6: "RUNTIME_EXCEPTION", 7: "INVALID_PROTOBUF", 8: "MODEL_LOADED", 9: "NOT_IMPLEMENTED",
               10: "INVALID_GRAPH", 11: "EP_FAIL"}


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def create_reason(error: str) -> str:
    """InferenceSession.create's failure as ORT's own reason on one line: without the JS wrapper
    ("Error: Can't create a session. ERROR_CODE: 9, ERROR_MESSAGE: ") and the C++ source location,
    with the status named, and a bare element-type number named after its ONNX type."""
    msg = _one_line(error).removeprefix("Error: ")
    m = re.match(r"Can't create a session\. ERROR_CODE: (\d+), ERROR_MESSAGE: (.*)$", msg)
    if m:
        body = m[2]
        loc = re.match(r"^\S+\.(?:cc|h|cpp):\d+ .*?\) (?=[A-Z])", body)  # "/src/x.cc:203 sig(...) Message"
        if loc:
            body = body[loc.end():]
        msg = f"{_ORT_STATUS.get(int(m[1]), 'status ' + m[1])}: {body}"
    t = re.search(r"unsupported data type: (\d+)$", msg)
    if t and int(t[1]) in TP.DataType.values():
        msg += f" ({TP.DataType.Name(int(t[1]))})"
    return msg


class OrtWebRunner(BaseRunner):
    name = "onnxruntime-web"

    def __init__(self, threads: str = "1", optimize: str = "0", timeout: str = "300"):
        try:
            self.threads = int(threads)
            self.optimize = int(optimize)
            self.timeout = float(timeout)
        except ValueError as exc:
            raise TypeError(f"threads, optimize and timeout take numbers: {exc}") from None
        if self.optimize not in (0, 1):
            raise TypeError(f"optimize={optimize!r}: use 0 (graphOptimizationLevel 'disabled', default) or 1 ('all')")
        if not SERVER.is_file():
            raise Unsupported(f"{SERVER} is missing from this qconform installation (package data)")
        node = tools.find("node")
        if node is None:
            raise Unsupported(tools.missing("node"))
        self.node = node
        self.prefix = ensure_installed()
        self._lock = threading.RLock()
        self._holder: dict[str, Any] = {"server": None}  # the finalizer must not hold self
        self._generation = 0  # bumped at every start: session ids of an older process are void
        self._pending_release: list[int] = []
        self._finalizer = weakref.finalize(self, _shutdown, self._holder)

    # -- the Node process -------------------------------------------------------------------------

    def _server(self) -> _Server:
        srv = self._holder["server"]
        if srv is not None and srv.alive():
            return srv
        if srv is not None:
            srv.close()
        self._holder["server"] = None
        self._pending_release.clear()
        try:
            srv = _Server(self.node, self.prefix)
        except OSError as exc:
            raise RuntimeError(f"cannot start {self.node}: {exc}") from None
        try:
            info = srv.request({"op": "hello", "threads": self.threads, "optimize": self.optimize}, 120)
        except _Died as exc:
            srv.kill()
            raise RuntimeError(f"the onnxruntime-web Node process did not start: {exc}; "
                               f"stderr: {srv.stderr_tail()}") from None
        if not info.get("ok"):
            srv.kill()
            raise RuntimeError(f"the onnxruntime-web Node process did not start: {info.get('error')}")
        srv.info = info
        self._generation += 1
        self._holder["server"] = srv
        return srv

    def _request(self, req: dict[str, Any]) -> dict[str, Any]:
        """Send one request; a dead or trapped process becomes RuntimeError with its stderr tail
        (and is dropped, so the next request starts a fresh one)."""
        srv = self._server()
        if self._pending_release:
            req = {**req, "release": self._pending_release}
            self._pending_release = []
        srv.tail.clear()  # an error names what this request wrote, not the earlier cases' warnings
        try:
            reply = srv.request(req, self.timeout)
        except _Died as exc:
            srv.kill()
            self._holder["server"] = None
            raise RuntimeError(f"onnxruntime-web {req['op']}: {exc}; stderr: {srv.stderr_tail()}") from None
        if reply.get("fatal"):
            srv.close()
            self._holder["server"] = None
            raise RuntimeError(f"onnxruntime-web {req['op']}: WebAssembly trap: {reply.get('error')}; "
                               f"the Node process exited ({srv.exit_text()}); stderr: {srv.stderr_tail()}")
        return reply

    def _release_later(self, cell: list) -> None:
        gen, sid = cell
        if sid is not None and gen == self._generation:
            self._pending_release.append(sid)

    def describe(self) -> dict[str, Any]:
        with self._lock:
            info = self._server().info
        return {"name": self.name, "version": info["versions"].get("web", _installed_version(self.prefix)),
                "device": "wasm",
                "options": {"numThreads": info["numThreads"], "executionProviders": ["wasm"],
                            "graphOptimizationLevel": info["sessionOptions"]["graphOptimizationLevel"],
                            "proxy": False},
                "node": info["node"], "platform": platform.info()}

    # -- cases -------------------------------------------------------------------------------------

    def _create(self, model_b64: str) -> tuple[int, int]:
        reply = self._request({"op": "create", "model": model_b64})
        if not reply["ok"]:
            raise Unsupported("InferenceSession.create: " + create_reason(reply["error"]))
        return self._generation, reply["session"]

    def prepare(self, model: onnx.ModelProto) -> Prepared:
        for vi in model.graph.input:
            et = vi.type.tensor_type.elem_type
            if et not in _JS_OF_ONNX:
                raise Unsupported(f"onnxruntime-web's tensors cannot carry {TP.DataType.Name(et)} "
                                  f"(graph input {vi.name})")
        model_b64 = base64.b64encode(model.SerializeToString()).decode("ascii")
        names = [i.name for i in model.graph.input]
        n_out = len(model.graph.output)
        with self._lock:
            cell = list(self._create(model_b64))  # [generation, session id]

        def run(inputs: Inputs) -> Outputs:
            feeds = {}
            for n in names:
                arr = np.asarray(inputs[n])
                et = adapt.elem_type(arr.dtype)
                js = _JS_OF_ONNX.get(et)
                if js is None:
                    raise Unsupported(f"onnxruntime-web's tensors cannot carry {TP.DataType.Name(et)} (input {n})")
                feeds[n] = {"type": js, "dims": [int(d) for d in arr.shape],
                            "data": base64.b64encode(adapt.to_bytes(arr)).decode("ascii")}
            with self._lock:
                self._server()  # a live process first: a dead one is replaced here, bumping the generation
                if cell[0] != self._generation:  # the process was restarted since: a new session there
                    cell[:] = self._create(model_b64)
                reply = self._request({"op": "run", "session": cell[1], "inputs": feeds})
            if not reply["ok"]:
                err = reply["error"]
                first = err.splitlines()[0] if err else ""
                if first.split(": ", 1)[-1].startswith(("unsupported type: ", "unsupported data type: ")):
                    # OrtRun ran; the JS layer has no typed array for an output's type (int4/uint4).
                    raise Unsupported(f"run: onnxruntime-web cannot return the output to JS: {_one_line(err)}")
                raise RuntimeError(f"onnxruntime-web run: {err}")
            outs = reply["outputs"]
            if len(outs) != n_out:
                raise RuntimeError(f"onnxruntime-web returned {len(outs)} outputs, the model declares {n_out}")
            return [_decode(o) for o in outs]

        weakref.finalize(run, self._release_later, cell).atexit = False
        return run


def _decode(o: dict[str, Any]) -> np.ndarray:
    """One output as the runtime reported it: its own element type, its own shape."""
    raw = base64.b64decode(o["data"])
    shape = tuple(int(d) for d in o["dims"])
    et = _ONNX_OF_JS.get(o["type"])
    if et is not None:
        return adapt.from_bytes(raw, et, shape)
    np_type = _NUMPY_OF_JS.get(o["type"])
    if np_type is None:
        raise RuntimeError(f"output {o['name']}: onnxruntime-web tensor type {o['type']!r} has no array type here")
    return np.frombuffer(raw, np_type).reshape(shape).copy()

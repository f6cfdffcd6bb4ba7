"""``qconform worker``: a runner served on a TCP port, for a device that cannot host the suite.

The reference worker of ``qconform/docs/protocol.md`` (``qconform.wire``). It knows nothing of the
corpus: each request is a model and its inputs, each answer the outputs or why there are none. The
runner lives in a child process per session, restarted after a crash or a hang: such a case is
answered ``crashed`` or ``timeout`` and the next request gets a fresh child. The controller (the
``remote:HOST:PORT`` runner) judges, isolates and reports as for a local runner.

Security: the worker binds to loopback unless told otherwise; any other address needs a shared
secret (``--secret-file`` or ``$QCONFORM_WORKER_SECRET``), and then every connection proves it holds
the secret for fresh nonces before anything runs (HMAC-SHA256 challenge-response), every message
carries a MAC under the session key and a sequence number (a replayed or reordered message is
refused), and a message is bounded. An unauthenticated peer never gets a runner started.

Staying up: connections still in their handshake are capped (``--max-pending``) and must finish it
within ``--handshake-timeout`` seconds; sessions are capped (``--max-sessions``); a full descriptor
table (EMFILE) or another transient ``accept()`` failure is logged and waited out, never an exit; a
listener that really fails ends the worker with status 1 and a line. Every connection, refusal and
authentication failure is one line on stderr (never the secret). The runner child is killed with
its session and dies with the worker (``PR_SET_PDEATHSIG``).
"""
from __future__ import annotations

import argparse
import errno
import json
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable

from qconform import wire
from qconform.verdicts import CRASHED, Call

#: A chunk of ``run_many`` results is sent once its outputs reach this many bytes (well under the
#: controller's bound on one message), or ``FLUSH`` seconds after its first answer arrived (so a slow
#: case never holds back the answers before it for longer), or when the request is done.
CHUNK_BYTES = 8 * 2**20
FLUSH = 0.05
#: The JSON of a chunk's results stays under this (a header is bounded by ``wire.MAX_HEADER``), and
#: one message under ``MESSAGE_CHARS`` (a longer runtime message is cut, saying how long it was).
HEADER_BUDGET = wire.MAX_HEADER * 3 // 4
MESSAGE_CHARS = 16 * 2**10
#: ``accept()`` failures that pass: out of descriptors or memory for a moment, a peer gone first.
TRANSIENT_ACCEPT = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.ECONNABORTED,
                              errno.EINTR, errno.EAGAIN, errno.EPROTO, errno.EPERM})


def _die_with_parent() -> None:
    """Linux: the kernel kills this process when the thread that started it ends (its session, or
    the whole worker killed with SIGKILL); a hung runtime never outlives its worker."""
    import ctypes
    import os

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent was already gone before prctl
        os._exit(0)


@dataclass(frozen=True)
class DeviceJob:
    """The device's cases as the pools' work (``qconform.pool.Job``): an item is ``(key, model bytes,
    [(input name, TensorProto bytes), ...])``, a worker the served runner in a child of the session
    (``qconform.pool.IsolatedPool``: the engine's own isolation, so a crash or a hang is the case that
    was running's, results come back in groups, a fault inside a group is pinned by replay). Decoding
    and encoding happen in the child, beside the runtime: the worker's own process only moves bytes."""

    runner: str
    options: tuple[tuple[str, str], ...]

    def start(self) -> "_DeviceRunner":
        _die_with_parent()
        from qconform.execution import Pipeline
        from qconform.runner import resolve

        return _DeviceRunner(Pipeline.local(resolve(self.runner, dict(self.options))))

    def key(self, item: tuple) -> str:
        return item[0]

    def group(self, item: tuple) -> str:
        return item[0].partition(".")[0]  # the request it came in

    def failed(self, item: tuple, verdict: str, why: str, traceback: str = "") -> tuple:
        """What the session answers for a case the child could not answer: it crashed or hung there
        (the pool's words for it, said to be the device's), or the runner could not start."""
        said = f"the device's runner {why}" if verdict == CRASHED else f"{why} (on the device)"
        return str(verdict), said, [], 0.0


class _DeviceRunner:
    """The child's side: one case's blobs in, ``(kind, message, output TensorProto bytes, seconds)`` out,
    through the engine's own runner call (``Pipeline.call_model``: identical models prepared once). A
    case whose model or tensors do not decode is answered ``refused`` (not run)."""

    scope: str | None = None

    def __init__(self, pipeline) -> None:
        self.pipeline = pipeline

    def run(self, item: tuple) -> tuple:
        import onnx

        from qconform.adapt import from_tensor_proto, to_tensor_proto

        _, model, inputs = item
        try:
            feeds = {n: from_tensor_proto(b) for n, b in inputs}
            parsed = model if self.pipeline.knows(model) else onnx.ModelProto.FromString(model)  # parsed once
        except Exception as exc:  # noqa: BLE001 - a request the controller got wrong: refused, not run
            return wire.REFUSED, f"the request does not decode: {type(exc).__name__}: {exc}", [], 0.0
        result, seconds = self.pipeline.call_model(parsed, feeds, key=model)
        return (result.kind, result.message,
                [to_tensor_proto(a) for a in result.outputs] if result.kind == Call.OK else [], seconds)


class _Answers:
    """A request's answers on their way to the controller: held and handed to ``flush`` in chunks
    (``CHUNK_BYTES`` of outputs, ``HEADER_BUDGET`` of header, ``FLUSH`` seconds after the first held
    one ended, and at the end), and a heartbeat every ``wire.HEARTBEAT`` seconds of silence, by a
    thread while the session waits for its runner: the controller tells a busy device from a silent one."""

    def __init__(self, session: "Session", flush: Callable[[list[tuple[dict, list[bytes]]]], None],
                 timed: bool) -> None:
        self.session, self.flush, self.timed = session, flush, timed
        self.lock = threading.Lock()
        self.held: list[tuple[dict, list[bytes]]] = []
        self.since = self.said = 0.0
        self.size = self.chars = 0
        self.done = threading.Event()
        self.failed: BaseException | None = None
        self.thread = threading.Thread(target=self._tick, daemon=True, name="qconform-answers")

    def __enter__(self) -> "_Answers":
        self.said = time.monotonic()
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()
        if exc[0] is None:
            with self.lock:
                self._send()
        if self.failed is not None and exc[0] is None:
            raise self.failed

    def add(self, kind: str, message: str, out: list[bytes], seconds: float) -> None:
        if len(message) > MESSAGE_CHARS:
            message = f"{message[:MESSAGE_CHARS]}… [{len(message):,} characters in all]"
        answer = {"kind": kind, "message": message, "seconds": round(seconds, 6)}
        said = len(json.dumps(answer)) + 20  # its share of the chunk's header
        with self.lock:
            if self.failed is not None:
                raise self.failed
            if self.held and self.chars + said >= HEADER_BUDGET:
                self._send()
            if not self.held:
                self.since = time.monotonic()
            self.held.append((answer, out))
            self.size += sum(len(b) for b in out)
            self.chars += said
            if self.size >= CHUNK_BYTES or (self.timed and time.monotonic() - self.since >= FLUSH):
                self._send()

    def _send(self) -> None:
        if self.held:
            self.flush(self.held)
            self.said = time.monotonic()
        self.held, self.size, self.chars = [], 0, 0

    def _tick(self) -> None:
        s = self.session
        while not self.done.wait(FLUSH / 2):
            with self.lock:
                if self.failed is not None:
                    return
                now = time.monotonic()
                try:
                    if self.timed and self.held and now - self.since >= FLUSH:
                        self._send()
                    elif now - self.said >= wire.HEARTBEAT:
                        s.beats += 1
                        wire.send(s.sock, {"heartbeat": s.beats, "seq": s.seq}, (), s.key)
                        self.said = now
                except BaseException as exc:  # noqa: BLE001 - the session thread raises it
                    self.failed = exc
                    return


class Refusal(Exception):
    """Something this worker will not do for a peer: said in an error frame (MAC'd in an
    authenticated session) and a log line, and the connection closes."""


class Session:
    """One controller's connection: handshake, then requests answered in order by its runner child."""

    def __init__(self, sock: socket.socket, server: "Worker", peer: str) -> None:
        self.sock, self.server, self.peer = sock, server, peer
        self.key: bytes | None = None
        self.pool = None  # the runner child's pool (qconform.pool.IsolatedPool), started by the first request
        self.seq = 0
        self.beats = 0
        self.admitted = False
        self.expired = False  # set by the handshake deadline (_expire)
        self.version = wire.VERSION  # the protocol version the controller chose in its hello

    def handshake(self) -> None:
        """Raises Refusal (or a transport error); on return the peer is a controller of this
        protocol that proved it holds the secret (if the worker has one)."""
        w = self.server
        snonce = wire.nonce()
        wire.send(self.sock, wire.hello(snonce, w.secret is not None))
        hello, _ = wire.recv(self.sock, limit=0)
        if hello.get("version") not in wire.VERSIONS:
            raise Refusal(f"protocol version {hello.get('version')!r} is not supported (this worker speaks "
                          f"{', '.join(map(str, wire.VERSIONS))}; use a controller of the same qconform release line)")
        self.version = int(hello["version"])
        cnonce = str(hello.get("nonce", ""))
        if len(cnonce) < 32:
            raise Refusal("a client nonce of 16 random bytes (32 hex digits) is required")
        if w.secret is not None:
            import hmac

            if not hmac.compare_digest(str(hello.get("proof", "")), wire.proof(w.secret, b"client", snonce, cnonce)):
                raise Refusal("authentication failed")
            self.key = wire.session_key(w.secret, snonce, cnonce)
        if not w.admit(self):
            raise Refusal(f"busy: this worker serves at most {w.max_sessions} sessions at once (its "
                          f"--max-sessions); run the controller with fewer jobs (-j)")
        self.admitted = True
        wire.send(self.sock, {"ok": True, "describe": w.identity,
                              **({"proof": wire.proof(w.secret, b"worker", snonce, cnonce)} if w.secret else {})})

    def run(self, seq: int, blobs: list[bytes], cases: list[tuple[int, list[tuple[str, int]]]],
            flush: Callable[[list[tuple[dict, list[bytes]]]], None]) -> None:
        """The cases of one request through the session's runner child (a ``DeviceJob`` pool), in
        order; their answers go to ``flush`` in chunks (``_Answers``)."""
        from qconform.pool import IsolatedPool

        if self.pool is None:
            w = self.server
            self.pool = IsolatedPool(DeviceJob(w.runner, tuple(sorted(w.options.items()))), w.timeout, w.memory_mb)
        items = [(f"{seq}.{i}", blobs[k], [(n, blobs[j]) for n, j in inputs]) for i, (k, inputs) in enumerate(cases)]
        with _Answers(self, flush, timed=len(items) > 1) as answers:
            self.pool.submit(items)
            for key, _, _ in items:
                answers.add(*self.pool.result(key))

    @staticmethod
    def cases_of(header: dict, blobs: list[bytes]) -> list[tuple[int, list[tuple[str, int]]]]:
        """A request's cases as ``(model blob, [(input name, tensor blob), ...])``; Refusal for a
        request that does not say them in the protocol's terms."""
        if header.get("op") == "run":
            names = list(header.get("inputs") or [])
            if not all(isinstance(n, str) for n in names) or len(blobs) != len(names) + 1:
                raise Refusal("a run request carries the model and one tensor per input name")
            return [(0, [(n, i + 1) for i, n in enumerate(names)])]
        cases, n = header.get("cases"), len(blobs)
        ok = isinstance(cases, list) and len(cases) > 0
        out = []
        for c in cases if ok else ():
            model, inputs = (c.get("model"), c.get("inputs")) if isinstance(c, dict) else (None, None)
            if not (isinstance(model, int) and 0 <= model < n and isinstance(inputs, list) and
                    all(isinstance(x, list) and len(x) == 2 and isinstance(x[0], str) and isinstance(x[1], int)
                        and 0 <= x[1] < n for x in inputs)):
                ok = False
                break
            out.append((model, [(x[0], x[1]) for x in inputs]))
        if not ok:
            raise Refusal("a run_many request lists its cases as {\"model\": blob, \"inputs\": [[name, blob], ...]}")
        return out

    def serve(self) -> None:
        w, served, why = self.server, 0, "closed by the controller"
        timer = threading.Timer(w.handshake_timeout, self._expire)
        timer.daemon = True
        timer.start()
        try:
            try:
                self.handshake()
            finally:
                timer.cancel()
                w.handshaken(self)
            w.log(f"{self.peer}: session open ({'authenticated' if self.key else 'no secret, loopback'})")
            self.sock.settimeout(w.idle)
            while True:
                header, blobs = wire.recv(self.sock, self.key, w.max_frame)
                seq = header.get("seq")
                if seq != self.seq + 1:
                    raise Refusal(f"sequence number {seq!r} where {self.seq + 1} was due (a replay?)")
                self.seq = seq
                op = header.get("op")
                if op == "describe":
                    wire.send(self.sock, {"describe": w.identity, "seq": seq}, (), self.key)
                    continue
                if op not in ("run", "run_many") or (op == "run_many" and self.version < 3):
                    raise Refusal(f"unknown op {op!r}")
                cases = self.cases_of(header, blobs)
                self.run(seq, blobs, cases, self._answer_run if op == "run" else self._answer_many)
                served += len(cases)
        except (Refusal, wire.ProtocolError) as exc:
            why = f"refused: {exc}"
            self._say(str(exc))
        except socket.timeout:
            why = "timed out" if self.admitted else f"no handshake within {w.handshake_timeout:g}s"
        except (ConnectionError, OSError) as exc:
            why = "closed by the controller" if isinstance(exc, ConnectionError) else f"connection failed: {exc}"
            if self.expired:  # the deadline cut it (_expire), not the peer
                why = f"no handshake within {w.handshake_timeout:g}s"
        except Exception as exc:  # noqa: BLE001 - a worker bug on one request: said, and the worker stays up
            why = f"refused: {type(exc).__name__}: {exc}"
            self._say(f"the worker failed on request {self.seq}: {type(exc).__name__}: {exc}")
        finally:
            if self.pool is not None:
                self.pool.close()
            self.sock.close()
            w.ended(self)
            w.log(f"{self.peer}: {why} ({served} case(s) run)")

    def _answer_run(self, chunk: list[tuple[dict, list[bytes]]]) -> None:
        """Version 2's answer: the one case's kind and message, its outputs as blobs."""
        ((answer, out),) = chunk
        if answer["kind"] == wire.REFUSED:
            raise Refusal(answer["message"])
        answer = {k: v for k, v in answer.items() if k != "seconds"}
        wire.send(self.sock, {**answer, "seq": self.seq}, out, self.key)

    def _answer_many(self, chunk: list[tuple[dict, list[bytes]]]) -> None:
        """Version 3's answer: one message per chunk of results, each result saying how many of the
        message's blobs are its outputs."""
        results = [{**answer, "outputs": len(out)} for answer, out in chunk]
        wire.send(self.sock, {"results": results, "seq": self.seq}, [b for _, out in chunk for b in out], self.key)

    def _say(self, error: str) -> None:
        """The worker's last word: an error frame, with its MAC in an authenticated session so the
        controller can show the real reason."""
        try:
            wire.send(self.sock, {"error": error, **({"seq": self.seq} if self.key else {})}, (), self.key)
        except OSError:
            pass

    def _expire(self) -> None:
        """The handshake deadline: a peer that has not proved itself by now is cut off."""
        self.expired = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class Worker:
    """The listening socket, its admission limits and the runner every session gets."""

    def __init__(self, runner: str, options: dict[str, str], host: str = "127.0.0.1", port: int = 0,
                 secret: bytes | None = None, timeout: float = 120.0, memory_mb: int = 0,
                 max_frame: int = wire.MAX_FRAME, idle: float = 3600.0, max_sessions: int = 8,
                 max_pending: int = 8, handshake_timeout: float = 10.0, log=None) -> None:
        from qconform.report.writer import platform_meta
        from qconform.runner import describe, resolve

        if secret is None and not wire.is_loopback(host):
            raise ValueError(f"--host {host}: a worker reachable from other machines needs a shared secret "
                             f"(--secret-file FILE or ${wire.SECRET_ENV}; make one: qconform secret FILE)")
        if max_sessions < 1 or max_pending < 1 or handshake_timeout <= 0:
            raise ValueError("--max-sessions and --max-pending must be >= 1, --handshake-timeout > 0")
        self.runner, self.options, self.secret = runner, dict(options), secret
        self.timeout, self.memory_mb, self.max_frame, self.idle = timeout, memory_mb, max_frame, idle
        self.max_sessions, self.max_pending, self.handshake_timeout = max_sessions, max_pending, handshake_timeout
        self.identity = {**describe(resolve(runner, options)), "device_platform": platform_meta()}
        self._log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self._lock = threading.Lock()
        self.pending = 0  # connections in their handshake
        self.sessions = 0  # admitted sessions
        self.closing = False
        self.sock = socket.create_server((host, port))
        self.address = self.sock.getsockname()[:2]

    def log(self, line: str) -> None:
        self._log(f"qconform worker {time.strftime('%Y-%m-%dT%H:%M:%S')} {line}")

    # -- admission -----------------------------------------------------------------------------
    def admit(self, session: Session) -> bool:
        with self._lock:
            if self.sessions >= self.max_sessions:
                return False
            self.sessions += 1
            return True

    def handshaken(self, session: Session) -> None:
        with self._lock:
            self.pending -= 1

    def ended(self, session: Session) -> None:
        if session.admitted:
            with self._lock:
                self.sessions -= 1

    def serve_forever(self) -> None:
        """Accept until closed. Transient ``accept()`` failures are waited out; any other raises
        OSError (the caller exits non-zero with a line)."""
        quiet_until, backoff = 0.0, 0.05
        while True:
            try:
                conn, addr = self.sock.accept()
            except OSError as exc:
                if self.closing:
                    return
                if exc.errno not in TRANSIENT_ACCEPT:
                    raise
                now = time.monotonic()
                if now >= quiet_until:  # one line per burst, not one per failed accept
                    self.log(f"accept() failed: {exc.strerror or exc} ({errno.errorcode.get(exc.errno, exc.errno)}); "
                             "waiting and serving on")
                    quiet_until = now + 10.0
                time.sleep(backoff)
                backoff = min(1.0, backoff * 2)
                continue
            backoff = 0.05
            peer = f"{addr[0]}:{addr[1]}"
            with self._lock:
                full = self.pending >= self.max_pending
                if not full:
                    self.pending += 1
            if full:
                self.log(f"{peer}: refused: {self.max_pending} connections are already in their handshake")
                conn.close()
                continue
            self.log(f"{peer}: connected")
            conn.settimeout(self.handshake_timeout)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                threading.Thread(target=Session(conn, self, peer).serve, daemon=True,
                                 name=f"qconform-session-{peer}").start()
            except RuntimeError as exc:  # no thread to be had: this connection only
                with self._lock:
                    self.pending -= 1
                conn.close()
                self.log(f"{peer}: refused: {exc}")

    def close(self) -> None:
        self.closing = True
        self.sock.close()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runner", required=True, help="the runner to serve (as for qconform certify)")
    p.add_argument("--runner-opt", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback; others need a secret)")
    p.add_argument("--port", type=int, default=7767, help="TCP port (default 7767; 0: any free one, printed)")
    p.add_argument("--secret-file", default=None, metavar="FILE",
                   help=f"the shared secret (else ${wire.SECRET_ENV}); required off loopback; "
                        "make one with: qconform secret FILE")
    p.add_argument("--case-timeout", type=float, default=120.0, metavar="S",
                   help="a request with no result after S seconds is a timeout; the runner is restarted")
    p.add_argument("--worker-memory-mb", type=int, default=0, metavar="MB", help="address-space limit of the runner")
    p.add_argument("--max-frame-mb", type=float, default=wire.MAX_FRAME // 2**20, metavar="MB",
                   help="a message larger than this is refused unread (default 64)")
    p.add_argument("--max-sessions", type=int, default=8, metavar="N",
                   help="sessions served at once, each with its own runner (default 8; the controller's -j)")
    p.add_argument("--max-pending", type=int, default=8, metavar="N",
                   help="connections allowed in their handshake at once; more are closed at once (default 8)")
    p.add_argument("--handshake-timeout", type=float, default=10.0, metavar="S",
                   help="a connection that has not authenticated after S seconds is closed (default 10)")


def main(args: argparse.Namespace) -> int:
    from qconform.runner import RunnerError, parse_options

    try:
        secret = wire.read_secret(args.secret_file)
        worker = Worker(args.runner, parse_options(args.runner_opt), args.host, args.port, secret,
                        args.case_timeout, args.worker_memory_mb, int(args.max_frame_mb * 2**20),
                        max_sessions=args.max_sessions, max_pending=args.max_pending,
                        handshake_timeout=args.handshake_timeout)
    except (ValueError, OSError, RunnerError) as exc:
        print(f"qconform worker: {exc}", file=sys.stderr)
        return 2
    host, port = worker.address
    print(f"qconform worker: serving {worker.identity.get('name')} on {host}:{port} "
          f"({'authenticated' if secret else 'loopback only, no secret'}); Ctrl-C stops", flush=True)

    def stop(signum, frame):  # SIGTERM (a service manager's stop): as Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        worker.serve_forever()
    except KeyboardInterrupt:
        worker.log("stopped")
    except OSError as exc:
        print(f"qconform worker: the listening socket failed: {exc}; the worker stops", file=sys.stderr, flush=True)
        return 1
    finally:
        worker.close()
    return 0


__all__ = ["Session", "Worker", "add_arguments", "main"]

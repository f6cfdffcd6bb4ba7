"""``qconform worker``: a runner served on a TCP port, for a device that cannot host the suite.

The reference worker of ``qconform/docs/protocol.md`` (``qconform.wire``). It knows nothing of the
corpus: each request is a model and its inputs, each answer the outputs or why there are none. The
runner lives in a child process per connection, restarted after a crash or a hang: such a case is
answered ``crashed`` or ``timeout`` and the next request gets a fresh child. The controller (the
``remote:HOST:PORT`` runner) judges, isolates and reports as for a local runner.

Security: the worker binds to loopback unless told otherwise; any other address needs a shared
secret (``--secret-file`` or ``$QCONFORM_WORKER_SECRET``), and then every connection proves it holds
the secret for fresh nonces before anything runs (HMAC-SHA256 challenge-response), every message
carries a MAC under the session key and a sequence number (a replayed or reordered message is
refused), and frames are bounded. An unauthenticated peer never gets a runner started.
"""
from __future__ import annotations

import argparse
import socket
import sys
import threading

from qconform import wire
from qconform.verdicts import Call


def _serve_runner(conn, runner_name: str, options: dict[str, str]) -> None:
    """The child: (model bytes, {name: array}) in, a CallResult out, one at a time, through the
    engine's own runner call (``Pipeline.call_model``: identical models prepared once)."""
    import onnx

    from qconform.execution import Pipeline
    from qconform.runner import resolve

    pipeline = Pipeline.local(resolve(runner_name, options))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        model_bytes, feeds = msg
        result, _ = pipeline.call_model(onnx.load_from_string(model_bytes), feeds)
        try:
            conn.send(result)
        except (BrokenPipeError, ConnectionError, EOFError):
            return


class Session:
    """One controller's connection: handshake, then requests answered in order by its runner child."""

    def __init__(self, sock: socket.socket, server: "Worker") -> None:
        self.sock, self.server = sock, server
        self.key: bytes | None = None
        self.child = None
        self.seq = 0

    def handshake(self) -> bool:
        w = self.server
        snonce = wire.nonce()
        wire.send(self.sock, {"qconform": "worker", "versions": [wire.VERSION], "nonce": snonce,
                              "auth": w.secret is not None})
        hello, _ = wire.recv(self.sock, limit=0)
        if hello.get("version") != wire.VERSION:
            wire.send(self.sock, {"error": f"protocol version {hello.get('version')!r} is not supported "
                                           f"(this worker speaks {wire.VERSION})"})
            return False
        cnonce = str(hello.get("nonce", ""))
        if len(cnonce) < 32:
            wire.send(self.sock, {"error": "a client nonce of 16 random bytes (32 hex digits) is required"})
            return False
        if w.secret is not None:
            import hmac

            if not hmac.compare_digest(str(hello.get("proof", "")), wire.proof(w.secret, b"client", snonce, cnonce)):
                wire.send(self.sock, {"error": "authentication failed"})
                return False
            self.key = wire.session_key(w.secret, snonce, cnonce)
        wire.send(self.sock, {"ok": True, "describe": w.identity,
                              **({"proof": wire.proof(w.secret, b"worker", snonce, cnonce)} if w.secret else {})})
        return True

    def _child(self):
        from qconform.isolation import Child

        if self.child is None or not self.child.alive():
            self.child = Child(_serve_runner, (self.server.runner, self.server.options), self.server.memory_mb)
            self.child.start()
        return self.child

    def run(self, blobs: list[bytes], names: list[str]) -> tuple[dict, list[bytes]]:
        from qconform.adapt import from_tensor_proto, to_tensor_proto
        from qconform.isolation import Child, describe_exit

        if len(blobs) != len(names) + 1:
            raise wire.ProtocolError("a run request carries the model and one tensor per input name")
        feeds = {n: from_tensor_proto(b) for n, b in zip(names, blobs[1:])}
        child = self._child()
        child.send((blobs[0], feeds))
        got = child.receive(self.server.timeout)
        if got is Child.TIMEOUT:
            child.kill()
            return {"kind": Call.TIMEOUT, "message": f"no result within {self.server.timeout:g}s on the device; "
                                                  "its runner was killed"}, []
        if got is Child.GONE:
            code = child.wait_exit()
            child.kill()
            return {"kind": Call.CRASHED, "message": f"the device's runner {describe_exit(code)}"}, []
        if got.kind != Call.OK:
            return {"kind": got.kind, "message": got.message}, []
        return {"kind": Call.OK, "message": ""}, [to_tensor_proto(a) for a in got.outputs]

    def serve(self) -> None:
        try:
            self.sock.settimeout(self.server.idle)
            if not self.handshake():
                return
            while True:
                header, blobs = wire.recv(self.sock, self.key, self.server.max_frame)
                seq = header.get("seq")
                if seq != self.seq + 1:
                    raise wire.ProtocolError(f"sequence number {seq!r} where {self.seq + 1} was due (a replay?)")
                self.seq = seq
                if header.get("op") == "run":
                    answer, out = self.run(blobs, list(header.get("inputs", [])))
                elif header.get("op") == "describe":
                    answer, out = {"describe": self.server.identity}, []
                else:
                    raise wire.ProtocolError(f"unknown op {header.get('op')!r}")
                wire.send(self.sock, {**answer, "seq": seq}, out, self.key)
        except (wire.ProtocolError, ValueError) as exc:
            try:
                wire.send(self.sock, {"error": str(exc)})
            except OSError:
                pass
        except (ConnectionError, OSError):
            pass
        finally:
            if self.child is not None:
                self.child.close()
            self.sock.close()


class Worker:
    """The listening socket and the runner every session gets."""

    def __init__(self, runner: str, options: dict[str, str], host: str = "127.0.0.1", port: int = 0,
                 secret: bytes | None = None, timeout: float = 120.0, memory_mb: int = 0,
                 max_frame: int = wire.MAX_FRAME, idle: float = 3600.0) -> None:
        from qconform.report.writer import platform_meta
        from qconform.runner import describe, resolve

        if secret is None and not wire.is_loopback(host):
            raise ValueError(f"--host {host}: a worker reachable from other machines needs a shared secret "
                             f"(--secret-file FILE or ${wire.SECRET_ENV})")
        self.runner, self.options, self.secret = runner, dict(options), secret
        self.timeout, self.memory_mb, self.max_frame, self.idle = timeout, memory_mb, max_frame, idle
        self.identity = {**describe(resolve(runner, options)), "device_platform": platform_meta()}
        self.sock = socket.create_server((host, port))
        self.address = self.sock.getsockname()[:2]

    def serve_forever(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=Session(conn, self).serve, daemon=True).start()

    def close(self) -> None:
        self.sock.close()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runner", required=True, help="the runner to serve (as for qconform certify)")
    p.add_argument("--runner-opt", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback; others need a secret)")
    p.add_argument("--port", type=int, default=7767, help="TCP port (default 7767; 0: any free one, printed)")
    p.add_argument("--secret-file", default=None, metavar="FILE",
                   help=f"the shared secret (else ${wire.SECRET_ENV}); required off loopback")
    p.add_argument("--case-timeout", type=float, default=120.0, metavar="S",
                   help="a request with no result after S seconds is a timeout; the runner is restarted")
    p.add_argument("--worker-memory-mb", type=int, default=0, metavar="MB", help="address-space limit of the runner")
    p.add_argument("--max-frame-mb", type=int, default=wire.MAX_FRAME // 2**20, metavar="MB",
                   help="frames above this are refused unread")


def main(args: argparse.Namespace) -> int:
    from qconform.runner import RunnerError, parse_options

    try:
        secret = wire.read_secret(args.secret_file)
        worker = Worker(args.runner, parse_options(args.runner_opt), args.host, args.port, secret,
                        args.case_timeout, args.worker_memory_mb, args.max_frame_mb * 2**20)
    except (ValueError, OSError, RunnerError) as exc:
        print(f"qconform worker: {exc}", file=sys.stderr)
        return 2
    host, port = worker.address
    print(f"qconform worker: serving {worker.identity.get('name')} on {host}:{port} "
          f"({'authenticated' if secret else 'loopback only, no secret'}); Ctrl-C stops", flush=True)
    try:
        worker.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        worker.close()
    return 0


__all__ = ["Session", "Worker", "add_arguments", "main"]

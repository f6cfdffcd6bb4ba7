"""``--runner remote:HOST:PORT``: a runner whose runtime lives on a device, behind ``qconform worker``
(or a device team's own worker, ``qconform/docs/protocol.md``).

Everything but the runtime stays here: the corpus, the model building, the comparison, the
diagnosis and the report. A batch of cases goes in one request (protocol version 3, ``run_batch``:
each case's model as ModelProto bytes, a model shared by several sent once, its inputs as
TensorProto) and their outputs come back in chunks; a version-2 worker gets one case a request. What the device's runtime did maps onto the verdicts a local runner
gets: ``unsupported`` (``Unsupported``), ``error`` (an exception), ``crashed`` and ``timeout`` (the
device's runner died or hung: ``CaseFault``).

What the infrastructure did is never a verdict on the runtime. A connection that cannot be made,
drops, stalls (no heartbeat for ``stall`` seconds while a request runs) or answers outside the
protocol is reopened with backoff and the request sent again (it is idempotent: a model and its
inputs); a case refused by the worker (an oversized message, ...) is *not run* (``NotRun``). A device
that cannot be reached again within ``reconnect`` seconds, or that loses one request ``retries`` + 1
times, is gone: this case and every later one are *not run* and the front-end stops the run as
incomplete. The report's identity is the device's own ``describe()`` and platform.

Authentication cannot be downgraded: a controller holding the secret refuses a worker that does not
prove it holds it too, and a controller without one talks only to a worker on a loopback address
(``insecure=1`` accepts another, and the report says the device was not authenticated).

Options (``--runner-opt``): ``secret_file`` (else ``$QCONFORM_WORKER_SECRET``); ``timeout`` (seconds
to wait for each answer of a request -- a batch's chunks each restart it --, default 150: the
worker's own case timeout plus a margin); ``stall``
(seconds of silence that mean the device is gone, default 10); ``reconnect`` (seconds to keep trying
to reach a device that dropped, default 60); ``retries`` (resends of one case after a dropped
connection, default 2); ``insecure`` (1: talk to an unauthenticated worker off loopback).
"""
from __future__ import annotations

import hmac
import json
import os
import socket
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import onnx

from qconform import adapt, wire
from qconform.runner import BaseRunner, CaseFault, NotRun, RunnerError, Unsupported
from qconform.verdicts import ERROR, FAULTS, UNSUPPORTED, Call

#: The answer kinds a worker may give for a run request (protocol.md, "Requests"): a verdict's, or
#: ``wire.REFUSED`` (a case the worker would not run: not run, never a verdict).
OK = Call.OK
#: A run_many request carries cases up to this many bytes of models and tensors (a larger case alone):
#: well under a worker's bound on one message (64 MiB by default).
REQUEST_BYTES = 8 * 2**20


def _addresses(spec: str) -> list[tuple[str, int]]:
    out = []
    for address in spec.split(","):
        host, sep, port = address.strip().rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise RunnerError(f"remote:{spec}: expected remote:HOST:PORT (or several, comma-separated)")
        out.append((host.strip("[]"), int(port)))
    return out


def _seconds(name: str, value: str, low: float = 0.0) -> float:
    try:
        x = float(value)
    except ValueError:
        x = float("nan")
    if not x > low:
        raise RunnerError(f"--runner-opt {name}={value!r}: expected a number of seconds > {low:g}")
    return x


class _Refused(Exception):
    """The worker said no to this request (an authenticated error frame): resending will not help."""


class RemoteRunner(BaseRunner):
    """One device worker, or several serving the same runtime (``remote:H1:P1,H2:P2``): each runner
    worker of the controller (``-j N``) takes one by its process id and fails over to the next when
    it cannot connect. Their identities must agree: a report names one runtime."""

    name = "remote"

    def __init__(self, address: str, timeout: str = "150", secret_file: str = "", stall: str = "10",
                 reconnect: str = "60", retries: str = "2", insecure: str = "0") -> None:
        self.addresses = _addresses(address)
        first = os.getpid() % len(self.addresses)
        self.addresses = self.addresses[first:] + self.addresses[:first]
        (self.host, self.port) = self.addresses[0]
        self.timeout, self.stall = _seconds("timeout", timeout), _seconds("stall", stall)
        self.reconnect = _seconds("reconnect", reconnect, -1.0)
        if not retries.isdigit():
            raise RunnerError(f"--runner-opt retries={retries!r}: expected a whole number >= 0")
        if insecure not in ("0", "1"):
            raise RunnerError(f"--runner-opt insecure={insecure!r}: expected 0 or 1")
        self.retries, self.insecure = int(retries), insecure == "1"
        try:
            self._secret = wire.read_secret(secret_file or None)
        except (OSError, ValueError) as exc:
            raise RunnerError(f"remote:{address}: {exc}") from None
        self._sock: socket.socket | None = None
        self._key: bytes | None = None
        self._seq = 0
        self.version = wire.VERSION  # the protocol version of the open session (the highest both speak)
        self._gone = ""  # why the device is gone for good: every later case is not run at once
        self.device: dict[str, Any] = {}
        #: the describe() of the first worker this runner spoke to: every later session must serve the same
        self._first_device: dict[str, Any] = {}

    # -- the connection ------------------------------------------------------------------------
    def _connect(self) -> socket.socket:
        """The open session, or a new one: the first worker that answers (this lane's own first).
        RunnerError: a worker that answers but must not be used (authentication); ConnectionError:
        none could be reached."""
        if self._sock is not None:
            return self._sock
        errors = []
        for host, port in self.addresses:  # this worker's own first, then the others (failover)
            try:
                sock = socket.create_connection((host, port), timeout=self.stall)
            except OSError as exc:
                errors.append(f"{host}:{port}: {exc.strerror or exc}")
                continue
            self.host, self.port = host, port
            break
        else:
            raise ConnectionError(f"cannot reach the device worker at {'; '.join(errors)}")
        try:
            sock.settimeout(self.stall)
            self._handshake(sock)
        except BaseException:
            sock.close()
            raise
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # one small message each way per case
        self._sock, self._seq = sock, 0
        return sock

    def _handshake(self, sock: socket.socket) -> None:
        where = f"the worker at {self.host}:{self.port}"
        hello, _ = wire.recv(sock, limit=0)
        if hello.get("qconform") != "worker":
            raise wire.ProtocolError(f"{where} is not a qconform worker (its first message: {str(hello)[:120]})")
        shared = [v for v in (hello.get("versions") or []) if v in wire.VERSIONS]
        if not shared:
            raise RunnerError(f"{where} speaks protocol version(s) {hello.get('versions')}, this controller "
                              f"{', '.join(map(str, wire.VERSIONS))}: install the same qconform release on both sides")
        version = max(shared)
        auth = hello.get("auth") is True
        if self._secret is not None and not auth:
            raise RunnerError(f"{where} does not ask for the shared secret, and this controller holds one: "
                              "refused (an impostor on that address, or a worker started without --secret-file)")
        if self._secret is None and auth:
            raise RunnerError(f"{where} requires the shared secret (--runner-opt secret_file=FILE or "
                              f"${wire.SECRET_ENV})")
        peer = sock.getpeername()[0]
        if not auth and not wire.is_loopback(peer) and not self.insecure:
            raise RunnerError(f"{where} ({peer}) is not on this machine and no shared secret is given: anyone "
                              "could answer there (give --runner-opt secret_file=FILE, or --runner-opt insecure=1 "
                              "to accept an unauthenticated device; the report will say so)")
        snonce, cnonce = str(hello.get("nonce", "")), wire.nonce()
        wire.send(sock, {"version": version, "nonce": cnonce,
                         **({"proof": wire.proof(self._secret, b"client", snonce, cnonce)} if auth else {})})
        welcome, _ = wire.recv(sock, limit=0)
        if "error" in welcome:
            raise RunnerError(f"{where} refused: {welcome['error']}")
        if auth:
            if not hmac.compare_digest(str(welcome.get("proof", "")),
                                       wire.proof(self._secret, b"worker", snonce, cnonce)):
                raise RunnerError(f"{where} could not prove it holds the shared secret: refused")
            self._key = wire.session_key(self._secret, snonce, cnonce)
        else:
            self._key = None
        device = dict(welcome.get("describe") or {})
        if self._first_device and device != self._first_device:  # a worker restarted, or a failover, serving another
            raise RunnerError(f"{where} now serves {device.get('name')} {device.get('version')} (its describe() "
                              "differs from the one this run started with): refused, its results would be credited "
                              "to the first")
        self.device = self._first_device = device
        self.version = version

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock, self._key = None, None

    def _exchange(self, make: Callable[[], tuple[dict, list[bytes]]], take: Callable[[dict, list[bytes]], bool]) -> None:
        """One request on the open session (``make()`` builds it once the session, and so its
        protocol version, is known): heartbeats while it runs, then its answers, each handed to
        ``take`` until it says the request is answered. The ``timeout`` backstop restarts with each
        answer (a batch's results come in chunks)."""
        sock = self._connect()
        header, blobs = make()
        self._seq += 1
        seq, deadline = self._seq, time.monotonic() + self.timeout
        sock.settimeout(self.stall)
        wire.send(sock, {**header, "seq": seq}, blobs, self._key)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout(f"no answer within timeout={self.timeout:g}s although the worker's heartbeats "
                                     "went on: its --case-timeout is longer than this controller's timeout")
            sock.settimeout(min(self.stall, left))
            try:
                answer, out = wire.recv(sock, self._key)
            except socket.timeout:
                raise socket.timeout(f"the device was silent for {self.stall:g}s (no answer, no heartbeat)") from None
            if "error" in answer:
                raise _Refused(str(answer["error"]))
            if answer.get("seq") != seq:
                raise wire.ProtocolError(f"answer to request {answer.get('seq')!r} where {seq} was due")
            if "heartbeat" in answer:
                continue
            if take(answer, out):
                return
            deadline = time.monotonic() + self.timeout

    def _request(self, make: Callable[[], tuple[dict, list[bytes]]], take: Callable[[dict, list[bytes]], bool]) -> None:
        """A request answered (``_exchange``), sent again after a dropped connection (``make`` then
        builds what is still unanswered); NotRun when it cannot be."""
        if self._gone:
            raise NotRun(self._gone, stop=True)
        lost = 0
        while True:
            try:
                return self._exchange(make, take)
            except _Refused as exc:
                self._drop()
                raise NotRun(f"the worker at {self.host}:{self.port} refused the request: {exc}") from None
            except RunnerError as exc:  # reachable, but not a worker this controller may use
                self._drop()
                self._gone = f"{exc}; the run stopped"
                raise NotRun(self._gone, stop=True) from None
            except (OSError, wire.ProtocolError) as exc:  # socket.timeout and ConnectionError are OSErrors
                self._drop()
                lost += 1
                why = str(exc) or type(exc).__name__
                if lost > self.retries:  # reachable, but it cannot keep a request: every case would pay this
                    self._gone = (f"the connection to the device worker at {self.host}:{self.port} failed {lost} "
                                  f"times while one request ran (last: {why}); the run stopped")
                    raise NotRun(self._gone, stop=True) from None
                self._reach_again(why)

    def _reach_again(self, why: str) -> None:
        """Reconnect with backoff for at most ``reconnect`` seconds; after that the device is gone."""
        deadline, pause = time.monotonic() + self.reconnect, 0.25
        while True:
            try:
                self._connect()
                return
            except RunnerError as exc:
                self._gone = f"{exc}; the run stopped"
                raise NotRun(self._gone, stop=True) from None
            except (OSError, wire.ProtocolError) as exc:
                why = str(exc) or type(exc).__name__
            if time.monotonic() + pause > deadline:
                self._gone = (f"the device worker at {self.host}:{self.port} could not be reached again within "
                              f"{self.reconnect:g}s (last: {why}); the run stopped")
                raise NotRun(self._gone, stop=True)
            time.sleep(pause)
            pause = min(5.0, pause * 2)

    # -- the runner contract -------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """The device's identity; with several workers, each is asked and all must agree."""
        if len(self.addresses) > 1:
            seen = {}
            for host, port in self.addresses:
                other = RemoteRunner(f"{host}:{port}", str(self.timeout), stall=str(self.stall),
                                     insecure="1" if self.insecure else "0")
                other._secret = self._secret
                other._connect()
                seen[f"{host}:{port}"] = json.dumps(other.device, sort_keys=True)
                other._drop()
            if len(set(seen.values())) > 1:
                raise RunnerError("the workers serve different runtimes or settings (their describe() differ: "
                                  + "; ".join(f"{a}: {d[:120]}" for a, d in seen.items()) + ")")
        try:
            self._connect()
        except (OSError, wire.ProtocolError) as exc:
            raise RunnerError(f"{exc} (no case was run)") from None
        info = dict(self.device)
        platform = info.pop("device_platform", None)
        return {**info, "remote": ",".join(f"{h}:{p}" for h, p in sorted(self.addresses)),
                "authenticated": self._key is not None,
                **({"platform": platform} if platform else {})}

    def prepare(self, model: onnx.ModelProto):
        data = model.SerializeToString()

        def run(inputs):
            (outcome, _), = self.run_batch([(data, inputs)])
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome

        return run

    def run_batch(self, items: Sequence[tuple[bytes, Mapping[str, np.ndarray]]]) -> list[tuple[Any, float]]:
        """Many models (their bytes) and their inputs through the device, in as few round trips as the
        worker allows: version 3 ``run_many`` requests of at most ``REQUEST_BYTES`` each, results
        streamed back in chunks; a version-2 worker one ``run`` per case. Each item's outcome is its
        outputs or the exception a runner would raise (Unsupported, CaseFault, RuntimeError, NotRun),
        with the device's seconds for it. A dropped connection resends only what is unanswered."""
        results: list[tuple[Any, float] | None] = [None] * len(items)
        encoded: dict[int, list[bytes]] = {}
        sent: list[int] = []

        def blobs_of(i: int) -> list[bytes]:
            if i not in encoded:
                encoded[i] = [adapt.to_tensor_proto(items[i][1][n], n) for n in items[i][1]]
            return encoded[i]

        def make() -> tuple[dict, list[bytes]]:
            todo = [i for i, r in enumerate(results) if r is None]
            if self.version < 3:
                sent[:] = todo[:1]
                (i,) = sent
                return {"op": "run", "inputs": list(items[i][1])}, [items[i][0], *blobs_of(i)]
            blobs: list[bytes] = []
            where: dict[bytes, int] = {}  # a model sent once per request, however many cases share it
            cases, size = [], 0
            sent.clear()
            for i in todo:
                data, feeds = items[i]
                tensors = blobs_of(i)
                more = (0 if data in where else len(data)) + sum(len(b) for b in tensors)
                if sent and size + more > REQUEST_BYTES:
                    break
                if data not in where:
                    where[data] = len(blobs)
                    blobs.append(data)
                cases.append({"model": where[data], "inputs": [[n, len(blobs) + k] for k, n in enumerate(feeds)]})
                blobs += tensors
                size += more
                sent.append(i)
            return {"op": "run_many", "cases": cases}, blobs

        def take(answer: dict, out: list[bytes]) -> bool:
            if self.version < 3:
                results[sent[0]] = (self._outcome(answer, out), 0.0)
                return True
            given = answer.get("results")
            waiting = [i for i in sent if results[i] is None]
            if not isinstance(given, list) or not 0 < len(given) <= len(waiting) or \
                    not all(isinstance(r, dict) and isinstance(r.get("outputs"), int) and r["outputs"] >= 0
                            for r in given) or sum(r["outputs"] for r in given) != len(out):
                raise wire.ProtocolError("a run_many answer that does not match its request")
            at = 0
            for i, r in zip(waiting, given):
                seconds = r.get("seconds")
                results[i] = (self._outcome(r, out[at:at + r["outputs"]]),
                              float(seconds) if isinstance(seconds, (int, float)) else 0.0)
                at += r["outputs"]
            return len(given) == len(waiting)

        while any(r is None for r in results):
            try:
                self._request(make, take)
            except NotRun as exc:  # refused: the request's unanswered cases; gone: every case left
                for i in (range(len(items)) if exc.stop else sent):
                    if results[i] is None:
                        results[i] = (exc, 0.0)
        return results  # type: ignore[return-value]

    def _outcome(self, answer: dict, out: list[bytes]) -> Any:
        """One case's answer as its outputs, or the exception a local runner would have raised."""
        kind, message = answer.get("kind"), str(answer.get("message", ""))
        if kind == OK:
            return [adapt.from_tensor_proto(b) for b in out]
        if kind == UNSUPPORTED:
            return Unsupported(message)
        if kind in FAULTS:
            return CaseFault(kind, message)
        if kind == ERROR:
            return RuntimeError(message)
        if kind == wire.REFUSED:
            return NotRun(f"the worker at {self.host}:{self.port} refused the case: {message}")
        return NotRun(f"the worker at {self.host}:{self.port} answered kind {kind!r}, which the protocol "
                      "does not define")


__all__ = ["RemoteRunner"]

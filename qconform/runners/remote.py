"""``--runner remote:HOST:PORT``: a runner whose runtime lives on a device, behind ``qconform worker``
(or a device team's own worker, ``qconform/docs/protocol.md``).

Everything but the runtime stays here: the corpus, the model building, the comparison, the
diagnosis and the report. Each call sends the model (ModelProto bytes) and its inputs (TensorProto)
and reads the outputs back. What the device says maps onto the verdicts a local runner gets:
``unsupported`` (``Unsupported``), ``error`` (an exception), ``crashed`` and ``timeout`` (the device's
runner died or hung: ``CaseFault``). A connection that drops, stalls past ``timeout`` or answers
garbage costs the case in flight (crashed, timeout, error) and is opened afresh for the next one:
the batch resumes. The report's identity is the device's own ``describe()`` and platform.

Options (``--runner-opt``): ``timeout`` (seconds a request may take, default 150: the worker's own
case timeout plus a margin), ``secret_file`` (the shared secret; else ``$QCONFORM_WORKER_SECRET``).
"""
from __future__ import annotations

import json
import os
import socket
from typing import Any

import onnx

from qconform import adapt, wire
from qconform.runner import BaseRunner, CaseFault, RunnerError, Unsupported
from qconform.verdicts import CRASHED, ERROR, FAULTS, TIMEOUT, UNSUPPORTED, Call


def _addresses(spec: str) -> list[tuple[str, int]]:
    out = []
    for address in spec.split(","):
        host, sep, port = address.strip().rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise RunnerError(f"remote:{spec}: expected remote:HOST:PORT (or several, comma-separated)")
        out.append((host.strip("[]"), int(port)))
    return out


class RemoteRunner(BaseRunner):
    """One device worker, or several serving the same runtime (``remote:H1:P1,H2:P2``): each runner
    worker of the controller (``-j N``) takes one by its process id and fails over to the next when
    it cannot connect. Their identities must agree: a report names one runtime."""

    name = "remote"

    def __init__(self, address: str, timeout: str = "150", secret_file: str = "") -> None:
        self.addresses = _addresses(address)
        first = os.getpid() % len(self.addresses)
        self.addresses = self.addresses[first:] + self.addresses[:first]
        (self.host, self.port), self.timeout = self.addresses[0], float(timeout)
        try:
            self._secret = wire.read_secret(secret_file or None)
        except (OSError, ValueError) as exc:
            raise RunnerError(f"remote:{address}: {exc}") from None
        self._sock: socket.socket | None = None
        self._key: bytes | None = None
        self._seq = 0
        self.device: dict[str, Any] = {}

    # -- the connection ------------------------------------------------------------------------
    def _connect(self) -> socket.socket:
        if self._sock is not None:
            return self._sock
        errors = []
        for host, port in self.addresses:  # this worker's own first, then the others (failover)
            try:
                sock = socket.create_connection((host, port), timeout=self.timeout)
            except OSError as exc:
                errors.append(f"{host}:{port}: {exc}")
                continue
            self.host, self.port = host, port
            break
        else:
            raise ConnectionError(f"cannot reach the worker at {'; '.join(errors)}")
        try:
            hello, _ = wire.recv(sock, limit=0)
            if hello.get("qconform") != "worker" or wire.VERSION not in hello.get("versions", []):
                raise wire.ProtocolError(f"not a qconform worker speaking version {wire.VERSION}: {hello}")
            if hello.get("auth") and self._secret is None:
                raise RunnerError(f"the worker at {self.host}:{self.port} requires the shared secret "
                                  f"(--runner-opt secret_file=FILE or ${wire.SECRET_ENV})")
            cnonce = wire.nonce()
            snonce = str(hello.get("nonce", ""))
            wire.send(sock, {"version": wire.VERSION, "nonce": cnonce,
                             **({"proof": wire.proof(self._secret, b"client", snonce, cnonce)} if hello.get("auth") else {})})
            welcome, _ = wire.recv(sock, limit=0)
            if "error" in welcome:
                raise RunnerError(f"the worker at {self.host}:{self.port} refused: {welcome['error']}")
            if hello.get("auth"):
                import hmac

                if not hmac.compare_digest(str(welcome.get("proof", "")),
                                           wire.proof(self._secret, b"worker", snonce, cnonce)):
                    raise wire.ProtocolError("the worker could not prove it holds the shared secret")
                self._key = wire.session_key(self._secret, snonce, cnonce)
            self.device = dict(welcome.get("describe") or {})
        except BaseException:
            sock.close()
            raise
        self._sock, self._seq = sock, 0
        return sock

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock, self._key = None, None

    def _request(self, header: dict, blobs: list[bytes]) -> tuple[dict, list[bytes]]:
        sock = self._connect()
        self._seq += 1
        try:
            wire.send(sock, {**header, "seq": self._seq}, blobs, self._key)
            answer, out = wire.recv(sock, self._key)
        except BaseException:
            self._drop()  # whatever happened, the next case starts on a fresh connection
            raise
        if "error" in answer:
            self._drop()
            raise wire.ProtocolError(f"the worker closed the session: {answer['error']}")
        if answer.get("seq") != self._seq:
            self._drop()
            raise wire.ProtocolError(f"answer to request {answer.get('seq')!r} where {self._seq} was due")
        return answer, out

    # -- the runner contract -------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """The device's identity; with several workers, each is asked and all must agree."""
        if len(self.addresses) > 1:
            seen = {}
            for host, port in self.addresses:
                other = RemoteRunner(f"{host}:{port}", str(self.timeout))
                other._secret = self._secret
                other._connect()
                seen[f"{host}:{port}"] = json.dumps(other.device, sort_keys=True)
                other._drop()
            if len(set(seen.values())) > 1:
                raise RunnerError("the workers serve different runtimes or settings (their describe() differ: "
                                  + "; ".join(f"{a}: {d[:120]}" for a, d in seen.items()) + ")")
        self._connect()
        info = dict(self.device)
        platform = info.pop("device_platform", None)
        return {**info, "remote": ",".join(f"{h}:{p}" for h, p in sorted(self.addresses)),
                "authenticated": self._key is not None,
                **({"platform": platform} if platform else {})}

    def prepare(self, model: onnx.ModelProto):
        data = model.SerializeToString()

        def run(inputs):
            names = list(inputs)
            try:
                answer, out = self._request({"op": "run", "inputs": names},
                                            [data, *(adapt.to_tensor_proto(inputs[n], n) for n in names)])
            except socket.timeout:
                raise CaseFault(TIMEOUT, f"no answer from the worker at {self.host}:{self.port} within "
                                           f"{self.timeout:g}s; the connection was dropped") from None
            except (ConnectionError, OSError) as exc:
                raise CaseFault(CRASHED, f"the connection to the worker at {self.host}:{self.port} was lost: "
                                           f"{exc}") from None
            kind = answer.get("kind")
            if kind == Call.OK:
                return [adapt.from_tensor_proto(b) for b in out]
            message = str(answer.get("message", ""))
            if kind == UNSUPPORTED:
                raise Unsupported(message)
            if kind in FAULTS:
                raise CaseFault(kind, message)
            if kind == ERROR:
                raise RuntimeError(message)
            raise wire.ProtocolError(f"unknown answer kind {kind!r}")

        return run


__all__ = ["RemoteRunner"]

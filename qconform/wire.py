"""The device worker protocol (``qconform worker`` and ``--runner remote:HOST:PORT``), version 1.

Language-neutral on purpose: a device team writes a worker in C or C++ against their SDK from
``qconform/docs/protocol.md`` alone. Frames are length-prefixed bytes; headers are JSON; models
are ONNX ModelProto bytes and tensors ONNX TensorProto bytes. Never pickle: nothing a peer sends is
ever executed as code. This module is the reference implementation of both ends' framing,
handshake and message authentication.

A message is a header frame, then one frame per entry of ``header["blobs"]`` (their lengths). A
frame is a 4-byte big-endian length and that many bytes; a frame longer than the receiver's bound
is refused before it is read.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import struct
from collections.abc import Sequence

VERSION = 1
#: Frames above this are refused unread (a model or tensor of the corpus is at most a few MiB).
MAX_FRAME = 64 * 2**20
#: A header is small; one this long is hostile.
MAX_HEADER = 64 * 2**10
SECRET_ENV = "QCONFORM_WORKER_SECRET"


class ProtocolError(Exception):
    """The peer broke the protocol (garbage, a truncated or oversized frame, a bad MAC, a replay)."""


def read_secret(path: str | None = None) -> bytes | None:
    """The shared secret: the file's contents (stripped), else ``$QCONFORM_WORKER_SECRET``, else None.
    It is never printed, logged or written into a report."""
    if path:
        data = open(path, "rb").read().strip()
        if not data:
            raise ValueError(f"secret file {path} is empty")
        return data
    env = os.environ.get(SECRET_ENV, "").strip()
    return env.encode() if env else None


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("the peer closed the connection" + (" mid-frame" if buf else ""))
        buf += chunk
    return bytes(buf)


def recv_frame(sock: socket.socket, limit: int) -> bytes:
    (n,) = struct.unpack(">I", _recv_exact(sock, 4))
    if n > limit:
        raise ProtocolError(f"frame of {n} bytes refused (the bound is {limit})")
    return _recv_exact(sock, n)


def _mac(key: bytes, header: dict, blobs: Sequence[bytes]) -> str:
    h = hmac.new(key, json.dumps({k: v for k, v in header.items() if k != "mac"}, sort_keys=True).encode(),
                 hashlib.sha256)
    for b in blobs:
        h.update(hashlib.sha256(b).digest())
    return h.hexdigest()


def send(sock: socket.socket, header: dict, blobs: Sequence[bytes] = (), key: bytes | None = None) -> None:
    """One message; with ``key`` (an authenticated session) the header carries its MAC."""
    header = {**header, "blobs": [len(b) for b in blobs]}
    if key is not None:
        header["mac"] = _mac(key, header, blobs)
    head = json.dumps(header, sort_keys=True).encode()
    parts = [struct.pack(">I", len(head)), head]
    for b in blobs:
        parts += [struct.pack(">I", len(b)), b]
    sock.sendall(b"".join(parts))


def recv(sock: socket.socket, key: bytes | None = None, limit: int = MAX_FRAME) -> tuple[dict, list[bytes]]:
    """One message: (header, blobs). Garbage, oversized frames and (with ``key``) a missing or wrong
    MAC raise ProtocolError."""
    raw = recv_frame(sock, MAX_HEADER)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ProtocolError("the header is not JSON") from None
    if not isinstance(header, dict) or not isinstance(header.get("blobs", []), list):
        raise ProtocolError("the header is not a JSON object with a blobs list")
    sizes = header.get("blobs", [])
    if not all(isinstance(n, int) and 0 <= n <= limit for n in sizes) or sum(sizes) > 4 * limit:
        raise ProtocolError(f"blob sizes {sizes[:8]} refused (the bound is {limit} bytes each)")
    blobs = []
    for n in sizes:
        blob = recv_frame(sock, limit)
        if len(blob) != n:
            raise ProtocolError("a blob's length differs from the header's")
        blobs.append(blob)
    if key is not None and not hmac.compare_digest(str(header.get("mac", "")), _mac(key, header, blobs)):
        raise ProtocolError("message authentication failed")
    return header, blobs


def proof(secret: bytes, role: bytes, server_nonce: str, client_nonce: str) -> str:
    """HMAC-SHA256 of a role and both nonces: the handshake's challenge-response (each side proves it
    holds the secret for this connection's fresh nonces, so a recorded handshake cannot be replayed)."""
    return hmac.new(secret, role + b"|" + server_nonce.encode() + b"|" + client_nonce.encode(), hashlib.sha256).hexdigest()


def session_key(secret: bytes, server_nonce: str, client_nonce: str) -> bytes:
    return bytes.fromhex(proof(secret, b"session", server_nonce, client_nonce))


def nonce() -> str:
    return os.urandom(16).hex()


def is_loopback(host: str) -> bool:
    import ipaddress

    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


__all__ = ["MAX_FRAME", "ProtocolError", "SECRET_ENV", "VERSION", "is_loopback", "nonce", "proof", "read_secret",
           "recv", "send", "session_key"]

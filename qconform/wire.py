"""The device worker protocol (``qconform worker`` and ``--runner remote:HOST:PORT``), version 3.

Language-neutral on purpose: a device team writes a worker in C or C++ against their SDK from
``qconform/docs/protocol.md`` alone. Frames are length-prefixed bytes; headers are JSON; models
are ONNX ModelProto bytes and tensors ONNX TensorProto bytes. Never pickle: nothing a peer sends is
ever executed as code. This module is the reference implementation of both ends' framing,
handshake, message authentication and secrets.

A message is a header frame, then one frame per entry of ``header["blobs"]`` (their lengths). A
frame is a 4-byte big-endian length and that many bytes; a message whose blobs together exceed the
receiver's bound is refused before any blob is read.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import stat
import struct
from collections.abc import Sequence
from pathlib import Path

#: Version 2 added heartbeats while a request runs and MACs on the worker's error frames; version 3
#: adds ``run_many`` (many cases in one request, their results streamed back in chunks: one round trip
#: per batch instead of per case). A peer of a version the other does not speak is refused in the
#: handshake with one line naming both.
VERSION = 3
#: A run answer's kind for a case the worker will not run (its model or tensors do not decode): the
#: case is not run, never a verdict; the other kinds are the verdicts' (``verdicts.Call``).
REFUSED = "refused"
#: The versions this reference speaks (the worker offers them; the controller takes the highest it
#: shares): a version-2 worker written by a device team still serves, one case per request.
VERSIONS = (2, 3)
#: A message's blobs together above this are refused unread (a model or tensor of the corpus is at
#: most a few MiB; the bound is per message, so one message can never cost more than this).
MAX_FRAME = 64 * 2**20
#: A header is small; one this long is hostile.
MAX_HEADER = 64 * 2**10
SECRET_ENV = "QCONFORM_WORKER_SECRET"
#: The shortest secret accepted: 32 characters (``qconform secret FILE`` writes 64 hex digits, 256
#: random bits). A short secret can be recovered offline from one recorded handshake.
MIN_SECRET = 32
#: While a request runs, the worker sends a heartbeat this often (seconds); a controller that hears
#: nothing for a few of them knows the device is gone, without waiting for the case timeout.
HEARTBEAT = 2.0


class ProtocolError(Exception):
    """The peer broke the protocol (garbage, a truncated or oversized frame, a bad MAC, a replay)."""


class SecretError(ValueError):
    """A secret that must not be used: empty, too short, or readable by others. One line."""


def check_secret(secret: bytes, where: str) -> bytes:
    if len(secret) < MIN_SECRET:
        raise SecretError(f"{where}: the shared secret has {len(secret)} characters; at least {MIN_SECRET} are "
                          f"required (make one: qconform secret FILE)")
    return secret


def read_secret(path: str | None = None) -> bytes | None:
    """The shared secret: the file's contents (stripped), else ``$QCONFORM_WORKER_SECRET``, else None.
    A file others can read, or a secret shorter than ``MIN_SECRET``, is refused. The secret is never
    printed, logged or written into a report."""
    if path:
        p = Path(path)
        mode = p.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise SecretError(f"secret file {path} is readable by others (mode {stat.S_IMODE(mode):o}): "
                              f"chmod 600 {path}")
        data = p.read_bytes().strip()
        if not data:
            raise SecretError(f"secret file {path} is empty (make one: qconform secret {path})")
        return check_secret(data, f"secret file {path}")
    env = os.environ.get(SECRET_ENV, "").strip()
    return check_secret(env.encode(), f"${SECRET_ENV}") if env else None


def new_secret(path: str) -> None:
    """Write a fresh secret (64 hex digits: 256 random bits) to ``path``, readable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(os.urandom(32).hex() + "\n")


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:], min(n - got, 1 << 20))
        if not k:
            raise ConnectionError("the peer closed the connection" + (" mid-frame" if got else ""))
        got += k
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
    """One message: (header, blobs). Garbage, blobs above ``limit`` together and (with ``key``) a
    missing or wrong MAC raise ProtocolError."""
    raw = recv_frame(sock, MAX_HEADER)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ProtocolError("the header is not JSON") from None
    if not isinstance(header, dict) or not isinstance(header.get("blobs", []), list):
        raise ProtocolError("the header is not a JSON object with a blobs list")
    sizes = header.get("blobs", [])
    if not all(isinstance(n, int) and n >= 0 for n in sizes) or sum(sizes) > limit:
        raise ProtocolError(f"a message of {len(sizes)} blob(s), {sum(n for n in sizes if isinstance(n, int)):,} "
                            f"bytes, refused (the bound is {limit:,} bytes a message)")
    blobs = []
    for n in sizes:
        blob = recv_frame(sock, limit)
        if len(blob) != n:
            raise ProtocolError("a blob's length differs from the header's")
        blobs.append(blob)
    if key is not None and not hmac.compare_digest(str(header.get("mac", "")), _mac(key, header, blobs)):
        raise ProtocolError("message authentication failed")
    return header, blobs


def hello(nonce_w: str, auth: bool) -> dict:
    """The worker's first message (protocol.md, Handshake step 1)."""
    return {"qconform": "worker", "versions": list(VERSIONS), "nonce": nonce_w, "auth": auth, "heartbeat": HEARTBEAT}


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


__all__ = ["HEARTBEAT", "MAX_FRAME", "MIN_SECRET", "ProtocolError", "SECRET_ENV", "REFUSED", "SecretError", "VERSION", "VERSIONS",
           "check_secret", "hello", "is_loopback", "new_secret", "nonce", "proof", "read_secret", "recv", "send",
           "session_key"]

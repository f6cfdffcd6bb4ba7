"""``qconform worker`` on the wire: a real worker process on a real socket, spoken to by hand.
Hostile clients never get anything executed (wrong or missing secrets, replays, garbage, oversized
frames), the worker stays up under floods and slow clients, a batch request answers every case, a
weak secret is refused, and qconform/docs/protocol.md is the protocol the reference speaks. Runs
through ``--runner remote:HOST:PORT``: ``tests/test_remote_runs.py``."""
from __future__ import annotations

import fnmatch
import json
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from remote_support import CRASH, SECRET, SLICE, device, model_hex, secret_file  # noqa: F401 - device: a fixture

from qconform import cli, corpus, wire


def _hello(sock: socket.socket) -> dict:
    return wire.recv(sock, limit=0)[0]


def _closed_with(sock: socket.socket, key: bytes | None = None) -> str:
    """The worker's last word before closing ('' when it closed without one); with ``key`` its MAC
    must verify under the session key."""
    try:
        answer, _ = wire.recv(sock, key, limit=0)
        while "heartbeat" in answer:  # the request was being worked on
            answer, _ = wire.recv(sock, key, limit=0)
    except (ConnectionError, wire.ProtocolError, OSError):
        return ""
    try:
        assert sock.recv(1) == b""  # and then the connection is closed
    except OSError:
        pass
    return str(answer.get("error", ""))


def test_hostile_clients_never_get_anything_run(device, tmp_path):
    marker = tmp_path / "prepared"
    w = device(f"marker={marker}", secret=SECRET)
    addr = ("127.0.0.1", w.port)

    def connect():
        s = socket.create_connection(addr, timeout=10)
        return s, _hello(s)

    s, hello = connect()  # a wrong secret
    assert hello["auth"] is True and hello["versions"] == list(wire.VERSIONS)
    cn = wire.nonce()
    wire.send(s, {"version": wire.VERSION, "nonce": cn, "proof": wire.proof(b"wrong", b"client", hello["nonce"], cn)})
    assert _closed_with(s) == "authentication failed"
    s, hello = connect()  # no secret at all
    wire.send(s, {"version": wire.VERSION, "nonce": wire.nonce()})
    assert _closed_with(s) == "authentication failed"
    s, hello = connect()  # another protocol version
    wire.send(s, {"version": 99, "nonce": wire.nonce()})
    assert "protocol version 99 is not supported" in _closed_with(s)
    s, hello = connect()  # garbage
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert _closed_with(s) in ("", "frame of 1195725856 bytes refused (the bound is 65536)")
    s, hello = connect()  # an oversized frame, refused before it is read
    s.sendall(struct.pack(">I", 2**31))
    assert "refused" in _closed_with(s)
    s, hello = connect()  # a truncated frame, then silence
    s.sendall(struct.pack(">I", 100) + b"{" * 10)
    s.shutdown(socket.SHUT_WR)
    assert _closed_with(s) == ""

    # A legitimate session runs one request; its recorded request replayed, in the session and in another.
    secret = SECRET.encode()
    s, hello = connect()
    cn = wire.nonce()
    wire.send(s, {"version": wire.VERSION, "nonce": cn, "proof": wire.proof(secret, b"client", hello["nonce"], cn)})
    welcome, _ = wire.recv(s, limit=0)
    assert welcome["ok"] and welcome["proof"] == wire.proof(secret, b"worker", hello["nonce"], cn)
    key = wire.session_key(secret, hello["nonce"], cn)
    recorded: list[bytes] = []

    class Recorder:
        def sendall(self, data: bytes) -> None:
            recorded.append(data)

    wire.send(Recorder(), {"op": "describe", "seq": 1}, [], key)
    s.sendall(recorded[0])
    answer, _ = wire.recv(s, key)
    assert answer["describe"]["name"] == "npu-sim"
    assert not marker.exists()  # nothing prepared for anyone yet
    s.sendall(recorded[0])  # the same message again: seq 1 twice
    assert "sequence number 1 where 2 was due" in _closed_with(s, key)  # said under the session's MAC
    s, hello = connect()  # replayed into a fresh session: the MAC is the old session's
    cn = wire.nonce()
    wire.send(s, {"version": wire.VERSION, "nonce": cn, "proof": wire.proof(secret, b"client", hello["nonce"], cn)})
    wire.recv(s, limit=0)
    s.sendall(recorded[0])
    assert _closed_with(s) == "message authentication failed"
    assert not marker.exists()


def test_a_worker_off_loopback_without_a_secret_refuses_to_start(tmp_path):
    p = subprocess.run([sys.executable, "-m", "qconform.cli", "worker", "--runner", "cpu-ref", "--host", "0.0.0.0",
                        "--port", "0"], capture_output=True, text=True, timeout=120,
                       env={k: v for k, v in os.environ.items() if k != wire.SECRET_ENV})
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "needs a shared secret" in p.stderr


def test_the_document_is_the_protocol():
    """qconform/docs/protocol.md's example frame is what the reference writes, and its proofs and
    session key are the reference's (a worker written from the page interoperates)."""
    import hashlib
    import hmac
    import re

    doc = (Path(wire.__file__).parent / "docs" / "protocol.md").read_text()
    (example,) = re.findall(r"```frame\n([0-9a-f]+)\n```", doc)
    sent: list[bytes] = []

    class Capture:
        def sendall(self, data: bytes) -> None:
            sent.append(data)

    wire.send(Capture(), wire.hello("0" * 32, False))
    assert sent[0].hex() == example
    assert f"version {wire.VERSION}" in doc.splitlines()[0]
    secret, nw, nc = b"s", "a" * 32, "b" * 32
    assert wire.proof(secret, b"client", nw, nc) == hmac.new(secret, f"client|{nw}|{nc}".encode(), hashlib.sha256).hexdigest()
    key = wire.session_key(secret, nw, nc)
    assert key == hmac.new(secret, f"session|{nw}|{nc}".encode(), hashlib.sha256).digest()
    header, blobs = {"op": "run", "seq": 1, "inputs": ["x"]}, [b"model", b"tensor"]
    sent.clear()
    wire.send(Capture(), header, blobs, key)
    sent_header = json.loads(sent[0][4:4 + struct.unpack(">I", sent[0][:4])[0]])
    body = json.dumps({k: v for k, v in sent_header.items() if k != "mac"}, sort_keys=True).encode()
    want = hmac.new(key, body + b"".join(hashlib.sha256(b).digest() for b in blobs), hashlib.sha256).hexdigest()
    assert sent_header["mac"] == want and sent_header["blobs"] == [5, 6]
    assert "64 KiB" in doc and wire.MAX_HEADER == 64 * 2**10 and "64 MiB" in doc and wire.MAX_FRAME == 64 * 2**20


def _authenticated(port: int, secret: bytes) -> tuple[socket.socket, bytes]:
    """A controller's session opened by hand: (socket, session key)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    hello = _hello(s)
    cn = wire.nonce()
    wire.send(s, {"version": wire.VERSION, "nonce": cn, "proof": wire.proof(secret, b"client", hello["nonce"], cn)})
    assert wire.recv(s, limit=0)[0]["ok"]
    return s, wire.session_key(secret, hello["nonce"], cn)


def _handshake_ok(port: int) -> bool:
    try:
        s, _ = _authenticated(port, SECRET.encode())
    except (OSError, KeyError):
        return False
    s.close()
    return True


def test_the_worker_stays_up_under_a_flood_slow_clients_and_malformed_messages(device, tmp_path):
    """1,000 connections against an fd limit of 256, connections that never finish their handshake,
    and malformed authenticated messages: the worker refuses each (a line in its log, an error frame
    with its MAC), never exits, and serves a real controller afterwards."""
    import resource

    def low_fd_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    w = device(secret=SECRET, args=("--handshake-timeout", "2", "--max-pending", "4"), preexec_fn=low_fd_limit)
    addr = ("127.0.0.1", w.port)
    # slowloris: connections that send nothing hold their slot for the handshake deadline only
    slow = [socket.create_connection(addr, timeout=30) for _ in range(4)]
    extra = socket.create_connection(addr, timeout=30)  # over --max-pending: closed without a hello
    assert extra.recv(1) == b""
    for s in slow:
        _hello(s)
        assert s.recv(1) == b""  # cut at the deadline, never after the hour of the idle timeout
    # a flood of 1,000 connections against 256 descriptors: the caps keep the worker's use small
    fds = f"/proc/{w.proc.pid}/fd"
    idle = len(os.listdir(fds))
    flood = [socket.create_connection(addr, timeout=5) for _ in range(1000)]
    time.sleep(1)
    assert w.proc.poll() is None, "".join(w.log)
    for s in flood:
        s.close()
    # the worker lets go of the flood's pending handshakes (at their deadline at most) before the
    # count below is read: a count taken while it still holds some would leave accept() room
    deadline = time.monotonic() + 30
    while len(os.listdir(fds)) > idle and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(os.listdir(fds)) <= idle, f"the worker still holds {len(os.listdir(fds)) - idle} descriptors"
    # and with only two descriptors to spare, accept() fails with EMFILE: the worker waits and serves on
    in_use = len(os.listdir(fds))
    resource.prlimit(w.proc.pid, resource.RLIMIT_NOFILE, (in_use + 2, 256))
    flood = [socket.create_connection(addr, timeout=5) for _ in range(50)]
    time.sleep(3)
    assert w.proc.poll() is None, "".join(w.log)
    for s in flood:
        s.close()
    resource.prlimit(w.proc.pid, resource.RLIMIT_NOFILE, (256, 256))
    for _ in range(100):  # the flood's backlog drains (each connection closed at its first read)
        if "waiting and serving on" in "".join(w.log) and _handshake_ok(w.port):
            break
        time.sleep(0.2)
    else:
        raise AssertionError("no EMFILE wait logged, or no handshake after it:\n" + "".join(w.log))
    # malformed messages after authentication: an error frame under the session's MAC, then closed
    key = SECRET.encode()
    s, k = _authenticated(w.port, key)
    wire.send(s, {"op": "run", "seq": 1, "inputs": [3]}, [b"not a model", b"x"], k)
    assert "one tensor per input name" in _closed_with(s, k)
    s, k = _authenticated(w.port, key)
    wire.send(s, {"op": "run", "seq": 1, "inputs": ["x"]}, [b"\x00garbage", b"\xff"], k)
    assert "does not decode" in _closed_with(s, k)
    s, k = _authenticated(w.port, key)
    head = json.dumps({"blobs": [40 * 2**20, 40 * 2**20]}).encode()  # each under the bound, not together
    s.sendall(struct.pack(">I", len(head)) + head)
    assert "refused (the bound is" in _closed_with(s, k)
    assert w.proc.poll() is None
    secret = secret_file(tmp_path / "c.secret", SECRET)
    assert cli.main(["certify", "--runner", f"remote:127.0.0.1:{w.port}", "--runner-opt", f"secret_file={secret}",
                     "--case", "QuantizeLinear-21/float32-int8/basic/*", "--report", str(tmp_path / "r")]) == 0
    log = "".join(w.log)
    assert "accept() failed" in log and "EMFILE" in log
    assert "refused: 4 connections are already in their handshake" in log
    assert "no handshake within 2s" in log and "refused: the request does not decode" in log
    assert "Traceback" not in log and SECRET not in log


def test_a_batch_request_answers_every_case_in_order_and_refuses_only_the_broken_one(device, tmp_path):
    """Version 3's run_many: one request, many cases (a model two cases share sent once), results in case
    order in one or more chunks; a case that does not decode is refused alone (not run), a crash is its
    own case's and the cases after it still run; the session stays open."""
    from qconform import adapt
    from qconform.model import build_model

    index = corpus.index(corpus.DEFAULT_ROOT)
    cases = [index.case(i) for i in sorted(index.by_id) if fnmatch.fnmatch(i, SLICE) and i != CRASH][:3]
    w = device(f"crash={model_hex(CRASH)}", secret=SECRET)
    s, key = _authenticated(w.port, SECRET.encode())
    blobs: list[bytes] = []
    table = []

    def add(model: bytes, feeds: dict) -> None:
        if model not in blobs:
            blobs.append(model)
        table.append({"model": blobs.index(model), "inputs": [[n, len(blobs) + k] for k, n in enumerate(feeds)]})
        blobs.extend(adapt.to_tensor_proto(feeds[n], n) for n in feeds)

    first = build_model(cases[0], check=False).SerializeToString()
    add(first, cases[0].feeds)
    add(first, cases[0].feeds)  # the same model again: referenced, not sent twice
    add(b"\x00not a model", cases[1].feeds)
    add(bytes.fromhex(model_hex(CRASH)), index.case(CRASH).feeds)
    add(build_model(cases[2], check=False).SerializeToString(), cases[2].feeds)
    wire.send(s, {"op": "run_many", "seq": 1, "cases": table}, blobs, key)
    results, outs = [], []
    while len(results) < len(table):
        answer, out = wire.recv(s, key)
        if "heartbeat" in answer:
            continue
        assert answer["seq"] == 1 and sum(r["outputs"] for r in answer["results"]) == len(out)
        results += answer["results"]
        outs += out
    assert [r["kind"] for r in results] == ["ok", "ok", "refused", "crashed", "ok"]
    assert "does not decode" in results[2]["message"] and "device's runner" in results[3]["message"]
    assert outs[0] == outs[1]  # the same model, the same inputs: the same bits
    wire.send(s, {"op": "describe", "seq": 2}, [], key)
    assert wire.recv(s, key)[0]["describe"]["name"] == "npu-sim"
    s.close()


@pytest.mark.parametrize("secret, mode, why", [("x", 0o600, "at least 32 are required"),
                                                (SECRET, 0o644, "readable by others")])
def test_a_weak_or_exposed_secret_is_refused_in_one_line(tmp_path, secret, mode, why):
    path = tmp_path / "s"
    path.write_text(secret)
    path.chmod(mode)
    for words in (["worker", "--runner", "cpu-ref", "--port", "0", "--secret-file", str(path)],
                  ["certify", "--runner", "remote:127.0.0.1:9", "--runner-opt", f"secret_file={path}",
                   "--case", SLICE, "--report", str(tmp_path / "r")]):
        p = subprocess.run([sys.executable, "-m", "qconform.cli", *words], capture_output=True, text=True, timeout=120)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and why in p.stderr, p.stderr

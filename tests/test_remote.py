"""``qconform worker`` and ``--runner remote:HOST:PORT`` (issue 34): a real worker process on a real
socket. The same verdicts as a local run; a crash, a hang and a dropped connection each cost exactly
their case; hostile clients never get anything executed; hostile workers never cost more than one
verdict per case."""
from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from qconform import cli, corpus, wire

SLICE = "QuantizeLinear-21/float32-int8/*"
CRASH, HANG = "QuantizeLinear-21/float32-int8/basic/per-axis", "QuantizeLinear-21/float32-int8/basic/per-tensor"

DEVICE_RUNNER = '''
"""cpu-ref on the "device": crashes on one model, hangs on another, notes every model it prepares."""
import os
import time
from pathlib import Path

from qconform.runners.cpu_ref import CpuRefRunner


class Device(CpuRefRunner):
    name = "npu-sim"

    def __init__(self, crash="", hang="", marker=""):
        super().__init__()
        self.crash, self.hang, self.marker = crash, hang, marker

    def prepare(self, model):
        if self.marker:
            Path(self.marker).write_text("a model was prepared")
        run = super().prepare(model)
        key = model.SerializeToString().hex()

        def go(feeds):
            if key == self.crash:
                os._exit(7)
            if key == self.hang:
                time.sleep(60)
            return run(feeds)

        return go
'''


def _model_hex(case_id: str) -> str:
    from qconform.model import build_model

    return build_model(corpus.index(corpus.DEFAULT_ROOT).case(case_id), check=False).SerializeToString().hex()


class WorkerProcess:
    """``qconform worker`` in a subprocess on a free port (read from its first line)."""

    def __init__(self, *args: str, env: dict | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "qconform.cli", "worker", "--port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, **(env or {})})
        line = self.proc.stdout.readline()
        assert " on 127.0.0.1:" in line, line + self.proc.stderr.read()
        self.port = int(line.split(" on 127.0.0.1:")[1].split()[0])

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def device(tmp_path):
    (tmp_path / "device.py").write_text(DEVICE_RUNNER)
    started = []

    def start(*opts: str, secret: str | None = None) -> WorkerProcess:
        words = ["--runner", f"{tmp_path / 'device.py'}:Device", *[w for o in opts for w in ("--runner-opt", o)]]
        if secret is not None:
            (tmp_path / "secret").write_text(secret)
            words += ["--secret-file", str(tmp_path / "secret")]
        w = WorkerProcess(*words, "--case-timeout", "3")
        started.append(w)
        return w

    yield start
    for w in started:
        w.stop()


def _verdicts(report_dir: Path) -> dict[str, str]:
    return {c["id"]: c["verdict"] for c in json.loads((report_dir / "report.json").read_text())["cases"]}


def test_a_remote_run_gives_the_local_verdicts_and_names_the_device(device, tmp_path):
    w = device()
    assert cli.main(["certify", "--runner", f"remote:127.0.0.1:{w.port}", "--case", SLICE, "--report",
                     str(tmp_path / "remote"), "-j", "2"]) == 0
    assert cli.main(["certify", "--runner", "cpu-ref", "--case", SLICE, "--report", str(tmp_path / "local")]) == 0
    assert _verdicts(tmp_path / "remote") == _verdicts(tmp_path / "local")
    ident = json.loads((tmp_path / "remote" / "report.json").read_text())["runner"]
    assert ident["name"] == "npu-sim" and ident["remote"] == f"127.0.0.1:{w.port}" and "platform" in ident


class DropOnce:
    """A TCP proxy in front of the worker that cuts one connection (the ``nth``) after ``after`` bytes
    from the controller (a network that drops); the others pass untouched. The first connection is
    the controller's identity check (describe), the second the runner worker's."""

    def __init__(self, port: int, after: int, nth: int = 2) -> None:
        self.target, self.after, self.nth, self.seen, self.dropped = port, after, nth, 0, False
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            self.seen += 1
            budget = [self.after if self.seen == self.nth else None]
            self.dropped = self.dropped or self.seen == self.nth
            threading.Thread(target=self._pipe, args=(client, server, budget), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, [None]), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket, budget: list) -> None:
        try:
            while data := src.recv(65536):
                if budget[0] is not None:
                    budget[0] -= len(data)
                    if budget[0] <= 0:
                        break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def test_a_crash_a_hang_and_a_dropped_connection_each_cost_their_case(device, tmp_path):
    w = device(f"crash={_model_hex(CRASH)}", f"hang={_model_hex(HANG)}")
    proxy = DropOnce(w.port, after=6_000)
    assert cli.main(["certify", "--runner", "cpu-ref", "--case", SLICE, "--report", str(tmp_path / "local")]) == 0
    assert cli.main(["certify", "--runner", f"remote:127.0.0.1:{proxy.port}", "--runner-opt", "timeout=20",
                     "--case", SLICE, "--report", str(tmp_path / "remote"), "-j", "1"]) == 1
    report = json.loads((tmp_path / "remote" / "report.json").read_text())
    got, local = _verdicts(tmp_path / "remote"), _verdicts(tmp_path / "local")
    assert set(got) == set(local)  # every case, exactly one verdict
    assert got[CRASH] == "crashed" and got[HANG] == "timeout"
    dropped = [f for f in report["failures"] if "was lost" in (f.get("problem") or "")]
    assert len(dropped) == 1 and proxy.dropped, report["failures"]
    assert {c for c, v in got.items() if v != local[c]} == {CRASH, HANG, dropped[0]["id"]}
    problems = {f["id"]: f["problem"] for f in report["failures"]}
    assert "the device's runner" in problems[CRASH] and "on the device" in problems[HANG]


def _hello(sock: socket.socket) -> dict:
    return wire.recv(sock, limit=0)[0]


def _closed_with(sock: socket.socket) -> str:
    """The worker's last word before closing ('' when it closed without one)."""
    try:
        answer, _ = wire.recv(sock, limit=0)
    except (ConnectionError, wire.ProtocolError, OSError):
        return ""
    try:
        assert sock.recv(1) == b""  # and then the connection is closed
    except OSError:
        pass
    return str(answer.get("error", ""))


def test_hostile_clients_never_get_anything_run(device, tmp_path):
    marker = tmp_path / "prepared"
    w = device(f"marker={marker}", secret="s3cret-shared-by-the-lab")
    addr = ("127.0.0.1", w.port)

    def connect():
        s = socket.create_connection(addr, timeout=10)
        return s, _hello(s)

    s, hello = connect()  # a wrong secret
    assert hello["auth"] is True and hello["versions"] == [wire.VERSION]
    cn = wire.nonce()
    wire.send(s, {"version": 1, "nonce": cn, "proof": wire.proof(b"wrong", b"client", hello["nonce"], cn)})
    assert _closed_with(s) == "authentication failed"
    s, hello = connect()  # no secret at all
    wire.send(s, {"version": 1, "nonce": wire.nonce()})
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
    secret = b"s3cret-shared-by-the-lab"
    s, hello = connect()
    cn = wire.nonce()
    wire.send(s, {"version": 1, "nonce": cn, "proof": wire.proof(secret, b"client", hello["nonce"], cn)})
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
    assert "sequence number 1 where 2 was due" in _closed_with(s)
    s, hello = connect()  # replayed into a fresh session: the MAC is the old session's
    cn = wire.nonce()
    wire.send(s, {"version": 1, "nonce": cn, "proof": wire.proof(secret, b"client", hello["nonce"], cn)})
    wire.recv(s, limit=0)
    s.sendall(recorded[0])
    assert _closed_with(s) == "message authentication failed"
    assert not marker.exists()


def test_the_controller_with_the_secret_runs_and_without_it_stops_in_one_line(device, tmp_path, capsys):
    w = device(secret="s3cret-shared-by-the-lab")
    remote = f"remote:127.0.0.1:{w.port}"
    assert cli.main(["certify", "--runner", remote, "--case", SLICE, "--report", str(tmp_path / "no")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "requires the shared secret" in err
    (tmp_path / "secret").write_text("s3cret-shared-by-the-lab")
    assert cli.main(["certify", "--runner", remote, "--runner-opt", f"secret_file={tmp_path / 'secret'}", "--case",
                     SLICE, "--report", str(tmp_path / "yes")]) == 0
    report = (tmp_path / "yes" / "report.json").read_text()
    assert "s3cret" not in report and json.loads(report)["runner"]["authenticated"] is True


class HostileWorker:
    """A fake worker: a proper handshake, then garbage (``mode='garbage'``) or silence (``'stall'``)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._session, args=(c,), daemon=True).start()

    def _session(self, c: socket.socket) -> None:
        try:
            wire.send(c, {"qconform": "worker", "versions": [1], "nonce": wire.nonce(), "auth": False})
            wire.recv(c, limit=0)
            wire.send(c, {"ok": True, "describe": {"name": f"hostile-{self.mode}"}})
            while True:
                wire.recv(c)
                if self.mode == "garbage":
                    c.sendall(struct.pack(">I", 7) + b"\xff\xfe garb")
                else:
                    time.sleep(30)
        except (OSError, wire.ProtocolError, ConnectionError):
            pass
        finally:
            c.close()


@pytest.mark.parametrize("mode, verdict", [("garbage", "error"), ("stall", "timeout")])
def test_a_hostile_worker_costs_one_verdict_per_case(tmp_path, mode, verdict):
    w = HostileWorker(mode)
    cases = "QuantizeLinear-21/float32-int8/basic/*"
    assert cli.main(["certify", "--runner", f"remote:127.0.0.1:{w.port}", "--runner-opt", "timeout=1",
                     "--case", cases, "--report", str(tmp_path / "r"), "-j", "1"]) == 1
    got = _verdicts(tmp_path / "r")
    assert len(got) == 2 and set(got.values()) == {verdict}


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

    wire.send(Capture(), {"qconform": "worker", "versions": [wire.VERSION], "nonce": "0" * 32, "auth": False})
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


def test_several_workers_share_a_run_and_must_serve_the_same_runtime(device, tmp_path, capsys):
    a, b = device(), device()
    both = f"remote:127.0.0.1:{a.port},127.0.0.1:{b.port}"
    assert cli.main(["certify", "--runner", both, "--case", SLICE, "--report", str(tmp_path / "two"), "-j", "2"]) == 0
    assert cli.main(["certify", "--runner", "cpu-ref", "--case", SLICE, "--report", str(tmp_path / "local")]) == 0
    assert _verdicts(tmp_path / "two") == _verdicts(tmp_path / "local")
    other = WorkerProcess("--runner", "cpu-ref")
    try:
        capsys.readouterr()
        mixed = f"remote:127.0.0.1:{a.port},127.0.0.1:{other.port}"
        assert cli.main(["certify", "--runner", mixed, "--case", SLICE, "--report", str(tmp_path / "mixed")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "serve different runtimes" in err
    finally:
        other.stop()

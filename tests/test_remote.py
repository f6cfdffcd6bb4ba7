"""``qconform worker`` and ``--runner remote:HOST:PORT``: a real worker process on a real
socket. The same verdicts as a local run; a crash, a hang and a dropped connection each cost exactly
their case; hostile clients never get anything executed; hostile workers never cost more than one
verdict per case."""
from __future__ import annotations

import fnmatch
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

    def __init__(self, crash="", hang="", marker="", delay="0", pidfile="", kill_worker_after=""):
        super().__init__()
        self.crash, self.hang, self.marker, self.delay, self.pidfile = crash, hang, marker, float(delay), pidfile
        self.kill_after = int(kill_worker_after or 0)
        self.calls = 0

    def prepare(self, model):
        if self.marker:
            Path(self.marker).write_text("a model was prepared")
        run = super().prepare(model)
        key = model.SerializeToString().hex()

        def go(feeds):
            self.calls += 1
            if self.calls == self.kill_after:  # the whole worker dies (its machine rebooted, say)
                import signal
                os.kill(os.getppid(), signal.SIGKILL)
                time.sleep(60)
            if self.pidfile:
                Path(self.pidfile).write_text(str(os.getpid()))
            if key == self.crash:
                os._exit(7)
            if key == self.hang:
                time.sleep(60)
            time.sleep(self.delay)
            return run(feeds)

        return go
'''


def _model_hex(case_id: str) -> str:
    from qconform.model import build_model

    return build_model(corpus.index(corpus.DEFAULT_ROOT).case(case_id), check=False).SerializeToString().hex()


SECRET = "0123456789abcdef0123456789abcdef-lab"  # 36 characters: long enough


def _secret_file(path: Path, secret: str) -> Path:
    path.write_text(secret)
    path.chmod(0o600)
    return path


class WorkerProcess:
    """``qconform worker`` in a subprocess on a free port (read from its first line); its log (stderr)
    is collected by a thread."""

    def __init__(self, *args: str, env: dict | None = None, port: int = 0, preexec_fn=None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "qconform.cli", "worker", "--port", str(port), *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, **(env or {})}, preexec_fn=preexec_fn)
        line = self.proc.stdout.readline()
        self.log: list[str] = []
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()
        assert " on 127.0.0.1:" in line, line + "".join(self.log)
        self.port = int(line.split(" on 127.0.0.1:")[1].split()[0])

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def device(tmp_path):
    (tmp_path / "device.py").write_text(DEVICE_RUNNER)
    started = []

    def start(*opts: str, secret: str | None = None, args: tuple = (), port: int = 0, **popen) -> WorkerProcess:
        words = ["--runner", f"{tmp_path / 'device.py'}:Device", *[w for o in opts for w in ("--runner-opt", o)]]
        if secret is not None:
            words += ["--secret-file", str(_secret_file(tmp_path / "secret", secret))]
        w = WorkerProcess(*words, "--case-timeout", "3", *args, port=port, **popen)
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


def test_a_crash_and_a_hang_cost_their_case_and_a_dropped_connection_costs_nothing(device, tmp_path):
    """The device's runtime crashing or hanging is that case's verdict; the network dropping is not a
    verdict at all: the request is sent again on a fresh connection."""
    w = device(f"crash={_model_hex(CRASH)}", f"hang={_model_hex(HANG)}")
    proxy = DropOnce(w.port, after=6_000)
    assert cli.main(["certify", "--runner", "cpu-ref", "--case", SLICE, "--report", str(tmp_path / "local")]) == 0
    assert cli.main(["certify", "--runner", f"remote:127.0.0.1:{proxy.port}", "--runner-opt", "timeout=20",
                     "--case", SLICE, "--report", str(tmp_path / "remote"), "-j", "1"]) == 1
    report = json.loads((tmp_path / "remote" / "report.json").read_text())
    got, local = _verdicts(tmp_path / "remote"), _verdicts(tmp_path / "local")
    assert set(got) == set(local) and report["complete"]  # every case, exactly one verdict
    assert proxy.dropped
    assert got[CRASH] == "crashed" and got[HANG] == "timeout"
    assert {c for c, v in got.items() if v != local[c]} == {CRASH, HANG}
    problems = {f["id"]: f["problem"] for f in report["failures"]}
    assert "the device's runner" in problems[CRASH] and "on the device" in problems[HANG]


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


def test_the_controller_with_the_secret_runs_and_without_it_stops_in_one_line(device, tmp_path, capsys):
    w = device(secret=SECRET)
    remote = f"remote:127.0.0.1:{w.port}"
    assert cli.main(["certify", "--runner", remote, "--case", SLICE, "--report", str(tmp_path / "no")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "requires the shared secret" in err
    secret = _secret_file(tmp_path / "controller.secret", SECRET)
    assert cli.main(["certify", "--runner", remote, "--runner-opt", f"secret_file={secret}", "--case",
                     SLICE, "--report", str(tmp_path / "yes")]) == 0
    report = (tmp_path / "yes" / "report.json").read_text()
    assert SECRET not in report and json.loads(report)["runner"]["authenticated"] is True
    assert "not authenticated" not in json.loads(report)["gate"].get("messages", []) and \
        "not authenticated" not in (tmp_path / "yes" / "summary.md").read_text()
    assert not any(SECRET in line for line in w.log) and any("session open (authenticated)" in ln for ln in w.log)


class HostileWorker:
    """A fake worker that never asks for a secret: after a proper handshake it answers garbage
    (``mode='garbage'``), nothing (``'stall'``), or -- an impostor wearing onnxruntime's identity --
    the right outputs for every request, computed by cpu-ref (``'impostor'``): what a forged
    certificate would be made of."""

    def __init__(self, mode: str, host: str = "127.0.0.1") -> None:
        self.mode = mode
        self.sock = socket.create_server((host, 0))
        self.port = self.sock.getsockname()[1]
        self.sessions = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._session, args=(c,), daemon=True).start()

    def _session(self, c: socket.socket) -> None:
        import onnx

        from qconform import adapt
        from qconform.runners.cpu_ref import CpuRefRunner

        self.sessions += 1
        try:
            wire.send(c, {**wire.hello(wire.nonce(), False), "versions": [2]})  # a version-2 worker: one case a request
            wire.recv(c, limit=0)
            wire.send(c, {"ok": True, "describe": {"name": "onnxruntime", "version": "1.32.0"}})
            while True:
                header, blobs = wire.recv(c)
                if self.mode == "garbage":
                    c.sendall(struct.pack(">I", 7) + b"\xff\xfe garb")
                elif self.mode == "impostor":
                    feeds = {n: adapt.from_tensor_proto(b) for n, b in zip(header["inputs"], blobs[1:])}
                    outs = CpuRefRunner().run(onnx.load_from_string(blobs[0]), feeds)
                    wire.send(c, {"kind": "ok", "message": "", "seq": header["seq"]},
                              [adapt.to_tensor_proto(o) for o in outs])
                else:
                    time.sleep(30)
        except (OSError, wire.ProtocolError, ConnectionError):
            pass
        finally:
            c.close()

    def close(self) -> None:
        self.sock.close()


def test_an_impostor_cannot_forge_a_certificate(device, tmp_path, capsys):
    """A controller that holds the secret refuses a worker that does not prove it holds it too, however
    its hello reads; no report is written and nothing runs."""
    impostor = HostileWorker("impostor")
    secret = _secret_file(tmp_path / "lab.secret", SECRET)
    assert cli.main(["certify", "--runner", f"remote:127.0.0.1:{impostor.port}", "--runner-opt",
                     f"secret_file={secret}", "--case", SLICE, "--report", str(tmp_path / "forged")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not ask for the shared secret" in err and "refused" in err
    assert not (tmp_path / "forged").exists()


def _outbound_address() -> str | None:
    """This machine's own address on a non-loopback interface (None: it has none)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.123", 9))  # no packet is sent: only the route is looked up
        ip = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    return None if wire.is_loopback(ip) else ip


def test_without_a_secret_only_a_loopback_worker_and_the_certificate_says_unauthenticated(tmp_path, capsys):
    """Without a secret the controller talks to a loopback worker only (or another when told so, with
    ``insecure=1``), and every document says plainly that the device was not authenticated."""
    impostor = HostileWorker("impostor", host="0.0.0.0")
    cases = "QuantizeLinear-21/float32-int8/basic/*"
    assert cli.main(["certify", "--runner", f"remote:127.0.0.1:{impostor.port}", "--case", cases,
                     "--report", str(tmp_path / "lo")]) == 0
    report = json.loads((tmp_path / "lo" / "report.json").read_text())
    assert report["runner"]["authenticated"] is False
    for doc in ("summary.md", "report.html"):
        assert "not authenticated" in (tmp_path / "lo" / doc).read_text(), doc
    from qconform.report.certificate import overall

    assert "not authenticated" in overall(report)
    ip = _outbound_address()
    if ip is None:
        pytest.skip("this machine has no non-loopback address to reach a worker on")
    capsys.readouterr()
    assert cli.main(["certify", "--runner", f"remote:{ip}:{impostor.port}", "--case", cases,
                     "--report", str(tmp_path / "off")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not on this machine and no shared secret is given" in err
    assert cli.main(["certify", "--runner", f"remote:{ip}:{impostor.port}", "--runner-opt", "insecure=1",
                     "--case", cases, "--report", str(tmp_path / "insecure")]) == 0
    assert "not authenticated" in (tmp_path / "insecure" / "summary.md").read_text()


@pytest.mark.parametrize("mode", ["garbage", "stall"])
def test_a_hostile_or_silent_worker_is_never_a_verdict_on_the_runtime(tmp_path, mode):
    """Garbage and silence are the transport's faults: the cases are not run, the run stops as
    incomplete within seconds (no case waits for the case timeout), nothing is certified, exit 2."""
    w = HostileWorker(mode)
    cases = "QuantizeLinear-21/float32-int8/basic/*"
    state = tmp_path / "state.jsonl"
    assert cli.main(["certify", "--runner", f"remote:127.0.0.1:{w.port}", "--runner-opt", "stall=1",
                     "--runner-opt", "reconnect=1", "--runner-opt", "retries=1", "--case", cases,
                     "--report", str(tmp_path / "r"), "-j", "1", "--state", str(state)]) == 2
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert set(_verdicts(tmp_path / "r").values()) == {"not-run"} and not report["complete"]
    assert report["stopped"] and not report["failures"]
    assert "no conformance is stated" in (tmp_path / "r" / "summary.md").read_text().lower()
    assert "incomplete" in (tmp_path / "r" / "summary.md").read_text().splitlines()[0]
    assert not state.exists() or len(state.read_text().splitlines()) <= 1  # nothing unrun kept as done


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
    secret = _secret_file(tmp_path / "c.secret", SECRET)
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
    w = device(f"crash={_model_hex(CRASH)}", secret=SECRET)
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
    add(bytes.fromhex(_model_hex(CRASH)), index.case(CRASH).feeds)
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


def test_a_refused_request_shows_the_workers_reason_and_is_not_run(device, tmp_path):
    """In an authenticated session the worker's refusal carries its MAC, so the controller shows the
    real reason (not 'message authentication failed'); the case is not run, never an error."""
    w = device(secret=SECRET, args=("--max-frame-mb", "0.0002"))
    secret = _secret_file(tmp_path / "c.secret", SECRET)
    assert cli.main(["certify", "--runner", f"remote:127.0.0.1:{w.port}", "--runner-opt", f"secret_file={secret}",
                     "--case", "QuantizeLinear-21/float32-int8/basic/per-tensor", "--report", str(tmp_path / "r")]) == 2
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["counts"]["not-run"] == 1 and not report["failures"]
    assert "refused the request" in report["reasons"][0]["text"] and "bound is" in report["reasons"][0]["text"]


def test_a_worker_restarted_mid_run_costs_nothing_and_one_gone_stops_the_run(device, tmp_path):
    """Killed (by its own runner, after 30 requests: deterministic) and restarted on its port: the
    cases in flight are sent again, the report is the local run's. Killed for good: the run stops
    within the reconnect window as incomplete, the cases left are not run (not crashed), exit 2,
    --state keeps only what ran, and the same command resumes once the worker is back."""
    cases = "QuantizeLinear-21/float32-int8/*"
    assert cli.main(["certify", "--runner", "cpu-ref", "--case", cases, "--report", str(tmp_path / "local")]) == 0
    w = device("kill_worker_after=30")

    def restart_when_dead() -> None:
        w.proc.wait()
        time.sleep(2)
        device(port=w.port)

    t = threading.Thread(target=restart_when_dead)
    t.start()
    rc = cli.main(["certify", "--runner", f"remote:127.0.0.1:{w.port}", "--runner-opt", "reconnect=60",
                   "--case", cases, "--report", str(tmp_path / "restarted"), "-j", "2"])
    t.join()
    assert w.proc.returncode == -9
    assert rc == 0 and _verdicts(tmp_path / "restarted") == _verdicts(tmp_path / "local")

    w2 = device("kill_worker_after=30")
    state = tmp_path / "state.jsonl"
    rc = cli.main(["certify", "--runner", f"remote:127.0.0.1:{w2.port}", "--runner-opt", "reconnect=2",
                   "--case", cases, "--report", str(tmp_path / "gone"), "-j", "1", "--state", str(state)])
    report = json.loads((tmp_path / "gone" / "report.json").read_text())
    verdicts = _verdicts(tmp_path / "gone")
    assert rc == 2 and not report["complete"] and "could not be reached again" in report["stopped"]
    assert set(verdicts.values()) <= {"pass", "info", "not-run"}
    # the 30th was in flight when it died; of the 29 before it, those whose chunk of results had
    # reached the controller are judged, the others are not run (never a verdict without outputs)
    assert sum(v != "not-run" for v in verdicts.values()) <= 29
    ran = [json.loads(line)["id"] for line in state.read_text().splitlines()[1:]] if state.exists() else []
    assert sorted(ran) == sorted(c for c, v in verdicts.items() if v != "not-run")
    w2.proc.wait()
    back = device(port=w2.port)
    assert cli.main(["certify", "--runner", f"remote:127.0.0.1:{back.port}", "--runner-opt", "reconnect=2",
                     "--case", cases, "--report", str(tmp_path / "resumed"), "-j", "1", "--state", str(state)]) == 0
    assert _verdicts(tmp_path / "resumed") == _verdicts(tmp_path / "local")


def test_a_worker_restarted_with_another_runtime_stops_the_run(device, tmp_path):
    """A worker that comes back on its port serving another runtime (its describe() differs from the
    one the run started with) is refused, as an impostor would be: its results would be credited to
    the first. The run stops, incomplete; the cases left are not run, none judged on its outputs."""
    cases = "QuantizeLinear-21/float32-int8/*"
    w = device("kill_worker_after=30")
    other: list[WorkerProcess] = []

    def restart_as_another() -> None:
        w.proc.wait()
        time.sleep(2)
        other.append(WorkerProcess("--runner", "cpu-ref", port=w.port))

    t = threading.Thread(target=restart_as_another)
    t.start()
    try:
        rc = cli.main(["certify", "--runner", f"remote:127.0.0.1:{w.port}", "--runner-opt", "reconnect=60",
                       "--case", cases, "--report", str(tmp_path / "swapped"), "-j", "1"])
        t.join()
    finally:
        for o in other:
            o.stop()
    report = json.loads((tmp_path / "swapped" / "report.json").read_text())
    verdicts = _verdicts(tmp_path / "swapped")
    assert rc == 2 and not report["complete"] and "now serves cpu-ref" in report["stopped"], report["stopped"]
    assert report["runner"]["name"] == "npu-sim" and sum(v != "not-run" for v in verdicts.values()) <= 29


def test_a_hung_runner_dies_with_its_worker(device, tmp_path):
    pidfile = tmp_path / "runner.pid"
    w = device(f"hang={_model_hex(HANG)}", f"pidfile={pidfile}", args=("--case-timeout", "600"))
    runner = threading.Thread(target=cli.main, args=(["certify", "--runner", f"remote:127.0.0.1:{w.port}",
                                                      "--runner-opt", "reconnect=0.5", "--case", HANG,
                                                      "--report", str(tmp_path / "r")],), daemon=True)
    runner.start()
    for _ in range(600):
        if pidfile.exists() and pidfile.read_text():
            break
        time.sleep(0.1)
    pid = int(pidfile.read_text())
    os.kill(pid, 0)  # the device's runner is running (hung)
    w.proc.kill()
    w.proc.wait()
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, 9)
        pytest.fail("the hung runner outlived its worker")
    runner.join(60)


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


def test_the_pytest_front_end_stops_an_incomplete_run_too(tmp_path):
    """Under pytest a case not run is shown as skipped with its reason, the session stops at the first
    one whose device is gone, and the exit status is 2 (as Ctrl-C): no green run."""
    w = HostileWorker("stall")
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--runner",
                        f"remote:127.0.0.1:{w.port}", "--runner-opt", "stall=1", "--runner-opt", "reconnect=1",
                        "--case", "QuantizeLinear-21/float32-int8/basic/*", "--report", str(tmp_path / "r"),
                        "--rootdir", str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 2, p.stdout[-3000:]
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert not report["complete"] and report["counts"]["not-run"] == 2 and report["stopped"]
    assert "not-run:" in p.stdout or "not run" in p.stdout

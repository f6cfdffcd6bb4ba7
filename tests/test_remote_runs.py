"""``--runner remote:HOST:PORT``: certify driving a real ``qconform worker`` process on a real socket.
The same verdicts as a local run; a crash, a hang and a dropped connection each cost exactly their
case; a worker restarted mid-run costs nothing, one gone for good stops the run as incomplete; the
controller authenticates the worker (an impostor gets no report); hostile workers never cost more
than one verdict per case. The worker end on the wire: ``tests/test_remote.py``."""
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
from remote_support import (CRASH, HANG, SECRET, SLICE, WorkerProcess, device,  # noqa: F401 - device: a fixture
                            model_hex, secret_file)

from qconform import cli, wire


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
    w = device(f"crash={model_hex(CRASH)}", f"hang={model_hex(HANG)}")
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


def test_the_controller_with_the_secret_runs_and_without_it_stops_in_one_line(device, tmp_path, capsys):
    w = device(secret=SECRET)
    remote = f"remote:127.0.0.1:{w.port}"
    assert cli.main(["certify", "--runner", remote, "--case", SLICE, "--report", str(tmp_path / "no")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "requires the shared secret" in err
    secret = secret_file(tmp_path / "controller.secret", SECRET)
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
    secret = secret_file(tmp_path / "lab.secret", SECRET)
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


def test_a_refused_request_shows_the_workers_reason_and_is_not_run(device, tmp_path):
    """In an authenticated session the worker's refusal carries its MAC, so the controller shows the
    real reason (not 'message authentication failed'); the case is not run, never an error."""
    w = device(secret=SECRET, args=("--max-frame-mb", "0.0002"))
    secret = secret_file(tmp_path / "c.secret", SECRET)
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
    w = device(f"hang={model_hex(HANG)}", f"pidfile={pidfile}", args=("--case-timeout", "600"))
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

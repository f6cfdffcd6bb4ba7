"""Shared by the benchmark scripts: run a command as a child and read its time and peak memory from the OS."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def machine() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(next(ln for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal")).split()[1])
        mem = f", {kb / 2**20:.0f} GiB"
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores{mem}, {platform.system()} {platform.machine()}, Python {platform.python_version()}"


def run_child(cmd: list[str], env: dict | None = None, cwd: Path | None = None,
              echo: bool = False) -> tuple[float, float, int, str]:
    """(wall seconds, peak RSS MiB of the child, return code, stdout): rusage from wait4. An ``env``
    value of None removes that variable. ``echo``: print the child's lines as they come (a long run
    shows its progress)."""
    full = {k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None}
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd or REPO, env=full, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in p.stdout:
        lines.append(line)
        if echo:
            print(f"  | {line}", end="", flush=True)
    out = "".join(lines)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t0, ru.ru_maxrss / 1024, p.returncode, out


def peak_rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def python() -> str:
    return sys.executable

"""Optional tools and packages: one availability check each, shared by the runners and the tests.

The suite runs (and its own tests pass) without any of these; each adds runners or tests. A runner
that needs one asks ``missing(name)`` before it starts; a test says ``@pytest.mark.needs(name)`` and
skips with the same one line, naming what is missing and how to install it. No other module looks
for a compiler, a browser or a runtime package by itself.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from qconform.runtimes import RUNTIMES


@dataclass(frozen=True)
class Tool:
    """One optional dependency: what it adds, how to install it, and how to find it here."""

    name: str
    adds: str  # what it brings: the runner or test it enables
    install: str  # the command that brings it
    locate: Callable[[], str | None]  # its path, module or version where present, else None


def _which(*names: str) -> Callable[[], str | None]:
    return lambda: next((p for p in map(shutil.which, names) if p), None)


def _module(name: str) -> Callable[[], str | None]:
    def locate() -> str | None:
        try:
            return name if importlib.util.find_spec(name) is not None else None
        except (ImportError, ValueError):
            return None
    return locate


def _clang_major(path: str) -> int:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    except OSError:
        return 0
    m = re.search(r"clang version (\d+)", out)
    return int(m.group(1)) if m else 0


#: tinygrad's CPU device needs clang >= 15 (Debian's clang 14 rejects ``__bf16`` on x86-64).
CLANG_MIN = 15


def _clang() -> str | None:
    """``$CC`` where set (the user's choice, taken as it is), else the newest clang >= 15 on PATH."""
    if os.environ.get("CC"):
        return shutil.which(os.environ["CC"])
    for cand in ("clang-21", "clang-20", "clang-19", "clang-18", "clang-17", "clang-16", "clang-15"):
        if shutil.which(cand):
            return shutil.which(cand)
    path = shutil.which("clang")
    return path if path and _clang_major(path) >= CLANG_MIN else None


def _cc() -> str | None:
    """The C compiler of cpu-kernel: ``$CC``, else ``cc``, ``gcc`` or ``clang``."""
    names = [os.environ["CC"]] if os.environ.get("CC") else ["cc", "gcc", "clang"]
    return _which(*names)()


def _nvrtc() -> str | None:
    from qconform.kernels import ptx

    try:
        ptx.nvrtc()
    except ptx.NvrtcUnavailable:
        return None
    return "nvrtc"


def _cuda() -> str | None:
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - no cupy, no driver, no device: all mean "no CUDA device"
        return None
    return f"{count} device(s)" if count else None


def _extra(module: str, extra: str, runner: str) -> Tool:
    return Tool(module, f"the {runner} runner and its tests", f"pip install -c constraints.txt -e '.[{extra}]'",
                _module(module))


TOOLS: dict[str, Tool] = {t.name: t for t in (
    Tool("clang", f"tinygrad's CPU device (clang >= {CLANG_MIN}: it compiles C with __bf16)",
         "apt-get install clang-19", _clang),
    Tool("chromium", "the tests that render report.html in a real headless browser",
         "apt-get install chromium", _which("chromium", "chromium-browser", "google-chrome")),
    Tool("node", "the onnxruntime-web runner (Node.js runs its WASM backend)", "apt-get install nodejs npm",
         _which("node")),
    Tool("npm", "the onnxruntime-web runner (it installs the pinned onnxruntime-web package)",
         "apt-get install npm", _which("npm")),
    Tool("cc", "the cpu-kernel runner (it compiles qkernels.h)", "apt-get install gcc", _cc),
    Tool("nvrtc", "the PTX build and lint of qkernels.h", "pip install nvidia-cuda-nvrtc-cu12", _nvrtc),
    Tool("cuda", "the gpu-kernel runner (a CUDA device through CuPy)",
         "pip install -e '.[gpu]' on a machine with a CUDA device", _cuda),
    *(_extra(str(rt.package), rt.extra, rt.name) for rt in RUNTIMES.values() if rt.extra),
    Tool("distributed", "the Dask executor and its tests", "pip install -c constraints.txt -e '.[dask]'",
         _module("distributed")),
)}

_found: dict[tuple[str, str, str], str | None] = {}


def find(name: str) -> str | None:
    """Where tool ``name`` is (a path, module or device count), None where it is missing. Asked once
    per PATH and ``$CC``, since runners and tests ask it for every case."""
    key = (name, os.environ.get("PATH", ""), os.environ.get("CC", ""))
    if key not in _found:
        _found[key] = TOOLS[name].locate()
    return _found[key]


def missing(name: str) -> str:
    """'' where ``name`` is present; else one line: what is missing, what it adds, how to install it."""
    if find(name) is not None:
        return ""
    t = TOOLS[name]
    return f"{name} is missing here; it adds {t.adds}: {t.install}"

"""Optional tools and packages: one availability check each, shared by the runners and the tests.

The suite runs (and its own tests pass) without any of these; each adds runners or tests. A runner
that needs one asks ``missing(name)`` before it starts; a test says ``@pytest.mark.needs(name)`` and
skips with the same one line, naming what is missing and how to install it. No other module looks
for a compiler, a browser, a library or a runtime package by itself: the PTX build
(``qconform.kernels.ptx``) loads the NVRTC ``load_nvrtc`` found here.

A low layer: it reads the runtime declarations (``qconform.declarations.runtimes``) and nothing else
of qconform, so the runners and the kernels ask it, never the other way.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from qconform.declarations.runtimes import RUNTIMES


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


#: How NVRTC is installed, where no candidate loads.
NVRTC_INSTALL = "pip install nvidia-cuda-nvrtc-cu12 (CUDA 12) or nvidia-cuda-nvrtc (CUDA 13)"


def _nvrtc_pathfinder() -> list[str]:
    """The libnvrtc CuPy 14 loads, through the same loader (absent: nothing)."""
    if importlib.util.find_spec("cuda") is None:
        return []
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        return [load_nvidia_dynamic_lib("nvrtc").abs_path]
    except Exception:  # noqa: BLE001 - not installed, too old, or no NVRTC it can find
        return []


def _nvrtc_wheels() -> list[str]:
    found = []
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    for base in (spec.submodule_search_locations or []) if spec else []:
        for layout in ("cu13/lib", "cuda_nvrtc/lib"):
            found += sorted(glob.glob(os.path.join(base, layout, "libnvrtc.so*")), reverse=True)
    return found


def _nvrtc_toolkits() -> list[str]:
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    found = []
    for root in filter(None, roots):
        for sub in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
            found += sorted(glob.glob(os.path.join(root, sub, "libnvrtc.so*")), reverse=True)
    return found


def nvrtc_candidates() -> list[str]:
    """Every libnvrtc this machine offers (CUDA 12 or 13), in the order ``load_nvrtc`` tries them,
    first match wins: ``$QCONFORM_NVRTC``; ``cuda.pathfinder`` (the loader CuPy 14 uses: pip wheels,
    then the system); the pip wheels' own layouts (``nvidia-cuda-nvrtc-cu12``:
    ``nvidia/cuda_nvrtc/lib/libnvrtc.so.12``; ``nvidia-cuda-nvrtc`` 13: ``nvidia/cu13/lib/libnvrtc.so.13``);
    ``$CUDA_HOME``, ``$CUDA_PATH`` and ``/usr/local/cuda``; the dynamic loader's own search
    (``libnvrtc.so.13``, ``.12``). NVRTC needs no driver and no GPU."""
    found = [os.environ["QCONFORM_NVRTC"]] if os.environ.get("QCONFORM_NVRTC") else []
    found += _nvrtc_pathfinder() + _nvrtc_wheels() + _nvrtc_toolkits()
    system = ctypes.util.find_library("nvrtc")
    found += ([system] if system else []) + ["libnvrtc.so.13", "libnvrtc.so.12"]
    # the builtins library sits beside the main one; load the main one only
    keep = [p for p in found if "builtins" not in os.path.basename(p) and ".alt." not in os.path.basename(p)]
    return list(dict.fromkeys(keep))


_nvrtc_loaded: list[tuple[ctypes.CDLL, str]] = []


def load_nvrtc() -> tuple[ctypes.CDLL | None, str]:
    """The first NVRTC of ``nvrtc_candidates()`` that loads, and the file it was loaded from (the
    loader's answer, for a library found by its soname); else None and what was tried. Once one
    loads it is kept for the process: every PTX build uses that one (a miss is searched again)."""
    if _nvrtc_loaded:
        return _nvrtc_loaded[0]
    errors = []
    for path in nvrtc_candidates():
        try:
            lib = ctypes.CDLL(path)
            lib.nvrtcVersion  # noqa: B018 - a library that is not NVRTC fails here
        except (OSError, AttributeError) as exc:
            errors.append(f"{path}: {exc}")
            continue
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        _nvrtc_loaded.append((lib, _loaded_from(path)))
        return _nvrtc_loaded[0]
    return None, "; ".join(errors[-3:]) if errors else "no libnvrtc found"


def _loaded_from(name: str) -> str:
    if os.path.isabs(name):
        return name
    try:  # a soname: the file the dynamic loader picked, from this process' own map
        with open("/proc/self/maps") as maps:
            hits = [ln.split()[-1] for ln in maps if os.path.basename(ln.split()[-1]).startswith(name)]
        return hits[0] if hits else name
    except OSError:
        return name


def _nvrtc() -> str | None:
    """The NVRTC the PTX build uses (CUDA 12 or 13): the file ``load_nvrtc`` loaded."""
    lib, where = load_nvrtc()
    return where if lib is not None else None


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
    Tool("nvrtc", "the PTX build and lint of qkernels.h",
         NVRTC_INSTALL, _nvrtc),
    Tool("cuda", "the gpu-kernel runner (a CUDA device through CuPy)",
         "pip install -e '.[gpu]' (CUDA 12) or '.[gpu-cu13]' (CUDA 13) on a machine with a CUDA device", _cuda),
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

"""Build the kernels' source (``qkernels.h`` and its parts, assembled by ``qconform.kernels.source``) with
the host C compiler at first use, cache it, load it with ctypes.

The shared library lives in ``$XDG_CACHE_HOME/qconform/kernels/<key>/`` (default
``~/.cache/qconform``; ``QCONFORM_CACHE_DIR`` overrides the root), where ``key`` hashes the assembled source,
the flags and the compiler's own version line, so a changed part or compiler builds anew and
concurrent processes (pytest-xdist workers) never load a half-written file (build to a temporary
name, then rename). A machine without a C compiler gets ``Unsupported("no C compiler: ...")``.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

from qconform.kernels import ENTRY_POINTS, cache_root, source
from qconform.runner import Unsupported

#: No fast-math, no FMA contraction: the source's arithmetic is IEEE float32 as written.
#: -ftree-vectorize -fno-trapping-math let gcc vectorize the branch-free integer-output loops (with
#: trapping math on, a float comparison that may raise "invalid" on NaN blocks if-conversion). Not
#: trapping changes which exception flags may be raised, never a value: nothing here reads the flags,
#: and the exhaustive sweeps check the compiled result bit by bit. (Order matters: -fno-fast-math
#: switches trapping math back on, so -fno-trapping-math comes after it.)
CFLAGS = ("-x", "c", "-std=gnu11", "-O2", "-ftree-vectorize", "-ffp-contract=off", "-fno-fast-math",
          "-fno-trapping-math", "-fPIC", "-shared")
LIBNAME = "libqkernels.so"


def find_compiler() -> str:
    """The C compiler: ``$CC``, else ``cc``, ``gcc`` or ``clang`` on PATH (``qconform.tools``' "cc")."""
    from qconform import tools

    path = tools.find("cc")
    if path is None:
        raise Unsupported(f"no C compiler: {tools.missing('cc')}")
    return path


def _compiler_id(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise Unsupported(f"no C compiler: {cc} cannot run ({exc})") from None
    return out.stdout.splitlines()[0] if out.stdout else cc


def build_key(cc: str, extra: tuple[str, ...] = ()) -> str:
    h = hashlib.sha256()
    h.update(source().encode())
    h.update("\0".join(CFLAGS + extra).encode())
    h.update(_compiler_id(cc).encode())
    return h.hexdigest()[:20]


def build(force: bool = False, extra: tuple[str, ...] = ()) -> Path:
    """Compile the source into the cache (if not there yet); returns the library's path.

    ``extra`` flags build a variant (tests build one per x86-64 ISA level with -DQK_NO_CLONES, to
    check every vector width the clones use, not only the one this CPU picks)."""
    cc = find_compiler()
    out_dir = cache_root() / "kernels" / build_key(cc, extra)
    lib = out_dir / LIBNAME
    if lib.is_file() and not force:
        return lib
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=out_dir)
    os.close(fd)
    cmd = [cc, *CFLAGS, *extra, "-o", tmp, "-", "-lm"]  # the assembled source on stdin
    try:
        proc = subprocess.run(cmd, input=source(), capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"compiling the kernels' source failed ({' '.join(cmd)}):\n{proc.stderr}")
        os.replace(tmp, lib)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return lib


#: ctypes types of the ABI's parameter kinds (qconform.kernels.ENTRY_POINTS).
_CTYPES = {"in": ctypes.c_void_p, "out": ctypes.c_void_p, "i32": ctypes.c_int, "i64": ctypes.c_int64}


@functools.cache
def load(extra: tuple[str, ...] = ()) -> ctypes.CDLL:
    """The compiled library with argument types declared (built at first use): each entry point of
    ``ENTRY_POINTS`` as ``qk_<name>``, and the three test hooks."""
    dll = ctypes.CDLL(str(build(extra=extra)))
    for name, params in ENTRY_POINTS.items():
        fn = getattr(dll, f"qk_{name}")
        fn.argtypes = [_CTYPES[kind] for _, kind in params]
        fn.restype = ctypes.c_int
    dll.qk_describe_kind.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
    dll.qk_describe_kind.restype = ctypes.c_int
    dll.qk_sigmoid_f64_export.argtypes = [ctypes.c_double]
    dll.qk_sigmoid_f64_export.restype = ctypes.c_double
    dll.qk_encode_f32_export.argtypes = [ctypes.c_uint32, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    dll.qk_encode_f32_export.restype = ctypes.c_uint32
    return dll


__all__ = ["CFLAGS", "build", "build_key", "cache_root", "find_compiler", "load"]

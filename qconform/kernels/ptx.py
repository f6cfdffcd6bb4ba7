"""Compile ``qkernels.h`` to PTX with NVRTC, and lint the PTX: the GPU source, proved on a CPU.

NVRTC comes from the pip wheel ``nvidia-cuda-nvrtc-cu12`` (12.8 or newer for sm_100; no driver and
no GPU needed): its ``libnvrtc.so.12`` is loaded with ctypes from the wheel's ``nvidia/cuda_nvrtc/lib``.
``QCONFORM_NVRTC=/path/to/libnvrtc.so`` points elsewhere; a system libnvrtc is the last resort.

The lint (``lint``) reads the PTX of the two entry points and requires what makes the division
IEEE: ``div.rn.f32`` present; and forbids what fast-math or contraction would bring in:
``div.full``, ``div.approx``, ``rcp.approx``, any ``.ftz`` (flush-to-zero) and floating-point
``fma.rn`` / ``mad.f32`` (a contracted multiply-add). ``compile_ptx(arch, flags=("--use_fast_math",))``
shows the lint failing (tests/test_kernels.py).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path

from qconform.kernels import HEADER
from qconform.runner import Unsupported

ARCHS = ("sm_80", "sm_89", "sm_90", "sm_100")
#: Explicit IEEE settings (NVRTC's defaults, spelled out) and no FMA contraction.
FLAGS = ("--fmad=false", "--prec-div=true", "--prec-sqrt=true", "--ftz=false", "-std=c++17")
ENTRY_POINTS = ("qk_quantize_kernel", "qk_dequantize_kernel")
PIP_HINT = "pip install nvidia-cuda-nvrtc-cu12  (or: pip install 'qconform[gpu]')"


class NvrtcUnavailable(Unsupported):
    """No NVRTC library on this machine."""


def _candidates() -> list[str]:
    found = []
    if os.environ.get("QCONFORM_NVRTC"):
        found.append(os.environ["QCONFORM_NVRTC"])
    for pkg in ("nvidia.cuda_nvrtc", "nvidia.cu13", "nvidia"):
        try:
            spec = importlib.util.find_spec(pkg)
        except (ImportError, ValueError):
            spec = None
        for base in (spec.submodule_search_locations or []) if spec else []:
            found += sorted(glob.glob(os.path.join(base, "**", "libnvrtc.so*"), recursive=True))
    sys_lib = ctypes.util.find_library("nvrtc")
    if sys_lib:
        found.append(sys_lib)
    # the builtins library sits beside the main one; load the main one only
    return [p for p in found if "builtins" not in os.path.basename(p) and ".alt." not in os.path.basename(p)]


@functools.cache
def nvrtc() -> ctypes.CDLL:
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as exc:
            errors.append(f"{path}: {exc}")
            continue
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        return lib
    detail = "; ".join(errors) if errors else "no libnvrtc found"
    raise NvrtcUnavailable(f"NVRTC not available ({detail}); {PIP_HINT}")


def version() -> tuple[int, int]:
    major, minor = ctypes.c_int(), ctypes.c_int()
    nvrtc().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def library_path() -> str:
    lib = nvrtc()
    return getattr(lib, "_name", "?")


class CompileError(RuntimeError):
    pass


def _check(rc: int, what: str, log: str = "") -> None:
    if rc != 0:
        msg = nvrtc().nvrtcGetErrorString(rc).decode()
        raise CompileError(f"NVRTC {what}: {msg}" + (f"\n{log}" if log else ""))


def compile_ptx(arch: str = "sm_80", flags: tuple[str, ...] | list[str] = FLAGS, source: str | None = None) -> str:
    """PTX of the header for ``arch`` (``sm_XX``: PTX targeting it, compiled as compute_XX).

    ``flags`` replaces the IEEE flags (e.g. ``("--use_fast_math",)`` for the lint's negative test)."""
    m = re.fullmatch(r"sm_(\d+a?)", arch)
    if not m:
        raise ValueError(f"arch {arch!r}: use sm_80, sm_89, sm_90, sm_100 ...")
    lib = nvrtc()
    src = (source if source is not None else HEADER.read_text()).encode()
    prog = ctypes.c_void_p()
    _check(lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"qkernels.cu", 0, None, None), "create")
    try:
        opts = [f"--gpu-architecture=compute_{m[1]}", *flags]
        arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        _check(rc, f"compile for {arch} ({' '.join(opts)})", log.value.decode(errors="replace"))
        lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
        ptx = ctypes.create_string_buffer(size.value)
        _check(lib.nvrtcGetPTX(prog, ptx), "get PTX")
        return ptx.value.decode()
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


@dataclass(frozen=True)
class LintIssue:
    line: int
    rule: str
    text: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.rule}: {self.text.strip()}"


REQUIRED = {"div.rn.f32": re.compile(r"\bdiv\.rn\.f32\b")}
FORBIDDEN = {
    "div.full (approximate division)": re.compile(r"\bdiv\.full\b"),
    "div.approx (approximate division)": re.compile(r"\bdiv\.approx\b"),
    "rcp.approx (approximate reciprocal)": re.compile(r"\brcp\.approx\b"),
    ".ftz (flush to zero)": re.compile(r"\.ftz\b"),
    "fma.rn (contracted multiply-add)": re.compile(r"\bfma\.rn"),
    "mad.f32/f64 (contracted multiply-add)": re.compile(r"\bmad(\.rn)?\.f(32|64)\b"),
}


def lint(ptx: str) -> list[LintIssue]:
    """Problems in the PTX (empty list: the kernels divide in IEEE float32, no fast-math, no FMA)."""
    issues = []
    lines = ptx.splitlines()
    for name in ENTRY_POINTS:
        if not any(re.search(rf"\.entry\s+{name}\b", ln) for ln in lines):
            issues.append(LintIssue(0, "missing entry point", name))
    for rule, rx in REQUIRED.items():
        if not any(rx.search(ln) for ln in lines):
            issues.append(LintIssue(0, f"required {rule} not found", "the quotient must be an IEEE division"))
    for i, ln in enumerate(lines, 1):
        code = ln.split("//", 1)[0]
        for rule, rx in FORBIDDEN.items():
            if rx.search(code):
                issues.append(LintIssue(i, f"forbidden {rule}", code))
    return issues


def main(argv: list[str] | None = None) -> int:
    """``python -m qconform.kernels.ptx [--out DIR] [ARCH ...]``: compile, lint, optionally save."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m qconform.kernels.ptx", description=__doc__.split("\n")[0])
    ap.add_argument("archs", nargs="*", default=list(ARCHS))
    ap.add_argument("--out", type=Path, help="write qkernels.<arch>.ptx here")
    ap.add_argument("--flags", default=" ".join(FLAGS),
                    help=f"NVRTC options instead of the IEEE ones (default: {' '.join(FLAGS)}); "
                         "e.g. --flags=--use_fast_math to see the lint fail")
    a = ap.parse_args(argv)
    try:
        print(f"NVRTC {'.'.join(map(str, version()))} ({library_path()})")
    except NvrtcUnavailable as exc:
        print(exc)
        return 2
    bad = 0
    for arch in a.archs:
        ptx = compile_ptx(arch, tuple(a.flags.split()))
        issues = lint(ptx)
        if a.out:
            a.out.mkdir(parents=True, exist_ok=True)
            (a.out / f"qkernels.{arch}.ptx").write_text(ptx)
        print(f"{arch}: {len(ptx.splitlines())} PTX lines, {'lint OK' if not issues else f'{len(issues)} lint issue(s)'}")
        for issue in issues[:10]:
            print(f"  {issue}")
        bad += bool(issues)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

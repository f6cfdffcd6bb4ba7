"""The one way the GPU kernels are made: ``build`` compiles the kernels' source (``qkernels.h`` and its
parts, assembled by ``qconform.kernels.source``) to PTX with NVRTC and
lints it; ``approved`` lints a PTX text again and writes the file a CUDA module is loaded from.

The lint, the tests and the gpu-kernel runner all call ``build``; the runner loads the file
``approved`` wrote (``cupy.RawModule(path=...)``), so the GPU runs exactly the PTX the lint read,
and its digest is in the runner's ``describe()``. No other compile path exists: a module compiled
by CuPy's own NVRTC call (``RawModule(code=...)``) once ran with subnormals flushed although this
PTX had no ``.ftz``.

NVRTC of CUDA 12 or 13, whichever the machine has: this module asks ``qconform.tools`` for it
(``tools.load_nvrtc``, the one search, in ``tools.nvrtc_candidates``' order; its "nvrtc" line is
the same answer). NVRTC needs no driver and no GPU.

The lint requires what makes the division IEEE (``div.rn.f32``) and every entry point, and forbids
what fast-math or contraction would bring in: any ``.approx`` instruction, ``div.full``, any
``.ftz`` (flush to zero), ``fma.rn`` / ``mad.f32`` (a contracted multiply-add), and floating-point
``add``/``sub``/``mul`` without a rounding modifier (which ptxas may still fuse into an FMA).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from qconform import tools
from qconform.kernels import ENTRY_POINTS as ABI
from qconform.kernels import cache_root
from qconform.kernels import source as kernel_source
from qconform.runner import Unsupported

ARCHS = ("sm_80", "sm_89", "sm_90", "sm_100")
#: Explicit IEEE settings (NVRTC's defaults, spelled out) and no FMA contraction.
FLAGS = ("--fmad=false", "--prec-div=true", "--prec-sqrt=true", "--ftz=false", "-std=c++17")
ENTRY_POINTS = tuple(f"qk_{name}_kernel" for name in ABI)
PIP_HINT = f"{tools.NVRTC_INSTALL}, or set QCONFORM_NVRTC=/path/to/libnvrtc.so"


class NvrtcUnavailable(Unsupported):
    """No NVRTC library on this machine."""


def candidates() -> list[str]:
    """Every libnvrtc this machine offers, in the order the search tries them (``qconform.tools``)."""
    return tools.nvrtc_candidates()


def nvrtc() -> ctypes.CDLL:
    """The NVRTC ``qconform.tools`` found and loaded; NvrtcUnavailable naming what was tried."""
    lib, where = tools.load_nvrtc()
    if lib is None:
        raise NvrtcUnavailable(f"NVRTC not available ({where}); {PIP_HINT}")
    return lib


def find_nvrtc() -> str | None:
    """The path of the NVRTC every PTX build uses, or None (``qconform.tools``' "nvrtc")."""
    return tools.TOOLS["nvrtc"].locate()


def version() -> tuple[int, int]:
    major, minor = ctypes.c_int(), ctypes.c_int()
    nvrtc().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def library_path() -> str:
    """Where the loaded NVRTC lives (the loader's answer, for a library found by its soname)."""
    nvrtc()
    return tools.load_nvrtc()[1]


class CompileError(RuntimeError):
    pass


def _check(rc: int, what: str, log: str = "") -> None:
    if rc != 0:
        msg = nvrtc().nvrtcGetErrorString(rc).decode()
        raise CompileError(f"NVRTC {what}: {msg}" + (f"\n{log}" if log else ""))


def _compile(arch: str, flags: tuple[str, ...], source: str | None) -> str:
    """NVRTC's PTX of ``source`` (default: the kernels' assembled source) for ``arch``; only ``build`` calls it."""
    m = re.fullmatch(r"sm_(\d+a?)", arch)
    if not m:
        raise ValueError(f"arch {arch!r}: use sm_80, sm_89, sm_90, sm_100 ...")
    lib = nvrtc()
    src = (source if source is not None else kernel_source()).encode()
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
    "approximate instruction (.approx)": re.compile(r"\.approx\b"),
    "div.full (approximate division)": re.compile(r"\bdiv\.full\b"),
    ".ftz (flush to zero)": re.compile(r"\.ftz\b"),
    "fma.rn (contracted multiply-add)": re.compile(r"\bfma\.rn"),
    "mad.f32/f64 (contracted multiply-add)": re.compile(r"\bmad(\.rn)?\.f(32|64)\b"),
    # "mul/add sequences with no rounding modifiers may be optimized to use fused-multiply-add
    # instructions on the target device" (PTX ISA): --fmad=false writes .rn on every one.
    "add/sub/mul.f without a rounding modifier (ptxas may fuse it)": re.compile(r"\b(add|sub|mul)(\.sat)?\.f(16|32|64)\b"),
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


def digest(text: str) -> str:
    """SHA-256 of a PTX text: what the runner's ``describe()`` records."""
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Ptx:
    """One build: the PTX text, what made it, and what the lint found in it."""

    arch: str
    flags: tuple[str, ...]
    text: str
    nvrtc: str  # NVRTC's version, "12.9"
    issues: tuple[LintIssue, ...]

    @property
    def digest(self) -> str:
        return digest(self.text)


def build(arch: str = "sm_90", flags: tuple[str, ...] | list[str] = FLAGS, source: str | None = None) -> Ptx:
    """PTX of the kernels' source (or ``source``) for ``arch`` (``sm_XX``: compiled as compute_XX), linted.

    ``flags`` replaces the IEEE flags (``("--use_fast_math",)`` shows the lint failing)."""
    text = _compile(arch, tuple(flags), source)
    return Ptx(arch, tuple(flags), text, ".".join(map(str, version())), tuple(lint(text)))


class PtxRefused(RuntimeError):
    """A PTX text the lint rejects: it never reaches a GPU."""


def approved(text: str, where: Path | None = None) -> Path:
    """The file a CUDA module is loaded from: ``text`` linted here (whoever made it) and refused
    with PtxRefused naming its problems, else written as ``<digest>.ptx`` under ``where`` (default:
    the kernel cache, ``qconform.kernels.cache_root() / "ptx"``), atomically."""
    issues = lint(text)
    if issues:
        shown = "; ".join(map(str, issues[:5])) + (f"; and {len(issues) - 5} more" if len(issues) > 5 else "")
        raise PtxRefused(f"PTX {digest(text)[:12]} refused, the GPU would not run the linted kernels: {shown}")
    if where is None:
        where = cache_root() / "ptx"
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{digest(text)}.ptx"
    if not path.is_file() or path.read_text() != text:
        fd, tmp = tempfile.mkstemp(prefix=".ptx-", dir=where)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    return path


def main(argv: list[str] | None = None) -> int:
    """``python -m qconform.kernels.ptx [--out DIR] [ARCH ...]``: build, lint, optionally save."""
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
        built = build(arch, tuple(a.flags.split()))
        if a.out:
            a.out.mkdir(parents=True, exist_ok=True)
            (a.out / f"qkernels.{arch}.ptx").write_text(built.text)
        verdict = "lint OK" if not built.issues else f"{len(built.issues)} lint issue(s)"
        print(f"{arch}: {len(built.text.splitlines())} PTX lines, sha256 {built.digest}, {verdict}")
        for issue in built.issues[:10]:
            print(f"  {issue}")
        bad += bool(built.issues)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

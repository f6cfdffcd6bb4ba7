"""The machine a run happens on: CPU model, architecture and the ISA features that select kernels.

Why it matters: a runtime's result can depend on which SIMD path it picked (onnxruntime's u8×s8
quantized matmul saturates pairs of products with AVX2 ``vpmaddubsw`` and not with AVX-512 VNNI), so
a certification report, a baseline and every recorded fact about a runtime name the platform.

Features come from numpy's CPU dispatch table, which asks ``cpuid`` (or the auxiliary vector on
Arm) at run time, so it sees what *this process* can execute — under an emulator (``qemu-x86_64
-cpu Haswell``) it sees the emulated CPU, which is how the AVX2-only facts were verified on an
AVX-512 machine. Extensions numpy does not track (AVX-VNNI, AMX, Arm i8mm) are read from
``/proc/cpuinfo`` and kept only when the base feature they extend is present according to numpy.

Conditions (``x86_64 and avx2 and not avx512vnni``) are boolean expressions over lower-case
feature names and architecture names; ``condition_holds`` evaluates them, ``check_condition``
rejects unknown names so a typo in a fact cannot silently make it never apply.
"""
from __future__ import annotations

import ast
import functools
import platform as _platform
import sys
from pathlib import Path
from typing import Any

#: Architecture names a condition may use (``platform.machine()`` normalised).
ARCHES = ("x86_64", "aarch64", "ppc64le", "s390x", "riscv64", "other")
#: Extensions read from /proc/cpuinfo, with the numpy feature each requires.
_CPUINFO_EXTRAS = {
    "avx_vnni": "avx2", "avx_vnni_int8": "avx2",
    "amx_tile": "avx512f", "amx_int8": "avx512f", "amx_bf16": "avx512f",
    "i8mm": "asimd", "bf16": "asimd", "sme": "asimd",
}
#: Features shown in a platform label and report header, in order (those that select kernels).
KERNEL_FEATURES = ("sse41", "avx", "avx2", "fma3", "f16c", "avx_vnni", "avx_vnni_int8", "avx512f", "avx512bw",
                   "avx512vnni", "avx512bf16", "avx512fp16", "amx_int8", "amx_bf16",
                   "neon", "asimd", "asimddp", "asimdhp", "i8mm", "bf16", "sve", "sme", "vsx", "rvv")


def _numpy_features() -> dict[str, bool]:
    try:
        from numpy._core._multiarray_umath import __cpu_features__  # numpy >= 2
    except ImportError:  # pragma: no cover - numpy 1.x
        from numpy.core._multiarray_umath import __cpu_features__
    return {k.lower(): bool(v) for k, v in __cpu_features__.items()}


def arch() -> str:
    m = _platform.machine().lower()
    m = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}.get(m, m)
    return m if m in ARCHES else "other"


def _cpuinfo() -> tuple[str, set[str]]:
    """(model name, flags) from /proc/cpuinfo; empty where there is none (macOS, Windows)."""
    path = Path("/proc/cpuinfo")
    model, flags = "", set()
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return model, flags
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if not model and key in ("model name", "cpu model", "processor") and not value.strip().isdigit():
            model = value.strip()
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    return model, flags


@functools.cache
def features() -> frozenset[str]:
    """Lower-case names of the CPU features this process can use."""
    known = _numpy_features()
    have = {k for k, v in known.items() if v}
    _, flags = _cpuinfo()
    for extra, base in _CPUINFO_EXTRAS.items():
        if extra in flags and base in have:
            have.add(extra)
    return frozenset(have)


@functools.cache
def vocabulary() -> frozenset[str]:
    """Every name a condition may use: architectures and every feature name known on any platform."""
    return frozenset(ARCHES) | frozenset(_numpy_features()) | frozenset(_CPUINFO_EXTRAS)


def cpu_model() -> str:
    model, _ = _cpuinfo()
    return model or _platform.processor() or "unknown"


def label(feats: frozenset[str] | None = None, machine: str | None = None) -> str:
    """Short name of the kernel-selecting ISA level, e.g. ``x86_64 AVX2 (no VNNI)``."""
    f = features() if feats is None else feats
    a = arch() if machine is None else machine
    if a == "x86_64":
        if "avx512f" in f and "avx512bw" in f:
            level = "AVX-512 VNNI" if "avx512vnni" in f else "AVX-512 (no VNNI)"
        elif "avx2" in f:
            level = "AVX2 + AVX-VNNI" if "avx_vnni" in f else "AVX2 (no VNNI)"
        else:
            level = "SSE"
        if "amx_int8" in f:
            level += " AMX"
        return f"x86_64 {level}"
    if a == "aarch64":
        parts = ["NEON"] + [n for n, k in (("dotprod", "asimddp"), ("i8mm", "i8mm"), ("SVE", "sve")) if k in f]
        return "aarch64 " + " ".join(parts)
    return a


def label_condition(feats: frozenset[str] | None = None, machine: str | None = None) -> str:
    """A condition that holds exactly on machines of this one's kernel-selecting ISA class (the class
    ``label`` names): what a measurement on this machine covers."""
    f = features() if feats is None else feats
    a = arch() if machine is None else machine
    if a == "x86_64":
        if "avx512f" in f and "avx512bw" in f:
            return "x86_64 and avx512bw and " + ("avx512vnni" if "avx512vnni" in f else "not avx512vnni")
        if "avx2" in f:
            return "x86_64 and avx2 and not avx512bw and " + ("avx_vnni" if "avx_vnni" in f else "not avx_vnni")
        return "x86_64 and not avx2"
    if a == "aarch64":
        return "aarch64 and " + " and ".join(k if k in f else f"not {k}" for k in ("asimddp", "i8mm", "sve"))
    return a


def info() -> dict[str, Any]:
    """The platform block of a runner's ``describe()`` and of a report's identity."""
    f = features()
    return {
        "label": label(f),
        "arch": arch(),
        "cpu": cpu_model(),
        "features": [n for n in KERNEL_FEATURES if n in f],
        "os": f"{_platform.system()} {_platform.release()}",
        "python": _platform.python_version(),
        "implementation": sys.implementation.name,
    }


# ----------------------------------------------------------------------------------------------
# Conditions
# ----------------------------------------------------------------------------------------------
class ConditionError(ValueError):
    """A platform condition that is not a boolean expression over known names."""


def _names(expr: str) -> ast.Expression:
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as exc:
        raise ConditionError(f"condition {expr!r} is not an expression: {exc.msg}") from None
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.Name,
                                 ast.Load)):
            raise ConditionError(f"condition {expr!r}: only names, and, or, not and parentheses are allowed")
    return tree


def check_condition(expr: str) -> None:
    """Raise ConditionError for a malformed condition or an unknown feature name."""
    if not expr.strip():
        return
    unknown = sorted({n.id for n in ast.walk(_names(expr)) if isinstance(n, ast.Name)} - vocabulary())
    if unknown:
        raise ConditionError(f"condition {expr!r}: unknown name(s) {', '.join(unknown)}")


def condition_holds(expr: str, feats: frozenset[str] | None = None, machine: str | None = None) -> bool:
    """Evaluate a condition on this machine (or on the given features/arch). Empty holds everywhere."""
    if not expr.strip():
        return True
    check_condition(expr)
    have = (features() if feats is None else feats) | {arch() if machine is None else machine}

    def ev(node: ast.AST) -> bool:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.BoolOp):
            vals = (ev(v) for v in node.values)
            return all(vals) if isinstance(node.op, ast.And) else any(vals)
        if isinstance(node, ast.UnaryOp):
            return not ev(node.operand)
        assert isinstance(node, ast.Name)
        return node.id in have

    return ev(_names(expr))


__all__ = ["ARCHES", "ConditionError", "arch", "check_condition", "condition_holds", "cpu_model", "features",
           "info", "label", "vocabulary"]

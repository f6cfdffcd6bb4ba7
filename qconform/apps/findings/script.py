"""The standalone reproducer script: rendered from a runtime's template, run, and its verdict line read."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qconform.apps.findings._common import MARK, VERIFY_TIMEOUT
from qconform.apps.findings.observe import Observation
from qconform.apps.findings.templates import _BYTES_HELPERS, _PACKED_HELPERS
from qconform.declarations.runtimes import Template
from qconform.verdicts import ERROR


def _indent(text: str, n: int = 4) -> str:
    return "".join((" " * n + ln if ln.strip() else ln) for ln in text.splitlines(keepends=True))


def render_script(tpl: Template, title: str, coded: Mapping[str, Any], has_skip: bool,
                  must_reject: str = "", others: Sequence[str] = ()) -> str:
    """repro.py for one finding. ``coded``: tensor name -> qconform ElemType of the arrays held as
    codes; ``must_reject``: why the model is invalid (the script then expects the runtime to refuse it);
    ``others``: the other readings the text permits (readings.npz), each of which the script accepts
    as it accepts expected.npz -- the same dtype and shape first, then every compared element's bits."""
    lines = [f'"""{title} (see README.md). Exit status 1 when the outputs differ from expected.npz."""\n',
             "import os\nimport numpy as np\n", tpl.imports.rstrip("\n") + "\n"]
    if coded:
        if tpl.codes is None:
            raise ValueError(f"the {tpl.runtime} template carries numpy types only")
        if tpl.codes_imports:
            lines.append(tpl.codes_imports + "\n")
    lines.append("\nos.chdir(os.path.dirname(os.path.abspath(__file__)))\n")
    lines.append('inputs, expected = dict(np.load("inputs.npz")), dict(np.load("expected.npz"))\n')
    if has_skip:
        lines.append('skip = dict(np.load("skip.npz"))  # not compared: don\'t-care elements, NaN in both\n')
    if coded:
        entries = []
        for name, t in coded.items():
            expr = tpl.codes(t)
            if expr is None:
                raise ValueError(f"the {tpl.runtime} template cannot carry {t.name}")
            entries.append(f'"{name}": {expr}')
        names = ", ".join(sorted({t.name for t in coded.values()}))
        lines.append(f"# {names}: numpy has no such type; these arrays hold each element's code "
                     f"({'uint16' if any(t.bits == 16 for t in coded.values()) else 'uint8'})\n")
        lines.append("CODES = {" + ", ".join(entries) + "}\n")
        lines.append("TYPES = {" + ", ".join(f'"{n}": "{t.name}"' for n, t in coded.items()) + "}  # ONNX names\n")
        packed = {n: t.bits for n, t in coded.items() if t.packed}
        if tpl.bytes_io:
            if packed:
                lines.append("BITS = {" + ", ".join(f'"{n}": {b}' for n, b in packed.items()) + "}\n")
                lines.append(_PACKED_HELPERS)
            else:
                lines.append(_BYTES_HELPERS)
        if tpl.helpers:
            lines.append(tpl.helpers)
    lines.append(f'print("{tpl.runtime}", {tpl.version})\n')
    body = tpl.run_codes if coded else tpl.run
    lines.append("try:\n" + _indent(body))
    if must_reject:
        lines.append('except Exception as exc:\n    print(f"OK: the model is rejected: {type(exc).__name__}: {exc}")\n'
                     "    raise SystemExit(0)\n")
        lines.append('print("actual:", actual)\n')
        lines.append(f'print("{MARK} the model ran; it is invalid and must be rejected: {_pyq(must_reject)}")\n')
        lines.append("raise SystemExit(1)\n")
        return "".join(lines)
    lines.append('except Exception as exc:\n    raise SystemExit(f"expected: {expected}\\n'
                 f'{MARK} the run raised {{type(exc).__name__}}: {{exc}}")\n')
    if others:  # another permitted reading, bit for bit (same dtype and shape), is as good as expected.npz
        skip = "skip.get(k, False)" if has_skip else "False"
        lines.append(f"OTHERS = {list(others)!r}  # the other readings the text permits (readings.npz)\n"
                     'readings = dict(np.load("readings.npz"))\n'
                     "for reading in OTHERS:\n"
                     "    keys = {name: f\"{reading}/{name}\" for name in expected}\n"
                     "    got = {name: np.asarray(actual[name]) for name in expected}\n"
                     "    if all((got[n].dtype, got[n].shape) == (readings[k].dtype, readings[k].shape) and not (\n"
                     "            (got[n].view(f\"u{got[n].itemsize}\") != readings[k].view(f\"u{got[n].itemsize}\"))\n"
                     f"            & ~((got[n] != got[n]) & (readings[k] != readings[k])) & ~{skip}).any()\n"
                     "           for n, k in keys.items()):\n"
                     "        print(f\"OK: the outputs are reading '{reading}', which the text also permits "
                     "(expected.npz holds another)\")\n"
                     "        raise SystemExit(0)\n")
    show = ('(lambda v: f"{int(v):#x}") if name in CODES else str' if coded else "str")
    lines.append("bad = 0\nfor name, e in expected.items():\n    a = np.asarray(actual[name])\n")
    etype = "TYPES.get(name, e.dtype)" if coded else "e.dtype"
    lines.append("    if (a.dtype, a.shape) != (e.dtype, e.shape):\n"
                 f'        raise SystemExit(f"{MARK} {{name}}: expected {{{etype}}}{{list(e.shape)}}, '
                 'actual {a.dtype}{list(a.shape)}")\n')
    lines.append('    differ = (a.view(f"u{a.itemsize}") != e.view(f"u{e.itemsize}")) & ~((a != a) & (e != e))'
                 + (" & ~skip.get(name, False)" if has_skip else "") + "\n")
    if coded:
        lines.append(f"    fmt = {show}\n")
    ev, av = ("fmt(e[tuple(i)])", "fmt(a[tuple(i)])") if coded else ("e[tuple(i)]", "a[tuple(i)]")
    lines.append("    for i in np.argwhere(differ)[:8].tolist():\n"
                 f'        print(f"{{name}}{{i}}: expected {{{ev}}}, actual {{{av}}}")\n'
                 "    bad += int(differ.sum())\n")
    lines.append(f'print(f"{MARK} {{bad}} element(s) differ" if bad else "OK: the outputs are the expected ones")\n')
    lines.append("raise SystemExit(1 if bad else 0)\n")
    return "".join(lines)


def _pyq(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("{", "{{").replace("}", "}}").replace("\n", " ")


def run_script(directory: Path, tpl: Template, timeout: float = VERIFY_TIMEOUT,
               python: str | None = None) -> tuple[int, str]:
    """Run repro.py in its directory with ``python`` (default this interpreter): (exit status, output)."""
    env = {**os.environ, **tpl.env(), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        p = subprocess.run([python or sys.executable, "repro.py"], cwd=directory, capture_output=True, text=True,
                           timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        return 124, f"repro.py ran past {timeout:.0f}s"
    return p.returncode, (p.stdout + p.stderr)


def mark_line(output: str) -> str:
    """The script's verdict line (the last line carrying MARK), addresses normalised; '' when none."""
    lines = [ln.strip() for ln in output.splitlines() if MARK in ln]
    return normalise(lines[-1][lines[-1].index(MARK):]) if lines else ""


def normalise(text: str) -> str:
    """Addresses, clock times and this machine's install paths out of a script's output (they
    differ from run to run and from machine to machine)."""
    text = re.sub(r"0x[0-9a-fA-F]{8,}", "0x…", text)
    text = re.sub(r"[^\s'\"]*/site-packages/", "<site-packages>/", text)
    return re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?", "<time>", text)


def signature(line: str) -> str:
    """A verdict line without its numbers: the same deviation whatever the counts, source line
    numbers or shapes in the message (two versions of a runtime show the same finding so)."""
    return re.sub(r"\d+", "N", normalise(line))

def shows(line: str, obs: Observation) -> bool:
    """The script's verdict line shows what the runner saw: an error for an error, outputs otherwise."""
    return bool(line) and (("the run raised" in line) == (obs.outputs is None and obs.verdict == ERROR))

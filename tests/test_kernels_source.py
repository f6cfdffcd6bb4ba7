"""The kernels' C source in parts (issue 62: no code file over 600 lines): every part is assembled into
the one translation unit both compilers read, every part ships in the wheel, and a change to any part
reaches the host build key (the PTX lint in tests/test_kernels.py builds the same assembled text)."""
from __future__ import annotations

import fnmatch
import tomllib

import pytest

from conftest import REPO
from qconform.kernels import PARTS, source


def test_every_part_is_small_and_assembled_in_order():
    text = source()
    at = [text.index(f'#line 1 "{p.name}"\n{p.read_text()}') for p in PARTS]
    assert at == sorted(at) and at[0] == 0
    assert PARTS[0].name == "qkernels.h"
    for p in PARTS:
        assert len(p.read_text().splitlines()) <= 600, p.name
    on_disk = {p.name for p in PARTS[0].parent.glob("*.h")}
    assert on_disk == {p.name for p in PARTS}, "a .h file beside the kernels that the source leaves out"


def test_every_part_ships_in_the_wheel():
    """The package data's patterns for qconform.kernels match every part (gpu-check runs from the wheel)."""
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    for p in PARTS:
        assert any(fnmatch.fnmatch(p.name, pat) for pat in data["qconform.kernels"]), p.name


def test_a_changed_part_changes_the_build_key(monkeypatch):
    from qconform.kernels import build

    try:
        cc = build.find_compiler()
    except Exception as exc:  # a machine without a C compiler
        pytest.skip(str(exc))
    before = build.build_key(cc)
    last = PARTS[-1]
    text = last.read_text()
    real = type(last).read_text
    monkeypatch.setattr(type(last), "read_text",
                        lambda self, *a, **k: real(self, *a, **k) + ("/* x */\n" if self == last else ""))
    assert source().endswith(text + "/* x */\n")
    assert build.build_key(cc) != before


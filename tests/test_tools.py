"""Optional tools (qconform.tools): each missing one is said in one line, and the project's tests skip
with that line, never fail, where the tools they need are hidden from PATH."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import REPO

from qconform import tools

#: The tools a new user's machine may lack that PATH finds (the Python packages are the extras,
#: tested in tests/test_runtime_runners.py; NVRTC and CUDA are libraries, not commands).
HIDDEN = ("clang", "chromium", "node", "npm", "cc")
#: Commands that would let those be found again under another name.
_HIDE = re.compile(r"^(clang(-\d+)?|clang\+\+(-\d+)?|chromium(-browser)?|google-chrome|node|nodejs|npm|npx|"
                   r"cc|gcc(-\d+)?|c\+\+|g\+\+(-\d+)?|x86_64-linux-gnu-gcc(-\d+)?)$")


def shadow_path(root: Path) -> str:
    """A PATH of one folder linking every command of this PATH except the hidden ones."""
    root.mkdir()
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if not folder or not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            if not _HIDE.match(entry.name) and not (root / entry.name).exists():
                (root / entry.name).symlink_to(entry.path)
    return str(root)


@pytest.mark.parametrize("name", HIDDEN)
def test_a_missing_tool_is_one_line_naming_it_and_its_install(name, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", shadow_path(tmp_path / "bin"))
    monkeypatch.delenv("CC", raising=False)
    why = tools.missing(name)
    assert why.startswith(f"{name} is missing here; it adds ") and "\n" not in why
    assert why.endswith(tools.TOOLS[name].install)


def test_every_tool_says_what_it_adds_and_how_to_install_it():
    for t in tools.TOOLS.values():
        assert t.adds and re.match(r"^(apt-get|pip) install ", t.install), t


def test_tests_that_need_hidden_tools_skip_with_the_tools_line(tmp_path):
    """Every test marked as needing a hidden tool is collected, then run with that tool hidden from
    PATH: each one skips, and its reason is the tool's own line."""
    listing = tmp_path / "needs.json"
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--co", "-q", "tests"], cwd=REPO,
                   env={**env, "QCONFORM_LIST_NEEDS": str(listing)}, capture_output=True, text=True, timeout=300,
                   check=True)
    needs = {nodeid: set(item["needs"]) & set(HIDDEN) for nodeid, item in json.loads(listing.read_text()).items()
             if not item["skip"]}  # a test marked skip (--full-sweep's) skips for its own reason
    chosen = sorted(n for n, hidden in needs.items() if hidden)
    assert {name for n in chosen for name in needs[n]} == set(HIDDEN), "a hidden tool no test needs"
    junit = tmp_path / "junit.xml"
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-rs",
                        f"--junitxml={junit}", *chosen], cwd=REPO, capture_output=True, text=True, timeout=600,
                       env={**env, "PATH": shadow_path(tmp_path / "bin"), "TMPDIR": str(tmp_path)})
    assert r.returncode == 0, r.stdout[-4000:]
    seen = 0
    for case in ET.parse(junit).iter("testcase"):
        skipped = case.find("skipped")
        assert skipped is not None, f"{case.get('name')} ran with its tool hidden"
        reason = skipped.get("message", "")
        assert re.search(r"\b(" + "|".join(HIDDEN) + r") is missing here; it adds .*: (apt-get|pip) install ", reason), reason
        seen += 1
    assert seen == len(chosen), (seen, len(chosen))

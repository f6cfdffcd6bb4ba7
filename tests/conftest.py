"""Shared fixtures for the project's own tests (they run without --runner)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def pytest_addoption(parser):
    parser.addoption("--full-sweep", action="store_true",
                     help="also run cpu-kernel over all 2^32 float32 inputs of every full sweep (~15 min, 2 cores)")


@pytest.fixture(scope="session")
def corpus():
    from qconform import corpus as corpus_mod
    from qconform.plugin import default_golden

    return corpus_mod.load(default_golden())


def run_pytest(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: int = 600):
    """Run pytest in a subprocess (the plugin is loaded through its pytest11 entry point)."""
    import os

    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=cwd or REPO, env=full_env, capture_output=True, text=True, timeout=timeout)

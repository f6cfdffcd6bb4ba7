"""Shared fixtures for the project's own tests (they run without --runner).

A test that needs an optional tool or package says ``@pytest.mark.needs("clang")`` (names from
``qconform.tools``); where it is missing the test skips with the tool's one line: what is missing,
what it adds, how to install it. A fixture that needs one is listed in ``FIXTURE_NEEDS`` and its
tests get the marker. ``QCONFORM_LIST_NEEDS=FILE`` writes, at collection, each test's needs (and
whether it is marked skip anyway) as JSON
(tests/test_tools.py uses it to prove that the suite skips, never fails, with tools hidden)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from qconform import tools

REPO = Path(__file__).resolve().parent.parent

#: Fixtures that need a tool: their tests need it too.
FIXTURE_NEEDS: dict[str, tuple[str, ...]] = {"cpu_kernel": ("cc",), "nvrtc": ("nvrtc",)}


def pytest_configure(config):
    config.addinivalue_line("markers", "needs(*tools): the test needs these optional tools (qconform.tools names)")


#: Modules whose tests set up for a minute or more (fresh venvs): collected first, so that
#: pytest-xdist's first batch (consecutive items) gives them all to one worker, which builds each
#: environment once, and no worker is left alone with them at the end of the run.
FIRST: tuple[str, ...] = ("test_wheel.py",)


def pytest_collection_modifyitems(config, items):
    if any(item.path.name in FIRST for item in items):
        items.sort(key=lambda item: item.path.name not in FIRST)  # stable: the order within is kept
    for item in items:
        for fixture, names in FIXTURE_NEEDS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.needs(*names))
    listing = os.environ.get("QCONFORM_LIST_NEEDS")
    if listing:
        Path(listing).write_text(json.dumps({item.nodeid: {"needs": needs_of(item),
                                                           "skip": item.get_closest_marker("skip") is not None}
                                             for item in items}), encoding="utf-8")
    _skip_slow_and_untooled(config, items)


def _skip_slow_and_untooled(config, items) -> None:
    """A slow test without --run-slow, or one whose tool is missing, skips saying why: marked here,
    not in a ``pytest_runtest_setup`` hook, because with ``--runner`` from this checkout this conftest
    is loaded too, and a phase hook outside pytest turns the corpus's case items to pytest's own,
    slower, protocol (``--case-protocol=auto``)."""
    run_slow = config.getoption("--run-slow")
    for item in items:
        if not isinstance(item, pytest.Function):  # the corpus's case items, with --runner
            continue
        if item.get_closest_marker("slow") and not run_slow:
            item.add_marker(pytest.mark.skip(reason="slow (minutes): run with --run-slow"))
            continue
        for name in needs_of(item):
            if name not in tools.TOOLS:
                raise ValueError(f"{item.nodeid}: needs({name!r}) names no tool of qconform.tools")
            why = tools.missing(name)
            if why:
                item.add_marker(pytest.mark.skip(reason=why))
                break


@pytest.fixture(scope="session", autouse=True)
def _iree_compile_cache(tmp_path_factory):
    """IREE compiles every model (~0.25 s each, the longest part of the default run): the facts
    observation and the runner's slice test share what this run compiled, in a cache under this
    run's own temp directory (shared by its xdist workers, never another run's), as ``--runner-opt
    cache=DIR`` does for a user. A ``$QCONFORM_IREE_CACHE`` already set (empty: no cache) is kept."""
    if "QCONFORM_IREE_CACHE" in os.environ:
        yield
        return
    path = run_shared(tmp_path_factory) / "iree-compile-cache"
    path.mkdir(exist_ok=True)
    os.environ["QCONFORM_IREE_CACHE"] = str(path)
    yield
    os.environ.pop("QCONFORM_IREE_CACHE", None)


def needs_of(item) -> list[str]:
    return sorted({name for mark in item.iter_markers("needs") for name in mark.args})


def pytest_addoption(parser):
    parser.addoption("--full-sweep", action="store_true",
                     help="also run cpu-kernel over all 2^32 float32 inputs of every full sweep (~15 min, 2 cores)")
    parser.addoption("--run-slow", action="store_true",
                     help="also run the tests marked slow (whole-corpus regeneration and other checks of many "
                          "minutes; the default run stays under 15 minutes on 2 cores)")
    parser.addoption("--emulated-aarch64", action="store_true",
                     help="also certify onnxruntime's aarch64 build under qemu-user (root; ~5 min the first time)")


@pytest.fixture(scope="session")
def corpus():
    from qconform import corpus as corpus_mod
    from qconform.plugin import default_golden

    return corpus_mod.load(default_golden())


def run_pytest(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: int = 600,
               cache: bool = False):
    """Run pytest in a subprocess (the plugin is loaded through its pytest11 entry point); with
    ``cache``, pytest's cache plugin stays (--lf, --ff)."""
    import os

    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "pytest", *([] if cache else ["-p", "no:cacheprovider"]), *args],
                          cwd=cwd or REPO, env=full_env, capture_output=True, text=True, timeout=timeout)


def terminated_once_started(cmd: list[str], started) -> tuple[int, str]:
    """Run ``cmd`` (output merged), send it SIGTERM once a line satisfies ``started`` (cases are being
    judged), and return its exit status and the rest of its output: how a CI timeout or ``kill``
    stops a run part way."""
    import signal

    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        for line in proc.stdout:
            if started(line):
                break
        os.kill(proc.pid, signal.SIGTERM)
        rest, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, rest


def run_shared(tmp_path_factory) -> Path:
    """This run's temp root, shared by its xdist workers (never another run's). A worker's own is
    ``popen-<worker>`` inside it; a pytest started by a test inherits $PYTEST_XDIST_WORKER without
    being a worker, and keeps a root of its own."""
    base = tmp_path_factory.getbasetemp()
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return base.parent if worker and base.name == f"popen-{worker}" else base


@contextmanager
def built_once(tmp_path_factory, name: str):
    """A folder under this run's shared temp root, held under an exclusive lock while the caller
    builds or reuses what is in it: xdist workers build a thing once, not once each. Where there
    is no ``fcntl`` (Windows) each worker gets a folder of its own."""
    try:
        import fcntl
    except ImportError:
        yield tmp_path_factory.mktemp(name)
        return
    root = run_shared(tmp_path_factory) / name
    root.mkdir(exist_ok=True)
    fd = os.open(root / ".lock", os.O_CREAT | os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield root
    finally:
        os.close(fd)  # closing releases the lock


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """qconform's wheel, built once per run from a copy of the tree (setuptools builds in the tree's
    build/): the first worker to need it builds it, the others reuse it, so the kernel tests' GPU
    check and the wheel tests install the same wheel."""
    import shutil

    with built_once(tmp_path_factory, "wheel") as root:
        built = sorted((root / "dist").glob("qconform-*.whl"))
        if built:
            return built[0]
        src = root / "src" / "qconform"
        shutil.rmtree(src.parent, ignore_errors=True)
        shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".git", ".venv*", "build", "dist", "*.egg-info",
                                                                "__pycache__", ".pytest_cache", "qconform-report",
                                                                "gpu-carry"))
        out = root / "building"
        shutil.rmtree(out, ignore_errors=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
        build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)]
        r = subprocess.run([*build, "--no-build-isolation"], capture_output=True, text=True, env=env, timeout=600)
        if r.returncode:  # setuptools not importable here: build in isolation (pip fetches it)
            r = subprocess.run(build, capture_output=True, text=True, env=env, timeout=600)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        out.rename(root / "dist")
        (whl,) = (root / "dist").glob("qconform-*.whl")
        return whl

"""The test environment is reproducible: every third-party package the project installs is pinned in
constraints.txt, and the commands README.md gives (and .ci/run runs) install with it."""
from __future__ import annotations

import re
import tomllib

from conftest import REPO
from packaging.requirements import Requirement


def _pins() -> dict[str, str]:
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version, f"constraints.txt: {line!r} is not an exact pin (name==version)"
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def test_every_dependency_and_test_extra_is_pinned():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["test"],
              *project["optional-dependencies"]["onnxruntime"]]
    pins = _pins()
    missing = []
    for text in wanted:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate():
            continue
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        if name not in pins:
            missing.append(req.name)
        else:
            assert req.specifier.contains(pins[name], prereleases=True), \
                f"constraints.txt pins {req.name}=={pins[name]}, outside pyproject's {req.specifier}"
    assert not missing, f"not pinned in constraints.txt: {missing}"


def test_readme_and_ci_install_with_the_constraints():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    test_cmd = 'python3 -m venv .venv && .venv/bin/pip install -q -c constraints.txt -e ".[test,runtimes]" && .venv/bin/python -m pytest -n 2'
    assert test_cmd in readme and test_cmd in ci
    certify = 'pip install -q -c constraints.txt -e ".[onnxruntime]" && .venv/bin/python -m pytest --runner=onnxruntime'
    assert certify in readme and 'install -q -c constraints.txt -e ".[onnxruntime]"' in \
        (REPO / ".ci" / "certify-on-pythons").read_text()


def test_readme_states_the_python_range_that_pyproject_admits():
    """README's quick start names the range requires-python admits (and .ci/certify-on-pythons runs
    the certify command on both its ends)."""
    spec = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    m = re.fullmatch(r">=3\.(\d+),<3\.(\d+)", spec)
    assert m, f"requires-python {spec!r}: state a bounded range (the versions CI runs the certify command on)"
    oldest, newest = f"3.{m.group(1)}", f"3.{int(m.group(2)) - 1}"
    assert f"## Quick start (fresh machine, Python {oldest}–{newest})" in (REPO / "README.md").read_text()
    assert "bash .ci/certify-on-pythons" in (REPO / ".ci" / "run").read_text()

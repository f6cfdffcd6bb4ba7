"""The package's imports follow the flow that qconform/docs/architecture.md's layer block states, no
two modules import each other, every module is in a layer, and the document's module table names
exactly what the package holds."""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

from conftest import REPO

PKG = REPO / "qconform"
#: Imports against the flow, on purpose; architecture.md says why.
AGAINST_THE_FLOW = {("qconform.generators.qlinear_matmul", "qconform.oracle"),
                    ("qconform.generators.conv", "qconform.oracle.integer")}


def modules() -> dict[str, Path]:
    """Every module of the package (``docs/`` holds documents: the findings' standalone scripts)."""
    out = {}
    for f in PKG.rglob("*.py"):
        if f.is_relative_to(PKG / "docs"):
            continue
        parts = f.relative_to(REPO).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def imports(mods: dict[str, Path]) -> set[tuple[str, str]]:
    """(importer, imported module) for every import of the package, wherever it stands in a file."""
    def owner(name: str) -> str:
        while name not in mods:
            name = name.rpartition(".")[0]
        return name

    edges = set()
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges |= {(name, owner(a.name)) for a in node.names if a.name.split(".")[0] == "qconform"}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                if base.split(".")[0] != "qconform":
                    continue
                for a in node.names:  # `from qconform import dtypes` imports a module; `from x import f`, x
                    edges.add((name, f"{base}.{a.name}" if f"{base}.{a.name}" in mods else owner(base)))
    return {(a, b) for a, b in edges if a != b}


def layers() -> list[tuple[str, list[str]]]:
    text = (PKG / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = re.search(r"```layers\n(.*?)```", text, re.S)
    assert block, "architecture.md has no ```layers block"
    return [(line.split(":")[0], line.split(":", 1)[1].split()) for line in block.group(1).strip().splitlines()]


def _layer(module: str, table: list[tuple[str, list[str]]]) -> int | None:
    """The layer of the longest entry naming ``module`` or a package above it; the package itself
    (``qconform``) names only its ``__init__``, never a module below it."""
    best, found = -1, None
    for i, (_, entries) in enumerate(table):
        for p in entries:
            below = p != "qconform" and module.startswith(p + ".")
            if (module == p or below) and len(p) > best:
                best, found = len(p), i
    return found


def layer_of(module: str, table: list[tuple[str, list[str]]]) -> int:
    found = _layer(module, table)
    assert found is not None, f"{module} is in no layer of architecture.md"
    return found


def unlayered(mods, table) -> list[str]:
    """The modules no entry of the layer block names."""
    return sorted(m for m in mods if _layer(m, table) is None)


def against_the_flow(edges: set[tuple[str, str]], table: list[tuple[str, list[str]]]) -> list[str]:
    """Each import of ``edges`` from a lower layer to a higher one (save the listed exceptions)."""
    against = []
    for a, b in sorted(edges):
        if layer_of(a, table) < layer_of(b, table) and (a, b) not in AGAINST_THE_FLOW:
            against.append(f"{a} ({table[layer_of(a, table)][0]}) imports {b} ({table[layer_of(b, table)][0]})")
    return against


def test_every_import_follows_the_layers():
    against = against_the_flow(imports(modules()), layers())
    assert not against, "imports against the flow:\n" + "\n".join(against)


#: Imports that once ran back up the layers while coarser layers let them pass, each as it would
#: stand in today's package: the finer layers must catch every one of them.
UPWARD = {
    # (a) the runtime declarations sat among the runners that read them: a declaration importing
    # what reads it (the registry, the tools, a runner) runs upward now
    "a declaration imports the runner registry": ("qconform.declarations.runtimes", "qconform.runner"),
    "a declaration imports the tools": ("qconform.declarations.runtimes.tinygrad", "qconform.tools"),
    "a declaration imports its runner": ("qconform.declarations.runtimes.onnxruntime",
                                         "qconform.runners.onnxruntime_runner"),
    "what a declaration is made of imports a runner": ("qconform.declarations.runtime", "qconform.runners.common"),
    # (b) tools.py reached into the kernels for the NVRTC search
    "the tools import the PTX build": ("qconform.tools", "qconform.kernels.ptx"),
    "the tools import a runner": ("qconform.tools", "qconform.runners.tinygrad_runner"),
    # (c) the diagnosis run (a test and benchmark harness) sat in diagnosis/ and imported the engine
    "the diagnosis imports the engine": ("qconform.diagnosis.diagnose", "qconform.execution"),
    "a diagnosis harness imports the engine": ("qconform.diagnosis.run", "qconform.execution"),
    # (d) the pytest plugin's report feature imported the baseline and the report's assembly from the
    # applications, the command line's home
    "the pytest plugin imports an application": ("qconform.plugin", "qconform.apps.baseline"),
}


@functools.cache
def _graph() -> tuple[tuple[str, ...], frozenset[tuple[str, str]]]:
    mods = modules()
    return tuple(mods), frozenset(imports(mods))


@pytest.mark.parametrize("edge", UPWARD.values(), ids=list(UPWARD))
def test_the_layers_catch_each_import_that_once_ran_upward(edge):
    """Planted into the package's own import graph, each upward import fails the layer check, by
    itself; the same import the other way round (the direction the code now takes) passes."""
    (mods, graph), table = _graph(), layers()
    importer, imported = edge
    assert any(m == imported or m.startswith(imported + ".") for m in mods), f"{imported} is not in the package"
    caught = set(against_the_flow(set(graph) | {edge}, table)) - set(against_the_flow(set(graph), table))
    assert [line.split(" (")[0] for line in caught] == [importer], f"{importer} -> {imported} passes the layers"
    assert f"imports {imported} (" in caught.pop()
    assert against_the_flow({(imported, importer)}, table) == []


def test_no_import_circle():
    mods = modules()
    graph: dict[str, set[str]] = {}
    for a, b in imports(mods):
        graph.setdefault(a, set()).add(b)
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                raise AssertionError("import circle: " + " -> ".join(path[path.index(n):] + [n]))
            if n not in state:
                visit(n)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_the_layering_check_catches_an_import_against_the_flow():
    table = layers()
    assert layer_of("qconform.report.html", table) < layer_of("qconform.apps.findings", table)
    assert layer_of("qconform.oracle.floats", table) < layer_of("qconform.generators.basic", table)
    assert layer_of("qconform.oracle.quantize", table) > layer_of("qconform.generators.basic", table)


def test_every_module_is_in_a_layer():
    assert unlayered(modules(), layers()) == [], "modules in no layer of qconform/docs/architecture.md"


def test_a_planted_module_outside_every_layer_is_caught():
    """A new top-level module is in no layer until architecture.md lists it: the package's own
    name is no catch-all."""
    planted = {**modules(), "qconform.planted": PKG / "planted.py", "qconform.runners.planted": PKG / "x.py"}
    assert unlayered(planted, layers()) == ["qconform.planted"]


def _table_names() -> set[str]:
    """The files and folders the module table of architecture.md names (its second column)."""
    text = (PKG / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = [ln.split("|") for ln in text.splitlines() if ln.startswith("| ") and not ln.startswith("| ---")]
    return {n for r in rows[1:] if len(r) > 3 for n in re.findall(r"`([\w./]+)`", r[2])}


def test_the_module_table_names_what_the_package_holds():
    """architecture.md is true: every top-level module and folder is in its table, and every name
    there is a file or folder of the package."""
    named = _table_names()
    present = {f.name for f in PKG.glob("*.py") if f.name != "__init__.py"} | \
              {d.name + "/" for d in PKG.iterdir() if d.is_dir() and not d.name.startswith(("_", "."))}
    assert present - named == set(), "in the package, missing from architecture.md's table"
    assert {n for n in named if not (PKG / n.rstrip("/")).exists()} == set(), "in the table, not in the package"


def test_the_map_names_every_folder_of_the_package():
    """Each folder of the package holding modules (``declarations/runtimes/``, ``diagnosis/models/``,
    ``apps/findings/`` ...) is named in architecture.md, by its path or, inside its parent's row, by
    its own name."""
    text = (PKG / "docs" / "architecture.md").read_text(encoding="utf-8")
    folders = {f.parent.relative_to(PKG) for f in PKG.rglob("*.py") if f.parent != PKG}
    unnamed = sorted(d.as_posix() for d in folders
                     if d.parts[0] != "docs" and f"`{d.as_posix()}/`" not in text and f"`{d.name}/`" not in text)
    assert not unnamed, f"folders architecture.md does not name: {unnamed}"

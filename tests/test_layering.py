"""The package's imports follow the flow that qconform/docs/architecture.md's layer block states,
and no two modules import each other (issue 33)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import REPO

PKG = REPO / "qconform"
#: Imports against the flow, on purpose; architecture.md says why.
AGAINST_THE_FLOW = {("qconform.generators.qlinear_matmul", "qconform.oracle")}


def modules() -> dict[str, Path]:
    out = {}
    for f in PKG.rglob("*.py"):
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


def layer_of(module: str, table: list[tuple[str, list[str]]]) -> int:
    best, found = -1, None
    for i, (_, prefixes) in enumerate(table):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, found = len(p), i
    assert found is not None, f"{module} is in no layer of architecture.md"
    return found


def test_every_import_follows_the_layers():
    mods, table = modules(), layers()
    against = []
    for a, b in sorted(imports(mods)):
        if layer_of(a, table) < layer_of(b, table) and (a, b) not in AGAINST_THE_FLOW:
            against.append(f"{a} ({table[layer_of(a, table)][0]}) imports {b} ({table[layer_of(b, table)][0]})")
    assert not against, "imports against the flow:\n" + "\n".join(against)


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

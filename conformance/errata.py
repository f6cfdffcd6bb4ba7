"""The errata table of docs/semantics.md (section ``errata``), parsed into rows.

Each row names a *source* (a runner, ONNX's node tests, or ml_dtypes), the op versions it concerns,
the case ids it covers (fnmatch globs over ``Op-opset/types/family/name``), one example that shows
it, its *kind*, the named reading it follows (``reading``/``oracle-gap`` rows), what the source does and what
the spec says. ``tests/test_errata.py`` checks the table against the corpus in both directions:
every case a runner fails is covered by a row of that runner, and every row's example really
disagrees.

Kinds:

* ``erratum``     the source contradicts the text: its example fails (or errors) in the default profile.
* ``reading``     the source follows a permitted non-first reading (docs/semantics.md#readings-index):
                  its example passes the default profile with that reading and fails ``--profile=strict``.
* ``oracle-gap``  the source does what docs/semantics.md permits, but the corpus does not say so yet (the
                  oracle lacks the reading, or a generator makes a case the document keeps out): its
                  example fails the default profile until qconform is fixed; then the row becomes a
                  ``reading`` row (or goes).
* ``unsupported`` the source cannot run these models (information): its example is reported unsupported.
* ``must-reject`` the source runs a model the spec makes invalid (information; no corpus case exists).

Examples: a corpus case id; ``probe:NAME`` for a draft defined in tests/test_errata.py (behaviour the
corpus does not exercise yet, or a must-reject model); a node test name (source ``onnx-node-tests``);
a test function in tests/test_floats.py (source ``ml_dtypes``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

SOURCES = ("onnx-reference", "onnxruntime", "onnx-node-tests", "ml_dtypes")
#: Sources that are qconform runners (their rows cover corpus case ids).
RUNNER_SOURCES = ("onnx-reference", "onnxruntime")
KINDS = ("erratum", "reading", "oracle-gap", "unsupported", "must-reject")
#: Kinds whose rows account for a default-profile failure of their source.
FAILING_KINDS = ("erratum", "oracle-gap")
COLUMNS = ("id", "source", "op-version", "cases", "example", "kind", "reading", "what it does", "what the spec says")

DOC = Path(__file__).resolve().parent.parent / "docs" / "semantics.md"
PROBE = "probe:"


class ErrataError(ValueError):
    """The errata table is malformed: one line naming the row and the problem."""


@dataclass(frozen=True)
class Row:
    id: str  # "E1", "E2", ...
    source: str  # one of SOURCES
    op_versions: str  # free text, e.g. "QuantizeLinear-23, -24, -25, -28"
    patterns: tuple[str, ...]  # fnmatch globs over case ids (node test names for onnx-node-tests)
    example: str  # a case id, "probe:NAME", a node test name, or a test in tests/test_floats.py
    kind: str  # one of KINDS
    reading: str | None  # the named reading the source follows (kinds "reading", "oracle-gap")
    does: str  # what the source does
    spec: str  # what the spec says, with the sentence or a link to the section quoting it

    def covers(self, case_id: str) -> bool:
        return any(fnmatchcase(case_id, p) for p in self.patterns)

    @property
    def probe(self) -> str | None:
        """The probe name when the example is ``probe:NAME``."""
        return self.example[len(PROBE):] if self.example.startswith(PROBE) else None


def _section(text: str, anchor: str) -> str:
    start = text.find(f'<a id="{anchor}"></a>')
    if start < 0:
        raise ErrataError(f"docs/semantics.md has no anchor {anchor!r}")
    end = text.find("<a id=", start + 1)
    return text[start:end if end > 0 else len(text)]


def _cells(line: str) -> list[str]:
    body = line.strip()
    if not (body.startswith("|") and body.endswith("|")):
        return []
    parts = re.split(r"(?<!\\)\|", body[1:-1])
    return [p.strip().replace("\\|", "|") for p in parts]


def _tables(section: str) -> list[list[list[str]]]:
    tables, current = [], []
    for line in section.splitlines():
        cells = _cells(line)
        if cells:
            current.append(cells)
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    return tables


def _code(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def reading_names(text: str | None = None) -> set[str]:
    """Every reading named in docs/semantics.md#readings-index (``a`` / ``b`` cells give both)."""
    text = DOC.read_text() if text is None else text
    names: set[str] = set()
    for table in _tables(_section(text, "readings-index")):
        for cells in table[2:]:
            names.update(_code(cells[0]))
    return names


def parse(text: str) -> list[Row]:
    section = _section(text, "errata")
    tables = [t for t in _tables(section) if tuple(c.lower() for c in t[0]) == COLUMNS]
    if len(tables) != 1:
        raise ErrataError(f"the errata section needs exactly one table with columns {' | '.join(COLUMNS)}")
    known_readings = reading_names(text)
    rows: list[Row] = []
    for n, cells in enumerate(tables[0][2:], 1):
        if len(cells) != len(COLUMNS):
            raise ErrataError(f"errata row {n}: {len(cells)} cells, expected {len(COLUMNS)}")
        rid, source, opv, cases, example, kind, reading, does, spec = cells
        where = f"errata row {rid or n}"
        if rid != f"E{n}":
            raise ErrataError(f"{where}: id should be E{n} (ids are numbered in order)")
        source = source.strip("`")
        if source not in SOURCES:
            raise ErrataError(f"{where}: unknown source {source!r}; known: {', '.join(SOURCES)}")
        if kind not in KINDS:
            raise ErrataError(f"{where}: unknown kind {kind!r}; known: {', '.join(KINDS)}")
        patterns = tuple(_code(cases))
        if source != "ml_dtypes" and not patterns:
            raise ErrataError(f"{where}: no `glob` in the cases column")
        ex = _code(example)
        if len(ex) != 1:
            raise ErrataError(f"{where}: the example column needs exactly one `example`")
        names = _code(reading)
        if kind == "reading":
            if len(names) != 1 or names[0] not in known_readings:
                raise ErrataError(f"{where}: a reading row names one reading of docs/semantics.md#readings-index, "
                                  f"got {reading!r}")
        elif kind == "oracle-gap":
            if len(names) > 1 or (names and names[0] not in known_readings):
                raise ErrataError(f"{where}: an oracle-gap row names at most one reading of "
                                  f"docs/semantics.md#readings-index, got {reading!r}")
        elif names:
            raise ErrataError(f"{where}: only kinds 'reading' and 'oracle-gap' name a reading (got {reading!r})")
        if not does or not spec:
            raise ErrataError(f"{where}: 'what it does' and 'what the spec says' must not be empty")
        rows.append(Row(rid, source, opv, patterns, ex[0], kind, names[0] if names else None, does, spec))
    return rows


def load(path: Path | str | None = None) -> list[Row]:
    """The rows of the errata table of docs/semantics.md (or of the given file)."""
    return parse(Path(path or DOC).read_text())


def covering(rows: list[Row], source: str, case_id: str, kinds: tuple[str, ...] = KINDS) -> list[Row]:
    """Rows of ``source`` (of the given kinds) whose globs cover ``case_id``."""
    return [r for r in rows if r.source == source and r.kind in kinds and r.covers(case_id)]


# ----------------------------------------------------------------------------------------------
# Running a runner over the corpus in-process (what tests/test_errata.py compares with the table)
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Result:
    """One case under one runner: the verdict, and for a pass the reading it matched."""

    verdict: str  # "pass" | "fail" | "error" | "unsupported"
    reading: str | None = None  # default profile: the reading matched (pass) or compared against (fail)
    first: str | None = None  # the case's first (strict) reading
    message: str = ""  # first lines of the failure, or the runner's message

    @property
    def disagrees(self) -> bool:
        """Fails the default profile (a wrong result, or a runner error)."""
        return self.verdict in ("fail", "error")

    @property
    def strict_disagrees(self) -> bool:
        """Fails ``--profile=strict``: a default disagreement, or a pass on a non-first reading."""
        return self.disagrees or (self.verdict == "pass" and self.reading != self.first)


def run_case(runner, case) -> Result:
    """build_model + execute + compare, as the plugin does in-process."""
    from conformance.compare import compare
    from conformance.isolation import execute
    from conformance.model import build_model

    try:
        model = build_model(case)
    except Exception as exc:  # noqa: BLE001 — a model qconform cannot build is that case's error
        return Result("error", message=f"build_model: {type(exc).__name__}: {exc}")
    call = execute(runner, model, case.feeds)
    if call.kind != "ok":
        kind = "unsupported" if call.kind == "unsupported" else "error"
        return Result(kind, message=call.message)
    out = compare(case, call.outputs)
    msg = "" if out.verdict == "pass" else "\n".join(out.message(case).splitlines()[:3])
    return Result(out.verdict, out.reading, case.readings[0].name, msg)


def run_corpus(runner_name: str, root: str | Path) -> dict[str, Result]:
    """Every case of the corpus at ``root`` under the named runner (one process, no isolation)."""
    import warnings

    from conformance import corpus as corpus_mod
    from conformance.runner import resolve

    runner = resolve(runner_name)
    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy overflow warnings inside the runners
        for case in corpus_mod.load(Path(root)).cases:
            results[case.id] = run_case(runner, case)
    return results

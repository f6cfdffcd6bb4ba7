"""``qconform export backend-test OUT``: the golden corpus in ONNX's backend-test layout.

A runtime's own test harness runs the corpus without qconform: onnx's loader
(``onnx.backend.test.loader.load_model_tests(data_dir=OUT, kind="conformance")``), onnx's backend-test
``Runner`` comparison, onnxruntime's ``onnx_test_runner OUT/conformance``. The layout::

    OUT/index.json                                   every case: kind, clause, its directories (one per reading)
                                                     and each reading's don't-care counts
    OUT/conformance/test_<case>[__<reading>]/        one directory per case and permitted reading
        model.onnx                                   the exact model the suite runs
        test_data_set_0/input_N.pb                   graph inputs, in graph order (TensorProto)
        test_data_set_0/output_N.pb                  expected outputs under this reading
        dont_care_N.pb                               bool mask of output N's elements this reading leaves undefined
        data.json                                    {"rtol": 0, "atol": 0}: onnx's loader reads the tolerances here
        config.txt                                   the same zero tolerances for onnx_test_runner
        qconform.json                                id, reading, sibling directories, clause, don't-care counts
    OUT/information/test_<case>[__<reading>]/        the implementation-defined cases, same files

Kinds. ``load_model_tests`` takes one *kind* directory below ``data_dir``; the normative cases are
kind ``conformance``. Never name a kind ``node``: for that kind onnx's loader ignores ``data_dir`` and
returns its own bundled node tests.

Names. ``<case>`` is the case id made portable exactly as ``--export-failures`` does
(``export.dirname``: ``/`` and other punctuation become ``_``, ``.+-`` are kept), e.g.
``QuantizeLinear-21/float32-int4/basic/per-tensor`` -> ``test_QuantizeLinear-21_float32-int4_basic_per-tensor``.
A case with one reading gets that one directory; a case with several gets one directory per
reading, each suffixed ``__<reading>`` (the first is the reading the latest spec text states, the
strict profile's), e.g. ``test_DequantizeLinear-13_int32-float32_precision_wide-differences__multiply-in-output-type``
and ``...__multiply-exact-then-round``. ``dirname`` never writes ``__``, so the name splits back at
the first ``__``. Should two selected cases (or readings) ever map to one name, each of them gets
``-<8 hex digits of sha256(id[|reading])>`` appended (the bundled corpus has no such pair).

Several readings: a backend conforms on a case when **any one** of the case's directories passes
(the others then fail, as they must: they hold other outputs). A harness that counts directories
overstates failures; group them with ``index.json`` (or the part of the name before ``__``).

Information cases (``Case.information``: the model is invalid by the spec text; qconform reports
them as information, never pass or fail) are exported, not skipped, but under their own kind
``information``: loading kind ``conformance`` never sees them, and whoever wants to compare the
reading runtimes commonly take still can. ``index.json`` and their ``qconform.json`` give the reason.
A backend that rejects such a model is right to.

Comparison. onnx's ``Runner`` compares every element with ``numpy.testing.assert_allclose`` and
the data.json tolerances (0 and 0 here: exact values), so:

- don't-care elements (e.g. NaN quantized to an integer) are compared too: output_N.pb holds the
  value qconform's oracle computes for them, which the spec does not require. A failure on an
  element marked in ``dont_care_N.pb`` (its count is in qconform.json) is no deviation;
- any NaN equals any NaN and +0 equals -0 there (``equal_nan``), so payload and zero-sign
  deviations, which qconform's own comparison reports, pass;
- for bfloat16 outputs onnx's Runner widens rtol to 2**-6 whatever data.json says.

``pytest --runner=...`` remains the bit-exact verdict; this export is for harnesses that already run
ONNX backend tests. Tensors are written in the same encoding as ``--export-failures`` (onnx's own
TensorProto encoding, sub-byte packing included). Deterministic: the same cases give the same bytes
(directories written in id order, no clock, no absolute path in any file), so ``qconform
import-results`` rebuilds each case's ``model.onnx`` and inputs (``qconform.model.runnable_files``) to
check that a device ran the corpus's.
"""
from __future__ import annotations

import ast
import hashlib
import json
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from fnmatch import fnmatchcase
from pathlib import Path

from qconform.case import Case
from qconform.model import build_model, runnable_files
from qconform.report.export import (
    DATA_SET,
    dirname,
    dont_care_counts,
    write_dont_care,
    write_json,
    write_outputs,
)

FORMAT = "qconform-backend-test"
#: 2: don't-care counts per reading (each directory's own mask), not one set per case.
VERSION = 2
KIND = "conformance"
INFO_KIND = "information"
INDEX = "index.json"
#: Per-case tolerances: onnx's loader reads data.json, onnxruntime's onnx_test_runner config.txt.
DATA_JSON = {"rtol": 0, "atol": 0}
CONFIG_TXT = "per_sample_tolerance: 0\nrelative_per_sample_tolerance: 0\n"
#: Longest directory name written (file systems stop at 255 bytes).
MAX_NAME = 200
RULE = ("a backend conforms on a case when any one of the case's directories passes; "
        "elements marked in dont_care_N.pb are undefined by the spec")


class ExportError(Exception):
    """The export cannot be written (bad selection, an output directory that is not an export)."""


def _sha8(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _fit(name: str, key: str) -> str:
    return name if len(name) <= MAX_NAME else f"{name[:MAX_NAME - 9]}-{_sha8(key)}"


def dir_names(cases: Sequence[Case]) -> dict[tuple[str, str], str]:
    """(case id, reading name) -> directory name, for every reading of every case (see the module doc)."""
    named: dict[tuple[str, str], tuple[str, str]] = {}
    for c in cases:
        base, single = f"test_{dirname(c.id)}", len(c.readings) == 1
        for r in c.readings:
            named[(c.id, r.name)] = (base if single else f"{base}__{dirname(r.name)}",
                                     c.id if single else f"{c.id}|{r.name}")
    uses = Counter(name for name, _ in named.values())
    return {k: _fit(name if uses[name] == 1 else f"{name}-{_sha8(key)}", key) for k, (name, key) in named.items()}


def _kind(case: Case) -> str:
    return INFO_KIND if case.information else KIND


def _prepare(out: Path, force: bool) -> None:
    """An empty (or new) directory, or an earlier export of ours with ``force``: only its own
    entries (index.json and the kind directories) are removed, never anything else."""
    if not out.exists():
        return
    if not out.is_dir():
        raise ExportError(f"{out} exists and is not a directory")
    entries = list(out.iterdir())
    if not entries:
        return
    ours = False
    if (out / INDEX).is_file():
        try:
            ours = json.loads((out / INDEX).read_text(encoding="utf-8")).get("format") == FORMAT
        except (ValueError, OSError):
            ours = False
    if not ours:
        raise ExportError(f"{out} is not empty and holds no earlier backend-test export; choose an empty directory")
    if not force:
        raise ExportError(f"{out} holds an earlier export; use --force to replace it")
    for kind in (KIND, INFO_KIND):
        if (out / kind).is_dir():
            shutil.rmtree(out / kind)
    (out / INDEX).unlink()


def export_backend(cases: Iterable[Case], out_dir: Path, *, corpus_digest: str = "",
                   force: bool = False) -> dict:
    """Write ``cases`` (every permitted reading of each) in ONNX's backend-test layout under
    ``out_dir``; returns the index (also written as ``out_dir/index.json``). See the module doc."""
    out = Path(out_dir)
    todo = sorted(cases, key=lambda c: c.id)
    ids = [c.id for c in todo]
    if len(ids) != len(set(ids)):
        raise ExportError(f"duplicate case ids: {sorted({i for i in ids if ids.count(i) > 1})[:5]}")
    _prepare(out, force)
    out.mkdir(parents=True, exist_ok=True)
    head = {"format": FORMAT, "version": VERSION, "corpus_digest": corpus_digest,
            "kinds": {KIND: "normative cases", INFO_KIND: "implementation-defined: the model is invalid by "
                                                          "the text; information, never pass or fail"},
            "rule": RULE}
    write_json(out / INDEX, {**head, "complete": False})  # marks the directory as ours while it is written
    names = dir_names(todo)
    entries = []
    for case in todo:
        kind = _kind(case)
        dirs = [names[(case.id, r.name)] for r in case.readings]
        model = build_model(case)
        runnable = runnable_files(case, model)
        for reading, name in zip(case.readings, dirs):
            d = out / kind / name
            for rel, data in runnable.items():
                (d / rel).parent.mkdir(parents=True, exist_ok=True)
                (d / rel).write_bytes(data)
            write_outputs(d / DATA_SET, case, reading)
            write_dont_care(case, reading, lambda n, d=d: d / f"dont_care_{n}.pb")
            write_json(d / "data.json", DATA_JSON)
            (d / "config.txt").write_text(CONFIG_TXT, encoding="utf-8")
            meta = {"id": case.id, "kind": kind, "reading": reading.name,
                    "readings": [r.name for r in case.readings], "dirs": dirs, "rule": RULE,
                    "clause": case.clause, "clause_url": f"qconform/docs/semantics.md#{case.clause}",
                    "dont_care": dont_care_counts(reading), "inputs": [vi.name for vi in model.graph.input],
                    "outputs": list(case.output_names), "output_types": list(case.output_types)}
            if case.information:
                meta["information"] = case.information
            write_json(d / "qconform.json", meta)
        entry = {"id": case.id, "kind": kind, "clause": case.clause,
                 "readings": [{"name": r.name, "dir": f"{kind}/{n}", "dont_care": dont_care_counts(r)}
                              for r, n in zip(case.readings, dirs)]}
        if case.information:
            entry["information"] = case.information
        entries.append(entry)
    index = {**head, "complete": True,
             "counts": {k: {"cases": sum(1 for e in entries if e["kind"] == k),
                            "dirs": sum(len(e["readings"]) for e in entries if e["kind"] == k)}
                        for k in (KIND, INFO_KIND)},
             "cases": entries}
    write_json(out / INDEX, index)
    return index


# ----------------------------------------------------------------------------------------------
# Selection: --case ID/GLOB (as pytest --case) and -m EXPR (as pytest -m, over the case markers)
# ----------------------------------------------------------------------------------------------
def marker_predicate(expr: str) -> Callable[[set[str]], bool]:
    """``-m`` as pytest reads it for case items: marker names, ``and``, ``or``, ``not``, parentheses."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as exc:
        raise ExportError(f"-m {expr!r} is not a marker expression: {exc.msg}") from None
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not,
                                 ast.Name, ast.Load)):
            raise ExportError(f"-m {expr!r}: only marker names, and, or, not and parentheses are allowed")

    def ev(node: ast.AST, have: set[str]) -> bool:
        if isinstance(node, ast.Expression):
            return ev(node.body, have)
        if isinstance(node, ast.BoolOp):
            vals = (ev(v, have) for v in node.values)
            return all(vals) if isinstance(node.op, ast.And) else any(vals)
        if isinstance(node, ast.UnaryOp):
            return not ev(node.operand, have)
        return node.id in have

    return lambda markers: ev(tree, markers)


def selection(patterns: Sequence[str] = (), marker: str | None = None) -> Callable[[object], bool]:
    """A predicate over cases (``Case`` or ``CaseRef``): ids or fnmatch globs (any of them), and the
    marker expression; no pattern and no expression select everything."""
    from qconform.corpus import case_pattern
    from qconform.plugin import case_markers

    pats = [case_pattern(p) for p in patterns if p.strip()]
    exact = {p for p in pats if not any(ch in p for ch in "*?[")}
    globs = [p for p in pats if p not in exact]
    marks = marker_predicate(marker) if marker and marker.strip() else None

    def chosen(case) -> bool:
        if pats and case.id not in exact and not any(fnmatchcase(case.id, g) for g in globs):
            return False
        return marks is None or marks(set(case_markers(case)))

    return chosen


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------
def add_arguments(p) -> None:
    p.add_argument("out", type=Path, metavar="OUT",
                   help="output directory (new or empty; an earlier export with --force)")
    p.add_argument("--case", action="append", default=[], metavar="ID",
                   help="only this case (repeatable): a case id or an fnmatch glob over ids, as pytest --case")
    p.add_argument("-m", dest="marker", metavar="EXPR", default=None,
                   help="only the cases matching this marker expression, as pytest -m, "
                        "e.g. \"op_QuantizeLinear and opset_21\"")
    p.add_argument("--golden", type=Path, default=None, metavar="DIR",
                   help="golden corpus directory (default: the bundled one)")
    p.add_argument("--force", action="store_true", help="replace an earlier export in OUT")


def main(args) -> int:
    from qconform import corpus
    from qconform.corpus import DEFAULT_ROOT

    root = Path(args.golden) if args.golden else DEFAULT_ROOT
    try:
        chosen = selection(args.case, args.marker)
        idx = corpus.index(root)
        ids = [r.id for r in idx.refs if chosen(r)]
        if not ids:
            raise ExportError("no case matches the selection")
        index = export_backend(idx.cases_of(ids).values(), Path(args.out), corpus_digest=idx.digest,
                               force=args.force)
    except (ExportError, corpus.CorpusError) as exc:
        print(f"qconform: {exc}", file=sys.stderr)
        return 2
    def dirs(kind: str) -> str:
        n = index["counts"][kind]
        return f"{n['dirs']} test director{'y' if n['dirs'] == 1 else 'ies'} for {n['cases']} case(s)"

    if index["counts"][KIND]["cases"]:
        print(f"wrote {dirs(KIND)} to {Path(args.out) / KIND}")
    if index["counts"][INFO_KIND]["cases"]:
        print(f"wrote {dirs(INFO_KIND)} to {Path(args.out) / INFO_KIND}: implementation-defined (information) "
              f"cases, not conformance; see {INDEX}")
    print(f"load with onnx.backend.test.loader.load_model_tests(data_dir={str(args.out)!r}, kind={KIND!r}); "
          f"a case with several readings passes when any one of its directories passes")
    return 0


__all__ = [
    "CONFIG_TXT",
    "DATA_JSON",
    "FORMAT",
    "INFO_KIND",
    "KIND",
    "ExportError",
    "add_arguments",
    "dir_names",
    "export_backend",
    "main",
    "marker_predicate",
    "selection",
]

"""``qconform findings``: upstream-ready reproducers, one directory per deviation group of a runtime.

A *deviation group* of a runtime is

* for a runtime with a facts file (``qconform/facts/onnxruntime.toml``, ``onnx-reference.toml``):
  each fact of kind ``erratum`` or ``must-reject`` that holds for the installed version on this
  platform; its ``example`` is the case reproduced;
* for any other runtime: its failing cases (``fail``, ``error``, ``crashed``, ``timeout``) grouped
  by op (domain and op type, every version of it) and mechanism: the first deviation model that
  explains the case (``qconform/diagnosis``), ``unexplained`` when none does, or for a run that
  raised the normalised error message. The failures come from a report
  (``--from-report DIR/report.json``, written by ``pytest --runner=NAME --report=DIR``) or, without
  one, from running the corpus (``--cases GLOB`` limits it). The smallest failing case of a group
  (fewest input and output elements) is its example; the group's op versions are listed.

Each group becomes ``OUT/<runtime>/<key>/``::

    model.onnx     the case's single-node model (qconform.model.build_model)
    inputs.npz     the graph inputs by name
    expected.npz   the outputs the spec gives (the case's first reading), by name
    actual.npz     what the runtime returned (absent when the run raised)
    skip.npz       elements not compared (don't-care, or NaN in both), only when there are any
    repro.py       a standalone script using only the runtime and numpy: runs model.onnx on
                   inputs.npz, prints expected vs actual, exits 1 ("MISMATCH: ...") when they differ
    README.md      what the runtime does, the spec sentence, the case, the version seen on, how to run
    finding.json   the same facts as data (read by the index and tests/test_findings.py)

Arrays of element types numpy lacks (bfloat16, the float8 kinds, float8e8m0, float4e2m1, int4,
uint4, int2, uint2) are stored as their element codes, one per array element: uint16 for bfloat16,
uint8 for the rest (sub-byte codes in the low bits, not packed). A maintainer loads them with numpy
alone; the script hands them to the runtime as the runtime's own API wants them (raw bytes in the
ONNX layout for onnxruntime and OpenVINO, ``codes.view(ml_dtypes.<type>)`` for onnx.reference, whose
dependency ml_dtypes already is, a bitcast for tinygrad). Every script is checked when written:
it is run in a subprocess ``VERIFY_RUNS`` times and must print the same mismatch each time, else the
group's next smallest case is tried (a runtime whose outputs differ from run to run gets no
reproducer: its fact says so instead).

``TEMPLATES`` holds one entry per runtime (how its script loads and runs a model), read from the
runtime's declaration (``qconform.runtimes``: the template copies the settings its runner applies);
a new runtime is one more declaration. A runner with no entry (a vendor's own) gets ``generic_template``: its report
says how it was loaded (``runner.load``: the ``--runner`` spec, a file by its absolute path, and
the ``--runner-opt`` words), and the script loads it the same way and calls it through the runner
contract, never another runtime in its place. ``OUT/index.md`` lists every finding with its status: ``OUT/status.toml``
(hand-edited: ``"runtime/key" = "new" | "reported <url>" | "fixed in <version>"``) wins, then a
fact with a closed version range (``<X``) says ``fixed in X``, else ``new``.

Deterministic: the same corpus, facts, report and runtime versions give the same bytes (no clock,
npz members with a fixed timestamp). A directory already written is merged when its case and
actual output are unchanged (``seen_on`` gains the installed version), so findings measured with
another version of a runtime (onnxruntime 1.31.1 beside 1.32.0) live side by side; ``--clean``
removes a runtime's directories first.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import numpy as np

import qconform
from qconform.runtimes import RUNTIMES, Template, ml_dtype
from qconform.verdicts import ERROR, FAIL, FAULTS, Call, Probe

PKG = Path(qconform.__file__).resolve().parent
CHECKOUT = PKG.parent if (PKG.parent / "pyproject.toml").is_file() else None
SEMANTICS = PKG / "docs" / "semantics.md"
INDEX = "index.md"
STATUS = "status.toml"
META = "finding.json"
FORMAT = 1
#: The last line a script prints when the runtime deviates (tests/test_findings.py looks for it).
MARK = "MISMATCH:"
#: Fact kinds that make a finding: the source contradicts the text, or runs a model it makes invalid.
FACT_KINDS = ("erratum", "must-reject")
#: Candidate cases tried per group until one gives a script that shows the mismatch.
TRIES = 5
VERIFY_TIMEOUT = 300
#: Runs of a freshly written script that must all show the mismatch: a runtime whose outputs differ
#: from run to run (memory it never writes, tvm's y_scale of an empty x) gets no reproducer that
#: passes one day and not the next.
VERIFY_RUNS = 3


def default_out() -> Path:
    """``qconform/docs/findings`` of a source checkout; ``./qconform-findings`` elsewhere."""
    return PKG / "docs" / "findings" if CHECKOUT else Path("qconform-findings")


# ----------------------------------------------------------------------------------------------
# The per-runtime script templates: each declared with its runtime (qconform.runtimes)
# ----------------------------------------------------------------------------------------------
#: One entry per runtime that has a template, in ``RUNTIMES`` order: how its script loads and runs a model.
TEMPLATES: dict[str, Template] = {name: rt.template for name, rt in RUNTIMES.items() if rt.template}

_BYTES_HELPERS = '''\
def to_bytes(k, v):  # element codes -> the ONNX layout
    return v.tobytes()
def from_bytes(k, raw, shape):  # the ONNX layout -> element codes
    return np.frombuffer(raw, expected[k].dtype).reshape(shape)
'''
_PACKED_HELPERS = '''\
def to_bytes(k, v):  # element codes -> the ONNX layout (sub-byte types: packed, first element in the low bits)
    if k not in BITS: return v.tobytes()
    n = 8 // BITS[k]; c = np.concatenate([v.ravel(), np.zeros(-v.size % n, np.uint8)]).reshape(-1, n)
    return np.bitwise_or.reduce(c << (BITS[k] * np.arange(n, dtype=np.uint8)), axis=1).astype(np.uint8).tobytes()
def from_bytes(k, raw, shape):  # the ONNX layout -> element codes
    if k not in BITS: return np.frombuffer(raw, expected[k].dtype).reshape(shape)
    n, b = 8 // BITS[k], np.frombuffer(raw, np.uint8)
    c = (b[:, None] >> (BITS[k] * np.arange(n, dtype=np.uint8))) & np.uint8(2 ** BITS[k] - 1)
    return c.ravel()[: int(np.prod(shape))].reshape(shape)
'''


_GENERIC_RUN = """\
model = onnx.load("model.onnx")
prepare = getattr(runner, "prepare", None)  # the runner contract: prepare(model)(inputs), else run(model, inputs)
outs = prepare(model)(FEEDS) if callable(prepare) else runner.run(model, FEEDS)
actual = {o.name: np.asarray(a) for o, a in zip(model.graph.output, outs)}
"""


def generic_template(name: str, identity: Mapping[str, Any]) -> Template:
    """The script template for a runner qconform has no template for (a vendor's own): the script
    loads that runner the way the report's run did (``identity["load"]``: its ``--runner`` spec,
    a file by its absolute path, and its ``--runner-opt`` words; ``RUNNER=`` overrides the spec)
    and calls it through the runner contract, arrays of types numpy lacks as ml_dtypes views."""
    load = identity.get("load") or {}
    spec, options = load.get("runner"), dict(load.get("options") or {})
    if not spec:
        raise ValueError(f"the report of {name!r} does not say how its runner was loaded (written by a qconform "
                         "older than this one): rerun it")
    version = str(identity.get("version") or "unknown")
    source = identity.get("source") or {}
    loader = f'''import importlib
import importlib.util
import sys

import onnx

RUNNER = os.environ.get("RUNNER", {spec!r})  # --runner of the run that found this (path/to/file.py:Attr)
OPTIONS = {options!r}  # its --runner-opt words


def load_runner(spec, options):
    """The runner object, loaded as qconform's --runner loads it."""
    target, _, attr = spec.rpartition(":")
    if target.endswith(".py") or "/" in target or "\\\\" in target:
        file_spec = importlib.util.spec_from_file_location("vendor_runner", target)
        module = importlib.util.module_from_spec(file_spec)
        sys.modules["vendor_runner"] = module
        file_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    obj = getattr(module, attr)
    return obj(**options) if isinstance(obj, type) or not hasattr(obj, "run") else obj


runner = load_runner(RUNNER, OPTIONS)'''
    return Template(
        name, str(source.get("path") or spec), loader, 'runner.describe().get("version", "unknown")',
        "FEEDS = inputs\n" + _GENERIC_RUN,
        codes=ml_dtype, codes_imports="import ml_dtypes  # a dependency of onnx",
        run_codes="FEEDS = {k: v.view(CODES[k]) if k in CODES else v for k, v in inputs.items()}\n" + _GENERIC_RUN
        + "actual = {k: a.view(f\"u{a.dtype.itemsize}\") if a.dtype == CODES.get(k) else a for k, a in actual.items()}\n",
        note=(f"The script loads the runner that produced the report ({spec}"
              + (f", SHA-256 {source['sha256'][:12]}…" if source.get("sha256") else "") + ") by its path and "
              "calls it as qconform does; `RUNNER=path/to/file.py:Attr python repro.py` points it elsewhere. "
              "The runner's own runtime must be installed, as for the run."),
        version_of=lambda: version, install="pip install numpy onnx ml_dtypes   # and what the runner itself imports")


def runtimes() -> list[str]:
    return list(TEMPLATES)


# ----------------------------------------------------------------------------------------------
# Groups
# ----------------------------------------------------------------------------------------------
@dataclass
class Group:
    runtime: str
    key: str  # the directory name under OUT/<runtime>/
    op_versions: str  # "QuantizeLinear-19 … -25" (a fact's) or "QuantizeLinear-23, -24" (observed)
    mechanism: str  # fact id, deviation model(s), "unexplained" or "error: <message>"
    candidates: list[str]  # case ids (or probe:NAME), smallest first
    does: str
    spec: str = ""  # markdown, links to semantics.md anchors as (#anchor)
    evidence: str = ""
    kind: str = FAIL  # erratum | must-reject (a fact's kind); fail | error (observed: the verdict)
    fact: str = ""  # fact id
    versions: str = ""  # the fact's version range
    platform: str = ""  # the fact's platform condition
    cases: int = 0  # failing cases in the group (0: not counted, a fact)
    case_ids: list[str] = field(default_factory=list)  # a few of them, for the README


def slug(text: str, limit: int = 72) -> str:
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")
    if len(s) > limit:
        s = s[:limit].rsplit("-", 1)[0]
    return s


def _case_slug(case_id: str) -> str:
    parts = case_id.split("/")
    return slug("-".join(parts[:2] + parts[3:]) if len(parts) == 4 else case_id)


def fact_groups(runtime: str, version: str) -> tuple[list[Group], list[tuple[str, str]]]:
    """The facts of a runtime that make findings and hold here, and (fact id, why not) for the others."""
    from qconform import facts
    from qconform import platform as plat
    from qconform.facts.probes import probe_case

    ff = facts.load(runtime)
    groups, skipped = [], []
    for f in ff.facts:
        if f.kind not in FACT_KINDS:
            continue
        if not f.holds_for(version):
            skipped.append((f.id, f"holds for {f.scope()}, not {runtime} {version}"))
            continue
        if not plat.condition_holds(f.platform):
            skipped.append((f.id, f"holds where {f.platform}; this machine is {plat.label()}"))
            continue
        case_id = probe_case(f.probe)[0].id if f.probe else f.example
        groups.append(Group(runtime, f"{f.id}-{_case_slug(case_id)}", f.op_versions, f.id, [f.example], f.does,
                            f.spec, f.evidence, f.kind, f.id, f.versions, f.platform))
    return groups, skipped


_ERROR_PREFIX = re.compile(r"^runner raised ")


def error_signature(problem: str) -> str:
    """A run's error without the numbers that vary between cases (shapes, sizes, addresses)."""
    first = _ERROR_PREFIX.sub("", problem.strip().splitlines()[0] if problem and problem.strip() else ERROR)
    first = re.sub(r"\d+", "#", first)
    return re.sub(r"[(\[][\s#,()\[\]]*[)\]]", "(…)", first)[:160]  # shapes: "((#, #), (#, #))" -> "(…)"


def mechanism_of(verdict: str, diagnosis: Sequence[str] | None, problem: str = "") -> str:
    if verdict != FAIL:
        return "error: " + error_signature(problem)
    return diagnosis[0] if diagnosis else "unexplained"


def _op_versions(ids: Iterable[str]) -> str:
    byop: dict[str, set[int]] = {}
    for cid in ids:
        head = cid.split("/", 1)[0]
        op, v = head.rsplit("-", 1)
        byop.setdefault(op, set()).add(int(v))
    return "; ".join(f"{op}-" + ", -".join(str(v) for v in sorted(vs)) for op, vs in sorted(byop.items()))


def _op_of(case_id: str) -> str:
    return case_id.split("/", 1)[0].rsplit("-", 1)[0]


def _mechanism_slug(mech: str) -> str:
    if not mech.startswith("error: "):
        return slug(mech)
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", mech[len("error: "):])
    return slug("error-" + "-".join(words), 56)


def _example_key(case, families: set[str]) -> tuple:
    """Which failing case of a group shows it best: one of the families the deviation model names
    (where its witness lives), without empty tensors (they show little, and some runtimes fold them
    away), the fewest elements."""
    empty = any(np.size(o) == 0 for o in case.expected) or any(a is not None and a.value.size == 0
                                                              for a in case.inputs)
    return (bool(families) and case.family not in families, empty, _size(case))


def _size(case) -> int:
    n = sum(int(a.value.size) for a in case.inputs if a is not None)
    return n + sum(int(np.size(o)) for o in case.expected)


def observed_groups(runtime: str, failures: Sequence[Mapping[str, Any]], cases: Mapping[str, Any]) -> list[Group]:
    """Failing cases grouped by (op, mechanism); ``failures``: report.json failure entries (id,
    verdict, problem, and ``diagnosis`` where the case was diagnosed); ``cases``: the corpus cases
    by id (for sizes). Keys are unique: a slug shared by two mechanisms gets a hash suffix."""
    from qconform.diagnosis.models import get

    members: dict[tuple[str, str], list[str]] = {}
    for f in failures:
        if f["id"] not in cases:
            continue
        mech = mechanism_of(f["verdict"], f.get("diagnosis"), f.get("problem", ""))
        members.setdefault((_op_of(f["id"]), mech), []).append(f["id"])
    keys: dict[str, list[tuple[str, str]]] = {}
    for op, mech in members:
        keys.setdefault(f"{op}-{_mechanism_slug(mech)}", []).append((op, mech))
    groups = []
    for key, owners in sorted(keys.items()):
        for op, mech in sorted(owners):
            ids = members[(op, mech)]
            k = key if len(owners) == 1 else f"{key}-{hashlib.sha256(mech.encode()).hexdigest()[:6]}"
            try:
                families = {f for name in mech.split("+") for f in get(name).families}
            except KeyError:
                families = set()
            ordered = sorted(ids, key=lambda i: (_example_key(cases[i], families), i))
            if mech.startswith("error: "):
                does, evidence, kind = f"the run raises `{mech[len('error: '):]}`", "", ERROR
            elif mech == "unexplained":
                does, evidence, kind = ("returns outputs that differ from the spec's; no deviation model of "
                                        "qconform/docs/diagnosis.md reproduces them"), "", FAIL
            else:
                try:
                    parts = [get(name) for name in mech.split("+")]
                except KeyError:
                    parts = []
                does = " ".join(p.explanation for p in parts) or mech
                evidence = " ".join(p.evidence for p in parts)
                kind = FAIL
            groups.append(Group(runtime, k, _op_versions(ids), mech, ordered, does, evidence=evidence, kind=kind,
                                cases=len(ids), case_ids=ordered[:5]))
    return groups


def load_report(path: Path, digest: str) -> tuple[str, list[dict], dict]:
    """(runner name, failure entries, runner identity) of a report.json written over the corpus with
    ``digest``."""
    path = Path(path)
    if path.is_dir():
        path = path / "report.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    got = data.get("corpus", {}).get("digest")
    if got != digest:
        raise ValueError(f"{path}: written over corpus {str(got)[:12]}, this corpus is {digest[:12]}: "
                         "rerun pytest --runner=NAME --report=DIR")
    from qconform.runner import runtime_name

    name = runtime_name(data["runner"])  # onnxruntime on an execution provider: that variant's name
    if "[" in name:
        raise ValueError(f"{path}: no script template for {name} (templates: {', '.join(TEMPLATES)})")
    return name, list(data.get("failures", ())), dict(data["runner"])


# ----------------------------------------------------------------------------------------------
# Running a case, and the files of a finding
# ----------------------------------------------------------------------------------------------
@dataclass
class Observation:
    verdict: str  # the engine's verdict (pass | fail | error | unsupported | info), or ran | rejected
    outputs: list[np.ndarray] | None
    message: str = ""
    diagnosis: list[str] | None = None  # a failure's deviation models, where the pipeline diagnoses


def case_of(ref: str, index) -> tuple[Any, bool]:
    """(the Case, whether it is a must-reject probe) for a case id or ``probe:NAME``."""
    from qconform.facts import PROBE
    from qconform.facts.probes import probe_case

    if ref.startswith(PROBE):
        return probe_case(ref[len(PROBE):])
    return index.case(ref), False


def observe(runner, case, must_reject: bool = False) -> Observation:
    """One case judged by the engine (``qconform.execution``), its outputs kept for the finding's
    files; a must-reject probe says whether the runner ran the invalid model. ``runner`` may be a
    ``Pipeline`` (one per runtime: prepared models are reused, failures diagnosed)."""
    import warnings

    from qconform.execution import Pipeline

    pipeline = runner if isinstance(runner, Pipeline) else Pipeline.local(runner, keep_outputs=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if must_reject:
            call, _ = pipeline.call(case)
            return Observation(Probe.of(call.kind), list(call.outputs) if call.kind == Call.OK else None, call.message)
        res = pipeline.judge(case)
    verdict = ERROR if res.verdict in FAULTS else res.verdict
    return Observation(verdict, res.outputs, res.record.problem or "", res.record.diagnosis)


def storable(arr: np.ndarray) -> tuple[np.ndarray, Any]:
    """(what the npz holds, the qconform element type when it is held as codes, else None)."""
    from qconform import adapt, dtypes

    arr = np.asarray(arr)
    t = dtypes.BY_DTYPE.get(arr.dtype)
    if t is None or t.onnx in adapt.NUMPY_NATIVE:
        return np.array(arr, order="C", copy=True), None
    return np.array(t.to_bits(arr), order="C", copy=True), t


def write_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """np.savez, but with a fixed member timestamp (np.savez stamps the current time)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, arr in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.array(arr, order="C", copy=True), allow_pickle=False)
            zf.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0)), member.getvalue())
    path.write_bytes(buf.getvalue())


def closest_reading(case, outputs: Sequence[np.ndarray] | None):
    """The case's permitted reading nearest to the runtime's outputs (``compare.closest``: fewest
    differing elements; the first reading on a tie, a structural difference or no outputs): what a
    finding shows as expected, so that a difference the spec permits (another reading) is never
    reported."""
    from qconform.compare import candidates, closest

    if outputs is None or len(case.readings) == 1:
        return case.readings[0]
    _, name = closest(candidates(case), outputs)
    return next((r for r in case.readings if r.name == name), case.readings[0])


def skip_mask(case, outputs: Sequence[np.ndarray] | None, reading=None) -> dict[str, np.ndarray]:
    """Per output, the elements the script does not compare: those the comparison rule excuses
    (``ElemType.excused``: don't-care, or both NaN) -- NaN only for the types numpy cannot hold,
    which the script compares as codes (numpy's own NaN compares as a value there)."""
    from qconform import dtypes
    from qconform.compare import masks

    out = {}
    chosen = reading or case.readings[0]
    for name, e, mask, a in zip(case.output_names, chosen.outputs, masks(case, chosen),
                                list(outputs or ()) + [None] * len(case.output_names)):
        t = dtypes.get(e.dtype)
        a = None if a is None else np.asarray(a)
        if a is not None and a.dtype == e.dtype and a.shape == np.shape(e) and t.onnx not in _native():
            m = t.excused(e, a, mask)
        else:
            m = np.zeros(np.shape(e), bool) if mask is None else np.array(mask, bool)
        if m.any():
            out[name] = m
    return out


def _native() -> frozenset[int]:
    from qconform import adapt

    return adapt.NUMPY_NATIVE


# ----------------------------------------------------------------------------------------------
# The script
# ----------------------------------------------------------------------------------------------
def _indent(text: str, n: int = 4) -> str:
    return "".join((" " * n + ln if ln.strip() else ln) for ln in text.splitlines(keepends=True))


def render_script(tpl: Template, title: str, coded: Mapping[str, Any], has_skip: bool,
                  must_reject: str = "") -> str:
    """repro.py for one finding. ``coded``: tensor name -> qconform ElemType of the arrays held as
    codes; ``must_reject``: why the model is invalid (the script then expects the runtime to refuse it)."""
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
    """Addresses and clock times out of a script's output (they differ from run to run)."""
    text = re.sub(r"0x[0-9a-fA-F]{8,}", "0x…", text)
    return re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?", "<time>", text)


def signature(line: str) -> str:
    """A verdict line without its numbers: the same deviation whatever the counts, source line
    numbers or shapes in the message (two versions of a runtime show the same finding so)."""
    return re.sub(r"\d+", "N", normalise(line))


# ----------------------------------------------------------------------------------------------
# The spec sentences
# ----------------------------------------------------------------------------------------------
def _section(text: str, anchor: str) -> str:
    start = text.find(f'<a id="{anchor}"></a>')
    if start < 0:
        return ""
    end = text.find("<a id=", start + 1)
    return text[start:end if end > 0 else len(text)]


#: Sections whose quotations are not the spec's words (the principles quote qconform's own docstrings).
NOT_QUOTED = ("principles",)


def quotations(anchor: str, text: str) -> list[str]:
    """The quotations (the spec's own words, ``>`` paragraphs) of a semantics.md section."""
    paras, block = [], []
    for ln in _section(text, anchor).splitlines():
        if ln.startswith(">"):
            block.append(ln)
        elif block:
            paras.append("\n".join(block))
            block = []
    if block:
        paras.append("\n".join(block))
    return paras


def _norm(text: str) -> str:
    return " ".join(re.sub(r"^>\s?", "", text, flags=re.MULTILINE).replace("`", "").replace("\\", "").split())


def spec_quotes(spec: str, clause: str, text: str | None = None, max_lines: int = 14) -> list[tuple[str, str]]:
    """(anchor, quotation) pairs for a README: the quotations of the sections ``spec`` links to (and
    the case's clause) that hold a sentence ``spec`` quotes; else the clause's first quotation."""
    text = SEMANTICS.read_text(encoding="utf-8") if text is None else text
    anchors = anchors_in(spec) + ([clause] if clause and clause not in anchors_in(spec) else [])
    wanted = []
    for q in re.findall(r'"([^"]{12,})"', spec):
        longest = max((p.strip(" .") for p in _norm(q).split("…")), key=len)
        if len(longest) >= 12:
            wanted.append(longest[:48])
    found: list[tuple[str, str]] = []
    for a in anchors:
        for para in quotations(a, text):
            if any(w in _norm(para) for w in wanted) and all(para != p for _, p in found):
                found.append((a, para))
    # no quoted sentence found: the first quotation of the first section that has one
    for a in (a for a in anchors if a not in NOT_QUOTED):
        if found:
            break
        found = [(a, p) for p in quotations(a, text)[:1]]
    out = []
    for a, para in found[:2]:
        lines = para.splitlines()
        out.append((a, "\n".join(lines[:max_lines] + (["> …"] if len(lines) > max_lines else []))))
    return out


def anchors_in(text: str) -> list[str]:
    seen: list[str] = []
    for a in re.findall(r"\(#([\w-]+)\)", text):
        if a not in seen:
            seen.append(a)
    return seen


# ----------------------------------------------------------------------------------------------
# Writing a finding
# ----------------------------------------------------------------------------------------------
def _semantics_link(directory: Path) -> str:
    if CHECKOUT and directory.resolve().is_relative_to(CHECKOUT):
        return Path(os.path.relpath(SEMANTICS, directory.resolve())).as_posix()
    return "qconform/docs/semantics.md"


def _docs_links(text: str, docs: str) -> str:
    """Links relative to qconform/docs (``](#anchor)`` into semantics.md, ``](diagnosis.md#x)``),
    made relative to a document at ``docs`` (the path from it to qconform/docs, '' for docs itself)."""
    text = re.sub(r"\]\(#([\w-]+)\)", lambda m: f"]({docs}semantics.md#{m[1]})", text)
    return re.sub(r"\]\(([\w-]+\.md)(#[\w-]+)?\)",
                  lambda m: f"]({docs}{m[1]}{m[2] or ''})" if (SEMANTICS.parent / m[1]).is_file() else m[0], text)


def _md(text: str, link: str) -> str:
    """One paragraph of a README, its docs links relative to the README (``link``: its semantics.md)."""
    return _docs_links(" ".join(text.split()), link[: -len("semantics.md")])


def _evidence_table(case, outputs, reading: str, limit: int = 8) -> list[str]:
    from qconform.compare import evidence

    if outputs is None:
        return []
    try:
        rows = evidence(case, outputs, reading)
    except Exception:  # noqa: BLE001 - a structural mismatch has no element rows
        return []
    if not rows:
        return []
    out = ["| output | index | inputs | expected | actual |", "|---|---|---|---|---|"]
    for r in rows[:limit]:
        out.append(f"| {r[0]} | [{r[1]}] | {r[2].replace('|', '/')} | {r[3]} ({r[4]}) | {r[5]} ({r[6]}) |")
    if len(rows) > limit:
        out.append(f"| … | | {len(rows) - limit} more | | |")
    return out


def _pip_line(tpl: Template, version: str) -> str:
    return tpl.install.format(version=version) if tpl.install else f"pip install {tpl.package}=={version} numpy"


def render_readme(g: Group, tpl: Template, case, version: str, platform_label: str, obs: Observation,
                  script_output: str, coded: Mapping[str, Any], link: str, seen_on: Sequence[str], reading) -> str:
    out = [f"# {_title(g, tpl)}", ""]
    does = _md(g.does, link)
    out += [f"**What {tpl.runtime} does.** {does[:1].upper() + does[1:]}", ""]
    if g.kind == "must-reject":
        out += ["**Expected.** The model is invalid (the spec below), so the runtime must refuse it.", ""]
    if g.spec:
        out += [f"**What the spec says.** {_md(g.spec, link)}", ""]
    quotes = spec_quotes(g.spec, case.clause)
    if quotes:
        out += ["The spec's words (as quoted in qconform's semantics document):" if g.spec else
                f"**What the spec says** ([{case.clause}]({link}#{case.clause})):", ""]
    for a, q in quotes:
        out += [q, f"> — [{a}]({link}#{a})", ""]
    if g.mechanism == "unexplained" and obs.outputs is not None:
        from qconform.diagnosis.diagnose import localise

        step = localise(case, obs.outputs, reading.name)
        if step:
            out += [f"**Where it differs.** {step[:1].upper() + step[1:]}.", ""]
    if len(case.readings) > 1 and g.kind != "must-reject":
        names = ", ".join(f"`{r.name}`" for r in case.readings)
        out += [(f"**Readings.** The text permits several results here ({names}); `expected.npz` holds "
                 f"`{reading.name}`, the one nearest to what {tpl.runtime} returned, and {tpl.runtime} matches none "
                 f"([readings]({link}#readings-index))."), ""]
    if not g.fact:
        out += [f"**qconform's diagnosis.** `{g.mechanism}`" + (
            " (a deviation model of qconform/docs/diagnosis.md that reproduces these outputs bit for bit)"
            if g.kind == FAIL and g.mechanism != "unexplained" else ""), ""]
    if g.evidence:
        out += [f"**Seen elsewhere.** {_md(g.evidence, link)}", ""]
    out += ["**Case.** `" + case.id + "` of the qconform corpus"
            + (f" (fact {g.fact}, versions `{g.versions or 'all'}`"
               + (f", platform `{g.platform}`" if g.platform else "") + ")" if g.fact else
               f"; {g.cases} failing case(s) in this group, e.g. " + ", ".join(f"`{c}`" for c in g.case_ids[:3])), ""]
    out += [f"**Seen on.** {tpl.package} " + ", ".join(seen_on) + f", {platform_label} "
            f"({sys.platform}); qconform {qconform.__version__}.", ""]
    out += ["**Run it.**", "", "```sh", f"python -m venv venv && venv/bin/{_pip_line(tpl, version)}",
            "venv/bin/python repro.py   # exit 1 and a MISMATCH line while the runtime deviates", "```", ""]
    if tpl.note:
        out += [tpl.note, ""]
    out += [f"Output with {tpl.runtime} {version}:", "", "```", script_output.rstrip("\n"), "```", ""]
    rows = _evidence_table(case, obs.outputs, reading.name) if g.kind != "must-reject" else []
    if rows:
        out += ["Elements that differ (values, then bits):", ""] + rows + [""]
    files = ["`model.onnx`: the single-node model", "`inputs.npz`: the graph inputs",
             "`expected.npz`: the outputs the spec gives"
             + (" (none: the model must be rejected)" if g.kind == "must-reject" else ""),
             "`actual.npz`: the outputs " + tpl.runtime + " returned" if obs.outputs is not None else
             "no `actual.npz`: the run raised (the output above)"]
    if coded:
        files.append("arrays of types numpy lacks hold one element code each (uint8, uint16 for bfloat16): "
                     + ", ".join(f"`{n}` is {t.name}" for n, t in coded.items()))
    out += ["**Files.** " + "; ".join(files) + ".", ""]
    return "\n".join(out).rstrip("\n") + "\n"


_DRIFT_DOES = re.compile(r"what qconform's deviation model `[^`]+` computes on every case of the group "
                         r"\(\[diagnosis\]\([^)]*\)\): (?:Your )?")


def _title(g: Group, tpl: Template) -> str:
    does = _DRIFT_DOES.sub("", " ".join(g.does.split()))  # a drift-written row: the model's own words
    first = re.split(r"(?<=[.;:])\s", does, maxsplit=1)[0].rstrip(".;:, ")
    first = re.sub(r"\]\(#[\w-]+\)", "]", first)
    if len(first) > 160:
        first = first[:160].rsplit(" ", 1)[0] + " …"
    return f"{tpl.runtime} {g.op_versions}: {first}".replace('"""', "'''").replace("\\", "/")


def _files_digest(directory: Path, names: Iterable[str]) -> str:
    h = hashlib.sha256()
    for n in names:
        p = directory / n
        h.update(n.encode() + b"\0" + (p.read_bytes() if p.is_file() else b"-") + b"\0")
    return h.hexdigest()


def write_finding(out: Path, g: Group, tpl: Template, case, obs: Observation, version: str,
                  must_reject: bool = False) -> tuple[Path | None, str, str]:
    """Write one finding directory (into ``out/<runtime>/<key>``) and run its script: (the directory,
    or None when the script did not show the runtime's deviation, the verdict line it printed or '',
    its whole output)."""
    from qconform import platform as plat
    from qconform.model import build_model

    final = out / g.runtime / g.key
    tmp = out / g.runtime / f".{g.key}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    model = build_model(case, check=False)
    (tmp / "model.onnx").write_bytes(model.SerializeToString())
    coded: dict[str, Any] = {}
    feeds = {}
    for name, arr in case.feeds.items():
        feeds[name], t = storable(arr)
        if t is not None:
            coded[name] = t
    write_npz(tmp / "inputs.npz", feeds)
    expected = {}
    reading = closest_reading(case, obs.outputs)
    for name, arr in zip(case.output_names, reading.outputs):
        expected[name], t = storable(arr)
        if t is not None:
            coded[name] = t
    if not must_reject:
        write_npz(tmp / "expected.npz", expected)
    else:
        write_npz(tmp / "expected.npz", {})
    if obs.outputs is not None:
        write_npz(tmp / "actual.npz", {n: storable(a)[0] for n, a in zip(case.output_names, obs.outputs)})
    skips = {} if must_reject else skip_mask(case, obs.outputs, reading)
    if skips:
        write_npz(tmp / "skip.npz", skips)
    reason = re.sub(r"\s*\(\[[\w-]+\]\(#[\w-]+\)\)", "", " ".join(g.spec.split())) or "see README.md"
    (tmp / "repro.py").write_text(render_script(tpl, _title(g, tpl), coded, bool(skips),
                                                reason if must_reject else ""), encoding="utf-8")
    outputs = set()  # each run's output, normalised
    for k in range(VERIFY_RUNS):
        rc, output = run_script(tmp, tpl)
        line = mark_line(output) if rc == 1 else ""
        if not _shows(line, obs):  # the script does not show what the runner saw: the old directory stays
            shutil.rmtree(tmp)
            if k:
                output += f"\n(run {k + 1} of {VERIFY_RUNS}: the runtime's outputs differ from run to run)"
            return None, line, output
        outputs.add(normalise(output))
    if len(outputs) > 1:  # the same mismatch line, other values: not a reproducer either
        shutil.rmtree(tmp)
        return None, "", f"{VERIFY_RUNS} runs printed different outputs: the runtime's outputs differ from run to run"
    data_files = ["model.onnx", "inputs.npz", "expected.npz", "actual.npz", "skip.npz", "repro.py"]
    seen_on, shown = [version], (version, normalise(output))
    old_meta = final / META
    if old_meta.is_file():
        try:
            old = json.loads(old_meta.read_text(encoding="utf-8"))
            if old.get("case") == case.id and old.get("data_sha256") == _files_digest(tmp, data_files) \
                    and signature(old.get("shows", "")) == signature(line):
                seen_on = sorted(set(old.get("seen_on", [])) | {version}, key=_version_key)
                if _version_key(old["output_version"]) > _version_key(version):  # the newest run's output stays
                    shown = (old["output_version"], old["output"])
                    line = old["shows"]
        except (ValueError, OSError, KeyError):
            pass
    label = plat.label()
    link = _semantics_link(final)
    (tmp / "README.md").write_text(render_readme(g, tpl, case, shown[0], label, obs, shown[1], coded, link,
                                                 seen_on, reading), encoding="utf-8")
    meta = {
        "format": FORMAT, "runtime": g.runtime, "key": g.key, "op_versions": g.op_versions,
        "mechanism": g.mechanism, "kind": g.kind, "fact": g.fact, "versions": g.versions, "platform": g.platform,
        "case": case.id, "clause": case.clause, "reading": reading.name,
        "readings": [r.name for r in case.readings], "does": " ".join(g.does.split()), "cases": g.cases,
        "package": tpl.package, "seen_on": seen_on, "platform_label": label,
        "verdict": obs.verdict,
        "shows": line, "data_sha256": _files_digest(tmp, data_files),
        "output_version": shown[0], "output": shown[1],
    }
    (tmp / META).write_text(json.dumps(meta, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    return final, line, output


def _version_key(v: str):
    from packaging.version import InvalidVersion, Version

    try:
        return (0, Version(v), v)
    except InvalidVersion:
        return (1, v, v)


# ----------------------------------------------------------------------------------------------
# One runtime
# ----------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    written: list[str] = field(default_factory=list)  # keys
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (group or fact, why)


def _disagrees(obs: Observation, g: Group, must_reject: bool) -> bool:
    """The runtime still deviates on this case the way the group says (wrong outputs, or an error)."""
    if must_reject:
        return obs.verdict == Probe.RAN
    if g.fact:
        return obs.verdict in (FAIL, ERROR)
    return obs.verdict == (ERROR if g.kind == ERROR else FAIL)


def _shows(line: str, obs: Observation) -> bool:
    """The script's verdict line shows what the runner saw: an error for an error, outputs otherwise."""
    return bool(line) and (("the run raised" in line) == (obs.outputs is None and obs.verdict == ERROR))


def generate(runtime: str, out: Path, *, failures: Sequence[Mapping[str, Any]] | None = None, rediagnose: bool = False,
             select: str | None = None, limit: int = 0, log: Callable[[str], None] = print,
             identity: Mapping[str, Any] | None = None) -> Outcome:
    """Write the findings of one runtime (see the module docstring); what was written and skipped.
    ``identity``: the report's runner identity, for a runner with no template of its own (loaded
    again from its ``load`` entry; the scripts load it the same way)."""
    from qconform import corpus
    from qconform.facts import SOURCES
    from qconform.runner import resolve

    if runtime in TEMPLATES:
        tpl, runner = TEMPLATES[runtime], resolve(runtime)
    else:
        tpl = generic_template(runtime, identity or {})
        load = (identity or {})["load"]
        runner = resolve(load["runner"], load.get("options"))
    version = tpl.installed_version()
    if version is None:
        raise RuntimeError(f"{runtime}: {tpl.package} is not installed here")
    index = corpus.index(corpus.DEFAULT_ROOT)
    runner = _pipeline(runner)
    outcome = Outcome()
    if runtime in SOURCES and runtime in TEMPLATES and failures is None:
        groups, skipped = fact_groups(runtime, version)
        outcome.skipped.extend(skipped)
    else:
        if failures is None:
            failures = run_corpus(runner, index, select, log)
        ids = {f["id"] for f in failures}
        failures = _diagnosed(runner, failures, index, log, rediagnose)
        cases = index.cases_of(ids)
        groups = observed_groups(runtime, failures, cases)
    if limit and len(groups) > limit:
        groups.sort(key=lambda g: (-g.cases, g.key))
        for g in groups[limit:]:
            outcome.skipped.append((g.key, f"over --max-per-runtime {limit} ({g.cases} failing case(s))"))
        groups = sorted(groups[:limit], key=lambda g: g.key)
    for g in groups:
        done = False
        why = "no candidate case"
        for ref in g.candidates[:TRIES]:
            case, must_reject = case_of(ref, index)
            obs = observe(runner, case, must_reject)
            if not _disagrees(obs, g, must_reject):
                why = f"{case.id}: {obs.verdict} here" + (f" ({obs.message.splitlines()[0]})" if obs.message else "")
                continue
            try:
                final, line, output = write_finding(out, g, tpl, case, obs, version, must_reject)
            except ValueError as exc:  # the template cannot carry a type
                why = f"{case.id}: {exc}"
                continue
            if final is not None:
                outcome.written.append(g.key)
                log(f"  {runtime}/{g.key}: {line}")
                done = True
                break
            tail = " | ".join(output.strip().splitlines()[-2:])
            why = f"{case.id}: repro.py did not show the mismatch: {tail[:300]}"
        if not done:
            outcome.skipped.append((g.key, why))
            log(f"  {runtime}/{g.key}: SKIPPED: {why}")
    return outcome


def _pipeline(runner):
    """The engine for one runtime's findings: outputs kept, every failure diagnosed."""
    from qconform.execution import Pipeline

    return runner if isinstance(runner, Pipeline) else Pipeline.local(runner, diagnose=True, keep_outputs=True)


def run_corpus(runner, index, select: str | None, log: Callable[[str], None]) -> list[dict]:
    """The failing cases of a runner over the corpus (``select``: fnmatch over case ids), diagnosed."""
    pipeline = _pipeline(runner)
    failures = []
    refs = [r for r in index.refs if not select or fnmatchcase(r.id, select)]
    log(f"  running {len(refs)} case(s)")
    for cid, case in sorted(index.cases_of([r.id for r in refs]).items()):
        obs = observe(pipeline, case)
        if obs.verdict == FAIL:
            failures.append({"id": cid, "verdict": FAIL, "diagnosis": obs.diagnosis or [], "problem": obs.message})
        elif obs.verdict == ERROR:
            failures.append({"id": cid, "verdict": ERROR, "problem": obs.message})
    return failures


def _diagnosed(runner, failures: Sequence[Mapping[str, Any]], index, log, rediagnose: bool = False) -> list[dict]:
    """The failures, each failing one with a diagnosis (run and diagnosed here where the report has
    none; with ``rediagnose`` also where it named no model: a report made before a model existed)."""
    pipeline = _pipeline(runner)
    out = []
    todo = [f["id"] for f in failures if f["verdict"] == FAIL
            and (f.get("diagnosis") is None or (rediagnose and not f["diagnosis"]))]
    cases = index.cases_of(todo) if todo else {}
    if todo:
        log(f"  diagnosing {len(todo)} failing case(s) the report left undiagnosed"
            + (" or unnamed" if rediagnose else ""))
    for f in failures:
        f = dict(f)
        if f["id"] in cases:
            obs = observe(pipeline, cases[f["id"]])
            f["diagnosis"] = (obs.diagnosis or []) if obs.outputs else []
        out.append(f)
    return out


# ----------------------------------------------------------------------------------------------
# The index
# ----------------------------------------------------------------------------------------------
def load_status(out: Path) -> dict[str, str]:
    p = out / STATUS
    if not p.is_file():
        return {}
    return {str(k): str(v) for k, v in tomllib.loads(p.read_text(encoding="utf-8")).items()}


STATUS_HEADER = """\
# Status of each finding in index.md, by "runtime/key" (the directory under this folder).
# Values: "new", "reported <url>", "fixed in <version>". Hand-edited; `qconform findings` keeps it.
# A finding missing here is "new", or "fixed in X" when its fact's range is closed (versions = "<X").
# Example:
# "onnxruntime/E24-QuantizeLinear-19-float32-float8e4m3fn-zero-point-1" = "reported https://github.com/..."
"""


def auto_status(versions: str) -> str:
    """``fixed in X`` for a fact whose range ends below X (``<X``, possibly with a lower bound)."""
    from packaging.specifiers import SpecifierSet

    if not versions.strip():
        return "new"
    uppers = [s.version for s in SpecifierSet(versions) if s.operator == "<"]
    return f"fixed in {uppers[0]}" if len(uppers) == 1 else "new"


def status_of(meta: Mapping[str, Any], status: Mapping[str, str]) -> str:
    key = f"{meta['runtime']}/{meta['key']}"
    if key in status:
        return status[key]
    return auto_status(meta.get("versions", "")) if meta.get("fact") else "new"


def _cell(text: str, limit: int = 0) -> str:
    t = " ".join(str(text).split()).replace("|", "\\|")
    t = _docs_links(t, "../")
    if limit and len(t) > limit:
        t = t[:limit].rsplit(" ", 1)[0] + " …"
    return t


def _status_cell(s: str) -> str:
    m = re.match(r"^reported\s+(\S+)$", s)
    return f"reported ([link]({m[1]}))" if m else _cell(s)


def render_index(out: Path) -> str:
    from qconform import facts as facts_mod

    status = load_status(out)
    metas = []
    for p in sorted(out.glob(f"*/*/{META}")):
        metas.append(json.loads(p.read_text(encoding="utf-8")))
    order = {n: i for i, n in enumerate(TEMPLATES)}
    metas.sort(key=lambda m: (order.get(m["runtime"], len(order)), m["runtime"],
                              int(m["fact"][1:]) if m.get("fact") else 0, m["key"]))
    lines = ["# Findings: upstream-ready reproducers", "", (
             "Generated by `qconform findings` (qconform/apps/findings.py); do not edit by hand except "
             "[status.toml](status.toml). One directory per deviation group of a runtime: the model, inputs, "
             "expected and actual outputs, a standalone `repro.py` using only that runtime and numpy (exit 1 "
             "and a `MISMATCH` line while the runtime deviates), and a README with the spec sentence. "
             "onnxruntime and onnx.reference: one finding per fact (`qconform/facts/*.toml`, kinds erratum "
             "and must-reject); other runtimes: failing cases grouped by op and deviation model "
             "(`unexplained` when no model reproduces them, `error: …` when the run raised)."), ""]
    counts: dict[str, int] = {}
    for m in metas:
        counts[m["runtime"]] = counts.get(m["runtime"], 0) + 1
    lines += ["| runtime | findings | seen on |", "|---|---|---|"]
    for rt in sorted(counts, key=lambda r: (order.get(r, len(order)), r)):
        seen = sorted({v for m in metas if m["runtime"] == rt for v in m["seen_on"]}, key=_version_key)
        lines.append(f"| {rt} | {counts[rt]} | {', '.join(seen)} |")
    lines += ["", "| runtime | finding | op-version | case | what it does | seen on | status |",
              "|---|---|---|---|---|---|---|"]
    for m in metas:
        name = m["fact"] or m["mechanism"]
        lines.append("| " + " | ".join([
            m["runtime"], f"[{_cell(name, 60)}]({m['runtime']}/{m['key']}/)", _cell(m["op_versions"], 80),
            f"`{m['case']}`" + (f" ({m['cases']} failing)" if m.get("cases") else ""), _cell(m["does"], 220),
            ", ".join(m["seen_on"]), _status_cell(status_of(m, status))]) + " |")
    # facts with no directory, for the runtimes whose findings come from their facts: why (another
    # version, another platform). A runtime whose findings come from a report is not listed.
    have = {(m["runtime"], m["fact"]) for m in metas if m["fact"]}
    from_facts = {rt for rt, _ in have}
    missing = []
    for source in (s for s in TEMPLATES if s in facts_mod.SOURCES and s in from_facts):
        for f in facts_mod.load(source).facts:
            if f.kind in FACT_KINDS and (source, f.id) not in have:
                missing.append(f)
    if missing:
        lines += ["", ("Facts with no reproducer here (generate them where they hold: "
                       "`qconform findings --runners NAME` with that version or on that platform):"), "",
                  "| runtime | fact | scope | op-version | what it does | status |", "|---|---|---|---|---|---|"]
        for f in missing:
            where = f"`{f.versions or 'all versions'}`" + (f" where `{f.platform}`" if f.platform else "")
            lines.append(f"| {f.source} | {f.id} | {where} | {_cell(f.op_versions, 80)} | {_cell(f.does, 220)} | "
                         f"{_status_cell(auto_status(f.versions))} |")
    return "\n".join(lines).rstrip("\n") + "\n"


def write_index(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    if not (out / STATUS).is_file():
        (out / STATUS).write_text(STATUS_HEADER, encoding="utf-8")
    (out / INDEX).write_text(render_index(out), encoding="utf-8")
    return out / INDEX


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------
def add_arguments(p) -> None:
    p.add_argument("--runners", metavar="A,B", default=None,
                   help=f"runtimes (default: the installed ones of {', '.join(TEMPLATES)} that have facts, plus "
                        "every runner a --from-report names)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="output folder (default: qconform/docs/findings in a source checkout)")
    p.add_argument("--from-report", metavar="REPORT", action="append", default=[],
                   help="report.json (or its directory) of pytest --runner=NAME --report=DIR: the failing cases "
                        "of NAME come from it instead of a run; repeatable (several reports of one runner, e.g. "
                        "-m slices, are merged)")
    p.add_argument("--cases", metavar="GLOB", default=None,
                   help="without a report: run only the corpus cases whose id matches (fnmatch)")
    p.add_argument("--max-per-runtime", type=int, default=0, metavar="N",
                   help="at most N findings per runtime, the groups with the most failing cases (0: all)")
    p.add_argument("--rediagnose", action="store_true",
                   help="with --from-report: run and diagnose again the failing cases the report names no "
                        "model for (a report older than this checkout's models)")
    p.add_argument("--clean", action="store_true", help="remove the runtimes' existing directories first")
    p.add_argument("--index-only", action="store_true", help="only rewrite index.md from the directories")


def main(args) -> int:
    from qconform import corpus
    from qconform.facts import SOURCES

    out = Path(args.out) if args.out else default_out()
    if args.index_only:
        print(f"wrote {write_index(out)}")
        return 0
    digest = corpus.verify(corpus.DEFAULT_ROOT)
    reports: dict[str, list[dict]] = {}
    identities: dict[str, dict] = {}
    for r in args.from_report:
        try:
            name, failures, identities[name] = load_report(Path(r), digest)
        except (OSError, ValueError, KeyError) as exc:
            print(f"qconform: {exc}", file=sys.stderr)
            return 2
        seen = {f["id"] for f in reports.get(name, ())}
        reports.setdefault(name, []).extend(f for f in failures if f["id"] not in seen)  # slices of one runner
    if args.runners:
        names = [n.strip() for n in args.runners.split(",") if n.strip()]
    elif reports:  # the runtimes of the reports given, and only those
        names = list(reports)
    else:
        names = [n for n in TEMPLATES if n in SOURCES and TEMPLATES[n].installed_version()]
    templates: dict[str, Template] = {}
    for n in names:
        if n not in TEMPLATES and n not in identities:
            print(f"qconform: {n}: no script template and no report of it: give its report (--from-report "
                  f"DIR/report.json, which says how to load its runner); templates exist for "
                  f"{', '.join(TEMPLATES)}", file=sys.stderr)
            return 2
        try:
            templates[n] = TEMPLATES[n] if n in TEMPLATES else generic_template(n, identities[n])
        except ValueError as exc:
            print(f"qconform: {exc}", file=sys.stderr)
            return 2
    status = 0
    for name in names:
        tpl = templates[name]
        version = tpl.installed_version()
        if version is None:
            print(f"qconform: {name}: {tpl.package} is not installed here; skipped", file=sys.stderr)
            status = 1
            continue
        print(f"{name} {version}:")
        if args.clean and (out / name).exists():
            shutil.rmtree(out / name)
        try:
            res = generate(name, out, failures=reports.get(name), select=args.cases, limit=args.max_per_runtime,
                           rediagnose=args.rediagnose, identity=identities.get(name))
        except Exception as exc:  # noqa: BLE001 - one runtime failing must not lose the others
            print(f"qconform: {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
            status = 1
            continue
        print(f"  {len(res.written)} finding(s) written, {len(res.skipped)} skipped")
        for key, why in res.skipped:
            print(f"    skipped {key}: {why}")
    print(f"wrote {write_index(out)}")
    return status


__all__ = ["TEMPLATES", "Group", "Template", "add_arguments", "default_out", "fact_groups", "generate", "main",
           "observed_groups", "render_index", "render_script", "runtimes", "write_index"]

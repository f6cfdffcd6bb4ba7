"""The only reader and writer of ``qconform/golden/``.

Layout (FORMAT_VERSION 3):
  qconform/golden/MANIFEST               sha256 of every file, then the corpus digest (sha256 of the manifest lines)
  qconform/golden/index/<group>.jsonl    one line per case: id (op-version/types/family/name), clause, attributes,
                                inputs as "name:type[shape]=sha" ("*" after the name: an initializer),
                                outputs as "name:type[shape]", readings {name: [sha per output]},
                                don't-care counts {reading: [count per output]}, provenance, note
  qconform/golden/data/<group>.pb        an onnx.SequenceProto of TensorProtos named "<id>|<role>|<name>"
  qconform/golden/sweeps/<sweep>.json    per-chunk SHA-256 digests of exhaustive sweeps (qconform/sweep.py)
Tensors are ONNX TensorProto (the native encoding of every type, sub-byte packing included), so any
ONNX tool reads them without qconform; nothing is pickled. Serialisation is deterministic, so the
same cases give the same bytes on every machine.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Container, Iterable, Mapping

import numpy as np
import onnx
from onnx import numpy_helper

from qconform import dtypes
from qconform.case import Arg, Case, Draft, Node, Reading

#: 3: each reading carries its own don't-care masks (2: one set of masks for the whole case).
FORMAT_VERSION = 3
#: The corpus shipped with qconform (package data beside this module).
DEFAULT_ROOT = Path(__file__).resolve().parent / "golden"
MANIFEST = "MANIFEST"
HASHED = ("index", "data", "sweeps")  # every file below these is in the MANIFEST


class CorpusError(Exception):
    """The golden corpus is missing, changed or malformed: one line naming the file."""


def _tensor_sha(t: str, arr: np.ndarray) -> str:
    et = dtypes.get(t)
    h = hashlib.sha256(f"{et.name}{list(arr.shape)}".encode())
    h.update(np.ascontiguousarray(et.to_bits(arr)).tobytes())
    return h.hexdigest()[:16]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tensor(name: str, arr: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.ascontiguousarray(arr).reshape(np.shape(arr)), name)  # keep rank 0


def _counts(reading: Reading) -> list[int]:
    """How many elements of each output the reading leaves undefined."""
    return [0 if m is None else int(np.count_nonzero(m)) for m in reading.dont_care]


def _index_line(case: Case) -> dict:
    d = case.draft
    line = {
        "id": case.id,
        "clause": case.clause,
        "attrs": dict(sorted(d.attrs.items())),
        "inputs": [None if a is None else
                   f"{a.name}{'*' if a.initializer else ''}:{a.type}{list(a.value.shape)}={_tensor_sha(a.type, a.value)}"
                   for a in d.inputs],
        "outputs": [f"{n}:{t}{list(e.shape)}" for n, t, e in zip(case.output_names, case.output_types, case.expected)],
        "readings": {r.name: [_tensor_sha(t, o) for t, o in zip(case.output_types, r.outputs)]
                     for r in case.readings},
        "dont_care": {r.name: _counts(r) for r in case.readings},
    }
    if d.graph:
        line["graph"] = [{"op": n.op, "in": list(n.inputs), "out": list(n.outputs),
                          **({"attrs": dict(sorted(n.attrs.items()))} if n.attrs else {}),
                          **({"domain": n.domain} if n.domain else {})} for n in d.graph]
    if d.provenance and d.provenance != f"{d.family}:{case.group}":
        line["provenance"] = d.provenance
    if d.note:
        line["note"] = d.note
    if case.information:
        line["information"] = case.information
    return line


_ID = re.compile(r"^(?:(?P<domain>[\w.]+)\.)?(?P<op>[A-Za-z]+)-(?P<opset>\d+)/(?P<types>[^/]+)/(?P<family>[^/]+)/(?P<name>.+)$")
_ARG = re.compile(r"^(?P<name>\w+)(?P<init>\*?):(?P<type>\w+)\[[\d, ]*\]=[0-9a-f]+$")
_OUT = re.compile(r"^(?P<name>\w+):(?P<type>\w+)\[[\d, ]*\]$")


def write(cases: Iterable[Case], root: Path) -> str:
    """Write the corpus; returns the corpus digest. Existing golden files are replaced."""
    root = Path(root)
    groups: dict[str, list[Case]] = defaultdict(list)
    for c in cases:
        groups[c.group].append(c)
    ids = [c.id for g in groups.values() for c in g]
    if len(ids) != len(set(ids)):
        dup = sorted({i for i in ids if ids.count(i) > 1})[:5]
        raise CorpusError(f"duplicate case ids: {dup}")
    for sub in ("index", "data"):
        (root / sub).mkdir(parents=True, exist_ok=True)
        for old in (root / sub).iterdir():
            old.unlink()
    for group, gcases in sorted(groups.items()):
        gcases.sort(key=lambda c: c.id)
        seq = onnx.SequenceProto(name=group, elem_type=onnx.SequenceProto.TENSOR)
        lines = []
        for c in gcases:
            for a in c.inputs:
                if a is not None:
                    seq.tensor_values.append(_tensor(f"{c.id}|in|{a.name}", a.value))
            for r in c.readings:
                for n, o in zip(c.output_names, r.outputs):
                    seq.tensor_values.append(_tensor(f"{c.id}|out.{r.name}|{n}", o))
                for n, m in zip(c.output_names, r.dont_care):
                    if m is not None:
                        seq.tensor_values.append(_tensor(f"{c.id}|dont_care.{r.name}|{n}", m))
            lines.append(json.dumps(_index_line(c), sort_keys=False, separators=(",", ":")))
        (root / "data" / f"{group}.pb").write_bytes(seq.SerializeToString(deterministic=True))
        (root / "index" / f"{group}.jsonl").write_text("\n".join(lines) + "\n")
    return write_manifest(root)


def _manifest_lines(root: Path) -> list[str]:
    files = sorted(p for sub in HASHED for p in (root / sub).glob("*") if p.is_file())
    return [f"{_sha256(p)}  {p.relative_to(root).as_posix()}" for p in files]


def write_manifest(root: Path) -> str:
    lines = _manifest_lines(root)
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
    text = [f"qconform-corpus format {FORMAT_VERSION}", *lines, f"corpus-digest {digest}"]
    (root / MANIFEST).write_text("\n".join(text) + "\n")
    return digest


def verify(root: Path) -> str:
    """Check every byte against the MANIFEST; returns the corpus digest or raises CorpusError."""
    root = Path(root)
    mpath = root / MANIFEST
    if not mpath.is_file():
        raise CorpusError(f"golden corpus missing: no {mpath} (run `qconform golden regen`)")
    text = mpath.read_text().splitlines()
    if not text or text[0] != f"qconform-corpus format {FORMAT_VERSION}":
        raise CorpusError(f"{mpath}: unknown format line {text[:1]}; expected format {FORMAT_VERSION}")
    listed = {}
    for line in text[1:-1]:
        sha, _, rel = line.partition("  ")
        listed[rel] = sha
    for rel, sha in listed.items():
        p = root / rel
        if not p.is_file():
            raise CorpusError(f"golden file missing: {p} (listed in {mpath})")
        if _sha256(p) != sha:
            raise CorpusError(f"golden file changed: {p} does not match its SHA-256 in {mpath}")
    present = {p.relative_to(root).as_posix() for sub in HASHED for p in (root / sub).glob("*")}
    extra = sorted(present - set(listed))
    if extra:
        raise CorpusError(f"golden file not in {mpath}: {root / extra[0]}")
    digest = hashlib.sha256("\n".join(f"{listed[r]}  {r}" for r in sorted(listed)).encode()).hexdigest()
    if text[-1] != f"corpus-digest {digest}":
        raise CorpusError(f"{mpath}: corpus digest line does not match its file lines")
    return digest


def manifest_digest(root: Path) -> str | None:
    """The corpus digest ``root``'s MANIFEST states, checked against its own lines but not against the
    files (``verify`` reads every byte): a cheap name for a corpus, e.g. the bundled one a certificate
    compares its run's corpus with. None where there is no such MANIFEST."""
    try:
        text = (Path(root) / MANIFEST).read_text().splitlines()
    except OSError:
        return None
    if len(text) < 2 or text[0] != f"qconform-corpus format {FORMAT_VERSION}":
        return None
    lines = sorted(text[1:-1], key=lambda line: line.partition("  ")[2])
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
    return digest if text[-1] == f"corpus-digest {digest}" else None


@dataclass(frozen=True)
class Corpus:
    root: Path
    digest: str
    cases: tuple[Case, ...]


def _case_from(line: dict, tensors: dict[str, np.ndarray], where: str) -> Case:
    cid = line["id"]
    m = _ID.match(cid)
    if not m:
        raise CorpusError(f"{where}: malformed case id {cid!r}")

    def get(key: str) -> np.ndarray:
        try:
            return tensors[key]
        except KeyError:
            raise CorpusError(f"{where}: case {cid} has no tensor {key!r}") from None

    def arg(text: str) -> Arg:
        a = _ARG.match(text)
        if not a:
            raise CorpusError(f"{where}: malformed input {text!r}")
        return Arg(a["name"], a["type"], get(f"{cid}|in|{a['name']}"), bool(a["init"]))

    inputs = tuple(None if a is None else arg(a) for a in line["inputs"])
    outs = [_OUT.match(o) for o in line["outputs"]]
    if not all(outs):
        raise CorpusError(f"{where}: malformed outputs {line['outputs']!r}")
    names = tuple(o["name"] for o in outs)
    counts = line["dont_care"]
    if set(counts) != set(line["readings"]):
        raise CorpusError(f"{where}: case {cid}: don't-care counts name readings {sorted(counts)}, "
                          f"not {sorted(line['readings'])}")
    readings = tuple(Reading(r, tuple(get(f"{cid}|out.{r}|{n}") for n in names),
                             tuple(get(f"{cid}|dont_care.{r}|{n}") if k else None for n, k in zip(names, counts[r])))
                     for r in line["readings"])
    group = f"{m['domain']}.{m['op']}-{m['opset']}" if m["domain"] else f"{m['op']}-{m['opset']}"
    draft = Draft(op=m["op"], opset=int(m["opset"]), types=m["types"], family=m["family"], name=m["name"],
                  inputs=inputs, attrs=line["attrs"], domain=m["domain"] or "", clause=line["clause"],
                  provenance=line.get("provenance", f"{m['family']}:{group}"), note=line.get("note", ""),
                  graph=tuple(Node(n["op"], tuple(n["in"]), tuple(n["out"]), n.get("attrs", {}), n.get("domain", ""))
                              for n in line.get("graph", ())))
    case = Case(draft, names, readings, line["clause"], line.get("information", ""))
    if case.output_types != tuple(o["type"] for o in outs):
        raise CorpusError(f"{where}: case {cid}: output types differ from the index line")
    return case


def _to_array(t: onnx.TensorProto) -> np.ndarray:
    """``numpy_helper.to_array(t)``, with its raw-bytes path for unpacked types taken directly
    (a read-only view of the bytes, as there): reading the corpus is a fifth of a run's own time."""
    dt = dtypes.PLAIN_CODES.get(t.data_type)
    if dt is not None and t.HasField("raw_data"):
        arr = np.frombuffer(t.raw_data, dtype=dt)
        dims = tuple(t.dims)  # (reshaping by the repeated field itself costs more than the rest)
        return arr if len(dims) == 1 and dims[0] == arr.size else arr.reshape(dims)
    return numpy_helper.to_array(t)


class _Tensors(dict):
    """A group file's tensors by name, each turned into an array on first use: a report that needs a
    few cases of a group (``Index.cases_of``) converts only theirs."""

    def __init__(self, protos: Mapping[str, onnx.TensorProto]) -> None:
        super().__init__()
        self.protos = protos

    def __missing__(self, key: str) -> np.ndarray:
        arr = self[key] = _to_array(self.protos[key])
        return arr


class _GroupFile:
    """One group file pair (index/<group>.jsonl, data/<group>.pb) read once, each case built from its
    index line and tensors on first use: a runner's worker handed a run of 512 cases of a group of
    4,000 builds those, not the group (with two workers, both are handed runs of the big groups)."""

    def __init__(self, root: Path, group: str) -> None:
        self.index = root / "index" / f"{group}.jsonl"
        data = root / "data" / f"{group}.pb"
        seq = onnx.SequenceProto()
        try:
            seq.ParseFromString(data.read_bytes())
            self.tensors = _Tensors({t.name: t for t in seq.tensor_values})
        except Exception as exc:
            raise CorpusError(f"golden file unreadable: {data}: {exc}") from None
        #: every line by case id (None: a line whose id is only known once parsed), in file order
        self.lines: dict[str | None, list[tuple[int, str]]] = {}
        for n, raw in enumerate(self.index.read_text().splitlines(), 1):
            self.lines.setdefault(_line_id(raw), []).append((n, raw))
        self.built: dict[str, Case] = {}

    def _build(self, n: int, raw: str) -> Case:
        try:
            return _case_from(json.loads(raw), self.tensors, f"{self.index}:{n}")
        except CorpusError:
            raise
        except Exception as exc:
            raise CorpusError(f"golden index malformed: {self.index}:{n}: {type(exc).__name__}: {exc}") from None

    def case(self, case_id: str) -> Case | None:
        """The case with this id (None: no such line), built once."""
        if case_id not in self.built:
            if case_id in self.lines:
                self.built[case_id] = self._build(*self.lines[case_id][0])
            elif None in self.lines:  # lines not written by the writer: parse them to find it
                self.built.update((c.id, c) for c in self.cases())
        return self.built.get(case_id)

    def cases(self, only: Container[str] | None = None) -> list[Case]:
        """Every case in file order, or those whose id is in ``only`` (lines whose id is known first
        and not in ``only`` are not parsed, their tensors not converted)."""
        lines = sorted((n, raw, cid) for cid, found in self.lines.items() for n, raw in found
                       if only is None or cid is None or cid in only)
        return [self.built[cid] if cid is not None and cid in self.built else self._build(n, raw)
                for n, raw, cid in lines]


def _group_cases(root: Path, group: str, only: Container[str] | None = None) -> list[Case]:
    """Every case of one group file pair, or those whose id is in ``only``."""
    return _GroupFile(root, group).cases(only)


def _line_id(raw: str) -> str | None:
    """The id of an index line without parsing the rest (the writer puts it first: ``{"id":"..."``);
    None where the line is not so (it is then parsed, and judged, in full)."""
    if raw.startswith('{"id":"'):
        end = raw.find('"', 7)
        if end > 7 and "\\" not in raw[7:end]:
            return raw[7:end]
    return None


def load(root: Path) -> Corpus:
    """Verify, then read every case. Raises CorpusError naming the file at fault."""
    root = Path(root)
    digest = verify(root)
    cases = []
    for index in sorted((root / "index").glob("*.jsonl")):
        cases.extend(_group_cases(root, index.stem))
    return Corpus(root, digest, tuple(cases))


# ----------------------------------------------------------------------------------------------
# The index alone, and cases group by group: what a run needs, when it needs it
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CaseRef:
    """A case as its index line describes it: enough to collect, select, name and report it,
    without its tensors (a whole-corpus run would otherwise hold every tensor in every process)."""

    id: str
    domain: str
    op: str
    opset: int
    types: str
    family: str
    name: str
    clause: str
    output_names: tuple[str, ...]
    output_types: tuple[str, ...]
    readings: int

    @property
    def group(self) -> str:
        return f"{self.domain}.{self.op}-{self.opset}" if self.domain else f"{self.op}-{self.opset}"


def _ref(line: dict, where: str) -> CaseRef:
    cid = line["id"]
    m = _ID.match(cid)
    if not m:
        raise CorpusError(f"{where}: malformed case id {cid!r}")
    outs = [_OUT.match(o) for o in line["outputs"]]
    if not all(outs):
        raise CorpusError(f"{where}: malformed outputs {line['outputs']!r}")
    return CaseRef(cid, m["domain"] or "", m["op"], int(m["opset"]), m["types"], m["family"], m["name"],
                   line["clause"], tuple(o["name"] for o in outs), tuple(o["type"] for o in outs),
                   len(line["readings"]))


def group_of(case_id: str) -> str:
    """The group (file pair) a case id lives in: ``QuantizeLinear-21``, ``com.microsoft.QuantizeLinear-1``."""
    return case_id.split("/", 1)[0]


class Groups:
    """Cases loaded group by group on first use, the latest few kept: what a runner's worker needs
    (it never reads the whole index, and the controller verified the corpus before starting it)."""

    KEEP = 4

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._groups: dict[str, _GroupFile] = {}

    def _group(self, group: str) -> _GroupFile:
        if group not in self._groups:
            if len(self._groups) >= self.KEEP:
                self._groups.pop(next(iter(self._groups)))
            if not (self.root / "index" / f"{group}.jsonl").is_file():
                raise KeyError(f"no group {group!r} in the corpus at {self.root}")
            self._groups[group] = _GroupFile(self.root, group)
        return self._groups[group]

    def case(self, case_id: str) -> Case:
        case = self._group(group_of(case_id)).case(case_id)
        if case is None:
            raise KeyError(f"no case {case_id!r} in the corpus at {self.root}")
        return case


class Index:
    """A verified corpus read lazily: every case's ``CaseRef`` at once (the index files), the cases
    themselves group by group on first use (``case``, ``cases_of``)."""

    def __init__(self, root: Path, digest: str, refs: tuple[CaseRef, ...]) -> None:
        self.root, self.digest, self.refs = Path(root), digest, refs
        self.by_id = {r.id: r for r in refs}
        self.groups = Groups(root)

    def __len__(self) -> int:
        return len(self.refs)

    def case(self, case_id: str) -> Case:
        return self.groups.case(case_id)

    def cases_of(self, ids) -> dict[str, Case]:
        """The named cases (those in the corpus), loading each group once."""
        by_group: dict[str, list[str]] = defaultdict(list)
        for cid in ids:
            if cid in self.by_id:
                by_group[self.by_id[cid].group].append(cid)
        out: dict[str, Case] = {}
        for group, cids in by_group.items():
            cases = {c.id: c for c in _group_cases(self.root, group, set(cids))}
            out.update((cid, cases[cid]) for cid in cids)
        return out

    @property
    def cases(self) -> tuple[Case, ...]:
        """Every case (reads every group: for the few consumers that really need them all)."""
        return load(self.root).cases


def index(root: Path, digest: str | None = None) -> Index:
    """Verify the corpus against its MANIFEST and read the index files (no tensors); ``digest``:
    what ``verify(root)`` returned to the caller a moment before (not hashed again)."""
    root = Path(root)
    digest = digest or verify(root)
    refs = []
    for path in sorted((root / "index").glob("*.jsonl")):
        for n, raw in enumerate(path.read_text().splitlines(), 1):
            try:
                refs.append(_ref(json.loads(raw), f"{path}:{n}"))
            except CorpusError:
                raise
            except Exception as exc:
                raise CorpusError(f"golden index malformed: {path}:{n}: {type(exc).__name__}: {exc}") from None
    return Index(root, digest, tuple(refs))


def case_pattern(text: str) -> str:
    """A case id as the user pasted it: the id itself, a glob, or pytest's node id
    (``path/to/MANIFEST::ID``, from any checkout or site-packages)."""
    return text.strip().rsplit("::", 1)[-1].strip("'\"")

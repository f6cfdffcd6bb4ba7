"""What qconform knows about other software: versioned, platform-keyed facts, stored as data.

One TOML file per *source* (``onnxruntime.toml``, ``onnx-reference.toml``, ``onnx-node-tests.toml``,
``ml_dtypes.toml``) beside this module. Each fact (an *errata row*) says what the source does where
it differs from qconform/docs/semantics.md, for which versions of the source (a PEP 440 specifier set over the
source's own version) and on which platforms (a condition over CPU features, see
``qconform.platform``). ``measured`` lists the versions and platforms on which the file was
checked complete: the project's tests assert facts only there, in both directions (every
disagreement is in a fact, every fact still shows), and skip naming ``qconform facts drift``
elsewhere. The drift command (``qconform.apps.facts_drift``) proposes the rows to add, close or
re-bound when a source releases; ``qconform/docs/facts.md`` is rendered from these files.

Kinds (what a fact's example must show):

* ``erratum``     the source contradicts the text: the example fails (or errors) in the default profile.
* ``reading``     the source follows a permitted non-first reading (qconform/docs/semantics.md#readings-index):
                  the example passes the default profile with that reading and fails ``--profile=strict``.
* ``oracle-gap``  the source does what qconform/docs/semantics.md permits but the corpus does not say so yet:
                  the example fails the default profile until qconform is fixed.
* ``unsupported`` the runner reports Unsupported, with a reason matching ``message`` (how it refuses).
* ``must-reject`` the source runs a model the spec makes invalid (information; the example is a probe).

Examples: a corpus case id; ``probe:NAME`` for a draft in ``qconform.facts.probes``; a node test
name (source ``onnx-node-tests``); a test function in tests/test_floats.py (source ``ml_dtypes``).
"""
from __future__ import annotations

import functools
import importlib
import re
import tomllib
from dataclasses import dataclass, field, fields, replace
from fnmatch import fnmatchcase
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from qconform import platform as plat
from qconform.declarations.runtimes import RUNTIMES, THIRD_PARTY_CHECK, Runtime
from qconform.verdicts import UNSUPPORTED

HERE = Path(__file__).resolve().parent
KINDS = ("erratum", "reading", "oracle-gap", UNSUPPORTED, "must-reject")  # unsupported: the verdict it predicts
#: Kinds whose rows account for a default-profile failure (fail or error) of their source.
FAILING_KINDS = ("erratum", "oracle-gap")
PROBE = "probe:"
DRIFT_COMMAND = "qconform facts drift"


@dataclass(frozen=True)
class Source:
    """A piece of third-party software facts are recorded about, and how to read its version."""

    name: str
    module: str  # imported to tell whether it is installed (and to read its __version__)
    runner: str | None = None  # the bundled qconform runner that exercises it, if any
    check: tuple[str, ...] = ()  # case-id globs the tests observe; () = the whole corpus
    #: the runtime's declaration (``qconform.runtimes``), which says how to read its version
    runtime: Runtime | None = None

    def version(self) -> str | None:
        """The installed version, or None where the software is not installed."""
        if self.runtime is not None:
            return self.runtime.installed_version()
        try:
            return str(getattr(importlib.import_module(self.module), "__version__", "")) or None
        except Exception:  # noqa: BLE001 - not installed, or broken: no facts apply
            return None

    @classmethod
    def of(cls, rt: Runtime) -> Source:
        """A runtime as a facts source: its runner exercises it, its declaration says how to read
        its version and which cases the tests observe."""
        return cls(rt.name, str(rt.module), runner=rt.name, check=rt.check, runtime=rt)

    def checked(self, case_id: str) -> bool:
        """Whether the project's tests observe this case for the source."""
        return not self.check or any(fnmatchcase(case_id, g) for g in self.check)


_RUNTIMES = [Source.of(rt) for rt in RUNTIMES.values() if not rt.own]
_ONNX = 1 + [s.name for s in _RUNTIMES].index("onnx-reference")
#: Every source: the runtimes qconform runs (from their declarations, ``qconform.runtimes``), with
#: the onnx package's node tests and ml_dtypes after its reference evaluator (facts.md's order).
SOURCES: dict[str, Source] = {s.name: s for s in (
    *_RUNTIMES[:_ONNX], Source("onnx-node-tests", "onnx"), Source("ml_dtypes", "ml_dtypes"), *_RUNTIMES[_ONNX:],
)}
RUNNER_SOURCES = tuple(s.name for s in SOURCES.values() if s.runner)


class FactsError(ValueError):
    """A facts file is malformed: one line naming the file, the row and the problem."""


@dataclass(frozen=True)
class Fact:
    id: str  # "E1", "E2", ... unique over every file
    source: str
    kind: str
    versions: str  # PEP 440 specifier set of the source's version ("" = every version)
    platform: str  # condition over qconform.platform names ("" = every platform)
    op_versions: str  # free text, e.g. "QuantizeLinear-23, -24, -25"
    cases: tuple[str, ...]  # fnmatch globs over case ids (node test names for onnx-node-tests)
    example: str
    does: str  # what the source does
    spec: str  # what the spec says, with the sentence or a link to the section quoting it
    reading: str = ""  # the reading followed (kinds reading / oracle-gap)
    message: str = ""  # regex the runner's reason must match (kind unsupported)
    evidence: str = ""  # where else it is documented (upstream issue, guide), optional

    def covers(self, case_id: str) -> bool:
        return any(fnmatchcase(case_id, p) for p in self.cases)

    @property
    def probe(self) -> str | None:
        return self.example[len(PROBE):] if self.example.startswith(PROBE) else None

    def holds_for(self, version: str) -> bool:
        """Whether the fact's version range contains ``version``."""
        return _contains(self.versions, version)

    def applies(self, version: str, feats: frozenset[str] | None = None, machine: str | None = None) -> bool:
        """In range for ``version`` and its platform condition holds here (or on the given features)."""
        return self.holds_for(version) and plat.condition_holds(self.platform, feats, machine)

    def scope(self) -> str:
        """``onnxruntime <1.32 on x86_64 and avx2``: the range and condition as words."""
        text = f"{self.source} {self.versions or '(every version)'}"
        return f"{text} where {self.platform}" if self.platform else text


@dataclass(frozen=True)
class Measured:
    """A version of the source on which the file was checked complete, and on which platforms."""

    version: str
    platform: str = ""  # condition the check covers ("" = every platform)
    date: str = ""
    how: str = ""


@dataclass(frozen=True)
class Packing:
    """Whether packed and single runs gave the same outputs on one version and platform of the source
    (``qconform facts packing``): every case of ``selection`` run both ways, bit for bit.
    ``qconform certify --pack`` packs only where an entry covers the runtime and says ``differing = 0``."""

    version: str
    platform: str = ""
    date: str = ""
    selection: str = "the whole corpus"
    corpus: str = ""  # the corpus's digest (its first 12 hex digits): a new corpus is measured again
    compared: int = 0  # cases whose packed and single runs both gave outputs (compared bit for bit)
    differing: int = 0  # ... of which the outputs differ
    how: str = ""

    @property
    def equivalent(self) -> bool:
        return self.compared > 0 and self.differing == 0


@dataclass(frozen=True)
class FactFile:
    source: str
    path: Path
    measured: tuple[Measured, ...]
    facts: tuple[Fact, ...] = field(default=())
    packing: tuple[Packing, ...] = field(default=())

    def packing_here(self, version: str, feats: frozenset[str] | None = None,
                     machine: str | None = None) -> Packing | None:
        """The packing measurement covering ``version`` on this platform, if any (the latest)."""
        found = [p for p in self.packing
                 if _same_version(p.version, version) and plat.condition_holds(p.platform, feats, machine)]
        return found[-1] if found else None

    def measured_here(self, version: str, feats: frozenset[str] | None = None,
                      machine: str | None = None) -> Measured | None:
        """The measurement covering ``version`` on this platform, if any."""
        for m in self.measured:
            if _same_version(m.version, version) and plat.condition_holds(m.platform, feats, machine):
                return m
        return None

    def active(self, version: str, feats: frozenset[str] | None = None, machine: str | None = None) -> list[Fact]:
        return [f for f in self.facts if f.applies(version, feats, machine)]


def release(version: str) -> str:
    """A version as the facts' ranges speak of it. describe() may give a build string that is no
    PEP 440 version (OpenVINO: '2026.4.1-22982-e213a147257-releases/2026/4', where its distribution
    says '2026.4.1'): then its leading release numbers; a valid version is kept as it is."""
    try:
        Version(version)
        return version
    except InvalidVersion:
        m = re.match(r"\d+(?:\.\d+)*", version)
        return m.group(0) if m else version


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def _contains(spec: str, version: str) -> bool:
    if not spec.strip():
        return True
    try:
        return SpecifierSet(spec).contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


# ----------------------------------------------------------------------------------------------
# Reading and validating
# ----------------------------------------------------------------------------------------------
_FACT_KEYS = ("id", "kind", "versions", "platform", "op_versions", "cases", "example", "reading", "message",
              "does", "spec", "evidence")
_REQUIRED = ("id", "kind", "op_versions", "example", "does", "spec")


def _readings() -> set[str]:
    from qconform.facts import docs

    return docs.reading_names()


def _fact(source: str, raw: dict, where: str, known_readings: set[str]) -> Fact:
    unknown = sorted(set(raw) - set(_FACT_KEYS))
    if unknown:
        raise FactsError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(_FACT_KEYS)}")
    missing = [k for k in _REQUIRED if not str(raw.get(k, "")).strip()]
    if missing:
        raise FactsError(f"{where}: missing {', '.join(missing)}")
    fid = raw["id"]
    where = f"{where} ({fid})"
    if not re.fullmatch(r"E\d+", fid):
        raise FactsError(f"{where}: id must be E<number>")
    kind = raw["kind"]
    if kind not in KINDS:
        raise FactsError(f"{where}: unknown kind {kind!r}; known: {', '.join(KINDS)}")
    versions = str(raw.get("versions", ""))
    try:
        SpecifierSet(versions)
    except InvalidSpecifier as exc:
        raise FactsError(f"{where}: versions {versions!r} is not a PEP 440 specifier set ({exc})") from None
    cond = str(raw.get("platform", ""))
    try:
        plat.check_condition(cond)
    except plat.ConditionError as exc:
        raise FactsError(f"{where}: platform: {exc}") from None
    cases = tuple(raw.get("cases", ()))
    if source != "ml_dtypes" and not cases:
        raise FactsError(f"{where}: no case globs")
    reading = str(raw.get("reading", ""))
    if kind == "reading" and reading not in known_readings:
        raise FactsError(f"{where}: a reading fact names one reading of qconform/docs/semantics.md#readings-index, "
                         f"got {reading!r}")
    if kind == "oracle-gap" and reading and reading not in known_readings:
        raise FactsError(f"{where}: unknown reading {reading!r}")
    if kind not in ("reading", "oracle-gap") and reading:
        raise FactsError(f"{where}: only kinds reading and oracle-gap name a reading")
    message = str(raw.get("message", ""))
    if message:
        try:
            re.compile(message)
        except re.error as exc:
            raise FactsError(f"{where}: message is not a regular expression: {exc}") from None
    if kind == "must-reject" and not str(raw["example"]).startswith(PROBE):
        raise FactsError(f"{where}: a must-reject fact's example is a probe:NAME")
    return Fact(fid, source, kind, versions, cond, raw["op_versions"], cases, raw["example"], raw["does"],
                raw["spec"], reading, message, str(raw.get("evidence", "")))


def parse(source: str, text: str, path: Path | None = None, known_readings: set[str] | None = None) -> FactFile:
    where = str(path or f"{source}.toml")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FactsError(f"{where}: not TOML: {exc}") from None
    if data.get("source") != source:
        raise FactsError(f"{where}: source = {data.get('source')!r}, expected {source!r}")
    unknown = sorted(set(data) - {"source", "measured", "fact", "packing"})
    if unknown:
        raise FactsError(f"{where}: unknown top-level key(s) {', '.join(unknown)}")
    measured = []
    for n, m in enumerate(data.get("measured", []), 1):
        if not m.get("version"):
            raise FactsError(f"{where}: measured #{n} has no version")
        try:
            plat.check_condition(m.get("platform", ""))
        except plat.ConditionError as exc:
            raise FactsError(f"{where}: measured #{n}: {exc}") from None
        measured.append(Measured(str(m["version"]), m.get("platform", ""), m.get("date", ""), m.get("how", "")))
    readings = _readings() if known_readings is None else known_readings
    facts = tuple(_fact(source, raw, f"{where}: fact #{n}", readings) for n, raw in enumerate(data.get("fact", []), 1))
    return FactFile(source, Path(where), tuple(measured), facts, _packing(data.get("packing", []), where))


_PACKING_KEYS = tuple(f.name for f in fields(Packing))


def _packing(raws: list[dict], where: str) -> tuple[Packing, ...]:
    out = []
    for n, raw in enumerate(raws, 1):
        unknown = sorted(set(raw) - set(_PACKING_KEYS))
        if unknown or not raw.get("version"):
            raise FactsError(f"{where}: packing #{n}: needs a version; known keys: {', '.join(_PACKING_KEYS)}"
                             + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
        try:
            plat.check_condition(raw.get("platform", ""))
        except plat.ConditionError as exc:
            raise FactsError(f"{where}: packing #{n}: {exc}") from None
        if not all(isinstance(raw.get(k, 0), int) and raw.get(k, 0) >= 0 for k in ("compared", "differing")):
            raise FactsError(f"{where}: packing #{n}: compared and differing are counts of cases")
        out.append(Packing(**{k: raw[k] for k in _PACKING_KEYS if k in raw}))
    return tuple(out)


def path_of(source: str) -> Path:
    return HERE / f"{source}.toml"


def load(source: str) -> FactFile:
    return parse(source, path_of(source).read_text(), path_of(source))


def load_all() -> dict[str, FactFile]:
    files = {s: load(s) for s in SOURCES}
    seen: dict[str, str] = {}
    for ff in files.values():
        for f in ff.facts:
            if f.id in seen:
                raise FactsError(f"fact id {f.id} is used in {seen[f.id]} and {ff.path.name}")
            seen[f.id] = ff.path.name
    return files


def all_facts() -> list[Fact]:
    return sorted((f for ff in load_all().values() for f in ff.facts), key=lambda f: int(f.id[1:]))


@functools.cache
def _cannot_start(runner: str) -> str:
    """Why a bundled runner cannot start here ('' when it can): asked once per process, since every
    fact's check asks it."""
    from qconform.runner import RunnerError, resolve

    try:
        resolve(runner)
    except RunnerError as exc:
        return str(exc)
    return ""


def checkable(source: str, files: dict[str, FactFile] | None = None) -> tuple[str | None, str]:
    """(installed version, '') when the source's facts are measured for it on this platform, else
    (version or None, the reason they are not asserted here, naming the drift command)."""
    version = SOURCES[source].version()
    if version is None:
        return None, f"{source} is not installed here"
    ff = (files or load_all())[source]
    runner = SOURCES[source].runner
    if runner and SOURCES[source].check:  # a third-party runtime installed but unable to start here
        why = _cannot_start(runner)
        if why:
            return version, why
    if ff.measured_here(version) is None:
        seen = "; ".join(f"{m.version}" + (f" where {m.platform}" if m.platform else "") for m in ff.measured)
        return version, (f"no recorded facts for {source} {version} on {plat.label()} (measured: {seen or 'none'}); "
                         f"run `{DRIFT_COMMAND} --runner {source}` and review the rows it proposes")
    return version, ""


def asserted(fid: str, files: dict[str, FactFile] | None = None) -> tuple[Fact, str]:
    """The fact, and '' when it is asserted here (measured version, in range, condition holds), else why not."""
    files = files or load_all()
    fact = next((f for ff in files.values() for f in ff.facts if f.id == fid), None)
    if fact is None:
        raise KeyError(f"no fact {fid}")
    version, why = checkable(fact.source, files)
    if why:
        return fact, why
    if not fact.applies(version):
        return fact, f"{fid} holds for {fact.scope()}; not {fact.source} {version} on {plat.label()}"
    return fact, ""


def next_id(files: dict[str, FactFile]) -> int:
    return 1 + max((int(f.id[1:]) for ff in files.values() for f in ff.facts), default=0)


# ----------------------------------------------------------------------------------------------
# Writing (one canonical form, so the files are reviewed as data and round-trip exactly)
# ----------------------------------------------------------------------------------------------
def _q(s: str) -> str:
    out = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{out}"'


HEADER = """\
# Facts about {source}: where it differs from qconform/docs/semantics.md, per version and platform.
# Data, not code: read by qconform/facts, checked by tests/test_facts.py, rendered to qconform/docs/facts.md.
# Edit by hand or through `qconform facts drift --write`; `qconform facts fmt` rewrites the canonical form.
"""


def dump(ff: FactFile) -> str:
    lines = [HEADER.format(source=ff.source), f"source = {_q(ff.source)}", ""]
    for m in ff.measured:
        lines.append("[[measured]]")
        lines.append(f"version = {_q(m.version)}")
        for key in ("platform", "date", "how"):
            if getattr(m, key):
                lines.append(f"{key} = {_q(getattr(m, key))}")
        lines.append("")
    for p in ff.packing:
        lines.append("[[packing]]")
        for key in _PACKING_KEYS:
            value = getattr(p, key)
            if isinstance(value, int):
                lines.append(f"{key} = {value}")
            elif value or key == "version":
                lines.append(f"{key} = {_q(value)}")
        lines.append("")
    for f in ff.facts:
        lines.append("[[fact]]")
        for key in _FACT_KEYS:
            value = getattr(f, key)
            if key == "cases":
                lines.append("cases = [" + ", ".join(_q(c) for c in value) + "]")
            elif value or key in ("id", "kind", "versions"):
                lines.append(f"{key} = {_q(str(value))}")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def write(ff: FactFile, path: Path | None = None) -> Path:
    target = path or path_of(ff.source)
    target.write_text(dump(ff))
    return target


def with_facts(ff: FactFile, facts: list[Fact], measured: list[Measured] | None = None) -> FactFile:
    return replace(ff, facts=tuple(facts), measured=tuple(ff.measured if measured is None else measured))


__all__ = ["DRIFT_COMMAND", "FAILING_KINDS", "Fact", "FactFile", "FactsError", "KINDS", "Measured", "PROBE", "Packing",
           "RUNNER_SOURCES", "SOURCES", "Source", "all_facts", "dump", "load", "load_all", "next_id", "parse",
           "path_of", "with_facts", "write"]

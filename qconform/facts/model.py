"""The fact model: the sources facts are recorded about, a fact and its file as values, and how a fact
matches a case, a version and a platform. Kept apart from the TOML store (``qconform.facts.store``) so
that what a fact means is read without how it is stored."""
from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from qconform import platform as plat
from qconform.declarations.runtimes import RUNTIMES, Runtime
from qconform.verdicts import UNSUPPORTED

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
    #: the runtime's declaration (``qconform.declarations.runtimes``), which says how to read its version
    runtime: Runtime | None = None
    #: case-id globs its facts speak for, and whose facts hold elsewhere (``Runtime.facts_scope``)
    scope: tuple[str, ...] = ()
    elsewhere: str | None = None

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
        return cls(rt.name, str(rt.module), runner=rt.name, check=rt.check, runtime=rt, scope=rt.facts_scope,
                   elsewhere=rt.variant_of if rt.facts_scope else None)

    def speaks_for(self, case_id: str) -> bool:
        """Whether this source's own facts account for the case (not ``elsewhere``'s)."""
        return not self.scope or any(fnmatchcase(case_id, g) for g in self.scope)

    def checked(self, case_id: str) -> bool:
        """Whether the project's tests observe this case for the source."""
        return not self.check or any(fnmatchcase(case_id, g) for g in self.check)


_RUNTIMES = [Source.of(rt) for rt in RUNTIMES.values() if not rt.own]
_ONNX = 1 + [s.name for s in _RUNTIMES].index("onnx-reference")
#: Every source: the runtimes qconform runs (from their declarations,
#: ``qconform.declarations.runtimes``), with the onnx package's node tests and ml_dtypes after its
#: reference evaluator (facts.md's order).
SOURCES: dict[str, Source] = {s.name: s for s in (
    *_RUNTIMES[:_ONNX], Source("onnx-node-tests", "onnx"), Source("ml_dtypes", "ml_dtypes"), *_RUNTIMES[_ONNX:],
)}
RUNNER_SOURCES = tuple(s.name for s in SOURCES.values() if s.runner)

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
    #: the source's outcome on these cases varies from run to run (an erratum only: a read past the end
    #: of an input that traps or not by what the process held before). Such a fact accounts for a
    #: disagreement when one occurs, and its example may pass or fail; the certificate still counts
    #: every disagreement it sees.
    intermittent: bool = False
    #: the source never finishes the example (an erratum only: a compiler that loops): observers give
    #: it ``HANG_TIMEOUT_S`` instead of a case's full timeout, since a timeout is all it can show
    hangs: bool = False

    def covers(self, case_id: str) -> bool:
        return any(fnmatchcase(case_id, p) for p in self.cases)

    @property
    def probe(self) -> str | None:
        return self.example[len(PROBE):] if self.example.startswith(PROBE) else None

    def holds_for(self, version: str) -> bool:
        """Whether the fact's version range contains ``version``."""
        return in_range(self.versions, version)

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

    @property
    def hanging_examples(self) -> frozenset[str]:
        """The examples of the facts that say the source never finishes them (``Fact.hangs``): what
        an observer gives ``observe.HANG_TIMEOUT_S``."""
        return frozenset(f.example for f in self.facts if f.hangs)


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


def in_range(spec: str, version: str) -> bool:
    """Whether ``version`` lies in the PEP 440 specifier set ``spec`` ("" = every version); shared with
    the findings, which bound a finding's versions the same way."""
    if not spec.strip():
        return True
    try:
        return SpecifierSet(spec).contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


__all__ = ["DRIFT_COMMAND", "FAILING_KINDS", "KINDS", "PROBE", "RUNNER_SOURCES", "SOURCES", "Fact", "FactFile",
           "Measured", "Packing", "Source", "in_range", "release"]

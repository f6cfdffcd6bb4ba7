"""The facts' TOML store: reading and validating the files beside this module (one line per problem,
naming the file and the row), which facts are asserted here, and writing them back in one canonical form
so that they are reviewed as data and round-trip exactly."""
from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import fields, replace
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from qconform import platform as plat
from qconform.facts.model import DRIFT_COMMAND, KINDS, PROBE, SOURCES, Fact, FactFile, Measured, Packing

HERE = Path(__file__).resolve().parent


class FactsError(ValueError):
    """A facts file is malformed: one line naming the file, the row and the problem."""


# ----------------------------------------------------------------------------------------------
# Reading and validating
# ----------------------------------------------------------------------------------------------
_FACT_KEYS = ("id", "kind", "versions", "platform", "op_versions", "cases", "example", "reading", "message",
              "intermittent", "hangs", "does", "spec", "evidence")
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
    intermittent = raw.get("intermittent", False)
    if not isinstance(intermittent, bool):
        raise FactsError(f"{where}: intermittent is true or false, got {intermittent!r}")
    if intermittent and kind != "erratum":
        raise FactsError(f"{where}: only an erratum is intermittent (an outcome that varies from run to run)")
    hangs = raw.get("hangs", False)
    if not isinstance(hangs, bool):
        raise FactsError(f"{where}: hangs is true or false, got {hangs!r}")
    if hangs and kind != "erratum":
        raise FactsError(f"{where}: only an erratum hangs (a case the source never finishes)")
    return Fact(fid, source, kind, versions, cond, raw["op_versions"], cases, raw["example"], raw["does"],
                raw["spec"], reading, message, str(raw.get("evidence", "")), intermittent, hangs)


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
            elif isinstance(value, bool):
                if value:
                    lines.append(f"{key} = true")
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




__all__ = ["HERE", "HEADER", "FactsError", "all_facts", "asserted", "checkable", "dump", "load", "load_all", "next_id",
           "parse", "path_of", "with_facts", "write"]

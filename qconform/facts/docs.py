"""The documents facts refer to: the readings index of qconform/docs/semantics.md, and qconform/docs/facts.md, the
human-readable rendering of the facts files (generated; ``qconform facts render`` rewrites it and
tests/test_facts.py checks it is current)."""
from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent.parent / "docs"
SEMANTICS = DOCS / "semantics.md"
RENDERED = DOCS / "facts.md"


def _section(text: str, anchor: str) -> str:
    start = text.find(f'<a id="{anchor}"></a>')
    if start < 0:
        raise ValueError(f"qconform/docs/semantics.md has no anchor {anchor!r}")
    end = text.find("<a id=", start + 1)
    return text[start:end if end > 0 else len(text)]


def reading_names(text: str | None = None) -> set[str]:
    """Every reading named in qconform/docs/semantics.md#readings-index (``a`` / ``b`` cells give both)."""
    text = SEMANTICS.read_text() if text is None else text
    names: set[str] = set()
    for line in _section(text, "readings-index").splitlines()[2:]:
        if line.startswith("|") and not line.startswith("|---"):
            first = line.strip("|").split("|")[0]
            names.update(re.findall(r"`([^`]+)`", first))
    return names


def _cell(text: str) -> str:
    """One table cell; links into the semantics document keep working from qconform/docs/facts.md."""
    return " ".join(text.split()).replace("|", "\\|").replace("](#", "](semantics.md#")


def render(files, sources: Mapping[str, Any]) -> str:
    """qconform/docs/facts.md from the facts files (dict source -> FactFile)."""
    out = [
        "# Facts about other software",
        "",
        "Generated from `qconform/facts/*.toml` by `qconform facts render`; do not edit by hand.",
        "What each kind means, and how the facts are checked: `qconform/facts/__init__.py`. The spec side",
        "of every row is argued in [semantics.md](semantics.md).",
        "",
        "A fact holds for the versions in **versions** (a PEP 440 specifier set over the source's own",
        "version; empty = every version) on the platforms where **platform** holds (a condition over CPU",
        "features read at run time; empty = everywhere). The project's tests check a source's facts in both",
        "directions only on the versions and platforms listed under *measured*; elsewhere they skip and",
        "name `qconform facts drift`, which proposes the rows to add, close or re-bound.",
        "",
    ]
    for source, ff in files.items():
        out.append(f"## {source}")
        out.append("")
        src = sources.get(source)
        if src is not None and getattr(src, "elsewhere", None):
            out.append("These facts speak for " + ", ".join(f"`{g}`" for g in src.scope) + f" only: elsewhere "
                       f"{source} runs as {src.elsewhere} does, and [{src.elsewhere}'s facts](#{src.elsewhere}) "
                       "hold (its declaration's `facts_scope`).")
            out.append("")
        check = src.check if src is not None else ()
        if check:
            out.append("Checked complete on the slice " + ", ".join(f"`{g}`" for g in check) + " (and every "
                       "row's example): a whole-corpus pass takes too long for the test run; "
                       "`qconform facts drift --whole` lists what the rest of the corpus adds, and "
                       "`qconform facts drift --from-report DIR` does so from a finished "
                       "`pytest --runner=NAME --report=DIR` run without running it again.")
            out.append("")
        if ff.measured:
            out.append("Measured: " + "; ".join(
                f"{m.version}" + (f" on {m.platform}" if m.platform else "") + (f" ({m.date})" if m.date else "")
                + (f": {m.how}" if m.how else "") for m in ff.measured) + ".")
            out.append("")
        for p in ff.packing:  # what qconform certify --pack rests on
            state = "the same outputs" if p.equivalent else f"**{p.differing:,} differ**"
            out.append(f"Packing ({p.version}" + (f" on {p.platform}" if p.platform else "") + f", {p.date}, "
                       f"corpus `{p.corpus}`, {p.selection}): {p.compared:,} cases compared packed and alone, "
                       f"{state}" + (f". {p.how}" if p.how else "") + ".")
            out.append("")
        out.append("| id | versions | platform | kind | op-version | cases | example | what it does | what the spec says |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        for f in ff.facts:
            kind = f.kind + (f" `{f.reading}`" if f.reading else "") + (" (intermittent)" if f.intermittent else "") \
                + (" (hangs)" if f.hangs else "")
            does = f.does + (f" (reason matches `{f.message}`)" if f.message else "")
            if f.evidence:
                does += f" Evidence: {f.evidence}"
            out.append("| " + " | ".join(_cell(c) for c in (
                f.id, f"`{f.versions}`" if f.versions else "all", f"`{f.platform}`" if f.platform else "any", kind,
                f.op_versions, ", ".join(f"`{c}`" for c in f.cases) or "—", f"`{f.example}`", does, f.spec)) + " |")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


__all__ = ["RENDERED", "SEMANTICS", "reading_names", "render"]

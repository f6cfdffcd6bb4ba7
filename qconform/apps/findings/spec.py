"""The spec sentences a finding quotes, read from qconform/docs/semantics.md."""
from __future__ import annotations

import re

from qconform.apps.findings._common import SEMANTICS


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

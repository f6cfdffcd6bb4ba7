"""qconform/docs/semantics.md is the one place semantics are decided: every case points into it."""
from __future__ import annotations

import re

from conftest import REPO

DOC = REPO / "qconform" / "docs" / "semantics.md"


def anchors() -> set[str]:
    return set(re.findall(r'<a id="([^"]+)"></a>', DOC.read_text()))


def test_every_case_clause_is_an_anchor_of_the_semantics_document(corpus):
    known = anchors()
    missing = sorted({c.clause for c in corpus.cases} - known)
    assert not missing, f"clauses with no section in qconform/docs/semantics.md: {missing}"


def test_every_named_reading_is_in_the_readings_index(corpus):
    text = DOC.read_text()
    index = text[text.index('<a id="readings-index"></a>'):]
    names = {part for c in corpus.cases for r in c.readings if r.name != "spec" for part in r.name.split("+")}
    missing = sorted(n for n in names if f"`{n}`" not in index)
    assert not missing, f"readings not listed in qconform/docs/semantics.md#readings-index: {missing}"


def test_every_decision_quotes_the_spec():
    text = DOC.read_text()
    sections = re.split(r'<a id="[^"]+"></a>', text)[1:]
    for body in sections:
        if "**Decision:**" in body:
            assert ">" in body, f"a section with a decision but no quoted spec sentence: {body[:120]!r}"


def test_semantics_html_shows_the_spec_quotes_as_quotes() -> None:
    """The spec's words (``> `` lines of semantics.md) render as quotes, never as literal '> ' text."""
    from qconform.report import semantics_html

    text = semantics_html.source()
    html = semantics_html.render(text)
    groups = sum(1 for i, ln in enumerate(text.splitlines())
                 if ln.startswith(">") and (i == 0 or not text.splitlines()[i - 1].startswith(">")))
    assert groups and html.count("<blockquote>") == groups
    assert "<p>&gt;" not in html and "<li>&gt;" not in html

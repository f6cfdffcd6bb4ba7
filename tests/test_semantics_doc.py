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


def _readings(case) -> set[str]:
    return {part for r in case.readings for part in r.name.split("+")}


def _quantize_23(case) -> bool:
    return case.op == "QuantizeLinear" and not case.domain and case.opset >= 23


#: Every count of corpus cases semantics.md states, as its sentence states it, and what it counts: a
#: count the corpus no longer has fails here instead of rotting in the document.
COUNTS = {
    r"\(([\d,]+) of the cases at 23\+ carry both\)":
        lambda c: _quantize_23(c) and any(n.startswith("quotient-rounded-once-to-float")
                                          or n.startswith("quotient-rounded-once-to-bfloat") for n in _readings(c)),
    r"([\d,]+) cases at 23\+ have an int32 scale": lambda c: _quantize_23(c) and c.inputs[1].type == "int32",
    r"([\d,]+) single-node cases carry `quotient-exact`":
        lambda c: not c.draft.graph and "quotient-exact" in _readings(c),
    r"([\d,]+) QDQ\s+patterns through their QuantizeLinear nodes":
        lambda c: bool(c.draft.graph) and "quotient-exact" in _readings(c),
}


def test_every_count_of_cases_in_the_document_is_the_corpus_own(corpus):
    text = " ".join(DOC.read_text().split())  # a sentence may wrap
    stated = re.findall(r"\b\d[\d,]* (?:of the |single-node )?(?:cases|QDQ patterns)\b", text)
    found = {p: re.findall(p, text) for p in COUNTS}
    assert all(len(v) == 1 for v in found.values()), f"each counted sentence once: {found}"
    assert len(stated) == len(COUNTS), f"a count of cases with no check in tests/test_semantics_doc.py: {stated}"
    for pattern, counts in COUNTS.items():
        want = sum(1 for c in corpus.cases if counts(c))
        assert int(found[pattern][0].replace(",", "")) == want, f"semantics.md says {found[pattern][0]}, the corpus has {want:,}"

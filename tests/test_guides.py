"""The guides in qconform/docs/ name the files a change touches: every file they name exists, and
the diagnosis-model guide is followed backwards for every model there is -- a model's name stands in
exactly the files the guide lists, and nowhere else in the package's code and documents."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REPO

from qconform.diagnosis.models import MODELS

DOCS = REPO / "qconform" / "docs"
GUIDES = sorted(DOCS.glob("guide-*.md"))


def files_of(guide: Path) -> list[str]:
    """Every path of the guide's ```files blocks (``<step>``-style parts are placeholders)."""
    return [ln.strip() for block in re.findall(r"```files\n(.*?)```", guide.read_text(encoding="utf-8"), re.S)
            for ln in block.splitlines() if ln.strip()]


def matches(pattern: str) -> list[Path]:
    return sorted(REPO.glob(re.sub(r"<[^>]+>", "*", pattern.rstrip("/")))) or []


def test_there_are_the_six_guides():
    assert [g.name for g in GUIDES] == ["guide-diagnosis-model.md", "guide-op-version.md", "guide-op.md",
                                        "guide-pattern.md", "guide-runtime.md", "guide-type.md"]


@pytest.mark.parametrize("guide", GUIDES, ids=lambda g: g.stem)
def test_every_file_a_guide_names_exists(guide):
    named = files_of(guide)
    assert named, f"{guide.name} has no ```files block"
    assert [p for p in named if not matches(p)] == []


#: Where a model's name may also stand: what runtimes are known to do (a fact names the model that
#: reproduces it), and what is generated from those and from runs.
KNOWLEDGE = ("qconform/facts/", "qconform/docs/facts.md", "qconform/docs/findings/", "qconform/docs/scoreboard/")


def _texts() -> dict[str, str]:
    out = {}
    for f in (REPO / "qconform").rglob("*"):
        rel = f.relative_to(REPO).as_posix()
        if f.suffix in (".py", ".md", ".toml") and not rel.startswith(KNOWLEDGE):
            out[rel] = f.read_text(encoding="utf-8")
    return out


def test_the_diagnosis_model_guide_names_every_file_a_model_stands_in():
    """Every model stands in each file the guide lists -- one step module under models/, the
    registry's order, the table of diagnosis.md -- so following the guide is what made each one."""
    listed = [re.sub(r"<[^>]+>", "*", p) for p in files_of(DOCS / "guide-diagnosis-model.md")]
    texts = _texts()
    wrong = {}
    for name in MODELS:
        if "+" in name:  # a pair of two models, made by the diagnosis, declared nowhere
            continue
        quoted = re.compile(rf"[\"'`]{re.escape(name)}[\"'`]")
        where = {rel for rel, text in texts.items() if quoted.search(text)}
        per_pattern = [sorted(rel for rel in where if Path(rel).match(p) and rel not in listed[1:] or rel == p)
                       for p in listed]
        if [len(found) for found in per_pattern] != [1] * len(listed):
            wrong[name] = per_pattern
    assert not wrong, f"models not standing once in each file guide-diagnosis-model.md lists: {wrong}"

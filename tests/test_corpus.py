"""The golden corpus: committed, verified at start, regenerated bit-identically, tamper-evident."""
from __future__ import annotations

import shutil

import pytest

from conftest import run_pytest
from conformance import corpus as corpus_mod
from conformance.cli import regenerate
from conformance.plugin import default_golden


def test_regeneration_is_bit_identical_to_the_committed_corpus(tmp_path):
    n, digest = regenerate(tmp_path / "a")
    _, digest2 = regenerate(tmp_path / "b")
    assert digest == digest2
    assert digest == corpus_mod.verify(default_golden()), "golden/ is stale: run `qconform golden regen`"
    assert n == len(corpus_mod.load(default_golden()).cases)


def test_every_case_builds_a_checked_model(corpus):
    from conformance.model import build_model

    for case in corpus.cases:
        build_model(case)  # onnx.checker runs inside


@pytest.mark.parametrize("where", ["data", "index"])
def test_a_tampered_byte_fails_the_run_naming_the_file(tmp_path, where):
    golden = tmp_path / "golden"
    shutil.copytree(default_golden(), golden)
    victim = sorted((golden / where).iterdir())[0]
    raw = bytearray(victim.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    victim.write_bytes(bytes(raw))
    r = run_pytest("--runner=cpu-ref", f"--golden={golden}", "-q")
    assert r.returncode != 0
    assert f"golden file changed: {victim}" in r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr


def test_a_missing_file_is_named(tmp_path):
    golden = tmp_path / "golden"
    shutil.copytree(default_golden(), golden)
    victim = sorted((golden / "data").iterdir())[0]
    victim.unlink()
    with pytest.raises(corpus_mod.CorpusError, match=f"golden file missing: {victim}"):
        corpus_mod.load(golden)

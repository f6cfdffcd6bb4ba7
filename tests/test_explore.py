"""``pytest --explore`` finds, shrinks and saves a planted bug within its
example budget, ``qconform explore promote`` turns the saved draft into a corpus case, and a
correct runner explores clean."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_pytest

from qconform.cli import main
from qconform.compare import compare
from qconform.generators import explored
from qconform.model import build_model
from qconform.oracle import evaluate
from qconform.runner import prepare
from qconform.runners.cpu_ref import CpuRefRunner
from wrong_runners import WrongRunner

WRONG = f"--runner={Path(__file__).with_name('wrong_runners.py')}:WrongRunner"
ONLY_Q21 = "QuantizeLinear-21 and not Dequantize"


def _explore(tmp_path: Path, *args: str):
    return run_pytest("-p", "no:randomly", "--explore", "--explore-dir", str(tmp_path / "found"), "-q", *args)


def _verdict(runner, draft) -> str:
    case = evaluate(draft)
    return compare(case, prepare(runner, build_model(case))(case.feeds)).verdict


@pytest.mark.parametrize("bug", ["round-half-away", "wrap-instead-of-saturate", "swapped-nibbles"])
def test_planted_bug_is_found_shrunk_and_saved(tmp_path, bug):
    r = _explore(tmp_path, WRONG, "--runner-opt", f"bug={bug}", "--explore-examples", "200", "-k", ONLY_Q21)
    assert r.returncode == 1, r.stdout[-3000:]
    assert "minimal failing example" in r.stdout and "qconform explore promote" in r.stdout
    saved = tmp_path / "found" / "QuantizeLinear-21.json"
    draft = explored.from_json(json.loads(saved.read_text()))
    assert draft.inputs[0].value.size == 1, f"not shrunk to one element: {draft}"
    assert _verdict(WrongRunner(bug), draft) == "fail"
    assert _verdict(CpuRefRunner(), draft) == "pass"


def test_correct_runner_explores_clean(tmp_path):
    r = _explore(tmp_path, "--runner=cpu-ref", "--explore-examples", "25",
                 "-k", "DequantizeLinear-23 or QuantizeLinear-25")
    assert r.returncode == 0, r.stdout[-3000:]
    assert "3 passed" in r.stdout or "2 passed" in r.stdout
    assert not (tmp_path / "found").exists()


def test_promote_makes_a_corpus_draft(tmp_path, capsys):
    found = tmp_path / "QuantizeLinear-21.json"
    arr = np.array([0.5], dtype=np.float32)
    from qconform import schemas
    from qconform.generators.qdq import Combo

    c = Combo(schemas.get("QuantizeLinear", 21), {"T1": "float32", "T2": "int8"})
    found.write_text(json.dumps(explored.to_json(c.draft("explore", "draw", arr, 1.0, 0.0))))
    dest = tmp_path / "explored"
    assert main(["explore", "promote", str(found), "--dir", str(dest)]) == 0
    (draft,) = explored.generate(dest)
    assert draft.family == "explored" and draft.name.startswith("x")
    assert draft.id in capsys.readouterr().out
    assert list(explored.generate(dest))[0].id == draft.id  # stable name from the content
    assert main(["explore", "promote", str(tmp_path / "nope.json"), "--dir", str(dest)]) == 2


def test_json_round_trip_is_bit_exact():
    from qconform import schemas
    from qconform.generators.qdq import Combo

    c = Combo(schemas.get("QuantizeLinear", 23), {"T1": "float32", "T2": "float16", "T3": "float8e4m3fn"})
    x = np.array([np.nan, -0.0, np.inf, 1e-45], dtype=np.float32)
    d = c.draft("explore", "draw", x, 1.0, attrs={"saturate": 0})
    back = explored.from_json(json.loads(json.dumps(explored.to_json(d))))
    assert back.id == d.id and back.attrs == d.attrs
    for a, b in zip(d.inputs, back.inputs):
        assert a.type == b.type and a.value.shape == b.value.shape
        assert a.value.tobytes() == b.value.tobytes()

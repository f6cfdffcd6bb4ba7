"""The graph explorer (``qconform.apps.explore_graphs``) finds a deviation planted in a real runtime:
onnxruntime itself, wrapped so that one pattern's output codes come back altered, as a fused kernel
that rounds one way too many would give them. The draws are seeded, a differing graph is kept as a
draft of the family "explored" (its nodes included) with its reproducer, and a correct runner
explores clean on the same draws."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from qconform.apps import explore_graphs as eg
from qconform.case import PATTERN_DOMAIN
from qconform.compare import compare
from qconform.generators import explored, explored_graphs
from qconform.model import build_model
from qconform.oracle import evaluate
from qconform.runner import prepare
from qconform.runners.onnxruntime_runner import OnnxRuntimeRunner
from qconform.verdicts import FAIL, PASS

PLANTED = "Sub"


class SubOddCodesUp(OnnxRuntimeRunner):
    """onnxruntime (graph optimisations off) whose Sub pattern returns every odd output code one
    higher (saturated at the type's end): a requantisation that rounds the wrong way at half the codes."""

    def prepare(self, model):
        run = super().prepare(model)
        if not any(n.op_type == PLANTED for n in model.graph.node):
            return run

        def altered(inputs):
            outs = run(inputs)
            y = np.asarray(outs[0])
            if y.dtype.kind not in "iu":
                return outs
            info = np.iinfo(y.dtype)
            v = y.astype(np.int64)
            v = np.where((v % 2 == 1) & (v < info.max), v + 1, v).astype(y.dtype)
            return [v, *outs[1:]]
        return altered


def _verdict(runner, draft) -> str:
    case = evaluate(draft)
    return compare(case, prepare(runner, build_model(case))(case.feeds)).verdict


def test_planted_deviation_is_found_and_kept(tmp_path):
    s = eg.explore(SubOddCodesUp(), seed=7, seconds=1e9, max_cases=40, out=tmp_path, reference=OnnxRuntimeRunner(),
                   ops=(PLANTED, "Add"), log=lambda _: None)
    assert s.drawn == 40 and s.judged > 0
    found = [d for d in s.differing if d.group.startswith(f"{PATTERN_DOMAIN}.{PLANTED}-")]
    assert found, eg.render(s)
    assert all(d.group.startswith(f"{PATTERN_DOMAIN}.{PLANTED}-") for d in s.differing), eg.render(s)
    assert all(d.reference == PASS for d in found)  # onnxruntime itself computes these graphs right
    d = found[0]
    draft = explored.from_json(json.loads(Path(d.draft).read_text()))
    assert draft.family == explored_graphs.FAMILY and draft.is_graph and draft.id == d.id
    assert _verdict(SubOddCodesUp(), draft) == FAIL and _verdict(OnnxRuntimeRunner(), draft) == PASS
    assert (Path(d.reproducer) / "model.onnx").is_file()
    assert json.loads((tmp_path / "summary.json").read_text())["seed"] == 7


def test_draws_are_seeded_and_a_correct_runner_explores_clean(tmp_path):
    a, _ = eg.draw_case(3, 5)
    b, _ = eg.draw_case(3, 5)
    assert a is not None and a.id == b.id and all(
        np.array_equal(x.value, y.value) for x, y in zip(a.inputs, b.inputs) if x is not None)
    s = eg.explore(OnnxRuntimeRunner(), seed=7, seconds=1e9, max_cases=40, out=tmp_path, ops=(PLANTED, "Add"),
                   log=lambda _: None)
    assert s.judged > 0 and not s.differing, eg.render(s)


def test_graph_drafts_round_trip_with_their_nodes():
    case = next(c for c, _ in (eg.draw_case(11, i, ("Conv",)) for i in range(50)) if c is not None)
    d = case.draft
    back = explored.from_json(json.loads(json.dumps(explored.to_json(d))))
    assert back.graph == d.graph and back.id == d.id
    assert evaluate(back).readings[0].outputs[0].tobytes() == case.readings[0].outputs[0].tobytes()


def test_draws_cover_the_pattern_attributes():
    """A convolution's group, strides, pads and dilations and a pool's modes are drawn, not kept."""
    rng = np.random.default_rng(0)
    seen: set[str] = set()
    for t in (t for op in ("Conv", "AveragePool") for t in explored_graphs.templates().get(op, ())[:2]):
        for i in range(30):
            seen |= {k for n in explored_graphs.redraw(t, rng, f"d{i}").graph for k in n.attrs}
    assert {"group", "strides", "pads", "dilations", "ceil_mode", "count_include_pad"} <= seen


def test_a_differing_graph_is_promoted_as_a_corpus_draft(tmp_path, capsys):
    """``qconform explore promote`` takes a graph the explorer kept: its nodes travel with it."""
    from qconform.cli import main

    s = eg.explore(SubOddCodesUp(), seed=7, seconds=1e9, max_cases=40, out=tmp_path / "found", ops=(PLANTED,),
                   log=lambda _: None)
    saved = Path(s.differing[0].draft)
    assert main(["explore", "promote", str(saved), "--dir", str(tmp_path / "explored")]) == 0
    (draft,) = explored.generate(tmp_path / "explored")
    assert draft.family == "explored" and draft.is_graph and draft.name.startswith("x")
    assert draft.id in capsys.readouterr().out


def test_the_graph_explorer_is_a_qconform_command(capsys):
    """``qconform explore graphs`` is the explorer's own command line (its options, its help)."""
    import pytest

    from qconform import cli

    with pytest.raises(SystemExit) as exit_:
        cli.main(["explore", "graphs", "--help"])
    assert exit_.value.code == 0 and "qconform explore graphs" in capsys.readouterr().out

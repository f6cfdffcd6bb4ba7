"""Characterisation of failures no deviation model explains (qconform/diagnosis/characterise.py).

The project's own held-out check: each family of deviation models (one module of
qconform/diagnosis/models) lends one model, run as a runtime (``DeviationRunner``) over the corpus
cases of the families most likely to expose it, with no model in the diagnosis at all (every
failing case is then unexplained, as for a deviation nobody has modelled); the characterisation
must state that model's trigger in words. And the GPU run's case: a runner that flushes subnormal
scales gets a characterisation that names the subnormal scale.

Everything runs in process; each model reads at most ``CASES`` cases of the corpus.
"""
from __future__ import annotations

import numpy as np
import pytest

from qconform.diagnosis import characterise as ch
from qconform.diagnosis.models import MODELS
from qconform.apps.diagnosis_run import run_cases
from qconform.diagnosis.runner import DeviationRunner

CASES = 400

#: model family (its module) -> (the model lent, words of its trigger the characterisation must say)
TRIGGERS = {
    "rounding": ("round-half-away", "is an exact tie"),
    "division": ("flush-denormals", "subnormal"),
    "zero_point": ("negative-infinity-to-max", "is -Inf"),
    "saturation": ("wrap-around", "outside the output type's finite range"),
    "encoding": ("float8-saturate-ignored", "its rounding is not a number"),
    "inputs": ("minifloat-input-nan-as-finite", "x is NaN"),
    "granularity": ("blocked-partial-block-previous-scale", "in the partial last block"),
    "dequantize": ("half-products-flushed", "in the output type's subnormal range"),
    "dynamic": ("dql-range-excludes-zero", "all of one sign, none zero"),
    # the pairs of products saturate only where there are pairs: K of 2 or more
    "matmul": ("qlinearmatmul-u8s8-pair-saturation", "K is not 1"),
    # the output has another element type: no element to compare, said by its problem
    "output_type": ("dq-output-dtype-ignored", "element type"),
    # a fused kernel's one float32 multiplier differs from the graph's steps next to a tie only: said
    # through the value the graph rounds (within float32 ulps) or the pattern's exact value (within
    # 2^-12 of a code of a tie), whichever separates better
    "fused": ("fused-qlinear-mul-float-multiplier", "of a tie"),
    # an exact requantisation differs from the graph where its exact value is a tie, which the graph's
    # float32 steps hide: said through the pattern's exact value
    "fixed_point": ("pattern-exact-half-up", "the pattern's exact value"),
    # a MatMulNBits kernel that zeroes large blocks: every element whose value is not +0 moves
    "blocked": ("nbits-large-block-zeros", "is not +0"),
    # the zero point added before rounding moves exactly the ties (said through the value rounded)
    "contrib_qlinear": ("qlinear-mul-zero-point-before-rounding", "a tie"),
    # the QNN HTP's MaxPool requantises half up: the codes that move sit on exact ties
    "qnn_htp": ("max-pool-pads-read-as-zero", "is an exact tie"),
    # an 8-bit <-> 16-bit Convert rounding ties down moves the values next to a tie
    "qnn_htp_requant": ("htp-convert-mixed-width-half-down", "of a tie"),
    # the HTP's 8-bit HardSwish rounds its exact value half to even on the code (z_y included): the codes
    # that move sit within float32 ulps of a tie, most with a zero point that is not 0
    "qnn_htp_elementwise": ("htp-hard-swish-exact-half-even", "of a tie"),
    # the HTP's 8-bit MaxPool requantises through float16 and rounds half away from zero: most codes that
    # move sit on exact ties, the rest within float16's spacing of one
    "qnn_htp_pools": ("htp-max-pool-float16-requant", "exact tie"),
    # the HTP's single QLinear conv/matmul: weights held as symmetric int8 and the accumulator floored on
    # its grid move one code, next to a tie of the text's value (within a bfloat16 ulp of it)
    "qnn_htp_qlinear": ("htp-qlinear-weights-symmetric-int8", "within half a bfloat16 ulp of a tie"),
}


def characterised(corpus, name: str, cases=None) -> dict:
    model = MODELS[name]
    if cases is None:
        fams = set(model.families)
        cases = [c for c in corpus.cases
                 if c.op in model.ops and model.applies(c.draft) and (not fams or c.family in fams)][:CASES]
    by_id = {c.id: c for c in cases}
    run = run_cases(DeviationRunner(model=name), cases, diagnose=False)  # no model explains anything
    assert any(r["verdict"] == "fail" for r in run.records), f"{name} fails none of its {len(cases)} cases"
    return ch.report_section(run.records, lambda ids: {i: by_id[i] for i in ids if i in by_id}, None)


def said(section: dict) -> list[str]:
    """The top sentence across groups and of every group (its description, or its problems)."""
    out = [d["sentence"] for d in ((section.get("overall") or {}).get("descriptions") or [])[:1]]
    for g in section["groups"]:
        out += [d["sentence"] for d in (g.get("descriptions") or [])[:1]]
        out += [s["problem"] for s in g.get("structural") or ()]
    return out


def test_every_model_family_lends_a_model():
    """A family is a module of qconform/diagnosis/models that declares models (its ``DEVIATIONS``)."""
    import importlib
    import pkgutil

    from qconform.diagnosis import models

    declared = {}
    for info in pkgutil.iter_modules(models.__path__):
        mod = importlib.import_module(f"{models.__name__}.{info.name}")
        if getattr(mod, "DEVIATIONS", None):
            declared[info.name] = {d.name for d in mod.DEVIATIONS}
    assert set(declared) == set(TRIGGERS)
    for family, (name, _) in TRIGGERS.items():
        assert name in declared[family], (family, name)


@pytest.mark.parametrize("family", list(TRIGGERS))
def test_held_out_model_gets_its_trigger_stated(corpus, family):
    name, trigger = TRIGGERS[family]
    sentences = said(characterised(corpus, name))
    assert sentences, f"{name}: no characterisation"
    top = sentences[0]
    hits = sum(trigger in s for s in sentences)
    # across groups the top description states it, or most groups' own do
    assert trigger in top or hits * 2 >= len(sentences), (name, trigger, sentences[:4])


def test_flushed_subnormal_scales_are_named(corpus):
    """The GPU run's unexplained groups: a kernel that reads a subnormal scale as zero."""
    name = "constant-subnormals-flushed"
    cases = [c for c in corpus.cases if c.family in ("specials", "special-scales") and MODELS[name].applies(c.draft)]
    section = characterised(corpus, name, cases[:CASES])
    top = section["overall"]["descriptions"][0]
    assert "the scale is subnormal" in top["sentence"] or "the scale is a positive subnormal" in top["sentence"], top
    assert top["recall"] == 1.0


def test_sampled_counts_say_so():
    """A table thinned to its budget keeps both sides and says its counts are of examined elements."""
    from qconform.diagnosis.features import Rows

    n = 10_000
    dev = np.zeros(n, bool)
    dev[::100] = True
    rows = Rows(n, {"a": np.arange(n) % 7}, dev)
    thin = ch._thin(rows, 1000)
    assert thin.n == 1000 and thin.deviating.sum() == dev.sum()


class _LastCodeHigh:
    """cpu-ref, but the last element of every output comes back one code higher (wrapping): a
    runtime whose loop tail is off by one, on an op no deviation model covers (QLinearConcat)."""

    name = "cpu-ref-last-code-high"

    def __init__(self) -> None:
        from qconform.runners.cpu_ref import CpuRefRunner

        self.ref = CpuRefRunner()

    def describe(self) -> dict:
        return {**self.ref.describe(), "name": self.name}

    def prepare(self, model):
        run = self.ref.prepare(model)

        def deviating(feeds):
            outs = [np.array(o, copy=True) for o in run(feeds)]
            for o in outs:
                flat = o.reshape(-1)
                if flat.size and flat.dtype.kind in "iu":
                    flat[-1] = (flat[-1:].astype(np.int64) + 1).astype(flat.dtype)[0]
            return outs

        return deviating


def test_a_variadic_op_failure_is_characterised(corpus):
    """QLinearConcat's list members (X0, X0_scale, ...) are not declared one by one: the features
    read its declared inputs and the characterisation describes the failure instead of raising."""
    cases = [c for c in corpus.cases if c.op == "QLinearConcat"][:40]
    by_id = {c.id: c for c in cases}
    run = run_cases(_LastCodeHigh(), cases, diagnose=False)
    assert any(r["verdict"] == "fail" for r in run.records)
    section = ch.report_section(run.records, lambda ids: {i: by_id[i] for i in ids if i in by_id}, None)
    assert "problem" not in section, section.get("problem")
    groups = [g for g in section["groups"] if g["op"] == "QLinearConcat"]
    assert groups and all(g["descriptions"] for g in groups), groups

"""The edge families: deterministic, valid, unique names, and each catches a realistic wrong kernel.

For every family there is at least one wrong implementation
(tests/wrong_runners.py) that fails some of the family's corpus cases, while cpu-ref passes them."""
from __future__ import annotations

import hashlib
import itertools

import numpy as np
import pytest
from hypothesis import find, given, settings, strategies as st

from qconform import dtypes, schemas
from qconform.compare import compare
from qconform.generators import (floatkinds, granularity, packing, precision, qdq, random, saturation, shapes,
                                    specials, strategies, ties)
from qconform.model import build_model
from qconform.oracle import evaluate
from qconform.runner import prepare
from qconform.runners.cpu_ref import CpuRefRunner
from wrong_runners import BUGS, WrongRunner

MODULES = [ties, saturation, specials, floatkinds, packing, granularity, shapes, precision, random]

# family -> wrong implementations it must catch (the first one is the family's own target).
CATCHES = {
    "ties": ["round-half-away", "multiply-by-reciprocal", "truncating-output-rounding"],
    "saturation": ["wrap-instead-of-saturate", "symmetric-clamp"],
    "specials": ["x86-float-to-int-cast"],
    "floatkinds": ["float8-always-saturates"],
    "packing": ["swapped-nibbles"],
    "granularity": ["wrong-partial-block", "negative-axis-miscounted"],
    "shapes": ["rank0-promoted"],
    "precision": ["quotient-in-float64", "distributed-dequantize"],
    "random": ["truncation", "zero-point-ignored"],
}


def _digest(drafts) -> str:
    h = hashlib.sha256()
    for d in drafts:
        h.update(f"{d.id}|{sorted(d.attrs.items())}".encode())
        for a in d.inputs:
            if a is not None:
                h.update(np.ascontiguousarray(dtypes.get(a.type).to_bits(a.value)).tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.FAMILY)
def test_generator_is_deterministic_and_valid(mod):
    first = list(itertools.islice(mod.generate(), 150))
    assert first, f"family {mod.FAMILY} produced no cases"
    assert _digest(first) == _digest(itertools.islice(mod.generate(), 150))
    for d in first:
        assert d.family == mod.FAMILY and d.clause
        evaluate(d)  # raises InvalidModel for a draft the schema rejects


def test_case_ids_unique_and_families_complete(corpus):
    ids = [c.id for c in corpus.cases]
    assert len(ids) == len(set(ids))
    families = {c.family for c in corpus.cases}
    assert {m.FAMILY for m in MODULES} <= families


def test_seeds_come_from_sha256_not_hash():
    assert qdq.seed("QuantizeLinear-21/float32-int8", "random") == int.from_bytes(
        hashlib.sha256(b"QuantizeLinear-21/float32-int8/random").digest()[:8], "little")


def test_neighbours_are_one_code_apart():
    t = dtypes.get("float8e4m3fn")
    v = np.array([1.0, -1.0, 0.0, 448.0])
    assert qdq.nextup(v, t).tolist()[:3] == [1.125, -0.9375, 2.0 ** -9]
    assert qdq.nextdown(v, t).tolist() == [0.9375, -1.125, -(2.0 ** -9), 416.0]


@pytest.mark.parametrize("name", list(dtypes.TYPES))
@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(data=st.data())
def test_strategies_draw_every_kind_of_element(name, data):
    t = dtypes.get(name)
    kind = data.draw(st.sampled_from([strategies.finite, strategies.special, strategies.bit_patterns]))
    arr = data.draw(strategies.arrays(t, (3,), kind(t)))
    assert arr.dtype == t.dtype and arr.shape == (3,)
    assert np.array_equal(t.from_bits(t.to_bits(arr)).view(t.bits_dtype) if t.is_float else t.from_bits(t.to_bits(arr)),
                          arr.view(t.bits_dtype) if t.is_float else arr)


@pytest.mark.parametrize("code", [0x7C, 0xFC, 0x00, 0x80, 0x7E, 0x7B])
def test_special_strategy_reaches_the_types_specials(code):
    t = dtypes.get("float8e5m2")  # +Inf, -Inf, +0, -0, a NaN, the largest finite value
    assert find(strategies.special(t), lambda c: c == code, settings=settings(database=None)) == code


@pytest.mark.parametrize("spec", [s for s in schemas.all_specs() if qdq.is_qdq(s)], ids=lambda s: s.key)
@settings(max_examples=15, derandomize=True, database=None, deadline=None)
@given(data=st.data())
def test_drawn_drafts_are_valid(spec, data):
    evaluate(data.draw(strategies.drafts(spec)))


def _run(runner, case) -> str:
    try:
        outputs = prepare(runner, build_model(case))({k: np.array(v) for k, v in case.feeds.items()})
    except Exception:
        return "error"
    return compare(case, outputs).verdict


@pytest.mark.parametrize("family,bug", [(f, b) for f, bugs in CATCHES.items() for b in bugs])
def test_family_catches_a_wrong_implementation(corpus, family, bug):
    cases = [c for c in corpus.cases if c.family == family and not c.domain and c.op in qdq.QDQ_OPS]
    assert cases, f"no {family} cases in the corpus"
    wrong = WrongRunner(bug)
    caught = next((c for c in cases if _run(wrong, c) != "pass"), None)
    assert caught is not None, f"no {family} case catches {bug}"
    ref = CpuRefRunner()
    sample = cases[:: max(1, len(cases) // 150)] + [caught]
    failing = [c.id for c in sample if _run(ref, c) != "pass"]
    assert not failing, f"cpu-ref fails {failing[:5]}"


def test_every_bug_is_used():
    assert set(BUGS) >= {b for bugs in CATCHES.values() for b in bugs}


def test_applicability_follows_the_registry():
    for c in qdq.combos():
        assert packing.applies(c.spec, c.types) == c.q.packed
        assert saturation.applies(c.spec, c.types) == (c.quantize and c.y.is_integer)
        if floatkinds.applies(c.spec, c.types):
            assert c.q.is_float or c.s.name == "float8e8m0"


def test_qlinearconv_depth_follows_the_quantizers_formats(corpus):
    """semantics.md#qlconv-formula: all eight combinations are in the corpus; U8U8, U8S8 and S8S8
    (y in x's type) get every family, the other five only ``basic`` and ``saturation``."""
    from qconform.generators import conv
    families: dict[str, set[str]] = {}
    for c in corpus.cases:
        if c.id.startswith("QLinearConv-10/"):
            families.setdefault(c.id.split("/")[1], set()).add(c.family)
    assert len(families) == 8
    for types, fams in families.items():
        x, w, y = types.split("-")[:3]
        if x == y and (x, w) != ("int8", "uint8"):
            assert fams == set(conv.FAMILIES), types
        else:
            assert fams == {"basic", "saturation"}, types

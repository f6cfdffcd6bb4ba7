"""The combinations come from the schemas, every family that applies to
one has a case for it in the corpus, and ``qconform coverage`` prints the table."""
from __future__ import annotations

from qconform import coverage, schemas
from qconform.cli import main
from qconform.generators import FAMILIES
from qconform.plugin import default_golden


def test_combinations_are_the_schemas_own():
    combos = coverage.combinations()
    assert len(combos) == sum(len(s.combinations()) for s in schemas.all_specs())
    assert len({c.key for c in combos}) == len(combos)  # a type signature names one combination
    keys = {c.spec.key for c in combos}
    assert {"QuantizeLinear-28", "DequantizeLinear-10", "DequantizeLinear-28"} <= keys


def test_every_family_with_applies_is_enumerated():
    fams = coverage.families()
    assert {"ties", "saturation", "specials", "floatkinds", "packing", "granularity", "shapes", "precision",
            "random"} <= {f.name for f in fams}
    assert {f.key for f in fams} <= set(FAMILIES)


def test_no_applicable_combination_lacks_a_case(corpus):
    gaps = coverage.missing(corpus.cases)
    listing = "\n".join(f"  {key} {types}: no {fam} case" for key, types, fam in gaps[:50])
    assert not gaps, f"{len(gaps)} applicable (combination, family) pair(s) without a case:\n{listing}"


def test_missing_reports_a_gap():
    assert ("QuantizeLinear-21", "float32-int4", "packing") in coverage.missing([])


def test_cli_prints_the_table(capsys):
    rc = main(["coverage", "--dir", str(default_golden())])
    out = capsys.readouterr().out
    assert rc == 0, out[-2000:]
    assert "QuantizeLinear-28" in out and "float32-float8e8m0-int4" in out and "0 applicable" in out

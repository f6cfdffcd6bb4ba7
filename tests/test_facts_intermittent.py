"""An intermittent erratum: a source whose outcome on the same cases varies from run to run
(onnxruntime-web's read past a missing trailing input traps or not by what the WebAssembly heap held
before, E364). The fact accounts for the disagreement when it occurs and does not claim the example
always fails; everything else about facts stays as strict as before."""
from __future__ import annotations

import pytest

from qconform import facts
from qconform.facts.observe import Result, explains, shows
from qconform.verdicts import ERROR, FAIL, PASS, UNSUPPORTED

CASE = "com.microsoft.QLinearLeakyRelu-1/int8-float32/basic/no-zero-points"
ROW = f'''source = "onnxruntime-web"

[[fact]]
id = "E9001"
kind = "{{kind}}"
versions = ">=1.30.0"
op_versions = "QLinearLeakyRelu-1 without Y_zero_point"
cases = ["{CASE}"]
example = "{CASE}"
intermittent = {{flag}}
does = "reads past the inputs"
spec = "Default value is 0 if it's not specified."
'''


def _fact(kind: str = "erratum", flag: str = "true") -> facts.Fact:
    return facts.parse("onnxruntime-web", ROW.format(kind=kind, flag=flag), known_readings=set()).facts[0]


def test_an_intermittent_erratum_explains_the_error_and_shows_whether_the_example_fails_or_passes():
    f = _fact()
    assert f.intermittent
    trapped = Result(ERROR, message="WebAssembly trap: RuntimeError: memory access out of bounds")
    assert explains(f, CASE, trapped) and explains(f, CASE, Result(FAIL))
    for seen in (trapped, Result(PASS, reading="r", first="r")):
        assert shows(f, {CASE: seen})[0]
    # a refusal is something else: it needs an unsupported fact, and an intermittent erratum does not show it
    refused = Result(UNSUPPORTED, message="cannot carry INT64")
    assert not explains(f, CASE, refused) and not shows(f, {CASE: refused})[0]
    # the example must still be observed
    assert not shows(f, {})[0]


def test_a_plain_erratum_still_fails_to_show_on_a_pass():
    f = _fact(flag="false")
    assert not f.intermittent
    assert not shows(f, {CASE: Result(PASS, reading="r", first="r")})[0]


@pytest.mark.parametrize("kind", ["unsupported", "oracle-gap"])
def test_only_an_erratum_is_intermittent(kind):
    with pytest.raises(facts.FactsError, match="only an erratum is intermittent"):
        _fact(kind=kind)


def test_intermittent_is_a_boolean_and_survives_a_round_trip():
    with pytest.raises(facts.FactsError, match="true or false"):
        facts.parse("onnxruntime-web", ROW.format(kind="erratum", flag='"yes"'), known_readings=set())
    ff = facts.parse("onnxruntime-web", ROW.format(kind="erratum", flag="true"), known_readings=set())
    text = facts.dump(ff)
    assert "intermittent = true" in text
    assert facts.parse("onnxruntime-web", text, known_readings=set()).facts == ff.facts
    plain = facts.dump(facts.parse("onnxruntime-web", ROW.format(kind="erratum", flag="false"), known_readings=set()))
    assert "intermittent" not in plain


def test_the_bundled_web_fact_is_intermittent_and_covers_both_ops():
    row = next(f for f in facts.all_facts() if f.id == "E364")
    assert row.source == "onnxruntime-web" and row.intermittent and row.kind == "erratum"
    assert row.covers(CASE) and row.covers(CASE.replace("LeakyRelu", "Sigmoid"))


# ----------------------------------------------------------------------------------------------
# A fact whose example the source never finishes (IREE's Pad mode=wrap, E1784)
# ----------------------------------------------------------------------------------------------
def test_only_an_erratum_hangs_and_hangs_survives_a_round_trip():
    hanging = ROW.format(kind="erratum", flag="false").replace("intermittent = false", "hangs = true")
    ff = facts.parse("onnxruntime-web", hanging, known_readings=set())
    assert ff.facts[0].hangs and "hangs = true" in facts.dump(ff)
    assert facts.parse("onnxruntime-web", facts.dump(ff), known_readings=set()).facts == ff.facts
    with pytest.raises(facts.FactsError, match="only an erratum hangs"):
        facts.parse("onnxruntime-web", hanging.replace('kind = "erratum"', 'kind = "unsupported"'), known_readings=set())
    with pytest.raises(facts.FactsError, match="hangs is true or false"):
        facts.parse("onnxruntime-web", hanging.replace("hangs = true", 'hangs = "yes"'), known_readings=set())


def test_an_example_that_hangs_is_observed_with_the_short_timeout_and_shows_as_an_error():
    """The observer gives a hanging example ``HANG_TIMEOUT_S``, not a case's 120 s (a fault runner
    that sleeps on one case), and the fact that says it hangs shows."""
    from pathlib import Path

    from fault_runners import FAULTS

    from qconform import corpus
    from qconform.facts import observe

    hang = next(cid for cid, f in FAULTS.items() if f == "hang")
    runner = f"{Path(__file__).with_name('fault_runners.py')}:FaultRunner"
    got = observe.observe(runner, corpus.DEFAULT_ROOT, probes=False, select=(hang,), hangs=frozenset({hang}))
    assert got[hang].verdict == ERROR and f"--case-timeout={observe.HANG_TIMEOUT_S:g}s" in got[hang].message
    row = facts.parse("onnxruntime-web", ROW.format(kind="erratum", flag="false").replace(
        "intermittent = false", "hangs = true").replace(CASE, hang), known_readings=set()).facts[0]
    assert shows(row, got)[0]

"""A certification's report, assembled the one way both front-ends (``qconform certify`` and the pytest
plugin) assemble it: the per-case records into report.json (``report.model.build``), the diagnosis's
ranking of deviation models over the run's failures, the characterisation of what no model explains
and of the runner's errors, and the gate (baseline, expiry, the floor of collected cases). ``report/``
only renders and writes what this returns.
"""
from __future__ import annotations

from qconform.report import model


def assemble(records: list[dict], collected: list[dict], run_meta: dict, *, cases_of, baseline, today,
             min_cases: int | None, filters: list[str], corpus_size: int, strict_nan: bool,
             profile: str) -> tuple[dict, dict[str, str]]:
    """The report of a run, as both front-ends build it: the records, the diagnosis ranking and the
    gate (the floor: ``min_cases``, else the whole corpus, or the runtime's declared scope of it, unless
    a selection was made). Returns the
    report and the whole runner texts too long for it (for ``write``)."""
    from qconform.diagnosis import characterise
    from qconform.diagnosis.diagnose import report_section
    from qconform.gating import baseline as baseline_mod

    texts: dict[str, str] = {}
    cases_of = _read_once(cases_of)
    report = model.build(records, collected, run_meta, texts)
    report["diagnosis"] = report_section(records, cases_of, strict_nan=strict_nan, profile=profile)
    try:
        report["characterisation"] = characterise.report_section(records, cases_of, report["diagnosis"])
    except Exception as exc:  # noqa: BLE001 - advice only: a report is never lost to it, but it shows
        report["characterisation"] = {"groups": [], "overall": None, "errors": [],
                                      "problem": f"{type(exc).__name__}: {exc}"}
    took = report["characterisation"].pop("seconds", None)  # how long it took is timing, not a finding
    if took is not None:
        report["timing"]["characterisation_s"] = took
    # the floor: every case the run was to collect -- the corpus, or the runtime's declared scope of it
    # (a scope is no selection of the user's: a conftest dropping cases must still show); none where
    # the user selected
    left_out = int(((run_meta.get("invocation") or {}).get("scope") or {}).get("left_out") or 0)
    chosen = [f for f in filters if f != "scope"]
    floor = min_cases if min_cases is not None else (0 if chosen else corpus_size - left_out)
    report["gate"] = baseline_mod.gate(report, baseline, today, min_cases=floor, filtered=bool(filters))
    if (report.get("invocation") or {}).get("model"):  # a user's model: its whole-model check is gated too
        from qconform.gating import model_check

        model_check.gate(report)
    return report, texts


def _read_once(cases_of):
    """``cases_of`` reading each case from the corpus once for the whole assembly (the diagnosis's
    ranking and the characterisation often want the same groups' passing cases)."""
    held: dict = {}

    def read(ids) -> dict:
        ids = list(ids)
        missing = [i for i in ids if i not in held]
        if missing:
            held.update(cases_of(missing))
        return {i: held[i] for i in ids if i in held}

    return read

"""summary.md: a few lines of Markdown for a CI job summary or a pull-request comment.

Short on purpose: the verdict counts, the gate, then three lists kept apart -- new deviations (the
ones to act on), accepted ones (in the baseline, with their reasons) and fixed ones (baseline
entries this run no longer shows); report.html holds the rest.
"""
from __future__ import annotations

from collections import Counter, defaultdict

from qconform.verdicts import DEVIATING, FAIL, NOT_RUN, PASS, UNSUPPORTED, VERDICTS, Stale

MAX_ROWS = 10


def render(report: dict) -> str:
    r, c, g = report["runner"], report["counts"], report.get("gate") or {}
    from qconform.report.certificate import (GREEN, certified, coverage, other_corpus, packing_line, platforms,
                                             resumed_line, scope_line, tone, unauthenticated, withheld)

    runner = certified(r) + (f" {r['device']}" if r.get("device") and not r.get("execution_provider") else "")
    ok = g.get("passed", not any(c.get(v) for v in DEVIATING)) and report["complete"]
    deviating = sum(c.get(v, 0) for v in DEVIATING)
    if tone(report) == GREEN:  # the one rule report.html's colour follows too
        head = "✅ passed"
    elif not report["complete"]:  # an incomplete run passes nothing, whatever its cases did
        why = report.get("stopped") or ("interrupted" if report.get("interrupted") else "")
        head = f"⛔ incomplete: {c[NOT_RUN]} of {c['collected']} cases not run" + (f" ({why})" if why else "")
    elif not ok:
        head = "❌ failed"
    elif deviating:  # the gate passed on accepted deviations: still deviations, never a green tick
        head = f"⚠️ deviates: {deviating} deviation(s), every one accepted by the baseline (no new ones)"
    else:  # nothing deviates, and the run shows less than a conformance claim needs
        head = f"⚠️ {withheld(report) or 'no op version conformant'}"
    unverified = unauthenticated(report)
    lines = [f"## qconform: {runner} — {head}", ""]
    if unverified:
        lines += [f"**Device not authenticated**: results {unverified}.", ""]
    if (report.get("invocation") or {}).get("model"):  # a user's model: as certificate.json and stdout say it
        digest = str((report.get("corpus") or {}).get("digest") or "")
        lines += [f"**A user's model**: {coverage(report)}, drafted into a corpus of its own (digest "
                  f"{digest[:16] or '?'}…); no conformance is stated.", ""]
    elif other_corpus(report):
        lines += [f"**Another corpus**: run against {other_corpus(report)}; conformance is claimed only against "
                  "that corpus.", ""]
    if resumed_line(report):
        lines += [f"**Read back**: {resumed_line(report)}.", ""]
    if scope_line(report):
        lines += ["**Run in its declared scope**: " + scope_line(report).removeprefix("in its declared scope: ") + ".", ""]
    if not report["complete"]:
        lines += [f"**Incomplete run**{' (interrupted)' if report['interrupted'] else ''}: "
                  f"{c[NOT_RUN]} of {c['collected']} collected cases did not run"
                  + (f": {report['stopped']}" if report.get("stopped") else "") + ". No conformance is stated.", ""]
    shown = [v for v in VERDICTS if c.get(v) or v in (PASS, FAIL)]
    lines += ["| " + " | ".join(shown) + " | collected |", "|" + "---:|" * (len(shown) + 1),
              "| " + " | ".join(str(c.get(v, 0)) for v in shown) + f" | {c['collected']} |", ""]
    for msg in g.get("messages", []):
        lines.append(f"- ❌ {msg}")
    if packing_line(report):
        lines.append(f"- {packing_line(report)}")
    if g.get("baselined"):
        lines.append(f"- {g['baselined']} known deviation(s) covered by `{g['baseline']}`")
    for s in g.get("stale", []):
        if s.get("state") not in (Stale.FIXED, Stale.REDUNDANT):
            lines.append(f"- ⚠️ stale baseline entry `{s['id']}`: {s['why']}")
    redundant = sum(1 for s in g.get("stale", []) if s.get("state") == Stale.REDUNDANT)
    if redundant:
        lines.append(f"- {redundant} redundant baseline entr{'y' if redundant == 1 else 'ies'}: an entry before each "
                     "accepts its cases (`qconform baseline refresh` removes them)")

    new: dict[str, Counter] = defaultdict(Counter)
    accepted: dict[str, Counter] = defaultdict(Counter)
    for case in report["cases"]:
        if case["verdict"] in DEVIATING:
            (accepted if case.get("baseline") else new)[case["id"].split("/")[0]][case["verdict"]] += 1
    if new or accepted:
        lines += ["", "| op version | new deviations | accepted (baseline) |", "|---|---|---|"]
        for ov in sorted(set(new) | set(accepted)):
            cells = [", ".join(f"{n} {v}" for v, n in sorted(d[ov].items())) or "–" for d in (new, accepted)]
            lines.append(f"| {ov} | {cells[0]} | {cells[1]} |")
    reasons = Counter(c["baseline"] for c in report["cases"] if c["verdict"] in DEVIATING and c.get("baseline"))
    if reasons:
        lines += ["", "Accepted deviations (baseline reasons):", ""]
        lines += [f"- {n} case(s): {why}" for why, n in reasons.most_common(MAX_ROWS)]
    from qconform.report.certificate import behaviours

    rolled = behaviours(report)
    if rolled:
        lines += ["", "Deviations by behaviour:", "", "| behaviour | cases | accepted | op versions |", "|---|---:|---:|---|"]
        lines += [f"| {r['behaviour']} | {r['cases']} | {r['accepted']} | "
                  + ", ".join(sorted(r["op_versions"])[:4]) + (" …" if len(r["op_versions"]) > 4 else "") + " |"
                  for r in rolled[:MAX_ROWS]]
    top = sorted(report.get("reasons") or [], key=lambda r: -r["cases"])[:5]
    if top:
        lines += ["", f"Not supported by the runner ({c.get(UNSUPPORTED, 0)} case(s)), the top reasons:", ""]
        lines += [f"- {r['cases']} case(s): {r['text'][:200]}" for r in top]
    fixed = [s for s in g.get("stale", []) if s.get("state") == Stale.FIXED]
    if fixed:
        lines += ["", "Fixed (accepted deviations this run no longer shows):", ""]
        lines += [f"- `{s['id']}` ({s['why']}; was accepted because: {s['reason']})" for s in fixed[:MAX_ROWS]]
    failures = [f for f in report["failures"] if not f.get("baseline")]
    if failures:
        # One example per op version and type pair first: ten rows that show ten different problems.
        firsts = list({(f["op_version"], f["type_pair"]): f for f in reversed(failures)}.values())[::-1]
        lines += ["", "Deviations not in a baseline (one example per op version and type pair):", ""]
        for f in firsts[:MAX_ROWS]:
            first = f["first_mismatches"][0] if f["first_mismatches"] else None
            what = (f"`{first['output']}[{','.join(map(str, first['index']))}]` = {first['actual_hex']} "
                    f"({first['actual_value']}), expected {first['expected_hex']} ({first['expected_value']})"
                    if first else (f["problem"].splitlines() or [""])[0][:160])
            lines.append(f"- `{f['id']}` ({f['verdict']}): {what}")
        shown = min(len(firsts), MAX_ROWS)
        if len(failures) > shown:
            lines.append(f"- … {len(failures) - shown} more deviating case(s) in report.html")
    diag = report.get("diagnosis") or {}
    if diag.get("overall"):
        lines += ["", "Diagnosis (known deviations that reproduce the failures exactly):", ""]
        lines += [f"- `{o['model']}` explains {o['explained']} failing case(s)"
                  for o in diag["overall"] if o.get("explained")][:MAX_ROWS]
    from qconform.diagnosis.characterise import lines as characterised

    said = characterised(report.get("characterisation"))
    if said:
        lines += ["", "What no known deviation explains, characterised (qconform/docs/diagnosis.md#characterisation):", ""]
        lines += [f"- {line}" for line in said[:MAX_ROWS]]
        if len(said) > MAX_ROWS:
            lines.append(f"- … {len(said) - MAX_ROWS} more in report.html")
    if diag.get("errors"):
        lines += ["", "Diagnosis errors (a qconform bug: a deviation model raised instead of computing a case):", ""]
        lines += [f"- {e['error']} ({e['cases']} case(s))" for e in diag["errors"]][:MAX_ROWS]
    corpus = report["corpus"]
    plat, _, declared = platforms(report)  # where it ran elsewhere: the device's word, never this host's
    where = " · ".join(str(x) for x in (plat.get("label"), plat.get("platform")) if x) or "platform not declared"
    lines += ["", f"<sub>qconform {report['qconform_version']} · corpus {str(corpus.get('digest', ''))[:16]} · "
                  f"{report['timing'].get('duration_s', '?')} s · {where}" + (f" — {declared}" if declared else "")
                  + "</sub>", ""]
    return "\n".join(lines)

"""summary.md: a few lines of Markdown for a CI job summary or a pull-request comment.

Short on purpose: the verdict counts, the gate, the op versions that deviate and the first few
failing cases; report.html holds the rest.
"""
from __future__ import annotations

from collections import Counter, defaultdict

from qconform.report.model import BAD, VERDICTS

MAX_ROWS = 10


def render(report: dict) -> str:
    r, c, g = report["runner"], report["counts"], report.get("gate") or {}
    runner = " ".join(str(x) for x in (r.get("name"), r.get("version"), r.get("device")) if x)
    ok = g.get("passed", not any(c.get(v) for v in BAD)) and report["complete"]
    lines = [f"## qconform: {runner} — {'✅ passed' if ok else '❌ failed'}", ""]
    if not report["complete"]:
        lines += [f"**Incomplete run**{' (interrupted)' if report['interrupted'] else ''}: "
                  f"{c['not-run']} of {c['collected']} collected cases did not run.", ""]
    shown = [v for v in VERDICTS if c.get(v) or v in ("pass", "fail")]
    lines += ["| " + " | ".join(shown) + " | collected |", "|" + "---:|" * (len(shown) + 1),
              "| " + " | ".join(str(c.get(v, 0)) for v in shown) + f" | {c['collected']} |", ""]
    for msg in g.get("messages", []):
        lines.append(f"- ❌ {msg}")
    if g.get("baselined"):
        lines.append(f"- {g['baselined']} known deviation(s) covered by `{g['baseline']}`")
    for s in g.get("stale", []):
        lines.append(f"- ⚠️ stale baseline entry `{s['id']}`: {s['why']}")

    bad: dict[str, Counter] = defaultdict(Counter)
    for m in report["matrix"]:
        for v in BAD:
            if m["counts"].get(v):
                bad[m["op_version"]][v] += m["counts"][v]
    if bad:
        lines += ["", "| op version | deviations |", "|---|---|"]
        for ov, cnt in sorted(bad.items()):
            lines.append(f"| {ov} | " + ", ".join(f"{n} {v}" for v, n in sorted(cnt.items())) + " |")
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
    corpus = report["corpus"]
    lines += ["", f"<sub>qconform {report['qconform_version']} · corpus {str(corpus.get('digest', ''))[:16]} · "
                  f"{report['timing'].get('duration_s', '?')} s · {report['platform'].get('label', '')} · {report['platform'].get('platform', '')}</sub>", ""]
    return "\n".join(lines)

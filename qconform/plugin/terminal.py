"""The terminal: qconform's summary, last after pytest's short summary, and the rerun commands."""
from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import pytest

from qconform.plugin.items import short
from qconform.verdicts import DEVIATING, ERROR, FAIL, HEADLINE, INFO, PASS, UNSUPPORTED


def fast_teardown_lookup(config: pytest.Config) -> None:
    """pytest's FAILURES section looks for each failure's teardown output by scanning every report
    of the run: quadratic, ~34 ms per failure on the whole corpus. Index the scan once instead."""
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is None or not hasattr(tr, "_get_teardown_reports"):
        return
    cache: dict[str, list] = {}
    seen = [0]

    def teardown_reports(node_id):
        reports = tr.stats.get("", [])
        if len(reports) != seen[0]:
            cache.clear()
            for rep in reports:
                if getattr(rep, "when", None) == "teardown" and not hasattr(rep, "_pdbshown"):
                    cache.setdefault(rep.nodeid, []).append(rep)
            seen[0] = len(reports)
        return cache.get(node_id, [])

    tr._get_teardown_reports = teardown_reports


def rerun_hint(tr, config: pytest.Config, records) -> None:
    """How to run a deviating case again, in a form that works from any directory and install."""
    bad = sorted(r.id for r in records if r.verdict in DEVIATING)
    if not bad:
        return
    import shlex

    cmd = ["pytest", f"--runner={config.getoption('runner')}",
           *[f"--runner-opt={o}" for o in config.getoption("runner_opt") or []]]
    tr.write_line(f"{'rerun one case:':18}{shlex.join([*cmd, '--case', bad[0]])}")
    report_dir = config.getoption("report", None)
    if report_dir:
        label = f"rerun all {len(bad)}:"
        tr.write_line(f"{label:18}{shlex.join([*cmd, '--from-report', str(Path(report_dir) / 'report.json')])}")


def summary(tr, records) -> None:
    per_op: dict[str, Counter] = defaultdict(Counter)
    unsupported: Counter = Counter()
    for r in records:
        key = f"{r.domain + '.' if r.domain else ''}{r.op}-{r.opset}"
        per_op[key][r.verdict] += 1
        if r.verdict == UNSUPPORTED:
            unsupported[(key, short(r.problem, 120))] += 1
    tr.section("qconform summary")
    verdicts = HEADLINE
    tr.write_line(f"{'op-version':32} {'cases':>6} " + " ".join(f"{v:>11}" for v in verdicts))
    for key in sorted(per_op, key=lambda k: (k.rsplit('-', 1)[0], int(k.rsplit('-', 1)[1]))):
        cnt = per_op[key]
        other = sum(n for v, n in cnt.items() if v not in verdicts)  # crashed, timeout: counted as errors
        cells = [cnt[PASS], cnt[FAIL], cnt[ERROR] + other, cnt[UNSUPPORTED], cnt[INFO]]
        tr.write_line(f"{key:32} {sum(cnt.values()):>6} " + " ".join(f"{v:>11}" for v in cells))
    if unsupported:
        tr.write_line("not supported by the runner (cases, op-version, reason):")
        for (key, why), n in sorted(unsupported.items()):
            tr.write_line(f"  {n:>5}  {key}: {why}")

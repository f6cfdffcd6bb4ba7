"""The report: counts per (op version, reading), disagreements and the side reports (a)-(f)."""
from __future__ import annotations

import datetime
import subprocess
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TITLE = "# Independent oracle: QuantizeLinear, DequantizeLinear, QLinearMatMul, QLinearConv, ConvInteger, MatMulInteger"


def report(idx, results, out_scope, args, say, lines) -> int:
    rows: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # cases, elements, bad cases, bad elements
    for r in results:
        for grp, name, checked, bad in r["rows"]:
            row = rows[(grp, name)]
            row[0] += 1
            row[1] += checked
            row[2] += bool(bad)
            row[3] += bad
    say("| op version | reading | cases | elements checked | cases disagreeing | elements disagreeing |")
    say("|---|---|---|---|---|---|")
    for (grp, name), (nc, ne, bc, be) in sorted(rows.items()):
        say(f"| {grp} | {name} | {nc} | {ne} | {bc} | {be} |")
    dis = [d for r in results for d in r["dis"]]
    say()
    say(f"## Disagreements ({len(dis)} elements)")
    shown: dict[tuple, int] = defaultdict(int)
    for d in dis:
        k = (d[0].split("/")[0], d[1])
        shown[k] += 1
        if shown[k] <= args.examples:
            say(f"- `{d[0]}` reading `{d[1]}` [{d[2]}]: {d[3]}: {d[4]}")
    for k, n in sorted(shown.items()):
        if n > args.examples:
            say(f"- … {n - args.examples} more in {k[0]} `{k[1]}`")
    sections = [
        ("a", "(a) integer-quotient readings whose golden float result is -0 where the int32 quotient is 0",
         lambda e: f"`{e[0]}` `{e[1]}` [{e[2]}]"),
        ("b", "(b) elements masked don't-care in a reading whose own arithmetic defines them",
         lambda e: f"`{e[0]}` `{e[1]}` [{e[2]}]: mine {e[3]}"),
        ("b2", "(b') elements the golden checks where the reading leaves them undefined",
         lambda e: f"`{e[0]}` `{e[1]}` [{e[2]}]: golden {e[3]}"),
    ]
    for key, title, fmt in sections:
        items = [e for r in results for e in r[key]]
        cases = {e[0] for e in items}
        say()
        say(f"## {title}: {len(items)} elements in {len(cases)} cases")
        for e in items[:args.examples * 2]:
            say(f"- {fmt(e)}")
    def grouped(title: str, pairs: list[tuple[str, str]], what: str) -> None:
        say()
        say(f"## {title}: {len(pairs)} in {len({cid for cid, _ in pairs})} cases")
        by: dict[tuple, list[str]] = defaultdict(list)
        for cid, name in pairs:
            by[(cid.split("/")[0], name)].append(cid)
        for (grp, name), cids in sorted(by.items()):
            say(f"- {grp}, {what} `{name}`: {len(cids)} cases, e.g. `{cids[0]}`")

    grouped("(c) cases where no reading equals the text's plain reading (exact quotient or product, rounded "
            "once, zero point added, saturate as the text says)", [r["c"] for r in results if r["c"]],
            "first division/multiplication reading")
    grouped("(d) permitted readings (semantics.md) whose result no reading of the case carries",
            [e for r in results for e in r["d"]], "reading")
    es = [e for r in results for e in r["e"]]
    say()
    say(f"## (e) readings the case carries that semantics.md does not permit, or a first reading that is "
        f"not the strict one: {len(es)}")
    for e in es[:args.examples * 4]:
        say(f"- `{e[0]}` `{e[1]}`: {e[2]}")
    fs = [e for r in results for e in r["f"]]
    say()
    say(f"## (f) readings where q + zp rounded in the reading's precision P converts to another code than "
        f"the exact sum (semantics.md q-float8 says generators avoid this): {sum(e[2] for e in fs)} elements "
        f"in {len({e[0] for e in fs})} cases")
    for e in fs[:args.examples * 2]:
        say(f"- `{e[0]}` `{e[1]}`: {e[2]} elements")
    say()
    say(f"NaN rule applied: any NaN matches any NaN (semantics.md, principles). Elements where both are NaN "
        f"but the codes differ: {sum(r['nan_bits'] for r in results)} (output type, golden code, this "
        f"script's canonical code: count):")
    kinds: dict[tuple, int] = defaultdict(int)
    for r in results:
        for k, n in r.get("nan_kinds", {}).items():
            kinds[k] += n
    for (t, g, mcode), n in sorted(kinds.items()):
        say(f"- {t} golden {g}, mine {mcode}: {n}")
    skipped = [e for r in results for e in r["skipped"]]
    reasons: dict[str, int] = defaultdict(int)
    for _, _, why in skipped:
        reasons[why.split(":")[0] if why.startswith("crash") else why] += 1
    for why, n in out_scope.items():
        reasons[why] += n
    say()
    say("## Skipped")
    for e in skipped[:20]:
        say(f"- `{e[0]}` `{e[1]}`: {e[2]}")
    n_read = sum(len(r["rows"]) for r in results)
    n_cases = sum(1 for r in results if r["rows"])
    nd = sum(len(r["dis"]) for r in results)
    reason_text = ", ".join(f"{n} {w}" for w, n in sorted(reasons.items())) or "none"
    say()
    say(f"independent oracle: {n_cases} cases, {n_read} readings checked, {nd} disagreements, "
        f"{sum(reasons.values())} skipped ({reason_text})")
    if args.md:
        def git(*a):
            return subprocess.run(["git", *a], capture_output=True, text=True, cwd=ROOT).stdout.strip()
        golden = git("log", "-1", "--format=%H", "--", "qconform/golden")
        head = [TITLE, "",
                f"Run {datetime.date.today().isoformat()} with `python scripts/independent_oracle.py "
                f"--case '{args.case}' -j {args.j}` at commit `{git('rev-parse', 'HEAD')}`; corpus digest "
                f"`{idx.digest}`, the corpus of commit `{golden}` (the last commit that changed "
                f"qconform/golden).", ""]
        Path(args.md).write_text("\n".join(head + lines) + "\n")
    return 1 if nd else 0

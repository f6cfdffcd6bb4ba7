"""``qconform findings``: the command line."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

from qconform.apps.findings._common import default_out
from qconform.apps.findings.generate import generate
from qconform.apps.findings.groups import load_report
from qconform.apps.findings.index import write_index
from qconform.apps.findings.templates import TEMPLATES, generic_template
from qconform.declarations.runtimes import Template


def add_arguments(p) -> None:
    p.add_argument("--runners", metavar="A,B", default=None,
                   help=f"runtimes (default: the installed ones of {', '.join(TEMPLATES)} that have facts, plus "
                        "every runner a --from-report names)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="output folder (default: qconform/docs/findings in a source checkout)")
    p.add_argument("--from-report", metavar="REPORT", action="append", default=[],
                   help="report.json (or its directory) of pytest --runner=NAME --report=DIR: the failing cases "
                        "of NAME come from it instead of a run; repeatable (several reports of one runner, e.g. "
                        "-m slices, are merged)")
    p.add_argument("--cases", metavar="GLOB", default=None,
                   help="without a report: run only the corpus cases whose id matches (fnmatch)")
    p.add_argument("--max-per-runtime", type=int, default=0, metavar="N",
                   help="at most N findings per runtime, the groups with the most failing cases (0: all)")
    p.add_argument("--rediagnose", action="store_true",
                   help="with --from-report: run and diagnose again the failing cases the report names no "
                        "model for (a report older than this checkout's models)")
    p.add_argument("--clean", action="store_true", help="remove the runtimes' existing directories first")
    p.add_argument("--index-only", action="store_true", help="only rewrite index.md from the directories")


def main(args) -> int:
    from qconform import corpus
    from qconform.facts import SOURCES

    out = Path(args.out) if args.out else default_out()
    if args.index_only:
        print(f"wrote {write_index(out)}")
        return 0
    digest = corpus.verify(corpus.DEFAULT_ROOT)
    reports: dict[str, list[dict]] = {}
    identities: dict[str, dict] = {}
    characterised: dict[str, dict] = {}
    for r in args.from_report:
        try:
            name, failures, identities[name], said = load_report(Path(r), digest)
        except (OSError, ValueError, KeyError) as exc:
            print(f"qconform: {exc}", file=sys.stderr)
            return 2
        if said:  # slices of one runner: each its own characterisation, put side by side
            mine = characterised.setdefault(name, {"groups": [], "overall": None, "errors": []})
            mine["groups"] += said.get("groups") or []
            mine["errors"] += said.get("errors") or []
        seen = {f["id"] for f in reports.get(name, ())}
        reports.setdefault(name, []).extend(f for f in failures if f["id"] not in seen)  # slices of one runner
    if args.runners:
        names = [n.strip() for n in args.runners.split(",") if n.strip()]
    elif reports:  # the runtimes of the reports given, and only those
        names = list(reports)
    else:
        names = [n for n in TEMPLATES if n in SOURCES and TEMPLATES[n].installed_version()]
    templates: dict[str, Template] = {}
    for n in names:
        if n not in TEMPLATES and n not in identities:
            print(f"qconform: {n}: no script template and no report of it: give its report (--from-report "
                  f"DIR/report.json, which says how to load its runner); templates exist for "
                  f"{', '.join(TEMPLATES)}", file=sys.stderr)
            return 2
        try:
            templates[n] = TEMPLATES[n] if n in TEMPLATES else generic_template(n, identities[n])
        except ValueError as exc:
            print(f"qconform: {exc}", file=sys.stderr)
            return 2
    status = 0
    for name in names:
        tpl = templates[name]
        version = tpl.installed_version()
        if version is None:
            print(f"qconform: {name}: {tpl.package} is not installed here; skipped", file=sys.stderr)
            status = 1
            continue
        print(f"{name} {version}:")
        if args.clean and (out / name).exists():
            shutil.rmtree(out / name)
        try:
            res = generate(name, out, failures=reports.get(name), select=args.cases, limit=args.max_per_runtime,
                           rediagnose=args.rediagnose, identity=identities.get(name),
                           characterisation=characterised.get(name))
        except Exception as exc:  # noqa: BLE001 - one runtime failing must not lose the others
            print(f"qconform: {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
            status = 1
            continue
        print(f"  {len(res.written)} finding(s) written, {len(res.skipped)} skipped")
        for key, why in res.skipped:
            print(f"    skipped {key}: {why}")
    print(f"wrote {write_index(out)}")
    return status

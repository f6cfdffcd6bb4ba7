"""``qconform scoreboard``: the command line."""
from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path

from qconform.apps.scoreboard._common import DATA, _order, default_out, runtimes
from qconform.apps.scoreboard.data import collect, found_reports, merge
from qconform.apps.scoreboard.render import write
from qconform.apps.scoreboard.run import _say, installed, run_all
from qconform.apps.scoreboard.freshness import stale
from qconform.report.model import ReportError
from qconform.runner import BUNDLED, ENTRY_POINT_GROUP


def _known(name: str) -> bool:
    return name in BUNDLED or any(ep.name == name for ep in entry_points(group=ENTRY_POINT_GROUP))


def _rel(p: Path) -> str:
    """A path as the user would type it: relative to the current directory where it is below it."""
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def main(args) -> int:
    out = Path(args.out) if args.out else default_out()
    if args.check:
        reasons = stale(out)
        for r in reasons:
            print(f"qconform: stale scoreboard {_rel(out)}: {r}", file=sys.stderr)
        if not reasons:
            print(f"{_rel(out)}: current (corpus digest and installed runtime versions match)")
        return 1 if reasons else 0
    asked = [n.strip() for n in (args.runners or "").split(",") if n.strip()]
    bad = [n for n in asked if not _known(n)]
    if bad:
        print(f"qconform: unknown runner(s) {', '.join(bad)}; bundled: {', '.join(BUNDLED)}", file=sys.stderr)
        return 2
    if args.from_reports:
        root = Path(args.from_reports)
        names = [n for n in found_reports(root) if not asked or n in asked]
        missing = [n for n in asked if n not in names]
        if missing:
            print(f"qconform: no report.json for {', '.join(missing)} under {root}", file=sys.stderr)
            return 2
        if not names:
            print(f"qconform: no NAME/report.json under {root}", file=sys.stderr)
            return 2
        return _render(root, names, out, add=args.add)
    if args.add:
        print("qconform: --add goes with --from-reports DIR (the rows to add come from reports)", file=sys.stderr)
        return 2
    names = []
    for name in sorted(dict.fromkeys(asked or runtimes()), key=_order):
        info, why = installed(name)
        if info is None:
            _say(f"{name}: skipped: {why}")
        else:
            names.append(name)
    if not names:
        print("qconform: no runtime to run", file=sys.stderr)
        return 2
    if (args.cluster or args.scheduler) and args.marker:
        print("qconform: -m selects pytest items; on a cluster the runtimes run through qconform certify, "
              "which takes the whole corpus", file=sys.stderr)
        return 2
    jobs = args.jobs or max(1, (os.cpu_count() or 1) // 2)
    with contextlib.ExitStack() as stack:
        scheduler = args.scheduler or (_start_cluster(stack, args.cluster) if args.cluster else None)
        if scheduler and not args.jobs:
            jobs = len(names)  # the cluster spreads their cases: every runtime at once
        _say(f"running {', '.join(names)} over the corpus, {jobs} at a time"
             + (f" (cases: -m {args.marker!r})" if args.marker else "")
             + (f" on the Dask cluster at {scheduler}" if scheduler else ""))
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="qconform-scoreboard-"))
        root = Path(args.reports) if args.reports else Path(tmp)
        done = run_all(names, root, jobs, args.marker, scheduler=scheduler)
        if not done:
            print("qconform: no runtime produced a report", file=sys.stderr)
            return 2
        code = _render(root, done, out)
    return code or (1 if len(done) < len(names) else 0)


def _start_cluster(stack: contextlib.ExitStack, spec: str) -> str:
    """A LocalCluster for the whole scoreboard (``--cluster local:N``); its scheduler's address."""
    import dask

    from qconform import cluster

    stack.enter_context(dask.config.set(cluster.local_config()))
    local = cluster.local_cluster(cluster.parse_cluster(spec))
    stack.callback(cluster.quietly_close, None, local)
    return local.scheduler_address


def _render(root: Path, names: Sequence[str], out: Path, add: bool = False) -> int:
    try:
        data = collect(root, names, out)
        if add:
            data = merge(json.loads((out / DATA).read_text(encoding="utf-8")), data)
    except (ReportError, OSError, ValueError, KeyError) as exc:
        print(f"qconform: {exc}", file=sys.stderr)
        return 2
    for p in write(data, out):
        print(f"wrote {_rel(p)}")
    return 0


def add_arguments(p) -> None:
    p.add_argument("--runners", metavar="A,B,C", default=None,
                   help=f"runners to compare (default: every installed one of {', '.join(runtimes())})")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="runners run in parallel (default: one per 2 cores; each run uses 2 worker processes)")
    p.add_argument("--reports", metavar="DIR", default=None,
                   help="keep each runner's report directory as DIR/NAME (default: a temporary directory); "
                        "inside --out, the scoreboard links to them")
    p.add_argument("--from-reports", metavar="DIR", default=None,
                   help="run nothing: render from the report directories DIR/NAME/report.json")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--cluster", metavar="local:N", default=None,
                       help="run every runtime at once on a Dask LocalCluster of N workers started here (each "
                            "runtime through qconform certify --scheduler); needs qconform[dask]")
    where.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="run the runtimes on an existing Dask cluster (its workers need every runtime installed)")
    p.add_argument("--add", action="store_true",
                   help="with --from-reports: add (or replace) the rows of the runtimes under DIR and keep the "
                        "other rows of the scoreboard in --out as they are (a runtime measured in another "
                        "environment, e.g. an onnxruntime variant with its execution provider)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="where scoreboard.md, scoreboard.html and scoreboard.json go (default: "
                        "qconform/docs/scoreboard in a source checkout, else ./qconform-scoreboard)")
    p.add_argument("-m", dest="marker", metavar="EXPR", default=None,
                   help="only the cases matching this pytest marker expression (a partial scoreboard, "
                        "marked as such), e.g. \"op_QuantizeLinear and opset_21\"")
    p.add_argument("--check", action="store_true",
                   help="run nothing: exit 1 with the reasons when the scoreboard in --out no longer matches "
                        "the corpus digest or an installed runtime's version")

"""``qconform sweep``: the command line over the sweep table, goldens and executors."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from qconform.progress import StateError
from qconform.sweep.domains import domain
from qconform.sweep.execute import Summary, execute, regenerate
from qconform.sweep.goldens import golden_digests, golden_dir
from qconform.sweep.table import select
from qconform.sweep.units import parse_chunks, units

DOMAIN_SETS = {"default": ("all", "sampled"), "all": ("all",), "sampled": ("sampled",), "full": ("full",)}


def add_arguments(p) -> None:
    """Options of ``qconform sweep`` (qconform/cli.py hands the subparser here)."""
    p.add_argument("select", nargs="*", metavar="PATTERN",
                   help="run only sweeps whose id contains every PATTERN (see --list)")
    p.add_argument("--runner", help="runner under test (as pytest --runner: a bundled name, module:Attr, file.py:Attr)")
    p.add_argument("--runner-opt", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--domain", choices=sorted(DOMAIN_SETS), default="default",
                   help="default: every 16-bit input and the sampled float32 set; full: all 2^32 float32 inputs")
    p.add_argument("--chunks", metavar="START:STOP", help="only these chunks of each domain (split a run over machines)")
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: all cores)")
    p.add_argument("--state", type=Path, help="state file: finished chunks are recorded and skipped on a rerun")
    p.add_argument("--golden-dir", type=Path, default=None, help="sweep goldens (default: qconform/golden/sweeps)")
    p.add_argument("--list", action="store_true", help="list the sweeps and their golden coverage, then exit")
    p.add_argument("--regen", action="store_true",
                   help="compute missing golden digests with the oracle (--force: all of them)")
    p.add_argument("--force", action="store_true", help="with --regen: recompute digests that exist")
    p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDRESS",
                       help="run the units on an existing Dask cluster, e.g. tcp://HOST:8786 (needs qconform[dask])")
    where.add_argument("--cluster", metavar="local[:N]",
                       help="run the units on a Dask LocalCluster of N worker processes started for the run "
                            "(default N: all cores)")


def _executor(args):
    """The executor the options ask for: None (the local pool of -j processes) or a Dask one."""
    if not (args.scheduler or args.cluster):
        return None
    from qconform.sweep.dask_executor import DaskExecutor, _distributed, parse_cluster

    _distributed()  # refuse now, in one line, when the extra is missing
    if args.scheduler:
        return DaskExecutor(scheduler=args.scheduler)
    return DaskExecutor(local_workers=parse_cluster(args.cluster))


def main(args) -> int:
    try:
        sweeps = select(args.select)
        chunks = parse_chunks(args.chunks)
    except ValueError as exc:
        print(f"qconform sweep: {exc}", file=sys.stderr)
        return 2
    domains = DOMAIN_SETS[args.domain]
    try:
        executor = _executor(args)
    except (ValueError, RuntimeError) as exc:
        print(f"qconform sweep: {exc}", file=sys.stderr)
        return 2
    if args.list:
        for s in sweeps:
            cov = []
            for d in s.domains():
                dom = domain(s, d)
                got = sum(g is not None for g in golden_digests(s, dom, args.golden_dir))
                cov.append(f"{d} {got}/{dom.chunks} chunks of {dom.chunk:,}")
            print(f"{s.id}  ({'; '.join(cov)})")
        return 0
    if args.regen:
        t0 = time.perf_counter()
        done = regenerate(sweeps, domains, chunks, args.jobs, args.golden_dir, not args.no_progress, args.force,
                          executor=executor)
        print(f"computed {done['chunks']} chunk digest(s) with the oracle in {time.perf_counter() - t0:.0f} s "
              f"into {golden_dir(args.golden_dir)}")
        return 0
    if not args.runner:
        print("qconform sweep: name the runner under test with --runner NAME (or --regen to compute goldens)",
              file=sys.stderr)
        return 2
    options = {}
    for item in args.runner_opt:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"qconform sweep: --runner-opt {item!r} is not KEY=VALUE", file=sys.stderr)
            return 2
        options[key] = value
    from qconform.runner import RunnerError, resolve

    try:
        resolve(args.runner, options)  # fail fast, in one line, before starting workers
    except RunnerError as exc:
        print(f"qconform sweep: {exc}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    work = units(sweeps, domains, chunks)
    try:
        summary = Summary(list(execute(work, args.runner, options, args.jobs, args.state, args.golden_dir,
                                       not args.no_progress, executor=executor)))
    except StateError as exc:
        print(f"qconform sweep: {exc}", file=sys.stderr)
        return 2
    for line in summary.lines():
        print(line)
    n_in = sum(r.elements for r in summary.results)
    print(f"{len(summary.results)} chunk(s), {n_in:,} inputs in {time.perf_counter() - t0:.1f} s: "
          f"{len(summary.failed)} with deviations or errors, {len(summary.missing)} without goldens")
    if summary.missing:
        print("goldens missing for some chunks: qconform sweep --regen --domain "
              f"{args.domain} {' '.join(args.select)}".rstrip())
    return 1 if summary.failed else 0

"""``qconform certify``: the engine driven directly, no pytest item per case, the same report.

The pytest plugin gives a case per item (select, rerun, read case by case) and pays pytest's
per-item machinery for it. A certification wants the verdicts and the report: this front-end hands
the selected cases to an executor of the same engine (``qconform.execution.Executor``; here the
local one, ``-j N`` runner workers, each case isolated as under pytest), builds report.json with the same ``report.model``,
gates it with the same baseline code and writes it with the same ``report.writer``. Options that
only pytest knows (``-m``, ``-k``, ``-n``, ``--from-report``, ...) send the run through pytest, as
before, with everything else passed along.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import os
import shlex
import sys
import time
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING

from qconform.interrupt import restore, sigterm_as_interrupt
from qconform.progress import Progress, StateError, StateFile, code_digest
from qconform.record import CaseRecord
from qconform.runner import declared_scope
from qconform.verdicts import DEVIATING, NOT_RUN, VERDICTS

if TYPE_CHECKING:
    from qconform.gating.baseline import Baseline
    from qconform.corpus import CaseRef, Index
    from qconform.execution import Executor, Options
    from qconform.offline import OfflineResults

#: ``--state FILE``'s header: what it holds.
STATE_FORMAT = "qconform-certify-state/1"

#: certify's own options, each also a pytest plugin option of the same name (so a run that must go
#: through pytest passes them on unchanged); ``-j`` is pytest's ``--runner-workers``.
ENGINE_OPTIONS = ("--runner-opt", "--golden", "--case", "--baseline", "--min-cases", "--profile", "--strict-nan",
                  "--case-timeout", "--worker-memory-mb", "--batch", "--diagnose", "--diagnose-per-group")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runner", default=None, help="bundled name, entry point, package.module:Attr or file.py:Attr")
    p.add_argument("--report", default="qconform-report", metavar="DIR",
                   help="report directory (default qconform-report)")
    p.add_argument("-j", "--jobs", type=int, default=0, metavar="N",
                   help="runner worker processes (default: the number of cores, at most 8)")
    p.add_argument("--runner-opt", action="append", default=[], metavar="KEY=VALUE",
                   help="option passed to the runner's constructor (repeatable)")
    p.add_argument("--golden", default=None, metavar="DIR", help="golden corpus directory (default: the bundled one)")
    p.add_argument("--case", action="append", default=[], metavar="ID",
                   help="run only this case: an id or an fnmatch glob over ids (repeatable)")
    p.add_argument("--baseline", default=None, metavar="FILE", help="known deviations: fail only on new ones")
    p.add_argument("--min-cases", type=int, default=None, metavar="N",
                   help="fail unless at least N cases are selected (default without --case: the whole corpus, or a "
                        "bundled runtime's declared scope of it)")
    p.add_argument("--profile", choices=("default", "strict"), default="default",
                   help="default: any permitted reading passes; strict: only the latest spec text's reading")
    p.add_argument("--strict-nan", action="store_true", help="NaN outputs must match the expected NaN bits exactly")
    p.add_argument("--case-timeout", type=float, default=120.0, metavar="S",
                   help="a case with no result after S seconds is a timeout (default 120)")
    p.add_argument("--worker-memory-mb", type=int, default=0, metavar="MB",
                   help="address-space limit of each runner worker (default: none)")
    p.add_argument("--batch", type=int, default=64, metavar="N", help="cases per round trip to a worker (default 64)")
    p.add_argument("--pack", action="store_true",
                   help="run the cases of one op version and type signature as nodes of one model (one session, "
                        "one compile, one round trip); only passes are taken from a packed model, every other case "
                        "runs alone. Used only where the runtime's facts file holds a measurement over this corpus "
                        "showing packed and single runs equivalent (qconform facts packing); the report says which "
                        "cases ran packed, or why none did")
    p.add_argument("--state", default=None, metavar="FILE",
                   help="keep each finished case in FILE (JSON lines) and, rerun with the same command, read back "
                        "the cases done before: a long run stopped part way resumes")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--offline", metavar="DIR", default=None,
                       help="judge the outputs a device wrote into an export (qconform export backend-test DIR, "
                            "then actual/output_N.pb per case; see qconform import-results) instead of running")
    where.add_argument("--cluster", metavar="local:N", default=None,
                       help="run on a Dask LocalCluster of N workers started here (each with its own isolated "
                            "runner worker); needs qconform[dask]")
    where.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="run on an existing Dask cluster, e.g. tcp://HOST:8786 (its workers need qconform, "
                            "the runner's runtime and the same corpus installed)")
    p.add_argument("--secret-file", default=None, metavar="FILE",
                   help="with --offline: the shared secret that checks the results' MAC (results.mac; else "
                        "$QCONFORM_WORKER_SECRET); without one the device's identity is reported as declared, "
                        "not verified")
    p.add_argument("--diagnose", choices=("on", "off"), default="on",
                   help="name the known deviation that reproduces each failure (default: on)")
    p.add_argument("--diagnose-per-group", type=int, default=16, metavar="N",
                   help="diagnose at most N failing cases per op-version/type group and worker (0: no limit)")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    """Run the certification; ``argv``: the words after ``certify``, as typed."""
    if args.extra:
        return _through_pytest(args, argv)
    try:
        return _certify(args, argv)
    except _Usage as exc:
        print(f"qconform certify: {exc}", file=sys.stderr)
        return 2


class _Usage(Exception):
    """Bad input: one line, nothing run."""


def _through_pytest(args: argparse.Namespace, argv: list[str]) -> int:
    """Options only pytest knows: the pytest front-end, with every option passed on."""
    import pytest

    words, it = [], iter(argv)
    for w in it:
        if w in ("-j", "--jobs"):
            words += ["--runner-workers", next(it, "0")]
        elif w.startswith(("-j", "--jobs=")):
            words.append("--runner-workers=" + w.split("=", 1)[-1].removeprefix("-j"))
        else:
            words.append(w)
    if not any(w == "--report" or w.startswith("--report=") for w in words):
        words.append(f"--report={args.report}")
    print(f"qconform certify: {' '.join(args.extra)} is pytest's: running through pytest", file=sys.stderr)
    return int(pytest.main(["-p", "no:cacheprovider", *[w for w in words if w != "--"]]))


def _certify(args: argparse.Namespace, argv: list[str]) -> int:
    """The run, step by step: every input checked before a case is read, the cases selected, run,
    and the report assembled, gated and written; the exit status is the gate's."""
    from qconform.report import writer

    started, started_iso = time.perf_counter(), writer.now()
    _check_arguments(args)
    plan = _plan(args, started, started_iso)
    sel = _select_cases(args, plan)
    outcome = _run_cases(sel)
    return _write_report(args, argv, plan, sel, outcome)


@dataclasses.dataclass
class _Plan:
    """What the checks settled before any case is read: the runner, the corpus, the baseline, the options."""

    started: float
    started_iso: str
    ident: dict
    results: OfflineResults | None  # a device's stored outputs (--offline)
    golden: Path
    digest: str
    base: Baseline | None
    patterns: list[str]
    scope: dict | None  # the runtime's declared scope, when no --case narrows the run
    jobs: int
    packing: dict | None
    options: Options


@dataclasses.dataclass
class _Selection:
    """The cases to report on, those read back from ``--state``, and the engine that runs the rest."""

    index: Index
    refs: list[CaseRef]
    state: StateFile | None
    done: dict[str, CaseRecord]
    todo: list[str]
    engine: Executor | None


@dataclasses.dataclass
class _Outcome:
    """What running the cases gave: the records as the report reads them, and how the run ended."""

    records: list[dict]
    collected: list[dict]
    interrupted: bool
    stopped: str


def _check_arguments(args: argparse.Namespace) -> None:
    """The numbers and the one-of choices, before anything is resolved."""
    if args.batch < 1:
        raise _Usage(f"--batch={args.batch}: expected a number of cases >= 1")
    if args.min_cases is not None and args.min_cases < 0:
        raise _Usage(f"--min-cases={args.min_cases}: expected a number of cases >= 0 (0 disables the floor)")
    if bool(args.runner) == bool(args.offline):
        raise _Usage("give --runner NAME (run the cases) or --offline DIR (judge a device's stored outputs)")


def _resolve_runner(args: argparse.Namespace) -> tuple[dict, dict, OfflineResults | None]:
    """The runner's options, its identity and, with ``--offline``, the device's stored results
    (whose declared runner becomes ``args.runner``)."""
    from qconform.runner import RunnerError, identity, parse_options, resolve

    try:
        opts = parse_options(args.runner_opt)
        results = None
        if args.offline:
            from qconform import wire
            from qconform.offline import OfflineError, OfflineResults

            try:
                results = OfflineResults(args.offline, wire.read_secret(args.secret_file))
                ident = identity(results, f"offline:{args.offline}")
            except (OfflineError, OSError, ValueError) as exc:
                raise _Usage(str(exc)) from None
            args.runner = ident["name"]
        else:
            ident = identity(resolve(args.runner, opts), args.runner, opts)
    except RunnerError as exc:
        raise _Usage(str(exc)) from None
    return opts, ident, results


def _verified_corpus(args: argparse.Namespace) -> tuple[Path, str]:
    """The corpus directory and its digest, once its MANIFEST is checked."""
    from qconform import corpus as corpus_mod

    golden = Path(args.golden or corpus_mod.DEFAULT_ROOT)
    try:
        return golden, corpus_mod.verify(golden)
    except corpus_mod.CorpusError as exc:
        raise _Usage(str(exc)) from None


def _load_baseline(args: argparse.Namespace) -> Baseline | None:
    """The known deviations of ``--baseline``, read before any case runs so that a bad file costs nothing."""
    from qconform.gating import baseline as baseline_mod

    if not args.baseline:
        return None
    try:
        return baseline_mod.load(args.baseline)
    except baseline_mod.BaselineError as exc:
        raise _Usage(str(exc)) from None


def _plan(args: argparse.Namespace, started: float, started_iso: str) -> _Plan:
    """Resolve and check the runner, the corpus and the baseline, then settle the engine's options
    (scope, diagnosis budget, packing)."""
    from qconform import corpus as corpus_mod
    from qconform.gating import baseline as baseline_mod
    from qconform.execution import Options
    from qconform.runner import identity_digest

    opts, ident, results = _resolve_runner(args)
    golden, digest = _verified_corpus(args)
    base = _load_baseline(args)
    patterns = [corpus_mod.case_pattern(c) for c in args.case if c.strip()]
    # a model's groups are its own scope: a runtime's declared scope of qconform's corpus narrows no model
    scope = None if patterns or getattr(args, "model", None) else declared_scope(ident)
    jobs = args.jobs or min(8, os.cpu_count() or 1)
    try:
        by_behaviour = base is not None and base.diagnose_every_failure(args.diagnose == "on")
    except baseline_mod.BaselineError as exc:
        raise _Usage(str(exc)) from None
    packing = _packing(ident, digest, None if patterns else (scope or {}).get("cases")) if args.pack else None
    options = Options(str(golden), args.runner, opts, bool(args.strict_nan), args.profile, args.diagnose == "on",
                      None if by_behaviour else args.diagnose_per_group or None,
                      pack=bool(packing and packing["used"]),
                      runner_identity="" if args.offline else identity_digest(ident))
    return _Plan(started, started_iso, ident, results, golden, digest, base, patterns, scope, jobs, packing, options)


def _select_cases(args: argparse.Namespace, plan: _Plan) -> _Selection:
    """Read the index, keep the cases asked for (``--case``, else the declared scope), read back those
    a ``--state`` file holds, prepare the report directory, and start the engine for the rest."""
    from qconform import corpus as corpus_mod
    from qconform.report import writer

    # this machine's workers start now, importing the runner while the index is read; closed again
    # if the input turns out bad or nothing is left to run
    early = _executor(args, plan.options, None, plan.jobs) \
        if not (args.offline or args.cluster or args.scheduler) else None
    if early is not None:
        early.start()
    engine: Executor | None = None
    patterns, scope, golden = plan.patterns, plan.scope, plan.golden
    try:
        try:
            index = corpus_mod.index(golden, plan.digest)
        except corpus_mod.CorpusError as exc:
            raise _Usage(str(exc)) from None
        wanted = patterns or (scope["cases"] if scope else [])
        refs = [r for r in index.refs if not wanted or any(fnmatchcase(r.id, p) for p in wanted)]
        if not refs:
            raise _Usage(f"--case {' '.join(patterns)}: no case of the corpus at {golden} matches")
        if scope:
            scope["left_out"] = len(index) - len(refs)
            print(f"qconform certify: {scope['why']} ({len(refs):,} cases; {scope['left_out']:,} left out)",
                  file=sys.stderr)
        if plan.packing:
            print(f"qconform certify: {'packing' if plan.packing['used'] else 'not packing'}: {plan.packing['why']}",
                  file=sys.stderr)
        state = StateFile(Path(args.state), STATE_FORMAT,
                          {"corpus": index.digest, "runner": plan.ident, "options": dataclasses.asdict(plan.options),
                           "qconform": code_digest()}) \
            if args.state else None
        try:
            done = {cid: CaseRecord.from_dict(rec) for cid, rec in state.load(lambda rec: rec["id"]).items()} \
                if state else {}
        except StateError as exc:
            raise _Usage(str(exc)) from None
        why = writer.prepare(Path(args.report))  # the last input check, the first thing written
        if why:
            raise _Usage(f"--report {args.report}: {why}")
        todo = [r.id for r in refs if r.id not in done]
        if done:
            print(f"qconform certify: {len(refs) - len(todo)} of {len(refs)} cases read back from {args.state}",
                  file=sys.stderr)
        if todo:
            engine = early or _executor(args, plan.options, index, plan.jobs, plan.results)
    finally:
        if early is not None and engine is not early:
            early.close()
    return _Selection(index, refs, state, done, todo, engine)


def _run_cases(sel: _Selection) -> _Outcome:
    """Hand the cases out and take each record as its result comes in (keeping it in the state file);
    a device gone stops the run, and the cases never handed out are not run, saying why."""
    engine, refs, done, state = sel.engine, sel.refs, sel.done, sel.state
    stubs = {r.id: CaseRecord.stub(r) for r in refs}
    #: the records as the report reads them, each made as its result comes in (the workers are still
    #: busy then; after the last result, only the report's own work is left)
    records: list[dict] = []
    collected: list[dict] | None = None
    interrupted, stopped = False, ""
    progress = Progress(len(refs), "certify")
    terminated = sigterm_as_interrupt()
    try:
        if engine is not None:
            engine.submit(sel.todo)
        collected = [s.to_dict() for s in stubs.values()]  # while the first results are on their way
        for r in refs:
            res = None
            if r.id in done:
                rec = done[r.id]
            else:
                res = engine.result(r.id)
                rec = res.record.over(stubs[r.id])
                rec.duration_s = res.runner_seconds
            as_dict = rec.to_dict()
            if state and res is not None and res.verdict != NOT_RUN:  # a case not run is not done: a rerun runs it
                state.append(as_dict)
            records.append(as_dict)
            progress.step(rec.verdict in DEVIATING)
            if res is not None and res.stop:
                stopped = rec.problem or "the device is gone"
                break
    except KeyboardInterrupt:
        interrupted = True
    finally:
        restore(terminated)
        if engine is not None:
            engine.close()
        if state:
            state.close()
    progress.done()
    if stopped:  # the cases never handed out are not run for the same reason, said once per case
        got = {rec["id"] for rec in records}
        records += [CaseRecord.stub(r, NOT_RUN, stopped).to_dict() for r in refs if r.id not in got]
    if collected is None:  # interrupted before they were made
        collected = [s.to_dict() for s in stubs.values()]
    return _Outcome(records, collected, interrupted, stopped)


def _write_report(args: argparse.Namespace, argv: list[str], plan: _Plan, sel: _Selection,
                  outcome: _Outcome) -> int:
    """Assemble report.json (the same assembly as the pytest front-end's), gate it, write the report
    directory, print the summary, and return the exit status: 0 passed, 1 gate failed, 2 incomplete."""
    from qconform.gating.assembly import assemble
    from qconform.report import writer

    index, refs, engine, scope, packing = sel.index, sel.refs, sel.engine, plan.scope, plan.packing
    records = outcome.records
    model = getattr(args, "model_scope", None)
    if callable(model):  # certify --model: the whole-model check runs now (not after an incomplete run), so
        # that report.json, its gate, the certificate and summary.md say what the exit status says
        model = model(not (outcome.interrupted or outcome.stopped))
    filters = ["--case"] if plan.patterns else (["scope"] if scope else [])
    run_meta = writer.meta(
        runner=plan.ident, index=index, started_iso=plan.started_iso, seconds=time.perf_counter() - plan.started,
        interrupted=outcome.interrupted, stopped=outcome.stopped, exit_status=None,
        invocation={"args": list(argv), "profile": args.profile, "strict_nan": bool(args.strict_nan),
                    "filters": filters, "workers": 0, "runner_workers": getattr(engine, "workers", plan.jobs),
                    "executor": engine.describe() if hasattr(engine, "describe") else "local",
                    "resumed": len(refs) - len(sel.todo),
                    "front_end": "qconform certify",
                    **({"model": model} if model else {}),
                    "command_line": shlex.join(["qconform", getattr(args, "cmd", None) or "certify", *argv]),
                    "baseline": writer.baseline_identity(args.baseline) if args.baseline else None,
                    **({"scope": scope} if scope else {}),
                    **({"packing": {**packing, "cases": sum(1 for r in records if r.get("packed"))}} if packing else {})})
    report, texts = assemble(records, outcome.collected, run_meta,
                             cases_of=index.cases_of, baseline=plan.base,
                             today=_dt.date.today(), min_cases=args.min_cases, filters=filters,
                             corpus_size=len(index), strict_nan=bool(args.strict_nan), profile=args.profile)
    # an incomplete run (stopped, interrupted, cases not run) certifies nothing: 2, as Ctrl-C
    status = 2 if not report["complete"] else (0 if report["gate"]["passed"] else 1)
    report["exit_status"] = status
    written = writer.write(Path(args.report), report, texts, beside={"certificate.json": _certificate(report)})
    _summary(report, written)
    return status


def _certificate(report: dict) -> str:
    """certificate.json beside report.json: the scoreboard's certificate schema for this one run (its
    selection, scope and completeness said in it, as the scoreboard's pages say them)."""
    from qconform.apps.scoreboard.data import build
    from qconform.apps.scoreboard.render import render_certificate

    name = (report.get("runner") or {}).get("name") or "runner"
    return render_certificate(build({name: report})["runtimes"][0])


def _packing(ident: dict, corpus_digest: str, scope: list[str] | None = None) -> dict:
    """Whether ``--pack`` may pack this runtime, and why: only on a measurement in its facts file
    (``qconform facts packing``) for its version on this platform, over this corpus -- the whole
    of it, or the runtime's declared ``scope`` when that is what runs -- that found no case whose
    packed outputs differ from its single model's."""
    from qconform import facts
    from qconform.apps.packing_check import runtime_version, selection_words
    from qconform.runner import bundled_runtime, ran_elsewhere, runtime_name

    source = bundled_runtime(ident)
    version = runtime_version(source, ident) if source in facts.RUNNER_SOURCES else ""
    refused = {"asked": True, "used": False}
    if ran_elsewhere(ident) or source not in facts.RUNNER_SOURCES:  # whatever runtime a device or a file declares
        why = "only a bundled runtime run on this machine can be shown to pack equivalently (qconform facts packing)"
        return {**refused, "why": f"{source or runtime_name(ident)} runs unpacked: {why}"}
    chosen = (ident.get("load") or {}).get("options") or {}
    if chosen:  # a measurement is made with the runtime's own settings: threads, providers, options change kernels
        return {**refused, "why": f"{source} {version} runs unpacked: its packing was measured with its default "
                                  f"settings, and this run sets {', '.join(f'{k}={v}' for k, v in sorted(chosen.items()))}"}
    m = facts.load(source).packing_here(version)
    how = f"measure it: qconform facts packing --runner {ident.get('name', source)} --write"
    if m is None:
        return {**refused, "why": f"{source} {version} runs unpacked: no measurement on this platform shows packed "
                                  f"and single runs equivalent ({how})"}
    where = f"qconform/facts/{source}.toml, {m.date}"
    if m.corpus != corpus_digest[:12] or m.selection not in {selection_words([]), selection_words(scope or [])}:
        return {**refused, "why": f"{source} {version} runs unpacked: its packing was measured on {m.selection} of "
                                  f"corpus {m.corpus or '?'}, not on the whole of this corpus ({where}; {how})"}
    if not m.equivalent:
        return {**refused, "why": f"{source} {version} runs unpacked: {m.differing:,} of {m.compared:,} cases gave "
                                  f"other outputs packed than alone ({where})"}
    return {"asked": True, "used": True,
            "why": f"{source} {version} gave the same outputs packed and alone for all {m.compared:,} cases compared "
                   f"({where}); a packed run decides only passes, every other case ran alone"}


def _executor(args: argparse.Namespace, options, index, jobs: int, results=None):
    """Where the cases run: this machine's worker processes, a Dask cluster (``qconform.cluster``), or
    a device's stored ``results`` (``qconform.offline``)."""
    from qconform.execution import local_executor

    if args.offline:
        from qconform.offline import OfflineEngine, OfflineError

        try:
            return OfflineEngine(options, index, Path(args.offline), results)
        except OfflineError as exc:
            raise _Usage(str(exc)) from None
    if not (args.cluster or args.scheduler):
        return local_executor(options, index, workers=jobs, timeout=args.case_timeout,
                              memory_mb=args.worker_memory_mb, batch=args.batch)
    from qconform import cluster

    try:
        workers = cluster.parse_cluster(args.cluster) if args.cluster else None
        engine = cluster.DaskEngine(options, index, scheduler=args.scheduler, local_workers=workers,
                                    timeout=args.case_timeout, memory_mb=args.worker_memory_mb, batch=args.batch)
    except (ValueError, cluster.DaskUnavailable) as exc:
        raise _Usage(str(exc)) from None
    except OSError as exc:  # the scheduler cannot be reached
        raise _Usage(f"--scheduler {args.scheduler}: {type(exc).__name__}: {exc}") from None
    print(f"qconform certify: {engine.describe()}", file=sys.stderr)
    return engine


def _summary(report: dict, written: list[Path]) -> None:
    from qconform.report.certificate import overall

    c, gate = report["counts"], report["gate"]
    print(", ".join(f"{c[v]:,} {v}" for v in VERDICTS if c.get(v)) + f" — {c['collected']:,} cases in "
          f"{report['timing']['duration_s']:.1f} s")
    print(overall(report))
    from qconform.gating.baseline import stale_lines

    for line in stale_lines(gate):
        print(line)
    for msg in gate["messages"]:
        print(f"gate: {msg}")
    for p in written:
        print(f"wrote {p}")

"""Options and selection: what a ``pytest --runner`` session runs, decided before any case runs.

The lowest module of the plugin package (the stash key, the options, markers, the runner's identity,
the ``--case`` / ``--from-report`` / declared-scope selection, pytest's cache and xdist settings), so
that collection, items and the plugin object all read them without importing each other.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from qconform import corpus as corpus_mod
from qconform.runner import Runner, RunnerError, parse_options

#: The one stash key: the session's ``QconformPlugin`` (present only with ``--runner``).
PLUGIN = pytest.StashKey["QconformPlugin"]()


def default_golden() -> Path:
    """The corpus shipped with qconform (package data: ``qconform/golden/``)."""
    return corpus_mod.DEFAULT_ROOT


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("qconform", "qconform conformance suite")
    g.addoption("--runner", default=None, metavar="NAME",
                help="runner under test: onnxruntime, onnx-reference, cpu-ref, an entry point name in "
                     "'qconform.runners', package.module:Attr or path/to/file.py:Attr")
    g.addoption("--runner-opt", action="append", default=[], metavar="KEY=VALUE",
                help="option passed to the runner's constructor (repeatable)")
    g.addoption("--golden", default=None, metavar="DIR", help="golden corpus directory (default: the bundled one)")
    g.addoption("--strict-nan", action="store_true", help="NaN outputs must match the expected NaN bits exactly")
    g.addoption("--profile", choices=("default", "strict"), default="default",
                help="default: any permitted reading passes; strict: only the latest spec text's reading")
    g.addoption("--isolate", choices=("on", "off"), default="on",
                help="run the runner in a worker process so a crash or hang costs one case, not the run "
                     "(default: on)")
    g.addoption("--case-timeout", type=float, default=120.0, metavar="S",
                help="with --isolate=on: a case with no result after S seconds is a timeout (default 120)")
    g.addoption("--batch", type=int, default=64, metavar="N",
                help="with --isolate=on: cases handed to the runner's worker per round trip (default 64)")
    g.addoption("--runner-workers", type=int, default=0, metavar="N",
                help="with --isolate=on: runner worker processes (default: 2 on a machine with 2 or more cores, "
                     "1 under pytest-xdist, where each xdist worker has its own)")
    g.addoption("--case", action="append", default=[], metavar="ID",
                help="run only this case (repeatable): a case id, an fnmatch glob over ids, or the form "
                     "pytest prints (anything up to the last '::' is ignored)")
    g.addoption("--from-report", default=None, metavar="REPORT",
                help="run only the cases of an earlier report.json (or its directory) with a --verdict")
    g.addoption("--verdict", default="fail,error,crashed,timeout", metavar="V[,V]",
                help="with --from-report: the verdicts to rerun (default fail,error,crashed,timeout)")
    g.addoption("--runner-traceback", action="store_true",
                help="show the runner's full traceback under each error (also shown at -v; always in "
                     "report.json)")
    g.addoption("--case-protocol", choices=("auto", "fast", "pytest"), default="auto",
                help="fast: each case item's reports straight from its result; pytest: pytest's own runtest "
                     "protocol per case (setup/teardown hooks, output capture), slower; auto (default): fast "
                     "unless a plugin or conftest outside pytest hooks a test phase")
    g.addoption("--diagnose", choices=("on", "off"), default="on",
                help="name the known deviation (qconform/docs/diagnosis.md) that reproduces each failure "
                     "(default: on)")
    g.addoption("--diagnose-per-group", type=int, default=16, metavar="N",
                help="diagnose at most N failing cases per op-version/type group and process (default 16; "
                     "0: no limit); the report ranks models over the diagnosed ones")
    g.addoption("--worker-memory-mb", type=int, default=0, metavar="MB",
                help="with --isolate=on: address-space limit of the runner's worker (default: none)")


def runner_options(config: pytest.Config) -> dict[str, str]:
    try:
        return parse_options(config.getoption("runner_opt"))
    except RunnerError as exc:
        raise pytest.UsageError(str(exc)) from None


@functools.cache
def marker_name(prefix: str, value: object) -> str:
    """``op_QuantizeLinear``, ``types_float32_int8``: the few distinct names of a corpus, made once
    (every collected case asks for four; a ``-k`` run asks for every case of the corpus)."""
    return f"{prefix}_" + re.sub(r"\W", "_", str(value))


def case_markers(case) -> list[str]:
    """The markers of a case (a Case or a CaseRef): -m "op_QuantizeLinear and opset_21" ..."""
    return [marker_name("op", case.op), marker_name("opset", case.opset),
            marker_name("family", case.family), marker_name("types", case.types)]


def is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


#: Said in the header when ``-n N`` over the corpus runs on qconform's own workers instead.
XDIST_TAKEN = ("qconform: -n {n}: the corpus's cases run on {w} runner workers in this pytest process, not on "
               "{n} pytest-xdist workers (xdist's per-case reports cost more than they parallelise; "
               "give test paths to keep xdist)")


def take_over_xdist(config: pytest.Config) -> int:
    """``pytest --runner=X -n N`` with no test paths (the session is the corpus alone) and isolated
    runner workers: xdist is switched off and the N processes become the engine's runner workers
    (unless ``--runner-workers`` says how many). Measured: every case costs pytest's controller the
    same per-item work with or without xdist, and xdist adds a serialised report per phase, so -n 2
    was 0.7x of one process (benchmarks/bench_xdist.py); the runner's own work is what parallelises.
    Returns N, or 0 where xdist stays (explicit paths, remote or non-popen workers, no isolation)."""
    n = getattr(config.option, "numprocesses", None)
    tx = getattr(config.option, "tx", None) or []
    if is_xdist_worker(config) or not n or not tx or any(t != "popen" for t in tx) \
            or config.getoption("isolate") != "on" or getattr(config.option, "dist", "no") not in ("load", "no"):
        return 0
    config.option.numprocesses, config.option.tx, config.option.dist = 0, [], "no"
    if not config.getoption("runner_workers"):
        config.option.runner_workers = len(tx)
    return len(tx)


def chosen_cases(config: pytest.Config):
    """The ``--case``/``--from-report`` selection as a predicate over case ids (None: no selection)."""
    from fnmatch import fnmatchcase

    patterns = [corpus_mod.case_pattern(c) for c in config.getoption("case") if c.strip()]
    exact: set[str] = {p for p in patterns if not any(ch in p for ch in "*?[")}
    globs = [p for p in patterns if p not in exact]
    source = config.getoption("from_report")
    if source:
        from qconform.report.model import ReportError, load

        try:
            cases = load(source)["cases"]
        except ReportError as exc:
            raise pytest.UsageError(f"--from-report: {exc}") from None
        wanted = {v.strip() for v in config.getoption("verdict").split(",") if v.strip()}
        exact |= {c["id"] for c in cases if c.get("verdict") in wanted}
    elif not patterns:
        return None
    return lambda cid: cid in exact or any(fnmatchcase(cid, g) for g in globs)


def scoped_cases(config: pytest.Config, ident: dict, index: corpus_mod.Index):
    """(predicate, scope) of a bundled runtime certified on a declared part of the corpus, when the
    run makes no selection of its own (no -k, -m or node ids; --deselect takes cases out of it; not
    with --explore, whose cases are drafted): the cases ``qconform certify`` runs, with
    ``scope["left_out"]`` of the corpus's not collected. (None, None) otherwise."""
    from fnmatch import fnmatchcase

    from qconform.runner import declared_scope

    if config.option.keyword or config.option.markexpr or config.getoption("explore", False) \
            or any("::" in str(a) for a in config.args):
        return None, None
    scope = declared_scope(ident)
    if scope is None:
        return None, None
    wanted = scope["cases"]

    def chosen(cid: str) -> bool:
        return any(fnmatchcase(cid, g) for g in wanted)

    scope["left_out"] = sum(1 for r in index.refs if not chosen(r.id))
    return chosen, scope


#: Said once where a bundled runtime's declared scope narrows a run that selected nothing itself.
SCOPED = ("qconform: {name} is certified on its declared scope: {why} ({n:,} cases; {left:,} left out; "
          "-k, -m or --case select others)")


def read_identity(name: str, runner: Runner, options: dict[str, str]) -> dict:
    """The runner's ``describe()``, once, before any case runs: a runner whose identity cannot be
    read would produce a report nobody can attribute, so the run stops here with one line."""
    from qconform.runner import identity as runner_identity

    try:
        return runner_identity(runner, name, options)
    except RunnerError as exc:
        raise pytest.UsageError(str(exc)) from None


def identity(config: pytest.Config) -> dict:
    return config.stash[PLUGIN].identity


#: pytest options that read or write pytest's cache directory: asked for, it stays.
CACHE_OPTIONS = ("lf", "failedfirst", "newfirst", "stepwise", "stepwise_skip", "cacheclear", "cacheshow")


def no_cache_dir(config: pytest.Config) -> None:
    """A certification run in a vendor's directory leaves no ``.pytest_cache`` behind unless a cache
    option asks for it: the plugins that would write it (last-failed, new-first) are taken out."""
    if any(getattr(config.option, o, None) for o in CACHE_OPTIONS):
        return
    for name in ("lfplugin", "nfplugin"):
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(plugin)


#: Said where --lf / --ff find no failure recorded: a plain ``pytest --runner`` run records none
#: (``no_cache_dir``), a run that passed has none to record.
NO_LAST_FAILED = ("qconform: --lf/--ff found no failures recorded, so every selected case runs. A pytest --runner "
                  "run records its failures only when it has a cache option itself (--lf or --ff); rerun a "
                  "report's failures with --from-report DIR/report.json")


def no_last_failed(config: pytest.Config) -> bool:
    """--lf or --ff was asked for, with no selection of cases of its own, pytest's cache holds no
    failure to go by, and pytest then runs every selected case (``--lfnf=all``, its default)."""
    if not (getattr(config.option, "lf", False) or getattr(config.option, "failedfirst", False)):
        return False
    if config.getoption("from_report", None) or config.getoption("case", None) \
            or getattr(config.option, "last_failed_no_failures", "all") != "all":
        return False
    plugin = config.pluginmanager.get_plugin("lfplugin")
    return plugin is not None and not getattr(plugin, "lastfailed", None)

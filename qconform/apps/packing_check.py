"""``qconform facts packing``: does a runtime give a node of a packed model the same outputs as the
node's own single model? Measured case by case, bit for bit, and kept in the runtime's facts file
(``[[packing]]``), because ``qconform certify --pack`` rests on it: it packs a runtime only where a
measurement over the same corpus, for the same version and platform, found no case that differs.

Every case of the selection runs alone and inside its pack (the same packs, probes and cuts as
``Pipeline.judge_many``: ``Pipeline.packed``). A case whose single and packed runs both give outputs
is *compared*; it *differs* where any output differs in dtype, shape or a single byte of an element
some reading checks (``compare.agree``: the bytes a runtime writes where every reading leaves the
value undefined, uninitialised memory say, may change from run to run alone too). A pack the
runtime refuses or fails is no difference (the engine then runs those cases alone). The runtime runs
in this process. Packs are formed per batch in the engine; here over the whole selection, so every
case the engine could pack with any other of its key is compared inside a pack.
"""
from __future__ import annotations

import argparse
import datetime
import sys
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path

from qconform import facts
from qconform import platform as plat


@dataclass
class Measurement:
    compared: int = 0  # cases with outputs both ways
    differing: list[str] = field(default_factory=list)  # ... whose outputs differ
    alone: int = 0  # cases with no packed outputs (never packed, or their pack was refused or failed)


def measure(pipeline, cases, progress=None) -> Measurement:
    """Run ``cases`` both ways through ``pipeline``'s runner (``execution.Pipeline``): alone, and in
    the packs the engine would build (``Pipeline.packed``, its probe and its cuts included)."""
    from qconform.compare import agree
    from qconform.verdicts import Call

    m = Measurement()
    cases = list(cases)
    singles: dict[int, object] = {}
    models: dict[int, object] = {}  # built once by the packing, run alone here too

    def single(i: int):
        if i not in singles:
            singles[i] = (pipeline.call_model(models[i], cases[i].feeds) if i in models
                          else pipeline.call(cases[i]))[0]
        return singles[i]

    packed = pipeline.packed(cases, lambda i, _model: single(i).kind == Call.OK, models)
    for i, case in enumerate(cases):
        alone = single(i)
        if i in packed and alone.kind == Call.OK:
            m.compared += 1
            outs = packed[i][0]
            if not agree(case, alone.outputs, outs):
                m.differing.append(case.id)
        elif i not in packed:
            m.alone += 1
        if progress is not None:
            progress.step(False)
    return m


def runtime_version(source: str, ident: dict) -> str:
    """The version a facts file speaks of: the source's own (onnxruntime-qnn: its plugin's, not
    onnxruntime's), else the runner's ``describe()`` version."""
    own = facts.SOURCES[source].version() if source in facts.SOURCES else None
    return str(own or facts.release(str(ident.get("version", ""))))


def selection_words(patterns: list[str]) -> str:
    """How a measurement names the cases it covered (certify compares it with the run's own)."""
    return "the whole corpus" if not patterns else "cases " + " ".join(patterns)


def main(args: argparse.Namespace) -> int:
    from qconform import corpus as corpus_mod
    from qconform.execution import Pipeline
    from qconform.progress import Progress
    from qconform.runner import RunnerError, bundled_runtime, identity, parse_options, resolve, runtime_name

    try:
        opts = parse_options(args.runner_opt)
        runner = resolve(args.runner, opts)
        ident = identity(runner, args.runner, opts)
    except RunnerError as exc:
        print(f"qconform facts packing: {exc}", file=sys.stderr)
        return 2
    source = bundled_runtime(ident)
    if source not in facts.RUNNER_SOURCES:
        print(f"qconform facts packing: no facts file for {source or runtime_name(ident)!r} (a bundled runner's "
              f"measurement; known: {', '.join(facts.RUNNER_SOURCES)})", file=sys.stderr)
        return 2
    if args.write and opts:  # certify packs only a run with the runtime's own settings
        print("qconform facts packing: --write keeps a measurement of the runtime's default settings; "
              f"this one sets {', '.join(sorted(opts))}: run it without --runner-opt to keep it", file=sys.stderr)
        return 2
    index = corpus_mod.index(Path(args.golden or corpus_mod.DEFAULT_ROOT))
    from qconform.declarations.runtimes import RUNTIMES

    declared = RUNTIMES[source].scope if source in RUNTIMES else ()
    patterns = [corpus_mod.case_pattern(c) for c in args.case] or list(declared)  # what certify runs
    refs = [r for r in index.refs if not patterns or any(fnmatchcase(r.id, p) for p in patterns)]
    if not refs:
        print(f"qconform facts packing: --case {' '.join(patterns)}: no case matches", file=sys.stderr)
        return 2
    progress = Progress(len(refs), "packing")
    m = measure(Pipeline.local(runner), (index.case(r.id) for r in refs), progress)
    progress.done()
    version = runtime_version(source, ident)
    selection = selection_words(patterns)
    print(f"{source} {version}: {m.compared:,} cases compared packed and single ({m.alone:,} with no packed "
          "outputs: never packed, or their part of a pack was refused or failed): "
          f"{len(m.differing):,} differ" + (f", e.g. {', '.join(m.differing[:5])}" if m.differing else ""))
    entry = facts.Packing(version, plat.label_condition(), datetime.date.today().isoformat(),
                          selection, index.digest[:12], m.compared, len(m.differing),
                          f"{plat.label()}, via qconform facts packing")
    if args.write:
        ff = facts.load(source)
        kept = [p for p in ff.packing if not (p.version == entry.version and p.platform == entry.platform)]
        path = facts.write(replace(ff, packing=(*kept, entry)))
        print(f"wrote {path}")
    return 0 if not m.differing else 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runner", required=True, help="the runner (a bundled name, module:Class or path.py:Class)")
    p.add_argument("--runner-opt", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--case", action="append", default=[], metavar="GLOB",
                   help="a selection (default: what certify runs: the runtime's declared scope, else the whole corpus)")
    p.add_argument("--golden", metavar="DIR", default=None, help="golden corpus directory")
    p.add_argument("--write", action="store_true",
                   help="keep the measurement in the runtime's facts file (replacing one for the same version and "
                        "platform)")


__all__ = ["Measurement", "add_arguments", "main", "measure"]

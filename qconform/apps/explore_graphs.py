"""``qconform explore graphs`` (or ``python -m qconform.apps.explore_graphs``): a seeded, bounded random search over QDQ graphs (issue 64).

Each draw is a corpus pattern with its parameters drawn again as a quantisation tool would
(``qconform.generators.explored_graphs``); the oracle gives it every permitted reading and the
engine judges the runner on it exactly as on a corpus case (``Pipeline.judge``: model, runner call,
the one comparison). A graph the runner fails is kept as a draft of the family "explored" (JSON,
raw codes: ``qconform explore promote FILE`` makes it a corpus case) with its reproducer (the
model, its inputs and every reading's outputs, as ``qconform export`` writes them).

A differing graph is also judged on a reference runner (by default onnxruntime with its graph
optimisations off): where the reference passes, the runner's own arithmetic differs; where it fails
too, the oracle and the reference disagree (a gap of the oracle or of the reference), reported
apart. With ``--known REPORT``, each differing graph says whether a corpus case of the same
pattern and types already fails in that report. Seeds are derived: draw i of seed S is drawn from
``numpy.random.default_rng([S, i])`` alone, so one draw is reproduced without the others.
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from qconform.verdicts import CRASHED, ERROR, FAIL, INFO, PASS, TIMEOUT, UNSUPPORTED

DEFAULT_REFERENCE = "onnxruntime"


@dataclass
class Differing:
    """A graph the runner fails: where it is kept, and what else fails like it."""

    id: str
    group: str  # pattern and types: "qdq.Add-21/uint8-uint8-uint8"
    verdict: str
    detail: str
    draft: str  # the saved JSON draft
    reproducer: str  # the exported case directory
    reference: str = ""  # the reference runner's verdict ("" where none was asked)
    corpus_fails_group: bool | None = None  # with --known: a corpus case of this group fails there
    template: str = ""


@dataclass
class Summary:
    seed: int
    runner: str
    reference: str
    seconds: float = 0.0
    drawn: int = 0
    judged: int = 0
    passed: int = 0
    unsupported: int = 0
    refused: int = 0  # drafts the oracle cannot compute (an attribute it refuses, a sum not exact)
    by_pattern: dict[str, int] = field(default_factory=dict)
    differing: list[Differing] = field(default_factory=list)
    more: dict[str, int] = field(default_factory=dict)  # differing graphs past the kept ones, by group

    @property
    def differing_count(self) -> int:
        return len(self.differing) + sum(self.more.values())

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "differing": [asdict(d) for d in self.differing]}


def group_of(case_id: str) -> str:
    """The pattern and types of a case id (its first two components)."""
    return "/".join(case_id.split("/")[:2])


def failing_groups(report: Path) -> set[str]:
    """The groups (pattern and types) with a failing case in a report.json."""
    from qconform.report.model import load

    return {group_of(c["id"]) for c in load(report)["cases"] if c.get("verdict") == FAIL}


def draw_case(seed: int, i: int, ops: tuple[str, ...] | None = None):
    """Draw i of seed ``seed`` as an evaluated case, or (None, why) where the oracle refuses it; a
    draft whose sum is not exact in float32 is drawn again with narrower activation codes once."""
    from qconform.generators.explored_graphs import draw
    from qconform.oracle import InvalidModel, evaluate
    from qconform.oracle.graph import NotExact

    rng = np.random.default_rng([seed, i])
    name = f"s{seed}-{i:05d}"
    draft = draw(rng, name, ops)
    try:
        return evaluate(draft), ""
    except NotExact:
        from qconform.generators.explored_graphs import redraw, templates

        template = next(t for t in templates()[draft.op] if t.id == draft.provenance.split(":", 1)[1])
        draft = redraw(template, rng, name, narrow=True)
        try:
            return evaluate(draft), ""
        except InvalidModel as exc:
            return None, f"{type(exc).__name__}: {exc}"
    except InvalidModel as exc:
        return None, f"{type(exc).__name__}: {exc}"


def _save(case, result, out: Path, runner_ident: dict) -> tuple[str, str]:
    from qconform.generators.explored import to_json
    from qconform.report.export import export_case

    drafts = out / "drafts"
    drafts.mkdir(parents=True, exist_ok=True)
    path = drafts / f"{case.draft.name}.json"
    path.write_text(json.dumps(to_json(case.draft), indent=1) + "\n")
    repro = export_case(case, result.record.to_dict(), out / "reproducers", runner_ident)
    return str(path), str(repro)


def explore(runner: Any, *, seed: int, seconds: float, max_cases: int, out: Path, reference: Any = None,
            ops: tuple[str, ...] | None = None, known: set[str] | None = None, profile: str = "default",
            log: Callable[[str], None] = print, runner_ident: dict | None = None, name: str = "",
            keep_per_group: int = 5) -> Summary:
    """Draw and judge graphs until ``seconds`` have passed or ``max_cases`` were drawn; keep each
    differing one under ``out`` (drafts/, reproducers/, summary.json), at most ``keep_per_group`` of
    one pattern and types (the rest are counted in ``more``)."""
    from qconform.execution import Pipeline

    pipe = Pipeline.local(runner, profile=profile)
    ref = Pipeline.local(reference, profile=profile) if reference is not None else None
    name = name or getattr(runner, "name", type(runner).__name__)
    summary = Summary(seed, name, getattr(reference, "name", type(reference).__name__) if reference is not None else "")
    start = time.monotonic()
    i = 0
    while i < max_cases and time.monotonic() - start < seconds:
        case, why = draw_case(seed, i, ops)
        i += 1
        summary.drawn += 1
        if case is None:
            summary.refused += 1
            continue
        res = pipe.judge(case)
        if res.verdict in (UNSUPPORTED, INFO):
            summary.unsupported += 1
            continue
        summary.judged += 1
        summary.by_pattern[case.op] = summary.by_pattern.get(case.op, 0) + 1
        if res.verdict == PASS:
            summary.passed += 1
            continue
        group = group_of(case.id)
        if sum(d.group == group for d in summary.differing) >= keep_per_group:
            summary.more[group] = summary.more.get(group, 0) + 1
            continue
        draft_path, repro = _save(case, res, out, runner_ident or {"name": name})
        found = Differing(case.id, group_of(case.id), str(res.verdict), res.detail or res.message.splitlines()[0],
                          draft_path, repro, template=case.draft.provenance.split(":", 1)[-1])
        if ref is not None and res.verdict not in (ERROR, CRASHED, TIMEOUT):
            found.reference = str(ref.judge(case).verdict)
        if known is not None:
            found.corpus_fails_group = found.group in known
        summary.differing.append(found)
        log(f"differs: {found.id} ({found.verdict}; reference {found.reference or '-'}): "
            f"{' '.join(found.detail.splitlines()[1:3])}")
    summary.seconds = round(time.monotonic() - start, 1)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary.to_dict(), indent=1) + "\n")
    return summary


def render(s: Summary) -> str:
    """The summary a person reads: seeds, counts, each differing graph with its group's standing."""
    lines = [f"explore graphs: runner {s.runner}, seed {s.seed}, {s.seconds} s: {s.drawn} graphs drawn, "
             f"{s.judged} judged ({s.passed} passed), {s.unsupported} unsupported, {s.refused} refused by the oracle, "
             f"{s.differing_count} differing ({len(s.differing)} kept)"]
    for d in s.differing:
        known = {True: "a corpus case of this pattern and types fails too",
                 False: "NO corpus case of this pattern and types fails", None: ""}[d.corpus_fails_group]
        ref = {PASS: "the reference passes it", FAIL: "the reference fails it too (oracle or reference gap)"}.get(
            d.reference, f"reference: {d.reference}" if d.reference else "")
        lines.append(f"- {d.id} [{d.verdict}] {'; '.join(x for x in (ref, known) if x)}\n    {d.detail}\n"
                     f"    template {d.template}; draft {d.draft}; reproducer {d.reproducer}")
    lines += [f"- {g}: {n} more differing graph(s), not kept" for g, n in sorted(s.more.items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from qconform.runner import identity, parse_options, resolve

    p = argparse.ArgumentParser(prog="qconform explore graphs", description=__doc__.splitlines()[0])
    p.add_argument("--runner", required=True)
    p.add_argument("--runner-opt", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--reference", default=DEFAULT_REFERENCE, help="runner a differing graph is judged on too "
                   f"(default {DEFAULT_REFERENCE}: graph optimisations off); 'none' for none")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seconds", type=float, default=600.0, help="time budget (default 600)")
    p.add_argument("--cases", type=int, default=10**9, help="at most this many graphs drawn")
    p.add_argument("--op", action="append", default=None, help="only this pattern (repeatable)")
    p.add_argument("--known", type=Path, default=None, help="a report.json: say whether a corpus case of each "
                   "differing graph's pattern and types fails there")
    p.add_argument("--dir", type=Path, default=Path(".qconform-explore-graphs"))
    a = p.parse_args(argv)
    opts = parse_options(a.runner_opt)
    runner = resolve(a.runner, opts)
    reference = None if a.reference == "none" else resolve(a.reference, {})
    known = failing_groups(a.known) if a.known else None
    s = explore(runner, seed=a.seed, seconds=a.seconds, max_cases=a.cases, out=a.dir, reference=reference,
                ops=tuple(a.op) if a.op else None, known=known, runner_ident=identity(runner, a.runner, opts),
                name=a.runner)
    text = render(s)
    (a.dir / "summary.md").write_text(text + "\n")
    print(text)
    return 1 if s.differing_count else 0


if __name__ == "__main__":
    raise SystemExit(main())

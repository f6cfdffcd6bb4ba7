"""Pieces several test modules share: a deliberately wrong runner and one-group copies of the corpus.

Kept free of test-only imports so ``--runner=tests/support.py:FlipInt8Runner`` loads anywhere."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from qconform import corpus as corpus_mod
from qconform.plugin import default_golden
from qconform.runner import Unsupported
from qconform.runners.cpu_ref import CpuRefRunner

SUPPORT = Path(__file__).resolve()


class FlipInt8Runner(CpuRefRunner):
    """Deliberately wrong: cpu-ref with the lowest bit of every int8 output element flipped."""

    name = "flip-int8"

    def prepare(self, model):
        run = super().prepare(model)

        def wrong(feeds):
            return [(o.view(np.uint8) ^ np.uint8(1)).view(np.int8) if o.dtype == np.int8 else o for o in run(feeds)]

        return wrong


class FlipInt8NoUint8Runner(FlipInt8Runner):
    """As FlipInt8Runner, and refuses every model with a uint8 output."""

    name = "flip-int8-no-uint8"

    def prepare(self, model):
        if any(o.type.tensor_type.elem_type == 2 for o in model.graph.output):  # TensorProto.UINT8
            raise Unsupported("uint8 outputs are not implemented")
        return super().prepare(model)


class RaiseOnInt8Runner(CpuRefRunner):
    """Raises on every model with an int8 output (an error where FlipInt8Runner fails): another
    deviation on the same cases, which a baseline entry accepting one must not accept."""

    name = "raise-on-int8"

    def prepare(self, model):
        run = super().prepare(model)
        if any(o.type.tensor_type.elem_type == 3 for o in model.graph.output):  # TensorProto.INT8

            def refuse(feeds):
                raise RuntimeError("int8 kernel rejected the model")

            return refuse
        return run


class LoudRunner(CpuRefRunner):
    """Raises a 6 MB message on every case: what a runtime that dumps its whole graph into an
    exception does. The report must stay small and keep the text whole once."""

    name = "loud"
    MESSAGE = "graph dump: " + "0123456789abcdef" * (6 * 1024 * 1024 // 16)

    def prepare(self, model):
        def run(feeds):
            raise RuntimeError(self.MESSAGE)

        return run


class TiesAwayAndSpecialsFlipped(CpuRefRunner):
    """Two bugs side by side: every tie rounded away from zero (the diagnosis names it
    ``round-half-away``), and, where an input is NaN or infinite, the int8 output's low bit flipped
    (a deviation no model names). What a baseline made for the first must not accept."""

    name = "ties-away-and-specials-flipped"

    def prepare(self, model):
        from qconform.diagnosis.runner import DeviationRunner

        run = DeviationRunner(model="round-half-away").prepare(model)

        def wrong(feeds):
            special = any(a.dtype.kind == "f" and not np.isfinite(a.astype(np.float64)).all() for a in feeds.values())
            outs = run(feeds)
            return [(o.view(np.uint8) ^ np.uint8(1)).view(np.int8) if special and o.dtype == np.int8 else o
                    for o in outs]

        return wrong


class TiesAway(CpuRefRunner):
    """The first of those bugs alone."""

    name = "ties-away"

    def prepare(self, model):
        from qconform.diagnosis.runner import DeviationRunner

        return DeviationRunner(model="round-half-away").prepare(model)


class SlowOwnWorkJob:
    """A pool job whose worker's runtime answers each item at once and whose own work on it (what a
    failure's diagnosis is) then takes ``seconds``, announced (``say``) as qconform's work or not."""

    def __init__(self, seconds: float, say: bool = True) -> None:
        self.seconds, self.say = seconds, say

    def start(self) -> "_SlowOwnWork":
        return _SlowOwnWork(self.seconds, self.say)

    def key(self, item: str) -> str:
        return item

    def group(self, item: str) -> str:
        return "one"

    def failed(self, item: str, verdict: str, why: str, traceback: str = "") -> tuple:
        return (verdict, why)


class _SlowOwnWork:
    scope = None

    def __init__(self, seconds: float, say: bool) -> None:
        self.seconds, self.say = seconds, say
        self.on_qconform_work = None

    def run(self, item: str) -> tuple:
        import time

        if self.say and self.on_qconform_work is not None:
            self.on_qconform_work()
        time.sleep(self.seconds)
        return ("done", item)


def copy_group(root: Path, group: str = "QuantizeLinear-21") -> Path:
    """A real corpus made of one golden group of the bundled corpus (files copied, MANIFEST rewritten)."""
    src = default_golden()
    for sub, ext in (("index", "jsonl"), ("data", "pb")):
        (root / sub).mkdir(parents=True)
        shutil.copy(src / sub / f"{group}.{ext}", root / sub)
    corpus_mod.write_manifest(root)
    return root


def failing(runner, cases) -> list[str]:
    """Ids of the cases a runner does not pass (in-process, no isolation)."""
    from qconform.compare import compare
    from qconform.model import build_model

    return [c.id for c in cases if compare(c, runner.run(build_model(c), c.feeds)).verdict != "pass"]


# ------------------------------------------------------------------------------------------------
# Facts: what the project's tests may assert about a third-party runtime here
# ------------------------------------------------------------------------------------------------
def require_measured(source: str) -> str:
    """The installed version of ``source``; skips (naming the drift command) where its facts are not
    measured for that version on this platform."""
    import pytest

    from qconform import facts

    version, why = facts.checkable(source)
    if why:
        pytest.skip(why)
    return version


def require_fact(*fids: str) -> None:
    """Skip unless every named fact applies here (measured version, in range, platform condition)."""
    import pytest

    from qconform import facts

    for fid in fids:
        _, why = facts.asserted(fid)
        if why:
            pytest.skip(why)


def unexplained(source: str, runner, cases) -> tuple[list[str], int]:
    """Failure messages of the cases that no fact applying to the installed ``source`` here explains
    (a cross-check's outcome is a fact about the runtime, so it is judged against the facts), and how
    many cases ran (unsupported ones do not count)."""
    from qconform import facts
    from qconform.execution import Pipeline
    from qconform.facts.observe import explains, run_case

    version = require_measured(source)
    active = facts.load(source).active(version)
    pipeline = Pipeline.local(runner)  # one for the loop: prepared models are reused
    bad, ran = [], 0
    for c in cases:
        r = run_case(pipeline, c)
        if r.verdict == "unsupported":
            continue
        ran += 1
        if r.verdict != "pass" and not any(explains(f, c.id, r) for f in active):
            bad.append(r.message or r.verdict)
    return bad, ran

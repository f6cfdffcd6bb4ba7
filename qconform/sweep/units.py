"""Work units and what one unit does: (sweep, domain, chunk) through a runner, or through the oracle.

A unit is a client of the engine: ``UnitWorker`` calls the runner through the engine's ``Pipeline``
(``isolation.call`` classifies what the runner did; one prepared model per sweep), compares the
chunk's digest with the golden one first, and only on a mismatch recomputes the chunk with the
oracle and judges it by the engine's one path. ``SweepJob`` makes units the work of the engine's
pools (``qconform.pool``: this machine's worker processes, ``qconform.cluster``: a Dask cluster),
so a runner that crashes or hangs on a chunk costs that chunk, never the sweep.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from qconform import dtypes
from qconform.sweep.domains import (Canonicaliser, Domain, digest, domain, dont_care, inputs, oracle_case,
                                    oracle_digest)
from qconform.sweep.goldens import golden_digests
from qconform.sweep.table import Sweep
from qconform.verdicts import PASS, Call, SweepStatus, Verdict

Unit = tuple[Sweep, str, int]  # (sweep, domain name, chunk)


def units(sweeps: list[Sweep], domains: Iterable[str], chunks: range | None = None) -> list[Unit]:
    out = []
    for s in sweeps:
        for dname in s.domains():
            if dname not in domains:
                continue
            dom = domain(s, dname)
            rng = range(dom.chunks) if chunks is None else range(max(0, chunks.start), min(dom.chunks, chunks.stop))
            out.extend((s, dname, c) for c in rng)
    return out


def parse_chunks(text: str | None) -> range | None:
    """``START:STOP`` (either side may be empty) or a single chunk number."""
    if not text:
        return None
    if ":" in text:
        a, b = text.split(":", 1)
        return range(int(a or 0), int(b) if b else 1 << 40)
    return range(int(text), int(text) + 1)


def unit_key(sweep_id: str, dname: str, chunk: int) -> str:
    return f"{sweep_id}|{dname}|{chunk}"


def unit_size(unit: Unit) -> int:
    s, d, c = unit
    dom = domain(s, d)
    return min(dom.chunk, dom.size - c * dom.chunk)


def sweep_model(sweep: Sweep):
    """The sweep's model: built like a case's (qconform.model), with x of symbolic length."""
    from qconform.model import build_model

    x = dtypes.get(sweep.x_type).from_bits(np.zeros(1))
    model = build_model(oracle_case(sweep, x))
    for vi in (*model.graph.input, *model.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if len(dims) == 1:
            dims[0].ClearField("dim_value")
            dims[0].dim_param = "n"
    return model


@dataclass
class UnitResult:
    sweep: str
    domain: str
    chunk: int
    status: SweepStatus
    elements: int = 0
    seconds: float = 0.0
    runner_seconds: float = 0.0
    digest: str = ""
    detail: str = ""
    mismatches: int = 0


@dataclass(frozen=True)
class SweepJob:
    """Sweep units as the pools' work (``qconform.pool.Job``): an item is a unit, a worker a
    ``UnitWorker``; each unit is its own group, so units spread over every worker."""

    runner_name: str | None  # None: the oracle computes golden digests
    options: tuple[tuple[str, str], ...] = ()
    golden_root: str | None = None

    def start(self) -> "UnitWorker":
        return UnitWorker(self.runner_name, dict(self.options), self.golden_root)

    def key(self, unit: Unit) -> str:
        return unit_key(unit[0].id, unit[1], unit[2])

    def group(self, unit: Unit) -> str:
        return self.key(unit)

    def failed(self, unit: Unit, verdict: Verdict, why: str, traceback: str = "") -> UnitResult:
        """A unit nothing ran to the end: the runner's worker crashed or hung on it, or broke."""
        return UnitResult(unit[0].id, unit[1], unit[2], SweepStatus.ERROR, detail=f"{verdict}: {why}")


class UnitWorker:
    """Per-process state: the runner, behind the engine's ``Pipeline`` (its calls go through
    ``isolation.call``, its prepared models are kept), and one model per sweep."""

    def __init__(self, runner_name: str | None, options: dict[str, str], golden_root: str | None) -> None:
        self.runner_name, self.options = runner_name, options
        self.golden_root = Path(golden_root) if golden_root else None
        self.scope: str | None = None
        self._models: dict[str, Any] = {}
        self._goldens: dict[tuple[str, str], list] = {}

    @cached_property
    def pipeline(self):
        from qconform.execution import Pipeline
        from qconform.runner import resolve

        return Pipeline.local(resolve(self.runner_name, self.options))

    def model(self, sweep: Sweep):
        if sweep.id not in self._models:
            self._models[sweep.id] = sweep_model(sweep)
        return self._models[sweep.id]

    def golden(self, sweep: Sweep, dom: Domain, chunk: int) -> str | None:
        key = (sweep.id, dom.name)
        if key not in self._goldens:
            self._goldens[key] = golden_digests(sweep, dom, self.golden_root)
        return self._goldens[key][chunk]

    def run(self, unit: tuple[Sweep, str, int]) -> UnitResult:
        sweep, dname, chunk = unit
        dom = domain(sweep, dname)
        t0 = time.perf_counter()
        res = UnitResult(sweep.id, dname, chunk, SweepStatus.OK)
        try:
            if self.runner_name is None:  # golden generation: the oracle
                res.digest, res.status = oracle_digest(sweep, dom, chunk), SweepStatus.GOLDEN
            else:
                self._check(sweep, dom, chunk, res)
        except Exception as exc:  # noqa: BLE001 - reported per unit
            res.status, res.detail = SweepStatus.ERROR, f"{type(exc).__name__}: {exc}"
        res.seconds = time.perf_counter() - t0
        return res

    def _check(self, sweep: Sweep, dom: Domain, chunk: int, res: UnitResult) -> None:
        """Digest first (the golden holds a chunk's digest, not its outputs); on a mismatch the chunk
        is recomputed by the oracle and judged by the engine's one path, and the exact inputs named."""
        from qconform.isolation import CallResult

        expected = self.golden(sweep, dom, chunk)
        x = inputs(sweep, dom, chunk)
        res.elements = x.size
        call, res.runner_seconds = self.pipeline.call_model(self.model(sweep), {"x": x})
        if call.kind != Call.OK:
            res.status = SweepStatus.UNSUPPORTED if call.kind == Call.UNSUPPORTED else SweepStatus.ERROR
            res.detail = call.message if call.kind in (Call.UNSUPPORTED, Call.ERROR) else f"{call.kind}: {call.message}"
            return
        out_t = dtypes.get(sweep.out_type)
        outs = call.outputs
        if len(outs) != 1:
            raise TypeError(f"runner returned {len(outs)} outputs, not one array")
        y = outs[0]
        if y.dtype != out_t.dtype or y.shape != x.shape:
            raise TypeError(f"runner returned {y.dtype}{list(y.shape)}, expected {out_t.name}{list(x.shape)}")
        res.digest = digest(Canonicaliser(out_t)(y, dont_care(sweep, x)))
        if expected is None:
            res.status = SweepStatus.NO_GOLDEN
            return
        if res.digest == expected:
            return
        case = oracle_case(sweep, x)
        judged = self.pipeline.judge_call(case, CallResult(Call.OK, [y]))
        rec = judged.record
        if judged.verdict == PASS:
            res.status, res.detail = SweepStatus.READING, f"matches permitted reading {rec.reading!r}"
            return
        res.status = SweepStatus.MISMATCH
        res.mismatches = rec.mismatches
        res.detail = describe_mismatches(sweep, case, x, y, rec)


def describe_mismatches(sweep: Sweep, case, x: np.ndarray, y: np.ndarray, outcome, limit: int = 8) -> str:
    """The exact inputs of a failed chunk (``outcome``: the engine's per-case record): counts by kind
    of difference and the first few."""
    from qconform.compare import differences, format_value, masks

    if outcome.problem:
        return outcome.problem
    reading = next(r for r in case.readings if r.name == outcome.reading)
    out_t, x_t = dtypes.get(sweep.out_type), dtypes.get(sweep.x_type)
    eb, ab = out_t.to_bits(reading.outputs[0]).reshape(-1), out_t.to_bits(y).reshape(-1)
    idx = np.flatnonzero(differences(reading.outputs, [y], masks(case, reading))[0])
    xb = x_t.to_bits(x).reshape(-1)
    wx, wy = max(1, (x_t.bits + 3) // 4), max(1, (out_t.bits + 3) // 4)
    lines = [f"{idx.size} of {x.size} element(s) differ from reading {outcome.reading!r}"]
    for i in idx[:limit]:
        lines.append(f"  y=0x{int(ab[i]):0{wy}x} ({format_value(out_t, int(ab[i]))}), but should be "
                     f"0x{int(eb[i]):0{wy}x} ({format_value(out_t, int(eb[i]))}) "
                     f"[x=0x{int(xb[i]):0{wx}x} ({format_value(x_t, int(xb[i]))})]")
    if idx.size > limit:
        lines.append(f"  ... and {idx.size - limit} more")
    return "\n".join(lines)



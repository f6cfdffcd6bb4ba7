"""Exhaustive sweeps: every input of a domain through a runner, checked against digest goldens.

A *sweep* is one operator configuration (op, opset, types, scale, zero point, saturate) whose data
input ``x`` takes every value of a domain:

* ``all``      every encoding of a type of at most 16 bits (float16 / bfloat16 inputs of
               QuantizeLinear; every input value of each quantized type for DequantizeLinear);
* ``sampled``  float32 inputs: both signs x all 256 exponents x structured significands (the top
               10 mantissa bits in all 1024 combinations x the low 13 bits in
               {0, 1, 0xFFF, 0x1000, 0x1001, 0x1FFF}: ties, just-below and just-above ties of every
               float8/float4/float16/bfloat16 rounding and of integer rounding), 3 * 2^20 inputs;
* ``full``     all 2^32 float32 bit patterns, in chunks of 2^24 (behind ``--domain full``).

Goldens are digests (``qconform/golden/sweeps/<sweep>.json``): per chunk, the SHA-256 of the expected
output codes in canonical form (little-endian codes; every NaN code replaced by the type's
canonical NaN, because implementations encode NaN differently and NaNs compare as a class;
don't-care elements -- NaN into a type without NaN, which the spec leaves undefined -- set to 0).
They are computed by the oracle (``qconform.oracle``), never by a kernel under test. A runner's
chunk whose digest differs is recomputed by the oracle and compared element by element
(``qconform.compare``): if it matches another permitted reading it passes, otherwise the exact
inputs are named.

Work is split into units (sweep, domain, chunk); units run in a process pool (``jobs``), can be
restricted to a chunk range (one range per pytest-xdist worker or per machine) and are recorded in a
state file as they finish, so an interrupted run resumes where it stopped.
"""
from __future__ import annotations

import functools
import hashlib
import json
import multiprocessing
import os
import sys
import time
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from qconform import corpus, dtypes

FORMAT = 1
SWEEP_OPSET = 25
#: Low 13 mantissa bits of the sampled float32 domain (see the module docstring).
SAMPLED_LOWS = (0x0, 0x1, 0xFFF, 0x1000, 0x1001, 0x1FFF)
SAMPLED_HI_BITS = 10
FLOAT_TARGETS = ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float4e2m1")
DQ_TYPES = ("int2", "uint2", "int4", "uint4", "int8", "uint8", "int16", "uint16", "float8e4m3fn",
            "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float4e2m1", "float6e2m3", "float6e3m2")


# ----------------------------------------------------------------------------------------------
# Sweep configurations
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sweep:
    op: str
    opset: int
    x_type: str
    scale_type: str
    scale: float
    zp_type: str
    zp: float
    saturate: int | None = None

    @property
    def out_type(self) -> str:
        return self.zp_type if self.op == "QuantizeLinear" else self.scale_type

    @property
    def id(self) -> str:
        parts = [f"{self.op}-{self.opset}", f"{self.x_type}-{self.out_type}",
                 f"scale={self.scale_type}:{self.scale!r}"]
        if self.zp:
            parts.append(f"zp={self.zp!r}")
        if self.saturate is not None:
            parts.append(f"saturate={self.saturate}")
        return "/".join(parts)

    @property
    def slug(self) -> str:
        return self.id.replace("/", "__").replace(":", "_").replace("=", "-")

    @property
    def param_names(self) -> tuple[str, str]:
        return ("y_scale", "y_zero_point") if self.op == "QuantizeLinear" else ("x_scale", "x_zero_point")

    def scale_array(self) -> np.ndarray:
        return np.array(self.scale, dtype=dtypes.get(self.scale_type).dtype).reshape(())

    def zp_array(self) -> np.ndarray:
        t = dtypes.get(self.zp_type)
        if t.is_integer:
            return np.array(int(self.zp), dtype=t.dtype).reshape(())
        from qconform.oracle import floats

        return t.from_bits(floats.encode(np.array([self.zp]), t)).reshape(())

    def domains(self) -> tuple[str, ...]:
        """float32 inputs: sampled, and all 2^32 for the current opset's table (the opset-21 fnuz
        sweeps differ from it at ±Inf only, which the sampled domain holds)."""
        if self.x_type != "float32":
            return ("all",)
        return ("sampled", "full") if self.opset == SWEEP_OPSET else ("sampled",)

    def describe(self) -> dict[str, Any]:
        st, zt = dtypes.get(self.scale_type), dtypes.get(self.zp_type)
        return {**asdict(self), "out_type": self.out_type,
                "scale_bits": f"{int(st.to_bits(self.scale_array())):#x}",
                "zp_bits": f"{int(zt.to_bits(self.zp_array())):#x}"}

    def draft(self, x: np.ndarray):
        from qconform.case import Arg, Draft

        sname, zname = self.param_names
        attrs = {} if self.saturate is None else {"saturate": self.saturate}
        return Draft(self.op, self.opset, f"{self.x_type}-{self.out_type}", "sweep", "chunk",
                     (Arg("x", self.x_type, x), Arg(sname, self.scale_type, self.scale_array(), True),
                      Arg(zname, self.zp_type, self.zp_array(), True)), attrs)


def all_sweeps() -> list[Sweep]:
    """Every sweep configuration (the golden files are one per sweep)."""
    out: list[Sweep] = []
    q = "QuantizeLinear"
    for xt in ("float16", "bfloat16", "float32"):
        for k in FLOAT_TARGETS:
            for sat in (1, 0):
                out.append(Sweep(q, SWEEP_OPSET, xt, xt, 1.0, k, 0.0, sat))
        for k in ("float8e4m3fnuz", "float8e5m2fnuz"):  # opset 19-23 table: ±Inf -> NaN with saturate
            out.append(Sweep(q, 21, xt, xt, 1.0, k, 0.0, 1))
        for k, zp in (("int8", 0), ("uint8", 128)):
            for sc in (1.0, 0.125, 0.1):  # one, a power of two, an inexact one
                out.append(Sweep(q, SWEEP_OPSET, xt, xt, sc, k, zp))
    for qt in DQ_TYPES:
        zp = 1 if dtypes.get(qt).is_integer else 0.0
        for st, sc in (("float32", 1.0), ("float32", 0.1), ("float16", 0.1), ("bfloat16", 0.1)):
            out.append(Sweep("DequantizeLinear", SWEEP_OPSET, qt, st, sc, qt, zp))
    ids = [s.id for s in out]
    assert len(ids) == len(set(ids)), "sweep ids must be unique"
    return out


def select(patterns: Iterable[str] | None = None, sweeps: list[Sweep] | None = None) -> list[Sweep]:
    """Sweeps named by full id, else those whose id contains every pattern (all when none)."""
    sweeps = all_sweeps() if sweeps is None else sweeps
    pats = [p for p in (patterns or []) if p]
    exact = [s for s in sweeps if s.id in pats]
    if exact:  # a full id names exactly that sweep (an id can be a prefix of another)
        return exact
    chosen = [s for s in sweeps if all(p in s.id for p in pats)]
    if not chosen:
        raise ValueError(f"no sweep id contains {' and '.join(map(repr, pats))}; "
                         f"e.g. {sweeps[0].id!r} (list them with `qconform sweep --list`)")
    return chosen


# ----------------------------------------------------------------------------------------------
# Domains
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Domain:
    name: str
    size: int
    chunk: int

    @property
    def chunks(self) -> int:
        return -(-self.size // self.chunk)


def domain(sweep: Sweep, name: str) -> Domain:
    if name not in sweep.domains():
        raise ValueError(f"{sweep.id} has no domain {name!r}; it has {', '.join(sweep.domains())}")
    if name == "all":
        n = 1 << dtypes.get(sweep.x_type).bits
        return Domain(name, n, n)
    if name == "sampled":
        return Domain(name, 2 * 256 * (1 << SAMPLED_HI_BITS) * len(SAMPLED_LOWS), 1 << 20)
    return Domain(name, 1 << 32, 1 << 24)


def input_bits(sweep: Sweep, dom: Domain, chunk: int) -> np.ndarray:
    """Raw codes of x for one chunk (uint16 / uint32 / uint8 ...). A full-domain chunk comes in a
    buffer the next full-domain call in the same process overwrites: copy it to keep it."""
    lo = chunk * dom.chunk
    n = min(dom.chunk, dom.size - lo)
    t = dtypes.get(sweep.x_type)
    if dom.name == "all":
        return np.arange(lo, lo + n, dtype=np.uint32).astype(t.bits_dtype)
    if dom.name == "full":
        return np.add(_counting(n), np.uint32(lo), out=_chunk_buffer(n))
    j = np.arange(lo, lo + n, dtype=np.int64)
    nl = len(SAMPLED_LOWS)
    low = np.array(SAMPLED_LOWS, dtype=np.int64)[j % nl]
    hi = (j // nl) % (1 << SAMPLED_HI_BITS)
    exp = (j // (nl << SAMPLED_HI_BITS)) % 256
    sign = j // (nl << SAMPLED_HI_BITS) // 256
    return ((sign << 31) | (exp << 23) | (hi << (23 - SAMPLED_HI_BITS)) | low).astype(np.uint32)


@functools.cache
def _counting(n: int) -> np.ndarray:
    """0 .. n-1 as uint32, made once per process: a full chunk is then one addition (2^24 inputs)."""
    out = np.arange(n, dtype=np.uint32)
    out.flags.writeable = False
    return out


@functools.cache
def _chunk_buffer(n: int) -> np.ndarray:
    """One input buffer per process for full-domain chunks: a fresh 64 MiB array per chunk costs
    more in page faults than the addition. Each chunk is done with before the next is made."""
    return np.empty(n, dtype=np.uint32)


def inputs(sweep: Sweep, dom: Domain, chunk: int) -> np.ndarray:
    t = dtypes.get(sweep.x_type)
    bits = input_bits(sweep, dom, chunk)
    if t.is_float and bits.dtype.itemsize == t.dtype.itemsize:
        return bits.view(t.dtype)  # the codes are the array (no copy: 2^24 inputs per chunk)
    return t.from_bits(bits)


# ----------------------------------------------------------------------------------------------
# Canonical form and digests
# ----------------------------------------------------------------------------------------------
def canonical_nan(t: dtypes.ElemType) -> int | None:
    fmt = t.float_format
    if fmt is None or not fmt.has_nan:
        return None
    if fmt.nan_style == "fn":
        return (1 << (fmt.width - 1)) - 1
    if fmt.nan_style == "fnuz":
        return 1 << (fmt.width - 1)
    if fmt.nan_style == "e8m0":
        return 0xFF
    return (((1 << fmt.ebits) - 1) << fmt.mbits) | (1 << (fmt.mbits - 1))


@dataclass
class Canonicaliser:
    """Output codes -> canonical little-endian codes: every NaN code becomes ``canonical_nan``."""

    t: dtypes.ElemType

    def nan_mask(self, bits: np.ndarray) -> np.ndarray | None:
        fmt = self.t.float_format
        if fmt is None or not fmt.has_nan or fmt.nan_style in ("fnuz", "e8m0"):
            return None  # no NaN, or a single NaN code already
        mag = bits & bits.dtype.type((1 << (fmt.width - 1)) - 1)
        if fmt.nan_style == "fn":
            return mag == bits.dtype.type((1 << (fmt.width - 1)) - 1)
        return mag > bits.dtype.type(((1 << fmt.ebits) - 1) << fmt.mbits)  # ieee: exponent all ones, mantissa != 0

    @cached_property
    def renamed(self) -> tuple[int, ...] | None:
        """The codes canonical form changes (the other NaN codes), for types of at most 16 bits:
        a float8 output then costs one comparison per code, not a mask and a copy per chunk."""
        if self.t.bits > 16:
            return None
        codes = np.arange(1 << self.t.bits, dtype=np.uint32).astype(self.t.bits_dtype)
        changed = codes[self._canonical(codes) != codes]
        return tuple(int(c) for c in changed) if changed.size <= 8 else None

    def _canonical(self, bits: np.ndarray) -> np.ndarray:
        nan = self.nan_mask(bits)
        return bits.copy() if nan is None else np.where(nan, bits.dtype.type(canonical_nan(self.t)), bits)

    def __call__(self, out: np.ndarray, dont_care: np.ndarray | None) -> np.ndarray:
        bits = self.t.to_bits(out).reshape(-1)
        renamed = self.renamed
        if renamed is None:
            canon = self._canonical(bits)
        else:
            mask = np.zeros(bits.shape, bool)
            for code in renamed:
                mask |= bits == bits.dtype.type(code)
            if mask.any():
                canon = bits.copy()
                canon[mask] = canonical_nan(self.t)
            else:
                canon = bits.copy() if dont_care is not None else bits
        if dont_care is not None:
            canon[dont_care.reshape(-1)] = 0
        return canon.astype(canon.dtype.newbyteorder("<"), copy=False)


def dont_care(sweep: Sweep, x: np.ndarray) -> np.ndarray | None:
    """Elements whose result the spec leaves undefined: a NaN x into a type without NaN.

    (Checked against the oracle's own mask whenever goldens are computed.)"""
    out = dtypes.get(sweep.out_type)
    if sweep.op != "QuantizeLinear" or (out.float_format is not None and out.float_format.has_nan):
        return None
    xt = dtypes.get(sweep.x_type)
    if not xt.is_float:
        return None
    return xt.is_nan_bits(xt.to_bits(x)) if xt.bits <= 16 else np.isnan(x.astype(np.float32, copy=False))


def digest(canon: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(canon).data).hexdigest()


#: The oracle evaluates a chunk in slices this long: numpy's temporaries then stay in cache (~1.5x
#: faster than one 2^24 pass); the digest is the same, hashed slice by slice.
ORACLE_SLICE = 1 << 16


def oracle_case(sweep: Sweep, x: np.ndarray, primary_only: bool = False):
    from qconform.oracle import evaluate

    return evaluate(sweep.draft(x), primary_only=primary_only)


def oracle_digest(sweep: Sweep, dom: Domain, chunk: int) -> str:
    """The golden digest of one chunk, computed by the oracle's primary reading (the golden bytes;
    other readings are only consulted when a runner's chunk differs). Checks the don't-care rule."""
    x = inputs(sweep, dom, chunk)
    canonical = Canonicaliser(dtypes.get(sweep.out_type))
    h = hashlib.sha256()
    for lo in range(0, x.size, ORACLE_SLICE):
        xs = x[lo:lo + ORACLE_SLICE]
        case = oracle_case(sweep, xs, primary_only=True)
        mask = case.dont_care[0]
        mine = dont_care(sweep, xs)
        theirs = np.zeros(xs.shape, bool) if mask is None else mask
        if not np.array_equal(theirs, np.zeros(xs.shape, bool) if mine is None else mine):
            raise AssertionError(f"{sweep.id}: the oracle's don't-care elements differ from sweep.dont_care")
        h.update(np.ascontiguousarray(canonical(case.expected[0], mine)).data)
    return h.hexdigest()


# ----------------------------------------------------------------------------------------------
# Golden files
# ----------------------------------------------------------------------------------------------
def golden_dir(root: Path | None = None) -> Path:
    if root is not None:
        return Path(root)
    from qconform.plugin import default_golden

    return default_golden() / "sweeps"


def golden_path(sweep: Sweep, root: Path | None = None) -> Path:
    return golden_dir(root) / f"{sweep.slug}.json"


def load_golden(sweep: Sweep, root: Path | None = None) -> dict:
    path = golden_path(sweep, root)
    if not path.is_file():
        return {"format": FORMAT, "id": sweep.id, "config": sweep.describe(), "domains": {}}
    data = json.loads(path.read_text())
    if data.get("format") != FORMAT or data.get("id") != sweep.id:
        raise ValueError(f"{path}: not a format-{FORMAT} golden of {sweep.id}")
    return data


def golden_digests(sweep: Sweep, dom: Domain, root: Path | None = None) -> list[str | None]:
    d = load_golden(sweep, root)["domains"].get(dom.name)
    if not d:
        return [None] * dom.chunks
    if d["size"] != dom.size or d["chunk"] != dom.chunk:
        raise ValueError(f"{golden_path(sweep, root)}: domain {dom.name} was written with another chunking")
    return d["digests"]


def save_golden(sweep: Sweep, dom: Domain, digests: list[str | None], root: Path | None = None,
                seconds: float | None = None) -> Path:
    path = golden_path(sweep, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = load_golden(sweep, root)
    data["config"] = sweep.describe()
    # No timings or host facts in the file: the same goldens are the same bytes on every machine.
    entry = {"size": dom.size, "chunk": dom.chunk, "complete": all(d is not None for d in digests),
             "digests": digests}
    data["domains"][dom.name] = entry
    data["domains"] = dict(sorted(data["domains"].items()))
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)
    if (path.parent.parent / corpus.MANIFEST).is_file():  # keep the corpus manifest whole
        corpus.write_manifest(path.parent.parent)
    return path


# ----------------------------------------------------------------------------------------------
# Running a runner over a sweep
# ----------------------------------------------------------------------------------------------
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
    status: str  # ok | reading | mismatch | unsupported | error | no-golden | golden
    elements: int = 0
    seconds: float = 0.0
    runner_seconds: float = 0.0
    digest: str = ""
    detail: str = ""
    mismatches: int = 0


class _Worker:
    """Per-process state: the runner and one prepared model per sweep."""

    def __init__(self, runner_name: str | None, options: dict[str, str], golden_root: str | None) -> None:
        self.runner_name, self.options = runner_name, options
        self.golden_root = Path(golden_root) if golden_root else None
        self._prepared: dict[str, Any] = {}
        self._goldens: dict[tuple[str, str], list] = {}

    @cached_property
    def runner(self):
        from qconform.runner import resolve

        return resolve(self.runner_name, self.options)

    def prepared(self, sweep: Sweep):
        from qconform.runner import Unsupported, prepare

        if sweep.id not in self._prepared:
            try:
                self._prepared[sweep.id] = prepare(self.runner, sweep_model(sweep))
            except Unsupported as exc:
                self._prepared[sweep.id] = exc
        got = self._prepared[sweep.id]
        if isinstance(got, Unsupported):
            raise got
        return got

    def golden(self, sweep: Sweep, dom: Domain, chunk: int) -> str | None:
        key = (sweep.id, dom.name)
        if key not in self._goldens:
            self._goldens[key] = golden_digests(sweep, dom, self.golden_root)
        return self._goldens[key][chunk]

    def run(self, unit: tuple[Sweep, str, int]) -> UnitResult:
        sweep, dname, chunk = unit
        dom = domain(sweep, dname)
        t0 = time.perf_counter()
        res = UnitResult(sweep.id, dname, chunk, "ok")
        try:
            if self.runner_name is None:  # golden generation: the oracle
                res.digest, res.status = oracle_digest(sweep, dom, chunk), "golden"
            else:
                self._check(sweep, dom, chunk, res)
        except Exception as exc:  # noqa: BLE001 - reported per unit
            from qconform.runner import Unsupported

            res.status = "unsupported" if isinstance(exc, Unsupported) else "error"
            res.detail = f"{type(exc).__name__}: {exc}" if res.status == "error" else str(exc)
        res.seconds = time.perf_counter() - t0
        return res

    def _check(self, sweep: Sweep, dom: Domain, chunk: int, res: UnitResult) -> None:
        expected = self.golden(sweep, dom, chunk)
        x = inputs(sweep, dom, chunk)
        res.elements = x.size
        run = self.prepared(sweep)
        t0 = time.perf_counter()
        outs = run({"x": x})
        res.runner_seconds = time.perf_counter() - t0
        out_t = dtypes.get(sweep.out_type)
        if not isinstance(outs, (list, tuple)) or len(outs) != 1 or not isinstance(outs[0], np.ndarray):
            raise TypeError(f"runner returned {type(outs).__name__}, not a list of one array")
        y = outs[0]
        if y.dtype != out_t.dtype or y.shape != x.shape:
            raise TypeError(f"runner returned {y.dtype}{list(y.shape)}, expected {out_t.name}{list(x.shape)}")
        res.digest = digest(Canonicaliser(out_t)(y, dont_care(sweep, x)))
        if expected is None:
            res.status = "no-golden"
            return
        if res.digest == expected:
            return
        # Recompute the chunk with the oracle and name the exact inputs.
        from qconform.compare import compare

        case = oracle_case(sweep, x)
        outcome = compare(case, [y])
        if outcome.verdict == "pass":
            res.status, res.detail = "reading", f"matches permitted reading {outcome.reading!r}"
            return
        res.status = "mismatch"
        res.mismatches = outcome.mismatch_count
        res.detail = describe_mismatches(sweep, case, x, y, outcome)


def describe_mismatches(sweep: Sweep, case, x: np.ndarray, y: np.ndarray, outcome, limit: int = 8) -> str:
    """The exact inputs of a failed chunk: counts by kind of difference and the first few."""
    from qconform.compare import format_value

    if outcome.problem:
        return outcome.problem
    reading = next(r for r in case.readings if r.name == outcome.reading)
    out_t, x_t = dtypes.get(sweep.out_type), dtypes.get(sweep.x_type)
    eb, ab = out_t.to_bits(reading.outputs[0]).reshape(-1), out_t.to_bits(y).reshape(-1)
    differ = (eb != ab) & ~(out_t.is_nan_bits(eb) & out_t.is_nan_bits(ab))
    if case.dont_care[0] is not None:
        differ &= ~case.dont_care[0].reshape(-1)
    idx = np.flatnonzero(differ)
    xb = x_t.to_bits(x).reshape(-1)
    wx, wy = max(1, (x_t.bits + 3) // 4), max(1, (out_t.bits + 3) // 4)
    lines = [f"{idx.size} of {x.size} element(s) differ from reading {outcome.reading!r}"]
    for i in idx[:limit]:
        lines.append(f"  y=0x{int(ab[i]):0{wy}x} ({format_value(out_t, int(ab[i]))}), but should be "
                     f"0x{int(eb[i]):0{wy}x} ({format_value(out_t, int(eb[i]))}) "
                     f"[x=0x{int(xb[i]):0{wx}x} ({format_value(x_t, int(xb[i]))})]")
    if idx.size > limit:
        lines.append(f"  ... and {idx.size - limit} more; x codes of all: qconform sweep --dump")
    return "\n".join(lines)


_WORKER: _Worker | None = None


def _init_worker(runner_name, options, golden_root) -> None:
    global _WORKER
    _WORKER = _Worker(runner_name, options, golden_root)


def _run_unit(unit) -> UnitResult:
    assert _WORKER is not None
    return _WORKER.run(unit)


# ----------------------------------------------------------------------------------------------
# Driver: units, state file, progress, pool
# ----------------------------------------------------------------------------------------------
def units(sweeps: list[Sweep], domains: Iterable[str], chunks: range | None = None) -> list[tuple[Sweep, str, int]]:
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


class Progress:
    """One status line on stderr: units, elements per second, ETA (refreshed, or a line a while)."""

    def __init__(self, total_units: int, total_elements: int, label: str, stream=None) -> None:
        self.total_units, self.total_elements, self.label = total_units, total_elements, label
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.units = self.elements = 0
        self.t0 = self.last = time.perf_counter()

    def update(self, elements: int) -> None:
        self.units += 1
        self.elements += elements
        now = time.perf_counter()
        if not self.tty and now - self.last < 10 and self.units < self.total_units:
            return
        self.last = now
        rate = self.elements / max(now - self.t0, 1e-9)
        left = (self.total_elements - self.elements) / rate if rate else float("inf")
        width = 24
        filled = int(width * self.units / max(self.total_units, 1))
        line = (f"{self.label} [{'#' * filled}{'.' * (width - filled)}] {self.units}/{self.total_units} chunks, "
                f"{rate / 1e6:,.1f} M inputs/s, ETA {_hms(left)}")
        self.stream.write(("\r" + line) if self.tty else (line + "\n"))
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _hms(sec: float) -> str:
    if sec == float("inf"):
        return "?"
    sec = int(sec)
    return f"{sec // 3600}:{sec % 3600 // 60:02d}:{sec % 60:02d}"


def _unit_key(sweep_id: str, dname: str, chunk: int) -> str:
    return f"{sweep_id}|{dname}|{chunk}"


def read_state(path: Path, runner_label: str) -> dict[str, UnitResult]:
    done: dict[str, UnitResult] = {}
    if not path.is_file():
        return done
    lines = path.read_text().splitlines()
    if lines:
        head = json.loads(lines[0])
        if head.get("runner") != runner_label:
            raise ValueError(f"state file {path} belongs to runner {head.get('runner')!r}, not {runner_label!r}; "
                             f"use another --state or delete it")
    for line in lines[1:]:
        try:
            r = UnitResult(**json.loads(line))
        except (json.JSONDecodeError, TypeError):
            continue  # a line cut by an interruption
        if r.status != "error":
            done[_unit_key(r.sweep, r.domain, r.chunk)] = r
    return done


def execute(work: list[tuple[Sweep, str, int]], runner_name: str | None, options: dict[str, str] | None = None,
            jobs: int = 1, state: Path | None = None, golden_root: Path | None = None,
            progress: bool = True, label: str = "sweep") -> Iterator[UnitResult]:
    """Run units (in a pool when jobs > 1), yielding results as they finish (resumed ones first)."""
    options = dict(options or {})
    runner_label = runner_name or "oracle"
    done = read_state(state, runner_label) if state else {}
    todo = [u for u in work if _unit_key(u[0].id, u[1], u[2]) not in done]
    for u in work:
        key = _unit_key(u[0].id, u[1], u[2])
        if key in done:
            yield done[key]
    fh = None
    if state:
        state.parent.mkdir(parents=True, exist_ok=True)
        fresh = not state.is_file() or state.stat().st_size == 0
        fh = state.open("a")
        if fresh:
            fh.write(json.dumps({"runner": runner_label, "format": FORMAT}) + "\n")
            fh.flush()
    sizes = {}
    for s, d, c in todo:
        dom = domain(s, d)
        sizes[_unit_key(s.id, d, c)] = min(dom.chunk, dom.size - c * dom.chunk)
    total = sum(sizes.values())
    bar = Progress(len(todo), total, label) if progress and todo else None
    groot = str(golden_root) if golden_root else None
    try:
        if jobs <= 1 or len(todo) <= 1:
            worker = _Worker(runner_name, options, groot)
            results: Iterable[UnitResult] = (worker.run(u) for u in todo)
            pool = None
        else:
            ctx = multiprocessing.get_context("spawn")
            pool = ctx.Pool(min(jobs, len(todo)), initializer=_init_worker, initargs=(runner_name, options, groot))
            results = pool.imap_unordered(_run_unit, todo, chunksize=1)
        for r in results:
            if fh:
                fh.write(json.dumps(asdict(r)) + "\n")
                fh.flush()
            if bar:
                bar.update(sizes[_unit_key(r.sweep, r.domain, r.chunk)])
            yield r
        if pool:
            pool.close()
            pool.join()
    finally:
        if bar:
            bar.close()
        if fh:
            fh.close()


def regenerate(sweeps: list[Sweep], domains: Iterable[str], chunks: range | None = None, jobs: int = 1,
               root: Path | None = None, progress: bool = True, force: bool = False) -> dict[str, int]:
    """Compute golden digests with the oracle (only missing chunks unless ``force``); saves as it goes."""
    work = units(sweeps, domains, chunks)
    current: dict[tuple[str, str], list] = {}
    for s, d, _ in work:
        if (s.id, d) not in current:
            current[(s.id, d)] = list(golden_digests(s, domain(s, d), root))
    if not force:
        work = [u for u in work if current[(u[0].id, u[1])][u[2]] is None]
    by_id = {s.id: s for s in sweeps}
    pending_save: dict[tuple[str, str], float] = {}
    last_save = time.perf_counter()
    n = 0
    for r in execute(work, None, jobs=jobs, golden_root=root, progress=progress, label="oracle"):
        if r.status != "golden":
            raise RuntimeError(f"oracle failed on {r.sweep} {r.domain} chunk {r.chunk}: {r.detail}")
        current[(r.sweep, r.domain)][r.chunk] = r.digest
        pending_save[(r.sweep, r.domain)] = pending_save.get((r.sweep, r.domain), 0.0) + r.seconds
        n += 1
        if time.perf_counter() - last_save > 30:
            _flush(pending_save, current, by_id, root)
            last_save = time.perf_counter()
    _flush(pending_save, current, by_id, root)
    return {"chunks": n}


def _flush(pending, current, by_id, root) -> None:
    for (sid, dname), secs in list(pending.items()):
        s = by_id[sid]
        save_golden(s, domain(s, dname), current[(sid, dname)], root, secs)
        del pending[(sid, dname)]


@dataclass
class Summary:
    results: list[UnitResult]

    def by_sweep(self) -> dict[tuple[str, str], list[UnitResult]]:
        out: dict[tuple[str, str], list[UnitResult]] = {}
        for r in self.results:
            out.setdefault((r.sweep, r.domain), []).append(r)
        return out

    @property
    def failed(self) -> list[UnitResult]:
        return [r for r in self.results if r.status in ("mismatch", "error")]

    @property
    def missing(self) -> list[UnitResult]:
        return [r for r in self.results if r.status == "no-golden"]

    def lines(self) -> list[str]:
        out = []
        for (sid, dname), rs in sorted(self.by_sweep().items()):
            counts: dict[str, int] = {}
            for r in rs:
                counts[r.status] = counts.get(r.status, 0) + 1
            elements = sum(r.elements for r in rs)
            status = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
            out.append(f"{sid} [{dname}] {elements:,} inputs: {status}")
            unsup = next((r for r in rs if r.status == "unsupported"), None)
            if unsup:
                detail = unsup.detail if len(unsup.detail) <= 240 else unsup.detail[:240] + " ..."
                out.append(f"  unsupported: {detail}")
            for r in sorted(rs, key=lambda r: r.chunk):
                if r.status in ("mismatch", "error"):
                    out.append(f"  chunk {r.chunk}: {r.status}: " + r.detail.replace("\n", "\n  "))
                elif r.status == "reading":
                    out.append(f"  chunk {r.chunk}: {r.detail}")
        return out


def check(sweeps: list[Sweep], domains: Iterable[str], runner_name: str, options: dict[str, str] | None = None,
          chunks: range | None = None, jobs: int = 1, state: Path | None = None, golden_root: Path | None = None,
          progress: bool = False) -> Summary:
    """Run a runner over sweeps and return the per-unit results (the API the tests use)."""
    work = units(sweeps, domains, chunks)
    return Summary(list(execute(work, runner_name, options, jobs, state, golden_root, progress)))


__all__ = ["Domain", "Summary", "Sweep", "UnitResult", "all_sweeps", "check", "domain", "execute", "golden_digests",
           "inputs", "oracle_digest", "regenerate", "select", "sweep_model", "units"]


# ----------------------------------------------------------------------------------------------
# `qconform sweep`
# ----------------------------------------------------------------------------------------------
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


def main(args) -> int:
    try:
        sweeps = select(args.select)
        chunks = parse_chunks(args.chunks)
    except ValueError as exc:
        print(f"qconform sweep: {exc}", file=sys.stderr)
        return 2
    domains = DOMAIN_SETS[args.domain]
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
        done = regenerate(sweeps, domains, chunks, args.jobs, args.golden_dir, not args.no_progress, args.force)
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
    summary = Summary(list(execute(work, args.runner, options, args.jobs, args.state, args.golden_dir,
                                   not args.no_progress)))
    for line in summary.lines():
        print(line)
    n_in = sum(r.elements for r in summary.results)
    print(f"{len(summary.results)} chunk(s), {n_in:,} inputs in {time.perf_counter() - t0:.1f} s: "
          f"{len(summary.failed)} with deviations or errors, {len(summary.missing)} without goldens")
    if summary.missing:
        print("goldens missing for some chunks: qconform sweep --regen --domain "
              f"{args.domain} {' '.join(args.select)}".rstrip())
    return 1 if summary.failed else 0

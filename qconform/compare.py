"""A runner's outputs against a case's readings: the verdict, the closest reading, the evidence and
the failure grammar. Every application that asks "are these the case's bits?" asks here.

Rules (qconform/docs/semantics.md#principles): element type and shape must match exactly; elements are
compared by ``ElemType.differs`` (the one element rule, on the type registry: raw bits, so −0 ≠ +0;
any NaN matches any NaN of the type unless ``strict_nan``; don't-care elements skipped but counted).
A case passes if the outputs match any permitted reading (``profile="strict"``: only the first, the
latest spec text's: ``usable``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence, TypeVar

import numpy as np

from qconform import dtypes
from qconform.case import Case, Reading
from qconform.verdicts import ERROR, FAIL, PASS, Verdict

R = TypeVar("R")

MAX_SHOWN = 5


@dataclass(frozen=True)
class Mismatch:
    output: str
    index: tuple[int, ...]
    expected_bits: int
    actual_bits: int
    expected_value: str
    actual_value: str
    inputs: dict[str, str]

    def line(self, t: dtypes.ElemType) -> str:
        w = max(1, (t.bits + 3) // 4)
        idx = ",".join(map(str, self.index))
        ins = ", ".join(f"{k}={v}" for k, v in self.inputs.items())
        return (f"{self.output}[{idx}]=0x{self.actual_bits:0{w}x} ({self.actual_value}), but should be "
                f"0x{self.expected_bits:0{w}x} ({self.expected_value})" + (f" [{ins}]" if ins else ""))


@dataclass
class Outcome:
    verdict: Verdict  # pass | fail | error
    reading: str | None = None  # the reading matched (pass) or compared against (fail)
    mismatches: list[Mismatch] = field(default_factory=list)
    mismatch_count: int = 0
    masked: int = 0
    problem: str = ""  # structural problem: output count, dtype, shape, not an array
    #: A failure's difference masks against ``reading``, one per output (``ElemType.differs``): the
    #: one comparison, which evidence, localisation and the diagnosis read instead of diffing again.
    differences: tuple[np.ndarray, ...] = field(default=(), repr=False, compare=False)

    def message(self, case: Case) -> str:
        head = f"{case.id} [{case.op}-{case.opset} {_attrs(case)}] clause: qconform/docs/semantics.md#{case.clause}"
        if self.problem:
            return f"{head}\n  {self.verdict}: {self.problem}"
        lines = [head, f"  {self.mismatch_count} element(s) differ from reading '{self.reading}'"
                       + (f"; {self.masked} don't-care element(s) skipped" if self.masked else "")]
        for m in self.mismatches:
            t = dtypes.get(case.expected[case.output_names.index(m.output)].dtype)
            lines.append("  " + m.line(t))
        if self.mismatch_count > len(self.mismatches):
            lines.append(f"  ... and {self.mismatch_count - len(self.mismatches)} more")
        return "\n".join(lines)


def _attrs(case: Case) -> str:
    types = case.types.replace("-", "→", 1) if case.types.count("-") == 1 else case.types
    return " ".join([types] + [f"{k}={v}" for k, v in sorted(case.attrs.items())])


def format_value(t: dtypes.ElemType, bits: int) -> str:
    return format_values(t, np.array([bits]))[0]


def format_values(t: dtypes.ElemType, bits: np.ndarray) -> list[str]:
    """Each code's value as text, for a whole array at once (evidence can hold 100,000 elements)."""
    bits = np.asarray(bits).reshape(-1)
    if t.is_integer:
        return [str(v) for v in np.asarray(t.from_bits(bits)).astype(np.int64).tolist()]
    from qconform.oracle.floats import decode

    return [repr(float(v)) for v in decode(bits.astype(np.uint64), t)]


def _input_columns(case: Case, shape: tuple[int, ...], sel: tuple[np.ndarray, ...]) -> list[tuple[str, list[str]]]:
    """The inputs beside output elements ``sel`` (index arrays): those shaped like the output, read
    at the same elements, and one-element ones (a scalar scale), repeated."""
    n = len(sel[0]) if sel else 1
    out = []
    for arg in case.inputs:
        if arg is None:
            continue
        t = dtypes.get(arg.type)
        if arg.value.shape == shape:
            out.append((arg.name, format_values(t, t.to_bits(arg.value)[sel])))
        elif arg.value.size == 1:
            out.append((arg.name, format_values(t, t.to_bits(arg.value).reshape(-1)) * n))
    return out


def _input_context(case: Case, shape: tuple[int, ...], index: tuple[int, ...]) -> dict[str, str]:
    return {name: vals[0] for name, vals in _input_columns(case, shape, tuple(np.array([i]) for i in index))}


def check_structure(case: Case, actual: object) -> str:
    """A runner result's structural problem, or '' when it is a list of arrays of the right count."""
    if not isinstance(actual, (list, tuple)):
        return f"runner returned {type(actual).__name__}, not a list of arrays"
    if len(actual) != len(case.output_names):
        return f"runner returned {len(actual)} output(s); {case.op} has {len(case.output_names)}"
    for name, a in zip(case.output_names, actual):
        if not isinstance(a, np.ndarray):
            return f"output {name} is {type(a).__name__}, not a numpy array"
    return ""


def usable(readings: Sequence[R], profile: str) -> Sequence[R]:
    """The readings a result may match: under ``--profile=strict`` only the first (the latest spec
    text's), else every permitted one."""
    return readings[:1] if profile == "strict" else readings


def masks(case: Case, reading: Reading) -> tuple[np.ndarray | None, ...]:
    """The don't-care elements of one of the case's readings, per output: the reading's own (an
    element only another reading leaves undefined is checked against this one)."""
    return reading.dont_care


def _structure(e: np.ndarray, a: object) -> str:
    """Why ``a`` cannot be compared element by element with ``e`` ('' when it can)."""
    if not isinstance(a, np.ndarray):
        return f"{type(a).__name__}, not a numpy array"
    if a.dtype != e.dtype:
        got = dtypes.BY_DTYPE.get(a.dtype)
        return f"element type {got.name if got else a.dtype}, expected {dtypes.get(e.dtype).name}"
    if a.shape != e.shape:
        return f"shape {a.shape}, expected {e.shape}"
    return ""


def differences(expected: Sequence[np.ndarray], actual: Sequence[object], masks: Sequence[np.ndarray | None] | None,
                strict_nan: bool = False) -> list[np.ndarray | str]:
    """Per output: where ``actual`` differs from ``expected`` (``ElemType.differs``, with the output's
    don't-care mask), or why the two cannot be compared (a str: another element type or shape)."""
    out: list[np.ndarray | str] = []
    for i, (e, a) in enumerate(zip(expected, actual)):
        problem = _structure(e, a)
        mask = masks[i] if masks is not None and i < len(masks) else None
        out.append(problem or dtypes.get(e.dtype).differs(e, a, mask, strict_nan=strict_nan))
    return out


def unchecked(case: Case, output: int) -> np.ndarray | None:
    """The elements of an output that every reading of the case leaves undefined (don't-care): no
    comparison of any profile looks at them. None: every element is checked by some reading."""
    found = None
    for r in case.readings:
        m = r.dont_care[output]
        if m is None:
            return None
        m = np.asarray(m, bool)
        if found is not None and m.shape != found.shape:
            return None  # masks that do not line up: every element counts (the safe side)
        found = m if found is None else found & m
    return found if found is not None and found.any() else None


def agree(case: Case, a: Sequence[object], b: Sequence[object]) -> bool:
    """Whether two runs' outputs of a case are the same for every comparison: the same element
    types and shapes, and the same bytes in every element some reading checks (the bytes a runtime
    writes where every reading leaves the value undefined may change from run to run; no verdict,
    reading or count depends on them). What ``qconform facts packing`` asks of packed and single runs."""
    if len(a) != len(b) or len(a) != len(case.output_names):
        return False
    for k, (x, y) in enumerate(zip(a, b)):
        if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)) or x.dtype.hasobject:
            return False  # what compare rejects (or cannot read as bits) agrees with nothing
        if x.dtype != y.dtype or x.shape != y.shape:
            return False
        if x.tobytes() == y.tobytes():
            continue
        free = unchecked(case, k)
        if free is None or free.shape != x.shape:
            return False
        width = x.dtype.itemsize
        rows = (np.ascontiguousarray(v).reshape(-1).view(np.uint8).reshape(-1, width) for v in (x, y))
        if np.any(np.any(next(rows) != next(rows), axis=1) & ~free.reshape(-1)):
            return False
    return True


def differing(expected: Sequence[np.ndarray], actual: Sequence[object], masks: Sequence[np.ndarray | None] | None,
              strict_nan: bool = False) -> int:
    """How many elements of ``actual`` differ from ``expected``; -1 when they cannot be compared
    (another number of outputs, element type or shape)."""
    if len(expected) != len(actual):
        return -1
    n = 0
    for d in differences(expected, actual, masks, strict_nan):
        if isinstance(d, str):
            return -1
        n += int(np.count_nonzero(d))
    return n


def closest(candidates: Iterable[tuple[str, Sequence[np.ndarray], Sequence[np.ndarray | None] | None]],
            actual: Sequence[object], strict_nan: bool = False) -> tuple[int, str | None]:
    """(the fewest differing elements, the name of that reading) over ``candidates`` -- (name,
    outputs, masks) each --; the first wins a tie, and (-1, None) says none can be compared."""
    best: tuple[int, str | None] = (-1, None)
    for name, outputs, reading_masks in candidates:
        n = differing(outputs, actual, reading_masks, strict_nan)
        if n >= 0 and (best[0] < 0 or n < best[0]):
            best = (n, name)
            if n == 0:
                break
    return best


def candidates(case: Case, profile: str = "default"):
    """The case's usable readings as ``closest`` takes them: (name, outputs, masks)."""
    return [(r.name, r.outputs, masks(case, r)) for r in usable(case.readings, profile)]


def passes(case: Case, actual: Sequence[object], *, strict_nan: bool = False, profile: str = "default") -> bool:
    """Whether ``actual`` is one of the case's usable readings: ``compare``'s pass, without its texts."""
    return closest(candidates(case, profile), actual, strict_nan)[0] == 0


def _mismatches(case: Case, reading: Reading, actual, diffs: Sequence[np.ndarray]) -> list[Mismatch]:
    """The first ``MAX_SHOWN`` mismatching elements, with their values and inputs as text."""
    mism: list[Mismatch] = []
    for name, e, a, differ in zip(case.output_names, reading.outputs, actual, diffs):
        if len(mism) >= MAX_SHOWN:
            break
        where = np.argwhere(differ)[: MAX_SHOWN - len(mism)]
        if not len(where):
            continue
        t = dtypes.get(e.dtype)
        eb, ab = t.to_bits(e), t.to_bits(a)
        for idx in where:
            idx = tuple(int(i) for i in idx)
            mism.append(Mismatch(name, idx, int(eb[idx]), int(ab[idx]), format_value(t, int(eb[idx])),
                                 format_value(t, int(ab[idx])), _input_context(case, e.shape, idx)))
    return mism


#: At most this many mismatching elements per case are kept as evidence (the count is always exact).
EVIDENCE_MAX = 100_000
EVIDENCE_HEADER = ("output", "index", "inputs", "expected", "expected_bits", "actual", "actual_bits")


def evidence(case: Case, actual, outcome: Outcome) -> list[list[str]]:
    """Every mismatching element of a failing case against the reading it was compared with (the
    outcome's own difference masks): one row per element (EVIDENCE_HEADER), values as numbers and
    bits as hex -- the rows a customer asking "which inputs exactly?" gets (``report/evidence/*.csv``)."""
    chosen = reading_of(case, outcome)
    rows: list[list[str]] = []
    for name, e, a, differ in zip(case.output_names, chosen.outputs, actual, outcome.differences):
        t = dtypes.get(e.dtype)
        where = np.argwhere(differ)[: max(0, EVIDENCE_MAX - len(rows))]
        if not len(where):
            continue
        eb, ab = t.to_bits(e), t.to_bits(a)
        sel = tuple(where.T)
        w = max(1, (t.bits + 3) // 4)
        columns = _input_columns(case, e.shape, sel)
        ebs, abs_ = eb[sel].reshape(-1), ab[sel].reshape(-1)  # rank 0: one element, selected by ()
        ev, av = format_values(t, ebs), format_values(t, abs_)
        for i, idx in enumerate(where.tolist()):
            rows.append([name, ",".join(map(str, idx)), "; ".join(f"{n}={vals[i]}" for n, vals in columns),
                         ev[i], f"0x{int(ebs[i]):0{w}x}", av[i], f"0x{int(abs_[i]):0{w}x}"])
    return rows


def reading_of(case: Case, outcome: Outcome) -> Reading:
    """The reading an outcome names (the case's first where it names none)."""
    return next((r for r in case.readings if r.name == outcome.reading), case.readings[0])


def compare(case: Case, actual: object, *, strict_nan: bool = False, profile: str = "default",
            against: str | None = None) -> Outcome:
    """The verdict of a runner's outputs: a pass names the reading matched; a failure is shown
    against the first usable reading (the latest text's), with its first mismatches and its
    difference masks. ``against``: judge against that one reading of the case only (a finding's
    nearest reading). Each reading is compared once."""
    problem = check_structure(case, actual)
    if problem:
        return Outcome(ERROR, problem=problem)
    readings = [r for r in case.readings if r.name == against] if against else usable(case.readings, profile)
    first: tuple[Reading, list, int] | None = None
    for reading in readings:
        reading_masks = masks(case, reading)
        diffs = differences(reading.outputs, actual, reading_masks, strict_nan)
        structural = next((f"output {n}: {d}" for n, d in zip(case.output_names, diffs) if isinstance(d, str)), "")
        if structural:
            return Outcome(FAIL, reading=reading.name, problem=structural)
        masked = sum(int(m.sum()) for m in reading_masks if m is not None)
        if not any(d.any() for d in diffs):
            return Outcome(PASS, reading=reading.name, masked=masked)
        first = first or (reading, diffs, masked)
    if first is None:
        raise KeyError(f"{case.id} has no reading {against!r}")
    reading, diffs, masked = first
    return Outcome(FAIL, reading.name, _mismatches(case, reading, actual, diffs),
                   sum(int(np.count_nonzero(d)) for d in diffs), masked, differences=tuple(diffs))

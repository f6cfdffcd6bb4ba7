"""Results a device wrote offline, judged by the engine: the executor for devices with no network.

The round trip: ``qconform export backend-test DIR`` writes every case as a model and its inputs
(ONNX's backend-test layout, ``DIR/index.json`` listing each case's directories). The device team's
own tool, on the device and without qconform, runs each ``model.onnx`` on its
``test_data_set_0/input_N.pb`` and writes, in the case's **first** directory::

    actual/output_N.pb      each output as a TensorProto (ONNX layout: raw_data or the typed fields)
    actual/unsupported.txt  instead: the device cannot run this model (its reason inside)
    actual/error.txt        instead: the run failed (its message inside)

and, once, ``DIR/device.json``: ``{"name": ..., "version": ..., ...}`` (the report's runner identity;
its platform is the device's, not this host's). ``qconform import-results DIR --report OUT`` then
judges every case through the same pipeline as a live run (``Pipeline.judge_call``: the outputs'
structure checked, compared with every permitted reading, diagnosed) and writes the same report. A
case with nothing in ``actual/`` is *unsupported* ("no result written"), never a pass.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from qconform.execution import CaseResult, Options, Pipeline
from qconform.isolation import CallResult, call, reason_line
from qconform.verdicts import Call

ACTUAL = "actual"
DEVICE = "device.json"


class OfflineError(ValueError):
    """The results folder is not an export (no index.json) or belongs to another corpus: one line."""


def read_tensor(path: Path) -> np.ndarray:
    """A TensorProto file as a qconform array (bit-exact: raw bytes through ``qconform.adapt``)."""
    from qconform import adapt

    return adapt.from_tensor_proto(path.read_bytes())


class OfflineResults:
    """The runner identity of an offline run: what the device tool wrote in ``device.json``."""

    def __init__(self, root: str) -> None:
        self.root = Path(root)
        try:
            info = json.loads((self.root / DEVICE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            info = {}
        except ValueError as exc:
            raise OfflineError(f"{self.root / DEVICE}: not JSON ({exc})") from None
        self.info = {"name": f"offline:{self.root.name}", **info, "results": str(self.root)}
        self.name = str(self.info["name"])

    def describe(self) -> dict[str, Any]:
        return dict(self.info)

    def run(self, model, inputs):  # pragma: no cover - never called: the engine reads files instead
        raise RuntimeError("offline results are judged by OfflineEngine, not run")


def load_index(root: Path, digest: str) -> dict[str, Path]:
    """Case id -> the directory its results go in (the first of its readings' directories)."""
    try:
        index = json.loads((root / "index.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise OfflineError(f"{root}: no index.json (write it with qconform export backend-test {root})") from None
    except ValueError as exc:
        raise OfflineError(f"{root}/index.json: not JSON ({exc})") from None
    if index.get("corpus_digest") != digest:
        raise OfflineError(f"{root}: exported from corpus {str(index.get('corpus_digest'))[:12]}, this corpus is "
                           f"{digest[:12]}: export again with this qconform")
    return {c["id"]: root / c["readings"][0]["dir"] for c in index.get("cases", [])}


def stored_call(case, directory: Path) -> CallResult:
    """What the device tool wrote for one case, as the runner call it stands for."""
    actual = directory / ACTUAL
    for name, kind in (("unsupported.txt", Call.UNSUPPORTED), ("error.txt", Call.ERROR)):
        if (actual / name).is_file():
            text = (actual / name).read_text(encoding="utf-8", errors="replace")
            return CallResult(kind, message=reason_line(text) if kind == Call.UNSUPPORTED else text.strip())
    files = [actual / f"output_{n}.pb" for n in range(len(case.output_names))]
    if not any(f.is_file() for f in files):
        return CallResult(Call.UNSUPPORTED, message=f"no result written for this case (in {actual})")
    try:
        outputs = [read_tensor(f) for f in files if f.is_file()]
    except Exception as exc:  # noqa: BLE001 - a malformed file is that case's error, said as such
        return CallResult(Call.ERROR, message=f"unreadable result in {actual}: {type(exc).__name__}: {exc}")
    return call(lambda feeds: outputs, case.feeds)  # the structure checks every live runner's result gets


class OfflineEngine:
    """The ``Executor`` over a results folder: each case judged from its stored outputs."""

    runs_ahead = False
    workers = 0

    def __init__(self, options: Options, index, root: Path) -> None:
        self.root = Path(root)
        self.dirs = load_index(self.root, index.digest)
        self.pipeline = Pipeline(options, OfflineResults(str(self.root)), index)
        self.description = f"offline results in {self.root}"

    def describe(self) -> str:
        return self.description

    def submit(self, case_ids: Sequence[str]) -> None:
        pass

    def result(self, case_id: str) -> CaseResult:
        case = self.pipeline.cases.case(case_id)
        directory = self.dirs.get(case_id)
        if directory is None:
            got = CallResult(Call.UNSUPPORTED, message=f"not in the export at {self.root} (export it, run it, import again)")
        else:
            got = stored_call(case, directory)
        return self.pipeline.judge_call(case, got)

    def close(self) -> None:
        pass


__all__ = ["OfflineEngine", "OfflineError", "OfflineResults", "load_index", "read_tensor", "stored_call"]

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
structure checked, compared with every permitted reading, diagnosed) and writes the same report.

What the folder cannot show is never a verdict: a case with nothing in ``actual/``, outputs only in
part, or outputs *and* a refusal written (a stale file) is *not run*, and a run with a case not run
is incomplete (no conformance stated, exit 2). The identity in ``device.json`` is shown as declared,
not verified, unless the folder carries ``results.sha256`` (every ``actual/`` file and
``device.json`` with its SHA-256, ``sha256sum`` format) and ``results.mac`` (HMAC-SHA256 of that
file under the shared secret, in hex) and the import is given the secret: then every file is
checked and an unlisted or edited one refuses the import.
"""
from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from qconform.execution import CaseResult, Options, Pipeline
from qconform.isolation import CallResult, call, reason_line
from qconform.verdicts import NOT_RUN, Call

ACTUAL = "actual"
DEVICE = "device.json"
#: The device tool's list of what it wrote (``sha256sum`` format) and that list's MAC.
SUMS, MAC = "results.sha256", "results.mac"


class OfflineError(ValueError):
    """The results folder is not an export (no index.json) or belongs to another corpus: one line."""


def read_tensor(path: Path) -> np.ndarray:
    """A TensorProto file as a qconform array (bit-exact: raw bytes through ``qconform.adapt``)."""
    from qconform import adapt

    return adapt.from_tensor_proto(path.read_bytes())


def result_files(root: Path) -> list[str]:
    """What a device tool wrote: ``device.json`` and every file under a case's ``actual/``, as
    POSIX paths relative to ``root``, sorted (the list ``results.sha256`` must cover)."""
    files = [p for p in root.rglob("*") if p.is_file() and ACTUAL in p.relative_to(root).parts[:-1]]
    if (root / DEVICE).is_file():
        files.append(root / DEVICE)
    return sorted(p.relative_to(root).as_posix() for p in files)


def sign(root: Path, secret: bytes) -> None:
    """Write ``results.sha256`` and ``results.mac`` for a results folder (what a device tool that has
    Python runs; one in C does the same with sha256sum and an HMAC, qconform/docs/runners.md §11)."""
    sums = "".join(f"{hashlib.sha256((root / name).read_bytes()).hexdigest()}  {name}\n" for name in result_files(root))
    (root / SUMS).write_text(sums, encoding="utf-8")
    (root / MAC).write_text(hmac.new(secret, sums.encode(), hashlib.sha256).hexdigest() + "\n", encoding="utf-8")


def verify(root: Path, secret: bytes | None) -> str:
    """'verified' (a valid MAC under ``secret`` over a list that covers every result file, each
    unchanged), 'unchecked' (a MAC, but no secret here to check it) or 'none' (no MAC). A MAC that
    does not verify, or a file edited, added or removed after signing, raises OfflineError."""
    if not (root / MAC).is_file():
        return "none"
    if secret is None:
        return "unchecked"
    try:
        sums = (root / SUMS).read_bytes()
    except FileNotFoundError:
        raise OfflineError(f"{root}: {MAC} without {SUMS}: the results cannot be checked") from None
    want = hmac.new(secret, sums, hashlib.sha256).hexdigest()
    if not hmac.compare_digest((root / MAC).read_text(encoding="utf-8").strip(), want):
        raise OfflineError(f"{root}: {MAC} does not verify under the shared secret: the results were changed "
                           "after signing, or signed with another secret; refused")
    listed = {}
    for line in sums.decode("utf-8", "replace").splitlines():
        digest, _, name = line.partition("  ")
        listed[name.lstrip("*")] = digest
    present = result_files(root)
    unlisted = sorted(set(present) - set(listed))
    if unlisted:
        raise OfflineError(f"{root}: {len(unlisted)} result file(s) not in the signed {SUMS} (first: {unlisted[0]}); "
                           "refused")
    for name, digest in listed.items():
        path = root / name
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            raise OfflineError(f"{root}: {name} is missing or differs from the signed {SUMS}; refused")
    return "verified"


class OfflineResults:
    """The runner identity of an offline run: what the device tool wrote in ``device.json``, marked
    ``authenticated`` only when the folder's MAC verified under the shared secret."""

    def __init__(self, root: str, secret: bytes | None = None) -> None:
        self.root = Path(root)
        try:
            info = json.loads((self.root / DEVICE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            info = {}
        except ValueError as exc:
            raise OfflineError(f"{self.root / DEVICE}: not JSON ({exc})") from None
        if not isinstance(info, dict):
            raise OfflineError(f"{self.root / DEVICE}: not a JSON object")
        mac = verify(self.root, secret)
        self.info = {"name": f"offline:{self.root.name}", **info, "results": str(self.root),
                     "authenticated": mac == "verified",
                     "identity": {"verified": "verified by the results' MAC under the shared secret",
                                  "unchecked": "declared by device.json; the results carry a MAC, but no secret "
                                               "was given to check it",
                                  "none": "declared by device.json, not verified (no MAC)"}[mac]}
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


#: Why a case of the export is not run: each said once in the report, never per path.
NO_RESULT = "no result written by the device tool for this case"
PARTIAL = "the device tool wrote only some of this case's outputs"
CONFLICT = ("the device tool wrote outputs and a refusal (unsupported.txt or error.txt) for this case: "
            "one of them is stale; clear actual/ and run the case again")
UNREADABLE = "a result file of this case is not a TensorProto"
NOT_EXPORTED = "not in the export (export it, run it, import again)"


def stored_call(case, directory: Path) -> CallResult:
    """What the device tool wrote for one case, as the runner call it stands for; what it cannot
    stand for (nothing, a part, a contradiction) is *not run*."""
    actual = directory / ACTUAL
    files = [actual / f"output_{n}.pb" for n in range(len(case.output_names))]
    written = [f.is_file() for f in files]
    refusals = [(name, kind) for name, kind in (("unsupported.txt", Call.UNSUPPORTED), ("error.txt", Call.ERROR))
                if (actual / name).is_file()]
    if refusals and any(written) or len(refusals) > 1:
        return CallResult(NOT_RUN, message=CONFLICT)
    if refusals:
        name, kind = refusals[0]
        text = (actual / name).read_text(encoding="utf-8", errors="replace")
        return CallResult(kind, message=reason_line(text) if kind == Call.UNSUPPORTED else text.strip())
    if not any(written):
        return CallResult(NOT_RUN, message=NO_RESULT)
    if not all(written):
        return CallResult(NOT_RUN, message=PARTIAL)
    try:
        outputs = [read_tensor(f) for f in files]
    except Exception:  # noqa: BLE001 - the device tool's file, not the runtime's result
        return CallResult(NOT_RUN, message=UNREADABLE)
    return call(lambda feeds: outputs, case.feeds)  # the structure checks every live runner's result gets


class OfflineEngine:
    """The ``Executor`` over a results folder: each case judged from its stored outputs."""

    runs_ahead = False
    workers = 0

    def __init__(self, options: Options, index, root: Path, results: OfflineResults | None = None) -> None:
        self.root = Path(root)
        self.dirs = load_index(self.root, index.digest)
        self.pipeline = Pipeline(options, results or OfflineResults(str(self.root)), index)
        self.description = f"offline results in {self.root}"

    def describe(self) -> str:
        return self.description

    def submit(self, case_ids: Sequence[str]) -> None:
        pass

    def result(self, case_id: str) -> CaseResult:
        case = self.pipeline.cases.case(case_id)
        directory = self.dirs.get(case_id)
        if directory is None:
            got = CallResult(NOT_RUN, message=NOT_EXPORTED)
        else:
            got = stored_call(case, directory)
        return self.pipeline.judge_call(case, got)

    def close(self) -> None:
        pass


__all__ = ["OfflineEngine", "OfflineError", "OfflineResults", "load_index", "read_tensor", "result_files", "sign",
           "stored_call", "verify"]

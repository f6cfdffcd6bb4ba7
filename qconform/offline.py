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
part, or outputs *and* a refusal written (a stale file) is *not run*, and so is a case whose
``model.onnx`` or inputs are not the corpus's byte for byte (an export changed before the device ran
it); a run with a case not run is incomplete (no conformance stated, exit 2). A case directory in
``index.json`` must lie inside the folder.

The identity in ``device.json`` is shown as declared, not verified, unless the folder carries
``results.sha256`` (**every** file in the folder but the two signature files -- index.json, each
case's model and inputs, the actual outputs, device.json -- with its SHA-256, ``sha256sum`` format)
and ``results.mac`` (HMAC-SHA256 of that file under the shared secret, in hex) and the import is
given the secret: then every file is checked and an unlisted, missing or edited one refuses the
import. Given the secret, unsigned results are refused too: authentication cannot be downgraded by
deleting the MAC. The runner identity carries a digest of every file (``results_sha256``), so a
``--state`` file written for other results is refused.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from qconform.execution import CaseResult, Options, Pipeline
from qconform.isolation import CallResult, call, reason_line
from qconform.model import runnable_files
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
    """What ``results.sha256`` lists -- the one list that signing and verifying read: every file in
    the folder but the two signature files, as POSIX paths relative to ``root``, sorted. Everything
    the import reads is in it (index.json, each case's model and inputs, actual/, device.json), so no
    file can be edited, swapped or redirected after signing. Symlinked directories are not entered."""
    files = []
    for top, _, names in os.walk(root):
        files += [Path(top, n).relative_to(root).as_posix() for n in names]
    return sorted(f for f in files if f not in (SUMS, MAC))


def digests(root: Path) -> dict[str, str]:
    """Each listed file's SHA-256 (hex), by its path in ``result_files``."""
    return {name: hashlib.sha256((root / name).read_bytes()).hexdigest() for name in result_files(root)}


def manifest(present: dict[str, str]) -> str:
    """``results.sha256``'s text for these digests (``sha256sum`` format, sorted by path)."""
    return "".join(f"{digest}  {name}\n" for name, digest in sorted(present.items()))


def sign(root: Path, secret: bytes) -> None:
    """Write ``results.sha256`` and ``results.mac`` for a results folder (what a device tool that has
    Python runs; one in C does the same with sha256sum and an HMAC, qconform/docs/runners.md §11)."""
    sums = manifest(digests(root))
    (root / SUMS).write_text(sums, encoding="utf-8")
    (root / MAC).write_text(hmac.new(secret, sums.encode(), hashlib.sha256).hexdigest() + "\n", encoding="utf-8")


def verify(root: Path, secret: bytes | None, present: dict[str, str] | None = None) -> str:
    """'verified' (a valid MAC under ``secret`` over a list of every file in the folder, each
    unchanged), 'unchecked' (a MAC, but no secret here to check it) or 'none' (no MAC, no secret).
    Raises OfflineError, in one line, when the MAC does not verify, a file was edited, added or removed
    after signing, or a secret is given and the folder is not signed: a CI job that passes the secret
    requires signed results, as a controller holding the secret refuses a worker that does not prove
    it. ``present``: the folder's ``digests``, when already computed."""
    if secret is None:
        return "unchecked" if (root / MAC).is_file() else "none"
    missing = [name for name in (MAC, SUMS) if not (root / name).is_file()]
    if missing:
        raise OfflineError(f"{root}: a shared secret was given but the results are not signed (no "
                           f"{' and no '.join(missing)}): sign them on the device (qconform export sign) or "
                           "import without the secret; refused")
    sums = (root / SUMS).read_bytes()
    want = hmac.new(secret, sums, hashlib.sha256).hexdigest()
    if not hmac.compare_digest((root / MAC).read_text(encoding="utf-8").strip(), want):
        raise OfflineError(f"{root}: {MAC} does not verify under the shared secret: the results were changed "
                           "after signing, or signed with another secret; refused")
    listed = {}
    for line in sums.decode("utf-8", "replace").splitlines():
        digest, _, name = line.partition("  ")
        listed[name.lstrip("*").removeprefix("./")] = digest
    if "index.json" not in listed and (root / "index.json").is_file():
        raise OfflineError(f"{root}: {SUMS} does not list index.json: signed by an older qconform, which signed "
                           "only actual/ and device.json; sign the folder again on the device (qconform export sign)")
    present = digests(root) if present is None else present
    unlisted = sorted(set(present) - set(listed))
    if unlisted:
        raise OfflineError(f"{root}: {len(unlisted)} file(s) not in the signed {SUMS} (first: {unlisted[0]}); "
                           "refused")
    for name, digest in listed.items():
        if present.get(name) != digest:
            raise OfflineError(f"{root}: {name} is missing or differs from the signed {SUMS}; refused")
    return "verified"


class OfflineResults:
    """The runner identity of an offline run: what the device tool wrote in ``device.json``, marked
    ``authenticated`` only when the folder's MAC verified under the shared secret, and the digest of
    every file in the folder (``results_sha256``): the identity keys ``--state``, so verdicts are
    never read back across changed results."""

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
        present = digests(self.root)
        mac = verify(self.root, secret, present)
        self.info = {"name": f"offline:{self.root.name}", **info, "results": str(self.root),
                     "results_sha256": hashlib.sha256(manifest(present).encode()).hexdigest(),
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


def case_dir(root: Path, rel: object) -> Path:
    """A case's directory named in index.json, refused in one line unless it lies inside the folder
    (no absolute path, no ``..``, no symlink leading out): results elsewhere are not this folder's,
    signed or not."""
    inside = isinstance(rel, str) and not PurePosixPath(rel).is_absolute() \
        and ".." not in PurePosixPath(rel).parts and (root / rel).resolve().is_relative_to(root.resolve())
    if not inside:
        raise OfflineError(f"{root}/index.json: case directory {rel!r} is not inside {root}; refused")
    return root / rel


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
    return {c["id"]: case_dir(root, c["readings"][0]["dir"]) for c in index.get("cases", [])}


#: Why a case of the export is not run: each said once in the report, never per path.
NO_RESULT = "no result written by the device tool for this case"
PARTIAL = "the device tool wrote only some of this case's outputs"
CONFLICT = ("the device tool wrote outputs and a refusal (unsupported.txt or error.txt) for this case: "
            "one of them is stale; clear actual/ and run the case again")
UNREADABLE = "a result file of this case is not a TensorProto"
NOT_EXPORTED = "not in the export (export it, run it, import again)"
NOT_CORPUS = ("the export's model.onnx or inputs for this case are not the corpus's (changed after export): "
              "export again and run the device on the new export")


def ran_the_corpus(case, directory: Path) -> bool:
    """Whether ``directory`` holds the corpus's model and inputs for ``case``, byte for byte as the
    export writes them: outputs of a changed model (or of another case's) are no result of this case,
    however well signed."""
    for rel, data in runnable_files(case).items():
        try:
            if (directory / rel).read_bytes() != data:
                return False
        except OSError:
            return False
    return True


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
        elif not ran_the_corpus(case, directory):
            got = CallResult(NOT_RUN, message=NOT_CORPUS)
        else:
            got = stored_call(case, directory)
        return self.pipeline.judge_call(case, got)

    def close(self) -> None:
        pass


__all__ = ["OfflineEngine", "OfflineError", "OfflineResults", "case_dir", "digests", "load_index", "manifest",
           "ran_the_corpus", "read_tensor", "result_files", "sign", "stored_call", "verify"]

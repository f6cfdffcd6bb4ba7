"""Writing a report directory, and the report's fields that do not depend on how the run was driven.

Both front-ends -- the pytest plugin (``qconform.plugin.report``) and ``qconform certify``'s own loop
(``qconform.apps.certify``) -- assemble report.json the same way (``qconform.gating.assembly``) and
write it here, so the same run gives the same files whichever drove it.
"""
from __future__ import annotations

import datetime as _dt
import platform
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from qconform import platform as machine
from qconform.report import model

#: Packages whose versions every report names (then every runtime distribution that is installed,
#: as the runtimes' declarations name them: ``Runtime.distributions``).
PACKAGES = ("numpy", "onnx", "ml_dtypes", "pytest", "pytest-xdist", "hypothesis")


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def package_versions() -> dict[str, str]:
    from qconform.declarations.runtimes import RUNTIMES

    out = {}
    for name in dict.fromkeys((*PACKAGES, *(d for rt in RUNTIMES.values() for d in rt.distributions))):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


def platform_meta() -> dict:
    """The machine a run happened on: Python, OS, packages, and the ISA class that selects a
    runtime's kernels (facts are keyed by it)."""
    return {"python": platform.python_version(), "implementation": platform.python_implementation(),
            "system": platform.system(), "release": platform.release(), "machine": platform.machine(),
            "platform": platform.platform(), "packages": package_versions(),
            **{k: v for k, v in machine.info().items() if k in ("label", "arch", "cpu", "features")}}


def meta(*, runner: dict, index, invocation: dict, started_iso: str, seconds: float, interrupted: bool,
         exit_status: int | None, stopped: str | None = None) -> dict:
    """What ``model.build`` needs besides the records: who ran, on what corpus and machine, how, when."""
    import qconform

    return {"qconform_version": qconform.__version__, "interrupted": interrupted, "stopped": stopped or None,
            "exit_status": exit_status,
            "runner": runner, "corpus": {"digest": index.digest, "cases": len(index), "root": str(index.root)},
            "platform": platform_meta(), "invocation": invocation,
            "timing": {"started": started_iso, "finished": now(), "duration_s": round(seconds, 3)}}


def baseline_identity(path: str | Path) -> dict:
    """The baseline file a certificate's accepted deviations come from, and its SHA-256."""
    from qconform.report.certificate import sha256_file

    try:
        return {"path": str(path), "sha256": sha256_file(Path(path))}
    except OSError:
        return {"path": str(path), "sha256": None}


def prepare(root: Path) -> str:
    """'' once the report directory exists (made if needed) and holds no report of an earlier run,
    else why it cannot be: both front-ends ask before the first case, so a bad ``--report`` costs
    nothing, and a run killed before ``write`` leaves no finished report of another run behind."""
    try:
        Path(root).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot create the directory: {exc.strerror or exc}"
    try:
        clear(Path(root))
    except OSError as exc:
        return f"cannot remove the earlier report in it: {exc.strerror or exc} ({exc.filename})"
    return ""


def clear(root: Path) -> None:
    """Remove what the writer writes (``certificate.DOCUMENTS``, SUMS, the files of its folders) and
    nothing else: the directory may hold the user's own files."""
    from qconform.report import certificate

    for name in (*certificate.DOCUMENTS, *certificate.BESIDE, certificate.SUMS):
        (root / name).unlink(missing_ok=True)
    for folder, pattern in certificate.FOLDERS.items():
        if not (root / folder).is_dir():
            continue
        for path in (root / folder).glob(pattern):
            if path.is_file():
                path.unlink()
        if not any((root / folder).iterdir()):
            (root / folder).rmdir()


def write(root: Path, report: dict, texts: dict[str, str] | None = None,
          beside: dict[str, str] | None = None) -> list[Path]:
    """report.json, report.html, summary.md, semantics.html, evidence/, texts/ and SHA256SUMS (an
    earlier run's are removed first); adds the integrity block to ``report``. ``beside``: further
    documents of the run, by file name (certify's certificate.json), written and summed with them.
    Returns the main files written."""
    from qconform.report import certificate, html, markdown, semantics_html

    root.mkdir(parents=True, exist_ok=True)
    clear(root)
    extra = _write_evidence(root, report) + _write_texts(root, texts or {})
    report["integrity"] = {"content_sha256": certificate.content_digest(report),
                           "corpus_digest": report["corpus"].get("digest")}
    files = {"report.json": model.dumps(report), "report.html": html.render(report),
             "summary.md": markdown.render(report), "semantics.html": semantics_html.render()}
    assert tuple(files) == certificate.DOCUMENTS
    files.update(beside or {})
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    (root / certificate.SUMS).write_text(certificate.sums_text(root, [*files, *extra]), encoding="utf-8")
    return [root / name for name in files]


def add(root: Path, files: dict[str, str | bytes]) -> list[Path]:
    """Documents a front-end writes once the report is written (a model's groups.md, which reads the
    verdicts, and its whole-model check's reproducer): each written and its SHA-256 listed in SUMS
    with the report's own files, so an edit to it shows as one to them does. Names are relative and
    stay inside ``root`` (a group's label is the model's node name, sanitised)."""
    from qconform.report import certificate

    written = []
    for name, data in files.items():
        path = root / name
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise ValueError(f"{name}: outside the report directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            path.write_text(data, encoding="utf-8")
        else:
            path.write_bytes(data)
        written.append(path)
    sums = root / certificate.SUMS
    listed = [line.partition("  ")[2] for line in sums.read_text(encoding="utf-8").splitlines()] if sums.is_file() else []
    names = [*(n for n in listed if n not in files), *files]
    sums.write_text(certificate.sums_text(root, names), encoding="utf-8")
    return written


def _write_evidence(root: Path, report: dict) -> list[str]:
    """Every mismatch of every failing case, one CSV per case in ``evidence/`` (a download beside
    the report; report.json keeps the first few inline and names the file)."""
    import csv
    import io
    import re

    from qconform.compare import EVIDENCE_HEADER

    written = []
    for f in report["failures"]:
        rows = f.pop("evidence", None)
        if not rows:
            continue
        name = "evidence/" + re.sub(r"[^A-Za-z0-9._-]+", "_", f["id"]) + ".csv"
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(EVIDENCE_HEADER)
        w.writerows(rows)
        (root / "evidence").mkdir(exist_ok=True)
        (root / name).write_text(buf.getvalue(), encoding="utf-8")
        f["evidence_file"] = name
        f["evidence_rows"] = len(rows)
        written.append(name)
    return written


def _write_texts(root: Path, texts: dict[str, str]) -> list[str]:
    """Each runner text report.json cut short, whole, once: ``texts/<sha256>.txt``."""
    written = []
    for digest, text in sorted(texts.items()):
        (root / "texts").mkdir(exist_ok=True)
        name = f"texts/{digest}.txt"
        (root / name).write_text(text, encoding="utf-8", errors="surrogateescape")
        written.append(name)
    return written

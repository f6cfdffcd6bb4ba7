"""Golden digest files: ``qconform/golden/sweeps/<sweep>.json``, one per sweep, per-chunk digests of
every domain. No timings or host facts in them: the same goldens are the same bytes on every machine,
and every file is listed in the corpus MANIFEST."""
from __future__ import annotations

import json
import os
from pathlib import Path

from qconform import corpus
from qconform.sweep.domains import Domain
from qconform.sweep.table import FORMAT, Sweep


def golden_dir(root: Path | None = None) -> Path:
    if root is not None:
        return Path(root)
    from qconform.corpus import DEFAULT_ROOT

    return DEFAULT_ROOT / "sweeps"


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



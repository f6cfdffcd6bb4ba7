"""Whether the committed scoreboard still holds: the corpus and the installed runtimes' versions."""
from __future__ import annotations

import json
from pathlib import Path

from qconform.apps.scoreboard._common import DATA
from qconform.apps.scoreboard.run import installed


def current_digest() -> str:
    """The shipped corpus's digest, checked against its MANIFEST (``qconform.corpus.verify``)."""
    from qconform import corpus
    from qconform.plugin import default_golden

    return corpus.verify(default_golden())


def installed_version(name: str) -> str | None:
    """The version a runner's describe() gives here (the call that recorded it), None where it cannot start."""
    info = installed(name)[0]
    return None if info is None or info.get("version") is None else str(info["version"])


def stale(scoreboard_dir: Path) -> list[str]:
    """Why the scoreboard in ``scoreboard_dir`` no longer matches this checkout (empty: current): its
    corpus digest is not the shipped corpus's, or an installed runtime's version is not the one
    measured. A runtime that cannot start here is no reason: nobody could re-measure it here."""
    from qconform.corpus import CorpusError

    path = Path(scoreboard_dir) / DATA
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        recorded = list(data["runtimes"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [f"{path}: no readable scoreboard ({type(exc).__name__}): run qconform scoreboard"]
    try:
        digest = current_digest()
    except CorpusError as exc:
        return [f"the corpus does not verify, so nothing can be compared with it: {exc}"]
    reasons = []
    old = {}
    for rt in recorded:
        if rt.get("corpus_digest") != digest:
            old.setdefault(rt.get("corpus_digest"), []).append(rt.get("name"))
    for d, names in sorted(old.items(), key=lambda kv: str(kv[0])):
        reasons.append(f"corpus: measured on digest {d} ({', '.join(map(str, names))}), the corpus is now {digest}")
    for rt in recorded:
        name, was = rt.get("name"), (rt.get("runner") or {}).get("version")
        now = installed_version(str(name))
        if now is not None and now != str(was):
            reasons.append(f"{name}: measured version {was}, installed {now}")
    return reasons

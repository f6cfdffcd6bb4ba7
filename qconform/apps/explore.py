"""``qconform explore promote FILE``: a failure ``pytest --explore`` saved, made a corpus case.

The exploration itself is a pytest feature (``qconform.plugin.explore``); this is the command line's
half, which needs no pytest.
"""
from __future__ import annotations

from pathlib import Path


def promote_main(path: Path, directory: Path | None = None) -> int:
    """``qconform explore promote FILE``: check the draft with the oracle, store it in the corpus's
    explored/ folder under a content-derived name, and say how to regenerate."""
    import json

    from qconform.generators.explored import DIR, from_json, promoted
    from qconform.oracle import InvalidModel, evaluate

    try:
        obj = promoted(json.loads(Path(path).read_text()))
        draft = from_json(obj)
        evaluate(draft)
    except (OSError, ValueError, KeyError, InvalidModel) as exc:
        print(f"qconform: cannot promote {path}: {type(exc).__name__}: {exc}")
        return 2
    out = Path(directory or DIR)
    out.mkdir(parents=True, exist_ok=True)
    dest = out / f"{obj['name']}.json"
    dest.write_text(json.dumps(obj, indent=1) + "\n")
    print(f"promoted {draft.id} to {dest}; run `qconform golden regen` to add it to the corpus")
    return 0

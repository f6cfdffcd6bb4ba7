"""Whether two report.json files say the same thing: equal once the fields that say how and when a
run was driven (invocation, timing, integrity, each case's duration_s) are set aside, and the
checkout's own path (where the corpus and the runner's file were read from) is written <checkout>,
as are the line numbers of qconform's own frames in a runner's traceback (the runner raised inside
qconform's call: where that call sits in qconform's source is not what the run found).

    python scripts/same_report.py OLD/report.json NEW/report.json

Prints every path where they differ (at most 40) and exits 1 when they do: the check that a
refactoring of the engine left every verdict, reading, mismatch and diagnosis as it was."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

#: How and when the run was driven, not what it found.
DRIVEN = ("invocation", "timing", "integrity")
#: Per case: how long the runner took.
CASE_DRIVEN = ("duration_s",)


def normalised(report: dict) -> dict:
    """The report without the fields that change from run to run of the same code."""
    out = {k: v for k, v in report.items() if k not in DRIVEN}
    out["cases"] = [{k: v for k, v in c.items() if k not in CASE_DRIVEN} for c in report.get("cases", [])]
    root = str(Path(report.get("corpus", {}).get("root", "/")).parent.parent)
    return _relative(out, root) if root != "/" else out


def _relative(value: object, root: str) -> object:
    """``value`` with every path under ``root`` written from <checkout> (and, in a traceback, the
    line numbers of qconform's own frames set aside)."""
    if isinstance(value, str):
        value = value.replace(root + "/", "<checkout>/")
        return re.sub(r'(File "<checkout>/qconform/[^"]+", line )\d+', r"\1N", value)
    if isinstance(value, dict):
        return {k: _relative(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [_relative(v, root) for v in value]
    return value


def differences(a: object, b: object, path: str = "$") -> list[str]:
    """Every path at which ``a`` and ``b`` differ, depth first."""
    if type(a) is not type(b):
        return [f"{path}: {type(a).__name__} -> {type(b).__name__}"]
    if isinstance(a, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if k not in a:
                out.append(f"{path}.{k}: added")
            elif k not in b:
                out.append(f"{path}.{k}: removed")
            else:
                out += differences(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items -> {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {json.dumps(a)[:120]} -> {json.dumps(b)[:120]}"]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    old, new = (normalised(json.loads(Path(p).read_text(encoding="utf-8"))) for p in argv)
    diffs = differences(old, new)
    if not diffs and json.dumps(old, ensure_ascii=False) != json.dumps(new, ensure_ascii=False):
        diffs = ["$: the same fields and values, in another order (the files' bytes differ)"]
    for d in diffs[:40]:
        print(d)
    if len(diffs) > 40:
        print(f"... and {len(diffs) - 40} more")
    print(f"{argv[0]} and {argv[1]}: " + ("the same, but for how and when they ran" if not diffs
                                          else f"{len(diffs)} difference(s)"))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

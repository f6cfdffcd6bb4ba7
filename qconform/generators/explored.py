"""Family "explored": drafts that ``pytest --explore`` found and shrank, promoted into the corpus
with ``qconform explore promote FILE`` (they live in qconform/golden/explored/*.json, one draft per file),
and graphs ``qconform.apps.explore_graphs`` found (a QDQ pattern's nodes under "graph"; a
single-node draft has none, and its form is what it was).

The JSON form carries every input as raw codes of its type (bit-exact, NaN payloads and -0
included), never as decimal floats; the oracle computes the expected outputs at regen like any
other case. Files are read in name order, so the family is as deterministic as the others."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from qconform import dtypes
from qconform.case import Arg, Draft, Node

FAMILY = "explored"
FORMAT = 1
DIR = Path(__file__).resolve().parent.parent / "golden" / "explored"


def to_json(d: Draft) -> dict[str, Any]:
    def arg(a: Arg | None):
        if a is None:
            return None
        t = dtypes.get(a.type)
        return {"name": a.name, "type": a.type, "shape": list(a.value.shape), "initializer": a.initializer,
                "bits": [int(b) for b in t.to_bits(a.value).ravel()]}

    obj = {"format": FORMAT, "op": d.op, "domain": d.domain, "opset": d.opset, "types": d.types,
           "family": d.family, "name": d.name, "attrs": {k: _plain(v) for k, v in sorted(d.attrs.items())},
           "clause": d.clause, "note": d.note, "provenance": d.provenance,
           "inputs": [arg(a) for a in d.inputs]}
    if d.graph:  # a graph case (a QDQ pattern): its nodes, in order; a single node's form is unchanged
        obj["graph"] = [{"op": n.op, "domain": n.domain, "inputs": list(n.inputs), "outputs": list(n.outputs),
                         "attrs": {k: _plain(v) for k, v in sorted(n.attrs.items())}} for n in d.graph]
    return obj


def _plain(v: Any) -> Any:
    """An attribute value as JSON holds it (numpy scalars and arrays as Python numbers and lists)."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (list, tuple, np.ndarray)):
        return [_plain(x) for x in v]
    return v


def from_json(obj: dict[str, Any]) -> Draft:
    if obj.get("format") != FORMAT:
        raise ValueError(f"explored draft format {obj.get('format')!r}; expected {FORMAT}")

    def arg(a):
        if a is None:
            return None
        t = dtypes.get(a["type"])
        raw = np.array(a["bits"], dtype=np.uint64).reshape(a["shape"])
        return Arg(a["name"], a["type"], t.from_bits(raw).reshape(a["shape"]), a["initializer"])

    graph = tuple(Node(n["op"], tuple(n["inputs"]), tuple(n["outputs"]), dict(n["attrs"]), n.get("domain", ""))
                  for n in obj.get("graph", ()))
    return Draft(op=obj["op"], opset=obj["opset"], types=obj["types"], family=obj["family"], name=obj["name"],
                 inputs=tuple(arg(a) for a in obj["inputs"]), attrs=dict(obj["attrs"]), domain=obj["domain"],
                 clause=obj["clause"], provenance=obj["provenance"], note=obj["note"], graph=graph)


def promoted(obj: dict[str, Any]) -> dict[str, Any]:
    """The corpus form of a saved draft: family "explored", a name from a hash of its content."""
    body = {k: v for k, v in obj.items() if k not in ("family", "name")}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]
    return {**obj, "family": FAMILY, "name": f"x{digest}"}


def generate(directory: Path = DIR) -> Iterator[Draft]:
    for path in sorted(Path(directory).glob("*.json")):
        yield from_json(json.loads(path.read_text()))

"""The per-runtime script templates: how each runtime's standalone script loads and runs a model."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from qconform.declarations.runtimes import RUNTIMES, Template, ml_dtype


#: One entry per runtime that has a template, in ``RUNTIMES`` order: how its script loads and runs a model.
TEMPLATES: dict[str, Template] = {name: rt.template for name, rt in RUNTIMES.items() if rt.template}

_BYTES_HELPERS = '''\
def to_bytes(k, v):  # element codes -> the ONNX layout
    return v.tobytes()
def from_bytes(k, raw, shape):  # the ONNX layout -> element codes
    return np.frombuffer(raw, expected[k].dtype).reshape(shape)
'''
_PACKED_HELPERS = '''\
def to_bytes(k, v):  # element codes -> the ONNX layout (sub-byte types: packed, first element in the low bits)
    if k not in BITS: return v.tobytes()
    n = 8 // BITS[k]; c = np.concatenate([v.ravel(), np.zeros(-v.size % n, np.uint8)]).reshape(-1, n)
    return np.bitwise_or.reduce(c << (BITS[k] * np.arange(n, dtype=np.uint8)), axis=1).astype(np.uint8).tobytes()
def from_bytes(k, raw, shape):  # the ONNX layout -> element codes
    if k not in BITS: return np.frombuffer(raw, expected[k].dtype).reshape(shape)
    n, b = 8 // BITS[k], np.frombuffer(raw, np.uint8)
    c = (b[:, None] >> (BITS[k] * np.arange(n, dtype=np.uint8))) & np.uint8(2 ** BITS[k] - 1)
    return c.ravel()[: int(np.prod(shape))].reshape(shape)
'''


_GENERIC_RUN = """\
model = onnx.load("model.onnx")
prepare = getattr(runner, "prepare", None)  # the runner contract: prepare(model)(inputs), else run(model, inputs)
outs = prepare(model)(FEEDS) if callable(prepare) else runner.run(model, FEEDS)
actual = {o.name: np.asarray(a) for o, a in zip(model.graph.output, outs)}
"""


def generic_template(name: str, identity: Mapping[str, Any]) -> Template:
    """The script template for a runner qconform has no template for (a vendor's own): the script
    loads that runner the way the report's run did (``identity["load"]``: its ``--runner`` spec,
    a file by its absolute path, and its ``--runner-opt`` words; ``RUNNER=`` overrides the spec)
    and calls it through the runner contract, arrays of types numpy lacks as ml_dtypes views."""
    load = identity.get("load") or {}
    spec, options = load.get("runner"), dict(load.get("options") or {})
    if not spec:
        raise ValueError(f"the report of {name!r} does not say how its runner was loaded (written by a qconform "
                         "older than this one): rerun it")
    version = str(identity.get("version") or "unknown")
    source = identity.get("source") or {}
    loader = f'''import importlib
import importlib.util
import sys

import onnx

RUNNER = os.environ.get("RUNNER", {spec!r})  # --runner of the run that found this (path/to/file.py:Attr)
OPTIONS = {options!r}  # its --runner-opt words


def load_runner(spec, options):
    """The runner object, loaded as qconform's --runner loads it."""
    target, _, attr = spec.rpartition(":")
    if target.endswith(".py") or "/" in target or "\\\\" in target:
        file_spec = importlib.util.spec_from_file_location("vendor_runner", target)
        module = importlib.util.module_from_spec(file_spec)
        sys.modules["vendor_runner"] = module
        file_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    obj = getattr(module, attr)
    return obj(**options) if isinstance(obj, type) or not hasattr(obj, "run") else obj


runner = load_runner(RUNNER, OPTIONS)'''
    return Template(
        name, str(source.get("path") or spec), loader, 'runner.describe().get("version", "unknown")',
        "FEEDS = inputs\n" + _GENERIC_RUN,
        codes=ml_dtype, codes_imports="import ml_dtypes  # a dependency of onnx",
        run_codes="FEEDS = {k: v.view(CODES[k]) if k in CODES else v for k, v in inputs.items()}\n" + _GENERIC_RUN
        + "actual = {k: a.view(f\"u{a.dtype.itemsize}\") if a.dtype == CODES.get(k) else a for k, a in actual.items()}\n",
        note=(f"The script loads the runner that produced the report ({spec}"
              + (f", SHA-256 {source['sha256'][:12]}…" if source.get("sha256") else "") + ") by its path and "
              "calls it as qconform does; `RUNNER=path/to/file.py:Attr python repro.py` points it elsewhere. "
              "The runner's own runtime must be installed, as for the run."),
        version_of=lambda: version, install="pip install numpy onnx ml_dtypes   # and what the runner itself imports")


def runtimes() -> list[str]:
    return list(TEMPLATES)

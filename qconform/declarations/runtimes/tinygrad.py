"""tinygrad, declared once (its runner ``runners.tinygrad_runner``): its runner's settings and its reproducer template."""
from __future__ import annotations

import json
import os
from types import MappingProxyType

from qconform.declarations.runtime import THIRD_PARTY_CHECK, Runtime, call_helper, with_template

TINYGRAD_SETTINGS = MappingProxyType({
    #: read by tinygrad when it is imported: set (unless set) when the runner is chosen, never at
    #: import; THREADS=0: one thread per kernel (qconform already runs two workers)
    "env": MappingProxyType({"DEV": "CPU", "THREADS": "0"}),
})


_TINYGRAD = "qconform.runners.tinygrad_runner"


def _tinygrad_env() -> dict[str, str]:
    """What the reproducer's run is given: the compiler the runner gives tinygrad, unless ``$CC`` is set."""
    cc = None if "CC" in os.environ else call_helper(f"{_TINYGRAD}:compiler")
    return {"CC": cc} if cc else {}


TINYGRAD = with_template(
    Runtime("tinygrad", f"{_TINYGRAD}:TinygradRunner", dist="tinygrad", extra="tinygrad",
            module="tinygrad", settings=TINYGRAD_SETTINGS, check=THIRD_PARTY_CHECK),
    f"os.environ.setdefault(\"DEV\", {json.dumps(TINYGRAD_SETTINGS['env']['DEV'])})  # tinygrad's CPU device\n"
    "from importlib.metadata import version\nfrom tinygrad import Tensor, dtypes  # noqa: F401 (bfloat16)\n"
    "from tinygrad.nn.onnx import OnnxRunner",
    "version(\"tinygrad\")",
    """\
res = OnnxRunner("model.onnx")({k: Tensor(v) for k, v in inputs.items()})
actual = {k: res[k].numpy() for k in expected}
""",
    codes=lambda t: "dtypes.bfloat16" if t.name == "bfloat16" else None,
    run_codes="""\
res = OnnxRunner("model.onnx")({k: Tensor(v).bitcast(CODES[k]) if k in CODES else Tensor(v) for k, v in inputs.items()})
actual = {k: res[k].bitcast(dtypes.uint16).numpy() if res[k].dtype == CODES.get(k) else res[k].numpy()
          for k in expected}
""",
    note="tinygrad's CPU device compiles C with `$CC` (default `clang`); bfloat16 needs clang 17 or newer "
         "(`CC=clang-19 python repro.py`).",
    env=_tinygrad_env, tools=("clang",))

__all__ = ["TINYGRAD", "TINYGRAD_SETTINGS"]

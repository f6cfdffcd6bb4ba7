"""Each runtime qconform certifies, declared once: its ``--runner`` name and bundled runner, the
distribution and qconform extra that bring it, how to read its installed version, the settings its
runner applies, and the template of the standalone reproducer ``qconform findings`` writes for it.

The runner registry (``qconform.runner``: ``BUNDLED``, ``EXTRAS``, ``VARIANTS``, ``resolve``), the
facts (``qconform.facts.SOURCES``), the findings (``qconform.apps.findings.TEMPLATES``) and the
scoreboard read these declarations; the runners read their settings from here, and so do their
reproducer templates, so a reproducer cannot drift from the run that found it.

Light on purpose: importing this module imports no runtime and changes no environment variable;
a runner module (which imports its runtime) is named as ``"module:Attr"`` and imported only when
chosen, and the few helpers a template needs from a runner are named the same way.
"""
from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import metadata
from types import MappingProxyType
from typing import Any


def _call(spec: str) -> Any:
    """``module:function`` called: a runner's helper, without importing the runner here."""
    module, _, func = spec.partition(":")
    return getattr(importlib.import_module(module), func)()


@dataclass(frozen=True)
class Template:
    """How a standalone script drives one runtime.

    ``run`` is the body (indented under ``try:`` in the script) that turns ``inputs`` (a dict of
    numpy arrays, graph inputs by name, in graph order) into ``actual`` (a dict of numpy arrays,
    outputs by name) for models whose inputs and outputs are all numpy types. ``codes`` names, for
    a type numpy lacks, the object the script maps it to in its ``CODES`` dict (a runtime type, an
    ONNX type number, an ml_dtypes type); with it, ``run_codes`` (and its ``helpers``) runs models
    where such arrays hold element codes. ``codes`` None: the runtime's binding carries numpy types
    only, and a group whose example needs another is skipped with the reason."""

    runtime: str  # qconform runner name
    package: str  # distribution whose installed version a finding is seen on (pip install name)
    imports: str  # import lines after ``import numpy as np``
    version: str  # expression for the runtime's version, printed first
    run: str
    codes: Callable[[Any], str | None] | None = None  # dtypes.ElemType -> expression, None: cannot carry it
    run_codes: str = ""
    helpers: str = ""
    codes_imports: str = ""  # extra imports when CODES is used
    #: The runtime takes raw ONNX-layout bytes for such types: sub-byte codes are packed (``to_bytes``).
    bytes_io: bool = False
    #: Extra words for README's "how to run" (a compiler the runtime needs ...).
    note: str = ""
    #: Environment the script needs (the verification run and the tests set it): name -> value.
    env: Callable[[], dict[str, str]] = field(default=dict)
    #: The installed version where the runtime is not a Python distribution (an npm package).
    version_of: Callable[[], str | None] | None = None
    #: README's install line, where it is not ``pip install PACKAGE==VERSION numpy`` ({version}).
    install: str = ""
    #: Tools the script needs besides the runtime itself (names of ``qconform.tools``).
    tools: tuple[str, ...] = ()

    def installed_version(self) -> str | None:
        if self.version_of is not None:
            return self.version_of()
        try:
            return metadata.version(self.package)
        except metadata.PackageNotFoundError:
            return None



#: How a runtime's installed version is read (``Runtime.version``, besides ``"module:function"``).
METADATA = "metadata"  # the distribution's metadata (``dist``)
ATTRIBUTE = "__version__"  # the imported module's ``__version__``

#: The cases the project's tests observe for a third-party runtime: a whole-corpus pass takes minutes
#: to tens of minutes there, so its facts are asserted complete on this slice (plus every fact's
#: example), and ``qconform facts drift --whole`` lists what the rest of the corpus adds.
THIRD_PARTY_CHECK = ("*-21/*/basic/*", "*-21/*/specials/*", "*-21/*/ties/*", "QLinearMatMul-10/*/basic/*",
                     "DynamicQuantizeLinear-11/*")


@dataclass(frozen=True)
class Runtime:
    """One runtime qconform runs cases on, declared once."""

    name: str  # the ``--runner`` name; reports, facts and findings name the runtime by it
    runner: str  # the bundled runner, "module:Attr", imported only when chosen
    #: the distribution that brings it (pip; npm for onnxruntime-web): what a finding installs and
    #: is seen on; None for qconform's own kernels (no runtime anyone ships)
    dist: str | None = None
    extra: str | None = None  # qconform's optional extra that installs it: pip install 'qconform[EXTRA]'
    module: str | None = None  # the module it imports: its absence means "not installed"
    #: how to read the installed version: METADATA (``dist``'s), ATTRIBUTE (``module.__version__``)
    #: or a "module:function"
    version: str = METADATA
    #: what its runner does that a reproducer must do too (defaults, session options, configs, flags)
    settings: Mapping[str, Any] = field(default_factory=dict)
    variant_of: str | None = None  # a variant: this other runtime's runner ...
    options: Mapping[str, str] = field(default_factory=dict)  # ... with these options (``--runner-opt``)
    check: tuple[str, ...] = ()  # case-id globs the facts tests observe; () = the whole corpus
    template: Template | None = None  # the reproducer ``qconform findings`` writes; None: none

    @property
    def own(self) -> bool:
        """qconform's own kernels: a bundled runner, but no runtime anyone ships."""
        return self.dist is None

    @property
    def package(self) -> str | None:
        """The top-level import package, as a missing one is named (``ModuleNotFoundError.name``)."""
        return self.module.partition(".")[0] if self.module else None

    def installed_version(self) -> str | None:
        """The installed version (what facts are keyed by), or None where it is not installed."""
        if not self.module:
            return None
        try:
            mod = importlib.import_module(self.module)
            if ":" in self.version:
                return _call(self.version)
            if self.version == METADATA:
                return metadata.version(str(self.dist))
        except Exception:  # noqa: BLE001 - not installed, or broken: no facts apply
            return None
        return str(getattr(mod, "__version__", "")) or None


def _with_template(rt: Runtime, imports: str, version: str, run: str, **kw: Any) -> Runtime:
    """``rt`` with its reproducer template (named and versioned as ``rt`` is)."""
    return replace(rt, template=Template(rt.name, str(rt.dist), imports, version, run, **kw))


# ----------------------------------------------------------------------------------------------
# onnxruntime (and its variants: the same runner on another execution provider)
# ----------------------------------------------------------------------------------------------
ORT_RUNNER = "qconform.runners.onnxruntime_runner:OnnxRuntimeRunner"
#: The onnxruntime runner's options and their defaults (``--runner-opt``).
ORT_SETTINGS = MappingProxyType({
    "providers": "CPUExecutionProvider", "optimize": "0", "threads": "1", "log": "4",
    #: ``optimize`` -> the session's graph optimisation level (``ort.GraphOptimizationLevel``)
    "levels": MappingProxyType({"0": "ORT_DISABLE_ALL", "1": "ORT_ENABLE_ALL"}),
    #: the session config entry set when the CPU EP is not among the providers: only the EP runs
    "no_fallback": ("session.disable_cpu_ep_fallback", "1"),
})


def _onnx_number(t) -> str:
    return f"{t.onnx}"


def ml_dtype(t) -> str:
    """The ml_dtypes type a reproducer views element codes as (runtimes that take ml_dtypes arrays)."""
    return f"ml_dtypes.{t.dtype.name}"


def _ort_session(providers: Sequence[str] = ("CPUExecutionProvider",)) -> str:
    """The session qconform's onnxruntime runner makes: no graph optimisation; with an execution
    provider, no CPU fallback (what the provider does not run fails, as in the certification)."""
    s = ORT_SETTINGS
    lines = [(f"so = ort.SessionOptions(); so.log_severity_level = {s['log']}  # the error, if any, is raised "
              "below anyway"),
             f"so.graph_optimization_level = ort.GraphOptimizationLevel.{s['levels'][s['optimize']]}"]
    if list(providers) != [s["providers"]]:
        lines.append(f"so.add_session_config_entry({json.dumps(s['no_fallback'][0])}, "
                     f"{json.dumps(s['no_fallback'][1])})  # only the EP runs")
    lines.append(f'sess = ort.InferenceSession("model.onnx", so, providers={list(providers)!r})')
    return "\n".join(lines) + "\n"


def _ort(rt: Runtime) -> Runtime:
    """onnxruntime's template, on the CPU EP or on the execution provider of a variant's wheel."""
    providers = str(rt.options.get("providers", ORT_SETTINGS["providers"])).split(",")
    session = _ort_session(providers)
    ep = providers != [ORT_SETTINGS["providers"]]
    return _with_template(
        rt, "import onnxruntime as ort", "ort.__version__",
        session + "actual = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, inputs)))\n",
        codes=_onnx_number, codes_imports="import ctypes", bytes_io=True,
        helpers='''\
def to_ort(k, v):  # an array of element codes -> an OrtValue of its ONNX type, the bytes copied as they are
    o = ort.OrtValue.ortvalue_from_shape_and_type(list(v.shape), CODES[k])
    ctypes.memmove(o.data_ptr(), to_bytes(k, v), o.tensor_size_in_bytes()); return o
def from_ort(k, o):  # an output OrtValue of a type numpy lacks -> its element codes
    return from_bytes(k, ctypes.string_at(o.data_ptr(), o.tensor_size_in_bytes()), o.shape())
''',
        run_codes=session + """\
feeds = {k: to_ort(k, v) if k in CODES else ort.OrtValue.ortvalue_from_numpy(v) for k, v in inputs.items()}
outs = dict(zip([o.name for o in sess.get_outputs()], sess.run_with_ort_values(None, feeds)))
actual = {k: from_ort(k, o) if o.element_type() == CODES.get(k) else o.numpy() for k, o in outs.items()}
""",
        note=(f"`{rt.dist}` replaces plain `onnxruntime` (the same import package): install it in a venv of "
              f"its own. The session runs on {', '.join(providers)} alone, CPU fallback off, as qconform "
              "certified it.") if ep else "")


ONNXRUNTIME = _ort(Runtime("onnxruntime", ORT_RUNNER, dist="onnxruntime", extra="onnxruntime",
                           module="onnxruntime", version=ATTRIBUTE, settings=ORT_SETTINGS))
#: onnxruntime's variants: a wheel that brings its execution provider under the ``onnxruntime``
#: import package; ``--runner onnxruntime-openvino`` is the onnxruntime runner on that provider alone.
ORT_VARIANTS = tuple(_ort(Runtime(name, ORT_RUNNER, dist=name, module="onnxruntime", settings=ORT_SETTINGS,
                                  variant_of="onnxruntime", options=MappingProxyType({"providers": providers}),
                                  check=THIRD_PARTY_CHECK))
                     for name, providers in (("onnxruntime-openvino", "OpenVINOExecutionProvider"),))

ONNX_REFERENCE = _with_template(
    Runtime("onnx-reference", "qconform.runners.onnx_reference:OnnxReferenceRunner", dist="onnx", module="onnx",
            version=ATTRIBUTE),
    "import onnx\nfrom onnx.reference import ReferenceEvaluator", "onnx.__version__",
    """\
sess = ReferenceEvaluator("model.onnx")
actual = dict(zip(sess.output_names, sess.run(None, inputs)))
""",
    codes=ml_dtype, codes_imports="import ml_dtypes  # a dependency of onnx",
    run_codes="""\
sess = ReferenceEvaluator("model.onnx")
outs = sess.run(None, {k: v.view(CODES[k]) if k in CODES else v for k, v in inputs.items()})
actual = {k: np.asarray(a).view(f"u{a.dtype.itemsize}") if a.dtype == CODES.get(k) else a
          for k, a in zip(sess.output_names, outs)}
""")

# ----------------------------------------------------------------------------------------------
# OpenVINO
# ----------------------------------------------------------------------------------------------
OPENVINO_SETTINGS = MappingProxyType({
    "device": "CPU",
    #: compile_model's config: without the f32 hint the CPU plugin may compute in bf16/f16
    "config": MappingProxyType({"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1}),
    #: qconform element type name -> the ``ov.Type`` with the same bit layout
    "types": MappingProxyType({
        "float32": "f32", "float16": "f16", "bfloat16": "bf16", "int8": "i8", "uint8": "u8", "int16": "i16",
        "uint16": "u16", "int32": "i32", "float8e4m3fn": "f8e4m3", "float8e5m2": "f8e5m2", "float8e8m0": "f8e8m0",
        "float4e2m1": "f4e2m1", "int4": "i4", "uint4": "u4", "uint2": "u2"}),
})
#: Types numpy carries as they are (the reproducer passes them without ``CODES``).
_NUMPY_TYPES = ("float32", "float16", "int8", "uint8", "int16", "uint16", "int32")


def _ov_type(t) -> str | None:
    types = OPENVINO_SETTINGS["types"]
    return f"ov.Type.{types[t.name]}" if t.name in types and t.name not in _NUMPY_TYPES else None


_OV_COMPILE = (f'compiled = ov.Core().compile_model("model.onnx", {json.dumps(OPENVINO_SETTINGS["device"])}, '
               f'{json.dumps(dict(OPENVINO_SETTINGS["config"]))})\n')

OPENVINO = _with_template(
    Runtime("openvino", "qconform.runners.openvino_runner:OpenVinoRunner", dist="openvino", extra="openvino",
            module="openvino", settings=OPENVINO_SETTINGS, check=THIRD_PARTY_CHECK),
    "import openvino as ov", "ov.__version__",
    _OV_COMPILE + """\
res = compiled(inputs)
actual = {o.get_any_name(): res[o] for o in compiled.outputs}
""",
    codes=_ov_type, bytes_io=True,
    helpers='''\
def to_ov(k, v):  # an array of element codes -> an ov.Tensor of its type, the bytes copied as they are
    t = ov.Tensor(CODES[k], list(v.shape))
    t.data.reshape(-1).view(np.uint8)[:] = np.frombuffer(to_bytes(k, v), np.uint8); return t
''',
    run_codes=_OV_COMPILE + """\
res = compiled({k: to_ov(k, v) if k in CODES else v for k, v in inputs.items()})
actual = {o.get_any_name(): from_bytes(o.get_any_name(), np.asarray(res[o]).tobytes(), tuple(o.get_shape()))
          if o.get_element_type() == CODES.get(o.get_any_name()) else res[o] for o in compiled.outputs}
""")

# ----------------------------------------------------------------------------------------------
# tract, TVM
# ----------------------------------------------------------------------------------------------
TRACT = _with_template(
    Runtime("tract", "qconform.runners.tract_runner:TractRunner", dist="tract", extra="tract", module="tract",
            check=THIRD_PARTY_CHECK),
    "import tract", "tract.version()",
    """\
model = tract.onnx().load("model.onnx").into_model().into_runnable()
actual = dict(zip(expected, (t.to_numpy() for t in model.run(list(inputs.values())))))
""")

TVM_SETTINGS = MappingProxyType({
    "target": "llvm",  # no -mcpu: LLVM's generic CPU for the host triple
    #: set (unless set) before tvm is imported, when the runner is chosen: qconform already runs two
    #: workers, and TVM's pool would otherwise take every core
    "env": MappingProxyType({"TVM_NUM_THREADS": "1"}),
})
TVM = _with_template(
    Runtime("tvm", "qconform.runners.tvm_runner:TvmRunner", dist="apache-tvm", extra="tvm", module="tvm",
            settings=TVM_SETTINGS, check=THIRD_PARTY_CHECK),
    "import onnx\nimport tvm\nfrom tvm import relax\nfrom tvm.relax.frontend.onnx import from_onnx",
    "tvm.__version__",
    f"""\
vm = relax.VirtualMachine(tvm.compile(from_onnx(onnx.load("model.onnx")), target={json.dumps(TVM_SETTINGS["target"])}), tvm.cpu(0))
res = vm["main"](*[tvm.runtime.tensor(v, tvm.cpu(0)) for v in inputs.values()])
actual = dict(zip(expected, (r.numpy() for r in ([res] if isinstance(res, tvm.runtime.Tensor) else res))))
""")

# ----------------------------------------------------------------------------------------------
# tinygrad
# ----------------------------------------------------------------------------------------------
TINYGRAD_SETTINGS = MappingProxyType({
    #: read by tinygrad when it is imported: set (unless set) when the runner is chosen, never at
    #: import; THREADS=0: one thread per kernel (qconform already runs two workers)
    "env": MappingProxyType({"DEV": "CPU", "THREADS": "0"}),
})


_TINYGRAD = "qconform.runners.tinygrad_runner"


def _tinygrad_env() -> dict[str, str]:
    """What the reproducer's run is given: the compiler the runner gives tinygrad, unless ``$CC`` is set."""
    cc = None if "CC" in os.environ else _call(f"{_TINYGRAD}:compiler")
    return {"CC": cc} if cc else {}


TINYGRAD = _with_template(
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

# ----------------------------------------------------------------------------------------------
# IREE
# ----------------------------------------------------------------------------------------------
IREE_SETTINGS = MappingProxyType({
    "input_type": "onnx", "target_backends": ("llvm-cpu",),
    "cpu": "generic",  # IREE warns without an explicit CPU; --runner-opt cpu=host: the host's ISA
    "driver": "local-sync",  # single-threaded; --runner-opt driver=local-task: the task system
})


def iree_flags(cpu: str = IREE_SETTINGS["cpu"]) -> list[str]:
    """iree-compile's extra flags for ``cpu``."""
    return [f"--iree-llvmcpu-target-cpu={cpu}"]


def _iree_module(args: str) -> str:
    """The IREE script's import, compile and call, with ``args`` the call's arguments."""
    s = IREE_SETTINGS
    return """\
mlir = subprocess.run([sys.executable, "-m", "iree.compiler.tools.import_onnx", "model.onnx", "-o", "/dev/stdout"],
                      check=True, capture_output=True).stdout
vmfb = ireec.compile_str(mlir, input_type={input_type}, target_backends={backends},
                         extra_args={flags})
module = ireert.load_vm_flatbuffer(vmfb, driver={driver})
main = next(f for f in module.vm_module.function_names if not f.startswith("__") and not f.endswith("$async"))
res = module[main](*{args})
""".format(input_type=json.dumps(s["input_type"]), backends=json.dumps(list(s["target_backends"])),
           flags=json.dumps(iree_flags()), driver=json.dumps(s["driver"]), args=args)


_IREE_SIGNLESS = '''\
def signless(r, e):  # IREE returns integers signless (uint8 as int8): their bits, read in the expected type
    return r.view(e.dtype) if r.dtype.kind in "iu" and e.dtype.kind in "iu" and r.itemsize == e.itemsize else r
'''

IREE = _with_template(
    Runtime("iree", "qconform.runners.iree_runner:IreeRunner", dist="iree-base-runtime", extra="iree",
            module="iree.runtime", settings=IREE_SETTINGS,
            # IREE compiles every model with iree-compile (about a quarter second each): a smaller slice
            check=("*-21/*/basic/per-tensor", "*-21/*/basic/per-axis", "*-21/*/specials/*")),
    "import subprocess\nimport sys\nfrom importlib.metadata import version\n"
    "import iree.compiler.tools as ireec\nimport iree.runtime as ireert",
    "version(\"iree-base-runtime\")",
    _iree_module("inputs.values()") + _IREE_SIGNLESS + """\
res = [np.asarray(r.to_host()) for r in (res if isinstance(res, (list, tuple)) else [res])]
actual = {k: signless(r, e) for (k, e), r in zip(expected.items(), res)}
""",
    codes=ml_dtype, codes_imports="import ml_dtypes  # a dependency of iree-base-runtime",
    run_codes=_iree_module("(v.view(CODES[k]) if k in CODES else v for k, v in inputs.items())")
    + _IREE_SIGNLESS + """\
res = [np.asarray(r.to_host()) for r in (res if isinstance(res, (list, tuple)) else [res])]
actual = {k: r.view(f"u{r.itemsize}") if r.dtype == CODES.get(k) else signless(r, e)
          for (k, e), r in zip(expected.items(), res)}
""",
    note="Needs `pip install iree-base-compiler[onnx] iree-base-runtime` (the ONNX importer uses the `onnx` "
         "package).")

# ----------------------------------------------------------------------------------------------
# onnxruntime-web (Node.js, the WASM backend)
# ----------------------------------------------------------------------------------------------
_ORTWEB_JS = """\
JS = r\"\"\"
const ort = require('onnxruntime-web'), fs = require('fs');
const VIEW = {float32: Float32Array, float16: Uint16Array, int8: Int8Array, uint8: Uint8Array,
              int16: Int16Array, uint16: Uint16Array, int32: Int32Array};
(async () => {
  ort.env.wasm.numThreads = 1; ort.env.logLevel = 'fatal';
  const s = await ort.InferenceSession.create(fs.readFileSync('model.onnx'),
      {executionProviders: ['wasm'], graphOptimizationLevel: 'disabled'});
  const feeds = {};
  for (const [k, [type, dims, b64]] of Object.entries(JSON.parse(fs.readFileSync(0, 'utf8')))) {
    const b = new Uint8Array(Buffer.from(b64, 'base64')); feeds[k] = new ort.Tensor(type, new VIEW[type](b.buffer), dims); }
  const r = await s.run(feeds), d = (t) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  console.log(JSON.stringify(Object.fromEntries(s.outputNames.map((n) => [n, [r[n].type, r[n].dims, d(r[n]).toString('base64')]]))));
})().catch((e) => { console.error(String(e)); process.exit(1); });
\"\"\"
req = {k: [v.dtype.name, list(v.shape), base64.b64encode(v.tobytes()).decode()] for k, v in inputs.items()}
p = subprocess.run(["node", "-e", JS], input=json.dumps(req), capture_output=True, text=True)
if p.returncode:
    raise RuntimeError(p.stderr.strip().splitlines()[-1])
actual = {k: np.frombuffer(base64.b64decode(b), t).reshape(dims) for k, (t, dims, b) in json.loads(p.stdout).items()}
"""


_ORTWEB = "qconform.runners.ortweb_runner"


def _ortweb_env() -> dict[str, str]:
    """Where node finds onnxruntime-web: the copy qconform's runner installed (a user runs
    ``npm install`` in the finding's folder instead, see the README)."""
    return {"NODE_PATH": str(_call(f"{_ORTWEB}:install_dir") / "node_modules")}


ONNXRUNTIME_WEB = _with_template(
    # the whole corpus takes onnxruntime-web about 20 s (most models are refused at once); its facts
    # are keyed by the version the runner pins (and installs on first use where node and npm are)
    Runtime("onnxruntime-web", f"{_ORTWEB}:OrtWebRunner", dist="onnxruntime-web", module=_ORTWEB,
            version=f"{_ORTWEB}:pinned_version"),
    "import base64\nimport json\nimport subprocess",
    "subprocess.run([\"node\", \"-p\", \"require('onnxruntime-web').env.versions.web\"], capture_output=True, "
    "text=True).stdout.strip()",
    _ORTWEB_JS,
    note="The script drives Node.js (`node` on PATH) with onnxruntime-web's WASM backend, one thread, "
         "graph optimisations off, as qconform's runner does; inputs and outputs travel as raw bytes.",
    env=_ortweb_env, version_of=lambda: _call(f"{_ORTWEB}:installed_version"), tools=("node",),
    install="pip install numpy && npm install onnxruntime-web@{version}   # into this folder")

# ----------------------------------------------------------------------------------------------
# qconform's own kernels
# ----------------------------------------------------------------------------------------------
CPU_REF = Runtime("cpu-ref", "qconform.runners.cpu_ref:CpuRefRunner")
CPU_KERNEL = Runtime("cpu-kernel", "qconform.runners.cpu_kernel:CpuKernelRunner")
GPU_KERNEL = Runtime("gpu-kernel", "qconform.runners.gpu_kernel:GpuKernelRunner")

#: Every runtime, by name, in the order of every listing (the scoreboard's tables, the findings
#: index): the bundled runners first, then the variants.
RUNTIMES: dict[str, Runtime] = {rt.name: rt for rt in (
    ONNXRUNTIME, ONNX_REFERENCE, CPU_REF, CPU_KERNEL, GPU_KERNEL,
    OPENVINO, TRACT, TINYGRAD, TVM, IREE, ONNXRUNTIME_WEB, *ORT_VARIANTS,
)}

__all__ = ["ATTRIBUTE", "METADATA", "RUNTIMES", "THIRD_PARTY_CHECK", "Runtime", "Template", "iree_flags", "ml_dtype"]

"""onnxruntime, declared once (its runner ``runners.onnxruntime_runner``): its runner's settings, its variants (the
same runner on another execution provider's wheel) and its reproducer template."""
from __future__ import annotations

import json
from collections.abc import Sequence
from types import MappingProxyType

from qconform.declarations import operators
from qconform.declarations.runtime import ATTRIBUTE, THIRD_PARTY_CHECK, Runtime, onnx_number, with_template

ORT_RUNNER = "qconform.runners.onnxruntime_runner:OnnxRuntimeRunner"
#: The onnxruntime runner's options and their defaults (``--runner-opt``).
ORT_SETTINGS = MappingProxyType({
    "providers": "CPUExecutionProvider", "optimize": "0", "threads": "1", "log": "4",
    #: ``optimize`` -> the session's graph optimisation level (``ort.GraphOptimizationLevel``)
    "levels": MappingProxyType({"0": "ORT_DISABLE_ALL", "1": "ORT_ENABLE_ALL"}),
    #: the session config entry set when the CPU EP is not among the providers: only the EP runs
    "no_fallback": ("session.disable_cpu_ep_fallback", "1"),
})


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
    return with_template(
        rt, "import onnxruntime as ort", "ort.__version__",
        session + "actual = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, inputs)))\n",
        codes=onnx_number, codes_imports="import ctypes", bytes_io=True,
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
                           module="onnxruntime", version=ATTRIBUTE, settings=ORT_SETTINGS,
                           # the wheels that share its import package: which one is installed is identity
                           also=("onnxruntime-gpu", "onnxruntime-openvino", "onnxruntime-directml",
                                 "onnxruntime-qnn", "onnxruntime-training")))
#: onnxruntime's variants: a wheel that brings its execution provider under the ``onnxruntime``
#: import package; ``--runner onnxruntime-openvino`` is the onnxruntime runner on that provider alone.
#: The QNN EP's scope: the QDQ patterns and every declared operator but the single Q/DQ nodes (either
#: domain), which its partitioning refuses; where it has no kernel for an operator (the dynamic quantizer,
#: most com.microsoft ops) the runner says so per case, a refusal the row shows.
_QNN_SCOPE = ("qdq.*", *(f"{o.label}-*" for o in operators.OPERATORS if o.op not in operators.QDQ))
ORT_VARIANTS = tuple(_ort(Runtime(name, ORT_RUNNER, dist=name, module="onnxruntime", settings=ORT_SETTINGS,
                                  variant_of="onnxruntime", options=MappingProxyType({"providers": providers}),
                                  check=THIRD_PARTY_CHECK))
                     for name, providers in (("onnxruntime-openvino", "OpenVINOExecutionProvider"),)) + (
    #: Qualcomm's QNN EP, a plugin EP beside the pinned onnxruntime: the HTP (Hexagon NPU) backend,
    #: which runs on x86-64 Linux as Qualcomm's simulator.
    Runtime("onnxruntime-qnn", ORT_RUNNER, dist="onnxruntime-qnn", extra="qnn", module="onnxruntime_qnn",
            version=ATTRIBUTE, settings=ORT_SETTINGS, variant_of="onnxruntime",
            options=MappingProxyType({"providers": "QNNExecutionProvider", "plugin": "onnxruntime_qnn",
                                      "ep.backend_type": "htp"}),
            check=("qdq.*",), scope=_QNN_SCOPE,
            scope_reason="the QNN EP runs no single QuantizeLinear or DequantizeLinear node (\"QNN EP does not "
                         "support a single Quantize/Dequantize node in a partition\", its partitioning rule): it "
                         "is certified on the QDQ patterns and every other operator (" + ", ".join(
                             g.removesuffix("-*") for g in _QNN_SCOPE[1:]) + ")"),
    #: onnxruntime as users run it: the CPU EP at its default graph optimisation level, which fuses
    #: QDQ patterns into integer kernels. A single node has no pattern to fuse and runs on the same
    #: CPU kernels as plain onnxruntime (the same verdict on all 29,580 single-node cases of corpus
    #: e794c73e, 1.32.0, x86_64 AVX-512 VNNI): its facts are onnxruntime's there, its own the patterns'.
    Runtime("onnxruntime-optimized", ORT_RUNNER, dist="onnxruntime", module="onnxruntime", version=ATTRIBUTE,
            settings=ORT_SETTINGS, variant_of="onnxruntime", options=MappingProxyType({"optimize": "1"}),
            check=("qdq.*",), facts_scope=("qdq.*",)),
)

__all__ = ["ONNXRUNTIME", "ORT_RUNNER", "ORT_SETTINGS", "ORT_VARIANTS"]

"""ONNX Runtime as a qconform runner, with a bit-exact adapter for element types numpy lacks.

What the runtime executes
-------------------------
The case model is handed to ``onnxruntime.InferenceSession`` **unchanged** (serialised as is):
the node under test keeps its inputs, outputs, types and attributes, the data inputs stay
runtime graph inputs, and no node is added or removed. Graph optimisations are off by default
(``ORT_DISABLE_ALL``) so constant folding or fusion cannot stand in for the kernel under test.
The adapter described below works purely at the I/O boundary, on bytes.

The adapter (why it is exact)
-----------------------------
ORT's Python binding converts between ``OrtValue`` and numpy only for numpy's own types: for
int2/uint2/int4/uint4, float8e4m3fnuz, float8e5m2(fnuz), float8e8m0 and bfloat16 ``numpy()``
raises, and for float8e4m3fn/float4e2m1 it returns uint8 (for float4e2m1 with the wrong byte
count). So every type whose registry dtype comes from ml_dtypes (``_ADAPTED``) takes a raw-memory
path instead, through IOBinding and ``OrtValue``s that carry the true ONNX element type:

* **Input**: ``OrtValue.ortvalue_from_shape_and_type(shape, onnx_type)`` allocates a CPU tensor of
  the declared ONNX type; its bytes are filled with ``ctypes.memmove`` from
  ``qconform.adapt.pack(dtype, adapt.to_codes(array))``, each element's raw encoding in the
  ONNX layout.
* **Output**: every output is bound to CPU memory; the result ``OrtValue`` reports its ONNX
  element type and shape; ``ctypes.string_at(data_ptr, tensor_size_in_bytes)`` copies its bytes
  and ``qconform.adapt.from_bytes`` builds the ml_dtypes array.

The adapter's conversions (``qconform.adapt``, public, for any binding that speaks bytes) are pure
integer bit moves: for 8/16-bit types the codes are the bytes
(little-endian, the order ORT keeps its own tensors in on the platforms it ships for); for
2- and 4-bit types ``k = 8 // bits`` codes share a byte, element ``i`` in bits
``bits*(i % k)`` .. ``bits*(i % k) + bits - 1`` of byte ``i // k`` (LSB first, the TensorProto
packing ORT uses in memory), and the unused high slots of a final partial byte are written as
zero and ignored on read. Byte counts are checked against ``tensor_size_in_bytes`` both ways. No float arithmetic or conversion is ever applied, so every bit, NaN payloads
and signed zeros included, survives both ways; ``tests/test_ort_adapter.py`` checks all codes of
every adapted type through ORT kernels (Identity, or Cast to the same type) plus Casts to and
from a numpy type that pin the element order and packing independently. (float4e2m1: ORT 1.31.1
has the tensor type but no CPU kernel reading or writing it, so its nibble order cannot be pinned
against ORT; no ORT result can depend on it either.)

Where ORT cannot run a model
----------------------------
``Unsupported`` (one line, ORT's own reason) is raised for: a missing kernel (status
NOT_IMPLEMENTED, at session creation or at run time), an opset or IR version ORT refuses (it
supports ai.onnx up to opset 26 in 1.31), a kernel that states its own limits while it is built
(1.32: "CPU QuantizeLinear only supports precision 0 (use scale type), FLOAT, and FLOAT16"), an
element type ORT has no tensor type for (float6e2m3,
float6e3m2: ``tensor type 27 is not supported``), a type ORT's schema for the op rejects
(INVALID_GRAPH "Type Error") when the node is in a contrib domain such as com.microsoft (ORT's
schema is the definition there) or when ``onnx.checker`` (full check) accepts the model (ORT's
schema is narrower than the spec; a model the spec itself rejects stays an error), and, when
``providers`` does not include the
CPU EP, a node the requested EP cannot take (CPU fallback is disabled in that case so the result
really comes from the requested device). Where the first provider is not the CPU EP and the CPU EP
is listed too (fallback on, as ORT's own examples write it), each session's first run is profiled
and a node ORT placed on any other provider than the first makes the case unsupported ("ran on
CPUExecutionProvider (CPU fallback), not on X"): work the fallback did is never credited to the
provider under test. With graph optimisations on (``optimize=1``) and a provider under test other
than the CPU EP, a node that ORT assigned to no provider at all (computed by constant folding on
the CPU before any EP saw the graph: it never shows in a profile) makes the case unsupported too,
read from ORT's own record of node assignment. Every other failure propagates.

Options (``--runner-opt key=value``)
------------------------------------
``providers``  comma-separated EP names, default ``CPUExecutionProvider`` (e.g.
               ``CUDAExecutionProvider,CPUExecutionProvider`` where the CUDA EP is installed).
``optimize``   ``0`` (default): ``ORT_DISABLE_ALL``; ``1``: ``ORT_ENABLE_ALL``.
``threads``    intra-op threads, default ``1``: sweeps parallelise across processes, a single
               thread avoids oversubscription and spin-waiting, and keeps runs reproducible;
               ``0`` lets ORT choose (all physical cores).
``log``        ORT's log severity, ``0`` (verbose) .. ``4`` (fatal only, the default: ORT logs every
               refused model as an error to stderr, and the refusal already is the case's verdict).
``plugin``     the Python package of a plugin execution provider (``onnxruntime_qnn``): its library is
               registered with ``ort.register_execution_provider_library`` and the session gets the
               provider's devices (``add_provider_for_devices``); ``providers`` names the EP.
``ep.KEY``     an option passed to the execution provider under test as given (``ep.backend_type=htp``,
               ``ep.device_type=GPU``), a plugin's or a built-in one's; recorded.

A plugin EP never gets CPU fallback, and every session reads ORT's own record of which EP each node
was assigned to (``session.record_ep_graph_assignment_info``): a node assigned elsewhere, or one that
is assigned nowhere because onnxruntime computed it before the EP saw the graph (constant folding
at ``optimize=1``), makes the case unsupported on that EP, never a pass credited to it. Its refusal
reasons, which ORT only logs, are read from ORT's log (``ort.set_default_logger_callback``).

``describe()`` records the platform (``qconform.platform.info()``): which SIMD kernels MLAS picks
depends on the CPU (its u8×s8 quantized matmul saturates with AVX2 ``vpmaddubsw``, see the facts).
"""
from __future__ import annotations

import ctypes
import functools
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.capi import onnxruntime_pybind11_state as _ort_state

from qconform import adapt, dtypes, platform
from qconform.runner import BaseRunner, Inputs, Outputs, Prepared, Unsupported
from qconform.declarations.runtimes.onnxruntime import ONNXRUNTIME

#: Element types ORT's numpy binding cannot carry: these travel as bytes through ``qconform.adapt``.
_ADAPTED: dict[int, dtypes.ElemType] = {
    t.onnx: t for t in dtypes.TYPES.values() if t.onnx not in adapt.NUMPY_NATIVE
}

#: The options and their defaults, the session's settings: the runtime's declaration, which the
#: reproducer's session copies.
_DEFAULTS = ONNXRUNTIME.settings
_OPTIONS = ("providers", "optimize", "threads", "log", "plugin")
#: Options passed through to the execution provider: ``ep.<key>``.
EP_PREFIX = "ep."


# ----------------------------------------------------------------------------------------------
# Plugin execution providers: registered once per process, their log read for refusal reasons
# ----------------------------------------------------------------------------------------------
_PLUGINS: dict[str, Any] = {}  # EP name -> the package that brought its library
_LOG: list[tuple[int, str]] = []  # (severity, message) since the last session was started
#: Lines every plugin session logs that say nothing about the model.
_BOILERPLATE = ("File mapped weights", "EPContext encryption", "fallback to CPU EP has been explicitly disabled",
                "Number of partitions")


def _log(severity, category, logid, where, message) -> None:
    _LOG.append((int(severity), str(message).strip()))
    del _LOG[:-200]


def _register_plugin(package: str, ep: str) -> Any:
    """Import the EP's package and register its library with onnxruntime (once per process)."""
    import importlib

    if ep in _PLUGINS:
        return _PLUGINS[ep]
    module = importlib.import_module(package)
    try:
        ort.register_execution_provider_library(ep, module.get_library_path())
    except Exception as exc:  # noqa: BLE001 - registered by an earlier import of this module (onnxruntime's
        if "already registered" not in str(exc):  # registry is the process's; a reloaded module forgets _PLUGINS)
            raise
    ort.set_default_logger_callback(_log, 2)
    _PLUGINS[ep] = module
    return module


def _ep_reason(fallback_line: str) -> str:
    """The EP's own reason for a refusal ORT reports as "fallback to CPU EP has been explicitly
    disabled": the last logged line that names a cause, else ORT's line."""
    for sev, msg in reversed(_LOG):
        if sev >= 2 and msg and not any(b in msg for b in _BOILERPLATE) and msg.rstrip() != "Unsupported nodes in QNN EP:":
            return " ".join(msg.split())
    return fallback_line


def _assignment(session) -> list[tuple[str, str]]:
    """(node name, EP) for every node ORT assigned (``session.record_ep_graph_assignment_info``)."""
    return [(n.name, sub.ep_name) for sub in session.get_provider_graph_assignment_info() for n in sub.get_nodes()]


def _folded_away(assigned: list[tuple[str, str]], model: onnx.ModelProto, ep: str) -> str:
    """'' when every node of ``model`` was assigned to some EP; else why the case is not ``ep``'s: a node
    assigned nowhere was computed by onnxruntime before any EP saw the graph (constant folding, at
    ``optimize=1``). A node an EP's layout transformation rewrote keeps its name as a prefix
    (``n3_Conv_token_1``) or loses it: asked only where graph optimisations ran."""
    names = [name for name, _ in assigned]
    nowhere = sorted(n.name or n.op_type for n in model.graph.node
                     if not any(a == n.name or a.startswith(f"{n.name}_token_") for a in names))
    if nowhere:
        return (f"node(s) {', '.join(nowhere)} were computed by onnxruntime before {ep} saw the graph (constant "
                f"folding or another graph optimisation): not run on {ep}")
    return ""


def _not_assigned(session, model: onnx.ModelProto, ep: str, optimized: bool) -> str:
    """'' when ORT assigned every node of ``model`` to ``ep``; else why the case is not the EP's: a node
    assigned elsewhere, or (``optimized``: ORT_DISABLE_ALL computes none) one ``_folded_away``."""
    assigned = _assignment(session)
    elsewhere = sorted(f"{name} ({where})" for name, where in assigned if where != ep)
    if elsewhere:
        return f"node(s) {', '.join(elsewhere)} ran on another provider, not on {ep}: not credited to {ep}"
    return _folded_away(assigned, model, ep) if optimized else ""


# ----------------------------------------------------------------------------------------------
# qconform arrays <-> ORT tensor bytes (the layout and its checks live in qconform.adapt)
# ----------------------------------------------------------------------------------------------
def _to_ortvalue(t: dtypes.ElemType, arr: np.ndarray) -> ort.OrtValue:
    value = ort.OrtValue.ortvalue_from_shape_and_type(list(arr.shape), t.onnx)
    try:
        data = adapt.pack(t.dtype, adapt.to_codes(arr))
    except ValueError as exc:  # a type with no ONNX byte layout (6-bit floats)
        raise Unsupported(str(exc)) from None
    size = value.tensor_size_in_bytes()
    if size != data.size:  # ORT's layout is not the ONNX one: refuse to guess
        raise RuntimeError(f"onnxruntime holds {size} bytes for {t.name}{list(arr.shape)}, adapter packed {data.size}")
    if size:
        ctypes.memmove(value.data_ptr(), data.ctypes.data, size)
    return value


def _from_ortvalue(value: ort.OrtValue) -> np.ndarray:
    t = _ADAPTED.get(value.element_type())
    if t is None:
        return value.numpy()
    size = value.tensor_size_in_bytes()
    raw = ctypes.string_at(value.data_ptr(), size) if size else b""
    try:
        return adapt.from_bytes(raw, t.onnx, value.shape())
    except ValueError as exc:
        raise RuntimeError(f"onnxruntime returned an output the adapter cannot read: {exc}") from None


@functools.cache
def _ort_has_type(onnx_type: int) -> bool:
    try:
        ort.OrtValue.ortvalue_from_shape_and_type([0], onnx_type)
    except Exception:
        return False
    return True


# ----------------------------------------------------------------------------------------------
# Error classification
# ----------------------------------------------------------------------------------------------
_REFUSALS = (
    "is under development",  # opset newer than ORT's official support
    "Unsupported model IR version",
    "official support for domain",
)
#: A kernel that states its own limits when it is built (1.32: "CPU QuantizeLinear only supports
#: precision 0 (use scale type), FLOAT, and FLOAT16.").
_KERNEL_LIMIT = re.compile(r"\bonly supports?\b")


def _one_line(exc: BaseException) -> str:
    """ORT's message without the status prefix or C++ source location, on one line."""
    return _message_line(str(exc))


@functools.lru_cache(maxsize=256)
def _message_line(text: str) -> str:
    """``_one_line`` of a message's text: the same refusal repeats for every case of a signature."""
    msg = " ".join(text.split())
    msg = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", msg)
    msg = msg.removeprefix("Exception during initialization: ")
    if " was false. " in msg:  # ORT_ENFORCE: "<file>:<line> <signature> <condition> was false. <message>"
        return msg.split(" was false. ", 1)[1]
    # "/onnxruntime_src/.../file.cc:123 signature(...) Message" -> "Message"
    m = re.match(r"^\S+\.(?:cc|h|cpp):\d+ .*?\) (?=[A-Z])", msg)
    if m:
        msg = msg[m.end():]
    return msg


def _spec_valid(model: onnx.ModelProto) -> bool:
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception:
        return False
    return True


def _unsupported_reason(exc: BaseException, model: onnx.ModelProto) -> str | None:
    """ORT's reason if ``exc`` means "ORT cannot run this", else None (a real failure)."""
    text = str(exc)
    if isinstance(exc, _ort_state.InvalidGraph) and re.search(r"Type Error: Type '[^']*' of (input|output) parameter", text):
        # ORT checks types against its own schemas. For its contrib domains those schemas are the
        # definition; for ai.onnx a model onnx.checker accepts is valid, so a narrower ORT schema
        # means ORT lacks support. A model invalid by the spec itself stays an error.
        if any(n.domain not in ("", "ai.onnx") for n in model.graph.node) or _spec_valid(model):
            return _one_line(exc)
        return None
    if isinstance(exc, _ort_state.NotImplemented) or ": NOT_IMPLEMENTED :" in text:
        return _one_line(exc)
    if any(marker in text for marker in _REFUSALS):
        line = _one_line(exc)
        m = re.search(r"Opset (\d+) is under development.*?support for domain (\S+) is till opset (\d+)", line)
        if m:
            return f"onnxruntime {ort.__version__} supports domain {m[2]} up to opset {m[3]}, model uses opset {m[1]}"
        return line
    if "fallback to CPU EP has been explicitly disabled" in text or "but was not selected by that EP" in text:
        return _one_line(exc)  # the EP did not take a node (or one ORT inserted for it, e.g. an NHWC copy)
    if "Exception during initialization" in text and _KERNEL_LIMIT.search(text):
        return _one_line(exc)
    return None


# ----------------------------------------------------------------------------------------------
# The runner
# ----------------------------------------------------------------------------------------------
def _model_types(model: onnx.ModelProto) -> set[int]:
    g = model.graph
    out = {init.data_type for init in g.initializer}
    for vi in (*g.input, *g.output, *g.value_info):
        if vi.type.HasField("tensor_type"):
            out.add(vi.type.tensor_type.elem_type)
    return out


def _not_on(target: str, profile: str) -> str:
    """'' where every node of a profiled run ran on ``target``; else the refusal that says where
    they ran (the profile file is read once and removed)."""
    import json

    try:
        events = json.loads(Path(profile).read_text(encoding="utf-8"))
    finally:
        Path(profile).unlink(missing_ok=True)
    elsewhere = sorted({(e["name"].removesuffix("_kernel_time"), e["args"]["provider"]) for e in events
                        if e.get("cat") == "Node" and e.get("args", {}).get("provider", target) != target})
    if not elsewhere:
        return ""
    where = sorted({prov for _, prov in elsewhere})
    nodes = ", ".join(name for name, _ in elsewhere)
    return (f"ran on {', '.join(where)} (CPU fallback), not on {target}: node(s) {nodes}; work the fallback "
            f"did is not credited to {target}")


#: The runtime an execution provider's wheel bundles, read from its shared library's versioned name
#: (onnxruntime-openvino 1.24.1 ships ``libopenvino.so.2025.4.1``): the software that computed the bits.
_BUNDLED = {"OpenVINOExecutionProvider": ("OpenVINO", re.compile(r"libopenvino\.so\.(\d+\.\d+\.\d+)$"), "CPU")}


def bundled_sdk(provider: str, capi: Path) -> str:
    """'OpenVINO 2025.4.1' for the OpenVINO EP's wheel ('' where the provider bundles nothing known)."""
    if provider not in _BUNDLED:
        return ""
    name, pattern, _ = _BUNDLED[provider]
    found = sorted({m.group(1) for p in (capi.iterdir() if capi.is_dir() else ()) if (m := pattern.match(p.name))})
    return f"{name} {found[-1]}" if found else ""


class OnnxRuntimeRunner(BaseRunner):
    """Runs case models with onnxruntime (see the module docstring for options and the adapter)."""

    name = "onnxruntime"
    _plain_options: "ort.SessionOptions | None" = None  # see _session_options

    def __init__(self, **options: str) -> None:
        unknown = sorted(k for k in set(options) - set(_OPTIONS) if not k.startswith(EP_PREFIX))
        if unknown:
            raise TypeError(f"unknown option(s) {', '.join(unknown)}; onnxruntime takes {', '.join(_OPTIONS)} and "
                            f"{EP_PREFIX}KEY=VALUE (passed to the execution provider)")
        providers = [p.strip() for p in str(options.get("providers", _DEFAULTS["providers"])).split(",") if p.strip()]
        if not providers:
            raise TypeError("providers= is empty; e.g. providers=CPUExecutionProvider")
        self.ep_options = {k[len(EP_PREFIX):]: str(v) for k, v in sorted(options.items()) if k.startswith(EP_PREFIX)}
        self.plugin = str(options.get("plugin", ""))
        self.plugin_module = None
        self.devices: list = []
        if self.plugin:
            if len(providers) != 1:
                raise TypeError(f"plugin={self.plugin}: name its one execution provider in providers=")
            try:
                self.plugin_module = _register_plugin(self.plugin, providers[0])
            except ModuleNotFoundError:
                raise Unsupported(f"the plugin execution provider package {self.plugin!r} is not installed "
                                  f"(pip install {self.plugin.replace('_', '-')}, beside onnxruntime)") from None
            self.devices = [d for d in ort.get_ep_devices() if d.ep_name == providers[0]]
            if not self.devices:
                raise Unsupported(f"{providers[0]} has no device here (ort.get_ep_devices() lists none)")
        known = set(ort.get_all_providers()) | set(_PLUGINS)
        bad = [p for p in providers if p not in known]
        if bad:
            import difflib

            close = {b: difflib.get_close_matches(b, sorted(known), n=1, cutoff=0.6) for b in bad}
            hint = "; ".join(f"did you mean {c[0]}?" for c in close.values() if c)
            raise TypeError(f"unknown execution provider(s) {', '.join(bad)}" + (f" ({hint})" if hint else "")
                            + f"; available in this build: {', '.join(ort.get_available_providers())}")
        missing = [p for p in providers if p not in ort.get_available_providers() and p not in _PLUGINS]
        if missing:
            raise Unsupported(
                f"execution provider(s) {', '.join(missing)} not available in this onnxruntime build "
                f"(available: {', '.join(ort.get_available_providers())})"
            )
        optimize = str(options.get("optimize", _DEFAULTS["optimize"]))
        if optimize not in ("0", "1"):
            raise TypeError(f"optimize={optimize!r}: use 0 (ORT_DISABLE_ALL, default) or 1 (ORT_ENABLE_ALL)")
        threads = str(options.get("threads", _DEFAULTS["threads"]))
        if not threads.isdigit():
            raise TypeError(f"threads={threads!r}: use a non-negative integer (0 = onnxruntime's default)")
        log = str(options.get("log", _DEFAULTS["log"]))
        if log not in ("0", "1", "2", "3", "4"):
            raise TypeError(f"log={log!r}: use 0 (verbose) .. 4 (fatal only, default)")
        self.log = int(log)
        # ORT logs every refused model at ERROR to stderr; the refusal is the case's verdict already.
        ort.set_default_logger_severity(self.log)
        self.providers = providers
        self.optimize = optimize == "1"
        self.level = _DEFAULTS["levels"][optimize]
        self.threads = int(threads)
        self.device = "cpu" if providers[0] == "CPUExecutionProvider" else providers[0].removesuffix("ExecutionProvider").lower()

    def describe(self) -> dict[str, Any]:
        info = {
            "name": self.name,
            "version": ort.__version__,
            "device": self.device,
            "providers": list(self.providers),
            "options": {
                "optimize": self.level,
                "intra_op_threads": self.threads or "default",
                "cpu_fallback": "CPUExecutionProvider" in self.providers,
                **({"fallback_credited": False} if self._profiled else {}),
                **({"ep": dict(self.ep_options)} if self.ep_options else {}),
            },
            "platform": platform.info(),
        }
        if self.plugin_module is not None:
            from importlib import metadata

            mod = self.plugin_module
            dist = self.plugin.replace("_", "-")
            build = getattr(mod, "build_and_package_info", None)
            info["execution_provider"] = {
                "name": self.providers[0], "package": dist,
                "version": getattr(mod, "__version__", None) or metadata.version(dist),
                **({"sdk": build.qnn_version} if build is not None and hasattr(build, "qnn_version") else {}),
                "devices": sorted({f"{d.ep_vendor} {d.device.type}".strip() for d in self.devices}),
                "node_assignment": f"read from onnxruntime for every session: every node of every case ran on "
                                   f"{self.providers[0]}, or the case is unsupported",
            }
            info["device"] = str(self.ep_options.get("backend_type") or self.device)
        elif self.providers[0] != "CPUExecutionProvider":  # an EP built into a variant's wheel
            sdk = bundled_sdk(self.providers[0], Path(ort.__file__).parent / "capi")
            info["execution_provider"] = {
                "name": self.providers[0], "package": self._variant_distribution(),
                "version": ort.__version__, **({"sdk": sdk} if sdk else {}),
            }
            default = _BUNDLED[self.providers[0]][2] if self.providers[0] in _BUNDLED else ""
            info["device"] = str(self.ep_options.get("device_type")
                                 or (f"{default} (the provider's default device_type)" if default else self.device))
        return info

    def _variant_distribution(self) -> str:
        """The wheel this provider comes in, as its runtime declaration names it (onnxruntime-openvino
        for the OpenVINO EP; onnxruntime where no variant is declared for the providers)."""
        from qconform.runner import runtime_name
        from qconform.declarations.runtimes import RUNTIMES

        variant = runtime_name({"name": self.name, "providers": list(self.providers), "options": {"optimize": self.level}})
        rt = RUNTIMES.get(variant)
        return str(rt.dist) if rt is not None and rt.dist else "onnxruntime"

    def _session_options(self) -> ort.SessionOptions:
        """The session options of every session; one object for all sessions where nothing in it is
        per session (ORT copies them into each session), so building them is not part of each case."""
        if self._plain_options is not None:
            return self._plain_options
        so = self._new_session_options()
        if not self.plugin and not self._profiled:
            self._plain_options = so
        return so

    def _new_session_options(self) -> ort.SessionOptions:
        so = ort.SessionOptions()
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, self.level)
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = self.threads
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.log_severity_level = self.log  # refusals and warnings would flood a run; they are verdicts
        if self.plugin:  # the EP's devices; no fallback; ORT records where each node went
            so.log_severity_level = min(self.log, 2)  # its refusal reasons are only in the log
            so.add_provider_for_devices(self.devices, dict(self.ep_options))
            so.add_session_config_entry(*_DEFAULTS["no_fallback"])
            so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
        elif "CPUExecutionProvider" not in self.providers:
            # Without this ORT silently runs nodes the requested EP lacks on the CPU EP.
            so.add_session_config_entry(*_DEFAULTS["no_fallback"])
        if self._folds_for_ep and not self.plugin:  # nodes folded before the EP saw the graph are missing from this record
            so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
        if self._profiled:  # fallback on: the first run says where each node ran
            import tempfile

            so.enable_profiling = True
            so.profile_file_prefix = str(Path(tempfile.gettempdir()) / f"qconform-ort-placement-{os.getpid()}")
        return so

    @property
    def _folds_for_ep(self) -> bool:
        """A provider under test other than the CPU EP, with graph optimisations on: onnxruntime's
        constant folding can compute a node on the CPU before that provider sees the graph."""
        return self.providers[0] != "CPUExecutionProvider" and self.optimize

    @property
    def _profiled(self) -> bool:
        """CPU fallback is on for a provider under test that is not the CPU EP."""
        return self.providers[0] != "CPUExecutionProvider" and "CPUExecutionProvider" in self.providers

    def _provider_list(self) -> list:
        """The session's providers, the one under test with its ``ep.*`` options (a built-in EP's
        options go with its name, as onnxruntime takes them)."""
        if not self.ep_options:
            return list(self.providers)
        return [(self.providers[0], dict(self.ep_options)), *self.providers[1:]]

    def prepare(self, model: onnx.ModelProto) -> Prepared:
        for code in sorted(_model_types(model)):
            if code and not _ort_has_type(code):
                name = dtypes.BY_ONNX[code].name if code in dtypes.BY_ONNX else f"type {code}"
                raise Unsupported(f"onnxruntime {ort.__version__} has no tensor type {name}")
        try:
            if self.plugin:
                _LOG.clear()
                session = ort.InferenceSession(model.SerializeToString(), self._session_options())
            else:
                session = ort.InferenceSession(model.SerializeToString(), self._session_options(),
                                               providers=self._provider_list())
        except Exception as exc:
            reason = _unsupported_reason(exc, model)
            if reason is not None:
                raise Unsupported(_ep_reason(reason) if self.plugin else reason) from None
            if self.plugin and "Failed to finalize" in str(exc):  # the EP's own compile refused the graph
                raise Unsupported(_one_line(exc)) from None
            raise
        if self.plugin:
            why = _not_assigned(session, model, self.providers[0], self.optimize)
        else:  # a built-in EP: what it was not assigned ran on the CPU EP, which the profile shows
            why = _folded_away(_assignment(session), model, self.providers[0]) if self._folds_for_ep else ""
        if why:
            raise Unsupported(why)
        input_names = [i.name for i in session.get_inputs()]
        output_names = [o.name for o in session.get_outputs()]
        placement: dict[str, str] = {}  # the fallback check's verdict, once per session

        def run(inputs: Inputs) -> Outputs:
            if not self._profiled:
                return _run(inputs)
            try:
                outputs, failed = _run(inputs), None
            except Exception as exc:  # noqa: BLE001 - where the nodes ran decides whose failure it is
                outputs, failed = None, exc
            if "why" not in placement:  # read (and remove) the profile whether the run raised or not
                placement["why"] = _not_on(self.providers[0], session.end_profiling())
            if placement["why"]:
                raise Unsupported(placement["why"])
            if failed is not None:
                raise failed
            return outputs

        def _run(inputs: Inputs) -> Outputs:
            missing = [n for n in input_names if n not in inputs]
            if missing:
                raise KeyError(f"missing model input(s) {missing}; model inputs: {input_names}")
            binding = session.io_binding()
            keep = []  # inputs must outlive run_with_iobinding
            for name in input_names:
                arr = np.asarray(inputs[name])
                t = _ADAPTED.get(dtypes.BY_DTYPE[arr.dtype].onnx) if arr.dtype in dtypes.BY_DTYPE else None
                if t is not None:
                    value = _to_ortvalue(t, arr)
                else:
                    value = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(arr).reshape(np.shape(arr)))  # keep rank 0
                keep.append(value)
                binding.bind_ortvalue_input(name, value)
            for name in output_names:
                binding.bind_output(name, "cpu")
            try:
                session.run_with_iobinding(binding)
            except Exception as exc:
                reason = _unsupported_reason(exc, model)
                if reason is not None:
                    raise Unsupported(reason) from None
                raise
            return [_from_ortvalue(v) for v in binding.get_outputs()]

        return run


__all__ = ["OnnxRuntimeRunner"]


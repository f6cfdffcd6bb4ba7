"""OpenVINO, CPU plugin: ``pip install 'qconform[openvino]'``.

The model's bytes go to ``Core().read_model`` (the ONNX frontend), then ``compile_model(model,
"CPU", {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1})``: without the f32 hint the
CPU plugin may compute in bf16/f16 on capable CPUs, which is not the arithmetic under test
(``--runner-opt precision=bf16`` measures that on purpose; ``threads=N``). Every input and output
travels as raw bytes in the ONNX layout (``qconform.adapt``); OpenVINO's i4/u4/u2/f4e2m1 pack
LSB-first like ONNX (checked with Convert: bytes 21 43 read as 1 2 3 4). Unsupported: read_model or
compile_model refused the model, with OpenVINO's own reason on one line (its messages are
multi-line with the real reason last). Everything else is an error with the full text; an output
of another element type than the declared one is returned as it is, for the harness to fail."""
from __future__ import annotations

import re
from typing import Any

import numpy as np
import onnx
import openvino as ov

from qconform import adapt, dtypes, platform
from qconform.runner import BaseRunner, Inputs, Outputs, Prepared, Unsupported
from qconform.declarations.runtimes.openvino import OPENVINO

_CONFIG = OPENVINO.settings["config"]

TP = onnx.TensorProto
#: ONNX element type -> OpenVINO element type with the same bit layout (the declaration's, which the
#: reproducer's ``CODES`` read too).
_OV_OF_ONNX = {dtypes.TYPES[name].onnx: getattr(ov.Type, ov_name) for name, ov_name in OPENVINO.settings["types"].items()}
_ONNX_OF_OV = {str(v): k for k, v in _OV_OF_ONNX.items()}


def full_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def one_line(exc: BaseException) -> str:
    """OpenVINO's multi-line message on one line, without 'Exception from src/...:N:' prefixes."""
    lines = [ln.strip() for ln in str(exc).splitlines()]
    keep = []
    for ln in lines:
        if not ln:
            continue
        ln = re.sub(r"^Exception from \S+:\d+:\s*", "", ln)
        ln = re.sub(r"^Check 'false' failed at \S+:\d+:\s*", "", ln)
        ln = re.sub(r"^(Check '.*' failed) at \S+:\d+:\s*", r"\1: ", ln).strip()
        if ln and ln not in keep:
            keep.append(ln)
    # OpenVINO's frontend wraps the real reason in boilerplate lines: put the specific lines first
    # (the harness shows the start of the reason), keep the boilerplate after them, lose nothing.
    boiler = re.compile(r"^(FrontEnd API failed with \w+:|Model wasn't fully converted\..*|Summary:|"
                        r"-- Conversion is failed for: .*|-- .* with a message:|While validating ONNX node .*)$")
    first = [ln for ln in keep if not boiler.match(ln)]
    rest = [ln for ln in keep if boiler.match(ln)]
    return " | ".join(first + rest) or type(exc).__name__


class OpenVinoRunner(BaseRunner):
    name = "openvino"

    def __init__(self, threads: str = str(_CONFIG["INFERENCE_NUM_THREADS"]),
                 precision: str = _CONFIG["INFERENCE_PRECISION_HINT"]):
        self.threads = int(threads)
        self.precision = precision
        self._core = None

    @property
    def core(self) -> ov.Core:
        if self._core is None:
            self._core = ov.Core()
        return self._core

    def _config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {"INFERENCE_PRECISION_HINT": self.precision}
        if self.threads:
            cfg["INFERENCE_NUM_THREADS"] = self.threads
        return cfg

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "version": ov.__version__, "device": "CPU",
                "options": {**self._config(), "frontend": "onnx (read_model from bytes)"},
                "platform": platform.info()}

    def prepare(self, model: onnx.ModelProto) -> Prepared:
        try:
            ov_model = self.core.read_model(model.SerializeToString())
        except Exception as exc:
            raise Unsupported("read_model: " + one_line(exc)) from None
        try:
            compiled = self.core.compile_model(ov_model, OPENVINO.settings["device"], self._config())
        except Exception as exc:
            raise Unsupported("compile_model: " + one_line(exc)) from None

        declared_out = [(o.name, o.type.tensor_type.elem_type) for o in model.graph.output]
        in_ports = {p.get_any_name(): p for p in compiled.inputs}
        out_ports = list(compiled.outputs)
        if len(out_ports) != len(declared_out):
            raise RuntimeError(f"OpenVINO compiled model has {len(out_ports)} outputs, the ONNX model declares {len(declared_out)}")

        def run(inputs: Inputs) -> Outputs:
            request = compiled.create_infer_request()
            for name, arr in inputs.items():
                port = in_ports.get(name)
                if port is None:
                    raise RuntimeError(f"OpenVINO compiled model has no input named {name!r} (has {sorted(in_ports)})")
                onnx_t = adapt.elem_type(arr.dtype)
                want = _OV_OF_ONNX.get(onnx_t)
                if want is None or port.get_element_type() != want:
                    raise Unsupported(f"input {name}: OpenVINO port type {port.get_element_type()} cannot carry "
                                      f"{TP.DataType.Name(onnx_t)}")
                t = ov.Tensor(want, list(arr.shape))
                data = np.frombuffer(adapt.to_bytes(arr), np.uint8)
                if t.byte_size != data.size:
                    raise RuntimeError(f"OpenVINO holds {t.byte_size} bytes for {want}{list(arr.shape)}, ONNX layout {data.size}")
                if data.size:
                    t.data.reshape(-1).view(np.uint8)[:] = data
                request.set_tensor(port, t)
            try:
                request.infer()
            except Exception as exc:
                raise RuntimeError("infer: " + full_text(exc)) from None
            outs = []
            for (oname, decl), port in zip(declared_out, out_ports):
                t = request.get_tensor(port)
                et = str(t.element_type)
                onnx_t = _ONNX_OF_OV.get(et)
                shape = tuple(int(d) for d in t.shape)
                if onnx_t is None:
                    raise RuntimeError(f"output {oname}: OpenVINO element type {et} has no ONNX counterpart here")
                # onnx_t != decl: returned in OpenVINO's own type (bits unchanged); the harness
                # judges the dtype mismatch as a fail. Never converted here.
                raw = np.array(t.data, copy=True).reshape(-1).view(np.uint8) if t.byte_size else np.zeros(0, np.uint8)
                outs.append(adapt.from_bytes(raw[: t.byte_size], onnx_t, shape))
            return outs

        return run

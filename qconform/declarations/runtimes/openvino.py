"""OpenVINO, declared once (its runner ``runners.openvino_runner``): its runner's settings and its reproducer template."""
from __future__ import annotations

import json
from types import MappingProxyType

from qconform.declarations.runtime import THIRD_PARTY_CHECK, Runtime, with_template

OPENVINO_SETTINGS = MappingProxyType({
    "device": "CPU",
    #: compile_model's config: without the f32 hint the CPU plugin may compute in bf16/f16
    "config": MappingProxyType({"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1}),
    #: qconform element type name -> the ``ov.Type`` with the same bit layout
    "types": MappingProxyType({
        "float32": "f32", "float16": "f16", "bfloat16": "bf16", "int8": "i8", "uint8": "u8", "int16": "i16",
        "uint16": "u16", "int32": "i32", "float8e4m3fn": "f8e4m3", "float8e5m2": "f8e5m2", "float8e8m0": "f8e8m0",
        "float4e2m1": "f4e2m1", "int4": "i4", "uint4": "u4", "uint2": "u2", "int64": "i64"}),
})
#: Types numpy carries as they are (the reproducer passes them without ``CODES``).
_NUMPY_TYPES = ("float32", "float16", "int8", "uint8", "int16", "uint16", "int32", "int64")


def _ov_type(t) -> str | None:
    types = OPENVINO_SETTINGS["types"]
    return f"ov.Type.{types[t.name]}" if t.name in types and t.name not in _NUMPY_TYPES else None


_OV_COMPILE = (f'compiled = ov.Core().compile_model("model.onnx", {json.dumps(OPENVINO_SETTINGS["device"])}, '
               f'{json.dumps(dict(OPENVINO_SETTINGS["config"]))})\n')

OPENVINO = with_template(
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

__all__ = ["OPENVINO", "OPENVINO_SETTINGS"]

"""Family "basic": ordinary values through every valid type combination of Q/DQ, per-tensor and,
where the version has an axis, per-axis. The proof that every combination runs end to end; the edge
families place cases where implementations differ."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from qconform import dtypes, schemas
from qconform.case import Draft
from qconform.generators.common import draft, input_types, is_dequantize, is_quantize, output_types
from qconform.oracle import floats
from qconform.schemas import OpSpec

FAMILY = "basic"


def applies(spec: OpSpec, combo: dict[str, str]) -> bool:
    return is_quantize(spec) or is_dequantize(spec)


def _zero_point(t: str) -> int | float:
    et = dtypes.get(t)
    if et.is_float:
        return 0.0
    lo, hi = et.qrange
    return (lo + hi + 1) // 2 if lo == 0 else 0


def _scale(t: str) -> float:
    return 2.0 if t != "int32" else 3.0


def _q_inputs(x_t: str, y_t: str) -> list[float]:
    yt = dtypes.get(y_t)
    if yt.is_float:
        vals = floats.all_finite_values(yt)
        pick = np.concatenate([vals[:: max(1, len(vals) // 12)], [vals[-1], -vals[-1], 0.0]])
        top = dtypes.get(x_t).float_format.max_finite if dtypes.get(x_t).is_float else 2.0**31 - 1
        return sorted({float(np.clip(v, -top, top)) for v in pick * 2.0})
    lo, hi = yt.qrange
    zp = _zero_point(y_t)
    ks = sorted({lo - zp, lo - zp + 1, -1, 0, 1, hi - zp - 1, hi - zp})
    vals = [2.0 * (k + f) for k in ks for f in (0.0, 0.5, -0.25)]
    if x_t == "int32":
        vals = [round(v) for v in vals]
    top = dtypes.get(x_t).float_format.max_finite if dtypes.get(x_t).is_float else 2.0**31 - 1
    return [min(max(v, -top), top) for v in vals]  # ordinary values only; Inf belongs to "specials"


def _q(spec: OpSpec, combo: dict[str, str]) -> Iterator[Draft]:
    ins, y_t = input_types(spec, combo), output_types(spec, combo)["y"]
    x_t, s_t = ins["x"], ins["y_scale"]
    xs = _q_inputs(x_t, y_t)
    zp = _zero_point(y_t)
    yield draft(spec, combo, FAMILY, "per-tensor", {"x": xs, "y_scale": _scale(s_t), "y_zero_point": zp},
                clause="q-formula")
    if "axis" in spec.attrs:
        x = np.resize(np.asarray(xs, dtype=np.float64), 3 * len(xs)).reshape(3, len(xs))
        scales = [_scale(s_t), 4.0, 0.5] if s_t != "int32" else [3, 5, 1]
        yield draft(spec, combo, FAMILY, "per-axis", {"x": x, "y_scale": scales, "y_zero_point": [zp] * 3},
                    attrs={"axis": 0}, clause="granularity-per-axis")


def _dq_inputs(x_t: str) -> np.ndarray:
    xt = dtypes.get(x_t)
    if xt.bits <= 8:
        return xt.all_values()
    lo, hi = xt.qrange
    return np.array(sorted(v for v in {lo, lo + 1, -1, 0, 1, 2, 1000, hi - 1, hi} if lo <= v <= hi), dtype=xt.dtype)


def _dq(spec: OpSpec, combo: dict[str, str]) -> Iterator[Draft]:
    ins = input_types(spec, combo)
    x_t, s_t = ins["x"], ins["x_scale"]
    xs = _dq_inputs(x_t)
    zp = 0 if x_t == "int32" else _zero_point(x_t)
    attrs = {}
    if s_t == "float8e8m0":
        attrs["output_dtype"] = dtypes.get(output_types(spec, combo)["y"]).onnx
    elif "output_dtype" in spec.attrs and output_types(spec, combo)["y"] != s_t:
        attrs["output_dtype"] = dtypes.get(output_types(spec, combo)["y"]).onnx
    yield draft(spec, combo, FAMILY, "per-tensor", {"x": xs, "x_scale": 2.0, "x_zero_point": zp},
                attrs=attrs, clause="dq-formula")
    if "axis" in spec.attrs:
        x = np.stack([xs, xs[::-1]])
        yield draft(spec, combo, FAMILY, "per-axis", {"x": x, "x_scale": [2.0, 0.5], "x_zero_point": [zp, zp]},
                    attrs={**attrs, "axis": 0}, clause="granularity-per-axis")


def generate() -> Iterator[Draft]:
    for spec in schemas.all_specs():
        if spec.domain or not applies(spec, {}):
            continue
        for combo in spec.combinations():
            yield from (_q if is_quantize(spec) else _dq)(spec, combo)


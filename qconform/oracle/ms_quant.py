"""com.microsoft QuantizeLinear-1 / DequantizeLinear-1 (onnxruntime contrib ops).

The same formulas as the ONNX ops (qconform/docs/semantics.md#ms-quantize, #ms-dequantize), so the
QuantizeLinear / DequantizeLinear common bodies do the arithmetic; the facts that differ live here:

- ``axis`` has no default: absent means per-tensor ("If it's not specified, it means per-tensor
  quantization and input 'x_scale' and 'x_zero_point' must be scalars"), so a scale with more than
  one element and no axis is an invalid model; present means per-axis over that axis.
- no ``saturate``, ``block_size``, ``output_dtype`` or ``precision``: integer outputs only;
  the division precision of float16 scales is unstated (both readings, as QuantizeLinear-19/21).
"""
from __future__ import annotations

from typing import ClassVar

from qconform.case import MS_DOMAIN, Draft
from qconform.oracle.base import Evaluation, OpOracle, register
from qconform.oracle.dequantize import DequantizeLinear
from qconform.oracle.granularity import InvalidModel
from qconform.oracle.quantize import QuantizeLinear

_UNKNOWN_ATTRS = ("saturate", "block_size", "output_dtype", "precision")


class _MsFacts:
    """What both contrib ops share: the attribute set and the per-tensor rule without ``axis``."""

    domain: ClassVar[str] = MS_DOMAIN
    since: ClassVar[int] = 1
    clause: ClassVar[str]
    per_tensor: ClassVar[OpOracle]  # the common body without an axis (set below)

    def evaluate(self, draft: Draft, primary_only: bool = False) -> Evaluation:
        unknown = [a for a in draft.attrs if a != "axis"]
        if unknown:
            raise InvalidModel(f"com.microsoft {self.op}-1 has no attribute {unknown[0]!r} (only axis)")
        params = [a for a in draft.inputs[1:] if a is not None]
        if "axis" not in draft.attrs:
            if any(a.value.size != 1 or a.value.ndim > 1 for a in params):
                raise InvalidModel(f"no axis: scale and zero point must be scalars (qconform/docs/semantics.md#{self.clause})")
            body = self.per_tensor
        else:
            if any(a.value.ndim != 1 for a in params):
                raise InvalidModel(f"axis given: scale and zero point must be 1-D tensors "
                                   f"(qconform/docs/semantics.md#{self.clause})")
            body = super()
        ev = body.evaluate(draft, primary_only)
        ev.clause = self.clause
        return ev


class MsQuantizeLinear(_MsFacts, QuantizeLinear):
    clause = "ms-quantize"

    def output_type(self, draft: Draft, zp) -> str:
        # "Default is uint8 with zero point of 0 if it's not specified."
        return zp.type if zp is not None else "uint8"


class MsDequantizeLinear(_MsFacts, DequantizeLinear):
    clause = "ms-dequantize"


class _PerTensorQ(QuantizeLinear):
    op, since, has_axis = "QuantizeLinear", 1, False


class _PerTensorDQ(DequantizeLinear):
    op, since, has_axis = "DequantizeLinear", 1, False


MsQuantizeLinear.per_tensor = _PerTensorQ()
MsDequantizeLinear.per_tensor = _PerTensorDQ()

register(MsQuantizeLinear(), MsDequantizeLinear())

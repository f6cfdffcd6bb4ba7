"""qconform's own kernels on onnxruntime's average pools beyond the corpus (issue 67): QLinearAveragePool
and QLinearGlobalAveragePool through dequantize, the avg_pool entry point and quantize, judged against
the oracle's reading bit for bit (strict profile) on window geometries the corpus does not combine;
the oracle's refusals are the kernel's; the geometry array and the status byte are the header's."""
from __future__ import annotations

import re
import zlib

import numpy as np
import pytest

from kernel_helpers import cpu_kernel, draft, judged  # noqa: F401 (a fixture)
from qconform import dtypes
from qconform.declarations.operators import OPERATORS


def _pool(whole: bool):
    """The pool declaration with (whole) or without a kernel_shape attribute."""
    return next(o for o in OPERATORS if o.section == "ms-qlinear-pool" and ("kernel_shape" in o.arithmetic_attrs) != whole)


def _values(shape: tuple[int, ...], t: str, key: str, x_scale: float = 0.25, y_scale: float = 0.5) -> dict:
    """Random codes of ``t``; power-of-two X scales (every window sum exact: #qdq-sum-order), zero points
    inside the range."""
    et = dtypes.get(t)
    lo, hi = int(et.qrange[0]), int(et.qrange[1])
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    return dict(X=rng.integers(lo, hi + 1, shape).astype(et.dtype), x_scale=np.array(np.float32(x_scale)),
                x_zero_point=np.array(lo + 131, et.dtype), y_scale=np.array(np.float32(y_scale)),
                y_zero_point=np.array(lo + 120, et.dtype))


#: (X shape, attributes): 1-D to 3-D windows, strides, asymmetric pads, ceil_mode, count_include_pad, auto_pad.
GEOMETRIES = {
    "1d-ceil-exclude": ((2, 3, 12), dict(kernel_shape=[3], strides=[2], pads=[1, 1], ceil_mode=1)),
    "1d-include": ((1, 2, 9), dict(kernel_shape=[4], strides=[3], pads=[2, 1], count_include_pad=1)),
    "2d-asymmetric": ((1, 3, 7, 6), dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 2, 1])),
    "2d-include-ceil": ((2, 2, 6, 7), dict(kernel_shape=[2, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1,
                                          count_include_pad=1)),
    "2d-same-lower": ((1, 2, 5, 8), dict(kernel_shape=[2, 3], strides=[2, 3], auto_pad="SAME_LOWER")),
    "2d-same-upper-include": ((1, 2, 5, 8), dict(kernel_shape=[4, 2], auto_pad="SAME_UPPER", count_include_pad=1)),
    "2d-valid-ceil": ((1, 1, 9, 9), dict(kernel_shape=[3, 3], strides=[4, 2], auto_pad="VALID", ceil_mode=1)),
    "3d": ((1, 2, 4, 5, 6), dict(kernel_shape=[2, 3, 2], strides=[1, 2, 2], pads=[0, 1, 1, 1, 0, 1])),
    "3d-include": ((2, 1, 3, 4, 5), dict(kernel_shape=[3, 2, 3], pads=[1, 1, 1, 1, 1, 1], count_include_pad=1)),
}


@pytest.mark.parametrize("last", [0, 1], ids=["channels-first", "channels-last"])
@pytest.mark.parametrize("t", ["int8", "uint8"])
@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_average_pool_geometries(cpu_kernel, name, t, last):
    shape, attrs = GEOMETRIES[name]
    if last:
        shape = (shape[0], *shape[2:], shape[1])
    judged(cpu_kernel, _pool(False), _values(shape, t, f"{name}/{t}/{last}"), dict(attrs, channels_last=last))


@pytest.mark.parametrize("last", [0, 1], ids=["channels-first", "channels-last"])
@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 7), (1, 4, 5, 3), (2, 2, 3, 4, 5)], ids=str)
def test_global_average_pool_shapes(cpu_kernel, shape, last):
    values = _values(shape, "uint8", f"global/{shape}/{last}", x_scale=0.125, y_scale=0.25)
    judged(cpu_kernel, _pool(True), values, dict(channels_last=last))


def test_average_pool_means_on_ties_and_scales_not_powers_of_two(cpu_kernel):
    """Means of two landing on k + 1/2 (round half to even in quantize), then a Y scale that is not a
    power of two (the float32 quotient)."""
    x = np.arange(-128, 128, dtype=np.int8).reshape(1, 1, 256)
    values = dict(X=x, x_scale=np.array(np.float32(1.0)), x_zero_point=np.array(0, np.int8),
                  y_scale=np.array(np.float32(1.0)), y_zero_point=np.array(3, np.int8))
    judged(cpu_kernel, _pool(False), values, dict(kernel_shape=[2]))
    values["y_scale"] = np.array(np.float32(0.0371))
    judged(cpu_kernel, _pool(False), values, dict(kernel_shape=[3], strides=[2], pads=[1, 1]))


@pytest.mark.parametrize("attrs, why", [
    (dict(kernel_shape=[2], pads=[2, 0]), "holds no input element"),
    (dict(kernel_shape=[3], strides=[2], ceil_mode=1, count_include_pad=1), "the count is open"),
], ids=["empty-window", "include-ceil-extra"])
def test_the_oracles_refusals_are_the_kernels(cpu_kernel, attrs, why):
    """A draft the oracle refuses is no case, so the kernels' plan runs on the node's own model."""
    from onnx import TensorProto, helper

    from qconform.kernels.plan import read_plan
    from qconform.oracle import evaluate
    from qconform.oracle.granularity import InvalidModel

    op, values = _pool(False), _values((1, 1, 6), "int8", "refusal")
    with pytest.raises(InvalidModel):
        evaluate(draft(op, values, attrs))
    ins = [helper.make_tensor_value_info(n, TensorProto.INT8 if n in ("X", "x_zero_point", "y_zero_point")
                                         else TensorProto.FLOAT, list(values[n].shape)) for n in values]
    node = helper.make_node(op.op, list(values), ["Y"], domain=op.domain, **attrs)
    graph = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("Y", TensorProto.INT8, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(op.domain, 1)])
    plan = read_plan(model, "cpu-kernel")
    with pytest.raises(ValueError, match=why):
        plan.run(values, cpu_kernel.execute)


def test_pool_geometry_and_status_match_the_header():
    """The geometry array's layout is the header's QK_PG_* enum; the status bytes its QK_POOL_* enum."""
    from qconform.kernels import POOL_GEOMETRY, source
    from qconform.kernels.pools import POOL_STATUS

    text = source()
    enum = dict((k, int(v)) for k, v in re.findall(r"QK_PG_(\w+) = (\d+)", text))
    offset = 0
    for name, count in POOL_GEOMETRY:
        if name.upper() in enum:
            assert enum[name.upper()] == offset, name
        offset += count
    assert enum["LEN"] == offset
    (body,) = re.findall(r"enum \{ (QK_POOL_\w+(?:, QK_POOL_\w+)*) \}", text)
    assert [n.strip().removeprefix("QK_POOL_").lower() for n in body.split(",")] == list(POOL_STATUS)

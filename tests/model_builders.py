"""Quantized models made here, offline, by the tools users use: the models the ``--model`` tests certify.

Float models are built in code (seeded weights): a tiny CNN (Conv, Relu, Conv, Add, AveragePool,
GlobalAveragePool, Reshape, MatMul), a transformer block (attention: MatMul, Transpose, Mul, Softmax,
MatMul; a residual Add; a feed-forward MatMul, Relu, MatMul, Add) and stacks of N quantized groups,
elementwise or convolutions (the benchmark's). onnxruntime's own ``quantize_static`` quantizes them in the QDQ and the QOperator
format (uint8 activations, per-channel int8 weights, seeded calibration inputs), and its
``MatMulNBitsQuantizer`` makes an int4 weight-only model. Nothing is fetched.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _save(nodes, inputs, outputs, arrays: dict[str, np.ndarray], path: Path, opset: int = 17) -> None:
    inits = [numpy_helper.from_array(a, n) for n, a in arrays.items()]
    graph = helper.make_graph(nodes, path.stem, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def tiny_cnn(path: Path) -> dict[str, tuple[int, ...]]:
    """The issue's tiny CNN; returns its graph inputs' shapes."""
    rng = np.random.default_rng(7)
    arrays = {n: rng.normal(0, s, shape).astype(np.float32) for n, s, shape in
              [("w1", 0.3, (4, 2, 3, 3)), ("b1", 0.1, (4,)), ("w2", 0.3, (4, 4, 3, 3)), ("b2", 0.1, (4,)),
               ("wm", 0.3, (4, 3))]}
    arrays["shape"] = np.array([1, 4], np.int64)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["a"], name="add"),
             helper.make_node("AveragePool", ["a"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
             helper.make_node("Reshape", ["g", "shape"], ["f"], name="flat"),
             helper.make_node("MatMul", ["f", "wm"], ["y"], name="fc")]
    _save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, 8])],
          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], arrays, path)
    return {"x": (1, 2, 8, 8)}


def transformer_block(path: Path, seq: int = 4, dim: int = 8) -> dict[str, tuple[int, ...]]:
    """One attention head and a feed-forward layer with residual Adds (no normalisation)."""
    rng = np.random.default_rng(11)
    arrays = {n: rng.normal(0, 0.4, shape).astype(np.float32) for n, shape in
              [("wq", (dim, dim)), ("wk", (dim, dim)), ("wv", (dim, dim)), ("wo", (dim, dim)),
               ("w1", (dim, 2 * dim)), ("w2", (2 * dim, dim))]}
    arrays["scale"] = np.array(1 / np.sqrt(dim), np.float32)
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"], name="q_proj"),
             helper.make_node("MatMul", ["x", "wk"], ["k"], name="k_proj"),
             helper.make_node("MatMul", ["x", "wv"], ["v"], name="v_proj"),
             helper.make_node("Transpose", ["k"], ["kt"], name="k_t", perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["s"], name="scores"),
             helper.make_node("Mul", ["s", "scale"], ["ss"], name="scaled"),
             helper.make_node("Softmax", ["ss"], ["attn"], name="softmax", axis=-1),
             helper.make_node("MatMul", ["attn", "v"], ["ctx"], name="context"),
             helper.make_node("MatMul", ["ctx", "wo"], ["o"], name="o_proj"),
             helper.make_node("Add", ["o", "x"], ["h"], name="residual1"),
             helper.make_node("MatMul", ["h", "w1"], ["f1"], name="ffn1"),
             helper.make_node("Relu", ["f1"], ["f1r"], name="ffn_relu"),
             helper.make_node("MatMul", ["f1r", "w2"], ["f2"], name="ffn2"),
             helper.make_node("Add", ["f2", "h"], ["y"], name="residual2")]
    _save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, dim])],
          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, dim])], arrays, path)
    return {"x": (1, seq, dim)}


def group_stack(path: Path, groups: int = 20) -> dict[str, tuple[int, ...]]:
    """``groups`` elementwise layers (Add, Mul, Sigmoid in turn, each with a constant where it
    takes two): quantized, ``groups`` QDQ groups of the pattern catalogue, plus the input's and
    the output's QuantizeLinear and DequantizeLinear."""
    rng = np.random.default_rng(13)
    nodes, arrays, prev = [], {}, "x"
    for i in range(groups):
        out = f"t{i}"
        kind = ("Add", "Mul", "Sigmoid")[i % 3]
        if kind in ("Add", "Mul"):
            arrays[f"c{i}"] = rng.normal(1 if kind == "Mul" else 0, 0.3, (1, 16)).astype(np.float32)
            nodes.append(helper.make_node(kind, [prev, f"c{i}"], [out], name=f"layer{i}"))
        else:
            nodes.append(helper.make_node(kind, [prev], [out], name=f"layer{i}"))
        prev = out
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="out"))
    _save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])], arrays, path)
    return {"x": (1, 16)}


def conv_stack(path: Path, groups: int = 20) -> dict[str, tuple[int, ...]]:
    """``groups`` padded 3x3 convolutions (4 channels, 8x8, bias, Relu after each): quantized,
    ``groups`` Conv QDQ groups, whose sums at calibrated scales the oracle mostly refuses dense."""
    rng = np.random.default_rng(19)
    nodes, arrays, prev = [], {}, "x"
    for i in range(groups):
        arrays[f"w{i}"] = rng.normal(0, 0.25, (4, 4, 3, 3)).astype(np.float32)
        arrays[f"b{i}"] = rng.normal(0, 0.1, (4,)).astype(np.float32)
        nodes += [helper.make_node("Conv", [prev, f"w{i}", f"b{i}"], [f"c{i}"], name=f"conv{i}", pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}")]
        prev = f"r{i}"
    _save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 4, 8, 8])], arrays, path)
    return {"x": (1, 4, 8, 8)}


def quantized(folder: Path, builder: Callable[[Path], dict[str, tuple[int, ...]]], fmt: str) -> Path:
    """``builder``'s float model quantized by ``quantize_static`` in format ``fmt`` (QDQ or QOperator)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    src = folder / f"{builder.__name__}.float.onnx"
    shapes = builder(src)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(3)
            self.items = iter([{k: rng.normal(0, 1, s).astype(np.float32) for k, s in shapes.items()}
                               for _ in range(4)])

        def get_next(self):
            return next(self.items, None)

    out = folder / f"{builder.__name__}.{fmt}.onnx"
    quantize_static(str(src), str(out), Reader(), quant_format=getattr(QuantFormat, fmt),
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True)
    return out


def matmul_nbits(folder: Path) -> Path:
    """An int4 weight-only model from onnxruntime's MatMulNBits quantizer (block size 32, symmetric)
    over a MatMul with a constant weight; needs onnx-ir, which the quantizer imports."""
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

    rng = np.random.default_rng(17)
    src = folder / "nbits.float.onnx"
    arrays = {"w": rng.normal(0, 0.5, (64, 16)).astype(np.float32)}
    _save([helper.make_node("MatMul", ["x", "w"], ["y"], name="proj")],
          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 64])],
          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 16])], arrays, src, opset=21)
    quant = MatMulNBitsQuantizer(onnx.load(str(src)), algo_config=DefaultWeightOnlyQuantConfig(
        block_size=32, is_symmetric=True, bits=4))
    quant.process()
    out = folder / "nbits.int4.onnx"
    quant.model.save_model_to_file(str(out), False)
    return out

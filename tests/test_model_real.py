"""``certify --model`` on models the tools users use made: a transformer block quantized by onnxruntime's
``quantize_static`` in the QDQ and the QOperator format, and an int4 weight-only model from its
``MatMulNBitsQuantizer`` (``model_builders``; nothing fetched).

Through onnxruntime at its default optimisation level (``onnxruntime-optimized``: QDQ groups fused into
integer kernels, as users run it) and through onnx.reference: every node of the model is in a group
listed in groups.md with its verdict or why it is not judged, each group without one is said once on
stderr, and the whole-model check ran (or says why not).
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import onnx
import pytest

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install onnxruntime)")

from model_builders import matmul_nbits, quantized, transformer_block  # noqa: E402
from qconform import cli  # noqa: E402
from qconform.gating.model_cases import GROUPS_FILE  # noqa: E402


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("real")


def _certify(capsys, model: Path, runner: str, report: Path) -> tuple[int, str, str]:
    status = cli.main(["certify", "--model", str(model), "--runner", runner, "--report", str(report), "-j", "1"])
    got = capsys.readouterr()
    return status, got.out, got.err


def _every_group_listed(model: Path, report: Path, err: str) -> list[str]:
    """groups.md's rows; every node of the model in one of them, each row with a verdict or a reason,
    each group without a verdict said once on stderr."""
    text = (report / GROUPS_FILE).read_text()
    rows = [r for r in text.splitlines() if r.startswith("| ") and not r.startswith(("| group", "| ---"))]
    for node in onnx.load(str(model)).graph.node:
        assert sum(f"{node.name} ({node.op_type})" in r for r in rows) >= 1, node.name
    assert all(r.rstrip(" |").split("| ")[-1].strip() for r in rows)
    said = [line for line in err.splitlines() if "not judged:" in line]
    assert len(said) == len(set(said)) == sum("not judged:" in r for r in rows)
    assert "whole-model check:" in text
    return rows


@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
@pytest.mark.parametrize("runner", ["onnxruntime-optimized", "onnx-reference"])
def test_transformer_block(folder, tmp_path, capsys, fmt, runner):
    model = folder / f"transformer_block.{fmt}.onnx"
    if not model.exists():
        quantized(folder, transformer_block, fmt)
    report = tmp_path / "report"
    status, out, err = _certify(capsys, model, runner, report)
    assert status in (0, 1), err
    rows = _every_group_listed(model, report, err)
    judged = [r for r in rows if "not judged" not in r]
    assert judged  # the Softmax, Add, Mul and QuantizeLinear/DequantizeLinear groups at the least
    data = json.loads((report / "report.json").read_text())
    assert data["invocation"]["model"]["file"] == model.name and data["cases"]
    assert "whole-model check:" in out


@pytest.mark.skipif(importlib.util.find_spec("onnx_ir") is None,
                    reason="onnxruntime's MatMulNBits quantizer needs onnx-ir (pip install onnx-ir)")
def test_int4_weight_only_model(folder, tmp_path, capsys):
    model = matmul_nbits(folder)
    assert [n.op_type for n in onnx.load(str(model)).graph.node] == ["MatMulNBits"]
    report = tmp_path / "report"
    status, out, err = _certify(capsys, model, "onnxruntime", report)
    rows = _every_group_listed(model, report, err) if status != 2 or (report / GROUPS_FILE).is_file() else []
    assert rows and "(MatMulNBits)" in rows[0]
    if status == 2:  # no group judged: said once, in one line naming the group and why
        assert "no group of the model can be judged" in err

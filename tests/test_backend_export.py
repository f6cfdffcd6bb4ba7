"""``qconform export backend-test``: the corpus in ONNX's backend-test layout, read back by onnx's own
loader (``onnx.backend.test.loader.load_model_tests``) and run by onnx's own backend-test ``Runner``
with onnxruntime's backend (``onnxruntime.backend``): real runtimes, no stand-ins.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import unittest
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper
from onnx.backend.test.loader import load_model_tests

from qconform import corpus as corpus_mod
from qconform import dtypes
from qconform.model import build_model
from qconform.plugin import default_golden
from qconform.apps import backend_export as bx
from qconform.report.export import dirname

MULTI_F32 = "DequantizeLinear-13/int32-float32/precision/wide-differences"  # 2 readings, float32 out
MULTI_F8 = "QuantizeLinear-19/float16-float8e4m3fn/precision/near-ties"  # 2 readings, float8 out
MULTI_QMM = "QLinearMatMul-10/uint8-int8-int8-float32/accumulator/beyond-2^31"  # 2 readings, '^' in the id
INT4 = "QuantizeLinear-21/float32-int4/basic/per-tensor"
INT8 = "QuantizeLinear-13/float32-int8/basic/per-tensor"
DONT_CARE = "QuantizeLinear-13/float32-int8/specials/extremes"  # a don't-care mask
SCALARS = "DynamicQuantizeLinear-11/float32-uint8-float32/ranges/onnx-node-test_dynamicquantizelinear"  # rank 0
INFO = "DequantizeLinear-13/int8-float32/granularity/scale-shape-1"  # implementation-defined
IDS = (MULTI_F32, MULTI_F8, MULTI_QMM, INT4, INT8, DONT_CARE, SCALARS, INFO)
#: Output types onnxruntime's backend returns as numpy arrays with their own dtype.
ORT_NATIVE = {"float32", "int8", "uint8", "int32"}


@pytest.fixture(scope="module")
def cases() -> dict:
    found = corpus_mod.index(default_golden()).cases_of(IDS)
    assert set(found) == set(IDS)
    c = found
    assert len(c[MULTI_F32].readings) > 1 and len(c[MULTI_F8].readings) > 1 and len(c[MULTI_QMM].readings) > 1
    assert "int4" in c[INT4].output_types and c[MULTI_F8].output_types == ("float8e4m3fn",)
    assert c[INFO].information and any(m is not None for r in c[DONT_CARE].readings for m in r.dont_care)
    assert any(o.ndim == 0 for o in c[SCALARS].expected)
    return found


@pytest.fixture(scope="module")
def out(cases, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("backend") / "export"
    bx.export_backend(cases.values(), root, corpus_digest="d")
    return root


def read_tensor(path: Path) -> onnx.TensorProto:
    t = onnx.TensorProto()
    t.ParseFromString(path.read_bytes())
    return t


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    t = dtypes.get(b.dtype)
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(t.to_bits(a), t.to_bits(b)))


def golden_tensors(group: str) -> dict[str, onnx.TensorProto]:
    seq = onnx.SequenceProto()
    seq.ParseFromString((default_golden() / "data" / f"{group}.pb").read_bytes())
    return {t.name: t for t in seq.tensor_values}


def test_every_directory_loads_with_onnx_loader(out, cases):
    index = json.loads((out / "index.json").read_text())
    assert index["format"] == bx.FORMAT and index["complete"] and index["corpus_digest"] == "d"
    for kind in (bx.KIND, bx.INFO_KIND):
        loaded = load_model_tests(data_dir=str(out), kind=kind)
        listed = {r["dir"].split("/", 1)[1] for e in index["cases"] if e["kind"] == kind for r in e["readings"]}
        assert {t.name for t in loaded} == listed == {p.name for p in (out / kind).iterdir()}
        for t in loaded:
            assert t.name.startswith("test_") and t.kind == kind
            assert (t.rtol, t.atol) == (0, 0), "data.json's tolerances reach the loader"
            d = Path(t.model_dir)
            model = onnx.load(d / "model.onnx")
            onnx.checker.check_model(model)
            data = d / bx.DATA_SET
            assert sorted(p.name for p in data.iterdir()) == sorted(
                [f"input_{n}.pb" for n in range(len(model.graph.input))]
                + [f"output_{n}.pb" for n in range(len(model.graph.output))])
            # onnxruntime's onnx_test_runner takes every subdirectory of a test for a data set
            assert [p.name for p in d.iterdir() if p.is_dir()] == ["test_data_set_0"]
            assert (d / "config.txt").read_text() == bx.CONFIG_TXT
    # kind "node" would be onnx's own bundled node tests, whatever data_dir says: never ours
    assert bx.KIND != "node" and bx.INFO_KIND != "node"


def test_every_reading_exported_bit_for_bit(out, cases):
    index = {e["id"]: e for e in json.loads((out / "index.json").read_text())["cases"]}
    assert set(index) == set(IDS)
    for cid, case in cases.items():
        entry = index[cid]
        assert [r["name"] for r in entry["readings"]] == [r.name for r in case.readings]
        golden = golden_tensors(case.group)
        base = f"test_{dirname(cid)}"
        for reading, listed in zip(case.readings, entry["readings"]):
            d = out / listed["dir"]
            assert d.name == (base if len(case.readings) == 1 else f"{base}__{dirname(reading.name)}")
            meta = json.loads((d / "qconform.json").read_text())
            assert meta["id"] == cid and meta["reading"] == reading.name
            assert meta["dirs"] == [Path(r["dir"]).name for r in entry["readings"]]
            data = d / "test_data_set_0"
            for n, (name, want) in enumerate(zip(case.output_names, reading.outputs)):
                t = read_tensor(data / f"output_{n}.pb")
                assert t.name == name and same_bits(numpy_helper.to_array(t), want), (d.name, n)
                g = onnx.TensorProto()
                g.CopyFrom(golden[f"{cid}|out.{reading.name}|{name}"])
                g.name = name
                assert t.SerializeToString() == g.SerializeToString(), f"{d.name}: output {n} bytes"
            model = onnx.load(d / "model.onnx")
            assert model.SerializeToString() == build_model(case).SerializeToString()
            for n, vi in enumerate(model.graph.input):
                t = read_tensor(data / f"input_{n}.pb")
                assert t.name == vi.name and same_bits(numpy_helper.to_array(t), case.feeds[vi.name])
            for n, mask in enumerate(reading.dont_care):  # each directory its own reading's mask
                p = d / f"dont_care_{n}.pb"
                assert p.exists() == (mask is not None)
                if mask is not None:
                    assert np.array_equal(numpy_helper.to_array(read_tensor(p)), mask)
            counts = [0 if m is None else int(m.sum()) for m in reading.dont_care]
            assert meta["dont_care"] == listed["dont_care"] == counts
    # several readings: one directory each, every one a different expectation
    for cid in (MULTI_F32, MULTI_F8, MULTI_QMM):
        dirs = [out / r["dir"] for r in index[cid]["readings"]]
        assert len(dirs) == len(cases[cid].readings) >= 2 and all("__" in d.name for d in dirs)
        assert len({(d / "test_data_set_0" / "output_0.pb").read_bytes() for d in dirs}) == len(dirs)


def test_information_cases_have_their_own_kind(out, cases):
    entry = next(e for e in json.loads((out / "index.json").read_text())["cases"] if e["id"] == INFO)
    assert entry["kind"] == bx.INFO_KIND and entry["information"] == cases[INFO].information
    d = out / entry["readings"][0]["dir"]
    assert d.parent.name == bx.INFO_KIND
    assert json.loads((d / "qconform.json").read_text())["information"] == cases[INFO].information
    assert not any(t.name == d.name for t in load_model_tests(data_dir=str(out), kind=bx.KIND))


def test_same_bytes_every_run(out, cases, tmp_path):
    again = tmp_path / "again"
    bx.export_backend(reversed(list(cases.values())), again, corpus_digest="d")

    def files(root: Path) -> dict[str, bytes]:
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    assert files(again) == files(out)


def _expected_verdict(case, reading) -> str:
    """What onnx's Runner must say, found without the export: onnxruntime run directly on the case,
    compared with the golden reading the way the Runner compares (assert_allclose, rtol=atol=0)."""
    try:
        session = ort.InferenceSession(build_model(case).SerializeToString(), providers=["CPUExecutionProvider"])
        got = session.run(None, case.feeds)
    except Exception:  # noqa: BLE001 - e.g. a type combination onnxruntime does not implement
        return "error"
    try:
        for g, want in zip(got, reading.outputs):
            assert g.dtype == want.dtype and g.shape == want.shape
            np.testing.assert_allclose(g, want, rtol=0, atol=0)
    except AssertionError:
        return "fail"
    return "pass"


@pytest.mark.filterwarnings("ignore:onnx.version is deprecated:DeprecationWarning")  # onnxruntime.backend's import
def test_onnx_runner_with_onnxruntime_backend(out, cases, monkeypatch):
    """onnx's backend-test Runner over the export: its loading, its feeding, its comparison. The Runner
    reads only onnx's own data directory (and its ~4,000 bundled tests cost 10 s to build), so its
    loader is pointed at the export: every test it builds is one of ours."""
    import onnxruntime.backend as ort_backend
    from onnx.backend.test import runner as runner_mod

    monkeypatch.setattr(runner_mod, "load_model_tests", lambda data_dir=None, kind=None:
                        load_model_tests(data_dir=str(out), kind=bx.KIND) if kind == "simple" else [])
    runner = runner_mod.Runner(ort_backend)
    index = json.loads((out / "index.json").read_text())["cases"]
    wanted = {}  # directory name -> (case, reading), float32/int8-family cases only
    for e in index:
        case = cases[e["id"]]
        types = set(case.output_types) | {a.type for a in case.inputs if a is not None}
        if e["kind"] == bx.KIND and types <= ORT_NATIVE:
            for reading, r in zip(case.readings, e["readings"]):
                wanted[Path(r["dir"]).name] = (case, reading)
    assert {MULTI_F32, MULTI_QMM, INT8, DONT_CARE, SCALARS} <= {c.id for c, _ in wanted.values()}
    for name in wanted:
        runner.include(f"^{re.escape(name)}_cpu$")
    result = unittest.TestResult()
    for test_case in runner.test_cases.values():
        unittest.defaultTestLoader.loadTestsFromTestCase(test_case).run(result)
    bad = {t.id().rsplit(".", 1)[1]: why for t, why in result.failures + result.errors}
    skipped = {t.id().rsplit(".", 1)[1] for t, _ in result.skipped}
    ran = {f"{n}_cpu" for n in wanted}
    assert not ran & skipped and result.testsRun >= len(ran)
    verdicts = {}
    for name, (case, reading) in wanted.items():
        why = bad.get(f"{name}_cpu")
        verdicts[name] = "pass" if why is None else "fail" if "AssertionError" in why else "error"
        assert verdicts[name] == _expected_verdict(case, reading), (name, (why or "")[-600:])
    assert "pass" in verdicts.values()
    # a case with several readings: one Runner test per reading, each against its own expectation
    runs = [n for n, (c, _) in wanted.items() if c.id == MULTI_F32]
    assert len(runs) == len(cases[MULTI_F32].readings)


def test_cli_main(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    bx.add_arguments(parser)
    dest = tmp_path / "cli"
    args = parser.parse_args([str(dest), "--case", "QuantizeLinear-21/float32-int4/basic/*",
                              "--case", INFO, "-m", "not family_specials"])
    assert bx.main(args) == 0
    index = json.loads((dest / "index.json").read_text())
    ids = [e["id"] for e in index["cases"]]
    assert INT4 in ids and INFO in ids and ids == sorted(ids)
    assert all(i.startswith("QuantizeLinear-21/float32-int4/basic/") or i == INFO for i in ids)
    assert index["corpus_digest"] == corpus_mod.verify(default_golden())
    text = capsys.readouterr().out
    assert f"to {dest / bx.KIND}" in text and "information" in text
    before = {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    assert bx.main(args) == 2 and "--force" in capsys.readouterr().err  # an earlier export: not replaced
    assert bx.main(parser.parse_args([*map(str, [dest]), "--force", "--case", INT4])) == 0
    assert [e["id"] for e in json.loads((dest / "index.json").read_text())["cases"]] == [INT4]
    assert bx.main(parser.parse_args([str(dest), "--force", "--case", "QuantizeLinear-21/float32-int4/basic/*",
                                      "--case", INFO, "-m", "not family_specials"])) == 0
    assert {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    assert bx.main(parser.parse_args([str(other), "--force", "--case", INT4])) == 2
    assert [p.name for p in other.iterdir()] == ["keep.txt"]
    assert bx.main(parser.parse_args([str(tmp_path / "none"), "-m", "op_NoSuchOp"])) == 2
    assert "no case matches" in capsys.readouterr().err


def test_selection():
    refs = corpus_mod.index(default_golden()).refs
    pick = bx.selection(["QuantizeLinear-21/*"], "types_float32_int4 and not family_specials")
    ids = [r.id for r in refs if pick(r)]
    assert ids and all(i.startswith("QuantizeLinear-21/float32-int4/") and "/specials/" not in i for i in ids)
    assert [r.id for r in refs if bx.selection([f"x/MANIFEST::{INT4}"])(r)] == [INT4]  # pytest's node id
    with pytest.raises(bx.ExportError):
        bx.selection([], "op_QuantizeLinear(")
    with pytest.raises(bx.ExportError):
        bx.selection([], "__import__('os')")


def test_names_never_collide(cases):
    """Two ids that the portable form maps to one name both get a hash suffix."""
    case = cases[INT8]
    twins = [dataclasses.replace(case, draft=dataclasses.replace(case.draft, name=n)) for n in ("a^b", "a_b")]
    names = bx.dir_names([*twins, cases[MULTI_F32]])
    a, b = names[(twins[0].id, "spec")], names[(twins[1].id, "spec")]
    assert a != b and a.startswith(f"test_{dirname(twins[0].id)}-") and b.startswith(f"test_{dirname(twins[1].id)}-")
    assert names[(MULTI_F32, cases[MULTI_F32].readings[0].name)] == \
        f"test_{dirname(MULTI_F32)}__{dirname(cases[MULTI_F32].readings[0].name)}"

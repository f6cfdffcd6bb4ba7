"""onnxruntime's weight-only and dynamic com.microsoft ops: the stored schemas against onnxruntime's,
one test per decision of qconform/docs/semantics.md §9.5-9.7, and the families' reach (issue 65)."""
from __future__ import annotations

import collections

import numpy as np
import pytest

from qconform import dtypes, schemas
from qconform.declarations import contrib_blocked as decl
from qconform.declarations.contrib_blocked import pack_stream, unpack_stream
from qconform.generators import gather_block_quantized, matmul_nbits, scale_products
from qconform.generators.common import draft
from qconform.oracle.base import evaluate
from qconform.oracle.graph import NotExact
from qconform.oracle.granularity import InvalidModel


def _spec(op):
    return schemas.get(op.op, 1, op.domain)


def _nbits(a, codes, scales, bits=4, bs=16, zp=None, t1="float32", t3="uint8", attrs=None, **extra):
    """A MatMulNBits draft from logical codes [N, K'] (K' a whole number of blocks; K from ``attrs``)."""
    n, kk = codes.shape
    k = (attrs or {}).get("K", kk)
    kb = kk // bs
    b = pack_stream(codes, bits, kb * bs * bits // 8).reshape(n, kb, bs * bits // 8)
    values = {"A": np.asarray(a, np.float32) if t1 == "float32" else a, "B": b,
              "scales": np.asarray(scales, np.float32), "zero_points": zp, **extra}
    at = {"K": k, "N": n, "bits": bits, "block_size": bs, **(attrs or {})}
    return draft(_spec(decl.MATMUL_NBITS), {"T1": t1, "T2": "uint8", "T3": t3, "T4": "int32"}, "test", "t", values, at)


def _y(d):
    case = evaluate(d)
    return case, np.asarray(case.readings[0].outputs[0], np.float64)


# -- the stored schemas are onnxruntime's ------------------------------------------------------------
def _ort_type(s: str) -> str:
    return dtypes.get(s).name


@pytest.mark.parametrize("op", decl.OPERATORS, ids=lambda o: o.op)
def test_the_stored_schema_is_onnxruntimes(op):
    """semantics.md#ms-matmulnbits: the declaration's table equals the installed onnxruntime's
    registered schema (inputs, options, outputs, attributes and defaults, type constraints)."""
    ort = pytest.importorskip("onnxruntime.capi.onnxruntime_pybind11_state",
                              reason="onnxruntime missing: pip install -e '.[onnxruntime]'")
    import onnx

    found = [s for s in ort.get_all_operator_schema() if s.domain == op.domain and s.name == op.op]
    assert found, f"onnxruntime registers no {op.label}"
    s = max(found, key=lambda s: s.since_version)
    assert s.since_version == op.versions[0]
    opt = type(s.inputs[0].option)
    assert tuple((i.name, i.typeStr, i.option == opt.Optional) for i in s.inputs) == op.schema["inputs"]
    assert tuple((o.name, o.typeStr) for o in s.outputs) == op.schema["outputs"]
    attrs = {}
    for name, a in s.attributes.items():
        raw = a._default_value
        attrs[name] = onnx.helper.get_attribute_value(onnx.AttributeProto.FromString(raw)) if raw else None
    assert attrs == op.schema["attrs"]
    types = {t.type_param_str: tuple(_ort_type(x) for x in t.allowed_type_strs) for t in s.type_constraints}
    assert types == {k: tuple(v) for k, v in op.schema["types"].items()}
    assert tuple(i.name for i in op.inputs) == tuple(i[0] for i in op.schema["inputs"])


# -- 9.5.1 bits, blocks, the packed layout ----------------------------------------------------------
def test_the_bit_stream_puts_the_first_code_in_the_low_bits():
    """"the first 4 bits are stored in the lower 4 bits of a byte"; widths that do not divide 8 cross bytes."""
    assert pack_stream(np.array([[1, 2]]), 4, 1).tolist() == [[0x21]]
    codes = np.array([[5, 3, 7]])  # 3 bits: 101, 011, 111 -> bits 0-2, 3-5, 6-8
    packed = pack_stream(codes, 3, 2)
    assert packed.tolist() == [[0b11011101, 0b1]]
    assert unpack_stream(packed, 3, 3).tolist() == codes.tolist()
    rng = np.random.default_rng(0)
    for bits in range(2, 9):
        c = rng.integers(0, 1 << bits, (3, 16))
        assert np.array_equal(unpack_stream(pack_stream(c, bits, 2 * bits), bits, 16), c)


def test_every_bits_value_from_2_to_8_is_a_case_and_9_is_not():
    codes = np.arange(32).reshape(1, 32) % 4
    for bits in range(2, 9):
        _, y = _y(_nbits(np.ones((1, 32)), codes, [[1.0, 1.0]], bits=bits))
        assert y.tolist() == [[float((codes - (1 << (bits - 1))).sum())]]
    with pytest.raises(InvalidModel):
        evaluate(_nbits(np.ones((1, 32)), codes, [[1.0, 1.0]], bits=4, attrs={"bits": 9}))
    with pytest.raises(InvalidModel):
        evaluate(_nbits(np.ones((1, 24)), codes[:, :24], [[1.0]], bs=24))


def test_a_k_tail_reads_only_the_first_codes_of_the_last_blob():
    """K not a multiple of block_size: the padding codes of the last blob are any value."""
    codes = np.zeros((2, 32), np.int64) + 8
    codes[:, :20] = np.arange(20) % 16
    a = np.ones((1, 20))
    ys = []
    for pad in (0, 15):
        c = codes.copy()
        c[:, 20:] = pad
        ys.append(_y(_nbits(a, c, [[1.0, 2.0], [0.5, 1.0]], attrs={"K": 20}))[1])
    assert np.array_equal(ys[0], ys[1])
    want = [(np.arange(16) - 8).sum() * s0 + (np.arange(16, 20) % 16 - 8).sum() * s1 for s0, s1 in ((1, 2), (0.5, 1))]
    assert ys[0].tolist() == [want]


def test_one_dimensional_scales_are_information():
    codes = np.full((2, 16), 9)
    case, _ = _y(_nbits(np.ones((1, 16)), codes, [1.0, 1.0]))
    assert "(N, k_blocks)" in case.information


# -- 9.5.2 zero points, g_idx, bias -----------------------------------------------------------------
def test_the_default_zero_point_is_2_to_the_bits_minus_1():
    for bits in (2, 4, 8):
        codes = np.full((1, 16), 1 << (bits - 1))
        _, y = _y(_nbits(np.ones((1, 16)), codes, [[1.0]], bits=bits))
        assert y.tolist() == [[0.0]]


def test_packed_zero_points_use_bs_bit_stream_and_ignore_their_padding():
    codes = np.full((1, 48), 3)
    zc = np.array([[1, 2, 3]])  # three 4-bit zero points: 1.5 bytes, the high half of byte 2 padding
    ys = []
    for pad in (0x00, 0xF0):
        zp = pack_stream(zc, 4, 2)
        zp[:, -1] |= pad
        ys.append(_y(_nbits(np.ones((1, 48)), codes, [[1.0, 1.0, 1.0]], zp=zp))[1])
    assert ys[0].tolist() == ys[1].tolist() == [[16 * (2 + 1 + 0)]]


def test_unpacked_zero_points_have_as_type_and_any_value():
    codes = np.full((1, 16), 4)
    _, y = _y(_nbits(np.ones((1, 16)), codes, [[1.0]], zp=np.array([[2.5]], np.float32), t3="float32"))
    assert y.tolist() == [[16 * 1.5]]
    with pytest.raises(InvalidModel):
        evaluate(_nbits(np.ones((1, 16)), codes, [[1.0]], zp=np.array([[2.5]], np.float16), t3="float16"))


def test_g_idx_as_the_block_index_is_a_case_and_any_other_is_information():
    codes = np.full((1, 32), 9)
    ok, _ = _y(_nbits(np.ones((1, 32)), codes, [[1.0, 1.0]], g_idx=(np.arange(32) // 16).astype(np.int32)))
    assert not ok.information
    other, _ = _y(_nbits(np.ones((1, 32)), codes, [[1.0, 1.0]], g_idx=np.zeros(32, np.int32)))
    assert "g_idx" in other.information


def test_the_bias_is_one_more_term():
    codes = np.full((2, 16), 9)
    _, y = _y(_nbits(np.ones((1, 16)), codes, [[1.0], [1.0]], bias=np.array([0.5, -3.0], np.float32)))
    assert y.tolist() == [[16.5, 13.0]]


# -- 9.5 the order of the sum ----------------------------------------------------------------------
def test_a_sum_some_order_rounds_is_refused():
    """Every order must give one value (#qdq-sum-order): 2^24 + 1 − 2^24 depends on the order."""
    codes = np.full((1, 16), 9)
    a = np.zeros((1, 16))
    a[0, :3] = (2.0 ** 24, 1.0, -(2.0 ** 24))
    with pytest.raises(NotExact):
        evaluate(_nbits(a, codes, [[1.0]]))


def test_float16_sums_are_held_to_float16s_precision():
    codes = np.full((1, 16), 9)
    a = np.zeros((1, 16), np.float16)
    a[0, :2] = (2048.0, 1.0)
    with pytest.raises(NotExact):  # 2049 is no float16: a float16 accumulator would round it
        evaluate(_nbits(a, codes, np.array([[1.0]], np.float16), t1="float16"))


# -- 9.5.3 accuracy_level -------------------------------------------------------------------------
def test_accuracy_level_4_takes_only_a_that_int8_blocks_keep():
    codes = np.full((1, 16), 9)
    lossless = np.zeros((1, 16))
    lossless[0, 0], lossless[0, 1] = 127 / 8, -3 / 8
    _, y = _y(_nbits(lossless, codes, [[1.0]], attrs={"accuracy_level": 4}))
    assert y.tolist() == [[lossless.sum()]]
    lossy = lossless.copy()
    lossy[0, 2] = 1 / 16  # not a multiple of amax / 127 = 1/8
    with pytest.raises(NotExact):
        evaluate(_nbits(lossy, codes, [[1.0]], attrs={"accuracy_level": 4}))
    assert _y(_nbits(lossy, codes, [[1.0]], attrs={"accuracy_level": 0}))[1].tolist() == [[lossy.sum()]]


def test_accuracy_levels_1_to_3_take_only_a_the_downcast_keeps():
    codes = np.full((1, 16), 9)
    a = np.zeros((1, 16))
    a[0, 0] = 1 + 2.0 ** -10  # a float16, no bfloat16
    evaluate(_nbits(a, codes, [[1.0]], attrs={"accuracy_level": 2}))
    with pytest.raises(NotExact):
        evaluate(_nbits(a, codes, [[1.0]], attrs={"accuracy_level": 3}))


# -- 9.6 GatherBlockQuantized ----------------------------------------------------------------------
def _gbq(data, t1, idx, scales, zp=None, attrs=None, t2="float32"):
    values = {"data": data, "indices": np.asarray(idx, np.int64), "scales": np.asarray(scales, np.float32),
              "zero_points": zp}
    return draft(_spec(decl.GATHER_BLOCK_QUANTIZED), {"T1": t1, "T2": t2, "Tind": "int64"}, "test", "t", values,
                 attrs or {})


def test_default_zero_points_are_0_for_int4_and_2_to_the_bits_minus_1_for_uint8():
    int4 = dtypes.get("int4").from_bits(np.full((2, 16), 3, np.int64))
    y = evaluate(_gbq(int4, "int4", [1], np.ones((2, 1)), attrs={"block_size": 16})).readings[0].outputs[0]
    assert np.all(y == 3)
    u8 = np.full((2, 16), 130, np.uint8)
    y = evaluate(_gbq(u8, "uint8", [0], np.ones((2, 1)), attrs={"block_size": 16, "bits": 8})).readings[0].outputs[0]
    assert np.all(y == 2)


def test_uint8_codes_below_8_bits_unpack_low_bits_first_along_the_last_axis():
    codes = np.tile(np.arange(16) % 4, (2, 1))
    data = pack_stream(codes, 2, 4)
    y = evaluate(_gbq(data, "uint8", [1], np.ones((2, 1)), attrs={"block_size": 16, "bits": 2, "quantize_axis": 1}))
    assert np.asarray(y.readings[0].outputs[0]).tolist() == [(codes[1] - 2).tolist()]


def test_an_out_of_range_index_gives_zeros_of_either_sign():
    int4 = dtypes.get("int4").from_bits(np.full((2, 16), 3, np.int64))
    case = evaluate(_gbq(int4, "int4", [0, 2, -3], np.ones((2, 1)), attrs={"block_size": 16}))
    names = [r.name for r in case.readings]
    assert names[:2] == ["multiply-in-output-type", "negative-zero-fill"]
    plus, minus = (np.asarray(r.outputs[0]) for r in case.readings[:2])
    assert np.all(plus[1:] == 0) and not np.signbit(plus[1:]).any() and np.signbit(minus[1:]).all()
    assert np.all(plus[0] == 3)


def test_fp8_data_takes_no_zero_point_and_block_size_0_is_the_whole_axis():
    e4 = dtypes.get("float8e4m3fn")
    data = e4.from_bits(np.full((2, 40), 0x38, np.int64))  # 1.0
    y = evaluate(_gbq(data, "float8e4m3fn", [1], [[2.0]], attrs={"block_size": 0}))
    assert np.all(np.asarray(y.readings[0].outputs[0]) == 2.0)
    with pytest.raises(InvalidModel):
        evaluate(_gbq(data, "float8e4m3fn", [1], [[2.0]], zp=data[:, :1], attrs={"block_size": 0}))


# -- 9.7 scale products ----------------------------------------------------------------------------
def _mmitf(a, b, a_s, b_s, bias=None, t3="float32", **zps):
    values = {"A": np.asarray(a, np.uint8), "B": np.asarray(b, np.uint8), "a_scale": np.asarray(a_s, t3),
              "b_scale": np.asarray(b_s, t3), "bias": None if bias is None else np.asarray(bias, t3), **zps}
    return draft(_spec(decl.MATMUL_INTEGER_TO_FLOAT), {"T1": "uint8", "T2": "uint8", "T3": t3}, "test", "t", values)


def test_each_association_of_the_scales_is_a_reading_and_the_product_first_leads():
    case = evaluate(_mmitf([[3]], [[7]], [0.1], [0.3]))
    names = [r.name for r in case.readings]
    assert names[0] == "scales-multiplied-first"
    f32 = np.float32
    assert case.readings[0].outputs[0].tolist() == [[f32(21) * (f32(0.1) * f32(0.3))]]
    assert set(names) <= set(decl.MATMUL_INTEGER_TO_FLOAT.readings)


def test_a_fused_bias_is_a_reading_of_its_own():
    case = evaluate(_mmitf([[1]], [[7]], [0.1], [0.3], bias=[0.7]))
    assert any(r.name.endswith("-fused-bias") for r in case.readings)


def test_a_per_column_a_scale_is_not_a_scale_of_the_sum():
    with pytest.raises(InvalidModel):
        evaluate(_mmitf([[3, 1]], [[7], [1]], [0.1, 0.2], [0.3]))


def test_dynamic_quantize_matmul_quantizes_a_with_the_dynamic_quantizer():
    """A whose codes are exact: Y is the exact product whatever the association (one reading)."""
    a = (np.array([[0, 255, 100]]) - 55) * 0.25
    values = {"A": a.astype(np.float32), "B": np.array([[1], [2], [3]], np.uint8), "b_scale": np.float32(0.5)}
    d = draft(_spec(decl.DYNAMIC_QUANTIZE_MATMUL), {"T1": "float32", "T2": "uint8"}, "test", "t", values)
    case = evaluate(d)
    assert [r.name for r in case.readings] == ["spec"]
    assert case.readings[0].outputs[0].tolist() == [[float((a * [1, 2, 3]).sum() * 0.5)]]


# -- the families' reach --------------------------------------------------------------------------
def test_the_families_reach_what_issue_65_asks():
    by_op = collections.Counter()
    nbits = collections.defaultdict(set)
    for mod in (matmul_nbits, gather_block_quantized, scale_products):
        for d in mod.generate():
            by_op[d.op] += 1
            if d.op == decl.MATMUL_NBITS.op:
                for key in ("bits", "block_size"):
                    nbits[key].add(d.attrs[key])
                nbits["tail"].add(d.attrs["K"] % d.attrs["block_size"] != 0)
                nbits["below"].add(d.attrs["K"] < d.attrs["block_size"])
    assert by_op[decl.MATMUL_NBITS.op] >= 600 and by_op[decl.GATHER_BLOCK_QUANTIZED.op] >= 200
    assert by_op[decl.MATMUL_INTEGER_TO_FLOAT.op] >= 100 and by_op[decl.DYNAMIC_QUANTIZE_MATMUL.op] >= 100
    assert nbits["bits"] == set(range(2, 9)) and max(nbits["block_size"]) == 2048
    assert nbits["tail"] == {True, False} and True in nbits["below"]


def test_a_sum_of_negative_zeros_only_is_refused():
    """Its sign depends on where the accumulator starts (−0 from the first term, +0 from +0)."""
    codes = np.full((1, 16), 7)  # w = −1 everywhere: 0 · (−1) = −0
    with pytest.raises(NotExact):
        evaluate(_nbits(np.zeros((1, 16)), codes, [[1.0]]))
    a = np.zeros((1, 16))
    a[0, 0] = 1.0
    a[0, 1] = -1.0
    assert not np.signbit(_y(_nbits(a, codes, [[1.0]]))[1]).any()


# -- diagnosis models ---------------------------------------------------------------------------
_MODELS = ("nbits-row-stride-from-k", "nbits-zero-points-packed-across-rows", "nbits-large-block-zeros",
           "gbq-unsigned-default-zero-point-midpoint", "gbq-uint8-default-zero-point-zero", "dqmm-a-not-quantized")


@pytest.fixture(scope="module")
def blocked_groups():
    """These ops' cases drafted and evaluated here, so that the models are judged before the bundled
    corpus holds them (tests/test_diagnosis.py judges them on the corpus once it does)."""
    from test_diagnosis import group_cases

    cases = [evaluate(d) for mod in (matmul_nbits, gather_block_quantized, scale_products) for d in mod.generate()
             if d.op != decl.MATMUL_INTEGER_TO_FLOAT.op]
    return group_cases([c for c in cases if not c.information])


@pytest.mark.parametrize("name", _MODELS)
def test_a_runner_with_the_deviation_fails_and_is_named_first(name, blocked_groups):
    from test_diagnosis import scan

    from qconform.diagnosis import diagnose as dg
    from qconform.diagnosis.models import MODELS

    found, _ = scan(MODELS[name], blocked_groups)
    assert found, f"{name} passes every case: {MODELS[name].witness}"
    for g in found:
        assert any(c.model == name and c.rank == 1 and c.explains_all for c in g.candidates), g.label
    top = dg.overall(found)
    assert top[0].model == name and not [o for o in top[1:] if o.key() == top[0].key()]

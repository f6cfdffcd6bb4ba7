#!/usr/bin/env python3
"""An independent oracle for the single-node QuantizeLinear, DequantizeLinear, QLinearMatMul,
QLinearConv, ConvInteger and MatMulInteger cases of the golden corpus.

Why it exists: the corpus's expected outputs come from qconform.oracle, which shares codecs
(ml_dtypes) and arithmetic (numpy) with the runtimes it judges. This script recomputes every
reading of every single-node case of those ops from the case's inputs alone, with its own exact
arithmetic (fractions.Fraction, exact integer sums) and its own encoders and decoders of every
format, written from the format definitions (IEEE 754 binary32/16, bfloat16, the ONNX
float8/float4/float6 notes and Cast tables) and the operator texts, and compares bit for bit. It
reads cases through qconform.corpus and nothing else of qconform: no oracle, no dtypes conversion
helper, no ml_dtypes cast (arrays are read through numpy views of their raw bytes).

A reading is computed from its NAME, as qconform/docs/semantics.md defines it. Comparison rule
for NaN (semantics.md, "principles"): any NaN matches any NaN (any sign, any payload); every
other element must be equal in its raw bits, masked to the type's width. The modules are in
scripts/independent/ (values, check, qdq, linalg, compute, report; contrib_blocked: MatMulNBits,
GatherBlockQuantized, MatMulIntegerToFloat, DynamicQuantizeMatMul).

Usage: python scripts/independent_oracle.py [--case GLOB] [-j 2] [--md research/independent-oracle.md]
"""
from __future__ import annotations

import argparse
import fnmatch
import sys
from collections import defaultdict
from multiprocessing import Pool
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from qconform import corpus  # noqa: E402  (only to read the cases)

from independent import compute, contrib_blocked, contrib_qlinear, qdq  # noqa: E402
from independent.check import check_case, empty_result  # noqa: E402
from independent.report import report  # noqa: E402

MODELS = {"QuantizeLinear": qdq.model, "DequantizeLinear": qdq.model, **compute.MODELS, **contrib_qlinear.MODELS,
          **contrib_blocked.MODELS}

_IDX = None
_ROOT = corpus.DEFAULT_ROOT


def _work(ids: list[str]) -> list[dict]:
    global _IDX
    if _IDX is None:
        _IDX = corpus.index(_ROOT)
    out = []
    for cid in ids:
        case = _IDX.case(cid)
        if case.information:
            out.append(empty_result(cid, ((cid, "*", "information case"),)))
            continue
        try:
            out.append(check_case(case, MODELS[case.op]))
        except Exception as exc:  # a crash is reported, never counted as agreement
            out.append(empty_result(cid, ((cid, "*", f"crash: {type(exc).__name__}: {exc}"),)))
    return out


def in_scope(ref) -> tuple[bool, str]:
    if ref.domain == "qdq":
        return False, "graph case (qdq.*)"
    if ref.op not in MODELS:
        return False, f"{ref.op} (out of scope)"
    return True, ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="*", help="glob over case ids")
    ap.add_argument("-j", type=int, default=1, help="worker processes (2 at most on a shared machine)")
    ap.add_argument("--md", help="also write the whole output to this markdown file")
    ap.add_argument("--examples", type=int, default=5, help="disagreements shown per (op version, reading)")
    ap.add_argument("--golden", type=Path, default=corpus.DEFAULT_ROOT, help="the corpus (default: the bundled one)")
    args = ap.parse_args(argv)

    global _ROOT
    _ROOT = args.golden
    idx = corpus.index(_ROOT)
    lines: list[str] = []

    def say(text=""):
        print(text)
        lines.append(text)

    # information cases are known only from the case itself; the index says nothing of them
    out_scope: dict[str, int] = defaultdict(int)
    ids = []
    for ref in idx.refs:
        if not fnmatch.fnmatchcase(ref.id, args.case):
            continue
        ok, why = in_scope(ref)
        if ok:
            ids.append(ref.id)
        else:
            out_scope[why] += 1
    chunks = [ids[i:i + 40] for i in range(0, len(ids), 40)]
    results = []
    if args.j > 1:
        with Pool(args.j) as pool:
            for part in pool.imap(_work, chunks):
                results.extend(part)
    else:
        for c in chunks:
            results.extend(_work(c))
    return report(idx, results, out_scope, args, say, lines)



if __name__ == "__main__":
    sys.exit(main())

"""onnx.reference, declared once (its runner ``runners.onnx_reference``), with its reproducer template."""
from __future__ import annotations

from qconform.declarations.runtime import ATTRIBUTE, Runtime, ml_dtype, with_template

ONNX_REFERENCE = with_template(
    Runtime("onnx-reference", "qconform.runners.onnx_reference:OnnxReferenceRunner", dist="onnx", module="onnx",
            version=ATTRIBUTE),
    "import onnx\nfrom onnx.reference import ReferenceEvaluator", "onnx.__version__",
    """\
sess = ReferenceEvaluator("model.onnx")
actual = dict(zip(sess.output_names, sess.run(None, inputs)))
""",
    codes=ml_dtype, codes_imports="import ml_dtypes  # a dependency of onnx",
    run_codes="""\
sess = ReferenceEvaluator("model.onnx")
outs = sess.run(None, {k: v.view(CODES[k]) if k in CODES else v for k, v in inputs.items()})
actual = {k: np.asarray(a).view(f"u{a.dtype.itemsize}") if a.dtype == CODES.get(k) else a
          for k, a in zip(sess.output_names, outs)}
""")

__all__ = ["ONNX_REFERENCE"]

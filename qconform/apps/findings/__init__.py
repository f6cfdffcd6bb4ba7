"""``qconform findings``: upstream-ready reproducers, one directory per deviation group of a runtime.

A *deviation group* of a runtime is

* for a runtime with a facts file (``qconform/facts/onnxruntime.toml``, ``onnx-reference.toml``):
  each fact of kind ``erratum`` or ``must-reject`` that holds for the installed version on this
  platform; its ``example`` is the case reproduced;
* for any other runtime: its failing cases (``fail``, ``error``, ``crashed``, ``timeout``) grouped
  by op (domain and op type, every version of it) and mechanism: the first deviation model that
  explains the case (``qconform/diagnosis``), ``unexplained`` when none does, or for a run that
  raised the normalised error message. The failures come from a report
  (``--from-report DIR/report.json``, written by ``pytest --runner=NAME --report=DIR``) or, without
  one, from running the corpus (``--cases GLOB`` limits it). The smallest failing case of a group
  (fewest input and output elements) is its example; the group's op versions are listed.

Each group becomes ``OUT/<runtime>/<key>/``::

    model.onnx     the case's single-node model (qconform.model.build_model)
    inputs.npz     the graph inputs by name
    expected.npz   the outputs the spec gives (the case's first reading), by name
    actual.npz     what the runtime returned (absent when the run raised)
    skip.npz       elements not compared (don't-care, or NaN in both), only when there are any
    repro.py       a standalone script using only the runtime and numpy: runs model.onnx on
                   inputs.npz, prints expected vs actual, exits 1 ("MISMATCH: ...") when they differ
    README.md      what the runtime does, the spec sentence, the case, the version seen on, how to run
    finding.json   the same facts as data (read by the index and tests/test_findings.py)

Arrays of element types numpy lacks (bfloat16, the float8 kinds, float8e8m0, float4e2m1, int4,
uint4, int2, uint2) are stored as their element codes, one per array element: uint16 for bfloat16,
uint8 for the rest (sub-byte codes in the low bits, not packed). A maintainer loads them with numpy
alone; the script hands them to the runtime as the runtime's own API wants them (raw bytes in the
ONNX layout for onnxruntime and OpenVINO, ``codes.view(ml_dtypes.<type>)`` for onnx.reference, whose
dependency ml_dtypes already is, a bitcast for tinygrad). Every script is checked when written:
it is run in a subprocess ``VERIFY_RUNS`` times and must print the same mismatch each time, else the
group's next smallest case is tried (a runtime whose outputs differ from run to run gets no
reproducer: its fact says so instead).

``TEMPLATES`` holds one entry per runtime (how its script loads and runs a model), read from the
runtime's declaration (``qconform.declarations.runtimes``: the template copies the settings its runner applies);
a new runtime is one more declaration. A runner with no entry (a vendor's own) gets ``generic_template``: its report
says how it was loaded (``runner.load``: the ``--runner`` spec, a file by its absolute path, and
the ``--runner-opt`` words), and the script loads it the same way and calls it through the runner
contract, never another runtime in its place. ``OUT/index.md`` lists every finding with its status: ``OUT/status.toml``
(hand-edited: ``"runtime/key" = "new" | "reported <url>" | "fixed in <version>"``) wins, then a
fact with a closed version range (``<X``) says ``fixed in X``, else ``new``.

Deterministic: the same corpus, facts, report and runtime versions give the same bytes (no clock,
npz members with a fixed timestamp). A directory already written is merged when its case and
actual output are unchanged (``seen_on`` gains the installed version), so findings measured with
another version of a runtime (onnxruntime 1.31.1 beside 1.32.0) live side by side; ``--clean``
removes a runtime's directories first.

One module per step, in the order a run takes them: ``templates`` (each runtime's script template),
``groups`` (what makes a deviation group), ``observe`` (a case through the engine, the arrays a
finding keeps), ``script`` (the reproducer: rendered, run, its verdict line read), ``spec`` (the
sentences quoted), ``write`` (one finding's directory), ``generate`` (one runtime), ``index``
(index.md, status.toml) and ``cli``.
"""
from __future__ import annotations

from qconform.apps.findings._common import INDEX, MARK, META, STATUS, default_out
from qconform.apps.findings.cli import add_arguments, main
from qconform.apps.findings.generate import generate
from qconform.apps.findings.groups import Group, fact_groups, observed_groups
from qconform.apps.findings.index import auto_status, render_index, write_index
from qconform.apps.findings.observe import closest_reading, observe, skip_mask
from qconform.apps.findings.script import mark_line, render_script, run_script, signature
from qconform.apps.findings.templates import TEMPLATES, generic_template, runtimes
from qconform.declarations.runtimes import Template

__all__ = ["INDEX", "MARK", "META", "STATUS", "TEMPLATES", "Group", "Template", "add_arguments", "auto_status",
           "closest_reading", "default_out", "fact_groups", "generate", "generic_template", "main", "mark_line",
           "observe", "observed_groups", "render_index", "render_script", "run_script", "runtimes", "signature",
           "skip_mask", "write_index"]

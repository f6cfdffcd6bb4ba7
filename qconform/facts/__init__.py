"""What qconform knows about other software: versioned, platform-keyed facts, stored as data.

One TOML file per *source* (``onnxruntime.toml``, ``onnx-reference.toml``, ``onnx-node-tests.toml``,
``ml_dtypes.toml``) beside this module. Each fact (an *errata row*) says what the source does where
it differs from qconform/docs/semantics.md, for which versions of the source (a PEP 440 specifier set over the
source's own version) and on which platforms (a condition over CPU features, see
``qconform.platform``). ``measured`` lists the versions and platforms on which the file was
checked complete: the project's tests assert facts only there, in both directions (every
disagreement is in a fact, every fact still shows), and skip naming ``qconform facts drift``
elsewhere. The drift command (``qconform.apps.facts_drift``) proposes the rows to add, close or
re-bound when a source releases; ``qconform/docs/facts.md`` is rendered from these files.

Kinds (what a fact's example must show):

* ``erratum``     the source contradicts the text: the example fails (or errors) in the default profile.
* ``reading``     the source follows a permitted non-first reading (qconform/docs/semantics.md#readings-index):
                  the example passes the default profile with that reading and fails ``--profile=strict``.
* ``oracle-gap``  the source does what qconform/docs/semantics.md permits but the corpus does not say so yet:
                  the example fails the default profile until qconform is fixed.
* ``unsupported`` the runner reports Unsupported, with a reason matching ``message`` (how it refuses).
* ``must-reject`` the source runs a model the spec makes invalid (information; the example is a probe).

An erratum marked ``intermittent = true`` is one whose outcome varies from run to run on the same
version and platform (a read past the end of an input that traps or not by what the process held
before): it accounts for a disagreement when one occurs, and its example may pass or fail.
An erratum marked ``hangs = true`` is one whose example the source never finishes (a compiler in an
endless loop): the example is observed with ``observe.HANG_TIMEOUT_S``, not a case's whole timeout,
and must time out there.

Examples: a corpus case id; ``probe:NAME`` for a draft in ``qconform.facts.probes``; a node test
name (source ``onnx-node-tests``); a test function in tests/test_floats.py (source ``ml_dtypes``).
"""
from __future__ import annotations

from qconform.facts.model import (DRIFT_COMMAND, FAILING_KINDS, KINDS, PROBE, RUNNER_SOURCES, SOURCES, Fact, FactFile,
                                  Measured, Packing, Source, in_range, release)
from qconform.facts.store import (FactsError, all_facts, asserted, checkable, dump, load, load_all, next_id, parse,
                                  path_of, with_facts, write)

__all__ = ["DRIFT_COMMAND", "FAILING_KINDS", "Fact", "FactFile", "FactsError", "KINDS", "Measured", "PROBE", "Packing",
           "RUNNER_SOURCES", "SOURCES", "Source", "all_facts", "asserted", "checkable", "dump", "in_range", "load",
           "load_all", "next_id", "parse", "path_of", "release", "with_facts", "write"]

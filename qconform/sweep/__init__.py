"""Exhaustive sweeps: every input of a domain through a runner, checked against digest goldens.

One concern per module, in the order data flows:

* ``table``    which configurations are swept (``Sweep``, ``all_sweeps``, ``select``);
* ``domains``  the inputs of each chunk, the canonical form of outputs and digests (``oracle_digest``);
* ``goldens``  the digest files under ``qconform/golden/sweeps/``;
* ``units``    a work unit (sweep, domain, chunk) and what one does (``UnitWorker``): run a runner and
               compare digests, recomputing a differing chunk with the oracle to name its exact inputs;
* ``execute``  executors (``LocalPool``; the ``Executor`` protocol lets another slot in), the resumable
               state file, progress, golden regeneration and the summary (``check``, ``regenerate``);
* ``cli``      ``qconform sweep``.
"""
from qconform.sweep.domains import (Canonicaliser, Domain, canonical_nan, digest, domain, dont_care, input_bits,
                                    inputs, oracle_case, oracle_digest)
from qconform.sweep.execute import Executor, LocalPool, Progress, Summary, check, execute, read_state, regenerate
from qconform.sweep.goldens import golden_digests, golden_dir, golden_path, load_golden, save_golden
from qconform.sweep.table import DQ_TYPES, FLOAT_TARGETS, FORMAT, SWEEP_OPSET, Sweep, all_sweeps, select
from qconform.sweep.units import Unit, UnitResult, UnitWorker, describe_mismatches, parse_chunks, sweep_model, units

__all__ = ["Canonicaliser", "DQ_TYPES", "Domain", "Executor", "FLOAT_TARGETS", "FORMAT", "LocalPool", "Progress",
           "SWEEP_OPSET", "Summary", "Sweep", "Unit", "UnitResult", "UnitWorker", "all_sweeps", "canonical_nan", "check",
           "describe_mismatches", "digest", "domain", "dont_care", "execute", "golden_digests", "golden_dir",
           "golden_path", "input_bits", "inputs", "load_golden", "oracle_case", "oracle_digest", "parse_chunks",
           "read_state", "regenerate", "save_golden", "select", "sweep_model", "units"]

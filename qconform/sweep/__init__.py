"""Exhaustive sweeps: every input of a domain through a runner, checked against digest goldens.

One concern per module, in the order data flows:

* ``table``    which configurations are swept (``Sweep``, ``all_sweeps``, ``select``);
* ``domains``  the inputs of each chunk, the canonical form of outputs and digests (``oracle_digest``);
* ``goldens``  the digest files under ``qconform/golden/sweeps/``;
* ``units``    a work unit (sweep, domain, chunk) and what one does (``UnitWorker``): run a runner through
               the engine and compare digests, judging a differing chunk by the engine's one path to name
               its exact inputs; ``SweepJob``: units as the work of the engine's pools (``qconform.pool``);
* ``execute``  the pools units run on (``LocalPool``, or ``dask_executor.DaskExecutor``), with the engine's
               state file and progress line, golden regeneration and the summary (``check``, ``regenerate``);
* ``cli``      ``qconform sweep``.
"""
from qconform.sweep.domains import (Canonicaliser, Domain, canonical_nan, digest, domain, dont_care, input_bits,
                                    inputs, oracle_case, oracle_digest)
from qconform.sweep.execute import Executor, LocalPool, Summary, check, execute, regenerate
from qconform.sweep.goldens import golden_digests, golden_dir, golden_path, load_golden, save_golden
from qconform.sweep.table import DQ_TYPES, FLOAT_TARGETS, FORMAT, SWEEP_OPSET, Sweep, all_sweeps, select
from qconform.sweep.units import (SweepJob, Unit, UnitResult, UnitWorker, describe_mismatches, parse_chunks,
                                  sweep_model, units)

__all__ = ["Canonicaliser", "DQ_TYPES", "Domain", "Executor", "FLOAT_TARGETS", "FORMAT", "LocalPool",
           "SWEEP_OPSET", "Summary", "Sweep", "SweepJob", "Unit", "UnitResult", "UnitWorker", "all_sweeps", "canonical_nan", "check",
           "describe_mismatches", "digest", "domain", "dont_care", "execute", "golden_digests", "golden_dir",
           "golden_path", "input_bits", "inputs", "load_golden", "oracle_case", "oracle_digest", "parse_chunks",
           "regenerate", "save_golden", "select", "sweep_model", "units"]

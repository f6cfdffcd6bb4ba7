"""The Dask executor against the local process pool on the same sampled-domain sweep workload:
local pool with 2 processes vs a LocalCluster with 2 workers (Dask's overhead), and 1 vs 2 Dask
workers (scaling). Cluster start-up is timed apart from the run. Prints figures, asserts nothing.
Targets: Dask overhead <= 10 % against the local pool; 1 -> 2 workers >= 1.8x on 2 cores.

    python benchmarks/bench_dask.py [--runner cpu-ref] [--pattern float32-]
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402


def _timed(work, runner, executor=None, jobs=1) -> tuple[float, float]:
    """(wall seconds, steady seconds): the steady figure runs from the first result to the last,
    scaled to all units, so start-up (spawning, imports, resolving the runner) counts for neither."""
    from qconform.sweep.execute import execute

    t0 = time.perf_counter()
    stamps, bad = [], []
    for r in execute(work, runner, {}, jobs=jobs, progress=False, executor=executor):
        stamps.append(time.perf_counter())
        if r.status not in ("ok", "reading"):
            bad.append(r)
    if bad:
        raise SystemExit(f"{len(bad)} unit(s) did not pass: {bad[0]}")
    steady = (stamps[-1] - stamps[0]) * len(stamps) / max(len(stamps) - 1, 1)
    return stamps[-1] - t0, steady


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runner", default="cpu-ref", help="runner (default cpu-ref: ~0.3 s per unit here)")
    ap.add_argument("--pattern", default="float32-", help="sweeps whose id contains this (default float32-)")
    a = ap.parse_args()
    logging.getLogger("distributed").setLevel(logging.WARNING)
    import distributed

    from qconform import sweep as S
    from qconform.sweep.dask_executor import DaskExecutor, local_cluster
    from qconform.sweep.units import units

    work = units(S.select([a.pattern]), ("sampled",))
    print(f"machine: {_common.machine()}")
    print(f"workload: {len(work)} sampled-domain units ({a.pattern!r}), runner {a.runner}")
    _timed(work[:2], a.runner, jobs=1)  # warm caches (a compiled kernel, the page cache)
    pool, pool_steady = _timed(work, a.runner, jobs=2)
    print(f"local pool, 2 processes:     {pool:7.2f} s wall, {pool_steady:7.2f} s steady")
    walls, steady = {}, {}
    for workers in (1, 2):
        t0 = time.perf_counter()
        with local_cluster(workers) as cluster, distributed.Client(cluster) as client:
            start = time.perf_counter() - t0
            walls[workers], steady[workers] = _timed(work, a.runner, executor=DaskExecutor(client=client))
        print(f"Dask LocalCluster, {workers} worker{'s' if workers > 1 else ' '}: {walls[workers]:7.2f} s wall, "
              f"{steady[workers]:7.2f} s steady (+ {start:.2f} s cluster start-up)")
    print(f"Dask overhead vs local pool (2 vs 2): wall {100 * (walls[2] / pool - 1):+.1f} %, steady "
          f"{100 * (steady[2] / pool_steady - 1):+.1f} %  (target <= +10 %)")
    print(f"Dask 1 -> 2 workers: wall {walls[1] / walls[2]:.2f}x, steady {steady[1] / steady[2]:.2f}x  "
          f"(target >= 1.8x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

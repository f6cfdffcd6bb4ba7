"""Sweep units on a Dask cluster: the same units, digests, state file and summary as the local pool.

Users who own a cluster already run Dask (``dask[distributed]``, the ``dask`` extra). The units go
through the engine's own cluster pool (``qconform.cluster.DaskPool``), one unit per task: each Dask
worker holds one local pool of the ``SweepJob`` (the runner resolved once, beside the Dask worker in
its own process), a Dask worker that dies has its unit rescheduled once
(``cluster.ALLOWED_FAILURES``), and a unit that takes down a worker every time comes back as an
``error`` of that unit -- never dropped. ``execute`` (execute.py) keeps the state file and the
progress line, so resuming after a stopped client works as for the local pool.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from qconform.cluster import DaskPool, DaskUnavailable, distributed_module, local_cluster, parse_cluster
from qconform.pool import Job


def _distributed():
    return distributed_module()


@dataclass
class DaskExecutor:
    """Units as Dask tasks, on an existing scheduler (``scheduler``) or a LocalCluster of
    ``local_workers`` single-threaded worker processes started for the run."""

    scheduler: str | None = None
    local_workers: int | None = None
    client: Any = field(default=None, repr=False)  # an existing Client (tests, notebooks)

    def start(self, job: Job) -> DaskPool:
        return DaskPool(job, scheduler=self.scheduler, local_workers=self.local_workers, client=self.client,
                        timeout=None, shard=1)


__all__ = ["DaskExecutor", "DaskUnavailable", "local_cluster", "parse_cluster"]

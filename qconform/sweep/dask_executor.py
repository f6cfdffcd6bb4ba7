"""Sweep units on a Dask cluster: the same units, digests, state file and summary as the local pool.

Users who own a cluster already run Dask (``dask[distributed]``, the ``dask`` extra); qconform
submits one task per unit and reads results back as they finish. ``execute`` (execute.py) keeps
the state file and the progress line, so resuming after a stopped client works as for the local
pool: finished units are read back, the rest is submitted again.

Faults: a worker that dies mid-unit has its unit rescheduled on another worker by the scheduler;
a unit involved in ``ALLOWED_FAILURES + 1`` worker deaths, or whose task raises twice, comes back
as an ``error`` result for that unit -- never dropped. (On an existing cluster the scheduler's own
``distributed.scheduler.allowed-failures`` applies; a LocalCluster started here gets ours.)

The runner is resolved once per Dask worker (a worker plugin holds the ``UnitWorker``), not per
unit; a worker that restarts resolves it again.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from qconform.cluster import DaskUnavailable, distributed_module, local_cluster, local_config, parse_cluster
from qconform.cluster import quietly_close as _quietly_close
from qconform.sweep.units import UnitResult, UnitWorker, unit_key
from qconform.verdicts import SweepStatus

#: Worker deaths a unit may be involved in before it is an error (1: the first death reschedules
#: it, a second one fails it -- "a unit that fails twice").
ALLOWED_FAILURES = 1
#: Resubmissions of a unit whose task raised (not a death: UnitWorker reports runner errors itself).
RETRIES = 1
PLUGIN_NAME = "qconform-sweep-runner"


def _distributed():
    return distributed_module()


try:  # the plugin base class, when the extra is installed (the module imports without it)
    from distributed import WorkerPlugin as _PluginBase
except ImportError:  # pragma: no cover - without dask the executor refuses to start (DaskUnavailable)
    _PluginBase = object


class _RunnerPlugin(_PluginBase):
    """A worker plugin: one ``UnitWorker`` (runner resolved, models prepared) per Dask worker."""

    name = PLUGIN_NAME

    def __init__(self, runner_name: str | None, options: dict[str, str], golden_root: str | None) -> None:
        self.args = (runner_name, dict(options), golden_root)
        self.unit_worker: UnitWorker | None = None

    def setup(self, worker) -> None:
        self.unit_worker = UnitWorker(*self.args)

    def teardown(self, worker) -> None:
        self.unit_worker = None


def _run_unit(unit) -> UnitResult:
    from distributed import get_worker

    plugin = get_worker().plugins[PLUGIN_NAME]
    if plugin.unit_worker is None:
        plugin.setup(None)
    return plugin.unit_worker.run(unit)


@dataclass
class DaskExecutor:
    """Units as Dask tasks, on an existing scheduler (``scheduler``) or a LocalCluster of
    ``local_workers`` single-threaded worker processes started for the run."""

    scheduler: str | None = None
    local_workers: int | None = None
    client: Any = field(default=None, repr=False)  # an existing Client (tests, notebooks)

    def map(self, work, runner_name, options, golden_root) -> Iterator[UnitResult]:
        distributed = _distributed()
        import dask

        if not work:
            return
        # worker-saturation 1.0: a worker holds only the unit it runs, so a death is charged to that
        # unit alone and not to units merely queued there (Dask counts every unit "involved").
        local = self.client is None and not self.scheduler  # restarted workers keep our settings too
        with dask.config.set({**(local_config() if local else {}),
                              "distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
                              "distributed.scheduler.worker-saturation": 1.0}):
            cluster = client = None
            try:
                if self.client is not None:
                    client = self.client
                elif self.scheduler:
                    client = distributed.Client(self.scheduler)
                else:
                    cluster = local_cluster(self.local_workers or 1)
                    client = distributed.Client(cluster)
                client.register_plugin(_RunnerPlugin(runner_name, options, golden_root), name=PLUGIN_NAME)
                futures = {client.submit(_run_unit, u, key=f"qconform-unit-{unit_key(u[0].id, u[1], u[2])}",
                                         retries=RETRIES, pure=False): u for u in work}
                for fut in distributed.as_completed(futures):
                    u = futures[fut]
                    try:
                        yield fut.result()
                    except Exception as exc:  # noqa: BLE001 - KilledWorker, a task that raised twice: this unit's error
                        yield UnitResult(u[0].id, u[1], u[2], SweepStatus.ERROR,
                                         detail=f"failed twice on the Dask cluster: {type(exc).__name__}: {exc}")
                    finally:
                        fut.release()
            finally:
                _quietly_close(client if client is not self.client else None, cluster)


__all__ = ["DaskExecutor", "DaskUnavailable", "parse_cluster"]

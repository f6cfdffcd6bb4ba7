"""Work on a Dask cluster, on this machine (``--cluster local:N``) or anywhere (``--scheduler
tcp://HOST:8786``): any job of ``qconform.pool`` -- corpus cases (``DaskEngine``, an executor of
``qconform.execution``) and sweep units alike (``DaskPool``).

Why a cluster: a compile-heavy runtime (IREE compiles each of the corpus's models) takes most of an
hour on two cores; a vendor certifying every release, or the scoreboard of eight runtimes, outgrows
one machine; an exhaustive sweep of 2^32 inputs per configuration wants many. The front-ends do not
change: ``qconform certify --cluster local:2`` writes the report a local run writes (the same
verdicts and records; only the invocation says how it ran).

How it runs
-----------
Items go out in **shards**, runs of one group (``pool.runs``: a corpus group, a sweep), like the
local workers' runs: a Dask worker loads a group once and keeps its runner and prepared models warm.
On each Dask worker a plugin holds one ``pool.IsolatedPool`` (one runner worker process beside the
Dask worker): an item that crashes or hangs the runner is that item's ``crashed`` or ``timeout``
exactly as locally, and the Dask worker lives on. Dask workers are therefore started non-daemonic
here (a daemonic process may not have children); on an existing cluster whose workers are daemonic
the job runs in the Dask worker's own process (``isolate`` off) and the scheduler's rescheduling is
the only guard.

Faults beyond the runner: a Dask worker that dies (killed, out of memory, its machine gone) has its
shard rescheduled on another worker by the scheduler (``ALLOWED_FAILURES``). A shard that dies twice
is split into single items, each again allowed one death; an item that kills every worker it lands
on twice is that item's ``crashed``, naming the cluster. No result is lost and none is doubled.
"""
from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from typing import Any

from qconform.execution import CorpusJob, Options
from qconform.pool import RUN, Job, local_pool, runs
from qconform.verdicts import CRASHED

#: Worker deaths a shard (or a single case) may be involved in before it fails (1: the first death
#: reschedules it, a second one fails it).
ALLOWED_FAILURES = 1
PLUGIN_NAME = "qconform-corpus-engine"
#: Cases per shard: the local workers' run (a group's cases, at most this many), so shards are cut
#: where local runs are and the diagnosis budget (per run) picks the same failures on either executor.
SHARD = RUN
#: Settings for a LocalCluster qconform starts: no statistical profiler (10 ms sampling costs the
#: runner time), and non-daemonic workers so each can keep an isolated runner worker beside it.
LOCAL_CLUSTER_CONFIG = {"distributed.worker.profile.enabled": False, "distributed.worker.daemon": False}
#: Dask sets ``MALLOC_TRIM_THRESHOLD_`` on its workers; any malloc threshold turns off glibc's
#: dynamic mmap threshold and halves numpy's speed there (benchmarks/bench_dask.py).
DROPPED_ENVIRON = ("MALLOC_TRIM_THRESHOLD_",)


class DaskUnavailable(RuntimeError):
    """``dask[distributed]`` is not installed: one line naming the extra."""


def distributed_module():
    try:
        import distributed
    except ImportError:
        raise DaskUnavailable("a Dask cluster needs dask[distributed]: pip install 'qconform[dask]'") from None
    return distributed


def parse_cluster(spec: str) -> int:
    """``local`` or ``local:N`` -> the number of workers (default: this machine's cores)."""
    kind, _, n = spec.partition(":")
    if kind != "local":
        raise ValueError(f"--cluster {spec!r}: expected local or local:N (an existing cluster: --scheduler ADDRESS)")
    try:
        workers = int(n) if n else (os.cpu_count() or 1)
    except ValueError:
        raise ValueError(f"--cluster {spec!r}: N must be a number of workers") from None
    if workers < 1:
        raise ValueError(f"--cluster {spec!r}: N must be at least 1")
    return workers


def local_config(extra: dict | None = None) -> dict:
    """The Dask settings a LocalCluster started here runs under. Its nannies read them again each
    time they restart a worker, so they must hold for the cluster's whole life, not only its start."""
    import dask

    environ = {k: v for k, v in dask.config.get("distributed.nanny.pre-spawn-environ", {}).items()
               if k not in DROPPED_ENVIRON}
    return {**LOCAL_CLUSTER_CONFIG, **(extra or {}), "distributed.nanny.pre-spawn-environ": environ}


def local_cluster(workers: int, config: dict | None = None):
    """A LocalCluster of ``workers`` single-threaded processes, with the settings above (call it
    under ``dask.config.set(local_config())`` where workers may be restarted)."""
    distributed = distributed_module()
    import dask

    with dask.config.set(local_config(config)):
        return distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                        dashboard_address=None)


def quietly_close(client, cluster) -> None:
    """Close what a run started. Workers still sending a heartbeat while the scheduler goes away
    log tracebacks at ERROR; that is shutdown noise, not a result, so it is not printed."""
    import logging

    log = logging.getLogger("distributed")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
    finally:
        log.setLevel(level)


try:  # the plugin base class, when the extra is installed (the module imports without it)
    from distributed import WorkerPlugin as _PluginBase
except ImportError:  # pragma: no cover - without dask the executor refuses to start (DaskUnavailable)
    _PluginBase = object


class _PoolPlugin(_PluginBase):
    """One pool of the job per Dask worker: the runner resolved once, its prepared models kept
    between shards."""

    name = PLUGIN_NAME

    def __init__(self, job: Job, timeout: float | None, memory_mb: int, batch: int) -> None:
        self.args = (job, timeout, memory_mb, batch)
        self.pool: Any = None
        self.isolated = False

    def setup(self, worker=None) -> None:
        import multiprocessing

        job, timeout, memory_mb, batch = self.args
        self.isolated = not multiprocessing.current_process().daemon
        self.pool = local_pool(job, isolate=self.isolated, workers=1, timeout=timeout, memory_mb=memory_mb,
                               batch=batch)

    def teardown(self, worker=None) -> None:
        if self.pool is not None:
            self.pool.close()
        self.pool = None


def _run_shard(plugin_name: str, items: list) -> list:
    """A shard's results, in order (a Dask task on a worker)."""
    from distributed import get_worker

    plugin = get_worker().plugins[plugin_name]
    if plugin.pool is None:
        plugin.setup()
    job = plugin.args[0]
    plugin.pool.submit(items)
    return [plugin.pool.result(job.key(item)) for item in items]


class DaskPool:
    """A job's items on a Dask cluster (see the module docstring). ``result`` waits for the shard
    holding the item; shards finish in any order and are kept until their items are asked for."""

    runs_ahead = True

    def __init__(self, job: Job, *, scheduler: str | None = None, local_workers: int | None = None,
                 client: Any = None, timeout: float | None = 120.0, memory_mb: int = 0, batch: int = 64,
                 shard: int = SHARD) -> None:
        distributed = distributed_module()
        import dask

        self.job, self.shard = job, shard
        self._own_cluster = self._own_client = None
        # worker-saturation 1.0: a worker holds only the shard it runs, so a death is charged to that
        # shard alone and not to shards merely queued there (Dask counts every task "involved").
        self._config = dask.config.set({**(local_config() if client is None and not scheduler else {}),
                                        "distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
                                        "distributed.scheduler.worker-saturation": 1.0})
        self._config.__enter__()
        try:
            if client is not None:
                self.client = client
            elif scheduler:
                self.client = self._own_client = distributed.Client(scheduler)
            else:
                self._own_cluster = local_cluster(local_workers or 1)
                self.client = self._own_client = distributed.Client(self._own_cluster)
            # one plugin per run: several certifications (the scoreboard's runtimes) share a cluster
            self.plugin_name = f"{PLUGIN_NAME}-{uuid.uuid4().hex[:12]}"
            self.client.register_plugin(_PoolPlugin(job, timeout, memory_mb, batch), name=self.plugin_name)
        except BaseException:
            self.close()
            raise
        self.workers = len(self.client.scheduler_info().get("workers", {}))
        where = "a LocalCluster" if self._own_cluster is not None else f"scheduler {self.client.scheduler.address}"
        self.description = f"dask: {self.workers} worker(s) on {where}"
        self.submitted: set[str] = set()
        self.items: dict[str, Any] = {}  # key -> item, until its result is handed out
        self.future_of: dict[str, Any] = {}  # key -> the future of the task holding it
        self.done: dict[str, Any] = {}
        self.splits = 0  # shards that died twice and were run item by item

    def describe(self) -> str:
        return self.description

    def _send(self, items: Sequence[Any]) -> None:
        first = self.job.key(items[0])
        fut = self.client.submit(_run_shard, self.plugin_name, list(items), pure=False,
                                 key=f"qconform-shard-{self.plugin_name}-{first}-{len(items)}")
        for item in items:
            self.future_of[self.job.key(item)] = fut

    def submit(self, items: Sequence[Any]) -> None:
        fresh = [i for i in items if self.job.key(i) not in self.submitted]
        for item in fresh:
            self.submitted.add(self.job.key(item))
            self.items[self.job.key(item)] = item
        for run in runs(self.job, fresh, self.shard):
            self._send(run)

    def result(self, key: str) -> Any:
        if key not in self.done and key not in self.future_of:
            self.submitted.discard(key)
            self.submit([self.items.get(key, key)])
        while key not in self.done:
            fut = self.future_of[key]
            keys = [k for k, f in self.future_of.items() if f is fut]
            try:
                results = fut.result()
            except Exception as exc:  # noqa: BLE001 - KilledWorker: the shard took down a worker twice
                for k in keys:
                    del self.future_of[k]
                if len(keys) > 1:  # find the item: each one alone, each again allowed one death
                    self.splits += 1
                    for k in keys:
                        self._send([self.items[k]])
                else:
                    why = (f"took down the Dask worker running it {ALLOWED_FAILURES + 1} times "
                           f"({type(exc).__name__}: {exc})")
                    self.done[keys[0]] = self.job.failed(self.items[keys[0]], CRASHED, why)
                fut.release()
                continue
            for k in keys:
                del self.future_of[k]
            for k, res in zip(keys, results):
                self.done[k] = res
            fut.release()
        self.submitted.discard(key)
        self.items.pop(key, None)
        return self.done.pop(key)

    def close(self) -> None:
        try:
            if self._own_client is None and getattr(self, "plugin_name", None):  # a shared cluster: tidy up
                try:
                    self.client.unregister_worker_plugin(self.plugin_name)
                except Exception:  # noqa: BLE001 - best effort; the plugin only holds an idle runner
                    pass
            quietly_close(self._own_client, self._own_cluster)
        finally:
            if self._config is not None:
                self._config.__exit__(None, None, None)
                self._config = None


class DaskEngine(DaskPool):
    """The corpus ``Executor`` on a Dask cluster: a ``DaskPool`` of corpus cases."""

    def __init__(self, options: Options, index, **kw: Any) -> None:
        super().__init__(CorpusJob(options), **kw)
        self.index = index


__all__ = ["ALLOWED_FAILURES", "DaskEngine", "DaskPool", "DaskUnavailable", "local_cluster", "local_config", "parse_cluster",
           "quietly_close"]

"""Where work runs on this machine, whatever the work: corpus cases and sweep units alike.

A *job* says what one kind of work is -- how a worker process gets ready for it (``start``: the
runner resolved once), what an item's key and group are, and what an item's result is when nothing
ran it (``failed``: the worker could not start, broke on the item, crashed or hung). The pools here
run any job's items and give one result back per key:

* ``InProcessPool``: the job's worker in this process, an item computed when its result is asked for.
* ``IsolatedPool``: the job's worker in ``workers`` worker processes (``isolation.Child``), fed ahead
  in batches, results read back per worker in order, in groups (``RESULTS``, at most ``FLUSH``
  seconds after each ends). A crash or a hang is the item that was running's: alone, the first
  submitted item without a result; inside a group (``TOGETHER``), the unanswered items run again
  one by one in a fresh worker, which pins it; the rest of the batch continues in a fresh worker.
  Items go to workers in runs of one group (a worker loads a corpus group, prepares a sweep's
  model, once), each run to the worker with the least work pending.

A Dask cluster runs the same jobs (``qconform.cluster.DaskPool``): each Dask worker holds one of
these pools.
"""
from __future__ import annotations

import pickle
import time
import traceback
from collections import deque
from typing import Any, Hashable, Iterable, Iterator, Protocol, Sequence

from qconform.isolation import Child, describe_exit
from qconform.verdicts import CRASHED, ERROR, NOT_RUN, TIMEOUT, Verdict

#: The worker's first message: started, runner resolved. The item timeout runs from here, so a slow
#: start (a loaded machine, a heavy runtime to import) is never an item's timeout.
READY = "ready"
#: How long a worker may take to start (spawn, imports, the runner's constructor).
STARTUP_TIMEOUT = 300.0
#: The longest run of one group handed to one worker at a time.
RUN = 512
#: A worker's notice before a batch whose results may come together (``(TOGETHER, keys)``): a batch
#: run as a whole (``Pipeline.run_many``: packing, a device's batch) or results streamed in groups.
#: If the worker crashes or hangs before answering them all, the pool replays the unanswered items
#: one by one in a fresh worker, so a crash is attributed to the item that causes it alone.
TOGETHER = "\x00together"
#: A group of results, ``(RESULTS, [(key, result), ...])``, in order: what arrived since the last group.
RESULTS = "\x00results"
#: A worker's notice ``(QCONFORM_WORK,)`` that the runtime is done with its current item and qconform's
#: own work on it begins (a failure's diagnosis): the item timeout measures the runtime, so from here the
#: item has ``QCONFORM_WORK_LIMIT`` seconds (a bound on a qconform bug, not on the runtime).
QCONFORM_WORK = "\x00qconform-work"
QCONFORM_WORK_LIMIT = 600.0
#: A worker sends the results it holds once this many seconds have passed since its last message
#: (and at the end of each batch): a pipe message per group instead of per item, while a slow item
#: is still answered as soon as it ends (so a hang is measured from the item's start, within this).
FLUSH = 0.05


class Worker(Protocol):
    """A job's state in one process: turns an item into its result. ``scope``: the run of items
    being worked through (its first key), set by the pool before each run."""

    scope: str | None

    def run(self, item: Any) -> Any: ...


class Job(Protocol):
    """One kind of work (picklable: it crosses to each worker process)."""

    def start(self) -> Worker: ...

    def key(self, item: Any) -> str: ...

    def group(self, item: Any) -> Hashable: ...

    def failed(self, item: Any, verdict: Verdict, why: str, traceback: str = "") -> Any: ...


def runs(job: Job, items: Sequence[Any], size: int) -> Iterator[list[Any]]:
    """The items cut into runs handed to one worker each: consecutive items of one group, at most
    ``size``. Every pool and cluster cuts them here, so a run (the diagnosis budget's scope) is the
    same whichever runs it."""
    run: list[Any] = []
    for item in items:
        if run and (len(run) >= size or job.group(item) != job.group(run[0])):
            yield run
            run = []
        run.append(item)
    if run:
        yield run


class InProcessPool:
    """The job's worker in this process; an item is computed when its result is asked for."""

    runs_ahead = False  # submit() is a no-op: nothing to hand over ahead
    workers = 0

    def __init__(self, job: Job, worker: Worker | None = None) -> None:
        self.job, self._worker = job, worker
        self._items: dict[str, Any] = {}
        #: why the job could not start here (``_unstarted``): every item answered so, as ``_serve`` does
        self._refused: tuple[Verdict, str] | None = None

    @property
    def worker(self) -> Worker:
        if self._worker is None:
            self._worker = self.job.start()
        return self._worker

    def submit(self, items: Iterable[Any]) -> None:
        for item in items:
            self._items[self.job.key(item)] = item

    def result(self, key: str) -> Any:
        item = self._items.pop(key, key)
        if self._worker is None and self._refused is None:
            try:
                self._worker = self.job.start()
            except Exception as exc:  # a Dask worker's in-process pool: its items' verdict, not a crash
                self._refused = _unstarted(exc)
        if self._refused is not None:
            return self.job.failed(item, *self._refused)
        return self._worker.run(item)

    def close(self) -> None:
        pass


def _incoming(conn):
    """The controller's batches, read by a thread as soon as they arrive: the controller's send never
    waits for the worker to finish what it is doing. Ends at the controller's None (or a closed pipe)."""
    import queue
    import threading

    inbox: queue.Queue = queue.Queue()

    def read() -> None:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                msg = None
            inbox.put(msg)
            if msg is None:
                return

    threading.Thread(target=read, daemon=True, name="qconform-batches").start()
    while (batch := inbox.get()) is not None:
        yield batch


def _unstarted(exc: Exception) -> tuple[Verdict, str]:
    """The verdict and reason of every item of a worker whose job could not start: not run where the
    infrastructure says so (``NotRun``: another runner than the run's), else the runner's error."""
    from qconform.runner import NotRun

    if isinstance(exc, NotRun):
        return NOT_RUN, str(exc)
    return ERROR, f"runner failed to start in its worker: {type(exc).__name__}: {exc}"


def _serve(conn, job: Job) -> None:
    """The worker's loop: a batch of items in, one (key, result) out per item, in order."""
    try:
        worker = job.start()
        conn.send(READY)
    except Exception as exc:  # the job cannot even start here: every item says so
        verdict, why = _unstarted(exc)
        conn.send(READY)
        while (msg := conn.recv()) is not None:
            for item in msg[1]:
                conn.send((job.key(item), job.failed(item, verdict, why)))
        return
    # a worker that runs a batch as a whole (packing, a device's batch) answers it in one group
    many = getattr(worker, "run_many", None) if getattr(worker, "batches", False) else None
    out = _Outbox(conn, job)
    if hasattr(worker, "on_qconform_work"):  # its own work on an item is not the runtime's time
        worker.on_qconform_work = lambda: out.notice((QCONFORM_WORK,))
    for scope, batch, alone in _incoming(conn):
        worker.scope = scope
        together = not alone and len(batch) > 1
        if together:  # the pool is told first: a crash or a hang replays the unanswered items one by one
            out.notice((TOGETHER, [job.key(item) for item in batch]))
        if many is not None and together:
            try:
                results = many(batch)
            except Exception:  # a qconform bug in the batch path: the items one by one, as below
                results = None
            if results is not None:
                for item, res in zip(batch, results):
                    out.put(item, res)
                if not out.flush():
                    return
                continue
        for item in batch:
            try:
                res = worker.run(item)
            except Exception as exc:  # a qconform bug on one item: that item's error, the run goes on
                why = f"qconform failed on this item: {type(exc).__name__}: {exc}"
                res = job.failed(item, ERROR, why, traceback.format_exc())
            if not out.put(item, res, now=not together):
                return
        if not out.flush():
            return
    out.close()


class _Outbox:
    """A worker's results on their way to the pool, in order: held and sent as one group (``RESULTS``)
    at most ``FLUSH`` seconds after the first of them ended, by a thread if need be, so that a slow
    or hung item never holds back the answers of the items before it (a Ctrl-C or a timeout loses
    none of them)."""

    def __init__(self, conn, job: Job) -> None:
        import threading

        self.conn, self.job = conn, job
        self.lock = threading.Lock()
        self.held: list[tuple[Any, Any]] = []
        self.since = 0.0
        self.open = True
        threading.Thread(target=self._tick, daemon=True, name="qconform-results").start()

    def put(self, item: Any, res: Any, now: bool = False) -> bool:
        """Hold a result (send it ``now``, or with the others once ``FLUSH`` has passed); False when
        the controller is gone."""
        with self.lock:
            if not self.held:
                self.since = time.monotonic()
            self.held.append((item, res))
            if now or time.monotonic() - self.since >= FLUSH:
                self._send_held()
            return self.open

    def flush(self) -> bool:
        with self.lock:
            self._send_held()
            return self.open

    def notice(self, msg: tuple) -> None:
        """A message to the pool after every result before it."""
        with self.lock:
            self._send_held()
            try:
                self.conn.send(msg)
            except (BrokenPipeError, ConnectionError, EOFError):
                self.open = False

    def close(self) -> None:
        self.flush()
        self.open = False

    def _send_held(self) -> None:
        if self.held and self.open:
            items, results = zip(*self.held)
            self.open = _answer(self.conn, self.job, items, results)
        self.held = []

    def _tick(self) -> None:
        while self.open:
            time.sleep(FLUSH / 2)
            with self.lock:
                if self.held and time.monotonic() - self.since >= FLUSH:
                    self._send_held()


def _answer(conn, job: Job, items: Sequence[Any], results: Sequence[Any]) -> bool:
    """Send the items' results in order, one message (a group where there are several); False when
    the controller is gone (killed with its machine, its Dask worker): nobody to answer."""
    pairs = [(job.key(item), res) for item, res in zip(items, results)]
    try:
        try:
            conn.send(pairs[0] if len(pairs) == 1 else (RESULTS, pairs))  # pickled whole before a byte is written
        except (BrokenPipeError, ConnectionError, EOFError):
            raise
        except Exception:  # e.g. a result that cannot be pickled: that item's error, the others as they are
            for i, (item, res) in enumerate(zip(items, results)):
                try:
                    pickle.dumps(res)
                except Exception as exc:  # noqa: BLE001
                    pairs[i] = (job.key(item), job.failed(item, ERROR, f"result cannot be transferred: {exc}"))
            conn.send(pairs[0] if len(pairs) == 1 else (RESULTS, pairs))
    except (BrokenPipeError, ConnectionError, EOFError):
        return False
    return True


class _Lane:
    """One worker process and the items handed to it, in order: its crashes and hangs are its own."""

    def __init__(self, pool: "IsolatedPool") -> None:
        self.pool = pool
        self.child = Child(_serve, (pool.job,), pool.memory_mb)
        self.pending: deque[Any] = deque()  # handed to this worker, no result yet, in order
        self.run_of: dict[str, str] = {}  # pending key -> the run it was handed over in (its first key)
        self.packing: set[str] = set()  # keys whose results may come together (TOGETHER), not yet answered
        self.alone: set[str] = set()  # keys to replay one by one (their packed call crashed or hung)
        self.ready = False
        self.last = time.monotonic()

    def send(self, items: list[Any]) -> None:
        """Hand over one run of items; batches carry the run's first key."""
        if not self.child.alive():
            self.restart()
        key = self.pool.job.key
        self.pending.extend(items)
        self.run_of.update((key(item), key(items[0])) for item in items)
        self._send(items)

    def _send(self, items: list[Any]) -> None:
        key, start = self.pool.job.key, 0
        for i in range(1, len(items) + 1):  # batches never straddle two runs
            if i == len(items) or i - start >= self.pool.batch or \
                    self.run_of[key(items[i])] != self.run_of[key(items[start])]:
                alone = any(key(item) in self.alone for item in items[start:i])
                self.child.send((self.run_of[key(items[start])], items[start:i], alone))
                start = i

    def restart(self) -> None:
        if self.child.started:
            self.pool.restarts += 1
        self.child.start()
        self.ready = False
        self.last = time.monotonic()
        self._send(list(self.pending))

    def _wait_ready(self) -> bool:
        """Wait for a fresh worker's READY; False (and the head item's result) if it never comes."""
        limit = max(STARTUP_TIMEOUT, self.pool.timeout or 0.0)
        got = self.child.receive(limit)
        if got == READY:
            self.ready = True
            self.last = time.monotonic()
            return True
        why = (f"the runner's worker did not start within {limit:g}s" if got is Child.TIMEOUT
               else f"the runner's worker died while starting: {describe_exit(self.child.wait_exit())}")
        self.child.kill()
        self._settle(CRASHED if got is Child.GONE else TIMEOUT, why)
        return False

    def next(self) -> None:
        """Read this worker's next result, or turn its head item into a crash or a timeout."""
        if not self.ready and not self._wait_ready():
            return
        head, timeout = self.pool.job.key(self.pending[0]), self.pool.timeout
        # the head item started when the message before it arrived (results come strictly in order)
        since = max(self.last, self.child.last_arrival) if self.child.inbox_empty() else self.last
        got = self.child.receive(None if timeout is None else max(0.0, since + timeout - time.monotonic()))
        while isinstance(got, tuple) and got and got[0] in (TOGETHER, QCONFORM_WORK):
            if got[0] == TOGETHER:
                self.packing = set(got[1])
            elif timeout is not None:  # the runtime answered the head item; qconform now works on it
                since, timeout = time.monotonic(), max(timeout, QCONFORM_WORK_LIMIT)
            got = self.child.receive(None if timeout is None else max(0.0, since + timeout - time.monotonic()))
        if got in (Child.TIMEOUT, Child.GONE) and head in self.packing:
            # inside a batch answered together: which item did it is unknown; the unanswered again, one by one
            self.child.kill()
            self.alone |= self.packing
            self.packing = set()
            self.restart()
            return
        if got is Child.TIMEOUT:
            self.child.kill()
            self._settle(TIMEOUT, f"no result within --case-timeout={timeout:g}s; worker killed")
        elif got is Child.GONE:
            code = self.child.wait_exit()
            self.child.kill()
            self._settle(CRASHED, describe_exit(code))
        else:
            for key, res in got[1] if got[0] == RESULTS else [got]:
                head = self.pool.job.key(self.pending[0])
                if key != head:  # the protocol is strictly in order: anything else is a qconform bug
                    raise RuntimeError(f"worker answered {key!r} while {head!r} was due")
                self.pending.popleft()
                self.run_of.pop(key, None)
                self.packing.discard(key)
                self.alone.discard(key)
                self.pool.done[key] = res
            self.last = time.monotonic()

    def _settle(self, verdict: Verdict, why: str) -> None:
        """The head item gets the controller's result; the rest of its batch goes to a fresh worker."""
        head = self.pending.popleft()
        key = self.pool.job.key(head)
        self.run_of.pop(key, None)
        self.alone.discard(key)
        self.pool.done[key] = self.pool.job.failed(head, verdict, why)
        if self.pending:
            self.restart()
        self.last = time.monotonic()


class IsolatedPool:
    """The job in ``workers`` worker processes (see the module docstring)."""

    runs_ahead = True

    def __init__(self, job: Job, timeout: float | None, memory_mb: int = 0, batch: int = 64, workers: int = 1,
                 run: int = RUN) -> None:
        self.job = job
        self.timeout, self.memory_mb, self.batch, self.run = timeout, memory_mb, batch, run
        self.lanes = [_Lane(self) for _ in range(max(1, workers))]
        self.owner: dict[str, _Lane] = {}
        self.submitted: set[str] = set()  # every key ever submitted (results are handed out once)
        self.items: dict[str, Any] = {}  # key -> item, until its result is handed out
        self.done: dict[str, Any] = {}
        self.restarts = 0

    @property
    def workers(self) -> int:
        return len(self.lanes)

    def start(self) -> None:
        """Start the worker processes now, before any item (they import the runner while the caller
        still reads the corpus's index): what the first ``submit`` would otherwise do."""
        for lane in self.lanes:
            if not lane.child.alive():
                lane.restart()

    @property
    def child(self) -> Child:  # the first worker (tests look at it)
        return self.lanes[0].child

    def submit(self, items: Iterable[Any]) -> None:
        """Queue items (those never submitted before) for the workers."""
        key = self.job.key
        fresh = [item for item in items if key(item) not in self.submitted]
        for item in fresh:
            self.submitted.add(key(item))
            self.items[key(item)] = item
        for run in runs(self.job, fresh, self.run):
            lane = min(self.lanes, key=lambda ln: len(ln.pending))
            for item in run:
                self.owner[key(item)] = lane
            lane.send(run)

    def result(self, key: str) -> Any:
        lane = self.owner.get(key)
        if key not in self.done and (lane is None or key not in lane.run_of):
            self.submitted.discard(key)  # never submitted, or its result was handed out: compute (again)
            self.submit([self.items.get(key, key)])
        while key not in self.done:
            self.owner[key].next()
        self.owner.pop(key, None)
        self.items.pop(key, None)
        return self.done.pop(key)

    @property
    def pending(self) -> list[str]:
        return [self.job.key(item) for lane in self.lanes for item in lane.pending]

    def close(self) -> None:
        """Idle workers exit when asked; a worker still holding cases (Ctrl-C, ``-x``, an early stop) is
        killed: nobody waits for those results, and finishing its run first kept Ctrl-C waiting."""
        for lane in self.lanes:
            if lane.pending:
                lane.child.kill()
            else:
                lane.child.close()


def local_pool(job: Job, *, isolate: bool = True, workers: int = 1, timeout: float | None = 120.0,
               memory_mb: int = 0, batch: int = 64, worker: Worker | None = None):
    """This machine's pool for ``job``: ``workers`` isolated worker processes, or (``isolate=False``)
    the job's worker in this process (``worker``, where the caller already holds one)."""
    if isolate:
        return IsolatedPool(job, timeout, memory_mb, batch, workers=workers)
    return InProcessPool(job, worker)


__all__ = ["FLUSH", "InProcessPool", "IsolatedPool", "Job", "QCONFORM_WORK", "RESULTS", "RUN", "READY", "TOGETHER", "STARTUP_TIMEOUT", "Worker", "local_pool", "runs"]

"""Waiting on a job's tasks without hanging.

Every task of a job is sent through its :class:`Watch`, and every wait on a result is a watched one: the
job ends with an error of its own, its tasks cancelled, when the cluster has had no worker for
``no_workers_timeout`` seconds (:class:`~distprice.errors.NoWorkersError`), when it runs past its
``timeout`` (:class:`~distprice.errors.JobTimeoutError`), or when the scheduler goes away
(:class:`~distprice.errors.SchedulerUnreachableError`). :meth:`Watch.cancel` (on Ctrl-C, say) cancels the
tasks and releases every thread waiting on them.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import time
import uuid
import weakref

from ..errors import JobTimeoutError, NoWorkersError, SchedulerUnreachableError

POLL_SECONDS = 0.25
"""How often a wait looks at the cluster and the clock."""
LOST_SECONDS = 10.0
"""A client that has not been connected to its scheduler for this long has lost it."""


class Cancelled(Exception):
    """The job was cancelled while a thread waited on one of its tasks."""


class Watch:
    """The tasks of one job on ``client``: sent, awaited and cancelled together.

    ``no_workers_timeout``: seconds the job may wait on a cluster without workers; ``timeout``: seconds the
    whole job may take from now (None: no limit).
    """

    def __init__(self, client, no_workers_timeout: float, timeout: float | None = None):
        self.client = client
        self.no_workers_timeout = no_workers_timeout
        self.timeout = timeout
        self.job = uuid.uuid4().hex
        """The job's id: the suffix of its task keys (the dashboard page follows the job by it)."""
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.futures = weakref.WeakSet()
        """The job's tasks still held somewhere (a result handed on and dropped needs no cancelling)."""
        self._stopped = threading.Event()
        self._since: dict[str, float] = {}

    def send(self, tasks: list[tuple]) -> list:
        """Sends ``tasks``, each ``(key, function, args, priority, workers)``, in one graph, so that the scheduler
        takes them in at once (sent one by one, it takes them in one after another: a few milliseconds each on a
        cluster of 32 workers); ``workers``: the addresses a task runs on (any other where none of them is left;
        empty: any). An argument that is a future stands for its task's result. Their futures, in order; the
        tasks are cancelled with the job."""
        from dask._task_spec import Task
        from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

        layers = {}
        for key, function, args, priority, workers in tasks:
            annotations = {"priority": priority}
            if workers:
                annotations.update(workers=list(workers), allow_other_workers=True)
            layers[key] = MaterializedLayer({key: Task(key, function, *args)}, annotations=annotations)
        futures = self.client.get(HighLevelGraph(layers, {key: set() for key in layers}), list(layers), sync=False)
        self.futures.update(futures)
        return futures

    def gather(self, futures) -> list:
        """The results of ``futures``, in order, once every one is done: those done are fetched while the others
        still run (a message for those done at once), so that little is left to fetch when the last ends."""
        results: list = [None] * len(futures)
        pending = dict(enumerate(futures))
        while pending:
            self.wait(list(pending.values()), first=True)
            done = [i for i, f in pending.items() if f.done()]
            fetched = self._fetched(lambda: self.client.gather([pending[i] for i in done]))
            for i, result in zip(done, fetched):
                results[i] = result
                del pending[i]
        return results

    def wait(self, futures, first: bool = False) -> None:
        """Waits until every one of ``futures`` is done (finished, failed or cancelled), or with ``first`` until
        one is, looking at the cluster and the clock every POLL_SECONDS."""
        from distributed import wait

        pending = [f for f in futures if not f.done()]
        if first and len(pending) < len(futures):
            return
        while pending:
            self.check()
            try:
                wait(pending, timeout=POLL_SECONDS, return_when="FIRST_COMPLETED" if first else "ALL_COMPLETED")
            except TimeoutError:
                pending = [f for f in pending if not f.done()]
            except concurrent.futures.CancelledError:
                self._explain_cancelled()
                raise
            else:
                return

    def check(self) -> None:
        """Raises what ends the job now, if anything does (the job's tasks are cancelled first)."""
        if self._stopped.is_set():
            raise Cancelled("the job was cancelled")
        now = time.monotonic()
        if self.deadline is not None and now > self.deadline:
            self._fail(
                JobTimeoutError(
                    f"the job ran past its timeout of {self.timeout:g} s; its tasks were "
                    f"cancelled and nothing was written"
                )
            )
        if self._lasted("lost", self.client.status != "running", now) > LOST_SECONDS or self.client.status in (
            "closing",
            "closed",
        ):
            self._lost()
        if self.client.status != "running":
            return
        try:
            workers = self.client.scheduler_info(n_workers=0)["n_workers"]
        except OSError:  # the connection went while we asked: the next look decides
            return
        if self._lasted("idle", workers == 0, now) > self.no_workers_timeout:
            self._fail(
                NoWorkersError(
                    f"the cluster has had no worker for {self.no_workers_timeout:g} s "
                    f"(cluster.no_workers_timeout); the job's tasks were cancelled and "
                    f"nothing was written"
                )
            )

    def cancel(self) -> None:
        """Cancels every task of the job and releases the threads waiting on them (at most once)."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        held = list(self.futures)
        if held and self.client.status == "running":
            try:
                self.client.cancel(held)
            except OSError:  # the scheduler is gone, and the tasks with it
                pass

    def _lasted(self, state: str, now_in_it: bool, now: float) -> float:
        """Seconds the job has been in ``state`` without a break (0 when it is not in it now)."""
        if not now_in_it:
            self._since.pop(state, None)
            return 0.0
        return now - self._since.setdefault(state, now)

    def _lost(self):
        self._fail(
            SchedulerUnreachableError(
                f"lost the scheduler at {self.client.scheduler.address} during the "
                f"job (client {self.client.status}); nothing was written"
            )
        )

    def _fail(self, error: Exception):
        self.cancel()
        raise error

    def _fetched(self, fetch):
        """``fetch()`` of done futures; a future cancelled because the scheduler went away says so."""
        try:
            return fetch()
        except concurrent.futures.CancelledError:
            self._explain_cancelled()
            raise

    def _explain_cancelled(self) -> None:
        """Raises why a task of the job was cancelled, when it was the job's end or the scheduler's loss."""
        if self._stopped.is_set():
            raise Cancelled("the job was cancelled") from None
        if self.client.status != "running":
            self._lost()


@contextlib.contextmanager
def connected(client):
    """Turns the scheduler's connection breaking during a call into a
    :class:`~distprice.errors.SchedulerUnreachableError`."""
    from distributed.comm.core import CommClosedError

    try:
        yield
    except CommClosedError as error:
        raise SchedulerUnreachableError(
            f"lost the scheduler at {client.scheduler.address} ({error}); nothing was written"
        ) from None

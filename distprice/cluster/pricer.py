"""Pricing on a Dask cluster: :class:`Pricer` sends a job's tasks and gathers its result.

Any family (:mod:`distprice.families`) runs through :meth:`Pricer.compute`. The family reads the job's inputs on
the client, before any task is sent, and cuts them into chunks for the cluster's workers; the Pricer sends one
task per chunk (:func:`~.tasks.run_chunk`), keyed ``<chunk name>-<job id>`` for the dashboard's task stream and
page, shows their progress and hands their results, in order, to the family, which puts them together: a priced
table, fitted parameters. A job of several stages (a big Parquet portfolio the workers read, checked on the
client before its slices are priced where they lie) hands each stage's results back to the family before the
next stage is sent; an earlier stage's results that a later one takes stay on the workers.

Every row is priced exactly once, whichever workers come and go. Every wait is watched (:mod:`~.watch`): a
job with no worker for ``cluster.no_workers_timeout`` seconds, past its ``timeout``, or whose scheduler goes
away stops with its own error, and an interrupted job's tasks are cancelled.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import logging
import time
import warnings

import pandas as pd

from ..errors import NoWorkersError
from ..families import HESTON, HULL_WHITE, LATTICE, PATHS, Chunk, Family, Parts, Stages, Work, Workers
from ..families.work import Outline
from ..job import JobOptions, Summary
from ..tables import (
    FOLDER,
    check_output,
    new_folder,
    scratch_folder,
    table_format,
    write_joined,
    write_parts,
    write_tables,
)
from . import dashboard
from .config import ClusterConfig
from .metrics import PricingMetrics
from .progress import follow
from .start import cluster_config, dashboard_host, default_chunks, start
from .tasks import can_write, describe_worker, pricing_share, run_chunk
from .watch import Watch, connected

log = logging.getLogger(__name__)

FETCH_RUN = 16
"""The most results of a stage's light chunks (:attr:`~distprice.families.Work.light`) fetched in one message."""


class Pricer:
    """A cluster kept across pricing jobs (scheduled risk runs price many portfolios on one cluster).

    ``cluster``: None (a local cluster sized to this machine), a config file, a scheduler address, a
    :class:`~.config.Config` / :class:`~.config.ClusterConfig`, or a :class:`distributed.Client` (used as
    it is, not closed). ``chunks_per_worker``: chunks a job is cut into per worker (None: 2 where worker
    processes share each GPU, else 4: :func:`~.start.default_chunks`); ``read_on_workers_rows``: Parquet
    portfolios of at least this many prices (rows × scenarios) are read by the workers, not the client (None: the
    lattice family's ``READ_ON_WORKERS_ROWS``); ``task_seconds``: the least predicted work worth a task of its
    own (None: each family's rule, e.g. :data:`~distprice.planner.TASK_SECONDS`; 0: every job cut into
    ``chunks_per_worker`` chunks per worker, whatever its size); ``progress``: a progress bar of each stage on
    stderr, when it is a terminal. Use as a context manager::

        with distprice.Pricer("configs/local-cuda.yaml") as pricer:
            for book in books:
                priced = pricer.price(book, curves, shifts_bp=[-100, 0, 100])
    """

    def __init__(
        self,
        cluster=None,
        *,
        chunks_per_worker: int | None = None,
        read_on_workers_rows: int | None = None,
        task_seconds: float | None = None,
        progress: bool = False,
    ):
        from distributed import Client

        if isinstance(cluster, Client):
            self.client, self._cluster, self._owns_client = cluster, None, False
            config = ClusterConfig()
        else:
            config = cluster_config(cluster)
            self.client, self._cluster = start(config)
            self._owns_client = True
        self.no_workers_timeout = config.no_workers_timeout
        self._dashboard_host = (
            dashboard_host(config.dashboard_address)
            if self._cluster is not None and config.dashboard_address is not None
            else None
        )
        with connected(self.client):
            self.client.register_plugin(PricingMetrics())
            self.page = dashboard.register(self.client, self.dashboard_link)
            """The URL of the dashboard's distprice page (the current job live), or None without a dashboard."""
            workers = self.workers
            log.info(
                "cluster %s: %d worker%s%s",
                config.kind,
                workers,
                "s" * (workers != 1),
                f", dashboard: {self.dashboard_link}, this job: {self.page}" if self.page else "",
            )
        self.last_job: str | None = None
        """The id of the latest job (:func:`.dashboard.job_workers` gives what each worker did of it)."""
        self.last_outline: Outline | None = None
        """How the latest job's rows were cut and planned (:class:`~distprice.families.work.Outline`; None when its
        family does not tell: :func:`.dashboard.job_chunks` gives what each chunk took)."""
        self._posted: set[str] = set()
        self.chunks_per_worker = chunks_per_worker
        self.read_on_workers_rows = read_on_workers_rows
        self.task_seconds = task_seconds
        self.progress = progress
        self._workers: dict[str, dict] = {}
        self._submitted = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="distprice-job")

    def __enter__(self) -> Pricer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Waits for submitted jobs, then closes the client and the cluster this pricer started."""
        self._submitted.shutdown(wait=True)
        if self._owns_client:
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()

    @property
    def dashboard_link(self) -> str | None:
        """The dashboard's URL, or None without one. On a cluster this pricer started, its host is the one the
        dashboard listens on (``cluster.dashboard_address``; the machine's hostname for every interface), else
        the scheduler's host."""
        from distributed.utils import format_dashboard_link

        served = self.client.scheduler_info().get("services", {}).get("dashboard")
        if not served:
            return None
        if self._dashboard_host is None:
            return self.client.dashboard_link
        return format_dashboard_link(self._dashboard_host, served)

    @property
    def workers(self) -> int:
        return self.client.scheduler_info(n_workers=0)["n_workers"]

    # -- jobs --

    def price(self, portfolio, curves=None, **options) -> pd.DataFrame:
        """Prices a portfolio on the cluster: the arguments and the table of :func:`distprice.price`."""
        checked = JobOptions.of(curves=curves, **options).checked()
        with self._watched(checked.timeout) as watch:
            frames = list(self._run(portfolio, checked, watch)[1])
        return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)

    def submit(self, portfolio, curves=None, **options) -> concurrent.futures.Future:
        """Starts :meth:`price` and returns at once: a future of the priced table (``.result()`` waits;
        invalid input raises there)."""
        return self._submitted.submit(self.price, portfolio, curves, **options)

    def run(self, portfolio, curves=None, *, output, **options) -> Summary:
        """Prices a portfolio and writes the priced table to ``output`` (CSV, Parquet, or a folder of Parquet
        parts) atomically: nothing is written when a row is invalid in strict mode or the job fails. Returns
        what the job did. When the workers read the portfolio (a big Parquet file, ``read_on_workers_rows``) they
        write the priced table's parts themselves: the parts of a folder, or, for a Parquet file, parts in a
        hidden folder beside it that the client joins into the file as they come, without decoding them
        (:func:`~distprice.tables.write_joined`), where every worker can write at the output's path (else the
        client writes the file). A folder must be where they can write, at the same path."""
        inputs = {
            "portfolio": portfolio,
            "curves": curves,
            **{
                name: options.get(name)
                for name in ("scenarios", "exercise_schedule", "coupon_schedule", "principal_schedule", "models")
            },
        }
        check_output(output, inputs=inputs)
        checked = JobOptions.of(curves=curves, **options).checked()
        tick = time.perf_counter()
        with self._watched(checked.timeout) as watch:
            if table_format(output) == FOLDER:
                with new_folder(output) as folder:
                    tally, pieces = self._run(portfolio, checked, watch, str(folder))
                    if isinstance(pieces, Parts):
                        collections.deque(pieces.paths, maxlen=0)
                    else:
                        write_parts(pieces, folder)
            elif table_format(output) == "parquet":
                with scratch_folder(output) as folder:  # the parts the workers write, for the client to join
                    tally, pieces = self._run(portfolio, checked, watch, str(folder), scratch=True)
                    if isinstance(pieces, Parts):
                        write_joined(pieces.paths, output)
                    else:
                        write_tables(pieces, output)
            else:
                tally, pieces = self._run(portfolio, checked, watch)
                write_tables(pieces, output)
        return tally.summary(time.perf_counter() - tick, self.workers)

    def price_mc(
        self, inputs, *, paths: int | None = None, precision: str | None = None, engine: str = "auto"
    ) -> pd.DataFrame:
        """Prices the Monte-Carlo jobs of ``inputs`` on the cluster: the arguments and the table of
        :func:`distprice.price_mc` (``chunks`` aside: each job's paths are cut into as many ranges as its work pays
        for, each a ``mc_paths_<engine>_<precision>`` task: one range per 25 ms of its engine's work, at most
        ``chunks_per_worker`` per worker; see :func:`~distprice.families.montecarlo.range_count`). The ranges start
        at multiples of :data:`~distprice.families.montecarlo.PATH_BLOCK` paths, so the prices are the same bits
        on any number of workers; jobs share the cluster."""
        return self.compute(PATHS, inputs, paths=paths, precision=precision, engine=engine)

    def calibrate_heston(self, quotes, **options) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Fits every Heston surface of ``quotes`` at once, one ``fit_heston`` task each: the arguments (but
        ``progress``) and the tables of :func:`distprice.calibrate_heston`."""
        return self.compute(HESTON, quotes, **options)

    def calibrate_hull_white(self, quotes, curves) -> pd.DataFrame:
        """Fits every Hull-White model of ``quotes`` at once, one ``fit_hull_white`` task each: the table of
        :func:`distprice.calibrate_hull_white`."""
        return self.compute(HULL_WHITE, quotes, curves=curves)

    def compute(self, family: Family, inputs, **options):
        """The result of ``family``'s job of ``inputs``: any family runs through here, its inputs read and checked
        on the client (``family.read(inputs, **options)``, before any task is sent), its chunks run on the
        cluster's workers and put together by the family, in chunk order."""
        read = family.read(inputs, **options)
        with self._watched() as watch:
            return self._done(family.split(read, self._cut_for("fp64", watch)), watch)

    def _done(self, split: Work | Stages, watch: Watch):
        """Runs a job's :class:`~distprice.families.Work` (of a job of stages, the last, once the others have run)
        and returns what its ``combine`` makes of the chunks' results, handed to it in chunk order as they come."""
        sent: dict[Chunk, object] = {}  # the job's chunks whose results are still held, and their futures
        work = split if isinstance(split, Work) else self._last_stage(split, sent, watch)
        futures = self._started(work, sent, watch)
        sent.clear()
        if work.together:
            watch.wait(futures)
            return work.combine(iter(watch.gather(futures)))
        return work.combine(self._ordered(futures, watch, work.each, FETCH_RUN if work.light else 1))

    def _last_stage(self, stages: Stages, sent: dict, watch: Watch) -> Work:
        """Runs each stage the family yields, its results gathered and its ``combine``'s result sent back to the
        family, until it returns the last; what no stage keeps for later ones (``Work.kept``) is let go as each
        ends."""
        result, kept = None, set()
        while True:
            try:
                work = stages.send(result)
            except StopIteration as last:
                return last.value
            results = watch.gather(self._started(work, sent, watch))
            kept.update(work.kept)
            for chunk in set(sent) - kept:
                del sent[chunk]
            result = work.combine(iter(results))
            watch.check()

    def _started(self, work: Work, sent: dict, watch: Watch) -> list:
        """Posts ``work``'s figures, sends its chunks and its kept ones together and shows the progress of its
        own; their futures."""
        if work.figures is not None:
            self._post(watch.job, **work.figures)
        if work.outline is not None:
            self.last_outline = work.outline
        futures = self._send([*work.chunks, *work.kept], sent, watch)[: len(work.chunks)]
        self._show_progress(futures, work.label)
        return futures

    @staticmethod
    def _send(chunks, sent: dict, watch: Watch) -> list:
        """Sends a task for each of ``chunks`` and for each chunk they take as an argument, unless ``sent`` (the
        job's chunks already sent, and their futures) holds it, keyed ``<name>-<job id>`` (a chunk run ``again``:
        :func:`.dashboard.again_key`); the futures of ``chunks``. The chunks go in a graph each time all they take
        has been sent (reads, then what takes them: a few graphs, not a message a task), so that a worker gets a
        slice's checks with its pricing, and runs them first."""
        pending: dict[Chunk, None] = {}

        def add(chunk: Chunk) -> None:
            if chunk not in sent and chunk not in pending:
                for a in chunk.args:
                    if isinstance(a, Chunk):
                        add(a)
                pending[chunk] = None

        for chunk in chunks:
            add(chunk)
        while pending:
            ready = [c for c in pending if all(a in sent for a in c.args if isinstance(a, Chunk))]
            tasks = []
            for c in ready:
                key = f"{c.name}-{watch.job}"
                args = (c.run, *(sent[a] if isinstance(a, Chunk) else a for a in c.args))
                tasks.append((dashboard.again_key(key) if c.again else key, run_chunk, args, c.priority, c.workers))
                del pending[c]
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*large graph.*")  # tasks carry their inputs
                sent.update(zip(ready, watch.send(tasks)))
        return [sent[chunk] for chunk in chunks]

    @contextlib.contextmanager
    def _watched(self, timeout: float | None = None):
        """The :class:`~.watch.Watch` of one job; whatever stops the job (an error, Ctrl-C) cancels its tasks."""
        watch = Watch(self.client, self.no_workers_timeout, timeout)
        self.last_job, self.last_outline = watch.job, None
        try:
            with connected(self.client):
                yield watch
        except BaseException as error:
            watch.cancel()
            self._end(watch.job, str(error) or type(error).__name__)
            raise
        self._end(watch.job, None)

    def _post(self, job: str, **figures) -> None:
        """Tells the dashboard's distprice page about a job (:func:`.dashboard.post_job`)."""
        if self.page:
            dashboard.post_job(self.client, job, **figures)
            self._posted.add(job)

    def _end(self, job: str, error: str | None) -> None:
        if job in self._posted and self.client.status == "running":
            self._posted.discard(job)
            dashboard.end_job(self.client, job, error)

    def _run(self, portfolio, options: JobOptions, watch: Watch, folder: str | None = None, scratch: bool = False):
        """Checks a portfolio job and sends its tasks; returns its tally and a generator of the pieces of the
        priced table in order (the tally is complete once the generator is exhausted), or the :class:`Parts`
        the workers wrote into ``folder`` themselves. A ``scratch`` folder (parts for one file) is used only where
        every worker can write into it; otherwise the client writes the table (said in the log)."""
        workers = self._cut_for(options.precision, watch)
        read = LATTICE.read(portfolio, options, folder=folder, read_on_workers_rows=self.read_on_workers_rows)
        if scratch and getattr(read, "folder", None) is not None and not self._workers_write(read.folder):
            log.info("the workers cannot write beside the output (%s): the client writes it", folder)
            read = dataclasses.replace(read, folder=None)
        watch.check()
        return self._done(LATTICE.split(read, workers), watch)

    def _workers_write(self, folder: str) -> bool:
        """Whether every worker can write into ``folder``, at the same path (each makes and removes a file)."""
        try:
            answers = self.client.run(can_write, folder)
        except Exception:  # a worker gone or failing: the client writes, which never depends on them
            return False
        return bool(answers) and all(answers.values())

    def _cut_for(self, precision: str, watch: Watch) -> Workers:
        """The cluster a job is cut for: its workers now, and the device and model of the first to answer
        (it speaks for all) with ``gpu_processes``, the most workers that share one GPU, the
        :func:`~.tasks.pricing_share` of them all and the order small jobs take them in (:attr:`Workers.order`);
        waits up to ``no_workers_timeout`` seconds for one to join."""
        if precision not in self._workers:
            try:
                self.client.wait_for_workers(1, timeout=self.no_workers_timeout)
            except TimeoutError:
                raise NoWorkersError(
                    f"no worker joined the cluster at {self.client.scheduler.address} within "
                    f"{self.no_workers_timeout:g} s (cluster.no_workers_timeout)"
                ) from None
            watch.check()
            answers = self.client.run(describe_worker, precision)
            described = list(answers.values())
            places, hosts = collections.defaultdict(list), collections.defaultdict(list)
            for address, d in sorted(answers.items()):
                if d["place"] is not None:
                    places[d["place"]].append(address)
                hosts[d["host"]].append(address)
            groups = [places[place] for place in sorted(places)] or [hosts[host] for host in sorted(hosts)]
            self._workers[precision] = {
                **described[0],
                "gpu_processes": max(map(len, places.values()), default=1),
                "pricing_share": pricing_share(described),
                "gpus": tuple(tuple(places[place]) for place in sorted(places)),
                "order": tuple(g[k] for k in range(max(map(len, groups), default=0)) for g in groups if k < len(g)),
            }
        worker = self._workers[precision]
        return Workers(
            self.workers,
            self.chunks_per_worker or default_chunks(worker["gpu_processes"]),
            worker["gpu"],
            worker["model"],
            worker["gpu_processes"],
            self.task_seconds,
            worker["pricing_share"],
            worker["gpus"],
            worker["order"],
        )

    def _show_progress(self, futures, label: str) -> None:
        """A progress bar of ``futures`` on the terminal (when asked for), drawn while the job goes on."""
        if self.progress:
            follow(self.client, futures, label)

    @staticmethod
    def _ordered(futures, watch: Watch, each=None, run: int = 1):
        """The results of ``futures`` in their order (``each(i, result)`` of each, when given), each released
        once handed on; the next results are fetched from their workers (and ``each`` applied) while the caller
        uses these (writes them, say): the next one's, with those after it already done, up to ``run`` of them in
        one message. Whatever stops the caller (an error, a signal, the generator closed early) cancels the job
        before the fetching thread is joined."""

        def fetched(i: int) -> list:
            watch.wait([futures[i]])
            end = i + 1
            while end < min(len(futures), i + run) and futures[end].done():
                end += 1
            results = watch.gather(futures[i:end])
            return results if each is None else [each(k, r) for k, r in enumerate(results, start=i)]

        with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="distprice-fetch") as fetch:
            try:
                i, ahead = 0, fetch.submit(fetched, 0) if futures else None
                while ahead is not None:
                    results = ahead.result()
                    futures[i : i + len(results)] = [None] * len(results)
                    i += len(results)
                    ahead = fetch.submit(fetched, i) if i < len(futures) else None
                    yield from results
            except BaseException:
                watch.cancel()
                raise

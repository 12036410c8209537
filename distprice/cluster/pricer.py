"""Pricing on a Dask cluster: :class:`Pricer` sends a job's tasks and gathers its result.

A job runs in stages, each a kind of task named for the dashboard's task stream and progress page. The family
(:mod:`distprice.families`) reads the job's inputs on the client, before any task is sent, and cuts them into
chunks for the cluster's workers; the Pricer sends one task per chunk (:func:`~.tasks.run_chunk`), shows their
progress and hands their results, in order, to the family, which puts them together: a priced table, fitted
parameters.

A big Parquet file, or folder of Parquet parts, is read by the workers instead: ``read-chunk`` tasks each read
and check a slice of its rows, ``inspect-chunk`` tasks send the client only what it needs (problems, id hashes,
the plan's engines), and once every slice is known valid the ``price_*`` tasks price the slices where they lie.
The client holds the plan and one priced slice at a time, not the portfolio.

Every row is priced exactly once, whichever workers come and go. Every wait is watched (:mod:`~.watch`): a
job with no worker for ``cluster.no_workers_timeout`` seconds, past its ``timeout``, or whose scheduler goes
away stops with its own error, and an interrupted job's tasks are cancelled.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import logging
import time
import warnings

import pandas as pd

from ..errors import NoWorkersError
from ..families import HESTON, HULL_WHITE, LATTICE, PATHS, Chunk, Family, Work, Workers
from ..families.lattice import (
    by_scenario,
    file_problems,
    inspect_chunk,
    price_read_chunk,
    read_chunk,
    task_name,
    with_columns,
    write_read_chunk,
)
from ..job import JobOptions, Summary, Tally, check_columns
from ..planner import chunk_count, table_slices
from ..tables import FOLDER, check_output, new_folder, parquet_files, table_format, write_parts, write_tables
from . import dashboard
from .config import ClusterConfig
from .metrics import PricingMetrics
from .progress import follow
from .start import cluster_config, default_chunks, start
from .tasks import describe_worker, run_chunk
from .watch import Watch, connected

log = logging.getLogger(__name__)

READ_ON_WORKERS_ROWS = 1_000_000
"""Parquet portfolios of at least this many rows are read by the workers, not the client."""


class Pricer:
    """A cluster kept across pricing jobs (scheduled risk runs price many portfolios on one cluster).

    ``cluster``: None (a local cluster sized to this machine), a config file, a scheduler address, a
    :class:`~.config.Config` / :class:`~.config.ClusterConfig`, or a :class:`distributed.Client` (used as
    it is, not closed). ``chunks_per_worker``: chunks a job is cut into per worker (None: 2 on a ``local-cuda``
    cluster, whose worker processes share each GPU, else 4); ``progress``: a progress
    bar of each stage on stderr, when it is a terminal. Use as a context manager::

        with distprice.Pricer("configs/local-cuda.yaml") as pricer:
            for book in books:
                priced = pricer.price(book, curves, shifts_bp=[-100, 0, 100])
    """

    def __init__(
        self,
        cluster=None,
        *,
        chunks_per_worker: int | None = None,
        read_on_workers_rows: int = READ_ON_WORKERS_ROWS,
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
        with connected(self.client):
            self.client.register_plugin(PricingMetrics())
            self.page = dashboard.register(self.client)
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
        self._posted: set[str] = set()
        self.chunks_per_worker = chunks_per_worker or default_chunks(config)
        self.read_on_workers_rows = read_on_workers_rows
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
        served = self.client.scheduler_info().get("services", {}).get("dashboard")
        return self.client.dashboard_link if served else None

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
        what the job did. The parts of a folder are written by the workers when they read the portfolio (a big
        Parquet file), so the folder must be where they can write, at the same path."""
        inputs = {
            "portfolio": portfolio,
            "curves": curves,
            **{name: options.get(name) for name in ("scenarios", "exercise_schedule", "models")},
        }
        check_output(output, inputs=inputs)
        checked = JobOptions.of(curves=curves, **options).checked()
        tick = time.perf_counter()
        with self._watched(checked.timeout) as watch:
            if table_format(output) == FOLDER:
                with new_folder(output) as folder:
                    tally, frames = self._run(portfolio, checked, watch, str(folder))
                    if frames is not None:
                        write_parts(frames, folder)
            else:
                tally, frames = self._run(portfolio, checked, watch)
                write_tables(frames, output)
        return tally.summary(time.perf_counter() - tick, self.workers)

    def price_mc(
        self, inputs, *, paths: int | None = None, precision: str | None = None, engine: str = "auto"
    ) -> pd.DataFrame:
        """Prices the Monte-Carlo jobs of ``inputs`` on the cluster: the arguments and the table of
        :func:`distprice.price_mc` (``chunks`` aside: each job's paths are cut into ``chunks_per_worker``
        ranges per worker, each a ``mc_paths_<engine>_<precision>`` task). The ranges start at multiples of
        :data:`~distprice.families.montecarlo.PATH_BLOCK` paths, so the prices are the same bits on any number of
        workers; jobs share the cluster."""
        return self._result(PATHS, inputs, paths=paths, precision=precision, engine=engine)

    def calibrate_heston(self, quotes, **options) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Fits every Heston surface of ``quotes`` at once, one ``fit_heston`` task each: the arguments (but
        ``progress``) and the tables of :func:`distprice.calibrate_heston`."""
        return self._result(HESTON, quotes, **options)

    def calibrate_hull_white(self, quotes, curves) -> pd.DataFrame:
        """Fits every Hull-White model of ``quotes`` at once, one ``fit_hull_white`` task each: the table of
        :func:`distprice.calibrate_hull_white`."""
        return self._result(HULL_WHITE, quotes, curves=curves)

    def _result(self, family: Family, inputs, **options):
        """The result of a family's job of one stage: its inputs read here, its chunks run on the cluster."""
        read = family.read(inputs, **options)
        with self._watched() as watch:
            return self._done(family.split(read, self._cut_for("fp64", watch)), watch)

    def _done(self, work: Work, watch: Watch):
        """Sends the tasks of ``work``'s chunks and returns what its ``combine`` makes of their results, handed to
        it in chunk order as they come."""
        if work.figures is not None:
            self._post(watch.job, **work.figures)
        futures = self._send(work.chunks, watch)
        self._show_progress(futures, work.label)
        return work.combine(self._ordered(futures, watch))

    @staticmethod
    def _send(chunks: list[Chunk], watch: Watch) -> list:
        """Sends a task for each of ``chunks`` and for each chunk they take as an argument (once, however many
        take it), keyed ``<name>-<job id>``; the futures of ``chunks``."""
        sent = {}

        def send(chunk: Chunk):
            if chunk not in sent:
                args = [send(a) if isinstance(a, Chunk) else a for a in chunk.args]
                sent[chunk] = watch.submit(
                    run_chunk, chunk.run, *args, key=f"{chunk.name}-{watch.job}", priority=chunk.priority
                )
            return sent[chunk]

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*large graph.*")  # tasks carry their inputs
            return [send(chunk) for chunk in chunks]

    @contextlib.contextmanager
    def _watched(self, timeout: float | None = None):
        """The :class:`~.watch.Watch` of one job; whatever stops the job (an error, Ctrl-C) cancels its tasks."""
        watch = Watch(self.client, self.no_workers_timeout, timeout)
        self.last_job = watch.job
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

    def _run(self, portfolio, options: JobOptions, watch: Watch, folder: str | None = None):
        """Checks a portfolio job and sends its tasks; returns its tally and a generator of the pieces of the
        priced table in order (the tally is complete once the generator is exhausted), or None for the pieces
        when the workers wrote them as parts of ``folder`` (a folder being built) themselves."""
        workers = self._cut_for(options.precision, watch)
        if self._read_on_workers(portfolio):
            return self._price_file(str(portfolio), options, workers, watch, folder)
        portfolio = LATTICE.read(portfolio, options)
        watch.check()
        return self._done(LATTICE.split(portfolio, workers), watch)

    def _cut_for(self, precision: str, watch: Watch) -> Workers:
        """The cluster a job is cut for: its workers now, and the device and model of the first to answer
        (it speaks for all) with ``gpu_processes``, the most workers that share one GPU; waits up to
        ``no_workers_timeout`` seconds for one to join."""
        if precision not in self._workers:
            try:
                self.client.wait_for_workers(1, timeout=self.no_workers_timeout)
            except TimeoutError:
                raise NoWorkersError(
                    f"no worker joined the cluster at {self.client.scheduler.address} within "
                    f"{self.no_workers_timeout:g} s (cluster.no_workers_timeout)"
                ) from None
            watch.check()
            described = list(self.client.run(describe_worker, precision).values())
            places = collections.Counter(d["place"] for d in described if d["place"] is not None)
            self._workers[precision] = {**described[0], "gpu_processes": max(places.values(), default=1)}
        worker = self._workers[precision]
        return Workers(self.workers, self.chunks_per_worker, worker["gpu"], worker["model"], worker["gpu_processes"])

    def _read_on_workers(self, portfolio) -> bool:
        if isinstance(portfolio, pd.DataFrame) or table_format(portfolio) not in ("parquet", FOLDER):
            return False
        import pyarrow.parquet as pq

        try:
            rows = sum(pq.ParquetFile(part).metadata.num_rows for part in parquet_files(portfolio))
        except (OSError, ValueError):  # not a Parquet table: the client's reading says why
            return False
        return rows >= self.read_on_workers_rows

    def _show_progress(self, futures, label: str) -> None:
        """A progress bar of ``futures`` on the terminal (when asked for), drawn while the job goes on."""
        if self.progress:
            follow(self.client, futures, label)

    def _price_file(self, path: str, options: JobOptions, workers: Workers, watch: Watch, folder: str | None = None):
        """Prices a big Parquet file (or folder of parts) that the workers read: its tally and a generator of the
        priced slices in file order (the tally is complete once the generator is exhausted); with ``folder``,
        the tally alone (and None), each worker writing the priced table of its slices as parts of that
        folder."""
        import pyarrow.parquet as pq

        files = [(part, pq.ParquetFile(part).metadata) for part in parquet_files(path)]
        groups = [[m.row_group(g).num_rows for g in range(m.num_row_groups)] for _, m in files]
        rows = sum(map(sum, groups))
        check_columns({name for _, m in files for name in m.schema.names}, rows, options)
        market = options.market()  # read and checked here, before any task, and shipped to the workers
        slices = table_slices(
            [(part, sizes) for (part, _), sizes in zip(files, groups)],
            chunk_count(rows, workers.count, workers.chunks_per_worker),
            opening=workers.count if workers.gpu else 0,
        )
        token = watch.job
        figures = dict(
            name=path, rows=rows, chunks=len(slices), scenarios=len(market.curve_sets), predicted_seconds=0.0
        )
        self._post(token, **figures)

        def submit(run, *args, key: str, priority: int = 0):
            return watch.submit(run_chunk, run, *args, key=key, priority=priority)

        read = [
            submit(
                read_chunk,
                piece,
                market,
                options,
                workers.model,
                workers.gpu,
                workers.gpu_processes,
                key=f"read-chunk-{i}-{token}",
                priority=-i,
            )
            for i, piece in enumerate(slices)
        ]
        written = None
        if folder is not None:  # each slice priced and written as soon as it is read, while the rest are checked
            name = task_name([options.engine], options.real)
            written = [
                submit(write_read_chunk, f, [], folder, i, len(slices), key=f"{name}-{i}-{token}", priority=-i)
                for i, f in enumerate(read)
            ]
        inspected = [
            submit(inspect_chunk, f, key=f"inspect-chunk-{i}-{token}", priority=-i) for i, f in enumerate(read)
        ]
        self._show_progress(inspected, "reading and checking")
        summaries = watch.gather(inspected)
        problems, duplicates = file_problems(path, options, summaries, slices)
        self._post(token, invalid=len({p.where for p in problems + duplicates}), **figures)
        del inspected
        tally = Tally(rows, len(market.curve_sets))
        if written is not None:
            # a slice holding ids that other slices hold is priced and written again, those rows made invalid,
            # after its first writing
            for i, f in enumerate(read):
                mine = [d for d in duplicates if d.piece == i]
                if mine:
                    written[i] = submit(
                        write_read_chunk,
                        f,
                        mine,
                        folder,
                        i,
                        len(slices),
                        written[i],
                        key=dashboard.again_key(f"{name}-{i}-{token}"),
                    )
            del read
            self._show_progress(written, "pricing and writing")
            for part in watch.gather(written):
                tally.absorb(part)
            return tally, None
        # slices are priced in file order (Dask would otherwise start with the last submitted), so that the
        # client writes each one as it comes instead of waiting for the first
        priced = [
            submit(
                price_read_chunk,
                f,
                [d for d in duplicates if d.piece == i],
                key=f"{task_name(s['engines'] or ['none'], options.real)}-{i}-{token}",
                priority=-i,
            )
            for i, (f, s) in enumerate(zip(read, summaries))
        ]
        del read
        self._show_progress(priced, "pricing")
        if market.scenarios is None:
            return tally, (
                tally.add(frame)
                for frame in self._ordered(priced, watch, lambda i, columns: with_columns(slices[i], columns))
            )
        return tally, (
            tally.add(frame) for frame in by_scenario(self._ordered(priced, watch), slices, len(market.curve_sets))
        )

    @staticmethod
    def _ordered(futures, watch: Watch, then=None):
        """The results of ``futures`` in their order (``then(i, result)`` of each, when given), each released
        once handed on; the next result is fetched from its worker (and ``then`` applied) while the caller uses
        this one (writes it, say). Whatever stops the caller (an error, a signal, the generator closed early)
        cancels the job before the fetching thread is joined."""

        def fetched(i: int):
            result = watch.result(futures[i])
            return result if then is None else then(i, result)

        with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="distprice-fetch") as fetch:
            try:
                ahead = fetch.submit(fetched, 0) if futures else None
                for i in range(len(futures)):
                    frame = ahead.result()
                    futures[i] = None
                    ahead = fetch.submit(fetched, i + 1) if i + 1 < len(futures) else None
                    yield frame
            except BaseException:
                watch.cancel()
                raise

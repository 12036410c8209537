"""Pricing on a Dask cluster: :class:`Pricer` sends a job's tasks (:mod:`~.tasks`) and gathers its priced table.

A job runs in stages, each a kind of task named for the dashboard's task stream and progress page:

- a portfolio the client holds (a DataFrame, a CSV file, a Parquet file under ``read_on_workers_rows``) is
  validated on the client before any task is sent, sorted and cut into chunks of equal cost
  (:mod:`distprice.planner`); each chunk goes out as one ``price_<engine>_<precision>`` task (e.g.
  ``price_gpu_flat_fp64``) carrying its instruments and the plan the inspector made for the workers' device;
  a ``gather`` task puts the prices back in portfolio order;
- a bigger Parquet file, or folder of Parquet parts, is read by the workers: ``read-chunk`` tasks each read
  and check a slice of its rows, ``inspect-chunk`` tasks send the client only what it needs (problems,
  id hashes, the plan's engines), and once every slice is known valid the ``price_*`` tasks price the slices
  where they lie. The client holds the plan and one priced slice at a time, not the portfolio.

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
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import InvalidInputError, NoWorkersError, Problem
from ..execute import choose_plan
from ..inspector import CostModel
from ..job import Job, JobOptions, Summary, Tally, check_columns, echoed, exercise_table, prepare_job
from ..lattice.dated import unmatched_lines
from ..lattice.instruments import DUPLICATE_ID, duplicated_ids
from ..models import heston_surfaces, heston_tables, model_table, read_quotes, swaption_sets
from ..montecarlo import combine, read_inputs, validate, with_options
from ..planner import FileSlice, chunk_count, partition, table_slices, work_grid
from ..tables import (FOLDER, check_output, new_folder, parquet_files, read_table, table_format, to_pandas,
                      write_parts, write_tables)
from . import dashboard
from .config import ClusterConfig
from .metrics import PricingMetrics
from .progress import follow
from .start import cluster_config, default_chunks, start
from .tasks import (describe_worker, fit_heston_surface, fit_hull_white_model, gather, inspect_chunk, mc_task_name,
                    price_chunk, price_paths, price_read_chunk, read_chunk, read_slice, task_name, write_read_chunk)
from .watch import Watch, connected

log = logging.getLogger(__name__)

READ_ON_WORKERS_ROWS = 1_000_000
"""Parquet portfolios of at least this many rows are read by the workers, not the client."""
PATH_BLOCK = 2048
"""Monte-Carlo path ranges start at multiples of this many paths: any cut into such ranges gives the same bits."""


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

    def __init__(self, cluster=None, *, chunks_per_worker: int | None = None,
                 read_on_workers_rows: int = READ_ON_WORKERS_ROWS, progress: bool = False):
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
            log.info("cluster %s: %d worker%s%s", config.kind, workers, "s" * (workers != 1),
                     f", dashboard: {self.dashboard_link}, this job: {self.page}" if self.page else "")
        self.last_job: str | None = None
        """The id of the latest job (:func:`.dashboard.job_workers` gives what each worker did of it)."""
        self._posted: set[str] = set()
        self.chunks_per_worker = chunks_per_worker or default_chunks(config)
        self.read_on_workers_rows = read_on_workers_rows
        self.progress = progress
        self._workers: dict[str, dict] = {}
        self._submitted = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="distprice-job")

    def __enter__(self) -> "Pricer":
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
        return self.client.dashboard_link if self.client.scheduler_info().get("services", {}).get("dashboard") \
            else None

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
        inputs = {"portfolio": portfolio, "curves": curves,
                  **{name: options.get(name) for name in ("scenarios", "exercise_schedule", "models")}}
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

    def price_mc(self, inputs, *, paths: int | None = None, precision: str | None = None,
                 engine: str = "auto") -> pd.DataFrame:
        """Prices the Monte-Carlo jobs of ``inputs`` on the cluster: the arguments and the table of
        :func:`distprice.price_mc` (``chunks`` aside: each job's paths are cut into ``chunks_per_worker``
        ranges per worker, each a ``mc_paths_<engine>_<precision>`` task). The ranges start at multiples of
        PATH_BLOCK paths, so the prices are the same bits on any number of workers; jobs share the cluster."""
        jobs = [with_options(job, paths=paths, precision=precision) for job in validate(read_inputs(inputs))]
        with self._watched() as watch:
            return self._price_paths(jobs, engine, watch)

    def _price_paths(self, jobs, engine: str, watch: Watch) -> pd.DataFrame:
        worker = self._worker("fp64", watch)
        token = watch.job
        tick = time.perf_counter()
        submitted = []
        ranges_of = []
        for job in jobs:
            per_range = -(-job.paths // (max(self.workers, 1) * self.chunks_per_worker))
            per_range = -(-per_range // PATH_BLOCK) * PATH_BLOCK
            ranges = [(first, min(per_range, job.paths - first)) for first in range(0, job.paths, per_range)]
            ranges_of.append(ranges)
        self._post(token, name="monte carlo: " + ", ".join(job.name for job in jobs), rows=len(jobs),
                   chunks=sum(map(len, ranges_of)), predicted_seconds=0.0)
        used = ("gpu" if worker["gpu"] else "cpu") if engine == "auto" else engine
        for job, ranges in zip(jobs, ranges_of):
            futures = [watch.submit(price_paths, job, first, count, used,
                                    key=f"{mc_task_name(used, job.precision)}-{job.name}-{i}-{token}")
                       for i, (first, count) in enumerate(ranges)]
            submitted.append((job, used, futures))
        self._show_progress([f for _, _, futures in submitted for f in futures], "pricing paths")
        rows = []
        for job, used, futures in submitted:
            estimate = combine(watch.gather(futures))
            for m, model in enumerate(job.models):
                rows.append(dict(job=job.name, model=model, contract=job.contract.name, price=estimate.price[m],
                                 stderr_batches=estimate.stderr_batches[m], paths=job.paths,
                                 precision=job.precision, directions=job.directions_source, engine=used,
                                 chunks=estimate.ranges, seconds=time.perf_counter() - tick))
        return pd.DataFrame(rows)

    def calibrate_heston(self, quotes, **options) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Fits every Heston surface of ``quotes`` at once, one ``fit_heston`` task each: the arguments (but
        ``progress``) and the tables of :func:`distprice.calibrate_heston`."""
        table = read_quotes(quotes) if not isinstance(quotes, pd.DataFrame) else quotes
        surfaces = heston_surfaces(table)
        with self._watched() as watch:
            self._worker("fp64", watch)
            futures = [watch.submit(fit_heston_surface, surface, options, key=f"fit_heston-{i}-{watch.job}")
                       for i, surface in enumerate(surfaces)]
            self._show_progress(futures, "fitting surfaces")
            return heston_tables(table, surfaces, watch.gather(futures))

    def calibrate_hull_white(self, quotes, curves) -> pd.DataFrame:
        """Fits every Hull-White model of ``quotes`` at once, one ``fit_hull_white`` task each: the table of
        :func:`distprice.calibrate_hull_white`."""
        table = read_table(quotes) if not isinstance(quotes, pd.DataFrame) else quotes
        with self._watched() as watch:
            self._worker("fp64", watch)
            futures = [watch.submit(fit_hull_white_model, swaptions, key=f"fit_hull_white-{i}-{watch.job}")
                       for i, swaptions in enumerate(swaption_sets(table, curves))]
            self._show_progress(futures, "fitting models")
            return model_table(watch.gather(futures))

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
        """Checks a job and sends its tasks; returns its tally and a generator of the pieces of the priced
        table in order (the tally is complete once the generator is exhausted), or None for the pieces when
        the workers wrote them as parts of ``folder`` (a folder being built) themselves."""
        worker = self._worker(options.precision, watch)
        if self._read_on_workers(portfolio):
            return self._price_file(str(portfolio), options, worker, watch, folder)
        job = prepare_job(portfolio, options)
        watch.check()
        name = f"a table of {len(job.table)} rows" if isinstance(portfolio, pd.DataFrame) else str(portfolio)
        return self._price_job(job, options.engine, worker, watch, name)

    def _worker(self, precision: str, watch: Watch) -> dict:
        """The device and model of the cluster's workers (the first to answer speaks for all), and
        ``gpu_processes``: the most workers that share one GPU; waits up to ``no_workers_timeout`` seconds for
        one to join."""
        if precision not in self._workers:
            try:
                self.client.wait_for_workers(1, timeout=self.no_workers_timeout)
            except TimeoutError:
                raise NoWorkersError(f"no worker joined the cluster at {self.client.scheduler.address} within "
                                     f"{self.no_workers_timeout:g} s (cluster.no_workers_timeout)") from None
            watch.check()
            described = list(self.client.run(describe_worker, precision).values())
            places = collections.Counter(d["place"] for d in described if d["place"] is not None)
            self._workers[precision] = {**described[0], "gpu_processes": max(places.values(), default=1)}
        return self._workers[precision]

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

    def _price_job(self, job: Job, engine: str, worker: dict, watch: Watch, name: str):
        """Prices a validated job's valid rows in cost-balanced chunks, scenario block by scenario block; its
        tally and a generator of the priced table's pieces, in order."""
        instruments = job.instruments()
        geometry = instruments.geometry
        sets = job.market.curve_sets
        row_chunks, blocks = work_grid(len(instruments), len(sets), self.workers, self.chunks_per_worker)
        chunks = partition(geometry.width, geometry.height, row_chunks)
        tally = Tally(len(job.table), len(sets))
        if not chunks:
            empty = np.zeros((len(sets), 0))
            measured = job.measure()  # of no rows: the columns, empty
            return tally, self._frames(job, [(empty, empty, np.empty(0, dtype=object), measured)],
                                       [range(len(sets))], tally)
        model, token = CostModel.from_json(worker["model"]), watch.job
        pieces = [instruments.take(p) for p in chunks]
        quotes = job.valid_quotes()
        plans = [choose_plan(piece, engine, job.real, model=model, gpu=worker["gpu"],
                             gpu_processes=worker["gpu_processes"]) for piece in pieces]
        self._post(token, name=name, rows=len(job.table), invalid=len(job.table) - len(instruments), scenarios=len(sets),
                   chunks=len(pieces) * len(blocks), node_steps=instruments.node_steps * len(sets),
                   predicted_seconds=sum(p.seconds for p in plans) * len(sets) / max(self.workers, 1))
        gathered = []
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*large graph.*")
            for b, block in enumerate(blocks):
                futures = [watch.submit(
                    price_chunk, piece, sets[block.start:block.stop], plan.parts, job.real, job.risk,
                    None if quotes is None else quotes.take(rows),
                    key=f"{task_name([p.engine for p in plan.parts], job.real)}-{b}-{i}-{token}",
                    priority=-b) for i, (piece, plan, rows) in enumerate(zip(pieces, plans, chunks))]
                gathered.append(watch.submit(gather, chunks, *futures, key=f"gather-{b}-{token}", priority=-b))
        self._show_progress(gathered, "pricing")
        return tally, self._frames(job, self._ordered(gathered, watch), blocks, tally)

    @staticmethod
    def _frames(job: Job, prices, blocks: list[range], tally: Tally):
        """The priced table's pieces from the (bond, option, engines) of each scenario block, in order."""
        for (bond, option, engines, measured), block in zip(prices, blocks):
            for frame in job.priced_frames(bond, option, engines, first_set=block.start, measured=measured):
                if job.market.scenarios is None:
                    frame.index = job.table.index
                yield tally.add(frame)

    def _price_file(self, path: str, options: JobOptions, worker: dict, watch: Watch, folder: str | None = None):
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
        workers = self.workers
        slices = table_slices([(part, sizes) for (part, _), sizes in zip(files, groups)],
                              chunk_count(rows, workers, self.chunks_per_worker),
                              opening=workers if worker["gpu"] else 0)
        token = watch.job
        figures = dict(name=path, rows=rows, chunks=len(slices), scenarios=len(market.curve_sets),
                       predicted_seconds=0.0)
        self._post(token, **figures)
        read = [watch.submit(read_chunk, piece, market, options, worker["model"], worker["gpu"],
                             worker["gpu_processes"], key=f"read-chunk-{i}-{token}", priority=-i)
                for i, piece in enumerate(slices)]
        written = None
        if folder is not None:  # each slice priced and written as soon as it is read, while the rest are checked
            name = task_name([options.engine], options.real)
            written = [watch.submit(write_read_chunk, f, [], folder, i, len(slices), key=f"{name}-{i}-{token}",
                                    priority=-i) for i, f in enumerate(read)]
        inspected = [watch.submit(inspect_chunk, f, key=f"inspect-chunk-{i}-{token}", priority=-i)
                     for i, f in enumerate(read)]
        self._show_progress(inspected, "reading and checking")
        summaries = watch.gather(inspected)
        if options.exercise_schedule is not None:  # market data of the whole job: every row must name a row
            unmatched = unmatched_lines(exercise_table(options.exercise_schedule),
                                        np.concatenate([s["schedule_lines"] for s in summaries]))
            if unmatched:
                raise InvalidInputError(unmatched)
        problems = [p for s in summaries for p in s["problems"]]
        duplicates = _duplicate_problems(path, np.concatenate([s["id_hashes"] for s in summaries]), slices)
        if (problems or duplicates) and options.on_invalid == "strict":
            raise InvalidInputError(problems + duplicates)
        self._post(token, invalid=len({p.where for p in problems + duplicates}), **figures)
        del inspected
        tally = Tally(rows, len(market.curve_sets))
        if written is not None:
            # a slice holding ids that other slices hold is priced and written again, those rows made invalid,
            # after its first writing
            for i, f in enumerate(read):
                mine = [d for d in duplicates if d.piece == i]
                if mine:
                    written[i] = watch.submit(write_read_chunk, f, mine, folder, i, len(slices), written[i],
                                              key=dashboard.again_key(f"{name}-{i}-{token}"))
            del read
            self._show_progress(written, "pricing and writing")
            for part in watch.gather(written):
                tally.absorb(part)
            return tally, None
        # slices are priced in file order (Dask would otherwise start with the last submitted), so that the
        # client writes each one as it comes instead of waiting for the first
        priced = [watch.submit(price_read_chunk, f, [d for d in duplicates if d.piece == i],
                                     key=f"{task_name(s['engines'] or ['none'], options.real)}-{i}-{token}",
                                     priority=-i)
                  for i, (f, s) in enumerate(zip(read, summaries))]
        del read
        self._show_progress(priced, "pricing")
        if market.scenarios is None:
            def whole(i: int, priced: pd.DataFrame) -> pd.DataFrame:  # the slice's own columns, read here
                return echoed(read_slice(slices[i]), priced)

            return tally, (tally.add(frame) for frame in self._ordered(priced, watch, whole))
        return tally, (tally.add(frame) for frame in self._by_scenario(self._ordered(priced, watch), slices,
                                                                       len(market.curve_sets)))

    @staticmethod
    def _by_scenario(priced, slices: list[FileSlice], scenarios: int):
        """The priced table of a file's slices in the order of a priced table with scenarios: every row under
        the first scenario, then under the second... ``priced``: each slice's priced columns under every
        scenario in turn; they are held (the portfolio's columns are not: each slice is read again per
        scenario)."""
        held = list(priced)
        for s in range(scenarios):
            for piece, frame in zip(slices, held):
                yield echoed(read_slice(piece), frame.iloc[s * piece.rows:(s + 1) * piece.rows])

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


@dataclass(frozen=True)
class _DuplicateId(Problem):
    piece: int = -1
    """The slice of the file the row is in (``position`` counts from the slice's first row)."""


def _duplicate_problems(path: str, hashes: np.ndarray, slices: list[FileSlice]) -> list[_DuplicateId]:
    """Problems for rows of a big file whose id another row also holds (the client reads only those ids)."""
    import pyarrow.parquet as pq

    def ids_at(positions):  # a folder's files are read in parquet_files' order, the order its slices number rows
        return to_pandas(pq.read_table(path, columns=["id"]).column("id").take(positions))

    duplicated = duplicated_ids(hashes, ids_at)
    if not len(duplicated):
        return []
    starts = np.array([s.first_row for s in slices])
    problems = []
    for position, label in zip(duplicated, ids_at(duplicated)):
        piece = int(np.searchsorted(starts, position, side="right") - 1)
        problems.append(_DuplicateId(int(position - starts[piece]), f"row {position + 1} (id {label!r})",
                                     "id", DUPLICATE_ID, piece))
    return problems

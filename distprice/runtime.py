"""Pricing on a Dask cluster: clusters from a config, the tasks of a job, and :class:`Pricer`.

A job runs in stages, each a kind of task named for the dashboard's task stream and progress page:

- a portfolio the client holds (a DataFrame, a CSV file, a Parquet file under ``read_on_workers_rows``) is
  validated on the client before any task is sent, sorted and cut into chunks of equal cost
  (:mod:`distprice.planner`); each chunk goes out as one ``price_<engine>_<precision>`` task (e.g.
  ``price_gpu_flat_fp64``; Dask's task names keep no word holding a digit, hence the underscores) carrying
  its rows and the plan the inspector made for the workers' device; a ``gather`` task puts the prices
  back in portfolio order;
- a bigger Parquet file is read by the workers: ``read-chunk`` tasks each read and check a slice of its row
  groups, ``inspect-chunk`` tasks send the client only what it needs (problems, id hashes, the plan's
  engines), and once every slice is known valid the ``price_*`` tasks price the slices where they lie. The
  client holds the plan and one priced slice at a time, not the portfolio.

Tasks carry their inputs (or read them again), so the scheduler can run a lost worker's tasks elsewhere and
every row is priced exactly once.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import importlib.util
import os
import threading
import time
import uuid
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .config import JOBQUEUE_KINDS, ClusterConfig, Config, load_config
from .engines import choose_plan, fixed_plan, gpu_available, price_parts
from .inspector import CostModel
from .instruments import DUPLICATE_ID, Limits, duplicated_ids, id_hashes, prepare
from .job import Job, market, prepare_job
from .metrics import PricingMetrics, log_pricing
from .planner import FileSlice, chunk_count, file_slices, partition, work_grid
from .errors import InvalidInputError, Problem, SchedulerUnreachableError
from .tables import table_format, write_tables

READ_ON_WORKERS_ROWS = 1_000_000
"""Parquet portfolios of at least this many rows are read by the workers, not the client."""



# ---- clusters ----

def default_cluster() -> ClusterConfig:
    """The embedded default: a local cluster sized to this machine, one worker per GPU when GPUs are visible
    (and dask-cuda is installed), else one single-threaded worker per core."""
    cuda = gpu_available() and importlib.util.find_spec("dask_cuda") is not None
    return ClusterConfig(kind="local-cuda" if cuda else "local")


def start(config: ClusterConfig):
    """A client on the cluster ``config`` describes, and what to close after it (a cluster it started or None).

    Raises :class:`SchedulerUnreachableError` when a scheduler address does not answer within
    ``config.timeout`` seconds. Batch kinds (``slurm``, ``pbs``) submit ``jobqueue.jobs`` jobs and wait for the
    first one's workers; RuntimeError when none joins within ``jobqueue.start_timeout`` seconds (the jobs are
    cancelled then).
    """
    from distributed import Client, LocalCluster

    security = config.dask_security()
    if config.kind == "address":
        try:
            return Client(config.address, security=security, timeout=config.timeout), None
        except (OSError, TimeoutError) as error:
            raise SchedulerUnreachableError(
                f"cannot reach the scheduler at {config.address} within {config.timeout:g} s: {error}") from None
    if config.kind in JOBQUEUE_KINDS:
        from .jobqueue import build_cluster

        cluster = build_cluster(config)
        client = Client(cluster, security=security)
        cluster.scale(jobs=config.jobqueue.jobs)
        try:
            client.wait_for_workers(1, timeout=config.jobqueue.start_timeout)
        except TimeoutError:
            client.close()
            cluster.close()
            raise RuntimeError(
                f"no {config.kind} job started its workers within {config.jobqueue.start_timeout:g} s; the jobs "
                f"were cancelled. They may have waited in the queue (raise cluster.jobqueue.start_timeout) or "
                f"failed (see their output files)") from None
        return client, cluster
    options = dict(threads_per_worker=config.threads_per_worker, memory_limit=config.memory_limit,
                   dashboard_address=config.dashboard_address, security=security)
    if config.kind == "local-cuda":
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError:
            raise RuntimeError("cluster kind local-cuda needs dask-cuda: pip install 'distprice[gpu]'") from None
        cluster = LocalCUDACluster(n_workers=config.n_workers, **options)
    else:
        cluster = LocalCluster(n_workers=config.n_workers or os.cpu_count(), processes=config.processes,
                               **options)
    return Client(cluster, security=security), cluster


def cluster_config(cluster) -> ClusterConfig:
    """The cluster config a ``cluster`` argument names: None (:func:`default_cluster`), a config file, a
    scheduler address (``tcp://host:8786``, ``tls://...``), a :class:`Config` or a :class:`ClusterConfig`."""
    if cluster is None:
        return default_cluster()
    if isinstance(cluster, Config):
        return cluster.cluster
    if isinstance(cluster, ClusterConfig):
        return cluster
    if isinstance(cluster, (str, os.PathLike)) and "://" in str(cluster):
        return ClusterConfig(kind="address", address=str(cluster))
    if isinstance(cluster, (str, os.PathLike)):
        return load_config(cluster).cluster
    raise TypeError(f"cluster must be None, a config file, an address, a Config or a distributed.Client, "
                    f"not {type(cluster).__name__}")


# ---- what runs on the workers ----

def _describe_worker(precision: str) -> dict:
    """The device of the worker this runs on and the inspector's model for it."""
    from .calibration import current_model
    from .engines.gpu import device_name

    gpu = gpu_available()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = current_model(precision, gpu)
    return {"gpu": gpu, "device": device_name() if gpu else "cpu", "model": model.to_json()}


def _use_worker_threads() -> None:
    """The CPU engine uses as many threads as its Dask worker has, not every core of the machine."""
    import numba
    from distributed import get_worker

    with contextlib.suppress(ValueError):
        numba.set_num_threads(max(1, min(get_worker().state.nthreads, numba.config.NUMBA_NUM_THREADS)))


def _price_chunk(rows: pd.DataFrame, curve_sets, parts, precision: str):
    """Prices the canonical ``rows`` of a chunk as ``parts`` say; bond, option (curve sets x rows), engines."""
    from .lattice import tree_geometry

    _use_worker_threads()
    tick = time.perf_counter()
    bond, option, kernel_seconds = price_parts(rows, curve_sets, parts, precision)
    engines = np.empty(len(rows), dtype=object)
    for part in parts:
        engines[part.rows] = part.engine
    geometry = tree_geometry(rows["mean_reversion"], rows["volatility"], rows["maturity"], rows["steps_per_year"])
    node_steps = 2.0 * float((geometry.width.astype(np.float64) * geometry.height).sum()) * len(curve_sets)
    log_pricing(len(rows) * len(curve_sets), node_steps, time.perf_counter() - tick, kernel_seconds,
                "+".join(dict.fromkeys(p.engine for p in parts)))
    return bond, option, engines


def _gather(positions, *chunks):
    """The prices of every chunk, put back in the order of the valid rows (``positions`` of each chunk)."""
    scenarios = chunks[0][0].shape[0]
    n = sum(len(p) for p in positions)
    bond, option = np.full((scenarios, n), np.nan), np.full((scenarios, n), np.nan)
    engines = np.empty(n, dtype=object)
    for rows, (b, o, e) in zip(positions, chunks):
        bond[:, rows], option[:, rows], engines[rows] = b, o, e
    return bond, option, engines


@dataclass
class _ReadChunk:
    """A slice of a big file as a worker read and checked it, and the plan to price it."""

    job: Job
    parts: list
    rows: int


def _read_chunk(piece: FileSlice, curves, scenarios, shifts_bp, engine: str, precision: str, limits: Limits,
                model_json: str, gpu: bool) -> _ReadChunk:
    import pyarrow.parquet as pq

    table = pq.ParquetFile(piece.path).read_row_group(piece.row_group).slice(piece.start, piece.rows).to_pandas()
    table.index = pd.RangeIndex(piece.first_row, piece.first_row + len(table))
    chosen = market(curves, scenarios, shifts_bp)
    prepared = prepare(table, chosen.base, limits, first_row=piece.first_row, unique_ids=False)
    job = Job(table, prepared, chosen, precision)
    geometry = prepared.geometry
    valid = prepared.valid
    plan = choose_plan(geometry.width[valid], geometry.height[valid], engine, precision,
                       model=CostModel.from_json(model_json), gpu=gpu)
    return _ReadChunk(job, plan.parts, len(table))


def _inspect_chunk(chunk: _ReadChunk) -> dict:
    """What the client needs of a slice read by a worker: its problems, id hashes and the plan's engines."""
    ids = chunk.job.prepared.table["id"]
    return {"problems": chunk.job.prepared.problems, "id_hashes": id_hashes(ids),
            "engines": [p.engine for p in chunk.parts]}


def _price_read_chunk(chunk: _ReadChunk, problems: list[Problem]) -> pd.DataFrame:
    """The priced rows of a slice read by a worker, with the problems found across slices (duplicate ids)."""
    job = chunk.job.with_problems(problems)
    rows = job.valid_rows
    parts = chunk.parts
    if problems:  # rows left the valid set: the one engine of the plan prices the ones that remain
        parts = fixed_plan(parts[0].engine, len(rows)).parts if parts else []
    bond, option, engines = _price_chunk(rows, job.market.curve_sets, parts, job.precision)
    return job.priced(bond, option, engines)


def _task_name(engines, precision: str) -> str:
    return "price_" + "_".join(e.replace("-", "_") for e in dict.fromkeys(engines)) + f"_{precision}"


# ---- the client ----

@dataclass(frozen=True)
class Summary:
    """What a job did: rows of the portfolio, rows priced, node-steps (all scenarios), seconds, workers."""

    rows: int
    priced: int
    node_steps: float
    seconds: float
    workers: int
    engines: dict

    def line(self) -> str:
        rate = self.node_steps / self.seconds if self.seconds > 0 else 0.0
        engines = ", ".join(f"{k} {v}" for k, v in self.engines.items()) or "none"
        where = f"on {self.workers} workers" if self.workers else "in this process"
        return (f"priced {self.priced} of {self.rows} rows ({self.rows - self.priced} invalid), "
                f"{self.node_steps:.3e} node-steps in {self.seconds:.2f} s ({rate:.3e} NS/s) {where}, "
                f"engines: {engines}")


class Tally:
    """Running totals of the pieces of a job's priced table (``rows`` of the portfolio, each under
    ``scenarios`` curve sets), for its :class:`Summary`."""

    def __init__(self, rows: int, scenarios: int = 1):
        self.rows, self.scenarios, self.prices, self.node_steps, self.engines = rows, scenarios, 0, 0.0, {}

    def add(self, priced: pd.DataFrame) -> pd.DataFrame:
        done = priced["error"].isna()
        self.prices += int(done.sum())
        self.node_steps += float((2 * priced["width"][done].astype(float) * priced["height"][done].astype(float)).sum())
        for name, count in priced["engine"].value_counts().items():
            self.engines[name] = self.engines.get(name, 0) + int(count)
        return priced

    def summary(self, seconds: float, workers: int) -> Summary:
        per_row = max(self.scenarios, 1)
        return Summary(self.rows, self.prices // per_row, self.node_steps, seconds, workers,
                       {name: count // per_row for name, count in self.engines.items()})


class Pricer:
    """A cluster kept across pricing jobs (scheduled risk runs price many portfolios on one cluster).

    ``cluster``: None (a local cluster sized to this machine), a config file, a scheduler address, a
    :class:`Config` / :class:`ClusterConfig`, or a :class:`distributed.Client` (used as it is, not closed).
    ``chunks_per_worker``: chunks a job is cut into per worker. Use as a context manager::

        with distprice.Pricer("configs/local-cuda.yaml") as pricer:
            for book in books:
                priced = pricer.price(book, curves, shifts_bp=[-100, 0, 100])
    """

    def __init__(self, cluster=None, *, chunks_per_worker: int = 4,
                 read_on_workers_rows: int = READ_ON_WORKERS_ROWS, progress: bool = False):
        from distributed import Client

        if isinstance(cluster, Client):
            self.client, self._cluster, self._owns_client = cluster, None, False
        else:
            self.client, self._cluster = start(cluster_config(cluster))
            self._owns_client = True
        self.client.register_plugin(PricingMetrics())
        self.chunks_per_worker = chunks_per_worker
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
        return len(self.client.scheduler_info()["workers"])

    # -- jobs --

    def price(self, portfolio, curves=None, **options) -> pd.DataFrame:
        """Prices a portfolio on the cluster: the arguments and the table of :func:`distprice.price`."""
        frames = list(self._run(portfolio, curves, **options)[1])
        return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)

    def submit(self, portfolio, curves=None, **options) -> concurrent.futures.Future:
        """Starts :meth:`price` and returns at once: a future of the priced table (``.result()`` waits;
        invalid input raises there)."""
        return self._submitted.submit(self.price, portfolio, curves, **options)

    def run(self, portfolio, curves=None, *, output, **options) -> Summary:
        """Prices a portfolio and writes the priced table to ``output`` (CSV or Parquet) atomically: nothing
        is written when a row is invalid in strict mode or the job fails. Returns what the job did."""
        table_format(output)
        tick = time.perf_counter()
        tally, frames = self._run(portfolio, curves, **options)
        write_tables(frames, output)
        return tally.summary(time.perf_counter() - tick, self.workers)

    def _run(self, portfolio, curves=None, *, engine: str = "auto", precision: str = "fp64",
             on_invalid: str = "strict", limits: Limits = Limits(), scenarios=None, shifts_bp=None):
        """Checks a job and sends its tasks; returns its tally and a generator of the pieces of the priced
        table in order (the tally is complete once the generator is exhausted)."""
        worker = self._worker(precision)
        if self._read_on_workers(portfolio):
            return self._price_file(str(portfolio), curves, scenarios, shifts_bp, engine, precision, on_invalid,
                                    limits, worker)
        job = prepare_job(portfolio, curves, scenarios=scenarios, shifts_bp=shifts_bp, engine=engine,
                          precision=precision, on_invalid=on_invalid, limits=limits)
        return self._price_job(job, engine, worker)

    def _worker(self, precision: str) -> dict:
        """The device and model of the cluster's workers (the first to answer speaks for all)."""
        if precision not in self._workers:
            self.client.wait_for_workers(1, timeout=60)
            self._workers[precision] = next(iter(self.client.run(_describe_worker, precision).values()))
        return self._workers[precision]

    def _read_on_workers(self, portfolio) -> bool:
        if isinstance(portfolio, pd.DataFrame) or table_format(portfolio) != "parquet":
            return False
        import pyarrow.parquet as pq

        return pq.ParquetFile(portfolio).metadata.num_rows >= self.read_on_workers_rows

    def _show_progress(self, futures) -> None:
        """A progress bar of ``futures`` on the terminal (when asked for), drawn while the job goes on."""
        if self.progress:
            from distributed import progress

            threading.Thread(target=progress, args=(futures,), daemon=True, name="distprice-progress").start()

    def _price_job(self, job: Job, engine: str, worker: dict):
        """Prices a validated job's valid rows in cost-balanced chunks, scenario block by scenario block; its
        tally and a generator of the priced table's pieces, in order."""
        rows = job.valid_rows
        geometry = job.prepared.geometry
        width, height = geometry.width[job.prepared.valid], geometry.height[job.prepared.valid]
        sets = job.market.curve_sets
        row_chunks, blocks = work_grid(len(rows), len(sets), self.workers, self.chunks_per_worker)
        chunks = partition(width, height, row_chunks)
        tally = Tally(len(job.table), len(sets))
        if not chunks:
            empty = np.zeros((len(sets), 0))
            return tally, self._frames(job, [(empty, empty, np.empty(0, dtype=object))], [range(len(sets))], tally)
        model, token = CostModel.from_json(worker["model"]), uuid.uuid4().hex
        plans = [choose_plan(width[p], height[p], engine, job.precision, model=model, gpu=worker["gpu"])
                 for p in chunks]
        pieces = [rows.iloc[p].reset_index(drop=True) for p in chunks]
        gathered = []
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*large graph.*")
            for b, block in enumerate(blocks):
                futures = [self.client.submit(
                    _price_chunk, piece, sets[block.start:block.stop], plan.parts, job.precision,
                    key=f"{_task_name([p.engine for p in plan.parts], job.precision)}-{b}-{i}-{token}",
                    priority=-b) for i, (piece, plan) in enumerate(zip(pieces, plans))]
                gathered.append(self.client.submit(_gather, chunks, *futures, key=f"gather-{b}-{token}",
                                                   priority=-b))
        self._show_progress(gathered)
        return tally, self._frames(job, self._ordered(gathered), blocks, tally)

    @staticmethod
    def _frames(job: Job, prices, blocks: list[range], tally: Tally):
        """The priced table's pieces from the (bond, option, engines) of each scenario block, in order."""
        for (bond, option, engines), block in zip(prices, blocks):
            for frame in job.priced_frames(bond, option, engines, first_set=block.start):
                if job.market.scenarios is None:
                    frame.index = job.table.index
                yield tally.add(frame)

    def _price_file(self, path, curves, scenarios, shifts_bp, engine, precision, on_invalid, limits, worker):
        """Prices a big Parquet file that the workers read: its tally and a generator of the priced slices in
        file order (the tally is complete once the generator is exhausted)."""
        import pyarrow.parquet as pq

        metadata = pq.ParquetFile(path).metadata
        groups = [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)]
        sets = len(market(curves, scenarios, shifts_bp).curve_sets)  # checked here, before any task
        slices = file_slices(path, groups, chunk_count(sum(groups), self.workers, self.chunks_per_worker))
        token = uuid.uuid4().hex
        read = [self.client.submit(_read_chunk, piece, curves, scenarios, shifts_bp, engine, precision, limits,
                                   worker["model"], worker["gpu"], key=f"read-chunk-{i}-{token}", priority=-i)
                for i, piece in enumerate(slices)]
        inspected = [self.client.submit(_inspect_chunk, f, key=f"inspect-chunk-{i}-{token}", priority=-i)
                     for i, f in enumerate(read)]
        self._show_progress(inspected)
        summaries = self.client.gather(inspected)
        problems = [p for s in summaries for p in s["problems"]]
        duplicates = _duplicate_problems(path, np.concatenate([s["id_hashes"] for s in summaries]), slices)
        if (problems or duplicates) and on_invalid == "strict":
            self.client.cancel(read + inspected)
            raise InvalidInputError(problems + duplicates)
        del inspected
        # slices are priced in file order (Dask would otherwise start with the last submitted), so that the
        # client writes each one as it comes instead of waiting for the first
        priced = [self.client.submit(_price_read_chunk, f, [d for d in duplicates if d.piece == i],
                                     key=f"{_task_name(s['engines'] or ['none'], precision)}-{i}-{token}",
                                     priority=-i)
                  for i, (f, s) in enumerate(zip(read, summaries))]
        del read
        self._show_progress(priced)
        tally = Tally(sum(groups), sets)
        return tally, (tally.add(frame) for frame in self._ordered(priced))

    @staticmethod
    def _ordered(futures):
        """The results of ``futures`` in their order, each released once handed on; the next result is
        fetched from its worker while the caller uses this one (writes it, say)."""
        with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="distprice-fetch") as fetch:
            ahead = fetch.submit(futures[0].result) if futures else None
            for i in range(len(futures)):
                frame = ahead.result()
                futures[i] = None
                ahead = fetch.submit(futures[i + 1].result) if i + 1 < len(futures) else None
                yield frame



@dataclass(frozen=True)
class _DuplicateId(Problem):
    piece: int = -1
    """The slice of the file the row is in (``position`` counts from the slice's first row)."""


def _duplicate_problems(path: str, hashes: np.ndarray, slices: list[FileSlice]) -> list[_DuplicateId]:
    """Problems for rows of a big file whose id another row also holds (the client reads only those ids)."""
    import pyarrow.parquet as pq

    def ids_at(positions):
        return pq.read_table(path, columns=["id"]).column("id").take(positions).to_pandas()

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

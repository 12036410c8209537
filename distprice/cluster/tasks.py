"""What runs on the workers: each function is one kind of task, named for the dashboard (see
:mod:`~.pricer`). Tasks carry their inputs as plain values (instruments with their geometry, the market, the
plan), so the scheduler can run a lost worker's tasks elsewhere."""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..cuda import device_name, device_place, gpu_available
from ..errors import Problem
from ..execute import choose_plan, fixed_plan, price_parts
from ..inspector import CostModel
from ..job import (Job, JobOptions, Risk, Tally, exercise_lines, exercise_schedule, exercise_table, model_table,
                   read_risk)
from ..lattice.instruments import Instruments, id_hashes, prepare
from ..lattice.quotes import Quotes
from ..models import HestonFit, HullWhiteFit, Surface, Swaptions, fit_hull_white, fit_surface
from ..montecarlo import Job as PathJob
from ..montecarlo import Partial, price_range
from ..planner import FileSlice
from ..precision import precision_name
from ..scenarios import Market
from ..tables import LABEL_COLUMNS, text_columns, to_pandas, write_part
from ..tuning import current_model
from .metrics import log_pricing


def describe_worker(precision: str) -> dict:
    """The device of the worker this runs on, where it is (:func:`~distprice.cuda.device_place`; None without a
    GPU) and the inspector's model for it."""
    gpu = gpu_available()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = current_model(precision, gpu)
    return {"gpu": gpu, "device": device_name() if gpu else "cpu", "place": device_place() if gpu else None,
            "model": model.to_json()}


def _use_worker_threads() -> None:
    """numba's parallel loops (the CPU engine, validation, layout) and Arrow's pool (Parquet reading, columns to
    and from pandas) use as many threads as this Dask worker has: not every core of the machine, and not the one
    thread that Dask's nannies leave Arrow (they start workers with ``OMP_NUM_THREADS=1``, which sizes Arrow's
    pool), which a worker's tasks would otherwise take turns on."""
    import numba
    import pyarrow as pa
    from distributed import get_worker

    try:
        threads = get_worker().state.nthreads
    except ValueError:  # not on a worker
        return
    numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
    if pa.cpu_count() != threads:
        pa.set_cpu_count(threads)


def price_chunk(instruments: Instruments, curve_sets, parts, real, risk: Risk | None = None,
                quotes: Quotes | None = None):
    """Prices the ``instruments`` of a chunk as ``parts`` say; bond, option (curve sets x rows), engines, and
    the chunk's risk measures (on the first curve set, the base; None without ``risk``)."""
    _use_worker_threads()
    tick = time.perf_counter()
    bond, option, kernel_seconds = price_parts(instruments, curve_sets, parts, real)
    engines = np.empty(len(instruments), dtype=object)
    for part in parts:
        engines[part.rows] = part.engine
    log_pricing(len(instruments) * len(curve_sets), instruments.node_steps * len(curve_sets),
                time.perf_counter() - tick, kernel_seconds, "+".join(dict.fromkeys(p.engine for p in parts)))
    measured = None if risk is None else risk.measure(instruments, curve_sets[0], quotes, bond[0], option[0], real)
    return bond, option, engines, measured


def gather(positions, *chunks):
    """The prices (and measures) of every chunk, put back in the order of the valid rows (``positions`` of
    each chunk)."""
    scenarios = chunks[0][0].shape[0]
    n = sum(len(p) for p in positions)
    bond, option = np.full((scenarios, n), np.nan), np.full((scenarios, n), np.nan)
    engines = np.empty(n, dtype=object)
    measured = None if chunks[0][3] is None else \
        {k: np.empty(n, dtype=v.dtype) for k, v in chunks[0][3].items()}
    for rows, (b, o, e, m) in zip(positions, chunks):
        bond[:, rows], option[:, rows], engines[rows] = b, o, e
        for k in measured or ():
            measured[k][rows] = m[k]
    return bond, option, engines, measured


@dataclass
class ReadChunk:
    """A slice of a big file as a worker read and checked it, the plan to price it, and the rows of the job's
    exercise schedule table its ids took (None without one)."""

    job: Job
    parts: list
    schedule_lines: np.ndarray | None = None


def read_slice(piece: FileSlice) -> pd.DataFrame:
    """The rows of a slice of a Parquet portfolio, indexed by their positions in the file (label columns as
    categories, as :func:`~distprice.tables.read_portfolio` reads them)."""
    import pyarrow.parquet as pq

    labels = text_columns(pq.read_schema(piece.path), LABEL_COLUMNS)
    file = pq.ParquetFile(piece.path, read_dictionary=labels or None)
    table = to_pandas(file.read_row_groups(list(piece.groups)).slice(piece.start, piece.rows))
    table.index = pd.RangeIndex(piece.first_row, piece.first_row + len(table))
    return table


def read_chunk(piece: FileSlice, market: Market, options: JobOptions, model_json: str, gpu: bool,
               gpu_processes: int = 1) -> ReadChunk:
    """Reads and checks a slice of a big Parquet portfolio and plans it for this cluster's workers (``gpu`` and
    ``gpu_processes``: :func:`~distprice.execute.choose_plan`'s)."""
    _use_worker_threads()
    table = read_slice(piece)
    schedule = exercise_table(options.exercise_schedule)
    lines = exercise_lines(options.exercise_schedule, table)
    prepared = prepare(table, market.base, options.limits, as_of=options.as_of, curve_sets=market.curve_sets,
                       exercise_schedule=exercise_schedule(schedule, table, lines),
                       models=model_table(options.models), first_row=piece.first_row, unique_ids=False)
    prepared, quotes = read_risk(table, prepared, options.risk, piece.first_row)
    job = Job(table, prepared, market, options.real, options.on_invalid, options.risk, quotes)
    plan = choose_plan(job.instruments(), options.engine, options.real, model=CostModel.from_json(model_json),
                       gpu=gpu, gpu_processes=gpu_processes)
    return ReadChunk(job, plan.parts, lines)


def inspect_chunk(chunk: ReadChunk) -> dict:
    """What the client needs of a slice read by a worker: its problems, id hashes, the plan's engines and the
    rows of the exercise schedule table its ids took."""
    ids = chunk.job.prepared.table["id"]
    return {"problems": chunk.job.prepared.problems, "id_hashes": id_hashes(ids),
            "engines": [p.engine for p in chunk.parts], "schedule_lines": chunk.schedule_lines}


def _price_slice(chunk: ReadChunk, problems: list[Problem]):
    """A slice read by a worker, priced: its job with the problems found across slices (duplicate ids), and the
    bond, option, engines and measures of its valid rows."""
    job = chunk.job.with_problems(problems)
    instruments = job.instruments()
    parts = chunk.parts
    if problems:  # rows left the valid set: the one engine of the plan prices the ones that remain
        parts = fixed_plan(parts[0].engine, len(instruments), parts[0].turns).parts if parts else []
    return job, price_chunk(instruments, job.market.curve_sets, parts, job.real, job.risk, job.valid_quotes())


def price_read_chunk(chunk: ReadChunk, problems: list[Problem]) -> pd.DataFrame:
    """The priced columns of a slice read by a worker (the client, which reads the slice too, puts the
    portfolio's columns back: they need not travel), with the problems found across slices (duplicate ids)."""
    job, (bond, option, engines, measured) = _price_slice(chunk, problems)
    return job.priced(bond, option, engines, measured, echo=False)


def write_read_chunk(chunk: ReadChunk, problems: list[Problem], folder: str, part: int, parts: int,
                     after=None) -> Tally:
    """Prices a slice read by a worker (as :func:`price_read_chunk`) and writes its priced table, its own
    columns and the priced ones, as part ``part`` of the folder being built at ``folder`` (under scenarios,
    parts ``part``, ``part + parts``, ... one per curve set); the slice's tally goes back, not its rows.
    ``after``: an earlier task of the job that must end first (the slice's first writing, which this one
    replaces)."""
    job, (bond, option, engines, measured) = _price_slice(chunk, problems)
    tally = Tally(len(job.table), len(job.market.curve_sets))
    for s, frame in enumerate(job.priced_frames(bond, option, engines, measured=measured)):
        write_part(tally.add(frame), folder, part + s * parts)
    return tally


def task_name(engines, real) -> str:
    """``price_<engine>[_<engine>]_<precision>``: Dask's task names keep no word holding a digit, hence the
    underscores."""
    return "price_" + "_".join(e.replace("-", "_") for e in dict.fromkeys(engines)) + f"_{precision_name(real)}"


def price_paths(job: PathJob, first: int, count: int, engine: str) -> Partial:
    """Prices paths ``first .. first + count - 1`` of a Monte-Carlo job on this worker (``auto``: its GPU if it
    has one); the payoff sums per model and batch."""
    _use_worker_threads()
    return price_range(job, first, count, engine)


def mc_task_name(engine: str, precision: str) -> str:
    """``mc_paths_<engine>_<precision>``, the dashboard's name of a path-range task."""
    return f"mc_paths_{engine}_{precision}"


def fit_heston_surface(surface: Surface, options: dict) -> HestonFit:
    """Fits one Heston surface on this worker (``options``: the keywords of ``fit_surface``), its numba engine on
    the worker's own threads."""
    _use_worker_threads()
    return fit_surface(surface, **options)


def fit_hull_white_model(swaptions: Swaptions) -> HullWhiteFit:
    """Fits one Hull-White model to its swaptions on this worker."""
    return fit_hull_white(swaptions)

"""The Python entry points: ``distprice.price`` (lattice portfolios), ``distprice.price_mc`` (Monte-Carlo
jobs), ``distprice.calibrate_heston`` and ``distprice.calibrate_hull_white`` (model calibration); and the work
of the command line's commands: :func:`run` (price and write), :func:`inspect`, :func:`generate` and
:func:`tune`."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from . import inspector
from .compiling import Compiling, log as compiling_log
from .cuda import device_name, gpu_available
from .curves import load_curves
from .errors import DistpriceError, JobTimeoutError
from .execute import choose_plan, price_parts, stopped_by
from .inspector import CostModel, Inspection, Plan
from .job import Job, JobOptions, Summary, Tally, check_predicted, prepare_job
from .lattice import AUTO, datasets
from .lattice.desk import AS_OF, desk
from .lattice.warm import engine_aside
from .models import calibrate_heston as fit_heston, calibrate_hull_white as fit_hull_white
from .montecarlo import price_mc as price_paths
from .priced import Priced
from .progress import Bar
from .tables import (
    FOLDER,
    LABEL_COLUMNS,
    parquet_files,
    read_portfolio,
    table_format,
    text_columns,
    to_pandas,
    write_table,
)
from .tuning import CPU_DEVICE, current_model, save_model, tune as measure

log = logging.getLogger(__name__)


STARTING = "pricing (the engines compile on their first use here)"
"""The progress bar's label until the first piece is priced."""


def price(portfolio, curves=None, *, cluster=None, progress: bool = False, **options):
    """Price every instrument of ``portfolio`` (a DataFrame or a CSV/Parquet path) on its curve.

    Returns the priced table: every input column and row in input order, plus ``price``, ``value``
    (price * quantity), ``bond_price``, ``option_price``, ``width``, ``height`` (the tree), ``engine`` (what
    priced the row: with ``engine="auto"`` the inspector may split the portfolio) and ``error``. Prices are
    in the units of ``face``. ``options`` are the fields of :class:`~distprice.job.JobOptions`: ``engine``,
    ``precision``, ``on_invalid``, ``limits``, ``scenarios`` and ``shifts_bp``. With
    ``on_invalid="strict"`` any broken rule raises :class:`~distprice.errors.InvalidInputError` (listing
    row, column and rule) before pricing; with ``"report"`` the valid rows are priced and the others come
    back with ``price`` NaN and ``error`` set.

    ``scenarios`` (a ``scenario, curve, t, zero_rate`` table or path) or ``shifts_bp`` (parallel shifts in
    basis points, e.g. ``[-100, 0, 100]``) price every instrument under every scenario: the table then takes the
    ``scenario_table`` form, by default ``long``: ``id, scenario``, the priced columns a scenario changes and
    ``error``, each row's scenarios together (``wide``: a column per scenario; ``full``: every column under
    every scenario). ``cluster`` runs the job on Dask: a cluster config file, a
    scheduler address (``tcp://host:8786``), a :class:`distributed.Client`, or None for this process (see
    :class:`distprice.Pricer` to keep one cluster across jobs). ``progress`` draws a progress bar on stderr
    when it is a terminal. In this process the rows are priced in pieces (a fraction of a second's predicted
    work, and at most about 262 144 rows, whose event tables and engine arrays the next piece reuses), so Ctrl-C
    and ``timeout`` stop the job within a piece's time. A job predicted to take more than ``max_seconds`` of
    pricing (one hour by default) is refused before it starts
    (:class:`~distprice.errors.JobTooLongError`)."""
    checked = JobOptions.of(curves=curves, **options).checked()  # before a cluster is started for nothing
    if cluster is not None:
        from .cluster.pricer import Pricer

        with Pricer(cluster, progress=progress) as pricer:
            return pricer.price(portfolio, curves, **options)
    job, priced, _ = _priced(portfolio, checked, progress)
    return job.table_of(priced)


def _priced(portfolio, checked: JobOptions, progress: bool) -> tuple[Job, Priced, Plan]:
    """Prices a portfolio job in this process (``checked``: its checked options): the job, its priced table as
    columns (:meth:`~distprice.job.Job.priced_columns`) and the plan it followed."""
    deadline = None if checked.timeout is None else time.monotonic() + checked.timeout

    def in_time() -> None:
        if deadline is not None and time.monotonic() > deadline:
            raise JobTimeoutError(f"the job ran past its timeout of {checked.timeout:g} s; nothing was written")

    cpu = checked.engine == "cpu" or (checked.engine == AUTO and not gpu_available())
    aside = engine_aside(checked.precision) if cpu else None  # compiles the engine, if it must, meanwhile
    job = prepare_job(portfolio, checked)
    instruments = job.instruments()
    sets = job.market.curve_sets
    plan = choose_plan(instruments, checked.engine, job.real)
    check_predicted(plan.seconds * len(sets), checked.max_seconds, "in this process", plan.model)
    if aside is not None:
        aside.wait()
    with stopped_by(in_time), Bar(instruments.node_steps * len(sets), STARTING, shown=progress) as bar:
        bond, option, _ = price_parts(
            instruments, sets, plan.parts, job.real, lambda node_steps: bar.update(bar.done + node_steps, "pricing")
        )
        measured = job.measure(bond[0], option[0])
    return job, job.priced_columns(bond, option, plan.engine_of_rows(len(instruments)), measured=measured), plan


def price_mc(
    inputs,
    *,
    paths: int | None = None,
    precision: str | None = None,
    engine: str = "auto",
    chunks: int | None = None,
    cluster=None,
):
    """Price every Monte-Carlo job of ``inputs`` (a folder of ``mc_*`` tables, a FinPar ``input.data`` or
    Futhark ``.in`` file, or a dict of DataFrames): one row per (job, model) with ``price``, ``stderr_batches``,
    ``paths``, ``precision``, ``directions``, ``engine``, ``chunks`` and ``seconds``. ``paths`` and
    ``precision`` override every job's; ``engine`` is ``auto`` (a GPU where there is one), ``reference``,
    ``cpu`` or ``gpu``; ``chunks`` cuts each job's paths into that many ranges (the price does not depend on
    it). ``cluster`` (as for :func:`price`) spreads each job's paths over the cluster's workers."""
    if cluster is not None:
        from .cluster.pricer import Pricer

        with Pricer(cluster) as pricer:
            return pricer.price_mc(inputs, paths=paths, precision=precision, engine=engine)
    return price_paths(inputs, paths=paths, precision=precision, engine=engine, chunks=chunks)


def calibrate_heston(
    quotes,
    *,
    seed: int = 0,
    max_evals: int = 2000,
    population: int = 40,
    quadrature: str = "gl20",
    polish: bool = False,
    engine: str = "auto",
    progress=None,
    cluster=None,
):
    """Fit Heston's five parameters (v0, theta, rho, kappa, eta) to every surface of ``quotes`` (a table or a
    CSV / Parquet / benchmark ``.in`` path: ``maturity`` date, ``strike`` in units of spot, ``implied_vol``,
    optional ``weight`` and ``surface``, and per surface ``valuation_date``, ``spot``, ``rate``, ``dividend``)
    by differential evolution over ``max_evals`` evaluations of a ``population``, from ``seed``; ``polish``
    finishes with bounded least squares; ``quadrature`` is ``gl20`` (the benchmark's) or ``accurate``.
    Returns the surfaces table (``surface, v0, theta, rho, kappa, eta, rmse, objective, n_evals, seconds,
    status, ...``; ``rmse`` in vol points) and the quotes table (every quote with ``market_price``,
    ``model_price`` and ``model_vol_error``). ``progress`` is called once per generation; ``cluster`` fits
    the surfaces at once, one task each."""
    if cluster is not None:
        from .cluster.pricer import Pricer

        with Pricer(cluster) as pricer:
            return pricer.calibrate_heston(
                quotes,
                seed=seed,
                max_evals=max_evals,
                population=population,
                quadrature=quadrature,
                polish=polish,
                engine=engine,
            )
    return fit_heston(
        quotes,
        seed=seed,
        max_evals=max_evals,
        population=population,
        quadrature=quadrature,
        polish=polish,
        engine=engine,
        progress=progress,
    )


def calibrate_hull_white(quotes, curves=None, *, cluster=None):
    """Fit Hull-White ``a`` and ``sigma`` of every model of a swaption quotes table (``model, curve, expiry,
    tenor, fixed_frequency, volatility, volatility_type[, strike, weight]``: a table or path) on ``curves`` (a
    curves table or path, or None for the built-in ``hull``), by bounded Levenberg-Marquardt on the relative
    price errors. Returns the model table ``model, curve, mean_reversion, volatility, rmse, n_quotes, n_evals,
    status``, ready for ``models=`` of :func:`price`."""
    curve_set = load_curves(curves)
    if cluster is not None:
        from .cluster.pricer import Pricer

        with Pricer(cluster) as pricer:
            return pricer.calibrate_hull_white(quotes, curve_set)
    return fit_hull_white(quotes, curve_set)


IN_PROCESS_ROWS = 20_000
"""Portfolios under this many rows are priced in this process by :func:`run` unless a cluster is named."""


@dataclass(frozen=True)
class Run:
    """What :func:`run` did: the job's ``summary``; ``ready``, the :func:`time.perf_counter` at which its cluster
    was up (None: priced in this process); with ``per_worker``, for the job report, else None: ``workers``,
    what each of the cluster's workers priced (:func:`~distprice.cluster.dashboard.job_workers`), ``plan``, the
    plan of the valid rows (on a cluster, its chunks' plans joined), ``chunks``, the valid rows of each chunk
    (positions), and ``chunk_seconds``, each chunk's predicted and actual seconds of pricing on its worker
    (:class:`~distprice.families.work.Outline`; a big file read by the workers tells none of these three)."""

    summary: Summary
    ready: float | None = None
    workers: dict | None = None
    plan: Plan | None = None
    chunks: list | None = None
    chunk_seconds: list[tuple[float, float]] | None = None


def run(
    portfolio,
    *,
    output,
    cluster=None,
    in_process: bool = False,
    progress: bool = False,
    chunks_per_worker: int | None = None,
    per_worker: bool = False,
    **options,
) -> Run:
    """Prices ``portfolio`` (a DataFrame or a CSV/Parquet path) and writes the priced table to ``output``
    atomically, as :meth:`distprice.Pricer.run` does: on ``cluster`` (a config file or
    :class:`~distprice.cluster.config.Config`, a scheduler address, a :class:`distributed.Client`) with
    ``chunks_per_worker`` chunks per worker, Dask's log lines one line each; without one, in this process when
    ``in_process`` or when the portfolio has fewer than IN_PROCESS_ROWS rows, else on a local cluster sized to
    this machine. ``options`` are the fields of :class:`~distprice.job.JobOptions`; ``progress`` draws a
    progress bar on stderr when it is a terminal. While the job runs, the objects alive when it starts are kept
    out of the garbage collector's full passes."""
    if table_format(portfolio) in ("csv", FOLDER):
        portfolio = read_portfolio(portfolio)  # read once: the size test and the job share it
    if cluster is not None or not (in_process or _small(portfolio)):
        from .cluster.dashboard import job_chunks, job_workers
        from .cluster.pricer import Pricer
        from .cluster.start import one_line_logs

        one_line_logs()
        compiled = _warmed(portfolio, cluster, options) if _local(cluster) else 0.0
        with Pricer(cluster, progress=progress, chunks_per_worker=chunks_per_worker) as pricer:
            ready = time.perf_counter()
            with _settled():
                summary = pricer.run(portfolio, output=output, **options)
            outline = pricer.last_outline if per_worker else None
            ran = Run(
                dataclasses.replace(summary, compiled=compiled),
                ready,
                (job_workers(pricer.client, pricer.last_job) or None) if per_worker else None,
                None if outline is None else outline.plan,
                None if outline is None else outline.chunks,
                None if outline is None else outline.times(job_chunks(pricer.client, pricer.last_job)),
            )
        return ran
    log.info("pricing in this process")
    tick = time.perf_counter()
    with _settled(), Compiling(KERNELS) as compiling:
        job, priced, plan = _priced(portfolio, JobOptions.of(**options).checked(), progress)
        tally = Tally(len(job.table), priced.sets)
        write_table(job.table_of(tally.add(priced)), output)
    summary = tally.summary(time.perf_counter() - tick - compiling.seconds, 0)
    return Run(dataclasses.replace(summary, compiled=compiling.seconds), plan=plan if per_worker else None)


KERNELS = "the kernels this job uses"
"""What the log says compiles on a job's first run (:class:`~distprice.compiling.Compiling`)."""
WARM_ROWS = 64
"""Rows of a job that this process prices before a local cluster starts, so that numba compiles their kernels
once, here, and the workers load them (each would compile them, all at once)."""


def _local(cluster) -> bool:
    """Whether ``cluster`` (as :func:`run` takes it) is a cluster on this machine, whose workers read the numba
    cache this process writes."""
    if cluster is None:
        return True
    if isinstance(cluster, str) and "://" not in cluster:
        from .cluster.config import load_config

        cluster = load_config(cluster)
    return getattr(getattr(cluster, "cluster", None), "kind", None) in ("local", "local-cuda")


def _warmed(portfolio, cluster, options: dict) -> float:
    """Prices a job's first rows in this process, a twin of its first row among them (so that the forward
    passes that trees share compile too), with the CPU engine, or only reads and checks them where a GPU will
    price: numba compiles the kernels they use, once, before the workers start. Returns the seconds it spent
    compiling; a problem of those rows is left to the job to report."""
    head = _head(portfolio, WARM_ROWS)
    if "id" in head.columns and len(head):
        ids = head["id"]
        twin = head.iloc[[0]].copy()
        twin["id"] = ids.max() + 1 if pd.api.types.is_numeric_dtype(ids) else f"{ids.iloc[0]}~twin"
        head = pd.concat([head, twin], ignore_index=True)
    with _quiet(), Compiling(KERNELS) as compiling, contextlib.suppress(DistpriceError):
        checked = JobOptions.of(**{**options, "engine": "cpu", "on_invalid": "report", "max_invalid": None}).checked()
        if gpu_available():
            prepare_job(head, checked)
        else:
            _priced(head, checked, False)
    return compiling.seconds


@contextlib.contextmanager
def _quiet():
    """distprice's log lines held back below errors, but for what numba compiles: the rows :func:`_warmed` prices
    are no job of the user's."""
    top = logging.getLogger("distprice")
    level, told = top.level, compiling_log.level
    compiling_log.setLevel(top.getEffectiveLevel())
    top.setLevel(logging.ERROR)
    try:
        yield
    finally:
        top.setLevel(level)
        compiling_log.setLevel(told)


def _head(portfolio, rows: int) -> pd.DataFrame:
    """The first ``rows`` rows of a portfolio (a table, or a Parquet file or folder), read as the job reads them."""
    if isinstance(portfolio, pd.DataFrame):
        return portfolio.head(rows)
    path = parquet_files(portfolio)[0]
    labels = text_columns(pq.read_schema(path), LABEL_COLUMNS)  # as read_portfolio reads them
    first = pq.ParquetFile(path, read_dictionary=labels or None).iter_batches(batch_size=rows)
    return to_pandas(pa.Table.from_batches([next(first)]))


def _small(portfolio) -> bool:
    """A portfolio (a table, or a Parquet file) small enough that starting a cluster would cost more than
    pricing it here."""
    if isinstance(portfolio, str):
        import pyarrow.parquet as pq

        return pq.ParquetFile(portfolio).metadata.num_rows < IN_PROCESS_ROWS
    return len(portfolio) < IN_PROCESS_ROWS


@contextlib.contextmanager
def _settled():
    """Keeps the objects alive when a job starts (modules, a local cluster's scheduler and its state) out of the
    garbage collector's full passes while it runs (``gc.freeze``, then ``gc.unfreeze``): a full pass over them
    stalled this process for 0.1-0.2 s in the middle of a job, and a local cluster's scheduler, which runs here,
    with it."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def inspect(portfolio, curves=None, *, precision: str = "fp64", **options) -> Inspection:
    """The shape of ``portfolio`` (a DataFrame or a CSV/Parquet path) on ``curves`` (a table or path, or None
    for the built-in ``hull``), the rules its invalid rows break, and the plan ``engine="auto"`` follows in this
    process, under the tuned model of this machine for ``precision``. ``options`` are the fields of
    :class:`~distprice.job.JobOptions` that decide which rows are valid, as :func:`price` takes them
    (``as_of``, ``exercise_schedule``, ``models``, ...); the rows are checked as in ``on_invalid="report"``."""
    checked = JobOptions.of(curves=curves, precision=precision, **options, on_invalid="report").checked()
    job = prepare_job(portfolio, checked)
    gpu = gpu_available()
    return inspector.inspect(job.prepared, job.market.base, current_model(precision, gpu), gpu)


@dataclass(frozen=True)
class Generated:
    """What :func:`generate` wrote: the portfolio's ``rows``, the ``paths`` of its tables by what they hold
    (``portfolio``; for the desk book also its ``curves`` and ``exercise_schedule``), and the desk book's
    valuation date ``as_of`` (None for the papers' time-form portfolios)."""

    rows: int
    paths: dict[str, str]
    as_of: str | None = None


def generate(name: str, output: str, *, size: int | None = None, seed: int = 0) -> Generated:
    """Writes synthetic portfolio ``name`` (one of :data:`~distprice.lattice.datasets.DATASETS`; ``size`` rows,
    None for its own size) to ``output`` (.csv or .parquet); the dated desk book's curves and exercise schedule
    go beside it, at ``output``'s stem plus ``.curves`` and ``.exercise``."""
    if name == "desk":
        book = desk(datasets.DEFAULT_SIZES[name] if size is None else size, seed)
        stem, suffix = os.path.splitext(output)
        paths = {
            "portfolio": output,
            "curves": f"{stem}.curves{suffix}",
            "exercise_schedule": f"{stem}.exercise{suffix}",
        }
        for table, path in (
            (book.portfolio, paths["portfolio"]),
            (book.curves, paths["curves"]),
            (book.exercise_schedule, paths["exercise_schedule"]),
        ):
            write_table(table, path)
        return Generated(len(book.portfolio), paths, AS_OF)
    table = datasets.generate(name, size, seed)
    write_table(table, output)
    return Generated(len(table), {"portfolio": output})


def tune(precision: str = "fp64", repeat: int = 3) -> tuple[CostModel, Path]:
    """Measures this machine (its GPU's engines too, with one) with ``repeat`` timed runs per measurement and
    stores the inspector's cost model for its device and ``precision``; the model and where it was stored."""
    gpu = gpu_available()
    model = measure(device_name() if gpu else CPU_DEVICE, precision, gpu=gpu, repeat=repeat)
    return model, save_model(model)


WARM_MEASURES = "dv01,duration,convexity,krd,vega"
"""The risk measures :func:`warm` compiles with ``measures`` (the OAS needs market prices: its root finding is
plain Python over the same kernels)."""


def warm(precisions=("fp64",), measures: bool = False) -> float:
    """Compiles, once, what a job's first run on this install would: the kernels of a few time-form rows (the
    papers' R1) and of a few dated rows (the desk book, with its curves and exercise schedule), with the CPU
    engine (only the host stages where a GPU prices), in each of ``precisions``; with ``measures`` their risk
    measures too (:data:`WARM_MEASURES`). Returns the seconds numba spent compiling (0 when its cache held
    them all). For container images and installs that should start their first job at full speed."""
    dated = desk(WARM_ROWS // 4)
    tables = {
        "r1": datasets.generate("R1", WARM_ROWS // 4),
        "desk": dated.portfolio,
        "curves": dated.curves,
        "calls": dated.exercise_schedule,
    }
    risk = {"measures": WARM_MEASURES} if measures else {}
    seconds = 0.0
    with tempfile.TemporaryDirectory() as folder:
        for suffix in (".csv", ".parquet"):  # as jobs read them: their columns' types make the kernels' signatures
            path = {name: os.path.join(folder, name + suffix) for name in tables}
            for name, table in tables.items():
                write_table(table, path[name])
            dated_options = {"curves": path["curves"], "exercise_schedule": path["calls"], "as_of": AS_OF}
            for precision in precisions:
                for book, options in ((path["r1"], {}), (path["desk"], dated_options)):
                    portfolio = read_portfolio(book) if suffix == ".csv" else book
                    seconds += _warmed(portfolio, None, {**options, **risk, "precision": precision})
    return seconds

"""The Python entry points: ``distprice.price`` (lattice portfolios) and ``distprice.price_mc`` (Monte-Carlo
jobs)."""
from __future__ import annotations

from .execute import price_plan
from .job import JobOptions, prepare_job
from .montecarlo import price_mc as price_paths


def price(portfolio, curves=None, *, cluster=None, **options):
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
    basis points, e.g. ``[-100, 0, 100]``) price every instrument under every scenario: the table is then
    long, with a ``scenario`` column first. ``cluster`` runs the job on Dask: a cluster config file, a
    scheduler address (``tcp://host:8786``), a :class:`distributed.Client`, or None for this process (see
    :class:`distprice.Pricer` to keep one cluster across jobs).
    """
    checked = JobOptions.of(curves=curves, **options).checked()   # before a cluster is started for nothing
    if cluster is not None:
        from .cluster.pricer import Pricer

        with Pricer(cluster) as pricer:
            return pricer.price(portfolio, curves, **options)
    job = prepare_job(portfolio, checked)
    instruments = job.instruments()
    bond, option, plan, _ = price_plan(instruments, job.market.curve_sets, checked.engine, job.real)
    return job.priced(bond, option, plan.engine_of_rows(len(instruments)))


def price_mc(inputs, *, paths: int | None = None, precision: str | None = None, engine: str = "auto",
             chunks: int | None = None, cluster=None):
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

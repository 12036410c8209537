"""The Python entry point: ``distprice.price``."""
from __future__ import annotations

from .engines import price_table
from .instruments import Limits
from .job import ON_INVALID, PRICED_COLUMNS, load_curves, prepare_job

__all__ = ["ON_INVALID", "PRICED_COLUMNS", "load_curves", "price"]


def price(portfolio, curves=None, *, engine: str = "auto", precision: str = "fp64", on_invalid: str = "strict",
          limits: Limits = Limits(), scenarios=None, shifts_bp=None, cluster=None):
    """Price every instrument of ``portfolio`` (a DataFrame or a CSV/Parquet path) on its curve.

    Returns the priced table of SPEC §3.4: every input column and row in input order, plus ``price``,
    ``value`` (price * quantity), ``bond_price``, ``option_price``, ``width``, ``height``, ``engine`` (what
    priced the row: with ``engine="auto"`` the inspector may split the portfolio) and ``error``. Prices are
    in the units of ``face``. With ``on_invalid="strict"`` any broken rule raises
    :class:`InvalidInputError` (listing row, column and rule) before pricing; with ``"report"`` the valid
    rows are priced and the others come back with ``price`` NaN and ``error`` set.

    ``scenarios`` (a ``scenario, curve, t, zero_rate`` table or path) or ``shifts_bp`` (parallel shifts in
    basis points, e.g. ``[-100, 0, 100]``) price every instrument under every scenario: the table is then
    long, with a ``scenario`` column first. ``cluster`` runs the job on Dask: a cluster config file, a
    scheduler address (``tcp://host:8786``), a :class:`distributed.Client`, or None for this process (see
    :class:`distprice.Pricer` to keep one cluster across jobs).
    """
    if cluster is not None:
        from .runtime import Pricer

        with Pricer(cluster) as pricer:
            return pricer.price(portfolio, curves, engine=engine, precision=precision, on_invalid=on_invalid,
                                limits=limits, scenarios=scenarios, shifts_bp=shifts_bp)
    job = prepare_job(portfolio, curves, scenarios=scenarios, shifts_bp=shifts_bp, engine=engine,
                      precision=precision, on_invalid=on_invalid, limits=limits)
    rows = job.valid_rows
    bond, option, plan = price_table(rows, job.market.curve_sets, engine, precision)
    return job.priced(bond, option, plan.engine_of_rows(len(rows)))

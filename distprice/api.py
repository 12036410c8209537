"""The Python entry points: ``distprice.price`` (lattice portfolios), ``distprice.price_mc`` (Monte-Carlo
jobs), ``distprice.calibrate_heston`` and ``distprice.calibrate_hull_white`` (model calibration)."""
from __future__ import annotations

import time

from .errors import JobTimeoutError
from .execute import price_plan
from .job import JobOptions, prepare_job
from .progress import Bar
from .curves import load_curves
from .models import calibrate_heston as fit_heston
from .models import calibrate_hull_white as fit_hull_white
from .montecarlo import price_mc as price_paths


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
    basis points, e.g. ``[-100, 0, 100]``) price every instrument under every scenario: the table is then
    long, with a ``scenario`` column first. ``cluster`` runs the job on Dask: a cluster config file, a
    scheduler address (``tcp://host:8786``), a :class:`distributed.Client`, or None for this process (see
    :class:`distprice.Pricer` to keep one cluster across jobs). ``progress`` draws a progress bar on stderr
    when it is a terminal. In this process the rows are priced in pieces (about a second's work, and at most
    about 262 144 rows, whose event tables and engine arrays the next piece reuses), so Ctrl-C and ``timeout``
    stop the job within a piece's time.
    """
    checked = JobOptions.of(curves=curves, **options).checked()   # before a cluster is started for nothing
    if cluster is not None:
        from .cluster.pricer import Pricer

        with Pricer(cluster, progress=progress) as pricer:
            return pricer.price(portfolio, curves, **options)
    deadline = None if checked.timeout is None else time.monotonic() + checked.timeout
    job = prepare_job(portfolio, checked)
    instruments = job.instruments()
    total = instruments.node_steps * len(job.market.curve_sets)
    with Bar(total, STARTING, shown=progress) as bar:
        def priced(node_steps: float) -> None:
            bar.update(bar.done + node_steps, "pricing")
            if deadline is not None and time.monotonic() > deadline:
                raise JobTimeoutError(f"the job ran past its timeout of {checked.timeout:g} s; nothing was written")

        bond, option, plan, _ = price_plan(instruments, job.market.curve_sets, checked.engine, job.real, priced)
    return job.priced(bond, option, plan.engine_of_rows(len(instruments)), job.measure(bond[0], option[0]))


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


def calibrate_heston(quotes, *, seed: int = 0, max_evals: int = 2000, population: int = 40,
                     quadrature: str = "gl20", polish: bool = False, engine: str = "auto", progress=None,
                     cluster=None):
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
            return pricer.calibrate_heston(quotes, seed=seed, max_evals=max_evals, population=population,
                                           quadrature=quadrature, polish=polish, engine=engine)
    return fit_heston(quotes, seed=seed, max_evals=max_evals, population=population, quadrature=quadrature,
                      polish=polish, engine=engine, progress=progress)


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

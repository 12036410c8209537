"""Command line: ``distprice run | mc | calibrate heston | calibrate hull-white | generate | bench | inspect | tune |
cluster-script | config list | config show | warm``.

Exit status: 0 done; 1 any other failure; 2 invalid input or options (nothing written); 3 scheduler
unreachable or lost; 4 written, but some rows have an error (``--on-invalid report``); 5 no workers; 6 the
job's timeout; 7 the output cannot be written (a full disk, no permission; nothing written); 130 interrupted
(Ctrl-C); 143 terminated (SIGTERM). Every error distprice raises on purpose is shown as its message, never as
a traceback; logs go to stderr, the summary to stdout, and the progress bar is drawn on stderr only when it is
a terminal.

Importing this module loads only click and the option names (:mod:`distprice.choices`), so that ``--help``
answers at once; a command imports the engines, pandas and Dask when it runs.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import signal
import sys
import threading
import time
import warnings

import click

from .choices import (
    AUTO,
    DATASETS,
    ENGINE_NAMES,
    HESTON_ENGINE_NAMES,
    ON_INVALID,
    PATH_ENGINE_NAMES,
    PRECISION_NAMES,
    SCENARIO_TABLES,
)
from .errors import DistpriceError, InvalidInputError, OptionError


def row_options(command):
    """The options that decide which dated or model rows are valid, shared by ``run`` and ``inspect``."""
    for option in (
        click.option(
            "--models",
            type=click.Path(exists=True, dir_okay=False),
            help="Model table (model, mean_reversion, volatility[, curve]) for rows that name a model, as "
            "`distprice calibrate hull-white` writes it.",
        ),
        click.option(
            "--exercise-schedule",
            type=click.Path(exists=True, dir_okay=False),
            help="Exercise dates of dated bermudan rows (id, date, price, price_type): step-down calls and the like.",
        ),
        click.option(
            "--coupon-schedule",
            type=click.Path(exists=True, dir_okay=False),
            help="Step-up (or step-down) coupons of dated rows (id, date, coupon): the rate from each coupon date on.",
        ),
        click.option(
            "--principal-schedule",
            type=click.Path(exists=True, dir_okay=False),
            help="Sinking funds and amortization of dated rows (id, date, repaid): percent of face repaid on a date.",
        ),
        click.option("--as-of", help="Valuation date YYYY-MM-DD of the dated rows without a valuation_date column."),
    ):
        command = option(command)
    return command


precision_option = click.option(
    "--precision",
    type=click.Choice(PRECISION_NAMES),
    default="fp64",
    show_default=True,
    help="Floating-point precision of the node arithmetic.",
)


EXIT_ROW_ERRORS = 4
"""``run --on-invalid report`` wrote its table, but some rows have an error instead of a price."""
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143
"""Ctrl-C (SIGINT) and SIGTERM: the job's tasks are cancelled and nothing is written."""
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that a job stops as it does on Ctrl-C."""


def _terminate(signum, frame):
    raise Terminated()


def reports_errors(command):
    """Shows a :class:`DistpriceError` as its message and exits with its status (invalid input: 2, nothing
    written; scheduler unreachable: 3; an output that cannot be written: 7; anything else: 1); Ctrl-C and
    SIGTERM end the job (its tasks cancelled, no file left half-written) with 130 and 143."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        main_thread = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, _terminate) if main_thread else None
        try:
            return command(*args, **kwargs)
        except InvalidInputError as error:
            click.echo(f"distprice: invalid input, nothing written. {error}", err=True)
            sys.exit(error.exit_status)
        except DistpriceError as error:
            click.echo(f"distprice: {error}", err=True)
            sys.exit(error.exit_status)
        except KeyboardInterrupt:
            click.echo("\ndistprice: interrupted; the job was stopped and nothing was written", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except Terminated:
            click.echo("distprice: terminated; the job was stopped and nothing was written", err=True)
            sys.exit(EXIT_TERMINATED)
        finally:
            if main_thread:
                signal.signal(signal.SIGTERM, previous)

    return wrapper


@click.group()
@click.version_option(package_name="distprice")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
    help="Logs (to stderr) of this level and above.",
)
def main(log_level):
    """Price portfolios of bond options, callable and puttable bonds on Hull-White trinomial trees."""
    logger = logging.getLogger("distprice")
    for handler in [h for h in logger.handlers if getattr(h, "distprice_cli", False)]:
        logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.distprice_cli = True
    logger.addHandler(handler)
    logger.setLevel(log_level.upper())
    warnings.showwarning = _log_warning


def _log_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A Python warning as one log line (what it says, not where in the code it was raised)."""
    logging.getLogger("distprice").warning("%s", message)


def _flag(flag: str, check, value):
    """``check(value)``, its :class:`OptionError` shown as a usage error of ``flag`` (exit 2)."""
    try:
        return check(value)
    except OptionError as error:
        raise click.BadParameter(str(error), param_hint=flag) from None


@main.command()
@click.option(
    "--cluster",
    help="Cluster config: a YAML file, a shipped config by name (local-cpu, local-cuda: `distprice config list`) "
    "or a scheduler address (tcp://host:8786). "
    "Without it: a local cluster sized to this machine, or this process for small jobs.",
)
@click.option(
    "--portfolio",
    type=click.Path(exists=True),
    help="Portfolio table (.csv, .parquet or a folder of Parquet parts), one row per instrument.",
)
@click.option(
    "--curves",
    type=click.Path(exists=True, dir_okay=False),
    help="Curves table: knots (curve, t or date, zero_rate or discount_factor) or deposit and swap quotes; "
    "the built-in 'hull' curve needs none.",
)
@click.option(
    "--scenarios",
    type=click.Path(exists=True, dir_okay=False),
    help="Scenario curves (scenario, curve, t, zero_rate): every instrument under every scenario.",
)
@click.option(
    "--base/--no-base",
    "base_scenario",
    default=None,
    help="With --scenarios: also price the base curves, first, as the scenario 'base' [default: --base].",
)
@click.option("--shifts-bp", help="Parallel shifts of every curve in basis points, e.g. -100,-50,0,50,100.")
@click.option(
    "--scenario-table",
    type=click.Choice(SCENARIO_TABLES),
    help="Under scenarios: long (id, scenario, the prices; each row's scenarios together), wide (a column per "
    "scenario) or full (every column under every scenario) [default: long].",
)
@row_options
@click.option(
    "--output",
    type=click.Path(),
    help="Priced table to write (.csv, .parquet, or a folder of Parquet parts: a name ending in /), "
    "written atomically.",
)
@click.option(
    "--measures",
    help="Risk measures to add: dv01, duration, convexity, krd, vega, oas (comma-separated); "
    "rows with a market_price are measured at their OAS.",
)
@click.option("--bump-bp", type=float, help="Bump of the parallel and key-rate measures, basis points [default: 10].")
@click.option("--key-rates", help="Key-rate times in years [default: 1,2,3,5,7,10,20,30].")
@click.option("--engine", type=click.Choice(ENGINE_NAMES), help="Pricing engine [default: auto].")
@click.option("--precision", type=click.Choice(PRECISION_NAMES), help="Node arithmetic precision [default: fp64].")
@click.option(
    "--on-invalid",
    type=click.Choice(ON_INVALID),
    help="strict: stop on any invalid row; report: price valid rows, flag the others [default: strict].",
)
@click.option(
    "--max-invalid",
    type=click.IntRange(min=0),
    help="With --on-invalid report: stop before pricing when more rows than this are invalid.",
)
@click.option("--allow-empty", is_flag=True, default=None, help="Price a portfolio of no rows (else an error).")
@click.option(
    "--allow-large-rates",
    is_flag=True,
    default=None,
    help="Take zero rates beyond ±1 and coupons above 1 (else refused as percentages typed as numbers).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds the job may take; past them it stops (exit 6) and nothing is written.",
)
@click.option(
    "--max-seconds",
    type=click.FloatRange(min=0, min_open=True),
    help="The most seconds of pricing the job may be predicted to take; a job predicted longer is refused "
    "(exit 2) [default: 3600].",
)
@click.option("--create-dirs", is_flag=True, help="Create the output's (and the report's) folder if it does not exist.")
@click.option(
    "--report",
    type=click.Path(dir_okay=False),
    help="Also write the job report: one HTML file with the book's shape, values, risk and problems.",
)
@click.option("--in-process", is_flag=True, help="Price in this process, without a cluster.")
@click.option(
    "--progress/--no-progress",
    default=True,
    show_default=True,
    help="Draw a progress bar on stderr when it is a terminal.",
)
@reports_errors
def run(cluster, progress, in_process, create_dirs, report, portfolio, output, **flags):
    """Price a portfolio and write the priced table.

    Exit status: 0 done; 2 invalid input or options (nothing written); 3 scheduler unreachable or lost; 4
    written, but some rows have an error (--on-invalid report); 5 no workers; 6 timeout; 130 Ctrl-C; 143
    SIGTERM; 1 anything else.
    """
    from . import api
    from .cluster.config import JobConfig, load_config

    start = time.perf_counter()
    config = load_config(cluster) if cluster and "://" not in cluster else None
    job = dataclasses.replace(
        config.job if config else JobConfig(), **{k: v for k, v in flags.items() if v is not None}
    )
    portfolio, output = portfolio or job.portfolio, output or job.output
    for name, value in (("portfolio", portfolio), ("output", output)):
        if not value:
            raise click.UsageError(f"--{name} is required (or job.{name} in the cluster config)")
    _check_flags(job, portfolio, output, create_dirs)
    if report:
        _flag("--report", lambda path: _report_place(path, create_dirs), report)
        job = _reported_form(job, explicit=flags.get("scenario_table") is not None)
    options = {
        f.name: getattr(job, f.name)
        for f in dataclasses.fields(JobConfig)
        if f.name not in ("portfolio", "output", "chunks_per_worker", "limits")
    }
    ran = api.run(
        portfolio,
        output=output,
        cluster=config or cluster,
        in_process=in_process,
        progress=progress,
        chunks_per_worker=job.chunks_per_worker,
        per_worker=bool(report),
        **options,
    )
    summary = ran.summary
    wall = time.perf_counter() - start
    click.echo(f"{summary.line(wall=wall)}, wrote {output}")
    if report:
        from .report import write_report

        write_report(
            output,
            report,
            portfolio=portfolio,
            summary=summary,
            timings=_phases(wall, summary.seconds, None if ran.ready is None else ran.ready - start),
            workers=ran.workers,
            plan=ran.plan,
            chunks=ran.chunks,
            chunk_seconds=ran.chunk_seconds,
        )
        click.echo(f"wrote the job report {report}")
    if summary.priced < summary.rows:
        click.echo(
            f"distprice: {summary.rows - summary.priced} rows have an error instead of a price (their "
            f"error column says why)",
            err=True,
        )
        sys.exit(EXIT_ROW_ERRORS)


def _phases(wall: float, job: float, started: float | None) -> dict[str, float]:
    """The phases of a ``run`` of ``wall`` seconds in all, for its report (they add up to ``wall``): the cluster's
    start (``started`` seconds from the command's start; None in this process), the job's ``job`` seconds, and the
    rest (a cluster's stop; in this process, start-up and reading the portfolio before the job)."""
    phases = {} if started is None else {"start": started}
    phases["job"] = job
    phases["stop" if started is not None else "other"] = max(0.0, wall - sum(phases.values()))
    return phases


def _reported_form(job, explicit: bool):
    """The job with a scenario table the report can be drawn from: a risk run's long table lacks the trees and
    the portfolio's columns, so with ``--report`` it becomes wide (said on stderr), or is a usage error when
    ``--scenario-table long`` was given."""
    if (job.scenarios is None and job.shifts_bp is None) or job.scenario_table != "long":
        return job
    if explicit:
        raise click.UsageError(
            "--report draws a risk run from the wide or full scenario table; the long one lacks the trees and "
            "the portfolio's columns: give --scenario-table wide (or full)"
        )
    click.echo("distprice: with --report, the priced table of this risk run is wide (--scenario-table wide)", err=True)
    return dataclasses.replace(job, scenario_table="wide")


def _report_place(path: str, create_dirs: bool = False) -> None:
    """A job report is an HTML file in a folder that takes it."""
    from .tables import check_place

    if not path.lower().endswith((".html", ".htm")):
        raise OptionError(f"{path}: the report is written as .html")
    check_place(path, create_dirs)


def _check_flags(job, portfolio: str, output: str, create_dirs: bool) -> None:
    """The options of ``run`` that can be checked before anything is read or priced, as usage errors naming
    their flag."""
    from .tables import check_output, table_format

    _flag("--portfolio", table_format, portfolio)
    inputs = {
        "--portfolio": portfolio,
        "--curves": job.curves,
        "--scenarios": job.scenarios,
        "--exercise-schedule": job.exercise_schedule,
        "--coupon-schedule": job.coupon_schedule,
        "--principal-schedule": job.principal_schedule,
        "--models": job.models,
    }
    _flag("--output", lambda path: check_output(path, create_dirs, inputs), output)
    if job.scenarios is not None and job.shifts_bp is not None:
        raise click.UsageError("give --scenarios or --shifts-bp (job.scenarios or job.shifts_bp), not both")
    if job.shifts_bp is not None:
        _option("--shifts-bp", shifts_bp=job.shifts_bp)
    _option("--as-of", as_of=job.as_of)
    if job.measures is not None:
        _option("--measures", measures=job.measures)
        if job.scenarios is not None or job.shifts_bp is not None:
            raise click.UsageError(
                "risk measures are of the base market: give --measures or --scenarios / --shifts-bp, not both"
            )
    _option("--bump-bp", bump_bp=job.bump_bp)
    _option("--key-rates", key_rates=job.key_rates)


def _option(flag: str, **option) -> None:
    """One job option checked alone, as the job checks it (:meth:`JobOptions.checked`), its error shown as a
    usage error of ``flag``."""
    from .job import JobOptions

    _flag(flag, lambda given: JobOptions.of(**given).checked(), option)


@main.command()
@click.option(
    "--input",
    "inputs",
    required=True,
    type=click.Path(exists=True),
    help="Monte-Carlo jobs: a folder of mc_* tables (.csv or .parquet), or a FinPar input.data or Futhark .in file.",
)
@click.option(
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="Prices to write (.csv or .parquet): one row per job and model.",
)
@click.option("--paths", type=click.IntRange(min=1), help="Paths of every job (default: each job's own).")
@click.option("--precision", type=click.Choice(PRECISION_NAMES), help="fp64 or fp32 (default: each job's own).")
@click.option(
    "--engine",
    type=click.Choice(PATH_ENGINE_NAMES),
    default="auto",
    show_default=True,
    help="auto: the GPU where there is one, else the CPU engine.",
)
@click.option(
    "--chunks",
    type=click.IntRange(min=1),
    help="In this process: path ranges per job (the price does not depend on it).",
)
@click.option("--cluster", help="Cluster config YAML or a scheduler address: each job's paths spread over the workers.")
@click.option("--report", type=click.Path(dir_okay=False), help="Also write the job report (HTML).")
@reports_errors
def mc(inputs, output, paths, precision, engine, chunks, cluster, report):
    """Price Monte-Carlo jobs (LexiFi's generic pricer: Sobol, inverse normal, Brownian bridge, Black-Scholes
    paths, contracts) and write one row per job and model."""
    from . import api
    from .tables import check_output, write_table

    _flag("--output", check_output, output)
    if report:
        _flag("--report", _report_place, report)
    start = time.perf_counter()
    priced = api.price_mc(inputs, paths=paths, precision=precision, engine=engine, chunks=chunks, cluster=cluster)
    write_table(priced, output)
    seconds = time.perf_counter() - start
    jobs = priced.drop_duplicates("job")
    click.echo(
        f"priced {len(jobs)} job{'s' * (len(jobs) != 1)} ({len(priced)} model{'s' * (len(priced) != 1)}) on "
        f"{int(jobs['paths'].sum())} paths in {seconds:.2f} s, engines: "
        f"{', '.join(sorted(set(priced['engine'])))}, wrote {output}"
    )
    if report:
        from .report import write_report

        write_report(priced, report, portfolio=inputs, timings={"price": seconds}, family="montecarlo")
        click.echo(f"wrote the job report {report}")


@main.group()
def calibrate():
    """Fit models to market quotes: Heston to option surfaces, Hull-White to swaptions."""


@calibrate.command("heston")
@click.option(
    "--quotes",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Option quotes (.csv, .parquet, or the benchmark's .in): maturity, strike, implied_vol, ...",
)
@click.option(
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="Fitted parameters, one row per surface (.csv or .parquet).",
)
@click.option(
    "--quotes-output", type=click.Path(dir_okay=False), help="Also write every quote with its model price and error."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the differential evolution.")
@click.option(
    "--max-evals",
    type=click.IntRange(min=1),
    default=2000,
    show_default=True,
    help="Objective evaluations of the differential evolution.",
)
@click.option("--population", type=click.IntRange(min=4), default=40, show_default=True)
@click.option(
    "--quadrature",
    type=click.Choice(["gl20", "accurate"]),
    default="gl20",
    show_default=True,
    help="gl20: the benchmark's 20-point rule; accurate: adaptive, within 1e-10 of the exact price.",
)
@click.option("--polish", is_flag=True, help="Finish with bounded least squares from the best point.")
@click.option("--engine", type=click.Choice(HESTON_ENGINE_NAMES), default="auto", show_default=True)
@click.option("--cluster", help="Cluster config YAML or a scheduler address: the surfaces fitted at once.")
@reports_errors
def calibrate_heston_command(
    quotes, output, quotes_output, seed, max_evals, population, quadrature, polish, engine, cluster
):
    """Fit Heston (v0, theta, rho, kappa, eta) to each surface of option quotes by differential evolution."""
    from . import api
    from .tables import check_output, write_table

    for flag, path in (("--output", output), ("--quotes-output", quotes_output)):
        if path:
            _flag(flag, check_output, path)
    start = time.perf_counter()
    surfaces, fitted = api.calibrate_heston(
        quotes,
        seed=seed,
        max_evals=max_evals,
        population=population,
        quadrature=quadrature,
        polish=polish,
        engine=engine,
        cluster=cluster,
        progress=_generation_line if sys.stderr.isatty() and not cluster else None,
    )
    write_table(surfaces, output)
    if quotes_output:
        write_table(fitted, quotes_output)
    click.echo(
        f"fitted {len(surfaces)} surfaces ({int(surfaces['n_quotes'].sum())} quotes) in "
        f"{time.perf_counter() - start:.2f} s, rmse "
        + ", ".join(f"{r:.4f}" for r in surfaces["rmse"])
        + f", wrote {output}"
    )


def _generation_line(progress) -> None:
    """One line a generation, redrawn in place on the terminal."""
    click.echo(
        f"\r{progress.surface}: generation {progress.generation}, {progress.n_evals} evaluations, "
        f"rmse {progress.rmse:.4f}",
        nl=False,
        err=True,
    )


@calibrate.command("hull-white")
@click.option(
    "--quotes",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Swaption quotes (.csv or .parquet): model, curve, expiry, tenor, fixed_frequency, volatility, "
    "volatility_type, ...",
)
@click.option("--curves", type=click.Path(exists=True, dir_okay=False), help="Zero curves the quotes name.")
@click.option(
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="The model table (model, curve, mean_reversion, volatility, ...), for run --models.",
)
@click.option("--cluster", help="Cluster config YAML or a scheduler address: the models fitted at once.")
@reports_errors
def calibrate_hull_white_command(quotes, curves, output, cluster):
    """Fit Hull-White mean reversion and volatility of each model to its European swaptions."""
    from . import api
    from .tables import check_output, write_table

    _flag("--output", check_output, output)
    start = time.perf_counter()
    models = api.calibrate_hull_white(quotes, curves, cluster=cluster)
    write_table(models, output)
    click.echo(f"fitted {len(models)} models in {time.perf_counter() - start:.2f} s, wrote {output}")


@main.command()
@click.argument("name", type=click.Choice(DATASETS))
@click.option("--size", type=click.IntRange(min=0), help="Rows (default: the dataset's own size).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--output", required=True, type=click.Path(dir_okay=False), help=".csv or .parquet file to write.")
@reports_errors
def generate(name, size, seed, output):
    """Write one of the papers' synthetic portfolios (U1 ... S2), a mixture, Hull's example book, or the dated
    desk book (with its curves and exercise schedule beside it: OUTPUT's stem plus .curves and .exercise)."""
    from . import api

    made = api.generate(name, output, size=size, seed=seed)
    if made.as_of is not None:
        click.echo(
            f"wrote {made.rows} rows of desk to {output}, its curves to {made.paths['curves']} and its "
            f"exercise schedule to {made.paths['exercise_schedule']} (valued on {made.as_of})"
        )
        return
    click.echo(f"wrote {made.rows} rows of {name} to {output}")


@main.command()
@click.option(
    "--family",
    type=click.Choice(["lattice", "mc"]),
    default="lattice",
    show_default=True,
    help="lattice: the trees' engines on a portfolio; mc: the Monte-Carlo engines on a job.",
)
@click.option(
    "--dataset",
    help="lattice: U1 ... S2, B1, the mixtures, book or desk [default: R1]; mc: small, medium "
    "or large [default: large].",
)
@click.option("--size", type=click.IntRange(min=1), help="Rows (lattice) or paths (mc); default: the dataset's own.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--engine",
    default=AUTO,
    show_default=True,
    help="lattice: auto, reference, cpu, gpu-outer or gpu-flat; mc: auto, reference, cpu or gpu.",
)
@precision_option
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Timed runs after one warm-up; the median is reported.",
)
@click.option("--peer", type=click.Choice(["quantlib"]), help="Also time a peer library on the same instruments.")
@click.option(
    "--peer-size",
    type=click.IntRange(min=1),
    default=200,
    show_default=True,
    help="Instruments the peer prices (it is far slower); its time is scaled to the full size.",
)
@reports_errors
def bench(family, dataset, size, seed, engine, precision, repeat, peer, peer_size):
    """Time an engine on a synthetic dataset: node-steps, seconds and node-steps per second (NS/s) of a lattice
    engine, or path-date-underlyings per second (PDU/s) of a Monte-Carlo engine.

    GPU engines also report the kernel time alone (CUDA events), the host layout and transfer times and the
    device memory they allocate.
    """
    from .bench import bench_lattice, bench_paths, lattice_dataset, lattice_engine, path_set

    if family == "mc":
        lines = bench_paths(_flag("--dataset", path_set, dataset or "large"), size, engine, precision, repeat)
    else:
        dataset = _flag("--dataset", lattice_dataset, dataset or "R1")
        lines = bench_lattice(
            dataset, size, seed, _flag("--engine", lattice_engine, engine), precision, repeat, peer, peer_size
        )
    for line in lines:
        click.echo(line)


@main.command()
@click.argument("portfolio", type=click.Path(exists=True, dir_okay=False), required=False)
@click.option(
    "--portfolio",
    "portfolio_option",
    type=click.Path(exists=True, dir_okay=False),
    help="The portfolio, as `run` takes it (or give it bare).",
)
@click.option(
    "--curves", type=click.Path(exists=True, dir_okay=False), help="Zero curves table, if the portfolio needs one."
)
@row_options
@precision_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option(
    "--plot",
    type=click.Path(dir_okay=False),
    help="Also draw the book's shape and the plan: .html, or .png (needs Chromium).",
)
@reports_errors
def inspect(portfolio, portfolio_option, curves, precision, as_json, plot, **rows):
    """Shape statistics of a portfolio, the rules its invalid rows break, and the plan `--engine auto` would
    follow on this machine."""
    if (portfolio is None) == (portfolio_option is None):
        raise click.UsageError("give the portfolio once: --portfolio PATH, or PATH alone")
    _option("--as-of", as_of=rows["as_of"])
    from . import api

    inspection = api.inspect(portfolio or portfolio_option, curves, precision=precision, **rows)
    if plot:
        from .report import draw_shape

        draw_shape(plot, inspection.width, inspection.height, plan=inspection.plan)
    if as_json:
        click.echo(json.dumps(inspection.figures, indent=1, default=str))
        return
    for line in inspection.lines():
        click.echo(line)


@main.command()
@precision_option
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True, help="Timed runs per measurement.")
@reports_errors
def tune(precision, repeat):
    """Measure this machine (GPU and CPU engines) and store the inspector's cost model for it."""
    from . import api

    model, path = api.tune(precision, repeat)
    click.echo(f"tuned {model.device} ({precision}); wrote {path}")
    click.echo(model.to_json())


@main.command()
@click.option(
    "--precision",
    "precisions",
    type=click.Choice(PRECISION_NAMES),
    multiple=True,
    help="Precisions to compile for (repeat the flag for both) [default: fp64].",
)
@click.option("--measures", is_flag=True, help="Also compile the risk measures (dv01, durations, krd, vega).")
@reports_errors
def warm(precisions, measures):
    """Compile the engines once, ahead of a first job: numba compiles what a job uses on its first run after an
    install (seconds to a minute) and keeps it in its cache; a container image runs this when it is built."""
    from . import api
    from .compiling import cache_place

    seconds = api.warm(precisions or ("fp64",), measures)
    done = f"compiled in {seconds:.1f} s" if seconds else "nothing to compile"
    click.echo(f"{done}; numba's cache: {cache_place()}")


@main.command("cluster-script")
@click.argument("config")
@reports_errors
def cluster_script(config):
    """Print the batch script each job of a slurm or pbs cluster config (a file, or a shipped config by name)
    runs (nothing is submitted)."""
    from .cluster.config import load_config
    from .cluster.jobqueue import job_script

    click.echo(job_script(load_config(config).cluster), nl=False)


@main.group("config")
def config_group():
    """The ready cluster configs that ship with distprice, found by name by --cluster and distprice.Pricer."""


@config_group.command("list")
def config_list():
    """The shipped configs: each name and the first line of its comment."""
    from .cluster.config import shipped_configs

    for name, path in shipped_configs().items():
        first = path.read_text().splitlines()[0]
        click.echo(f"{name:12} {first.lstrip('# ').rstrip(':')}")


@config_group.command("show")
@click.argument("name")
@reports_errors
def config_show(name):
    """Print a config as written, comments included, once checked: a shipped one by name (e.g. local-cpu) or a
    file. Copy one to start a config of your own: distprice config show slurm-gpu > slurm.yaml."""
    from .cluster.config import config_file, load_config

    path = config_file(name)
    load_config(path)
    with open(path) as file:
        click.echo(file.read(), nl=False)


if __name__ == "__main__":
    main()

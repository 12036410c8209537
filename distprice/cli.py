"""Command line: ``distprice run | mc | calibrate heston | calibrate hull-white | generate | bench | inspect | tune |
cluster-script``.

Exit status: 0 done; 1 any other failure; 2 invalid input or options (nothing written); 3 scheduler
unreachable or lost; 4 written, but some rows have an error (``--on-invalid report``); 5 no workers; 6 the
job's timeout; 130 interrupted (Ctrl-C); 143 terminated (SIGTERM). Every error distprice raises on purpose
is shown as its message, never as a traceback; logs go to stderr, the summary to stdout, and the progress
bar is drawn on stderr only when it is a terminal.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import importlib.resources
import logging
import os
import signal
import statistics
import sys
import threading
import time
import warnings

import click

from .api import calibrate_heston, calibrate_hull_white, price, price_mc
from .cuda import gpu_available
from .curves import builtin_curves, load_curves
from .errors import DistpriceError, InvalidInputError, OptionError
from .execute import price_plan
from .job import ON_INVALID, Tally, exercise_schedule, valuation_day
from .lattice import datasets
from .lattice.desk import AS_OF, desk
from .lattice.engines import AUTO, ENGINE_NAMES, ENGINES, GPU_ENGINES, resolve
from .lattice.instruments import prepare
from .lattice.measures import check_bump, parse_key_rates, parse_measures
from .precision import PRECISIONS, real_dtype
from .scenarios import parse_shifts
from .tables import FOLDER, check_output, check_place, read_portfolio, table_format, write_table

IN_PROCESS_ROWS = 20_000
"""Portfolios under this many rows are priced in this process unless a cluster is named."""

precision_option = click.option("--precision", type=click.Choice(list(PRECISIONS)), default="fp64",
                                show_default=True, help="Floating-point precision of the node arithmetic.")


EXIT_ROW_ERRORS = 4
"""``run --on-invalid report`` wrote its table, but some rows have an error instead of a price."""
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143
"""Ctrl-C (SIGINT) and SIGTERM: the job's tasks are cancelled and nothing is written."""
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
log = logging.getLogger("distprice.cli")  # the same name when run as python -m distprice.cli


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that a job stops as it does on Ctrl-C."""


def _terminate(signum, frame):
    raise Terminated()


def reports_errors(command):
    """Shows a :class:`DistpriceError` as its message and exits with its status (invalid input: 2, nothing
    written; scheduler unreachable: 3; anything else: 1); Ctrl-C and SIGTERM end the job (its tasks
    cancelled, no file left half-written) with 130 and 143."""
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
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True, help="Logs (to stderr) of this level and above.")
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
@click.option("--cluster", help="Cluster config YAML (see configs/) or a scheduler address (tcp://host:8786). "
              "Without it: a local cluster sized to this machine, or this process for small jobs.")
@click.option("--portfolio", type=click.Path(exists=True),
              help="Portfolio table (.csv, .parquet or a folder of Parquet parts), one row per instrument.")
@click.option("--curves", type=click.Path(exists=True, dir_okay=False),
              help="Zero curves table (curve, t, zero_rate); the built-in 'hull' curve needs none.")
@click.option("--scenarios", type=click.Path(exists=True, dir_okay=False),
              help="Scenario curves (scenario, curve, t, zero_rate): every instrument under every scenario.")
@click.option("--base/--no-base", "base_scenario", default=None,
              help="With --scenarios: also price the base curves, first, as the scenario 'base' [default: --base].")
@click.option("--shifts-bp", help="Parallel shifts of every curve in basis points, e.g. -100,-50,0,50,100.")
@click.option("--as-of", help="Valuation date YYYY-MM-DD of the dated rows without a valuation_date column.")
@click.option("--exercise-schedule", type=click.Path(exists=True, dir_okay=False),
              help="Exercise dates of dated bermudan rows (id, date, price, price_type): step-down calls and the like.")
@click.option("--models", type=click.Path(exists=True, dir_okay=False),
              help="Model table (model, mean_reversion, volatility[, curve]) for rows that name a model, as "
                   "`distprice calibrate hull-white` writes it.")
@click.option("--output", type=click.Path(),
              help="Priced table to write (.csv, .parquet, or a folder of Parquet parts: a name ending in /), "
                   "written atomically.")
@click.option("--measures", help="Risk measures to add: dv01, duration, convexity, krd, vega, oas (comma-separated); "
              "rows with a market_price are measured at their OAS.")
@click.option("--bump-bp", type=float, help="Bump of the parallel and key-rate measures, basis points [default: 10].")
@click.option("--key-rates", help="Key-rate times in years [default: 1,2,3,5,7,10,20,30].")
@click.option("--engine", type=click.Choice(ENGINE_NAMES), help="Pricing engine [default: auto].")
@click.option("--precision", type=click.Choice(list(PRECISIONS)), help="Node arithmetic precision [default: fp64].")
@click.option("--on-invalid", type=click.Choice(ON_INVALID),
              help="strict: stop on any invalid row; report: price valid rows, flag the others [default: strict].")
@click.option("--max-invalid", type=click.IntRange(min=0),
              help="With --on-invalid report: stop before pricing when more rows than this are invalid.")
@click.option("--allow-empty", is_flag=True, default=None, help="Price a portfolio of no rows (else an error).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True),
              help="Seconds the job may take; past them it stops (exit 6) and nothing is written.")
@click.option("--create-dirs", is_flag=True, help="Create the output's (and the report's) folder if it does not exist.")
@click.option("--report", type=click.Path(dir_okay=False),
              help="Also write the job report: one HTML file with the book's shape, values, risk and problems.")
@click.option("--in-process", is_flag=True, help="Price in this process, without a cluster.")
@click.option("--progress/--no-progress", default=True, show_default=True,
              help="Draw a progress bar on stderr when it is a terminal.")
@reports_errors
def run(cluster, progress, in_process, create_dirs, report, portfolio, output, **flags):
    """Price a portfolio and write the priced table.

    Exit status: 0 done; 2 invalid input or options (nothing written); 3 scheduler unreachable or lost; 4
    written, but some rows have an error (--on-invalid report); 5 no workers; 6 timeout; 130 Ctrl-C; 143
    SIGTERM; 1 anything else.
    """
    from .cluster.config import JobConfig, load_config
    from .cluster.pricer import Pricer
    from .cluster.start import one_line_logs

    start = time.perf_counter()
    config = load_config(cluster) if cluster and "://" not in cluster else None
    job = dataclasses.replace(config.job if config else JobConfig(),
                              **{k: v for k, v in flags.items() if v is not None})
    portfolio, output = portfolio or job.portfolio, output or job.output
    for name, value in (("portfolio", portfolio), ("output", output)):
        if not value:
            raise click.UsageError(f"--{name} is required (or job.{name} in the cluster config)")
    _check_flags(job, portfolio, output, create_dirs)
    if report:
        _flag("--report", lambda path: _report_place(path, create_dirs), report)
    named = portfolio
    options = {f.name: getattr(job, f.name) for f in dataclasses.fields(JobConfig)
               if f.name not in ("portfolio", "output", "chunks_per_worker", "limits")}
    if table_format(portfolio) in ("csv", FOLDER):
        portfolio = read_portfolio(portfolio)  # read once: the size test and the job share it
    workers, timings = None, {}
    if cluster is not None or not (in_process or _small(portfolio)):
        one_line_logs()
        with Pricer(config or cluster, progress=progress, chunks_per_worker=job.chunks_per_worker) as pricer:
            timings["start"] = time.perf_counter() - start
            with _settled():
                summary = pricer.run(portfolio, output=output, **options)
            if report:
                from .cluster.dashboard import job_workers

                workers = job_workers(pricer.client, pricer.last_job) or None
    else:
        log.info("pricing in this process")
        tick = time.perf_counter()
        with _settled():
            priced = price(portfolio, progress=progress, **options)
            scenarios = priced["scenario"].nunique() if "scenario" in priced else 1
            tally = Tally(len(priced) // max(scenarios, 1), scenarios)
            write_table(tally.add(priced), output)
        summary = tally.summary(time.perf_counter() - tick, 0)
    timings["price"] = summary.seconds
    click.echo(f"{summary.line(wall=time.perf_counter() - start)}, wrote {output}")
    if report:
        from .report import write_report

        write_report(output, report, portfolio=named, summary=summary, timings=timings, workers=workers)
        click.echo(f"wrote the job report {report}")
    if summary.priced < summary.rows:
        click.echo(f"distprice: {summary.rows - summary.priced} rows have an error instead of a price (their "
                   f"error column says why)", err=True)
        sys.exit(EXIT_ROW_ERRORS)


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


def _report_place(path: str, create_dirs: bool = False) -> None:
    """A job report is an HTML file in a folder that takes it."""
    if not path.lower().endswith((".html", ".htm")):
        raise OptionError(f"{path}: the report is written as .html")
    check_place(path, create_dirs)


def _check_flags(job, portfolio: str, output: str, create_dirs: bool) -> None:
    """The options of ``run`` that can be checked before anything is read or priced, as usage errors naming
    their flag."""
    _flag("--portfolio", table_format, portfolio)
    inputs = {"--portfolio": portfolio, "--curves": job.curves, "--scenarios": job.scenarios,
              "--exercise-schedule": job.exercise_schedule, "--models": job.models}
    _flag("--output", lambda path: check_output(path, create_dirs, inputs), output)
    if job.scenarios is not None and job.shifts_bp is not None:
        raise click.UsageError("give --scenarios or --shifts-bp (job.scenarios or job.shifts_bp), not both")
    if job.shifts_bp is not None:
        _flag("--shifts-bp", parse_shifts, job.shifts_bp)
    _flag("--as-of", valuation_day, job.as_of)
    if job.measures is not None:
        _flag("--measures", parse_measures, job.measures)
        if job.scenarios is not None or job.shifts_bp is not None:
            raise click.UsageError("risk measures are of the base market: give --measures or --scenarios / "
                                   "--shifts-bp, not both")
    _flag("--bump-bp", check_bump, job.bump_bp)
    _flag("--key-rates", parse_key_rates, job.key_rates)


def _small(portfolio) -> bool:
    """A portfolio (a table, or a Parquet file) small enough that starting a cluster would cost more than
    pricing it here."""
    if isinstance(portfolio, str):
        import pyarrow.parquet as pq

        return pq.ParquetFile(portfolio).metadata.num_rows < IN_PROCESS_ROWS
    return len(portfolio) < IN_PROCESS_ROWS


@main.command()
@click.option("--input", "inputs", required=True, type=click.Path(exists=True),
              help="Monte-Carlo jobs: a folder of mc_* tables (.csv or .parquet), or a FinPar input.data or Futhark .in "
                   "file.")
@click.option("--output", required=True, type=click.Path(dir_okay=False),
              help="Prices to write (.csv or .parquet): one row per job and model.")
@click.option("--paths", type=click.IntRange(min=1), help="Paths of every job (default: each job's own).")
@click.option("--precision", type=click.Choice(list(PRECISIONS)), help="fp64 or fp32 (default: each job's own).")
@click.option("--engine", type=click.Choice(["auto", "reference", "cpu", "gpu"]), default="auto", show_default=True,
              help="auto: the GPU where there is one, else the CPU engine.")
@click.option("--chunks", type=click.IntRange(min=1), help="In this process: path ranges per job (the price does not "
              "depend on it).")
@click.option("--cluster", help="Cluster config YAML or a scheduler address: each job's paths spread over the workers.")
@click.option("--report", type=click.Path(dir_okay=False), help="Also write the job report (HTML).")
@reports_errors
def mc(inputs, output, paths, precision, engine, chunks, cluster, report):
    """Price Monte-Carlo jobs (LexiFi's generic pricer: Sobol, inverse normal, Brownian bridge, Black-Scholes
    paths, contracts) and write one row per job and model."""
    _flag("--output", check_output, output)
    if report:
        _flag("--report", _report_place, report)
    start = time.perf_counter()
    priced = price_mc(inputs, paths=paths, precision=precision, engine=engine, chunks=chunks, cluster=cluster)
    write_table(priced, output)
    seconds = time.perf_counter() - start
    jobs = priced.drop_duplicates("job")
    click.echo(f"priced {len(jobs)} job{'s' * (len(jobs) != 1)} ({len(priced)} model{'s' * (len(priced) != 1)}) on "
               f"{int(jobs['paths'].sum())} paths in {seconds:.2f} s, engines: "
               f"{', '.join(sorted(set(priced['engine'])))}, wrote {output}")
    if report:
        from .report import write_report

        write_report(priced, report, portfolio=inputs, timings={"price": seconds}, family="montecarlo")
        click.echo(f"wrote the job report {report}")


@main.group()
def calibrate():
    """Fit models to market quotes: Heston to option surfaces, Hull-White to swaptions."""


@calibrate.command("heston")
@click.option("--quotes", required=True, type=click.Path(exists=True, dir_okay=False),
              help="Option quotes (.csv, .parquet, or the benchmark's .in): maturity, strike, implied_vol, ...")
@click.option("--output", required=True, type=click.Path(dir_okay=False),
              help="Fitted parameters, one row per surface (.csv or .parquet).")
@click.option("--quotes-output", type=click.Path(dir_okay=False),
              help="Also write every quote with its model price and error.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the differential evolution.")
@click.option("--max-evals", type=click.IntRange(min=1), default=2000, show_default=True,
              help="Objective evaluations of the differential evolution.")
@click.option("--population", type=click.IntRange(min=4), default=40, show_default=True)
@click.option("--quadrature", type=click.Choice(["gl20", "accurate"]), default="gl20", show_default=True,
              help="gl20: the benchmark's 20-point rule; accurate: adaptive, within 1e-10 of the exact price.")
@click.option("--polish", is_flag=True, help="Finish with bounded least squares from the best point.")
@click.option("--engine", type=click.Choice(["auto", "reference", "cpu", "gpu"]), default="auto", show_default=True)
@click.option("--cluster", help="Cluster config YAML or a scheduler address: the surfaces fitted at once.")
@reports_errors
def calibrate_heston_command(quotes, output, quotes_output, seed, max_evals, population, quadrature, polish, engine,
                             cluster):
    """Fit Heston (v0, theta, rho, kappa, eta) to each surface of option quotes by differential evolution."""
    for flag, path in (("--output", output), ("--quotes-output", quotes_output)):
        if path:
            _flag(flag, check_output, path)
    start = time.perf_counter()
    surfaces, fitted = calibrate_heston(quotes, seed=seed, max_evals=max_evals, population=population,
                                        quadrature=quadrature, polish=polish, engine=engine, cluster=cluster,
                                        progress=_generation_line if sys.stderr.isatty() and not cluster else None)
    write_table(surfaces, output)
    if quotes_output:
        write_table(fitted, quotes_output)
    click.echo(f"fitted {len(surfaces)} surfaces ({int(surfaces['n_quotes'].sum())} quotes) in "
               f"{time.perf_counter() - start:.2f} s, rmse " + ", ".join(f"{r:.4f}" for r in surfaces["rmse"])
               + f", wrote {output}")


def _generation_line(progress) -> None:
    """One line a generation, redrawn in place on the terminal."""
    click.echo(f"\r{progress.surface}: generation {progress.generation}, {progress.n_evals} evaluations, "
               f"rmse {progress.rmse:.4f}", nl=False, err=True)


@calibrate.command("hull-white")
@click.option("--quotes", required=True, type=click.Path(exists=True, dir_okay=False),
              help="Swaption quotes (.csv or .parquet): model, curve, expiry, tenor, fixed_frequency, volatility, "
                   "volatility_type, ...")
@click.option("--curves", type=click.Path(exists=True, dir_okay=False), help="Zero curves the quotes name.")
@click.option("--output", required=True, type=click.Path(dir_okay=False),
              help="The model table (model, curve, mean_reversion, volatility, ...), for run --models.")
@click.option("--cluster", help="Cluster config YAML or a scheduler address: the models fitted at once.")
@reports_errors
def calibrate_hull_white_command(quotes, curves, output, cluster):
    """Fit Hull-White mean reversion and volatility of each model to its European swaptions."""
    _flag("--output", check_output, output)
    start = time.perf_counter()
    models = calibrate_hull_white(quotes, curves, cluster=cluster)
    write_table(models, output)
    click.echo(f"fitted {len(models)} models in {time.perf_counter() - start:.2f} s, wrote {output}")


@main.command()
@click.argument("name", type=click.Choice(datasets.DATASETS))
@click.option("--size", type=click.IntRange(min=0), help="Rows (default: the dataset's own size).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--output", required=True, type=click.Path(dir_okay=False), help=".csv or .parquet file to write.")
@reports_errors
def generate(name, size, seed, output):
    """Write one of the papers' synthetic portfolios (U1 ... S2), a mixture, Hull's example book, or the dated
    desk book (with its curves and exercise schedule beside it: OUTPUT's stem plus .curves and .exercise)."""
    if name == "desk":
        book = desk(datasets.DEFAULT_SIZES[name] if size is None else size, seed)
        stem, suffix = os.path.splitext(output)
        for table, path in ((book.portfolio, output), (book.curves, f"{stem}.curves{suffix}"),
                            (book.exercise_schedule, f"{stem}.exercise{suffix}")):
            write_table(table, path)
        click.echo(f"wrote {len(book.portfolio)} rows of desk to {output}, its curves to {stem}.curves{suffix} and "
                   f"its exercise schedule to {stem}.exercise{suffix} (valued on {AS_OF})")
        return
    table = datasets.generate(name, size, seed)
    write_table(table, output)
    click.echo(f"wrote {len(table)} rows of {name} to {output}")


@main.command()
@click.option("--family", type=click.Choice(["lattice", "mc"]), default="lattice", show_default=True,
              help="lattice: the trees' engines on a portfolio; mc: the Monte-Carlo engines on a job.")
@click.option("--dataset", help="lattice: U1 ... S2, B1, the mixtures, book or desk [default: R1]; mc: small, medium "
              "or large [default: large].")
@click.option("--size", type=click.IntRange(min=1), help="Rows (lattice) or paths (mc); default: the dataset's own.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--engine", default=AUTO, show_default=True,
              help="lattice: auto, reference, cpu, gpu-outer or gpu-flat; mc: auto, reference, cpu or gpu.")
@precision_option
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True,
              help="Timed runs after one warm-up; the median is reported.")
@click.option("--peer", type=click.Choice(["quantlib"]), help="Also time a peer library on the same instruments.")
@click.option("--peer-size", type=click.IntRange(min=1), default=200, show_default=True,
              help="Instruments the peer prices (it is far slower); its time is scaled to the full size.")
@reports_errors
def bench(family, dataset, size, seed, engine, precision, repeat, peer, peer_size):
    """Time an engine on a synthetic dataset: node-steps, seconds and node-steps per second (NS/s) of a lattice
    engine, or path-date-underlyings per second (PDU/s) of a Monte-Carlo engine.

    GPU engines also report the kernel time alone (CUDA events), the host layout and transfer times and the
    device memory they allocate.
    """
    if family == "mc":
        _bench_paths(dataset or "large", size, engine, precision, repeat)
        return
    dataset = dataset or "R1"
    if dataset not in datasets.DATASETS:
        raise click.BadParameter(f"{dataset!r} is no lattice dataset; choose one of {', '.join(datasets.DATASETS)}",
                                 param_hint="--dataset")
    if engine not in ENGINE_NAMES:
        raise click.BadParameter(f"{engine!r} is no lattice engine; choose one of {', '.join(ENGINE_NAMES)}",
                                 param_hint="--engine")
    from .lattice.batch import pack

    real = real_dtype(precision)
    engine = resolve(engine, real)
    if dataset == "desk":
        book = desk(datasets.DEFAULT_SIZES[dataset] if size is None else size, seed)
        curve_set = load_curves(book.curves)
        prepared = prepare(book.portfolio, curve_set, exercise_schedule=exercise_schedule(book.exercise_schedule,
                                                                                          book.portfolio))
    else:
        curve_set = builtin_curves()
        prepared = prepare(datasets.generate(dataset, size, seed), curve_set)
    if prepared.problems:
        raise InvalidInputError(prepared.problems)
    instruments = prepared.instruments()
    node_steps = int(instruments.node_steps)
    run_engine = ENGINES.get(engine) or (lambda rows, curves, real: price_plan(rows, [curves], AUTO, real)[:2])
    # warm-up: compilation and caches (GPU kernels are built per block shape, so warm up on the same rows)
    run_engine(instruments if engine in (*GPU_ENGINES, AUTO) else instruments.take(range(min(8, len(instruments)))),
               curve_set, real)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run_engine(instruments, curve_set, real)
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    start = time.perf_counter()
    batch = pack(instruments, curve_set, real)
    layout = time.perf_counter() - start
    click.echo(f"dataset {dataset}  rows {len(instruments)}  engine {engine}  precision {precision}")
    click.echo(f"node-steps {node_steps:.4e}  seconds {seconds:.4f} (median of {repeat}; layout {layout:.4f})"
               f"  NS/s {node_steps / seconds:.4e}")
    if engine == AUTO:
        plan = price_plan(instruments, [curve_set], AUTO, real)[2]
        click.echo("plan: " + "; ".join(f"{p.engine} {len(p.rows)} rows" for p in plan.parts)
                   + f" (predicted {plan.seconds:.4f} s, {plan.model.source})")
    if engine in GPU_ENGINES:
        from .cuda import device_name
        from .lattice.gpu import price_gpu

        runs = [price_gpu(batch, engine.removeprefix("gpu-")) for _ in range(repeat)]
        part = {name: statistics.median(r.seconds[name] for r in runs) for name in runs[0].seconds}
        click.echo(f"device {device_name()}  kernel {part['kernel']:.4f} s  NS/s {node_steps / part['kernel']:.4e}"
                   f"  kernel layout {part['layout']:.4f} s  upload {part['upload']:.4f} s"
                   f"  download {part['download']:.4f} s  device memory {runs[0].device_bytes / 2**20:.1f} MiB"
                   + "".join(f"  {k} {v}" for k, v in runs[0].detail.items() if k in ("nodes", "threads", "bins")))
    if peer:
        from .lattice.quantlib import price_quantlib

        rows = instruments.table.head(peer_size)
        peer_steps = int(instruments.geometry.node_steps[:len(rows)].sum())
        start = time.perf_counter()
        price_quantlib(rows, {name: (c.t, c.zero_rate) for name, c in curve_set.items()})
        peer_seconds = time.perf_counter() - start
        ours = peer_steps / (node_steps / seconds)
        click.echo(f"peer quantlib  rows {len(rows)}  seconds {peer_seconds:.4f}  NS/s {peer_steps / peer_seconds:.4e}"
                   f"  ratio {peer_seconds / ours:.1f}x (distprice faster)")


def _bench_paths(dataset: str, paths, engine: str, precision: str, repeat: int) -> None:
    """``bench --family mc``: an engine on a Monte-Carlo set, path-date-underlyings per second."""
    from .montecarlo import datasets as mc_sets
    from .montecarlo import price_range, read_inputs, resolve_engine, validate, with_options

    sets = {"small": "finpar_small.input.data", "medium": "finpar_medium.input.data"}
    if dataset == "large":
        job = validate(mc_sets.large(paths or 2**17))[0]
    elif dataset in sets:
        job = validate(read_inputs(importlib.resources.files("distprice.montecarlo") / "data" / sets[dataset]))[0]
    else:
        raise click.BadParameter(f"{dataset!r} is no Monte-Carlo set; choose small, medium or large",
                                 param_hint="--dataset")
    job = with_options(job, paths=paths, precision=precision)
    engine = resolve_engine(engine, job)
    times = [price_range(job, 0, job.paths, engine).seconds for _ in range(repeat + 1)][1:]
    seconds = statistics.median(times)
    units = job.paths * len(job.t) * job.spots.shape[1] * len(job.models)
    click.echo(f"set {dataset}  contract {job.contract.name}  paths {job.paths}  dates {len(job.t)}  underlyings "
               f"{job.spots.shape[1]}  models {len(job.models)}  engine {engine}  precision {job.precision}")
    click.echo(f"path-date-underlyings {units:.4e}  seconds {seconds:.4f} (median of {repeat})  PDU/s {units / seconds:.4e}")
    if engine == "cpu":
        from .montecarlo import stage_split

        n = min(job.paths, max(4096, 2**21 // job.dims))
        split = stage_split(job, n)
        per_unit = n * job.dims * len(job.models)
        click.echo("stages (1 thread, CPU ns per PDU): " + "  ".join(
            f"{k} {split[k] / per_unit * 1e9:.2f}" for k in ("sobol", "inverse_normal", "bridge", "paths_payoff"))
            + f"  one thread's PDU/s {split['pdu_per_s']:.4e}")


@main.command()
@click.argument("portfolio", type=click.Path(exists=True, dir_okay=False))
@click.option("--curves", type=click.Path(exists=True, dir_okay=False), help="Zero curves table, if the portfolio needs one.")
@precision_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option("--plot", type=click.Path(dir_okay=False),
              help="Also draw the book's shape and the plan: .html, or .png (needs Chromium).")
@reports_errors
def inspect(portfolio, curves, precision, as_json, plot):
    """Shape statistics of a portfolio and the plan `--engine auto` would follow on this machine."""
    import json

    import numba
    import pandas as pd

    from .inspector import describe, plan
    from .lattice.groups import instrument_groups, shared_node_steps
    from .tuning import current_model

    market = load_curves(curves)
    prepared = prepare(read_portfolio(portfolio), market)
    valid = prepared.valid
    width, height = prepared.geometry.width[valid], prepared.geometry.height[valid]
    groups = instrument_groups(prepared.instruments(), market)
    gpu = gpu_available()
    chosen = plan(width, height, current_model(precision, gpu), gpu)
    if plot:
        from .report import draw_shape

        draw_shape(plot, width, height, plan=chosen)
    ids = pd.Series(prepared.table["id"].to_numpy()[valid])
    execution = (f"this process: {chosen.model.device}" if gpu else
                 f"this process: the CPU engine on {numba.get_num_threads()} threads")
    report = {
        "shape": describe(width, height), "invalid_rows": int((~valid).sum()), "execution": execution,
        "shared": {"groups": len(groups), "node_steps": shared_node_steps(width, height, groups.group)},
        "model": {"device": chosen.model.device, "precision": precision, "source": chosen.model.source},
        "plan": {"predicted_seconds": chosen.seconds,
                 "parts": [{"engine": p.engine, "rows": len(p.rows), "node_steps": float((2 * width[p.rows] * height[p.rows]).sum()),
                            "predicted_seconds": p.seconds, "reason": p.reason,
                            **p.detail,
                            "first_ids": ids.iloc[p.rows[:3]].tolist()} for p in chosen.parts]},
        "candidates": chosen.considered,
    }
    if as_json:
        click.echo(json.dumps(report, indent=1, default=str))
        return
    shape = report["shape"]
    shared = report["shared"]
    click.echo(f"rows {shape['rows']} ({report['invalid_rows']} invalid), node-steps {shape['node_steps']:.3e} "
               f"({shared['node_steps']:.3e} computed with shared trees, {shared['groups']} tree groups)")
    for name in ("width", "height"):
        q = shape[name]
        if q:
            click.echo(f"{name:6} " + "  ".join(f"{k} {v:.4g}" for k, v in q.items()))
    click.echo(f"model: {chosen.model.device}, {precision}, {chosen.model.source}")
    click.echo(f"plan: predicted {chosen.seconds:.4g} s for pricing in {execution} (a cluster of n such workers "
               f"prices it in about 1/n of that, plus its start)")
    for part in report["plan"]["parts"]:
        extra = ", ".join(f"{k} {part[k]}" for k in ("nodes", "busy_share", "wide_rows", "cached_share") if k in part)
        click.echo(f"  {part['engine']:9} {part['rows']:>9} rows  {part['node_steps']:.3e} node-steps  "
                   f"{part['predicted_seconds']:.4g} s  {part['reason']}" + (f" ({extra})" if extra else ""))
    click.echo("candidates: " + ", ".join(f"{k} {v:.4g} s" for k, v in sorted(chosen.considered.items(), key=lambda kv: kv[1])))


@main.command()
@precision_option
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True, help="Timed runs per measurement.")
@reports_errors
def tune(precision, repeat):
    """Measure this machine (GPU and CPU engines) and store the inspector's cost model for it."""
    from .cuda import device_name
    from .tuning import CPU_DEVICE, save_model, tune as measure

    gpu = gpu_available()
    device = device_name() if gpu else CPU_DEVICE
    model = measure(device, precision, gpu=gpu, repeat=repeat)
    path = save_model(model)
    click.echo(f"tuned {device} ({precision}); wrote {path}")
    click.echo(model.to_json())


@main.command("cluster-script")
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
@reports_errors
def cluster_script(config):
    """Print the batch script each job of a slurm or pbs cluster config runs (nothing is submitted)."""
    from .cluster.config import load_config
    from .cluster.jobqueue import job_script

    click.echo(job_script(load_config(config).cluster), nl=False)


if __name__ == "__main__":
    main()

"""Command line: ``distprice run | generate | bench | inspect | calibrate | cluster-script``.

Exit status: 0 done; 2 invalid input (nothing written); 3 scheduler unreachable; 1 any other failure.
"""
from __future__ import annotations

import statistics
import sys
import time

import click

from . import datasets
from .api import ON_INVALID, load_curves, price
from .engines import AUTO, ENGINES, GPU_ENGINES, price_auto, resolve
from .errors import ConfigError, Fp32OverflowError, GpuUnavailableError, SchedulerUnreachableError
from .engines.batch import PRECISIONS
from .instruments import prepare
from .errors import InvalidInputError
from .tables import table_format, write_table

EXIT_INVALID = 2
EXIT_UNREACHABLE = 3
IN_PROCESS_ROWS = 20_000
"""Portfolios under this many rows are priced in this process unless a cluster is named."""

engine_option = click.option("--engine", type=click.Choice([AUTO, *ENGINES]), default=AUTO, show_default=True,
                             help="Pricing engine; auto picks the fastest available.")
precision_option = click.option("--precision", type=click.Choice(list(PRECISIONS)), default="fp64",
                                show_default=True, help="Floating-point precision of the node arithmetic.")


def _fail_invalid(error: InvalidInputError):
    click.echo(f"distprice: invalid input, nothing written. {error}", err=True)
    sys.exit(EXIT_INVALID)


@click.group()
@click.version_option(package_name="distprice")
def main():
    """Price portfolios of bond options, callable and puttable bonds on Hull-White trinomial trees."""


@main.command()
@click.option("--cluster", help="Cluster config YAML (see configs/) or a scheduler address (tcp://host:8786). "
              "Without it: a local cluster sized to this machine, or this process for small jobs.")
@click.option("--portfolio", type=click.Path(exists=True, dir_okay=False),
              help="Portfolio table (.csv or .parquet), one row per instrument.")
@click.option("--curves", type=click.Path(exists=True, dir_okay=False),
              help="Zero curves table (curve, t, zero_rate); the built-in 'hull' curve needs none.")
@click.option("--scenarios", type=click.Path(exists=True, dir_okay=False),
              help="Scenario curves (scenario, curve, t, zero_rate): every instrument under every scenario.")
@click.option("--shifts-bp", help="Parallel shifts of every curve in basis points, e.g. -100,-50,0,50,100.")
@click.option("--output", type=click.Path(dir_okay=False),
              help="Priced table to write (.csv or .parquet), written atomically.")
@click.option("--engine", type=click.Choice([AUTO, *ENGINES]), help="Pricing engine [default: auto].")
@click.option("--precision", type=click.Choice(list(PRECISIONS)), help="Node arithmetic precision [default: fp64].")
@click.option("--on-invalid", type=click.Choice(ON_INVALID),
              help="strict: stop on any invalid row; report: price valid rows, flag the others [default: strict].")
@click.option("--in-process", is_flag=True, help="Price in this process, without a cluster.")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show a progress bar.")
def run(cluster, progress, in_process, **flags):
    """Price a portfolio and write the priced table (exit 2: invalid input, 3: scheduler unreachable)."""
    from .config import JobConfig, load_config
    from .runtime import Pricer, Tally

    try:
        config = load_config(cluster) if cluster and "://" not in cluster else None
        job = config.job if config else JobConfig()
        job = {k: getattr(job, k) for k in ("portfolio", "curves", "scenarios", "shifts_bp", "output", "engine",
                                            "precision", "on_invalid")} | {k: v for k, v in flags.items() if v}
        for required in ("portfolio", "output"):
            if not job[required]:
                raise click.UsageError(f"--{required} is required (or job.{required} in the cluster config)")
        portfolio, output = job.pop("portfolio"), job.pop("output")
        table_format(output)
        on_cluster = cluster is not None or not (in_process or _small(portfolio))
        start = time.perf_counter()
        if on_cluster:
            chunks = config.job.chunks_per_worker if config else JobConfig().chunks_per_worker
            with Pricer(config or cluster, progress=progress, chunks_per_worker=chunks) as pricer:
                if pricer.dashboard_link:
                    click.echo(f"dashboard: {pricer.dashboard_link}")
                summary = pricer.run(portfolio, output=output, **job)
        else:
            priced = price(portfolio, **job)
            scenarios = priced["scenario"].nunique() if "scenario" in priced else 1
            tally = Tally(len(priced) // max(scenarios, 1), scenarios)
            write_table(tally.add(priced), output)
            summary = tally.summary(time.perf_counter() - start, 0)
    except InvalidInputError as error:
        _fail_invalid(error)
    except SchedulerUnreachableError as error:
        click.echo(f"distprice: {error}", err=True)
        sys.exit(EXIT_UNREACHABLE)
    except (ConfigError, ValueError, GpuUnavailableError, Fp32OverflowError, RuntimeError) as error:
        raise click.ClickException(str(error))
    click.echo(f"{summary.line()}, wrote {output}")


def _small(portfolio) -> bool:
    """A portfolio small enough that starting a cluster would cost more than pricing it here."""
    from .tables import read_table

    if table_format(portfolio) == "parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(portfolio).metadata.num_rows < IN_PROCESS_ROWS
    return len(read_table(portfolio)) < IN_PROCESS_ROWS


@main.command()
@click.argument("name", type=click.Choice(datasets.DATASETS))
@click.option("--size", type=click.IntRange(min=0), help="Rows (default: the dataset's own size).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--output", required=True, type=click.Path(dir_okay=False), help=".csv or .parquet file to write.")
def generate(name, size, seed, output):
    """Write one of the papers' synthetic portfolios (SPEC §7) or Hull's example book."""
    try:
        table = datasets.generate(name, size, seed)
        write_table(table, output)
    except ValueError as error:
        raise click.ClickException(str(error))
    click.echo(f"wrote {len(table)} rows of {name} to {output}")


@main.command()
@click.option("--dataset", type=click.Choice(datasets.DATASETS), default="R1", show_default=True)
@click.option("--size", type=click.IntRange(min=1), help="Rows (default: the dataset's own size).")
@click.option("--seed", type=int, default=0, show_default=True)
@engine_option
@precision_option
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True,
              help="Timed runs after one warm-up; the median is reported.")
@click.option("--peer", type=click.Choice(["quantlib"]), help="Also time a peer library on the same instruments.")
@click.option("--peer-size", type=click.IntRange(min=1), default=200, show_default=True,
              help="Instruments the peer prices (it is far slower); its time is scaled to the full size.")
def bench(dataset, size, seed, engine, precision, repeat, peer, peer_size):
    """Time an engine on a synthetic dataset: node-steps, seconds, node-steps per second (NS/s).

    GPU engines also report the kernel time alone (CUDA events), the host layout and transfer times and the
    device memory they allocate.
    """
    from .engines.batch import pack

    try:
        engine = resolve(engine)
    except GpuUnavailableError as error:
        raise click.ClickException(str(error))
    table = datasets.generate(dataset, size, seed)
    curve_set = load_curves(None)
    prepared = prepare(table, curve_set)
    if prepared.problems:
        _fail_invalid(InvalidInputError(prepared.problems))
    canonical, geometry = prepared.table, prepared.geometry
    node_steps = int(geometry.node_steps.sum())
    run_engine = ENGINES.get(engine) or (lambda rows, curves, precision: price_auto(rows, curves, precision)[:2])
    # warm-up: compilation and caches (GPU kernels are built per block shape, so warm up on the same rows)
    run_engine(canonical if engine in (*GPU_ENGINES, AUTO) else canonical.head(8), curve_set, precision)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run_engine(canonical, curve_set, precision)
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    start = time.perf_counter()
    batch = pack(canonical, curve_set, precision)
    layout = time.perf_counter() - start
    click.echo(f"dataset {dataset}  rows {len(canonical)}  engine {engine}  precision {precision}")
    click.echo(f"node-steps {node_steps:.4e}  seconds {seconds:.4f} (median of {repeat}; layout {layout:.4f})"
               f"  NS/s {node_steps / seconds:.4e}")
    if engine == AUTO:
        plan = price_auto(canonical, curve_set, precision)[2]
        click.echo("plan: " + "; ".join(f"{p.engine} {len(p.rows)} rows" for p in plan.parts)
                   + f" (predicted {plan.seconds:.4f} s, {plan.model.source})")
    if engine in GPU_ENGINES:
        from .engines.gpu import device_name, price_gpu

        runs = [price_gpu(batch, engine.removeprefix("gpu-"), precision) for _ in range(repeat)]
        part = {name: statistics.median(r.seconds[name] for r in runs) for name in runs[0].seconds}
        click.echo(f"device {device_name()}  kernel {part['kernel']:.4f} s  NS/s {node_steps / part['kernel']:.4e}"
                   f"  kernel layout {part['layout']:.4f} s  upload {part['upload']:.4f} s"
                   f"  download {part['download']:.4f} s  device memory {runs[0].device_bytes / 2**20:.1f} MiB"
                   + "".join(f"  {k} {v}" for k, v in runs[0].detail.items() if k in ("nodes", "threads", "bins")))
    if peer:
        from .quantlib_peer import price_quantlib

        rows = canonical.head(peer_size)
        peer_steps = int(geometry.node_steps[:len(rows)].sum())
        start = time.perf_counter()
        price_quantlib(rows, {name: (c.t, c.zero_rate) for name, c in curve_set.items()})
        peer_seconds = time.perf_counter() - start
        ours = peer_steps / (node_steps / seconds)
        click.echo(f"peer quantlib  rows {len(rows)}  seconds {peer_seconds:.4f}  NS/s {peer_steps / peer_seconds:.4e}"
                   f"  ratio {peer_seconds / ours:.1f}x (distprice faster)")


@main.command()
@click.argument("portfolio", type=click.Path(exists=True, dir_okay=False))
@click.option("--curves", type=click.Path(exists=True, dir_okay=False), help="Zero curves table, if the portfolio needs one.")
@precision_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
def inspect(portfolio, curves, precision, as_json):
    """Shape statistics of a portfolio and the plan `--engine auto` would follow on this machine."""
    import json

    import pandas as pd

    from .calibration import current_model
    from .engines import gpu_available
    from .inspector import describe, plan
    from .tables import read_table

    try:
        curve_set = load_curves(curves)
        prepared = prepare(read_table(portfolio), curve_set)
    except (InvalidInputError, ValueError) as error:
        raise click.ClickException(str(error))
    valid = prepared.valid
    width, height = prepared.geometry.width[valid], prepared.geometry.height[valid]
    gpu = gpu_available()
    chosen = plan(width, height, current_model(precision, gpu), gpu)
    ids = pd.Series(prepared.table["id"].to_numpy()[valid])
    report = {
        "shape": describe(width, height), "invalid_rows": int((~valid).sum()),
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
    click.echo(f"rows {shape['rows']} ({report['invalid_rows']} invalid), node-steps {shape['node_steps']:.3e}")
    for name in ("width", "height"):
        q = shape[name]
        if q:
            click.echo(f"{name:6} " + "  ".join(f"{k} {v:.4g}" for k, v in q.items()))
    click.echo(f"model: {chosen.model.device}, {precision}, {chosen.model.source}")
    click.echo(f"plan: predicted {chosen.seconds:.4g} s")
    for part in report["plan"]["parts"]:
        extra = ", ".join(f"{k} {part[k]}" for k in ("nodes", "busy_share", "wide_rows", "cached_share") if k in part)
        click.echo(f"  {part['engine']:9} {part['rows']:>9} rows  {part['node_steps']:.3e} node-steps  "
                   f"{part['predicted_seconds']:.4g} s  {part['reason']}" + (f" ({extra})" if extra else ""))
    click.echo("candidates: " + ", ".join(f"{k} {v:.4g} s" for k, v in sorted(chosen.considered.items(), key=lambda kv: kv[1])))


@main.command()
@precision_option
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True, help="Timed runs per measurement.")
def calibrate(precision, repeat):
    """Measure this machine (GPU and CPU engines) and store the inspector's cost model for it."""
    from .calibration import CPU_DEVICE, calibrate as measure, save_model
    from .engines import gpu_available

    gpu = gpu_available()
    if gpu:
        from .engines.gpu import device_name
        device = device_name()
    else:
        device = CPU_DEVICE
    model = measure(device, precision, gpu=gpu, repeat=repeat)
    path = save_model(model)
    click.echo(f"calibrated {device} ({precision}); wrote {path}")
    click.echo(model.to_json())


@main.command("cluster-script")
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
def cluster_script(config):
    """Print the batch script each job of a slurm or pbs cluster config runs (nothing is submitted)."""
    from .config import load_config
    from .jobqueue import job_script

    try:
        click.echo(job_script(load_config(config).cluster), nl=False)
    except (ConfigError, ValueError, RuntimeError) as error:
        raise click.ClickException(str(error))


if __name__ == "__main__":
    main()

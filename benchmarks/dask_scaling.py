"""Whole distprice jobs on a Dask cluster of 1, 2, ... GPUs (or CPU workers): wall time, speed-up, and the Dask
overhead (time outside the pricing tasks); one job, or the rows of a scale-out table.

    python benchmarks/dask_scaling.py OUTPUT_DIR [--dataset R1] [--copies 10 | --book-rows N] [--workers 1,2,4] [--cpu]
        [--threads-per-worker T] [--workers-per-gpu K] [--shifts-bp -100,0,100 | --shift-count 50] [--repeat 3]
        [--chunks-per-worker C] [--folder] [--rows job | all | file,folder,shifted-file,shifted-folder,mc]
        [--mc-paths 33554432,2097152] [--scheduler tcp://HOST:PORT [--scheduler-workers N]]
        [--scenario-table long|wide|full] [--measures dv01,duration,convexity,krd,vega,oas]

``--workers`` counts GPUs (each with the cluster's worker processes per GPU, or ``--workers-per-gpu``), or
CPU workers with ``--cpu``: a local cluster of each size is started in turn, and every job runs on each.

``--rows`` picks the jobs. ``job`` (the default) is the one job the other options describe, with the detailed
table below. The others make one row each of a scale-out table: ``file``, the portfolio priced into one Parquet file;
``folder``, into a folder of parts; ``shifted-file`` and ``shifted-folder``, the same under the shifts of
``--shifts-bp`` or ``--shift-count`` (16 by default); ``mc``, a Monte-Carlo job of the benchmark's large set
(contract 3, 367 dates, 3 underlyings) for each path count of ``--mc-paths`` (2^25 and 2^21 by default), priced with
``Pricer.price_mc`` on the same cluster; ``all``, every row. The table has, for each worker count: "job s", the
median job; "speed-up", against the first worker count; "kernel s" (below; for a Monte-Carlo job, the busiest GPU's
or CPU worker's time inside its path-range tasks, launches and copies included: those tasks report no kernel time);
and "tail s", from the end of the job's last pricing task to the end of the job. "max rel diff" is the largest
difference of a row's prices, on any worker count, from those on the first.

``--scheduler tcp://HOST:PORT`` runs the same jobs through a scheduler already started, whose workers were started
by hand (``dask scheduler``, ``dask worker ... --preload distprice.cluster.worker``): ``--workers``, ``--cpu``,
``--threads-per-worker`` and ``--workers-per-gpu`` are then ignored, the table has one column group, of the workers
the scheduler has once ``--scheduler-workers`` of them have joined (counted in GPUs where they have GPUs, each GPU
once however many workers share it), and its speed-ups are 1; compare with a run on another set of workers. Its
workers read the portfolio and write folders of parts themselves, so OUTPUT_DIR must be at the same path on their
machines.

The portfolio is ``--copies`` copies of the dataset at full size (other seeds, ids renumbered; ``--book-rows N``:
their first N rows, for a small job), written to
``OUTPUT_DIR/portfolio.parquet`` in row groups of 65 536 rows; at 10⁶ rows and over the workers read it themselves.
``--dataset desk`` takes copies of 10⁵ rows of the dated ``desk`` book, with its curves and exercise schedule
(``OUTPUT_DIR/desk*.parquet``). ``--shifts-bp`` (or ``--shift-count N``: N shifts 10 bp apart, centred on 0) prices
every row under each parallel shift of the curves; ``--scenario-table`` passes the scenario table's layout to
``Pricer.run`` (only when given). ``--measures`` adds risk measures to every lattice job; with ``oas``, the
portfolio is first priced once on the first cluster (untimed) and given a ``market_price`` 0.5 % below each row's
clean price, so that every row's OAS is searched (as in ``benchmarks/risk.py``). "job s" is ``Pricer.run`` from the
file to the priced Parquet file (read, checks, pricing, writing), or ``Pricer.price_mc`` from the tables to the
prices, the median of ``--repeat`` runs after a warm-up run on each cluster (cut into ``--chunks-per-worker`` chunks
per worker however small the job, so that every worker has its kernels compiled). From the pricing metrics:
"kernel s", each GPU's kernel time, the GPU kernel times of all the worker processes (CUDA events) summed and divided
by the GPUs (a GPU's processes launch in turns, so their kernels do not overlap; on CPU workers, the longest worker's
time in the CPU engine's pricing loops), and "tasks s", per worker, the longest sum of its pricing tasks' own time
(kernels plus the host layout: event tables, bin packing, copies). "outside kernels s" = job s - kernel s: Dask's
overhead (reading, checks, scheduling, transfers, the writing of the output) and the host layout. Dask's task stream
splits the job's wall time into phases: until the last read task ends ("read"), until the last pricing task ends
("price"), and the rest ("tail": the last results' transfer and the end of the writing). With ``--folder`` the priced
table is a folder of Parquet parts (``OUTPUT_DIR/priced/``), each written by the worker that priced its slice,
instead of one file the client writes. Prices are compared with those of the first worker count. Writes
``dask_scaling.json`` and ``dask_scaling.md``. ``--chunks-per-worker`` defaults to the cluster's own (2 per worker
process on a GPU cluster, 4 on a CPU one). Each timed job runs with the objects alive at its start out of the garbage
collector's full passes, as in ``distprice run`` (``gc.freeze``).
"""

from __future__ import annotations

import argparse
import collections
import gc
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import cloudpickle
import numpy as np
import pandas as pd
from distributed import get_task_stream

from distprice.cluster.config import ClusterConfig
from distprice.cluster.metrics import PLUGIN_NAME
from distprice.cluster.pricer import Pricer
from distprice.cluster.tasks import describe_worker
from distprice.lattice.datasets import DEFAULT_SIZES
from distprice.montecarlo import datasets as mc_datasets
from distprice.scenarios import parse_shifts
from distprice.tables import write_tables

from common import save, write_copies, write_desk_copies

DESK_COPY_ROWS = 100_000
"""Rows of each copy of the desk book."""
SUITE_SHIFTS = 16
"""Shifts of the table's shifted rows when neither ``--shifts-bp`` nor ``--shift-count`` is given."""
ROWS = ("file", "folder", "shifted-file", "shifted-folder", "mc")
"""The rows ``--rows`` may name, in the table's order (``all``: every one)."""
PRICING_TASKS = ("price_", "mc_paths_")
"""The beginnings of the names of the tasks that price: a lattice slice (priced, or priced and written), a
Monte-Carlo path range."""


@dataclass(frozen=True)
class Row:
    """One job: the portfolio into one file or a folder of parts, under ``shifts_bp`` or none; or, with
    ``mc_paths``, a Monte-Carlo job of the large set on that many paths."""

    name: str
    shifts_bp: tuple[float, ...] | None = None
    folder: bool = False
    mc_paths: int | None = None


@dataclass(frozen=True)
class Cluster:
    """A cluster's pricer and what its workers are: ``place`` of each worker (its GPU, or itself on CPU workers),
    ``devices`` (GPUs, or CPU workers) and the ``device`` name."""

    pricer: Pricer
    place: dict[str, str]
    gpu: bool
    device: str

    @property
    def devices(self) -> int:
        return len(set(self.place.values()))

    @property
    def label(self) -> str:
        n = self.devices
        return f"{n} GPU{'s' * (n != 1)}" if self.gpu else f"{n} worker{'s' * (n != 1)}"


def _pricing_totals(dask_scheduler=None):
    return dask_scheduler.plugins[PLUGIN_NAME].snapshot()


def cluster(pricer: Pricer, cpu: bool, least: int = 1) -> Cluster:
    """What ``pricer``'s workers are (``cpu``: CPU workers, whatever devices they have), once ``least`` have
    joined."""
    pricer.client.wait_for_workers(least, timeout=120)
    described = pricer.client.run(describe_worker, "fp64")
    gpu = not cpu and all(d["gpu"] for d in described.values())
    place = {address: d["place"] if gpu else address for address, d in described.items()}
    return Cluster(pricer, place, gpu, next(iter(described.values()))["device"] if gpu else "cpu")


def _remove(output) -> None:
    """The previous run's output, removed."""
    if output is None:
        return
    path = Path(str(output))
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def measure(on: Cluster, row: Row, path: Path, repeat: int, output, options: dict) -> tuple[dict, np.ndarray]:
    """The median of ``repeat`` runs of ``row``'s job after a warm-up, with every run's figures, and the job's
    prices (bond and option prices of each row, or each Monte-Carlo model's price)."""
    pricer = on.pricer
    mc_inputs = mc_datasets.large(row.mc_paths) if row.mc_paths else None

    def job():
        if mc_inputs is not None:
            return pricer.price_mc(mc_inputs)
        return pricer.run(str(path), output=output, shifts_bp=row.shifts_bp, **options)

    # warm-up: kernels compiled and caches filled on every worker (every job cut for all of them, however small)
    least, pricer.task_seconds = pricer.task_seconds, 0
    try:
        job()
    finally:
        pricer.task_seconds = least
    runs = []
    for _ in range(repeat):
        _remove(output)  # a job replacing a big file pays for the file system freeing it: not timed here
        before = pricer.client.run_on_scheduler(_pricing_totals)
        start = time.time()
        with get_task_stream(pricer.client) as stream:
            gc.freeze()  # as distprice run does for its job: no full collection over the setup's objects
            try:
                result = job()
            finally:
                end = time.time()  # before the task stream is fetched
                gc.unfreeze()
        after = pricer.client.run_on_scheduler(_pricing_totals)

        def spent(key):
            return [after[w][key] - before.get(w, {}).get(key, 0.0) for w in after] or [0.0]

        run = {"job_s": end - start, **phases(stream.data, start, end)}
        if mc_inputs is not None:
            run.update(kernel_s=busiest(stream.data, "mc_paths_", on.place), ranges=int(result["chunks"].iloc[0]))
        else:
            kernel_s = sum(spent("kernel_seconds")) / on.devices if on.gpu else max(spent("kernel_seconds"))
            run.update(
                kernel_s=kernel_s,
                pricing_s=max(spent("seconds")),
                node_steps=result.node_steps,
                engines=result.engines,
                rows_priced=result.priced,
            )
        runs.append(run)
    middle = sorted(runs, key=lambda r: r["job_s"])[(len(runs) - 1) // 2]
    figures = {"workers": on.devices, **middle, "outside_kernels_s": middle["job_s"] - middle["kernel_s"], "runs": runs}
    if mc_inputs is not None:
        return figures, result["price"].to_numpy()
    figures["ns_per_s"] = middle["node_steps"] / middle["job_s"]
    priced = pd.read_parquet(output, columns=["bond_price", "option_price"])
    return figures, priced.to_numpy().T


def book_name(args) -> str:
    """The book's name in the tables: ``10xR1``, or ``R1[:1000]`` for the first rows of its copies."""
    return f"{args.dataset}[:{args.book_rows}]" if args.book_rows else f"{args.copies}x{args.dataset}"


def quote(pricer: Pricer, path: Path, output: Path, options: dict) -> None:
    """Gives the portfolio at ``path`` a clean ``market_price`` 0.5 % below each row's model clean price (its
    price for a time-form row), from one untimed run of ``pricer``."""
    pricer.run(str(path), output=output, **options)
    priced = pd.read_parquet(output)
    model = priced["clean_price"] if "clean_price" in priced.columns else priced["price"]
    portfolio = pd.read_parquet(path)
    quotes = pd.Series(model.to_numpy() * 0.995, index=priced["id"]).reindex(portfolio["id"]).to_numpy()
    portfolio = portfolio.assign(market_price=quotes, market_price_type="clean")
    write_tables([portfolio.iloc[i : i + 65_536] for i in range(0, len(portfolio), 65_536)], path)
    output.unlink()


def phases(tasks: list[dict], start: float, end: float) -> dict:
    """Wall seconds of a job's phases from Dask's task stream records (``startstops`` of each task)."""

    def last_stop(prefix):
        stops = [s["stop"] for t in tasks if name(t).startswith(prefix) for s in computed(t)]
        return max(stops, default=start)

    read_end = max(last_stop("read-chunk"), last_stop("inspect-chunk"))
    price_end = max(read_end, *(last_stop(prefix) for prefix in PRICING_TASKS))
    return {"read_phase_s": read_end - start, "price_phase_s": price_end - read_end, "tail_s": end - price_end}


def name(task: dict) -> str:
    """A task stream record's key as a string (the first element of a tuple key)."""
    key = task["key"]
    return key[0] if isinstance(key, tuple) else key


def computed(task: dict) -> list[dict]:
    """A task stream record's compute intervals."""
    return [s for s in task["startstops"] if s["action"] == "compute"]


def busiest(tasks: list[dict], prefix: str, place: dict[str, str]) -> float:
    """Seconds the busiest device (a GPU, whichever of its workers ran them, or a CPU worker) spent in tasks whose
    name starts with ``prefix``: the length of the union of their compute intervals."""
    spans = collections.defaultdict(list)
    for t in tasks:
        if name(t).startswith(prefix):
            spans[place.get(t["worker"], t["worker"])] += [(s["start"], s["stop"]) for s in computed(t)]
    busy = []
    for intervals in spans.values():
        total, reach = 0.0, float("-inf")
        for a, b in sorted(intervals):
            total += max(0.0, b - max(a, reach))
            reach = max(reach, b)
        busy.append(total)
    return max(busy, default=0.0)


def max_rel_diff(prices: np.ndarray, reference: np.ndarray) -> float:
    """Largest difference of a portfolio's bond and option prices ([2, rows]) from the reference's, relative to the
    reference's bond price (an option's rounding is that of the bond it is written on), over rows priced in both,
    inf when the tables differ in length or in which rows are priced; of Monte-Carlo prices ([models]), relative
    to each reference price."""
    if prices.shape != reference.shape:
        return float("inf")
    if prices.ndim == 1:
        return float(np.max(np.abs(prices - reference) / np.abs(reference), initial=0.0))
    bond = reference[0]
    ok = ~np.isnan(bond)
    if not np.array_equal(np.isnan(prices[0]), ~ok):
        return float("inf")
    return max(float(np.max(np.abs(p[ok] - r[ok]) / np.abs(bond[ok]), initial=0.0)) for p, r in zip(prices, reference))


def power(n: int) -> str:
    """``2^k`` for a power of two, else the number."""
    return f"2^{n.bit_length() - 1}" if n & (n - 1) == 0 else str(n)


def chosen_rows(args, shifts_bp) -> list[Row]:
    """The jobs ``--rows`` names."""
    if args.rows == "job":
        return [Row("job", shifts_bp, args.folder)]
    names = ROWS if args.rows == "all" else tuple(n.strip() for n in args.rows.split(","))
    unknown = set(names) - set(ROWS)
    if unknown:
        raise SystemExit(f"--rows: no row {', '.join(sorted(unknown))}; rows: job, all or some of {', '.join(ROWS)}")
    shifted = shifts_bp or tuple(10.0 * (i - (SUITE_SHIFTS - 1) / 2) for i in range(SUITE_SHIFTS))
    book = book_name(args)
    rows = {
        "file": [Row(f"{book}, one file", None, False)],
        "folder": [Row(f"{book}, folder of parts", None, True)],
        "shifted-file": [Row(f"{book} x {len(shifted)} shifts, one file", shifted, False)],
        "shifted-folder": [Row(f"{book} x {len(shifted)} shifts, folder of parts", shifted, True)],
        "mc": [Row(f"Monte Carlo, large set, {power(p)} paths", mc_paths=p) for p in args.mc_paths],
    }
    return [row for n in ROWS if n in names for row in rows[n]]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--dataset", default="R1")
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--book-rows", type=int, help="rows of the book, the copies' first rows (a small job)")
    parser.add_argument("--workers", default="1,2", help="GPUs (CPU workers with --cpu) of each local cluster")
    parser.add_argument("--cpu", action="store_true", help="CPU workers instead of one worker per GPU")
    parser.add_argument(
        "--threads-per-worker",
        type=int,
        default=None,
        help="threads of each worker (default: the cluster's: 1 on CPU workers, on GPU workers the "
        "cores the workers leave)",
    )
    parser.add_argument(
        "--workers-per-gpu",
        type=int,
        default=None,
        help="worker processes per GPU (default: the cluster's, half the cores per GPU up to 6)",
    )
    parser.add_argument("--shifts-bp", type=parse_shifts, default=None, help="parallel shifts, e.g. -100,0,100")
    parser.add_argument("--shift-count", type=int, default=0, help="N shifts 10 bp apart, centred on 0")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--chunks-per-worker",
        type=int,
        default=None,
        help="slices of the file per worker process (default: the cluster's)",
    )
    parser.add_argument("--folder", action="store_true", help="write a folder of parts (by the workers), not one file")
    parser.add_argument(
        "--rows",
        default="job",
        help="job (the one job the options describe), all, or some of " + ",".join(ROWS) + " (a scale-out table)",
    )
    parser.add_argument(
        "--mc-paths",
        type=lambda text: [int(p) for p in text.split(",")],
        default=[2**25, 2**21],
        help="paths of the Monte-Carlo rows (default: 33554432,2097152)",
    )
    parser.add_argument(
        "--scheduler",
        default=None,
        help="tcp://HOST:PORT: run through this scheduler and the workers it has (--workers, --cpu, "
        "--threads-per-worker, --workers-per-gpu ignored)",
    )
    parser.add_argument(
        "--scheduler-workers", type=int, default=1, help="with --scheduler: wait for this many workers to join"
    )
    parser.add_argument(
        "--scenario-table", default=None, help="the scenario table's layout (long, wide or full), passed to Pricer.run"
    )
    parser.add_argument("--measures", default=None, help="risk measures of every lattice job, e.g. dv01,oas")
    args = parser.parse_args(argv)
    shifts_bp = args.shifts_bp or (
        tuple(10.0 * (i - (args.shift_count - 1) / 2) for i in range(args.shift_count)) if args.shift_count else None
    )
    rows_wanted = chosen_rows(args, shifts_bp)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    options, path, rows = {}, args.output_dir / "portfolio.parquet", 0
    if any(row.mc_paths is None for row in rows_wanted):
        if args.dataset == "desk":
            rows = args.book_rows or args.copies * DESK_COPY_ROWS
            options = write_desk_copies(args.output_dir, rows, DESK_COPY_ROWS)
            path = Path(options.pop("portfolio"))
        else:
            size = DEFAULT_SIZES[args.dataset]
            rows = write_copies(path, args.dataset, args.book_rows or args.copies * size, size)
    if args.scenario_table is not None:
        options["scenario_table"] = args.scenario_table
    quoted = args.measures is not None and "oas" in args.measures and any(r.mc_paths is None for r in rows_wanted)

    def clusters():
        if args.scheduler:
            # workers started apart do not import this script: what it sends them travels by value
            cloudpickle.register_pickle_by_value(sys.modules[__name__])
            with Pricer(args.scheduler, chunks_per_worker=args.chunks_per_worker) as pricer:
                yield cluster(pricer, cpu=False, least=args.scheduler_workers)
            return
        for workers in (int(w) for w in args.workers.split(",")):
            config = ClusterConfig(
                kind="local" if args.cpu else "local-cuda",
                n_workers=workers,
                threads_per_worker=args.threads_per_worker,
                workers_per_gpu=args.workers_per_gpu,
                dashboard_address=None,
            )
            with Pricer(config, chunks_per_worker=args.chunks_per_worker) as pricer:
                yield cluster(pricer, args.cpu)

    results = {row.name: [] for row in rows_wanted}
    reference: dict[str, np.ndarray] = {}
    device = "cpu"
    for on in clusters():
        device = on.device
        if quoted:
            quote(on.pricer, path, args.output_dir / "model.parquet", options)
            quoted = False
        if args.measures is not None:
            options["measures"] = args.measures
        for row in rows_wanted:
            output = f"{args.output_dir / 'priced'}/" if row.folder else args.output_dir / "priced.parquet"
            figures, prices = measure(on, row, path, args.repeat, output, options)
            reference.setdefault(row.name, prices)
            figures["label"] = on.label
            figures["max_rel_diff"] = max_rel_diff(prices, reference[row.name])
            results[row.name].append(figures)
            print(f"{on.label}: {row.name}: job {figures['job_s']:.3f} s", flush=True)
    settings = (
        f"{device}, scheduler {args.scheduler}"
        if args.scheduler
        else f"{device}, {args.threads_per_worker or 'default'} thread(s) per worker, worker processes per GPU "
        f"{args.workers_per_gpu or 'default'}"
    )
    settings += (
        f", {args.chunks_per_worker or 'default'} chunks per worker"
        + (f", scenario table {args.scenario_table}" if args.scenario_table else "")
        + f", {time.strftime('%Y-%m-%d')}"
    )
    if args.rows == "job":
        scenarios = len(shifts_bp) if shifts_bp else 1
        report = {
            "dataset": book_name(args) + (f" x {scenarios} shifts" if shifts_bp else ""),
            "output": "folder of parts" if args.folder else "one file",
            "rows": rows,
            "scenarios": scenarios,
            "threads_per_worker": args.threads_per_worker,
            "device": device,
            "scheduler": args.scheduler,
            "results": results["job"],
        }
        lines = job_table(report, settings)
    else:
        report = {"rows": rows, "device": device, "scheduler": args.scheduler, "jobs": results}
        book = f"{book_name(args)} ({rows} rows), " if rows else ""
        lines = scale_table(results, book + settings)
    save(args.output_dir, "dask_scaling", report, lines)


def job_table(report: dict, settings: str) -> list[str]:
    """The detailed table of one job on each cluster."""
    results = report["results"]
    base = results[0]
    lines = [
        f"{report['dataset']} ({report['rows']} rows, {report['rows'] * report['scenarios']} prices), {settings}, "
        f"output {report['output']}; differences against the {base['label']} prices",
        "",
        "| workers | job s | speed-up | efficiency | kernel s | outside kernels s | tasks s "
        "| read / price / tail s | NS/s | max rel diff | engines |",
        "|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|",
    ]
    for r in results:
        r["speedup"] = base["job_s"] / r["job_s"]
        r["efficiency"] = r["speedup"] * base["workers"] / r["workers"]
        lines.append(
            f"| {r['label']} | {r['job_s']:.2f} | {r['speedup']:.2f} | {r['efficiency']:.0%} | "
            f"{r['kernel_s']:.2f} | {r['outside_kernels_s']:.2f} | {r['pricing_s']:.2f} | "
            f"{r['read_phase_s']:.2f} / {r['price_phase_s']:.2f} / {r['tail_s']:.2f} | {r['ns_per_s']:.3e} | "
            f"{r['max_rel_diff']:.1e} | " + ", ".join(f"{k} {v}" for k, v in r["engines"].items()) + " |"
        )
    return lines


def scale_table(results: dict[str, list[dict]], settings: str) -> list[str]:
    """The scale-out table: a row per job, for each cluster its job, speed-up, kernel and tail seconds."""
    labels = [r["label"] for r in next(iter(results.values()))]
    lines = [
        f"{settings}; medians of the timed runs; speed-up against {labels[0]}",
        "",
        "| job | "
        + " | ".join(f"{label}: job s | speed-up | kernel s | tail s" for label in labels)
        + " | max rel diff |",
        "|---|" + "---:|---:|---:|---:|" * len(labels) + "---:|",
    ]
    for job, runs in results.items():
        cells = []
        for r in runs:
            r["speedup"] = runs[0]["job_s"] / r["job_s"]
            cells.append(f"{r['job_s']:.3f} | {r['speedup']:.2f} | {r['kernel_s']:.3f} | {r['tail_s']:.3f}")
        worst = max(r["max_rel_diff"] for r in runs)
        lines.append(f"| {job} | " + " | ".join(cells) + f" | {worst:.1e} |")
    return lines


if __name__ == "__main__":
    main()

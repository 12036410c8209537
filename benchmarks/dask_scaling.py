"""A whole distprice job on a local Dask cluster of 1, 2, ... GPUs (or CPU workers): wall time, speed-up,
and the Dask overhead (time outside the pricing tasks).

    python benchmarks/dask_scaling.py OUTPUT_DIR [--dataset R1] [--copies 10] [--workers 1,2,4] [--cpu]
        [--threads-per-worker T] [--workers-per-gpu K] [--shifts-bp -100,0,100 | --shift-count 50] [--repeat 3]
        [--chunks-per-worker C] [--folder]

``--workers`` counts GPUs (each with the cluster's worker processes per GPU, or ``--workers-per-gpu``), or
CPU workers with ``--cpu``.

The portfolio is ``--copies`` copies of the dataset at full size (other seeds, ids renumbered), written to
``OUTPUT_DIR/portfolio.parquet`` in row groups of 65 536 rows; at 10⁶ rows and over the workers read it themselves.
``--dataset desk`` takes copies of 10⁵ rows of the dated ``desk`` book, with its curves and exercise schedule
(``OUTPUT_DIR/desk*.parquet``). ``--shifts-bp`` (or ``--shift-count N``: N shifts 10 bp apart, centred on 0) prices
every row under each parallel shift of the curves. "job s" is ``Pricer.run`` from the file to the priced Parquet
file (read, checks, pricing, writing), the median of ``--repeat`` runs after a warm-up run on each cluster. From the
pricing metrics: "kernel s", each GPU's kernel time, the GPU kernel times of all the worker processes (CUDA events)
summed and divided by the GPUs (a GPU's processes launch in turns, so their kernels do not overlap; on CPU workers,
the longest worker's time in the CPU engine's pricing loops), and "tasks s", per worker, the longest sum of its
pricing tasks' own time (kernels plus the host layout: event tables, bin packing, copies). "outside kernels s" =
job s - kernel s: Dask's overhead (reading, checks, scheduling, transfers, the writing of the output) and the host
layout. Dask's task stream splits the job's wall time into phases: until the last read task ends ("read"), until the
last pricing task ends ("price"), and the rest ("tail": the last results' transfer and the end of the writing). With
``--folder`` the priced table is a folder of Parquet parts (``OUTPUT_DIR/priced/``), each written by the worker that
priced its slice, instead of one file the client writes. Prices are compared with those of the first worker count.
Writes ``dask_scaling.json`` and ``dask_scaling.md``. ``--chunks-per-worker`` defaults to the cluster's own (2 per
worker process on a GPU cluster, 4 on a CPU one). Each timed job runs with the objects alive at its start out of the
garbage collector's full passes, as in ``distprice run`` (``gc.freeze``).
"""

from __future__ import annotations

import argparse
import gc
import time
from pathlib import Path

import numpy as np
import pandas as pd
from distributed import get_task_stream

from distprice.cluster.config import ClusterConfig
from distprice.cluster.metrics import PLUGIN_NAME
from distprice.cluster.pricer import Pricer
from distprice.cuda import device_name, gpu_available
from distprice.lattice.datasets import DEFAULT_SIZES
from distprice.scenarios import parse_shifts

from common import save, write_copies, write_desk_copies

DESK_COPY_ROWS = 100_000
"""Rows of each copy of the desk book."""


def _pricing_totals(dask_scheduler=None):
    return dask_scheduler.plugins[PLUGIN_NAME].snapshot()


def measure(
    path: Path,
    workers: int,
    threads: int,
    cpu: bool,
    shifts_bp,
    repeat: int,
    output: Path,
    per_gpu: int | None = None,
    chunks_per_worker: int | None = None,
    options: dict | None = None,
) -> dict:
    config = ClusterConfig(
        kind="local" if cpu else "local-cuda",
        n_workers=workers,
        threads_per_worker=threads,
        workers_per_gpu=per_gpu,
        dashboard_address=None,
    )
    with Pricer(config, chunks_per_worker=chunks_per_worker) as pricer:
        # warm-up: kernels compiled and caches filled on every worker
        pricer.run(str(path), output=output, shifts_bp=shifts_bp, **(options or {}))
        jobs = []
        for _ in range(repeat):
            before = pricer.client.run_on_scheduler(_pricing_totals)
            start = time.time()
            with get_task_stream(pricer.client) as stream:
                gc.freeze()  # as distprice run does for its job: no full collection over the setup's objects
                try:
                    summary = pricer.run(str(path), output=output, shifts_bp=shifts_bp, **(options or {}))
                finally:
                    gc.unfreeze()
            end = time.time()
            after = pricer.client.run_on_scheduler(_pricing_totals)

            def spent(key):
                return [after[w][key] - before.get(w, {}).get(key, 0.0) for w in after]

            kernel_s = max(spent("kernel_seconds")) if cpu else sum(spent("kernel_seconds")) / workers
            jobs.append(
                {
                    "job_s": end - start,
                    "pricing_s": max(spent("seconds")),
                    "kernel_s": kernel_s,
                    "node_steps": summary.node_steps,
                    "engines": summary.engines,
                    **phases(stream.data, start, end),
                }
            )
    middle = sorted(jobs, key=lambda j: j["job_s"])[(len(jobs) - 1) // 2]
    return {
        "workers": workers,
        "rows_priced": summary.priced,
        **middle,
        "outside_kernels_s": middle["job_s"] - middle["kernel_s"],
        "ns_per_s": middle["node_steps"] / middle["job_s"],
        "runs": jobs,
    }


def phases(tasks: list[dict], start: float, end: float) -> dict:
    """Wall seconds of a job's phases from Dask's task stream records (``startstops`` of each task)."""

    def last_stop(prefix):
        stops = [
            s["stop"]
            for t in tasks
            if t["key"][0 if isinstance(t["key"], tuple) else slice(None)].startswith(prefix)
            for s in t["startstops"]
            if s["action"] == "compute"
        ]
        return max(stops, default=start)

    read_end = max(last_stop("read-chunk"), last_stop("inspect-chunk"))
    price_end = max(read_end, last_stop("price_"), last_stop("gather"))
    return {"read_phase_s": read_end - start, "price_phase_s": price_end - read_end, "tail_s": end - price_end}


def max_rel_diff(priced: pd.DataFrame, reference: pd.DataFrame) -> float:
    """Largest difference of ``bond_price`` or ``option_price`` from the reference, relative to the
    reference's bond price (an option's rounding is that of the bond it is written on), over rows priced in
    both; inf when the tables differ in length or in which rows are priced."""
    bond = reference["bond_price"].to_numpy()
    ok = ~np.isnan(bond)
    if len(priced) != len(reference) or not np.array_equal(np.isnan(priced["bond_price"].to_numpy()), ~ok):
        return float("inf")
    return max(
        float(np.max(np.abs(priced[c].to_numpy()[ok] - reference[c].to_numpy()[ok]) / np.abs(bond[ok]), initial=0.0))
        for c in ("bond_price", "option_price")
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--dataset", default="R1")
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--workers", default="1,2")
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
        help="worker processes per GPU (default: the cluster's, half the cores per GPU up to 8)",
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
    args = parser.parse_args(argv)
    shifts_bp = args.shifts_bp or (
        tuple(10.0 * (i - (args.shift_count - 1) / 2) for i in range(args.shift_count)) if args.shift_count else None
    )
    args.output_dir.mkdir(parents=True, exist_ok=True)
    if args.dataset == "desk":
        options = write_desk_copies(args.output_dir, args.copies * DESK_COPY_ROWS, DESK_COPY_ROWS)
        path, rows = Path(options.pop("portfolio")), args.copies * DESK_COPY_ROWS
    else:
        options, path = {}, args.output_dir / "portfolio.parquet"
        size = DEFAULT_SIZES[args.dataset]
        rows = write_copies(path, args.dataset, args.copies * size, size)
    device = "cpu" if args.cpu or not gpu_available() else device_name()
    scenarios = len(shifts_bp) if shifts_bp else 1
    report = {
        "dataset": f"{args.copies}x{args.dataset}" + (f" x {scenarios} shifts" if shifts_bp else ""),
        "output": "folder of parts" if args.folder else "one file",
        "rows": rows,
        "scenarios": scenarios,
        "threads_per_worker": args.threads_per_worker,
        "device": device,
        "results": [],
    }
    first = None
    for workers in (int(w) for w in args.workers.split(",")):
        output = f"{args.output_dir / 'priced'}/" if args.folder else args.output_dir / "priced.parquet"
        report["results"].append(
            measure(
                path,
                workers,
                args.threads_per_worker,
                args.cpu,
                shifts_bp,
                args.repeat,
                output,
                args.workers_per_gpu,
                args.chunks_per_worker,
                options,
            )
        )
        prices = pd.read_parquet(output, columns=["bond_price", "option_price"])
        first = prices if first is None else first
        report["results"][-1]["max_rel_diff"] = max_rel_diff(prices, first)
    base = report["results"][0]
    lines = [
        f"{report['dataset']} ({rows} rows, {rows * scenarios} prices), {device}, "
        f"{args.threads_per_worker or 'default'} thread(s) per worker, worker processes per GPU "
        f"{args.workers_per_gpu or 'default'}, {args.chunks_per_worker or 'default'} chunks per worker, output "
        f"{report['output']}, {time.strftime('%Y-%m-%d')}; "
        f"differences against the {base['workers']}-worker prices",
        "",
        "| workers | job s | speed-up | efficiency | kernel s | outside kernels s | tasks s "
        "| read / price / tail s | NS/s | max rel diff | engines |",
        "|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|",
    ]
    for r in report["results"]:
        r["speedup"] = base["job_s"] / r["job_s"]
        r["efficiency"] = r["speedup"] * base["workers"] / r["workers"]
        lines.append(
            f"| {r['workers']} | {r['job_s']:.2f} | {r['speedup']:.2f} | {r['efficiency']:.0%} | "
            f"{r['kernel_s']:.2f} | {r['outside_kernels_s']:.2f} | {r['pricing_s']:.2f} | "
            f"{r['read_phase_s']:.2f} / {r['price_phase_s']:.2f} / {r['tail_s']:.2f} | {r['ns_per_s']:.3e} | "
            f"{r['max_rel_diff']:.1e} | " + ", ".join(f"{k} {v}" for k, v in r["engines"].items()) + " |"
        )
    save(args.output_dir, "dask_scaling", report, lines)


if __name__ == "__main__":
    main()

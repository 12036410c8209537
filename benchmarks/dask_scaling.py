"""A whole distprice job on a local Dask cluster of 1, 2, ... GPUs (or CPU workers): wall time, speed-up,
and the Dask overhead (time outside the pricing tasks).

    python benchmarks/dask_scaling.py OUTPUT_DIR [--dataset R1] [--copies 10] [--workers 1,2] [--cpu] [--repeat 3]

The portfolio is ``--copies`` copies of the dataset at full size (other seeds, ids renumbered), written to
``OUTPUT_DIR/portfolio.parquet`` in row groups of 65 536 rows; at 10⁶ rows and over the workers read it
themselves. "job s" is ``Pricer.run`` from the file to the priced Parquet file (read, checks, pricing,
writing), the median of ``--repeat`` runs after a warm-up run on each cluster. "pricing s" is the longest
per-worker sum of the pricing tasks' own time (layout on the host and the kernels), from the pricing
metrics; "overhead s" = job s - pricing s: reading, checks, scheduling, transfers and the writing of the
output. Writes ``dask_scaling.json`` and ``dask_scaling.md``.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import pandas as pd

from report import save

from distprice import datasets
from distprice.config import ClusterConfig
from distprice.engines import gpu_available
from distprice.engines.gpu import device_name
from distprice.metrics import PLUGIN_NAME
from distprice.runtime import Pricer
from distprice.tables import write_table


def _pricing_seconds(dask_scheduler=None):
    return {w: t["seconds"] for w, t in dask_scheduler.plugins[PLUGIN_NAME].snapshot().items()}


def portfolio(path: Path, name: str, copies: int) -> int:
    table = pd.concat([datasets.generate(name, seed=seed) for seed in range(copies)], ignore_index=True)
    write_table(table.assign(id=np.arange(len(table))), path)
    return len(table)


def measure(path: Path, workers: int, cpu: bool, repeat: int, output: Path) -> dict:
    config = ClusterConfig(kind="local" if cpu else "local-cuda", n_workers=workers, dashboard_address=None)
    with Pricer(config) as pricer:
        pricer.run(str(path), output=output)  # warm-up: kernels compiled and caches filled on every worker
        jobs = []
        for _ in range(repeat):
            before = pricer.client.run_on_scheduler(_pricing_seconds)
            tick = time.perf_counter()
            summary = pricer.run(str(path), output=output)
            seconds = time.perf_counter() - tick
            after = pricer.client.run_on_scheduler(_pricing_seconds)
            pricing = max(after[w] - before.get(w, 0.0) for w in after)
            jobs.append({"job_s": seconds, "pricing_s": pricing, "node_steps": summary.node_steps,
                         "engines": summary.engines})
    job_s = statistics.median(j["job_s"] for j in jobs)
    pricing_s = statistics.median(j["pricing_s"] for j in jobs)
    return {"workers": workers, "job_s": job_s, "pricing_s": pricing_s, "overhead_s": job_s - pricing_s,
            "ns_per_s": jobs[0]["node_steps"] / job_s, "engines": jobs[0]["engines"], "runs": jobs}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--dataset", default="R1")
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--cpu", action="store_true", help="CPU workers instead of one worker per GPU")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    path = args.output_dir / "portfolio.parquet"
    rows = portfolio(path, args.dataset, args.copies)
    device = "cpu" if args.cpu or not gpu_available() else device_name()
    report = {"dataset": f"{args.copies}x{args.dataset}", "rows": rows, "device": device,
              "date": time.strftime("%Y-%m-%d"), "results": []}
    for workers in (int(w) for w in args.workers.split(",")):
        report["results"].append(measure(path, workers, args.cpu, args.repeat, args.output_dir / "priced.parquet"))
    one = report["results"][0]["job_s"]
    lines = [f"{report['dataset']} ({rows} rows), {device}, {report['date']}", "",
             "| workers | job s | speed-up | pricing s | overhead s | NS/s | engines |",
             "|---:|---:|---:|---:|---:|---:|---|"]
    for r in report["results"]:
        r["speedup"] = one / r["job_s"]
        lines.append(f"| {r['workers']} | {r['job_s']:.2f} | {r['speedup']:.2f} | {r['pricing_s']:.2f} | "
                     f"{r['overhead_s']:.2f} | {r['ns_per_s']:.3e} | "
                     + ", ".join(f"{k} {v}" for k, v in r["engines"].items()) + " |")
    save(args.output_dir, "dask_scaling", report, lines)


if __name__ == "__main__":
    main()

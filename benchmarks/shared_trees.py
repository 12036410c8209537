"""Shared forward passes: node-steps and engine time with every row alone and with the rows of a model sharing
their group's forward pass; writes ``shared_trees.json`` and ``shared_trees.md``.

    python benchmarks/shared_trees.py OUTPUT_DIR [--desk-size 20000] [--r1-size 20000] [--models 6] [--repeat 3]

Books: ``desk`` (three currency models), ``R1 few`` (R1's trees with a and sigma drawn from ``--models`` of
its rows' pairs: a book of a few models) and ``R1`` as the papers draw it (sigma rounded to 1e-4, so rows of
one width and sigma share already). The floor is counted in node-steps over full rectangles
(:func:`distprice.lattice.groups.shared_node_steps`): alone, 2 w h per row; shared, w h per row plus w H per group
(H its tallest). The CPU engine (this machine) is timed alone and shared, wall and process CPU seconds
(medians after a warm-up); on a machine with a GPU both GPU engines' kernels are timed too (CUDA events).

A forward pass costs less per node-step than a backward pass (one row of state prices against a bond's and,
below its last exercise, an option's rows, and the events), so the time falls by less than the node-steps.
The floor of the time shared is the time alone less the forward passes the followers no longer run: the
forward passes of every row are timed apart (the risk engine's ``trees``, which runs them alone), and
``floor = alone - forward x (1 - leaders' share of the forward node-steps)``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numba
import numpy as np

from distprice.cuda import gpu_available
from distprice.curves import load_curves
from distprice.lattice import datasets
from distprice.lattice.batch import pack
from distprice.lattice.cpu import run_cpu
from distprice.lattice.cpu_risk import CpuRisk
from distprice.lattice.groups import batch_groups, shared_node_steps
from distprice.lattice.instruments import prepare

from common import instruments, median_times, save


def r1_few_models(size: int, models: int):
    """R1 with each row's (a, sigma) one of ``models`` pairs drawn from its rows."""
    table = datasets.generate("R1", size, seed=0)
    rng = np.random.default_rng(1)
    pick = rng.choice(len(table), models, replace=False)[rng.integers(0, models, len(table))]
    table = table.assign(
        mean_reversion=table["mean_reversion"].to_numpy()[pick], volatility=table["volatility"].to_numpy()[pick]
    )
    curves = load_curves(None)
    return prepare(table, curves).instruments(), curves


def gpu_kernels(batch, repeat: int) -> dict:
    """Median kernel seconds of each GPU engine, alone and shared, and the largest price difference."""
    from distprice.cuda import device_name
    from distprice.lattice.gpu import price_gpu

    out = {"device": device_name()}
    for kernel in ("flat", "outer"):
        runs = {}
        for share in (False, True):
            done = [price_gpu(batch, kernel, share=share) for _ in range(repeat + 1)][1:]
            runs[share] = done[-1]
            out[f"{kernel}_{'shared' if share else 'alone'}_kernel_s"] = statistics.median(
                r.seconds["kernel"] for r in done
            )
        bond = np.abs(runs[False].bond)
        out[f"{kernel}_max_difference"] = float(
            max(
                np.max(np.abs(runs[True].bond - runs[False].bond) / bond),
                np.max(np.abs(runs[True].option - runs[False].option) / bond),
            )
        )
    return out


def measure(name: str, rows, curves, repeat: int) -> dict:
    tick = time.perf_counter()
    batch = pack(rows, curves)
    pack_s = time.perf_counter() - tick
    groups = batch_groups(batch)
    g = batch.geometry
    report = {
        "book": name,
        "rows": len(batch),
        "groups": len(groups),
        "pack_s": pack_s,
        "node_steps_alone": shared_node_steps(g.width, g.height),
        "node_steps_shared": shared_node_steps(g.width, g.height, groups.group),
        "load_before": os.getloadavg()[0],
    }
    results = {}
    for share in (False, True):
        wall, cpu, run = median_times(lambda: run_cpu(batch, share), repeat)
        key = "shared" if share else "alone"
        report.update({f"cpu_{key}_wall_s": wall, f"cpu_{key}_process_s": cpu})
        assert run.node_steps == report[f"node_steps_{key}"]
        results[share] = run
    report["bit_identical"] = bool(
        np.array_equal(results[True].bond, results[False].bond)
        and np.array_equal(results[True].option, results[False].option)
    )
    every = np.arange(len(batch))
    forward = CpuRisk(batch)
    wall, cpu, _ = median_times(lambda: forward.trees(every, rows.table["volatility"].to_numpy(), g.dr), repeat)
    unshared = 1.0 - float((g.width * g.height)[groups.leader].sum() / (g.width * g.height).sum())
    report.update(
        forward_wall_s=wall,
        forward_process_s=cpu,
        floor_wall_s=report["cpu_alone_wall_s"] - unshared * wall,
        floor_process_s=report["cpu_alone_process_s"] - unshared * cpu,
    )
    report["load_after"] = os.getloadavg()[0]
    if gpu_available():
        report["gpu"] = gpu_kernels(batch, repeat)
    return report


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--desk-size", type=int, default=20_000)
    parser.add_argument("--r1-size", type=int, default=20_000)
    parser.add_argument("--models", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    books = {
        "desk": lambda: instruments("desk", args.desk_size),
        f"R1 few ({args.models} models)": lambda: r1_few_models(args.r1_size, args.models),
        "R1": lambda: instruments("R1", args.r1_size),
    }
    reports = []
    for name, build in books.items():
        rows, curves = build()
        report = measure(name, rows, curves, args.repeat)
        reports.append(report)
        print(report, flush=True)
    lines = [
        f"CPU engine, {numba.get_num_threads()} threads; wall seconds (process CPU seconds), medians of "
        f"{args.repeat} after a warm-up",
        "",
        "| book | rows | groups | node-steps alone | shared | ratio | CPU alone s | CPU shared s | speed-up | "
        "forward passes s | floor s | shared / floor | bit-identical | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in reports:
        lines.append(
            f"| {r['book']} | {r['rows']} | {r['groups']} | {r['node_steps_alone']:.3e} | "
            f"{r['node_steps_shared']:.3e} | {r['node_steps_alone'] / r['node_steps_shared']:.2f}x | "
            f"{r['cpu_alone_wall_s']:.2f} ({r['cpu_alone_process_s']:.2f}) | "
            f"{r['cpu_shared_wall_s']:.2f} ({r['cpu_shared_process_s']:.2f}) | "
            f"{r['cpu_alone_wall_s'] / r['cpu_shared_wall_s']:.2f}x "
            f"({r['cpu_alone_process_s'] / r['cpu_shared_process_s']:.2f}x) | "
            f"{r['forward_wall_s']:.2f} ({r['forward_process_s']:.2f}) | "
            f"{r['floor_wall_s']:.2f} ({r['floor_process_s']:.2f}) | "
            f"{r['cpu_shared_wall_s'] / r['floor_wall_s']:.2f} "
            f"({r['cpu_shared_process_s'] / r['floor_process_s']:.2f}) | "
            f"{r['bit_identical']} | "
            f"{r['load_before']:.1f}-{r['load_after']:.1f} |"
        )
    gpu = [r for r in reports if "gpu" in r]
    if gpu:
        lines += [
            "",
            f"GPU kernels on {gpu[0]['gpu']['device']} (CUDA events, medians of {args.repeat})",
            "",
            "| book | flat alone ms | flat shared ms | speed-up | outer alone ms | outer shared ms | speed-up | "
            "max difference (flat, outer) |",
            "|---|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in gpu:
            k = r["gpu"]
            lines.append(
                " | ".join(
                    [f"| {r['book']}"]
                    + [
                        f"{k[f'{e}_alone_kernel_s'] * 1e3:.2f} | {k[f'{e}_shared_kernel_s'] * 1e3:.2f} | "
                        f"{k[f'{e}_alone_kernel_s'] / k[f'{e}_shared_kernel_s']:.2f}x"
                        for e in ("flat", "outer")
                    ]
                    + [f"{k['flat_max_difference']:.1e}, {k['outer_max_difference']:.1e} |"]
                )
            )
    save(args.output_dir, "shared_trees", {"numba_threads": numba.get_num_threads(), "books": reports}, lines)


if __name__ == "__main__":
    main()

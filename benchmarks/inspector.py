"""`engine="auto"` (the inspector's plan) against each fixed GPU engine, on the papers' datasets and mixtures.

    python benchmarks/inspector.py OUTPUT_DIR [--datasets U1,U2,...] [--size N] [--repeat 3]

"seconds" is what an engine call takes on a validated table: for a fixed engine ``pack`` (the event
tables) then ``price_gpu`` (layout, transfers, kernel, download); for auto the plan and its execution
(waves pipelined: the host packs wave k+1 while the GPU prices wave k). "kernel" is the kernel time
alone (CUDA events) of each fixed engine. Medians of ``--repeat`` runs after a warm-up of each; the three
engines take turns in a fresh random order each round, so that a drift of the machine (clocks, other load)
and the wake of the engine run just before (memory pool, caches) touch them alike. Uses the
tuned model of this device if there is one (``distprice tune``), else the shipped default. Writes
``inspector.json`` and ``inspector.md``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from distprice.cuda import device_name
from distprice.execute import price_plan
from distprice.lattice.batch import pack
from distprice.lattice.cpu import price_cpu
from distprice.lattice.gpu import price_gpu
from distprice.tuning import current_model

from common import instruments, save

DEFAULT = "U1,U2,R1,R2,R3,S1,S2,U1+S1,R1+S2,B1"


def walls(runs: dict, repeat: int) -> dict:
    """Median wall seconds of each of ``runs`` (name -> callable), warmed up, then timed in turns, in a new
    random order each round."""
    for run in runs.values():
        run()
    names, order = list(runs), random.Random(0)
    times = {name: [] for name in names}
    for _ in range(repeat):
        for name in order.sample(names, len(names)):
            tick = time.perf_counter()
            runs[name]()
            times[name].append(time.perf_counter() - tick)
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--datasets", default=DEFAULT)
    parser.add_argument("--size", type=int)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    model = current_model("fp64", gpu=True)
    report = {"device": device_name(), "model": json.loads(model.to_json()), "rows": []}
    for name in args.datasets.split(","):
        rows, curves = instruments(name, args.size)
        batch = pack(rows, curves)
        pack_s = walls({"pack": lambda: pack(rows, curves)}, args.repeat)["pack"]
        reference = price_cpu(batch)
        row = {
            "dataset": name,
            "rows": len(batch),
            "node_steps": float(batch.geometry.node_steps.sum()),
            "pack_s": pack_s,
        }

        def fixed(kernel):
            return lambda: price_gpu(pack(rows, curves), kernel)

        runs = {
            "flat_s": fixed("flat"),
            "outer_s": fixed("outer"),
            "auto_s": lambda: price_plan(rows, [curves], "auto", np.float64),
        }
        row.update(walls(runs, args.repeat))
        for kernel in ("flat", "outer"):
            row[f"{kernel}_kernel_s"] = statistics.median(
                price_gpu(batch, kernel).seconds["kernel"] for _ in range(args.repeat)
            )
        bond, option, chosen, _ = price_plan(rows, [curves], "auto", np.float64)
        bond, option = bond[0], option[0]
        row["auto_error"] = float(
            max(
                np.max(np.abs(bond - reference[0]) / np.abs(reference[0])),
                np.max(np.abs(option - reference[1]) / np.abs(reference[0])),
            )
        )
        row["plan"] = [
            {"engine": p.engine, "rows": int(len(p.rows)), "waves": p.waves, "predicted_s": p.seconds}
            for p in chosen.parts
        ]
        row["predicted_s"] = chosen.seconds
        best = min(row["flat_s"], row["outer_s"])
        row["auto_over_best"] = row["auto_s"] / best
        report["rows"].append(row)
        print(
            f"{name:6} rows {len(batch):6}  auto {row['auto_s'] * 1e3:8.1f} ms  flat {row['flat_s'] * 1e3:8.1f}"
            f"  outer {row['outer_s'] * 1e3:8.1f}  auto/best {row['auto_over_best']:.3f}  | kernels: flat "
            f"{row['flat_kernel_s'] * 1e3:7.2f} outer {row['outer_kernel_s'] * 1e3:7.2f}  predicted auto "
            f"{row['predicted_s'] * 1e3:7.2f}  pack {pack_s * 1e3:6.0f}  "
            + "; ".join(f"{p['engine']} {p['rows']} in {p['waves']}" for p in row["plan"])
            + f"  err {row['auto_error']:.1e}",
            flush=True,
        )
    lines = [
        f"{report['device']}, {time.strftime('%Y-%m-%d')}, model: {model.source}",
        "",
        "| dataset | rows | pack ms | auto ms | flat ms | outer ms | auto ÷ best | plan (rows in waves) "
        "| flat kernel ms | outer kernel ms | predicted auto ms |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for r in report["rows"]:
        parts = "; ".join(f"{p['engine']} {p['rows']} in {p['waves']}" for p in r["plan"])
        lines.append(
            f"| {r['dataset']} | {r['rows']} | {r['pack_s'] * 1e3:.0f} | {r['auto_s'] * 1e3:.1f} | "
            f"{r['flat_s'] * 1e3:.1f} | {r['outer_s'] * 1e3:.1f} | {r['auto_over_best']:.3f} | {parts} | "
            f"{r['flat_kernel_s'] * 1e3:.2f} | {r['outer_kernel_s'] * 1e3:.2f} | {r['predicted_s'] * 1e3:.2f} |"
        )
    save(args.output_dir, "inspector", report, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())

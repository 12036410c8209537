"""The full risk measure set against one pricing, on the CPU engine or the GPU; writes ``risk.json`` and
``risk.md``.

    python benchmarks/risk.py OUTPUT_DIR [--desk-size 2000] [--r1-size 5000] [--repeat 1] [--engine cpu|gpu]

On the ``desk`` book and on R1: one pricing (pack and the engine), then the measures (dv01, duration,
convexity: 2 parallel bumps; 8 key rates x 2; vega: 2 volatility bumps; OAS of every row, quoted at its
model dirty price less 0.5 %), whole and by part. As in a job, the OAS search takes the pricing's prices as
its values at spread 0. The floor counts node-steps as the CPU engines compute
them: a pricing is a forward pass per tree group (rows sharing a model share it) and a backward pass per tree
from its top down to its first exercise; the measures a forward pass per tree group and volatility, a backward
pass per curve bump from the bump's start step (a key-rate bump from the top of its triangle:
:func:`~distprice.lattice.sweeps.start_steps`; any bump at most from the last exercise where the row's cash flows
above it fall at one step, whose discount bond each tree rolls back once) down to the row's first exercise, two
per volatility bump and one per OAS evaluation; plain bonds none (they are valued off the tree). Their ratio is
what the measures cost if every node-step cost what a pricing's does; a callable or puttable bond's measures
roll one row of values back where its pricing rolls two (bond and option), which the count leaves out. CPU
times are CPU seconds of the process (all threads): on a shared machine, wall time counts the others' work too.
With ``--engine gpu`` the pricing is ``gpu-flat``'s and the measures the GPU risk engine's, timed in wall
seconds (results copied back), and ``gpu_vs_cpu`` is the largest difference from the CPU engine's measures on
the first 200 rows, over the largest value of each measure's column.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numba
import numpy as np

from distprice.lattice import risk
from distprice.lattice.batch import pack
from distprice.lattice.cpu import price_cpu
from distprice.lattice.cpu_risk import CpuRisk
from distprice.lattice.gpu import price_gpu
from distprice.lattice.groups import instrument_groups, shared_node_steps
from distprice.lattice.measures import DEFAULT_KEY_RATES
from distprice.lattice.quotes import Quotes
from distprice.lattice.risk import price_measures, settlement
from distprice.lattice.sweeps import key_rate_bumps, start_steps

from common import instruments as book, median_times, save

PARTS = {
    "parallel (3 bumps)": ["dv01", "duration", "convexity"],
    "key rates (16 bumps)": ["krd"],
    "vega (2 trees)": ["vega"],
}


ENGINES = {"cpu": "cpu", "gpu": "gpu-flat"}
"""The engine of each ``--engine``: the pricing's and the measures'."""
AGREEMENT_ROWS = 200


def timed(run, repeat: int, engine: str = "cpu"):
    """Median seconds of ``repeat`` calls after a warm-up, and the last result: process-CPU seconds on the CPU
    (on a machine shared with other work the time slices others take do not count), wall seconds on the GPU."""
    wall, cpu, result = median_times(run, repeat)
    return (cpu if engine == "cpu" else wall), result


def pricing(instruments, curves, engine: str):
    """Bond and option prices of one pricing (pack and the engine)."""
    if engine == "cpu":
        return price_cpu(pack(instruments, curves))
    run = price_gpu(pack(instruments, curves), "flat")
    return run.bond, run.option


def agreement(instruments, curves, out: dict) -> float:
    """The largest difference of ``out``'s measures (no OAS) from the CPU engine's on the first AGREEMENT_ROWS
    rows, over the largest value of each measure's column."""
    rows = np.arange(min(AGREEMENT_ROWS, len(instruments)))
    cpu = price_measures(instruments.take(rows), curves, engine="cpu")
    return max(
        float(np.nanmax(np.abs(out[k][rows] - v)) / np.nanmax(np.abs(v)))
        for k, v in cpu.items()
        if k != "error" and np.isfinite(v).any()
    )


def floor(instruments, curves, evaluations: float) -> dict:
    """Node-steps (full rectangles) of a pricing and of each part of the measure set, as the CPU engines compute
    them: a forward pass per tree group (the base trees' and each volatility bump's), every backward pass from
    its start step (a pricing's from the top; a bump's at most from the last exercise where the tree has a
    discount bond there, :class:`~distprice.lattice.cpu_risk.CpuRisk`, rolled back once per tree) down to the row's
    first exercise; plain bonds none (they are valued off the tree)."""
    g = instruments.geometry
    option = np.flatnonzero((instruments.table["instrument"] != "bond").to_numpy())
    engine = CpuRisk(pack(instruments.take(option), curves))
    cut, last = engine.cut, engine.batch.option_from
    w, n = g.width[option].astype(np.float64), g.height[option]
    top = np.where(engine.bonded, last, n)  # where bump 0's pass starts (a discount bond's trees: the last exercise)
    bond = (w * np.where(engine.bonded, engine.flow - last, 0)).sum()  # the discount bonds, once per tree
    grid = np.array(DEFAULT_KEY_RATES)
    bumps = np.concatenate([np.zeros((1, 8)), 1e-3 * key_rate_bumps(8), -1e-3 * key_rate_bumps(8)])
    start = start_steps(grid, np.broadcast_to(bumps, (len(w), *bumps.shape)), g.dt[option], n, g.phase[option])
    rolled = np.maximum(np.minimum(start, top[:, None]) - cut[:, None], 0)
    full = (w * rolled[:, 0]).sum()
    groups = instrument_groups(instruments, curves).group
    forward = shared_node_steps(g.width[option], n, groups[option]) - (w * n).sum()
    shared = shared_node_steps(g.width, g.height, groups) - (g.width.astype(np.float64) * g.height).sum()
    parts = {
        "pricing": shared + (w * (n - cut)).sum(),
        "forward": forward + bond,
        "parallel": 3 * full,
        "key rates": float((w[:, None] * rolled[:, 1:]).sum()),
        "vega": 2 * (forward + bond + full),
        "oas": evaluations * full,
    }
    parts["measures"] = sum(v for k, v in parts.items() if k != "pricing")
    return parts


def counted(evaluations: list):
    """:func:`~distprice.lattice.oas.find_roots` that records each row's evaluations in ``evaluations``."""
    find_roots = risk.find_roots

    def wrapper(*args, **kwargs):
        roots, count = find_roots(*args, **kwargs)
        evaluations.append(count)
        return roots, count

    return wrapper


def run(name: str, size: int, repeat: int, engine: str = "cpu") -> dict:
    instruments, curves = book(name, size)
    seconds, (bond, option) = timed(lambda: pricing(instruments, curves, engine), max(repeat, 3), engine)
    kind = instruments.table["instrument"].to_numpy()
    price = np.where(kind == "bond_option", option, bond + np.where(kind == "callable_bond", -option, option))
    t, discount, _ = settlement(instruments, curves)
    quotes = Quotes(price / discount * 0.995, np.ones(len(price), dtype=bool))
    report = {"rows": len(instruments), "node_steps": instruments.node_steps, "pricing_seconds": seconds, "parts": {}}
    for part, measures in {**PARTS, "oas (rounds)": ["oas"]}.items():
        oas = part.startswith("oas")
        seconds, out = timed(
            lambda: price_measures(
                instruments,
                curves,
                engine=ENGINES[engine],
                measures=measures,
                quotes=quotes if oas else None,
                base=price if oas else None,
            ),
            repeat,
            engine,
        )
        report["parts"][part] = seconds
        if part.startswith("oas"):
            report["oas_found"] = int(np.isfinite(out["oas"]).sum())
    report["measures_seconds"], out = timed(
        lambda: price_measures(instruments, curves, engine=ENGINES[engine], quotes=quotes, base=price), repeat, engine
    )
    report["measures_without_oas_seconds"], plain_out = timed(
        lambda: price_measures(instruments, curves, engine=ENGINES[engine]), repeat, engine
    )
    if engine != "cpu":
        report["gpu_vs_cpu"] = agreement(instruments, curves, plain_out)
    report["errors"] = int(sum(e is not None for e in out["error"]))
    evaluations = []
    risk.find_roots, plain = counted(evaluations), risk.find_roots
    try:
        price_measures(instruments, curves, engine=ENGINES[engine], measures=["oas"], quotes=quotes, base=price)
    finally:
        risk.find_roots = plain
    report["oas_evaluations_mean"] = float(evaluations[0].mean())
    report["oas_evaluations_max"] = int(evaluations[0].max())
    report["floor"] = floor(instruments, curves, report["oas_evaluations_mean"])
    return report


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--desk-size", type=int, default=2000)
    parser.add_argument("--r1-size", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--engine", choices=sorted(ENGINES), default="cpu")
    args = parser.parse_args()
    reports = {
        "engine": args.engine,
        "numba_threads": numba.get_num_threads(),
        "target_ratio": 6.0,
        "desk": run("desk", args.desk_size, args.repeat, args.engine),
        "R1": run("R1", args.r1_size, args.repeat, args.engine),
    }
    unit = "CPU s" if args.engine == "cpu" else "s"
    lines = [
        f"| book | rows | pricing {unit} | measures {unit} | ratio | without OAS | parallel | key rates | vega | "
        "OAS | OAS evaluations | floor ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in ("desk", "R1"):
        r = reports[name]
        p = r["pricing_seconds"]
        parts = " | ".join(f"{r['parts'][k] / p:.2f}x" for k in (*PARTS, "oas (rounds)"))
        lines.append(
            f"| {name} | {r['rows']} | {p:.2f} | {r['measures_seconds']:.2f} | "
            f"{r['measures_seconds'] / p:.2f}x | {r['measures_without_oas_seconds'] / p:.2f}x | {parts} | "
            f"{r['oas_evaluations_mean']:.1f} | {r['floor']['measures'] / r['floor']['pricing']:.2f}x |"
        )
    if args.engine != "cpu":
        lines.append("")
        lines.append(
            "GPU against the CPU engine (measures without OAS, first rows, over each column's largest): "
            + ", ".join(f"{name} {reports[name]['gpu_vs_cpu']:.1e}" for name in ("desk", "R1"))
        )
    save(args.output_dir, "risk", reports, lines)


if __name__ == "__main__":
    main()

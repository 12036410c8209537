"""CPU engine against the plain numba loop on one dataset; writes ``cpu_engine.json`` and ``cpu_engine.md``.

python benchmarks/cpu_engine.py OUTPUT_DIR [--dataset R1] [--size 20000] [--repeat 3]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numba
import numpy as np

from distprice.lattice.batch import pack
from distprice.lattice.cpu import price_cpu

from common import instruments, median_seconds, save
from plain_loop import price_plain


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--dataset", default="R1")
    parser.add_argument("--size", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows, curves = instruments(args.dataset, args.size)
    batch, batch32 = pack(rows, curves), pack(rows, curves, np.float32)
    node_steps = rows.node_steps
    report = {
        "dataset": args.dataset,
        "rows": args.size,
        "node_steps": node_steps,
        "numba_threads": numba.get_num_threads(),
    }
    prices = {}
    for name, run in (
        ("plain_loop", lambda: price_plain(batch)),
        ("cpu_fp64", lambda: price_cpu(batch)),
        ("cpu_fp32", lambda: price_cpu(batch32)),
    ):
        seconds, (bond, option) = median_seconds(run, args.repeat)
        report[name] = {"seconds": seconds, "ns_per_s": node_steps / seconds}
        prices[name] = option
    plain, fast = prices["plain_loop"], prices["cpu_fp64"]
    report["max_rel_diff_option_fp64_vs_plain"] = float(
        np.max(np.abs(fast - plain) / np.maximum(np.abs(plain), 1e-300))
    )
    lines = ["| dataset | rows | engine | seconds | G NS/s |", "|---|---:|---|---:|---:|"]
    lines += [
        f"| {args.dataset} | {args.size} | {name} | {report[name]['seconds']:.3f} | "
        f"{report[name]['ns_per_s'] / 1e9:.2f} |"
        for name in ("plain_loop", "cpu_fp64", "cpu_fp32")
    ]
    save(args.output_dir, "cpu_engine", report, lines)


if __name__ == "__main__":
    main()

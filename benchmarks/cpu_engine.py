"""CPU engine against the plain numba loop on one dataset; writes ``cpu_engine.json`` to OUTPUT_DIR.

    python benchmarks/cpu_engine.py OUTPUT_DIR [--dataset R1] [--size 20000] [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from datetime import date
from pathlib import Path

import numba
import numpy as np

from distprice import datasets
from distprice.curves import builtin_curves
from distprice.engines.batch import pack
from distprice.engines.cpu import price_cpu
from distprice.instruments import prepare

from plain_loop import price_plain


def timed(fn, repeat):
    fn()  # warm-up: compilation
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--dataset", default="R1")
    parser.add_argument("--size", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    curves = builtin_curves()
    prepared = prepare(datasets.generate(args.dataset, args.size), curves)
    assert not prepared.problems
    batch = pack(prepared.table, curves)
    node_steps = int(batch.geometry.node_steps.sum())
    result = {"dataset": args.dataset, "rows": args.size, "node_steps": node_steps, "date": date.today().isoformat(),
              "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
              "numba_threads": numba.get_num_threads()}
    for name, fn in (("plain_loop", lambda: price_plain(batch)), ("cpu_fp64", lambda: price_cpu(batch, "fp64")),
                     ("cpu_fp32", lambda: price_cpu(batch, "fp32"))):
        seconds, (bond, option) = timed(fn, args.repeat)
        result[name] = {"seconds": seconds, "ns_per_s": node_steps / seconds}
        result.setdefault("_prices", {})[name] = option
    plain, fast = result["_prices"]["plain_loop"], result["_prices"]["cpu_fp64"]
    scale = np.maximum(np.abs(plain), 1e-300)
    result["max_rel_diff_option_fp64_vs_plain"] = float(np.max(np.abs(fast - plain) / scale))
    del result["_prices"]
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "cpu_engine.json").write_text(json.dumps(result, indent=2))
    for name in ("plain_loop", "cpu_fp64", "cpu_fp32"):
        print(f"{args.dataset} {args.size} rows  {name:10s} {result[name]['seconds']:8.3f} s  "
              f"{result[name]['ns_per_s'] / 1e9:6.2f} G NS/s")


if __name__ == "__main__":
    main()

"""Monte-Carlo throughput: path-date-underlyings per second (PDU/s = N · T · U · M / wall time).

    python benchmarks/montecarlo.py OUTPUT_DIR [--quick]

For the small, medium and large sets (contracts 1, 2, 3; the large set built as the FinPar one is
described: 367 daily dates, 3 underlyings, 2^17 paths), in fp64 and fp32: the CPU engine at full paths on
1 thread and on every core, median of three runs after a warm-up; the plain numpy implementation of the
same contract (the reference engine) on a slice of the paths, its rate scaled to PDU/s; and the CPU
engine's stage split (:func:`distprice.montecarlo.stage_split`: Sobol, Φ⁻¹, bridge, paths + payoff, one
thread). Writes ``montecarlo.json`` and ``montecarlo.md`` to OUTPUT_DIR, with the load average before and
after. Times are medians of wall seconds and of this process's CPU seconds: on a shared machine the CPU
seconds show the work, the wall seconds also the cores that other work took.

The floor. A PDU reads nothing per path from memory (a block's data stay in the L1 and L2 caches), so the
engine is bound by arithmetic. Counted from the engine's code, a PDU is, in vector multiplies / adds /
divisions: Sobol and uniform 1 / 2 / 0; AS241's central rational 16 / 17 / 1 on every normal; its tail
(15 % of the normals: a log, a square root, the near rational) 32 / 30 / 2 and a root, so 4.8 / 4.5 / 0.3;
a bridge step 3 / 3 / 0; the path (y += ε·vol + drift, ε = L·dW) (U + 1)/2 + 1 / (U − 1)/2 + 2 / 0, and in
fp32 an exp in float64 (20 / 19 / 0, 4 lanes) with 2 / 0 / 0 more; per path, U exps and the payoff. On a
core with two multiply and two add pipes of 4 doubles or 8 floats (AVX2: AMD Zen 3 here) and one divider
(about 5 cycles a vector), the floor in cycles is the busiest of the three; at the clock measured by a
dependent multiply-add chain it is the floor in ns. ``single_thread_over_floor`` compares the stage
split's single-thread CPU seconds per PDU with it, ``over_floor`` those of the run on every core.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numba
import numpy as np

from distprice.montecarlo import cpu, datasets, read_inputs, reference, stage_split, validate, with_options

from common import save

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "optionpricing"
ANCHORS = {"small": 7.9e6, "medium": 8.7e6, "large": 4.15e6}
"""LexiFi's sequential C (FinPar data comments), PDU/s."""
CONTRACT_NUMPY = {"small": 3.0e6, "medium": 3.4e6, "large": 5.3e6}
"""The contract's plain numpy implementation on 2 cores, fp64, PDU/s."""
DIVIDER_CYCLES = 5.0
"""Cycles per vector division (Zen 3, 256 bits)."""


def sets(quick: bool) -> dict:
    small = validate(read_inputs(DATA / "finpar_small.input.data"))[0]
    medium = validate(read_inputs(DATA / "finpar_medium.input.data"))[0]
    large = validate(datasets.large(2**17))[0]
    jobs = {"small": small, "medium": medium, "large": large}
    if quick:
        jobs = {name: with_options(job, paths=job.paths // 16) for name, job in jobs.items()}
    return jobs


def pdu(job, paths=None) -> int:
    return (paths or job.paths) * job.dims * len(job.models)


def median_time(run, repeats=3) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds of this process (all threads) over ``repeats`` runs
    after a warm-up."""
    run()
    wall, used = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        run()
        wall.append(time.perf_counter() - start)
        used.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(used)


@numba.njit(cache=True)
def _chain(n, a, b):
    x = 1.0
    for _ in range(n):
        x = x * a + b
    return x


def clock_ghz() -> float:
    """The clock while this thread runs: a dependent multiply-add chain (3 + 3 cycles a link on Zen 3)."""
    _chain(10, 0.5, 0.5)
    links = 50_000_000
    seconds = []
    for _ in range(3):
        start = time.thread_time()
        _chain(links, 0.9999999, 1e-7)
        seconds.append(time.thread_time() - start)
    return 6 * links / min(seconds) / 1e9


def floor_cycles(job) -> dict:
    """Vector operations per PDU (multiplies, adds, divisions; counted in the module's docstring, in vectors
    of 4 doubles) and the cycles of the busiest pipe."""
    u = job.underlyings
    own = np.array([1 + 16 + 3 + (u + 1) / 2 + 1, 2 + 17 + 3 + (u - 1) / 2 + 2, 1.0])  # the job's precision
    double = 0.15 * np.array([32.0, 30.0, 2.0])  # tails: log in float64
    exp = np.array([20.0, 19.0, 0.0])
    per_path = np.array([6.0, 6.0, 2.0])
    if job.logarithmic:
        per_path = per_path + u * exp
    else:
        own, double = own + np.array([2.0, 0.0, 0.0]), double + exp
    vectors = own / (8 if job.precision == "fp32" else 4) + double / 4 + per_path / 4 / job.dims
    cycles = max(vectors[0] / 2, vectors[1] / 2, vectors[2] * DIVIDER_CYCLES)
    return dict(mul=float(vectors[0]), add=float(vectors[1]), div=float(vectors[2]), cycles=float(cycles))


def measure(name, job, precision, ghz) -> dict:
    job = with_options(job, precision=precision)
    cores = numba.config.NUMBA_NUM_THREADS
    rates = {}
    for threads in sorted({1, cores}):
        numba.set_num_threads(threads)
        seconds, cpu_seconds = median_time(lambda: cpu.batch_sums(job, 0, job.paths))
        rates[threads] = dict(
            wall_s=seconds, cpu_s=cpu_seconds, pdu_per_s=pdu(job) / seconds, pdu_per_cpu_s=pdu(job) / cpu_seconds
        )
    numba.set_num_threads(cores)
    slice_paths = max(1024, job.paths // (64 if name == "large" else 16))
    numpy_seconds, numpy_cpu_seconds = median_time(lambda: reference.batch_sums(job, 0, slice_paths), repeats=1)
    numpy_rate = pdu(job, slice_paths) / numpy_seconds
    split_paths = max(4096, min(job.paths, (2**22 if name == "small" else 2**21) // job.dims))
    split = stage_split(job, split_paths)
    floor = floor_cycles(job)
    floor_ns = floor["cycles"] / ghz
    best = rates[cores]
    return dict(
        set=name,
        precision=precision,
        paths=job.paths,
        dates=job.dates,
        underlyings=job.underlyings,
        models=len(job.models),
        cores=cores,
        lanes=cpu.lanes(job),
        threads=rates,
        cpu_seconds=best["wall_s"],
        cpu_pdu_per_s=best["pdu_per_s"],
        cpu_pdu_per_cpu_s=best["pdu_per_cpu_s"],
        per_core_vs_lexifi_c=best["pdu_per_s"] / cores / ANCHORS[name],
        per_cpu_second_vs_lexifi_c=best["pdu_per_cpu_s"] / ANCHORS[name],
        numpy_paths=slice_paths,
        numpy_pdu_per_s=numpy_rate,
        numpy_pdu_per_cpu_s=pdu(job, slice_paths) / numpy_cpu_seconds,
        speedup_vs_numpy=best["pdu_per_s"] / numpy_rate,
        speedup_vs_contract_numpy=best["pdu_per_s"] / CONTRACT_NUMPY[name],
        stage_ns_per_pdu={k: split[k] / pdu(job, split_paths) * 1e9 for k in cpu.STAGES},
        single_thread_pdu_per_s=split["pdu_per_s"],
        floor=floor,
        floor_ns_per_pdu=floor_ns,
        cpu_ns_per_pdu=1e9 / best["pdu_per_cpu_s"],
        over_floor=(1e9 / best["pdu_per_cpu_s"]) / floor_ns,
        single_thread_over_floor=(1e9 / split["pdu_per_s"]) / floor_ns,
    )


def markdown(rows, header) -> list[str]:
    lines = [
        f"# Monte-Carlo CPU engine ({header})",
        "",
        "| set | prec | paths | lanes | M PDU/s 1 thread | M PDU/s 2 threads (wall) | per core vs LexiFi C | "
        "vs numpy here | vs contract's numpy | M PDU per CPU-s | "
        "Sobol / Φ⁻¹ / bridge / paths+payoff ns per PDU (1 thread, CPU-s) | "
        "floor ns per PDU | 1 thread over floor |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for r in rows:
        s = r["stage_ns_per_pdu"]
        one = r["threads"][1]["pdu_per_s"]
        lines.append(
            f"| {r['set']} | {r['precision']} | {r['paths']} | {r['lanes']} | {one / 1e6:.0f} | "
            f"{r['cpu_pdu_per_s'] / 1e6:.0f} | {r['per_core_vs_lexifi_c']:.1f}x | "
            f"{r['speedup_vs_numpy']:.1f}x | {r['speedup_vs_contract_numpy']:.0f}x | "
            f"{r['cpu_pdu_per_cpu_s'] / 1e6:.0f} | "
            f"{s['sobol']:.2f} / {s['inverse_normal']:.2f} / {s['bridge']:.2f} / {s['paths_payoff']:.2f} | "
            f"{r['floor_ns_per_pdu']:.2f} | {r['single_thread_over_floor']:.1f}x |"
        )
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path)
    parser.add_argument("--quick", action="store_true", help="1/16 of the paths (a smoke run)")
    options = parser.parse_args(argv)
    load_before = os.getloadavg()
    ghz = clock_ghz()
    rows = [
        measure(name, job, precision, ghz)
        for name, job in sets(options.quick).items()
        for precision in ("fp64", "fp32")
    ]
    meta = dict(
        load_average_before=load_before,
        load_average_after=os.getloadavg(),
        clock_ghz=ghz,
        note="shared machine: other work ran beside this benchmark; figures are noisy",
    )
    header = (
        f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores at {ghz:.2f} GHz, load "
        f"{load_before[0]:.1f} before / {meta['load_average_after'][0]:.1f} after, numpy {np.__version__}, "
        f"numba {numba.__version__}; shared machine"
    )
    save(options.output, "montecarlo", dict(meta=meta, rows=rows), markdown(rows, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())

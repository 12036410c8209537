"""Monte-Carlo throughput: path-date-underlyings per second (PDU/s = N · T · U · M / wall time).

    python benchmarks/montecarlo.py OUTPUT_DIR [--quick]

For the small, medium and large sets (contracts 1, 2, 3; the large set built as the FinPar one is
described: 367 daily dates, 3 underlyings, 2^17 paths), in fp64 and fp32: the CPU engine (numba, every
core) at full paths, median of three runs after a warm-up; the plain numpy implementation of the same
contract (the reference engine) on a slice of the paths, its rate scaled to PDU/s; and the CPU engine's
stage split (Sobol, Φ⁻¹, bridge, paths + payoff), timed single-threaded by running the pipeline cut after
each stage. Writes ``montecarlo.json`` and ``montecarlo.md`` to OUTPUT_DIR.

Times are medians of wall seconds and of this process's CPU seconds: on a shared machine the CPU seconds
show the work, the wall seconds also the cores that other work took.

The floor: a PDU is about 60 floating-point operations (the AS241 rational: 2 × 7 multiply-adds and a
division; in 15 % of cases a log and a square root; 3 multiply-adds of bridge; the correlation; an exp)
and reads nothing per path from memory (the normals of a block of paths stay in L1), so the CPU engine
is bound by arithmetic, not bandwidth. The floor given is the single-threaded CPU time of the stages
divided by the cores, i.e. perfect scaling; wall / floor says how far a run is from it.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numba
import numpy as np

from distprice.montecarlo import cpu, datasets, read_inputs, reference, validate, with_options
from distprice.montecarlo import contracts, normal, sobol

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "optionpricing"
ANCHORS = {"small": 7.9e6, "medium": 8.7e6, "large": 4.15e6}
"""LexiFi's sequential C (FinPar data comments), PDU/s."""


def sets(quick: bool) -> dict:
    small = validate(read_inputs(DATA / "finpar_small.input.data"))[0]
    medium = validate(read_inputs(DATA / "finpar_medium.input.data"))[0]
    large = validate(datasets.large(2**17))[0]
    jobs = {"small": small, "medium": medium, "large": large}
    if quick:
        jobs = {name: with_options(job, paths=job.paths // 16) for name, job in jobs.items()}
    return jobs


def pdu(job, paths=None) -> int:
    return (paths or job.paths) * job.dates * job.underlyings * len(job.models)


def median_time(run, repeats=3) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds of this process (all threads) over ``repeats`` runs
    after a warm-up. On a shared machine the CPU seconds show the work; the wall seconds also show the
    cores other work took."""
    run()
    wall, used = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        run()
        wall.append(time.perf_counter() - start)
        used.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(used)


@numba.njit
def _cut(directions, scale, constants, index, left, right, sd, lw, rw, spots, vol, drift, chol, disc, detval,
         code, terms, count, stages):
    """The CPU engine's pipeline (cpu._walk) on paths 0 … count − 1, stopped after ``stages`` stages
    (1 Sobol and uniforms, 2 + Φ⁻¹, 3 + bridge, 4 + paths and payoff); returns a checksum of the work."""
    dims, dates, underlyings, models = directions.shape[0], index.shape[0], spots.shape[1], spots.shape[0]
    block = max(1, cpu.BLOCK_NORMALS // dims)
    x = np.empty(dims, np.uint32)
    u = np.empty(block * dims, sd.dtype)
    z = np.empty(block * dims, sd.dtype)
    w = np.zeros((dates + 1, underlyings), sd.dtype)
    s = np.empty((models, block, dates, underlyings), sd.dtype)
    values = np.empty((models, block))
    dw = np.empty(underlyings, sd.dtype)
    growth = np.empty(underlyings, sd.dtype)
    check = 0.0
    sobol.start(directions, 1, x)
    for start in range(0, count, block):
        size = min(block, count - start)
        for b in range(size):
            if start + b:
                sobol.advance(directions, start + b, x)
            cpu.uniforms(x, scale, u, b * dims)
        if stages == 1:
            check += u[size * dims - 1]
            continue
        normal.ppnd16_block(u, z, size * dims, constants)
        if stages == 2:
            check += z[size * dims - 1]
            continue
        for b in range(size):
            cpu.bridge(z, b * dims, index, left, right, sd, lw, rw, w)
            check += w[dates, 0]
            if stages > 3:
                for m in range(models):
                    cpu.black_scholes(w, m, spots, vol, drift, chol, dw, growth, s, b)
        if stages > 3:
            for m in range(models):
                contracts.payoffs(code, terms, s, m, size, disc, detval, values[m])
                check += values[m, 0]
    return check


def stage_split(job, paths: int) -> dict:
    """Seconds per PDU of each stage, single-threaded, from the pipeline cut after each stage."""
    args = cpu.arguments(job)
    totals = []
    for stages in (1, 2, 3, 4):
        totals.append(median_time(lambda: _cut(*args, paths, stages))[1] / pdu(job, paths))
    names = ("sobol", "inverse_normal", "bridge", "paths_payoff")
    return {name: max(0.0, totals[i] - (totals[i - 1] if i else 0.0)) for i, name in enumerate(names)}


def measure(name, job, precision, quick) -> dict:
    job = with_options(job, precision=precision)
    cores = numba.get_num_threads()
    seconds, cpu_seconds = median_time(lambda: cpu.batch_sums(job, 0, job.paths))
    slice_paths = max(1024, job.paths // (64 if name == "large" else 16))
    numpy_seconds, numpy_cpu_seconds = median_time(lambda: reference.batch_sums(job, 0, slice_paths), repeats=1)
    split = stage_split(job, max(4096, min(job.paths, (2**22 if name == "small" else 2**21) // job.dims)))
    floor_seconds = sum(split.values()) * pdu(job) / cores
    rate = pdu(job) / seconds
    numpy_rate = pdu(job, slice_paths) / numpy_seconds
    return dict(set=name, precision=precision, paths=job.paths, dates=job.dates, underlyings=job.underlyings,
                models=len(job.models), cores=cores, cpu_seconds=seconds, cpu_pdu_per_s=rate,
                cpu_pdu_per_s_per_core=rate / cores, cpu_pdu_per_cpu_second=pdu(job) / cpu_seconds,
                numpy_paths=slice_paths, numpy_pdu_per_s=numpy_rate,
                numpy_pdu_per_cpu_second=pdu(job, slice_paths) / numpy_cpu_seconds,
                speedup_vs_numpy=rate / numpy_rate,
                speedup_vs_numpy_cpu_seconds=(pdu(job) / cpu_seconds) / (pdu(job, slice_paths) / numpy_cpu_seconds),
                lexifi_c_pdu_per_s=ANCHORS[name], per_core_vs_lexifi_c=rate / cores / ANCHORS[name],
                per_cpu_second_vs_lexifi_c=pdu(job) / cpu_seconds / ANCHORS[name],
                stage_ns_per_pdu={k: v * 1e9 for k, v in split.items()},
                single_thread_ns_per_pdu=sum(split.values()) * 1e9, floor_seconds=floor_seconds,
                wall_over_floor=seconds / floor_seconds)


def markdown(rows, header) -> str:
    lines = [f"# Monte-Carlo CPU engine ({header})", "",
             "| set | prec | paths | wall s | M PDU/s (wall) | per core vs LexiFi C | vs numpy (wall) | "
             "M PDU per CPU-s | per CPU-s vs LexiFi C | vs numpy (CPU-s) | "
             "Sobol / Φ⁻¹ / bridge / paths+payoff ns per PDU (CPU-s, 1 thread) | floor s (2 cores) |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
    for r in rows:
        s = r["stage_ns_per_pdu"]
        lines.append(f"| {r['set']} | {r['precision']} | {r['paths']} | {r['cpu_seconds']:.3f} | "
                     f"{r['cpu_pdu_per_s'] / 1e6:.1f} | {r['per_core_vs_lexifi_c']:.2f}x | "
                     f"{r['speedup_vs_numpy']:.1f}x | {r['cpu_pdu_per_cpu_second'] / 1e6:.1f} | "
                     f"{r['per_cpu_second_vs_lexifi_c']:.2f}x | {r['speedup_vs_numpy_cpu_seconds']:.1f}x | "
                     f"{s['sobol']:.1f} / {s['inverse_normal']:.1f} / {s['bridge']:.1f} / {s['paths_payoff']:.1f} | "
                     f"{r['floor_seconds']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path)
    parser.add_argument("--quick", action="store_true", help="1/16 of the paths (a smoke run)")
    options = parser.parse_args(argv)
    options.output.mkdir(parents=True, exist_ok=True)
    rows = [measure(name, job, precision, options.quick)
            for name, job in sets(options.quick).items() for precision in ("fp64", "fp32")]
    meta = dict(date=datetime.date.today().isoformat(), machine=platform.processor() or platform.machine(),
                cpus=os.cpu_count(), load_average=os.getloadavg(), python=sys.version.split()[0],
                numpy=np.__version__, numba=numba.__version__,
                note="shared machine: other work ran beside this benchmark; figures are noisy")
    (options.output / "montecarlo.json").write_text(json.dumps(dict(meta=meta, rows=rows), indent=2))
    header = (f"{meta['date']}, {meta['cpus']} cores, load {meta['load_average'][0]:.1f}, numpy {meta['numpy']}, "
              f"numba {meta['numba']}; shared machine")
    (options.output / "montecarlo.md").write_text(markdown(rows, header))
    print(markdown(rows, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())

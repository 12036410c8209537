"""Heston calibration: speed of the numpy reference (population-vectorised) and the numba CPU engine (and the
GPU engine where there is one), fit quality over seeds on LexiFi's 1062 quotes, and synthetic surfaces of
10 000 and 100 000 quotes; writes ``calibration.json`` and ``calibration.md``.

    python benchmarks/calibration.py OUTPUT_DIR [--seeds 50] [--repeat 5] [--no-accurate] [--sizes 10000,100000]

Quote-evaluations per second (q-e/s) = quotes x parameter vectors priced / seconds, from the objective of a
40-member population (the unit of work of a differential-evolution generation). A fit is 2000 evaluations
(40 + 49 x 40). Compile time (numba JIT, or loading its cache) is the first call's and is reported apart.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import numba
import numpy as np

from distprice.cuda import gpu_available
from distprice.models import fit_surface, heston_engine, heston_surfaces, read_benchmark
from distprice.models.heston import LOWER, UPPER
from distprice.models.heston_synthetic import synthetic_quotes

from common import save

QUOTES_1062 = Path(__file__).resolve().parents[1] / "tests" / "data" / "heston" / "1062_quotes.in"
OCAML_SECONDS = {1062: 4.60, 10_000: 38.54, 100_000: 441.6}
"""The paper's sequential OCaml reference, Core i5-5300, seconds per 2000-evaluation fit."""
NUMPY_ANCHOR = 2.7e6
"""The contract's population-vectorised numpy figure on this kind of machine (q-e/s)."""
POPULATION = 40

# Work of one quote-evaluation, counted in real operations (a transcendental function counts as one call):
# per quote, per member: the 20-node dot product (2 multiplies, 2 adds each), the Black-Scholes control and
# clamp (~16 flops, 2 erfc), the squared error (3 flops); per maturity and member: 24 characteristic
# functions (~90 flops and ~11 transcendentals each: 2 sqrt, 3 exp, 1 log, 1 atan2, 2 sin, 2 cos) and the 20
# control-variate terms (~25 flops and a complex exp: exp, sin, cos).
FLOPS_PER_QUOTE = 80 + 16 + 3
CALLS_PER_QUOTE = 2
FLOPS_PER_TERM = 24 * 90 + 20 * 25
CALLS_PER_TERM = 24 * 11 + 20 * 3
FLOPS_PER_CALL = 20
"""Flop-equivalent of one scalar transcendental (a polynomial of ~10 terms and its reduction)."""


def work_per_quote_evaluation(quotes: int, maturities: int) -> float:
    """Flop-equivalents per quote-evaluation, the per-maturity work spread over the maturity's quotes."""
    per_quote = FLOPS_PER_QUOTE + FLOPS_PER_CALL * CALLS_PER_QUOTE
    per_term = FLOPS_PER_TERM + FLOPS_PER_CALL * CALLS_PER_TERM
    return per_quote + per_term * maturities / quotes


def peak_flops() -> tuple[float, float]:
    """fp64 peak of this machine (AVX2: two 4-wide FMA units, 16 flops per cycle per core) and its clock (Hz)."""
    hertz = 0.0
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu MHz"):
                hertz = max(hertz, float(line.split(":")[1]) * 1e6)
    except OSError:
        pass
    return 16 * hertz * (os.cpu_count() or 1), hertz


def population(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).uniform(LOWER, UPPER, (POPULATION, 5))


def evaluation_speed(surface, engine: str, repeat: int) -> dict:
    """Wall and CPU time of the objective of a 40-member population; the engine's construction and first call
    (compilation, or loading numba's cache) apart."""
    started = time.perf_counter()
    pricer = heston_engine(surface, "gl20", engine)
    built = time.perf_counter()
    members = population()
    pricer.objective(members)
    first = time.perf_counter() - built
    walls, cpu = [], time.process_time()
    for _ in range(repeat):
        tick = time.perf_counter()
        pricer.objective(members)
        walls.append(time.perf_counter() - tick)
    cpu = (time.process_time() - cpu) / repeat
    work = surface.size * POPULATION
    return {
        "engine_seconds": built - started,
        "first_call_seconds": first,
        "seconds_per_evaluation": statistics.median(walls),
        "qe_per_s": work / statistics.median(walls),
        "qe_per_s_best": work / min(walls),
        "cpu_ns_per_qe": cpu / work * 1e9,
    }


def fits(surface, engine: str, seeds, polish: bool = False, quadrature: str = "gl20") -> dict:
    walls, cpus, rmse, rmse_de, evals = [], [], [], [], []
    for seed in seeds:
        cpu = time.process_time()
        fit = fit_surface(surface, seed=seed, engine=engine, polish=polish, quadrature=quadrature)
        cpus.append(time.process_time() - cpu)
        walls.append(fit.seconds)
        rmse.append(fit.rmse)
        rmse_de.append(fit.rmse_de)
        evals.append(fit.n_evals)
    rmse = np.array(rmse)
    return {
        "seeds": len(rmse),
        "fit_seconds_median": statistics.median(walls),
        "fit_seconds_min": min(walls),
        "fit_cpu_seconds_median": statistics.median(cpus),
        "n_evals_median": statistics.median(evals),
        "rmse_min": float(rmse.min()),
        "rmse_median": float(np.median(rmse)),
        "rmse_p90": float(np.quantile(rmse, 0.9)),
        "rmse_max": float(rmse.max()),
        "share_at_most_0.765": float(np.mean(rmse <= 0.765)),
        "rmse_de_median": float(np.median(rmse_de)),
        "rmse": rmse.tolist(),
    }


def compile_seconds() -> float:
    """Seconds of the CPU engine's first evaluation in a fresh process with an empty numba cache."""
    script = (
        "import time, numpy as np; from distprice.models import heston_engine, heston_surfaces, read_benchmark;"
        f"s = heston_surfaces(read_benchmark({str(QUOTES_1062)!r})[0])[0]; e = heston_engine(s, 'gl20', 'cpu');"
        "t = time.perf_counter(); e.objective(np.array([[0.04, 0.04, -0.5, 1.0, 0.4]]));"
        "print(time.perf_counter() - t)"
    )
    with tempfile.TemporaryDirectory() as cache:
        out = subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "NUMBA_CACHE_DIR": cache},
            check=True,
            capture_output=True,
            text=True,
        )
    return float(out.stdout.split()[-1])


def with_threads(threads: int, run):
    previous = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        return run()
    finally:
        numba.set_num_threads(previous)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-accurate", dest="accurate", action="store_false")
    parser.add_argument("--sizes", default="10000,100000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    threads = numba.config.NUMBA_NUM_THREADS
    peak, hertz = peak_flops()
    report = {
        "load_average_start": os.getloadavg(),
        "numba_threads": threads,
        "clock_hz": hertz,
        "peak_flops": peak,
        "scipy": version("scipy"),
        "threading_layer": None,
        "datasets": {},
    }

    surface = heston_surfaces(read_benchmark(QUOTES_1062)[0])[0]
    one = {
        "quotes": surface.size,
        "maturities": len(surface.times),
        "work_per_quote_evaluation": work_per_quote_evaluation(surface.size, len(surface.times)),
    }
    one["reference"] = {**evaluation_speed(surface, "reference", args.repeat), **fits(surface, "reference", range(2))}
    one["cpu_compile_seconds"] = compile_seconds()
    for count in sorted({1, threads}):
        one[f"cpu_threads_{count}"] = with_threads(
            count, lambda: {**evaluation_speed(surface, "cpu", args.repeat), **fits(surface, "cpu", range(args.repeat))}
        )
    report["threading_layer"] = numba.threading_layer()
    one["cpu_seeds"] = fits(surface, "cpu", range(args.seeds))
    one["cpu_polish"] = fits(surface, "cpu", range(5), polish=True)
    if args.accurate:
        one["cpu_accurate_polish"] = fits(surface, "cpu", range(1), polish=True, quadrature="accurate")
    if gpu_available():
        one["gpu"] = {**evaluation_speed(surface, "gpu", args.repeat), **fits(surface, "gpu", range(args.repeat))}
    report["datasets"]["1062"] = one

    for size in sizes:
        synthetic = heston_surfaces(synthetic_quotes(size, seed=0))[0]
        entry = {
            "quotes": size,
            "maturities": len(synthetic.times),
            "work_per_quote_evaluation": work_per_quote_evaluation(size, len(synthetic.times)),
            "cpu": {**evaluation_speed(synthetic, "cpu", 3), **fits(synthetic, "cpu", range(1))},
            "cpu_polish": fits(synthetic, "cpu", range(1), polish=True),
        }
        if gpu_available():
            entry["gpu"] = {**evaluation_speed(synthetic, "gpu", args.repeat), **fits(synthetic, "gpu", range(3))}
            entry["gpu_polish"] = fits(synthetic, "gpu", range(1), polish=True)
        report["datasets"][str(size)] = entry
    report["load_average_end"] = os.getloadavg()
    save(args.output_dir, "calibration", report, table(report))


def table(report: dict) -> list[str]:
    lines = [
        f"Heston calibration, fp64, {report['numba_threads']} numba threads ({report['threading_layer']}); "
        f"load average {report['load_average_start'][0]:.1f} at start, {report['load_average_end'][0]:.1f} "
        "at end (a shared machine: figures are noisy).",
        "",
        "Medians (best of the repeats in brackets). vs numpy: against this run's numpy reference (and against "
        "the contract's 2.7 M q-e/s); vs OCaml: the paper's sequential reference, seconds per fit.",
        "",
        "| quotes | maturities | engine | q-e/s | CPU ns / q-e | s per 2000-eval fit | vs numpy | vs OCaml | "
        "first call s | flop-eq / q-e | share of peak |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    numpy_speed = report["datasets"]["1062"]["reference"]["qe_per_s"]
    for entry in report["datasets"].values():
        for engine in ("reference", "cpu_threads_1", f"cpu_threads_{report['numba_threads']}", "cpu", "gpu"):
            if engine not in entry or "fit_seconds_median" not in entry[engine]:
                continue
            e = entry[engine]
            ocaml = OCAML_SECONDS.get(entry["quotes"])
            fit = e.get("fit_seconds_median")
            flops = entry["work_per_quote_evaluation"] * e["qe_per_s"]
            lines.append(
                f"| {entry['quotes']} | {entry['maturities']} | {engine} | {e['qe_per_s'] / 1e6:.2f} M "
                f"({e['qe_per_s_best'] / 1e6:.2f} M) | {e['cpu_ns_per_qe']:.0f} | "
                f"{fit:.3f} ({e['fit_seconds_min']:.3f}) | "
                f"{e['qe_per_s'] / numpy_speed:.1f}x ({e['qe_per_s'] / NUMPY_ANCHOR:.1f}x) | "
                f"{(ocaml / fit if ocaml and fit else float('nan')):.1f}x | {e['first_call_seconds']:.2f} | "
                f"{entry['work_per_quote_evaluation']:.0f} | "
                f"{(flops / report['peak_flops'] if report['peak_flops'] else float('nan')):.1%} |"
            )
    seeds = report["datasets"]["1062"]["cpu_seeds"]
    lines += [
        "",
        f"1062 quotes, {seeds['seeds']} seeds, differential evolution (cpu): "
        f"RMSE min {seeds['rmse_min']:.4f}, "
        f"median {seeds['rmse_median']:.4f}, p90 {seeds['rmse_p90']:.4f}, max {seeds['rmse_max']:.4f}; "
        f"{seeds['share_at_most_0.765']:.0%} of seeds <= 0.765 (accept: median <= 0.757, >= 90 %).",
    ]
    polish = report["datasets"]["1062"]["cpu_polish"]
    lines.append(
        f"With polish (5 seeds): RMSE median {polish['rmse_median']:.6f} (global optimum 0.751553), "
        f"{polish['n_evals_median']:.0f} evaluations, {polish['fit_seconds_median']:.2f} s."
    )
    accurate = report["datasets"]["1062"].get("cpu_accurate_polish")
    if accurate:
        lines.append(
            f"Accurate quadrature with polish (seed 0): RMSE {accurate['rmse_min']:.6f} "
            f"(accurate optimum 0.738941), {accurate['fit_seconds_median']:.1f} s."
        )
    lines.append(
        f"Numba compilation of the CPU engine (empty cache, fresh process): "
        f"{report['datasets']['1062']['cpu_compile_seconds']:.1f} s, apart from the figures above."
    )
    for name, entry in report["datasets"].items():
        if name != "1062":
            e = entry["cpu_polish"]
            lines.append(
                f"{name} synthetic quotes (cpu, seed 0): RMSE {e['rmse_de_median']:.4f} after differential "
                f"evolution, {e['rmse_median']:.4f} after polish ({e['n_evals_median']:.0f} evaluations, "
                f"{e['fit_seconds_median']:.1f} s)."
            )
    return lines


if __name__ == "__main__":
    main()

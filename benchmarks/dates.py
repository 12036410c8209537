"""Dated-bond machinery on a book of random bonds: rows per second of each stage of ``cash_flows`` (settlement,
live coupons, accrued at settlement, redemption), of ``cash_flows`` end to end, and of the whole schedules and
coupon tables; writes ``dates.json`` and ``dates.md`` to OUTPUT_DIR.

    python benchmarks/dates.py OUTPUT_DIR [--size 1000000] [--repeat 5] [--seed 7]

The floor: a stage reads its inputs and writes its outputs once; those bytes over the bandwidth of a plain
parallel copy bound it from below. CPU seconds are split into user (the kernels) and system time (the kernel's
page faults when fresh output memory is first written, heavy on a virtual machine).
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import time
from pathlib import Path

import numba
import numpy as np

from distprice.dates import (
    CALENDARS,
    CONVENTIONS,
    DAY_COUNTS,
    accrued,
    bond_terms,
    business_table,
    cash_flows,
    coupons,
    day_numbers,
    redemption_dates,
    schedule,
    settlement_dates,
)

from common import copy_bandwidth, environment, median_seconds, save

VALUATION = "2026-11-24"


def random_book(rng: np.random.Generator, n: int):
    """A desk's book: mostly semiannual, maturities up to 30 years (monthly up to 10), issued up to 10 years ago,
    every calendar, day count and convention; 20% month-end maturities, 30% end_of_month, 3% zero-coupon."""
    valuation = day_numbers([VALUATION])[0]
    frequency = rng.choice([1, 2, 4, 12], n, p=[0.2, 0.55, 0.2, 0.05])
    life = np.where(frequency == 12, rng.integers(30, 3650, n), rng.integers(30, 10958, n))
    maturity = valuation + life
    ends = (maturity.view("datetime64[D]").astype("datetime64[M]") + 1).astype("datetime64[D]").view(np.int64) - 1
    maturity = np.where(rng.random(n) < 0.2, ends, maturity)
    issue = valuation - rng.integers(0, 3653, n)
    coupon = np.where(rng.random(n) < 0.03, 0.0, rng.uniform(0.005, 0.08, n))
    terms = bond_terms(
        maturity,
        issue,
        coupon=coupon,
        frequency=frequency,
        day_count=rng.integers(0, len(DAY_COUNTS.names), n),
        calendar=rng.integers(0, len(CALENDARS.names), n),
        accrual_convention=rng.integers(0, len(CONVENTIONS.names), n),
        payment_convention=rng.integers(0, len(CONVENTIONS.names), n),
        end_of_month=rng.random(n) < 0.3,
        settlement_days=rng.integers(0, 4, n),
        face=rng.choice([100.0, 1000.0], n),
        redemption=100.0,
    )
    return terms, np.full(n, valuation)


def measured(run, repeat):
    """Median wall seconds, median user and system CPU seconds (after a warm-up call), and the result."""

    def cpu():
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime, usage.ru_stime

    samples = []

    def once():
        gc.collect()
        (u0, s0), tick = cpu(), time.perf_counter()
        result = run()
        wall, (u1, s1) = time.perf_counter() - tick, cpu()
        samples.append((wall, u1 - u0, s1 - s0))
        return result

    _, result = median_seconds(once, repeat)
    wall, user, system = (statistics.median(x) for x in zip(*samples[1:]))
    return {"seconds": wall, "user_cpu_seconds": user, "system_cpu_seconds": system}, result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--chunk", type=int, default=50_000, help="rows of each piece in the chunked run")
    args = parser.parse_args()
    n, repeat = args.size, args.repeat
    terms, valuation = random_book(np.random.default_rng(args.seed), n)
    business_table()
    rows = np.arange(n)
    stages = {}
    stages["settlement"], settle = measured(lambda: settlement_dates(terms, valuation), repeat)
    stages["live coupons"], live = measured(lambda: coupons(terms, after=settle), repeat)
    stages["accrued at settlement"], _ = measured(lambda: accrued(terms, live, rows, settle), repeat)
    stages["redemption"], _ = measured(lambda: redemption_dates(terms), repeat)
    exercise_rows = np.repeat(rows, 4)
    exercise_days = np.repeat(settle, 4) + np.tile([30, 200, 400, 800], n)
    stages["accrued at 4 dates a row"], _ = measured(lambda: accrued(terms, live, exercise_rows, exercise_days), repeat)
    counts = {"live_coupons": len(live.payment)}
    exercise_rows = exercise_days = live = None  # free the memory before the next stages
    stages["schedule (every date)"], dates = measured(lambda: schedule(terms), repeat)
    counts["schedule_dates"] = len(dates.dates)
    dates = None
    stages["all coupons (not only live)"], whole = measured(lambda: coupons(terms), repeat)
    counts["all_coupons"] = len(whole.payment)
    whole = None
    total, flows = measured(lambda: cash_flows(terms, valuation), repeat)
    counts["matured_rows"] = int(flows.matured.sum())
    flows = None
    parts = [(terms.take(slice(a, a + args.chunk)), valuation[a : a + args.chunk]) for a in range(0, n, args.chunk)]
    chunked, _ = measured(lambda: [cash_flows(*part) for part in parts][-1], repeat)
    bandwidth = copy_bandwidth(1 << 30)

    d, live_n, all_n = counts["schedule_dates"], counts["live_coupons"], counts["all_coupons"]
    terms_bytes = n * (8 * 6 + 1 * 6)
    floors = {  # bytes read and written once
        "settlement": n * (8 + 8 + 8 + 1 + 8),
        "live coupons": terms_bytes + n * 8 + 40 * live_n + n * 24,
        "accrued at settlement": n * (8 + 8 + 8 + 8 + 8) + 40 * live_n + terms_bytes,
        "redemption": terms_bytes + n * 8,
        "accrued at 4 dates a row": 4 * n * 24 + 40 * live_n + terms_bytes,
        "schedule (every date)": terms_bytes + 8 * d + n * (8 + 8 + 1),
        "all coupons (not only live)": terms_bytes + 40 * all_n + n * 24,
    }
    for name, stage in stages.items():
        stage.update(rows_per_s=n / stage["seconds"], floor_bytes=floors[name], floor_seconds=floors[name] / bandwidth)
    total["rows_per_s"] = n / total["seconds"]
    chunked["rows_per_s"] = n / chunked["seconds"]
    env = environment()
    report = {
        "rows": n,
        "valuation": VALUATION,
        "seed": args.seed,
        "numba_threads": numba.get_num_threads(),
        "shared_machine": True,
        **counts,
        "copy_bandwidth_gb_s": bandwidth / 1e9,
        "stages": stages,
        "cash_flows": total,
        "cash_flows_chunked": {"chunk_rows": args.chunk, **chunked},
    }
    lines = [
        f"# Dated-bond machinery on {n:,} random bonds",
        "",
        f"{env['date']}, a shared {os.cpu_count()}-core virtual machine ({env['cpu']}), "
        f"{numba.get_num_threads()} numba threads; numpy {np.__version__}, numba {numba.__version__}. "
        f"{d:,} schedule dates, {live_n:,} live coupons ({all_n:,} in all), copy bandwidth "
        f"{bandwidth / 1e9:.1f} GB/s. Medians of {repeat}.",
        "",
        "| stage | seconds | rows/s | user CPU s | system CPU s | floor s (its bytes copied) | × floor |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, s in stages.items():
        lines.append(
            f"| {name} | {s['seconds']:.4f} | {s['rows_per_s'] / 1e6:.2f} M | {s['user_cpu_seconds']:.3f} | "
            f"{s['system_cpu_seconds']:.3f} | {s['floor_seconds']:.4f} | "
            f"{s['seconds'] / s['floor_seconds']:.0f} |"
        )
    lines.append(
        f"| **cash_flows** (settlement, live coupons, accrued at settlement, redemption) | "
        f"{total['seconds']:.4f} | {total['rows_per_s'] / 1e6:.2f} M | {total['user_cpu_seconds']:.3f} | "
        f"{total['system_cpu_seconds']:.3f} | | |"
    )
    lines.append(
        f"| **cash_flows** in pieces of {args.chunk:,} rows | {chunked['seconds']:.4f} | "
        f"{chunked['rows_per_s'] / 1e6:.2f} M | {chunked['user_cpu_seconds']:.3f} | "
        f"{chunked['system_cpu_seconds']:.3f} | | |"
    )
    save(args.output_dir, "dates", report, lines)


if __name__ == "__main__":
    main()

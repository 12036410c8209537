"""GPU kernels on the papers' datasets (U1 ... S2): NS/s, seconds, memory, preprocessing share, accuracy, per variant.

    python benchmarks/gpu_kernels.py OUTPUT_DIR [--datasets U1,R1,...] [--size N] [--repeat 5] [--variants all]

Variants (the papers' names): ``outer`` is GPU-OUTER as shipped (sorted by width, padded per warp and
transposed: V4); ``outer-unsorted`` the same unsorted; ``plain-v2`` one thread per instrument with global
padding, unsorted; ``plain-v1`` no padding or interleaving, unsorted; ``flat`` GPU-FLAT as shipped (block
chosen per portfolio); ``...-cap<N>`` with a register cap from
``__launch_bounds__``. Every variant is checked against the CPU engine on the same rows. Kernel time is
taken with CUDA events around the launches (median of ``--repeat`` after a warm-up); preprocessing
(``pack`` and the kernel's own layout) and transfers are timed apart. Also measures the device's
ceilings: device-to-device copy bandwidth and the FP64/FP32 FMA rate.
``flat-n<N>`` fixes the flat kernel's nodes per thread and ``-t<T>`` its threads per block.

Writes ``gpu_kernels.json`` and ``gpu_kernels.md`` into OUTPUT_DIR.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from distprice.cuda import device_name, require_cupy
from distprice.curves import builtin_curves
from distprice.lattice.batch import pack
from distprice.lattice.cpu import price_cpu
from distprice.lattice.gpu import price_gpu
from distprice.lattice.instruments import prepare

from common import instruments, save

FMA_KERNEL = r"""
extern "C" __global__ void fma_rate(REAL* out, int iterations, REAL a, REAL b)
{
    REAL x0 = threadIdx.x, x1 = x0 + 1, x2 = x0 + 2, x3 = x0 + 3, x4 = x0 + 4, x5 = x0 + 5, x6 = x0 + 6, x7 = x0 + 7;
    for (int i = 0; i < iterations; ++i) {
        x0 = x0 * a + b; x1 = x1 * a + b; x2 = x2 * a + b; x3 = x3 * a + b;
        x4 = x4 * a + b; x5 = x5 * a + b; x6 = x6 * a + b; x7 = x7 * a + b;
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
}
"""


def _median_event_seconds(cupy, launch, repeat):
    launch()
    times = []
    for _ in range(repeat):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        launch()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return statistics.median(times)


def ceilings(cupy) -> dict:
    """Measured copy bandwidth (bytes read + written per second) and FMA rates (FMA instructions per second)."""
    source = cupy.random.random(1 << 28)
    target = cupy.empty_like(source)
    copy = _median_event_seconds(cupy, lambda: target.__setitem__(Ellipsis, source), 10)
    out = {"copy_bytes_per_s": 2 * source.nbytes / copy}
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    for real in ("double", "float"):
        kernel = cupy.RawKernel(FMA_KERNEL, "fma_rate", options=(f"-DREAL={real}",))
        blocks, threads, iterations = sms * 16, 256, 4096
        sink = cupy.empty(blocks * threads, dtype=np.float64 if real == "double" else np.float32)
        scalar = np.float64 if real == "double" else np.float32
        seconds = _median_event_seconds(
            cupy, lambda: kernel((blocks,), (threads,), (sink, np.int32(iterations), scalar(0.999), scalar(1e-3))), 5
        )
        out[f"fma_per_s_{'fp64' if real == 'double' else 'fp32'}"] = blocks * threads * iterations * 8 / seconds
    return out


VARIANTS = {
    "outer": dict(kernel="outer"),
    "outer-unsorted": dict(kernel="outer", sort=False),
    "plain-v2": dict(kernel="outer", lanes=None, sort=False),
    "plain-v1": dict(kernel="outer", lanes=1, sort=False),
    "outer-ahead1": dict(kernel="outer", defines=(("OUTER_AHEAD", 1),)),
    "outer-ahead8": dict(kernel="outer", defines=(("OUTER_AHEAD", 8),)),
    "outer-cap64": dict(kernel="outer", defines=(("OUTER_MIN_BLOCKS", 8),)),
    "outer-cap40": dict(kernel="outer", defines=(("OUTER_MIN_BLOCKS", 12),)),
    "flat": dict(kernel="flat"),
    "flat-n1": dict(kernel="flat", nodes=1),
    "flat-n4": dict(kernel="flat", nodes=4),
    "flat-n2-t256": dict(kernel="flat", nodes=2, threads=256),
    "flat-n2-t512": dict(kernel="flat", nodes=2, threads=512),
    "flat-n2-t1024": dict(kernel="flat", nodes=2, threads=1024),
    "flat-n1-cap32": dict(kernel="flat", nodes=1, threads=1024, defines=(("FLAT_MIN_BLOCKS", 2),)),
    "flat-n2-cap40": dict(kernel="flat", nodes=2, threads=512, defines=(("FLAT_MIN_BLOCKS", 3),)),
    "flat-n2-nocap": dict(kernel="flat", nodes=2, threads=512, defines=(("FLAT_MIN_BLOCKS", 1),)),
}
SHIPPED = ("outer", "flat", "plain-v2")


def run_variant(batch, options, repeat, reference):
    """Median timings of ``repeat`` runs after a warm-up, and the worst errors against ``reference`` over the
    rows with finite prices (fp32 overflows on some trees: ``non_finite`` counts them)."""
    runs = [price_gpu(batch, check_finite=batch.real == np.float64, **options) for _ in range(repeat + 1)][1:]
    kernel = statistics.median(r.seconds["kernel"] for r in runs)
    last = runs[-1]
    finite = np.isfinite(last.bond) & np.isfinite(last.option)
    bond_error = float(np.max(np.abs(last.bond - reference[0])[finite] / np.abs(reference[0][finite])))
    option_error = float(np.max(np.abs(last.option - reference[1])[finite] / np.abs(reference[0][finite])))
    return dict(
        kernel_s=kernel,
        layout_s=statistics.median(r.seconds["layout"] for r in runs),
        upload_s=statistics.median(r.seconds["upload"] for r in runs),
        download_s=statistics.median(r.seconds["download"] for r in runs),
        device_bytes=last.device_bytes,
        bond_error=bond_error,
        option_error=option_error,
        non_finite=int((~finite).sum()),
        **{("computed_node_steps" if k == "node_steps" else k): v for k, v in last.detail.items()},
    )


WIDE_TREES = {1027: 0.00431, 2057: 0.00215, 4017: 0.0011, 4419: 0.001}
"""Width -> mean reversion at 12 steps a year."""


def wide_trees(repeat: int, copies=(1, 64)) -> list[dict]:
    """Trees wider than a 1024-thread block, alone and in groups, on each kernel and on the CPU engine.

    Each tree: 100 years (height 1200), bermudan put with quarterly exercise on a coupon bond.
    """
    import pandas as pd

    curves = builtin_curves()
    rows = []
    for width, a in WIDE_TREES.items():
        for n in copies:
            table = pd.DataFrame(
                [
                    dict(
                        id=i,
                        instrument="bond_option",
                        option_type="put",
                        exercise="bermudan",
                        strike=95.0,
                        expiry=60.0,
                        first_exercise=10.0,
                        exercise_frequency=4,
                        maturity=100.0,
                        coupon=0.05,
                        coupon_frequency=2,
                        face=100.0,
                        mean_reversion=a,
                        volatility=0.004,
                        steps_per_year=12,
                        curve="hull",
                    )
                    for i in range(n)
                ]
            )
            batch = pack(prepare(table, curves).instruments(), curves)
            assert int(batch.geometry.width[0]) == width
            tick = time.perf_counter()
            reference = price_cpu(batch)
            cpu_s = time.perf_counter() - tick
            for kernel in ("flat", "outer"):
                measured = run_variant(batch, dict(kernel=kernel), repeat, reference)
                rows.append(dict(width=width, copies=n, kernel=kernel, cpu_engine_s=cpu_s, **measured))
                print(
                    f"wide {width:5} x{n:3} {kernel:5} kernel {measured['kernel_s'] * 1e3:9.2f} ms  "
                    f"cpu engine {cpu_s * 1e3:9.2f} ms  err {max(measured['bond_error'], measured['option_error']):.1e}"
                    + "".join(f"  {k}={measured[k]}" for k in ("nodes", "threads", "outer_rows") if k in measured),
                    flush=True,
                )
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--datasets", default="U1,U2,R1,R2,R3,S1,S2")
    parser.add_argument("--size", type=int, help="rows per dataset (default: each dataset's own size)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--variants", default="all", help="comma-separated names, 'shipped' or 'all'")
    parser.add_argument("--fp32", action="store_true", help="also time the shipped kernels in fp32")
    parser.add_argument("--wide", action="store_true", help="also time trees wider than one block (see wide_trees)")
    args = parser.parse_args(argv)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    cupy = require_cupy()
    names = (
        list(VARIANTS)
        if args.variants == "all"
        else list(SHIPPED)
        if args.variants == "shipped"
        else args.variants.split(",")
    )
    report = {"device": device_name(), "ceilings": ceilings(cupy), "rows": []}
    print(f"device {report['device']}: " + ", ".join(f"{k} {v:.3e}" for k, v in report["ceilings"].items()), flush=True)
    if args.wide:
        report["wide"] = wide_trees(args.repeat)
    for name in filter(None, args.datasets.split(",")):
        rows, curves = instruments(name, args.size)
        tick = time.perf_counter()
        batch = pack(rows, curves)
        pack_s = time.perf_counter() - tick
        node_steps = float(batch.geometry.node_steps.sum())
        tick = time.perf_counter()
        reference = price_cpu(batch)
        cpu_s = time.perf_counter() - tick
        todo = [(v, "fp64") for v in names] + ([(v, "fp32") for v in ("outer", "flat")] if args.fp32 else [])
        for variant, precision in todo:
            batch_p = batch if precision == "fp64" else pack(rows, curves, np.float32)
            try:
                measured = run_variant(batch_p, VARIANTS[variant], args.repeat, reference)
            except ValueError as error:  # e.g. a fixed block narrower than the widest tree
                print(f"{name:3} {variant:16} {precision} skipped: {error}", flush=True)
                continue
            row = dict(
                dataset=name,
                rows=len(rows),
                node_steps=node_steps,
                variant=variant,
                precision=precision,
                pack_s=pack_s,
                cpu_engine_s=cpu_s,
                **measured,
            )
            row["ns_per_s"] = node_steps / row["kernel_s"]
            host = row["pack_s"] + row["layout_s"] + row["upload_s"] + row["download_s"]
            row["preprocessing_share"] = host / (host + row["kernel_s"])
            report["rows"].append(row)
            print(
                f"{name:3} {variant:16} {precision} kernel {row['kernel_s'] * 1e3:9.2f} ms  "
                f"NS/s {row['ns_per_s']:.3e}  mem {row['device_bytes'] / 2**20:8.1f} MiB  "
                f"layout {row['layout_s'] * 1e3:7.1f} ms  upload {row['upload_s'] * 1e3:6.1f} ms  "
                f"err bond {row['bond_error']:.1e} option {row['option_error']:.1e} non-finite {row['non_finite']}  "
                + " ".join(f"{k}={row[k]}" for k in ("nodes", "threads", "bins", "occupancy") if k in row),
                flush=True,
            )
    lines = [
        f"device {report['device']}, {time.strftime('%Y-%m-%d')}",
        "",
        "| dataset | variant | precision | kernel ms | NS/s | device MiB | pack+layout+transfer ms | max rel err |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        host = (r["pack_s"] + r["layout_s"] + r["upload_s"] + r["download_s"]) * 1e3
        lines.append(
            f"| {r['dataset']} | {r['variant']} | {r['precision']} | {r['kernel_s'] * 1e3:.2f} | "
            f"{r['ns_per_s']:.3e} | {r['device_bytes'] / 2**20:.0f} | {host:.0f} | "
            f"{max(r['bond_error'], r['option_error']):.1e} |"
        )
    save(args.output_dir, "gpu_kernels", report, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())

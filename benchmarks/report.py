"""The job report at 10⁶ rows: seconds to write it and its size; and the README's two pictures.

    python benchmarks/report.py OUTPUT_DIR [--rows 1000000] [--repeat 3] [--no-pictures]

Prices the papers' R1 portfolio (10⁵ rows, CPU engine, in this process) with a few rows broken on purpose
(``--on-invalid report``), copies the priced table up to ``--rows`` rows (ids renumbered: the report's work
depends on the rows, not on where their prices came from), and times ``write_report`` with the inspector's
plan, 64 chunks, phase timings and two workers' totals (median of ``--repeat`` runs after a warm-up).
Writes ``report.json`` and ``report.md``, and unless ``--no-pictures`` (they need Chromium):
``report.png`` (the top of the report of R1) and ``dashboard.png`` (the distprice dashboard page half-way
through a job on a 2-worker loopback cluster, its chunks priced by the Pricer's tasks under its keys).

The floor: the report reads ~10 columns of 10⁶ rows (~60 MB) a few times, sorts the trees once to cut
the chunks (n log n) and takes the quantiles of widths and heights; that is ~0.3 s on one core. What it
sends to the page does not grow with the rows (histograms, group sums, the largest positions), so Bokeh
builds the same document at 10³ or 10⁶ rows: a fixed ~1 s here. Distance from the floor is printed.
"""

from __future__ import annotations

import argparse
import time
import uuid
from pathlib import Path

import numpy as np
import pandas as pd

import distprice
from distprice.inspector import CostModel, plan
from distprice.lattice import datasets
from distprice.lattice.geometry import node_steps
from distprice.report import render_report, write_report

from common import median_seconds, save

BROKEN = {3: ("strike", -1.0), 17: ("volatility", np.nan), 29: ("maturity", -2.0)}
"""Rows broken on purpose, so that the report has problems to count."""
TIMINGS = {"start": 2.1, "read": 0.4, "checks": 0.6, "plan": 0.2, "price": 9.5, "write": 0.8}
"""Phase seconds shown in the pictures (illustrative: the report draws what it is given)."""


def priced_r1() -> pd.DataFrame:
    book = datasets.generate("R1")
    for row, (column, value) in BROKEN.items():
        book.loc[row, column] = value
    return distprice.price(book, engine="cpu", on_invalid="report")


def copies(priced: pd.DataFrame, rows: int) -> pd.DataFrame:
    big = pd.concat([priced] * -(-rows // len(priced)), ignore_index=True).head(rows)
    return big.assign(id=np.arange(rows))


def facts(priced: pd.DataFrame) -> dict:
    """What a job would give the report: the plan of the valid rows, chunks, timings, workers' totals."""
    valid = priced["price"].notna()
    width, height = (priced.loc[valid, c].to_numpy(dtype=np.int64) for c in ("width", "height"))
    chosen = plan(width, height, CostModel("cpu"), gpu=False)
    steps = float(node_steps(width, height).sum())
    workers = {
        f"tcp://10.0.0.{i}:40000": dict(
            rows=int(valid.sum()) // 2, node_steps=steps / 2, seconds=4.5, kernel_seconds=4.1, device="cpu"
        )
        for i in (1, 2)
    }
    return dict(
        plan=chosen,
        plan_seconds=[chosen.seconds * 1.1 for _ in chosen.parts],
        chunks=64,
        timings=TIMINGS,
        workers=workers,
    )


def report_picture(priced: pd.DataFrame, output: Path) -> None:
    from PIL import Image

    from distprice.report.browser import render_page

    page = output.with_suffix(".html")
    write_report(priced, page, portfolio="r1.parquet", **facts(priced))
    shown = render_page(page.as_uri())
    page.unlink()
    full = output.with_name("report-full.png")
    full.write_bytes(shown.png)
    with Image.open(full) as image:
        image.crop((0, 0, image.width, min(image.height, 2800))).save(output)
    full.unlink()


def dashboard_picture(output: Path) -> None:
    """The page half-way through a job of R1 in 8 chunks on a 2-worker loopback cluster."""
    from distributed import Client, LocalCluster, wait

    from distprice.cluster.dashboard import post_job, register
    from distprice.cluster.tasks import run_chunk
    from distprice.curves import builtin_curves
    from distprice.execute import fixed_plan
    from distprice.families.lattice import price_chunk, task_name
    from distprice.lattice.instruments import prepare
    from distprice.planner import partition
    from distprice.report.browser import render_page

    instruments = prepare(datasets.generate("R1"), builtin_curves()).instruments()
    geometry = instruments.geometry
    pieces = [instruments.take(c) for c in partition(geometry.width, geometry.height, 8)]
    chosen = plan(geometry.width, geometry.height, CostModel("cpu"), gpu=False)
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address="127.0.0.1:0") as cluster,
        Client(cluster) as client,
    ):
        url = register(client)
        token = uuid.uuid4().hex
        post_job(
            client,
            token,
            rows=len(instruments),
            chunks=len(pieces),
            node_steps=instruments.node_steps,
            predicted_seconds=chosen.seconds / 2,
            name="r1.parquet",
        )

        def submit(i):
            return client.submit(
                run_chunk,
                price_chunk,
                pieces[i],
                [builtin_curves()],
                fixed_plan("cpu", len(pieces[i])).parts,
                np.dtype(np.float64),
                key=f"{task_name(['cpu'], np.float64)}-0-{i}-{token}",
            )

        wait([submit(i) for i in range(5)])  # the rest waits: the page holds still for its picture
        output.write_bytes(render_page(url).png)
        wait([submit(i) for i in range(5, len(pieces))])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-pictures", action="store_true")
    args = parser.parse_args(argv)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    tick = time.perf_counter()
    priced = priced_r1()
    pricing = time.perf_counter() - tick
    big = copies(priced, args.rows)
    known = facts(big)
    target = args.output_dir / "report-big.html"
    seconds, _ = median_seconds(lambda: write_report(big, target, **known), args.repeat)
    size = target.stat().st_size
    target.unlink()
    small, _ = median_seconds(lambda: render_report(priced.head(1000), chunks=8), args.repeat)
    if not args.no_pictures:
        report_picture(priced, args.output_dir / "report.png")
        dashboard_picture(args.output_dir / "dashboard.png")
    floor = 0.3
    import bokeh

    report = {
        "rows": args.rows,
        "seconds": seconds,
        "bytes": size,
        "seconds_1000_rows": small,
        "r1_pricing_seconds": pricing,
        "floor_seconds": floor,
        "bokeh": bokeh.__version__,
        "machine": "shared, 2 cores",
    }
    lines = [
        "| rows | write_report s (median) | report MiB | same report at 10³ rows s | floor s | × floor |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {args.rows:,} | {seconds:.2f} | {size / 2**20:.2f} | {small:.2f} | {floor:.1f} | {seconds / floor:.0f} |",
        "",
        f"{time.strftime('%Y-%m-%d')}, a shared 2-core machine, CPU only; plan, 64 chunks, timings and "
        f"two workers' totals given.",
    ]
    save(args.output_dir, "report", report, lines)


if __name__ == "__main__":
    main()

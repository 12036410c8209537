"""A whole job in this process, stage by stage (:func:`distprice.timing.job_stages`): seconds of each stage and
per 10^6 rows, and rows per second of the host path (every stage but the engine), on four books written to
Parquet and priced by the CPU engine with the priced table written to Parquet; writes ``stages.json`` and
``stages.md`` to OUTPUT_DIR.

    python benchmarks/stages.py OUTPUT_DIR [--rows 1000000] [--desk-rows N] [--repeat 3] [--folder]

The books: ``tiny`` (``--rows`` rows of R1 cut to trees of one year at 4 steps a year, ids as text: almost all
host work), ``R1`` and ``S1`` (``--rows`` / 100 rows: the engine dominates) and ``desk`` (``--desk-rows``, by
default ``--rows`` / 10, dated rows with their curves and exercise schedule: schedules, exercise dates and dated
events; at 10^6 rows its fixed costs no longer weigh on the figures per 10^6, but the CPU engine takes a minute
a job). With ``--folder``
the priced table is written as a folder of Parquet parts (encoded on several threads), not one file.

The floor: the host path reads each input byte and writes each output byte at least once. Its bytes per row
(the Parquet file read, the columns in memory, the canonical table, the geometry and the event table built,
the priced table in memory and the Parquet file written) over the bandwidth of a plain copy on this machine
bound its time from below; the table says how far each book is from it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from distprice.lattice import datasets
from distprice.lattice.desk import desk
from distprice.tables import read_table, write_table
from distprice.timing import DEVICE_STAGES, STAGES, host_seconds, job_stages

from common import copy_bandwidth, save


def tiny(rows: int, seed: int = 0) -> pd.DataFrame:
    """R1's rows on trees of one year at 4 steps a year (expiry on a quarter, exercise from today), ids as text."""
    book = datasets.generate("R1", rows, seed)
    rng = np.random.default_rng([seed, 4])
    return book.assign(
        id=pd.array(np.char.add("T", np.arange(rows).astype("U")), dtype="str"),
        maturity=1.0,
        expiry=rng.integers(1, 5, rows) / 4.0,
        first_exercise=0.0,
        steps_per_year=4,
    )


def books(rows: int, desk_rows: int, folder: Path) -> dict[str, dict]:
    """Each book written to Parquet in ``folder``, with the keywords of :func:`job_stages` that price it."""
    out = {}
    for name, table, extra in (
        ("tiny", tiny(rows), {}),
        ("R1", datasets.generate("R1", max(rows // 100, 1)), {}),
        ("S1", datasets.generate("S1", max(rows // 100, 1)), {}),
    ):
        write_table(table, folder / f"{name}.parquet")
        out[name] = dict(portfolio=str(folder / f"{name}.parquet"), **extra)
    book = desk(desk_rows)
    for part, table in (("", book.portfolio), (".curves", book.curves), (".exercise", book.exercise_schedule)):
        write_table(table, folder / f"desk{part}.parquet")
    out["desk"] = dict(
        portfolio=str(folder / "desk.parquet"),
        curves=str(folder / "desk.curves.parquet"),
        exercise_schedule=str(folder / "desk.exercise.parquet"),
    )
    return out


def floor_bytes(job: dict, folder: Path) -> dict[str, float]:
    """Bytes per row the host path must move at least once: the file read, its columns, the canonical table,
    geometry and events built, the priced table and the file written."""
    from distprice.curves import load_curves
    from distprice.job import exercise_schedule
    from distprice.lattice.batch import pack
    from distprice.lattice.instruments import prepare

    table = read_table(job["portfolio"])
    rows = len(table)
    curves = load_curves(job.get("curves"))
    schedule = exercise_schedule(job.get("exercise_schedule"), table)
    prepared = prepare(table, curves, exercise_schedule=schedule)
    batch = pack(prepared.instruments(), curves)
    events = sum(getattr(batch.events, f).nbytes for f in ("offsets", "step", "time", "kind", "amount"))
    geometry = sum(
        np.asarray(getattr(prepared.geometry, f)).nbytes for f in ("dt", "dr", "M", "jmax", "width", "height")
    )
    priced_path = folder / "priced" if (folder / "priced").is_dir() else folder / "priced.parquet"
    priced = read_table(priced_path)
    return {
        "file_read": os.path.getsize(job["portfolio"]) / rows,
        "columns_read": table.memory_usage(deep=True, index=False).sum() / rows,
        "canonical": prepared.table.memory_usage(deep=True, index=False).sum() / rows,
        "geometry": geometry / rows,
        "events": events / rows,
        "priced": priced.memory_usage(deep=True, index=False).sum() / rows,
        "file_written": sum(
            p.stat().st_size for p in ([priced_path] if priced_path.is_file() else priced_path.iterdir())
        )
        / rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the tiny book (R1, S1: / 100, desk: / 10)")
    parser.add_argument("--desk-rows", type=int, help="rows of the desk book (default: --rows / 10)")
    parser.add_argument("--repeat", type=int, default=3, help="jobs per book after a warm-up; medians are reported")
    parser.add_argument("--folder", action="store_true", help="write the priced table as a folder of parts")
    args = parser.parse_args()
    bandwidth = copy_bandwidth()
    report, lines = (
        {"rows": args.rows, "repeat": args.repeat, "copy_bandwidth": bandwidth, "folder": args.folder, "books": {}},
        [],
    )
    lines += [
        "# A whole job in this process, stage by stage (CPU engine, Parquet in and out)",
        "",
        f"Seconds per stage (median of {args.repeat} jobs after a warm-up), then per 10^6 rows; host = every "
        f"stage but the engine; the priced table written as {'a folder of parts' if args.folder else 'one file'}. "
        f"Load average before: {os.getloadavg()[0]:.2f}.",
        "",
        "| book | rows | " + " | ".join(STAGES) + " | host s | host rows/s | floor s | host / floor |",
        "|---" * (len(STAGES) + 6) + "|",
    ]
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        for name, job in books(args.rows, args.desk_rows or max(args.rows // 10, 1), folder).items():
            keywords = dict(
                job, engine="cpu", output=f"{folder / 'priced'}/" if args.folder else folder / "priced.parquet"
            )
            rows = len(read_table(job["portfolio"]))
            job_stages(**keywords)  # a warm-up: compiles what numba has not cached, warms the caches
            stages = job_stages(**keywords, repeat=args.repeat)
            host = host_seconds(stages)
            moved = floor_bytes(job, folder)
            floor = sum(moved.values()) * rows / bandwidth
            per_million = {stage: seconds * 1e6 / rows for stage, seconds in stages.items()}
            report["books"][name] = {
                "rows": rows,
                "seconds": stages,
                "per_million_rows": per_million,
                "host_seconds": host,
                "host_rows_per_second": rows / host,
                "floor_bytes_per_row": moved,
                "floor_seconds": floor,
            }
            lines.append(
                f"| {name} | {rows} | "
                + " | ".join(f"{stages[s]:.3f}" for s in STAGES)
                + f" | {host:.3f} | {rows / host:.3g} | {floor:.3f} | {host / floor:.0f}x |"
            )
            lines.append(
                "| per 10^6 | | "
                + " | ".join(f"{per_million[s]:.3f}" for s in STAGES)
                + f" | {host * 1e6 / rows:.3f} | | | |"
            )
    lines += [
        "",
        f"Floor: bytes per row moved once (file read, columns, canonical table, geometry, events, priced "
        f"table, file written) over a plain copy's {bandwidth / 1e9:.1f} GB/s; load average after: "
        f"{os.getloadavg()[0]:.2f}. Stages {', '.join(DEVICE_STAGES)} are the pricing itself.",
    ]
    for name, book in report["books"].items():
        lines.append(f"- {name}: " + ", ".join(f"{k} {v:.0f} B" for k, v in book["floor_bytes_per_row"].items()))
    save(args.output_dir, "stages", report, lines)


if __name__ == "__main__":
    main()

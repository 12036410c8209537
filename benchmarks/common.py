"""What the benchmarks share: timing, the portfolios they price, the machine they ran on, and writing
``<stem>.json`` (every figure) and ``<stem>.md`` (the table), the table printed last where a terminal shows it."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numba
import numpy as np
import pandas as pd

from distprice.curves import builtin_curves, load_curves
from distprice.job import exercise_schedule, valuation_day
from distprice.lattice import datasets
from distprice.lattice.desk import AS_OF, desk
from distprice.lattice.instruments import prepare
from distprice.tables import write_tables

LIBRARIES = ("numpy", "pandas", "pyarrow", "numba", "dask", "distributed", "cupy-cuda12x", "cupy-cuda13x")


def median_times(run, repeat: int):
    """Median wall and process-CPU seconds (every thread) of ``repeat`` calls of ``run`` after one warm-up call
    (which also compiles), and the last call's result. CPU time leaves out the time slices other work takes on
    a shared machine."""
    result = run()
    wall, cpu = [], []
    for _ in range(repeat):
        tick, tock = time.perf_counter(), time.process_time()
        result = run()
        wall.append(time.perf_counter() - tick)
        cpu.append(time.process_time() - tock)
    return statistics.median(wall), statistics.median(cpu), result


def median_seconds(run, repeat: int):
    """Median wall seconds of ``repeat`` calls of ``run`` after one warm-up call, and the last call's result."""
    wall, _, result = median_times(run, repeat)
    return wall, result


@numba.njit(parallel=True)
def _copy(a, b):
    for i in numba.prange(len(a)):
        b[i] = a[i]


def copy_bandwidth(nbytes: int = 1 << 28) -> float:
    """Bytes per second of a parallel copy into memory already written once (read + write counted)."""
    a = np.ones(nbytes // 16, dtype=np.int64)
    b = np.zeros_like(a)
    seconds, _ = median_seconds(lambda: _copy(a, b), 5)
    return 2 * a.nbytes / seconds


def instruments(name: str, size: int | None = None, seed: int = 0):
    """The valid instruments of a synthetic dataset on the built-in ``hull`` curve, or of the dated ``desk``
    book on its own curves and exercise schedule, and that curve set."""
    if name == "desk":
        book = desk(size or 100_000, seed)
        curves = load_curves(book.curves)
        prepared = prepare(
            book.portfolio,
            curves,
            as_of=valuation_day(AS_OF),
            exercise_schedule=exercise_schedule(book.exercise_schedule, book.portfolio),
        )
        assert not prepared.problems, prepared.problems[:3]
        return prepared.instruments(), curves
    curves = builtin_curves()
    prepared = prepare(datasets.generate(name, size, seed), curves)
    assert not prepared.problems, prepared.problems[:3]
    return prepared.instruments(), curves


def write_copies(path: Path, name: str, rows: int, copy_rows: int = 1_000_000) -> int:
    """Writes ``rows`` rows of dataset ``name`` to ``path``: copies of ``copy_rows`` rows at seeds 0, 1, ...,
    ids renumbered; returns the rows written."""

    def pieces():
        for seed, first in enumerate(range(0, rows, copy_rows)):
            table = datasets.generate(name, min(copy_rows, rows - first), seed=seed)
            yield table.assign(id=np.arange(first, first + len(table)))

    return write_tables(pieces(), path)


def write_desk_copies(folder: Path, rows: int, copy_rows: int = 100_000) -> dict[str, str]:
    """Writes ``rows`` rows of the ``desk`` book to ``folder``: copies of ``copy_rows`` rows at seeds 0, 1, ...,
    each id prefixed by its copy's number, in ``desk.parquet``; the copies' exercise schedules in
    ``desk.exercise.parquet`` and the curves in ``desk.curves.parquet``. Returns the job's files (keywords
    ``portfolio``, ``curves``, ``exercise_schedule``)."""
    books = [desk(min(copy_rows, rows - first), seed) for seed, first in enumerate(range(0, rows, copy_rows))]

    def renumbered(table, seed):
        return table.assign(id=f"{seed}-" + table["id"].astype("str"))

    files = {
        "portfolio": folder / "desk.parquet",
        "curves": folder / "desk.curves.parquet",
        "exercise_schedule": folder / "desk.exercise.parquet",
    }
    write_tables((renumbered(book.portfolio, seed) for seed, book in enumerate(books)), files["portfolio"])
    write_tables(
        [pd.concat([renumbered(book.exercise_schedule, seed) for seed, book in enumerate(books)], ignore_index=True)],
        files["exercise_schedule"],
    )
    write_tables([books[0].curves], files["curves"])
    return {key: str(path) for key, path in files.items()}


def environment() -> dict:
    """The date, the machine and the library versions a benchmark ran with."""
    libraries = {}
    for name in LIBRARIES:
        try:
            libraries[name] = version(name)
        except PackageNotFoundError:
            pass
    return {
        "date": time.strftime("%Y-%m-%d"),
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "libraries": libraries,
    }


def save(output_dir: Path, stem: str, report: dict, lines: list[str]) -> None:
    """Writes ``report`` (with :func:`environment` added) and the table ``lines``; prints the table."""
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / f"{stem}.json").write_text(
        json.dumps({"environment": environment(), **report}, indent=1, default=str)
    )
    (output_dir / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))

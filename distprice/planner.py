"""Cutting a portfolio into chunks for the workers of a cluster.

A portfolio the client holds is sorted by the inspector's key (decreasing tree height, then width: the
order the flat kernel packs in, so a chunk's trees are alike) and cut into consecutive pieces of nearly
equal cost, Σ width · height. A big Parquet file is cut into slices of its row groups that the workers
read themselves; their cost is not known before they are read, so they are balanced by rows.
There are several chunks per worker so that a slow or lost worker does not hold up the job. A job priced
under many scenarios is cut into blocks of consecutive scenarios first, so that the priced table can be
written block by block while later blocks are priced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_CHUNK_ROWS = 2_000
"""Fewer rows than this make a chunk whose fixed costs (a task, a launch, a layout) outweigh its work."""
MAX_CHUNK_ROWS = 250_000
"""More rows than this make a chunk whose inputs and results weigh on a worker's memory."""


def sort_order(width: np.ndarray, height: np.ndarray) -> np.ndarray:
    """Positions in the inspector's order: decreasing height, then decreasing width."""
    return np.lexsort((-np.asarray(width), -np.asarray(height)))


def chunk_count(rows: int, workers: int, chunks_per_worker: int) -> int:
    """Chunks for a portfolio of ``rows``: ``chunks_per_worker`` per worker, within the row bounds above."""
    wanted = max(1, workers) * max(1, chunks_per_worker)
    return max(1, min(wanted, math.ceil(rows / MIN_CHUNK_ROWS)), math.ceil(rows / MAX_CHUNK_ROWS))


def work_grid(rows: int, scenarios: int, workers: int, chunks_per_worker: int) -> tuple[int, list[range]]:
    """How to cut a job of ``rows`` under ``scenarios`` curve sets into tasks: the number of row chunks and
    the blocks of consecutive scenarios (each task prices one chunk under one block). Blocks come first,
    up to ``chunks_per_worker`` tasks per worker; row chunks make up the rest, within the row bounds of
    :func:`chunk_count`."""
    wanted = max(1, workers) * max(1, chunks_per_worker)
    blocks = max(1, min(scenarios, wanted))
    row_chunks = chunk_count(rows, math.ceil(wanted / blocks), 1)
    bounds = np.linspace(0, scenarios, blocks + 1).round().astype(int)
    return row_chunks, [range(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def cut_by_cost(cost: np.ndarray, chunks: int) -> list[slice]:
    """At most ``chunks`` consecutive, non-empty slices of ``cost`` (in its order) of nearly equal sums."""
    n = len(cost)
    if n == 0:
        return []
    total = np.cumsum(np.asarray(cost, dtype=np.float64))
    targets = total[-1] * np.arange(1, chunks) / chunks
    bounds = np.unique(np.concatenate([[0], np.searchsorted(total, targets, side="right"), [n]]))
    return [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def partition(width: np.ndarray, height: np.ndarray, chunks: int) -> list[np.ndarray]:
    """Positions of each chunk: the portfolio sorted by :func:`sort_order`, cut by :func:`cut_by_cost`."""
    order = sort_order(width, height)
    cost = np.asarray(width, dtype=np.float64)[order] * np.asarray(height, dtype=np.float64)[order]
    return [order[piece] for piece in cut_by_cost(cost, chunks)]


@dataclass(frozen=True)
class FileSlice:
    """Rows ``start:stop`` of the consecutive row groups ``groups`` of a Parquet file, counted from the first
    group's first row; ``first_row`` is the position of the slice's first row in the whole table (the file, or
    the folder of parts it is one of)."""

    path: str
    groups: range
    start: int
    stop: int
    first_row: int

    @property
    def rows(self) -> int:
        return self.stop - self.start


def table_slices(files: list[tuple[str, list[int]]], chunks: int, opening: int = 0) -> list[FileSlice]:
    """Slices of a table held by Parquet files read one after the other (a folder's parts), each file given
    as ``(path, rows of each row group)``: about ``chunks`` of equal rows, none crossing a file. A slice may
    span row groups or share one with its neighbours, so that the slices are equal however the file was
    written (row groups of unequal rows would otherwise make some workers' share twice others').

    The first ``opening`` slices (those the workers take first) hold half a slice's rows each, the others of
    their file share the rest: a GPU's first kernels wait for their slices to be read and laid out, and wait
    less for smaller ones."""
    total = sum(sum(groups) for _, groups in files)
    per_slice = max(1.0, total / max(1, chunks))
    slices, first = [], 0
    for path, group_rows in files:
        starts = np.concatenate([[0], np.cumsum(group_rows, dtype=np.int64)])
        rows = int(starts[-1])
        count = max(1, round(rows / per_slice))
        small = int(np.clip(opening - len(slices), 0, count))  # this file's opening slices
        sizes = np.full(count, rows / count)
        if 0 < small < count:
            sizes[:small] = min(per_slice / 2, rows / count)
            sizes[small:] = (rows - sizes[0] * small) / (count - small)
        bounds = np.concatenate([[0], np.cumsum(sizes)]).round().astype(np.int64)
        bounds[-1] = rows
        for a, b in zip(bounds[:-1], bounds[1:]):
            if b > a:
                lo = int(np.searchsorted(starts, a, side="right")) - 1  # the group holding row a
                hi = int(np.searchsorted(starts, b, side="left"))  # after the group holding row b - 1
                base = int(starts[lo])
                slices.append(FileSlice(str(path), range(lo, hi), int(a) - base, int(b) - base, first + int(a)))
        first += rows
    return slices

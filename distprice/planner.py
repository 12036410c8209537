"""Cutting a portfolio into chunks for the workers of a cluster.

A portfolio the client holds is cut into runs of consecutive rows of nearly equal cost (node-steps), so that each
chunk's priced rows come back in the portfolio's order and can be written as soon as the chunks before them are:
the client holds a few chunks at a time, never the priced table. A big Parquet file is cut into slices of its row
groups that the workers read themselves; their cost is not known before they are read, so they are balanced by
rows. There are several chunks per worker so that a slow or lost worker does not hold up the job, but no more
than the job's predicted time pays for (:func:`task_count`): a small job takes one worker, not all. A job priced
under many scenarios is priced under all of them in each chunk (each row's scenarios come back together), or,
for the table that holds every row under one scenario before the next, in blocks of consecutive scenarios.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_CHUNK_ROWS = 2_000
"""Fewer rows than this make a chunk whose fixed costs (a task, a launch, a layout) outweigh its work."""
MAX_CHUNK_ROWS = 250_000
"""More rows than this make a chunk whose inputs and results weigh on a worker's memory."""
MAX_CHUNK_PRICES = 2_000_000
"""More prices than this (rows times scenarios) make a chunk whose priced rows the client still writes long
after the last task ends (~0.25 s of Parquet encoding for 2·10⁶ long rows on one core)."""
TASK_SECONDS = 0.05
"""The least predicted work worth a task of its own: a task's fixed costs on a cluster (sending it, its
worker's layout and launches, fetching its result) are a few to ~20 ms, so a job of less than this per worker
is faster on fewer workers."""


def task_count(seconds: float, workers: int, chunks_per_worker: int, least: float | None = None) -> int:
    """Tasks worth making of a job predicted to take ``seconds`` of pricing on one worker: ``chunks_per_worker``
    per worker, but none of less than ``least`` seconds (None: TASK_SECONDS; 0: no least); at least one."""
    wanted = max(1, workers) * max(1, chunks_per_worker)
    least = TASK_SECONDS if least is None else least
    return wanted if least <= 0 else max(1, min(wanted, int(seconds / least)))


def chunk_count(rows: int, workers: int, chunks_per_worker: int) -> int:
    """Chunks for a portfolio of ``rows``: ``chunks_per_worker`` per worker, within the row bounds above."""
    wanted = max(1, workers) * max(1, chunks_per_worker)
    return max(1, min(wanted, math.ceil(rows / MIN_CHUNK_ROWS)), math.ceil(rows / MAX_CHUNK_ROWS))


def shared_gpu_slices(rows: int, gpus: int, gpu_processes: int, chunks_per_worker: int) -> int:
    """Slices of a big file priced under several scenarios on GPUs that ``gpu_processes`` worker processes each
    share: as many as one GPU's workers take (``gpu_processes`` x ``chunks_per_worker``), at least two a GPU,
    within the row bounds of :func:`chunk_count`. A slice's host work (reading, checks, layout) serves all its
    scenarios' launches, and every launch ends in a tail of idle multiprocessors (about 3 ms on an H200), so more
    GPUs share the slices rather than cut them smaller: 10⁶ rows of R1 under 16 shifts in 64 slices took 14.5 s
    of kernels on one H200, in 16 slices 12.0 s."""
    return chunk_count(rows, 1, max(gpu_processes * chunks_per_worker, 2 * gpus))


def work_grid(rows: int, scenarios: int, tasks: int, by_scenario: bool = False) -> tuple[int, list[range]]:
    """How to cut a job of ``rows`` under ``scenarios`` curve sets into about ``tasks`` tasks: the number of
    row chunks and the blocks of consecutive scenarios (each task prices one chunk under one block). Every
    scenario in one block, row chunks within the row bounds of :func:`chunk_count` and of MAX_CHUNK_PRICES; with
    ``by_scenario`` (a table of every row under one scenario, then the next), blocks first, up to ``tasks``, and
    row chunks make up the rest."""
    if not by_scenario:
        chunks = max(chunk_count(rows, tasks, 1), math.ceil(rows * scenarios / MAX_CHUNK_PRICES))
        return max(1, min(chunks, rows)), [range(scenarios)]
    blocks = max(1, min(scenarios, tasks))
    row_chunks = chunk_count(rows, math.ceil(tasks / blocks), 1)
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


def spans(cost: np.ndarray, chunks: int) -> list[slice]:
    """At most ``chunks`` runs of consecutive rows of nearly equal ``cost`` (0 for a row that is not priced),
    covering every row; each run holds some cost, unless no row has any (one run)."""
    cuts = cut_by_cost(cost, chunks)
    kept: list[slice] = []
    for piece in cuts:
        if kept and not (np.any(cost[kept[-1]]) and np.any(cost[piece])):  # a run of nothing joins its neighbour
            kept[-1] = slice(kept[-1].start, piece.stop)
        else:
            kept.append(piece)
    return kept


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

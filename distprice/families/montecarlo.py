"""The Monte-Carlo family on a cluster: each job's paths cut into ranges, one ``mc_paths_<engine>_<precision>``
task each (:func:`~distprice.montecarlo.price_range`), whose payoff sums make the job's prices
(:func:`~distprice.montecarlo.combine`). The ranges start at multiples of PATH_BLOCK paths, so the prices are
the same bits on any number of workers; jobs share the cluster."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import pandas as pd

from ..montecarlo import Job, combine, price_range, priced_rows, read_inputs, validate, with_options
from .work import Chunk, Family, Work, Workers

PATH_BLOCK = 2048
"""Path ranges start at multiples of this many paths: any cut into such ranges gives the same bits."""


@dataclass(frozen=True)
class PathJobs:
    """Validated Monte-Carlo jobs and the engine asked for (``auto``: the workers' GPU if they have one, else
    the CPU engine)."""

    jobs: list[Job]
    engine: str


def read(inputs, *, paths: int | None = None, precision: str | None = None, engine: str = "auto") -> PathJobs:
    """The jobs of ``inputs`` (as :func:`distprice.price_mc` takes them), ``paths`` and ``precision`` overriding
    every job's."""
    return PathJobs(
        [with_options(job, paths=paths, precision=precision) for job in validate(read_inputs(inputs))], engine
    )


def path_ranges(paths: int, ranges: int) -> list[tuple[int, int]]:
    """(first, count) of about ``ranges`` ranges covering paths 0 … paths − 1, each starting at a multiple of
    PATH_BLOCK."""
    per_range = -(-paths // ranges)
    per_range = -(-per_range // PATH_BLOCK) * PATH_BLOCK
    return [(first, min(per_range, paths - first)) for first in range(0, paths, per_range)]


TASK = "mc_paths_"
"""The beginning of a path-range task's name."""


def task_name(engine: str, precision: str) -> str:
    """``mc_paths_<engine>_<precision>``, the dashboard's name of a path-range task."""
    return f"{TASK}{engine}_{precision}"


def split(read: PathJobs, workers: Workers) -> Work:
    """Each job's paths in ``chunks_per_worker`` ranges per worker; the work's result is the table of
    :func:`distprice.price_mc`, one row per job and model (``seconds``: from the split to the job's prices)."""
    tick = time.perf_counter()
    jobs = read.jobs
    used = ("gpu" if workers.gpu else "cpu") if read.engine == "auto" else read.engine
    ranges_of = [path_ranges(job.paths, max(workers.count, 1) * workers.chunks_per_worker) for job in jobs]
    chunks = [
        Chunk(f"{task_name(used, job.precision)}-{job.name}-{i}", price_range, (job, first, count, used))
        for job, ranges in zip(jobs, ranges_of)
        for i, (first, count) in enumerate(ranges)
    ]

    def table(partials) -> pd.DataFrame:
        rows = []
        for job, ranges in zip(jobs, ranges_of):
            estimate = combine(list(itertools.islice(partials, len(ranges))))
            rows += priced_rows(job, estimate, used, time.perf_counter() - tick)
        return pd.DataFrame(rows)

    figures = dict(
        name="monte carlo: " + ", ".join(job.name for job in jobs),
        rows=len(jobs),
        chunks=len(chunks),
        predicted_seconds=0.0,
    )
    return Work(chunks, table, "pricing paths", figures)


PATHS = Family(read, split, counted=(TASK,))
"""Monte-Carlo jobs (LexiFi's generic pricer), their paths in ranges."""

"""The Monte-Carlo family on a cluster: each job's paths cut into ranges, one ``mc_paths_<engine>_<precision>``
task each (:func:`~distprice.montecarlo.price_range`), whose payoff sums make the job's prices
(:func:`~distprice.montecarlo.combine`). The ranges start at multiples of PATH_BLOCK paths, so the prices are
the same bits on any number of workers; jobs share the cluster.

A job gets as many ranges as its work pays for (:func:`range_count`). Its work is its paths × dates × underlyings
× models (PDU) over its engine's PDU per second on one worker (:data:`PDU_PER_SECOND`); each
:data:`MIN_RANGE_SECONDS` of it pays for one range, from one up to ``chunks_per_worker`` per worker, and more
ranges than workers are a multiple of the workers, so that each prices as many. Worker processes that share a GPU
price in turns: there a job gets at most one range per GPU, each sent to a worker of its own GPU, so that every
GPU prices one launch and none two. A small job thus runs as one task wherever it runs, and a big one on every
GPU or worker.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import pandas as pd

from ..montecarlo import Job, combine, price_range, priced_rows, read_inputs, validate, with_options
from ..planner import task_count
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


PDU_PER_SECOND = {"gpu": 3.6e10, "cpu": 1.5e8, "reference": 6e6}
"""Path-date-underlyings (times models) each engine prices a second on one worker, as measured
(benchmarks/RESULTS.md): the GPU engine's whole call on the large set (H100, fp64; an H200 gives 5e10 on 2^21 to
2^25 paths), the CPU engine on one thread (93 to 166 million on the three sets) and the numpy reference
(about 6 million)."""

MIN_RANGE_SECONDS = 0.025
"""The least work of a range, in seconds of its engine (:data:`PDU_PER_SECOND`). A range's task costs about
5 ms beyond its paths (sending it, the scheduler, the launch, its sums back): on two H200s, 2^21 paths of the
large set took 48 ms from the first range's start to the last one's end as one range, and 30 ms as two, one a
GPU, against the 24 ms of a free split. At 25 ms of paths a range, that cost stays within a fifth of its time."""


def range_count(job: Job, engine: str, workers: Workers) -> int:
    """How many ranges ``job``'s paths are cut into for ``workers``, priced on ``engine``: one per
    MIN_RANGE_SECONDS of work (``workers.task_seconds`` where set; 0: every range pays), from 1 to
    ``chunks_per_worker`` per worker, a multiple of the workers past their count. On workers that share GPUs
    (``gpu_processes`` > 1), at most one per GPU (:func:`gpu_count`): ranges on one GPU price in turns."""
    count = max(workers.count, 1)
    least = MIN_RANGE_SECONDS if workers.task_seconds is None else workers.task_seconds
    seconds = job.paths * job.dims * len(job.models) / PDU_PER_SECOND[engine]
    ranges = task_count(seconds, count, workers.chunks_per_worker, least)
    if least > 0 and engine == "gpu" and workers.gpu_processes > 1:
        return min(ranges, gpu_count(workers))
    return ranges if ranges < count else ranges - ranges % count


def gpu_count(workers: Workers) -> int:
    """The GPUs of ``workers``: those whose workers are known, else the workers over the processes a GPU has."""
    return len(workers.gpus) or max(1, workers.count // max(1, workers.gpu_processes))


def placed(start: int, ranges: int, engine: str, workers: Workers) -> list[tuple[str, ...]]:
    """The workers each of a job's ``ranges`` ranges is sent to: on GPUs shared by several workers, range ``i``
    of a job of several to the workers of GPU ``start + i`` (counted round the GPUs); elsewhere, and a job of one
    range, any worker."""
    return [workers.on_gpu(start + i) if engine == "gpu" and ranges > 1 else () for i in range(ranges)]


TASK = "mc_paths_"
"""The beginning of a path-range task's name."""


def task_name(engine: str, precision: str) -> str:
    """``mc_paths_<engine>_<precision>``, the dashboard's name of a path-range task."""
    return f"{TASK}{engine}_{precision}"


def split(read: PathJobs, workers: Workers) -> Work:
    """Each job's paths in the ranges its work pays for (:func:`range_count`: one range per MIN_RANGE_SECONDS of
    its engine's work, at most ``chunks_per_worker`` per worker); the work's result is the table of
    :func:`distprice.price_mc`, one row per job and model (``seconds``: from the split to the job's prices)."""
    tick = time.perf_counter()
    jobs = read.jobs
    used = ("gpu" if workers.gpu else "cpu") if read.engine == "auto" else read.engine
    ranges_of = [path_ranges(job.paths, range_count(job, used, workers)) for job in jobs]
    starts = itertools.accumulate((len(r) for r in ranges_of if len(r) > 1), initial=0)
    places = [placed(next(starts) if len(r) > 1 else 0, len(r), used, workers) for r in ranges_of]
    chunks = [
        Chunk(f"{task_name(used, job.precision)}-{job.name}-{i}", price_range, (job, first, count, used), workers=on)
        for job, ranges, where in zip(jobs, ranges_of, places)
        for i, ((first, count), on) in enumerate(zip(ranges, where))
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
    return Work(chunks, table, "pricing paths", figures, together=True)


PATHS = Family(read, split, counted=(TASK,))
"""Monte-Carlo jobs (LexiFi's generic pricer), their paths in ranges."""

"""Pricing Monte-Carlo jobs: one path range on one engine (a pure function for cluster tasks), and the
in-process entry point :func:`price_mc`."""

from __future__ import annotations

import time

import pandas as pd

from ..cuda import gpu_available
from ..errors import OptionError
from . import cpu, gpu, reference
from .estimate import Estimate, Partial, combine, split
from .inputs import read_inputs
from .job import Job
from .rules import validate, with_options

ENGINES = {"reference": reference.batch_sums, "cpu": cpu.batch_sums, "gpu": gpu.batch_sums}
"""Each engine's ``batch_sums(job, first, count)``: payoff sums per model and batch, float64 [M, BATCHES]."""


def resolve_engine(engine: str, job: Job | None = None) -> str:
    """``auto`` → ``gpu`` where CuPy and a GPU are usable (and the job has the paths a GPU needs), else
    ``cpu``; other names are checked."""
    if engine == "auto":
        enough = job is None or job.paths >= gpu.MIN_PATHS
        return "gpu" if enough and gpu_available() else "cpu"
    if engine not in ENGINES:
        raise OptionError(f"engine must be auto or one of {', '.join(ENGINES)}, not {engine!r}")
    return engine


def price_range(job: Job, first: int, count: int, engine: str = "cpu") -> Partial:
    """Price paths first … first + count − 1 (0-based) of ``job`` on ``engine``: the payoff sums per model
    and batch. Pure: the same arguments give the same bits, wherever it runs."""
    engine = resolve_engine(engine, job)
    if not (0 <= first and 0 <= count and first + count <= job.paths):
        raise OptionError(f"job '{job.name}' has paths 0..{job.paths - 1}; cannot price {first}..{first + count - 1}")
    start = time.perf_counter()
    sums = ENGINES[engine](job, int(first), int(count))
    return Partial(job.name, job.paths, int(first), int(count), sums, engine, time.perf_counter() - start)


def price_mc(
    inputs, *, paths: int | None = None, precision: str | None = None, engine: str = "auto", chunks: int | None = None
) -> pd.DataFrame:
    """Price every job of ``inputs`` (a folder of tables, a FinPar / Futhark data file, or a dict of
    DataFrames) in this process. ``paths`` and ``precision`` override every job's; ``chunks`` cuts each
    job's paths into that many ranges, priced one after the other and combined (the price does not depend
    on it). One row per (job, model): job, model, contract, price, stderr_batches, paths, precision,
    directions, engine, chunks, seconds (wall time of the pricing, validation excluded)."""
    resolve_engine(engine)
    jobs = validate(read_inputs(inputs))
    rows = []
    for job in jobs:
        job = with_options(job, paths=paths, precision=precision)
        used = resolve_engine(engine, job)
        partials = [price_range(job, first, count, used) for first, count in split(job.paths, chunks or 1)]
        estimate = combine(partials)
        rows += priced_rows(job, estimate, used, estimate.seconds)
    return pd.DataFrame(rows)


def priced_rows(job: Job, estimate: Estimate, engine: str, seconds: float) -> list[dict]:
    """The rows of :func:`price_mc`'s table for one job, one per model, from its combined ``estimate``
    (:func:`~.estimate.combine`), priced by ``engine`` in ``seconds``."""
    return [
        dict(
            job=job.name,
            model=model,
            contract=job.contract.name,
            price=estimate.price[m],
            stderr_batches=estimate.stderr_batches[m],
            paths=job.paths,
            precision=job.precision,
            directions=job.directions_source,
            engine=engine,
            chunks=estimate.ranges,
            seconds=seconds,
        )
        for m, model in enumerate(job.models)
    ]

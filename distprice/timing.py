"""Where a whole pricing job in this process spends its time, stage by stage.

:func:`job_stages` runs one job with the functions the product runs (the table read, the job prepared, the plan,
its parts priced, the priced table built and written) and returns the seconds of each stage (:data:`STAGES`):

- ``read``: the portfolio file to a table (0 for a table given as it is);
- ``validate``: the options checked, the curves and the exercise schedule read, every rule checked, the
  canonical table and the tree geometry (:func:`~.job.prepare_job`);
- ``schedules``: the dated rows' terms, settlement, live coupons and exercise dates, checked during
  validation;
- ``plan``: the inspector's plan, or the named engine's;
- ``events``, ``layout``: the event tables (the dated rows' coupons made from their schedules as they are
  merged) and the rest of the engines' arrays (:func:`~.lattice.batch.pack`), part by part, on every thread
  that lays out;
- ``transfer``, ``kernel``: GPU parts: the kernels' time (CUDA events) and the rest of the parts' wall time
  beyond the kernels and the host layout (copies, device layouts, launches); the host layout of later waves
  runs beside the kernels, so these overlap;
- ``engine``: CPU and reference parts: the time in the engine's pricing loops;
- ``priced``: the priced table and its tally (the summary ``distprice run`` prints);
- ``write``: the priced table to ``output`` (0 without one).

Rows per second of the host path are rows / (every stage but ``engine`` and ``kernel``).
"""

from __future__ import annotations

import statistics
import time
from contextlib import contextmanager

import numpy as np
import pandas as pd

from .execute import choose_plan, price_parts
from .job import JobOptions, Tally, prepare_job
from .lattice.engines import AUTO, GPU_ENGINES
from .stopwatch import Stopwatch, watching
from .tables import read_portfolio, write_table

STAGES = (
    "read",
    "validate",
    "schedules",
    "plan",
    "events",
    "layout",
    "transfer",
    "kernel",
    "engine",
    "priced",
    "write",
)
"""The stages of a job, in the order they run."""
DEVICE_STAGES = ("kernel", "engine")
"""The stages that price: every other one is host work around the engines."""


def job_stages(
    portfolio,
    curves=None,
    *,
    engine: str = AUTO,
    precision: str = "fp64",
    exercise_schedule=None,
    as_of=None,
    output=None,
    repeat: int = 1,
) -> dict[str, float]:
    """Seconds of each stage (:data:`STAGES`) of pricing ``portfolio`` (a DataFrame or a CSV/Parquet path) on
    ``curves`` in this process, as :func:`distprice.price` and ``distprice run --in-process`` do, writing the
    priced table to ``output`` when given. ``engine``, ``precision``, ``exercise_schedule`` and ``as_of`` are
    the job options of those names. With ``repeat`` > 1 the job runs that many times and each stage's median
    is returned. Raises what the job raises (e.g. :class:`~distprice.errors.InvalidInputError`)."""
    options = JobOptions.of(
        curves=curves, engine=engine, precision=precision, exercise_schedule=exercise_schedule, as_of=as_of
    )
    runs = [_run(portfolio, options, output) for _ in range(max(1, int(repeat)))]
    return {stage: statistics.median(run[stage] for run in runs) for stage in STAGES}


def host_seconds(stages: dict[str, float]) -> float:
    """The seconds of every stage but the pricing itself (``kernel``, ``engine``)."""
    return sum(seconds for stage, seconds in stages.items() if stage not in DEVICE_STAGES)


def _run(portfolio, options: JobOptions, output) -> dict[str, float]:
    seconds = dict.fromkeys(STAGES, 0.0)

    @contextmanager
    def clock(stage: str):
        tick = time.perf_counter()
        yield
        seconds[stage] += time.perf_counter() - tick

    with clock("read"):
        table = portfolio if isinstance(portfolio, pd.DataFrame) else read_portfolio(portfolio)
    watch = Stopwatch()
    with clock("validate"), watching(watch):
        job = prepare_job(table, options.checked())
        instruments = job.instruments()
    seconds["schedules"] = watch.seconds.get("schedules", 0.0)
    seconds["validate"] -= seconds["schedules"]
    with clock("plan"):
        plan = choose_plan(instruments, options.engine, job.real)
    shape = (len(job.market.curve_sets), len(instruments))
    bond, option = np.full(shape, np.nan), np.full(shape, np.nan)
    for part in plan.parts:
        watch = Stopwatch()
        tick = time.perf_counter()
        with watching(watch):
            b, o, priced = price_parts(instruments, job.market.curve_sets, [part], job.real)
        wall = time.perf_counter() - tick
        bond[:, part.rows], option[:, part.rows] = b[:, part.rows], o[:, part.rows]
        events, layout = watch.seconds.get("events", 0.0), watch.seconds.get("layout", 0.0)
        seconds["events"] += events
        if part.engine in GPU_ENGINES:
            seconds["layout"] += layout
            seconds["kernel"] += priced
            seconds["transfer"] += max(wall - priced - events - layout, 0.0)
        else:  # the pieces' bookkeeping (rows taken, pieces cut) counts as layout
            seconds["engine"] += priced
            seconds["layout"] += max(wall - priced - events, 0.0)
    with clock("priced"):
        priced = job.priced_columns(bond, option, plan.engine_of_rows(len(instruments)))
        Tally(len(job.table), len(job.market.curve_sets)).add(priced)
        frame = job.table_of(priced)
    if output is not None:
        with clock("write"):
            write_table(frame, output)
    return seconds

"""Where the CPU engine's time goes: its pipeline cut after each stage, timed on one thread.

The stages are those of :func:`distprice.montecarlo.cpu.walk`: Sobol integers and uniforms, the inverse
normal (AS241), the Brownian bridge (with the increments dW), and paths with the payoff. Running the
pipeline up to and including stage s, for s = 1 … 4, and taking differences gives each stage's share.
Times are CPU seconds of the calling thread (medians after a warm-up), which on a shared machine count the
work rather than the cores other work took.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from . import cpu
from .job import Job
from .rules import with_options


def stage_split(job: Job, paths: int, repeats: int = 3) -> dict[str, float]:
    """Seconds that each stage of the CPU engine takes on paths 0 … paths − 1 of ``job`` on one thread:
    ``sobol``, ``inverse_normal``, ``bridge``, ``paths_payoff``, their ``total`` and the single-thread rate
    ``pdu_per_s`` (path-date-underlyings per second over all models). The job's precision applies."""
    job = with_options(job, paths=paths)
    args = cpu.arguments(job)
    sums, none = np.zeros((1, len(job.models))), np.empty((0, 0))
    cuts = []
    for stages in range(1, len(cpu.STAGES) + 1):
        cpu.walk(*args, 0, paths, stages, sums, 0, none)  # compiles, warms the caches
        seconds = []
        for _ in range(repeats):
            start = time.thread_time()
            cpu.walk(*args, 0, paths, stages, sums, 0, none)
            seconds.append(time.thread_time() - start)
        cuts.append(statistics.median(seconds))
    split = {name: max(0.0, cuts[i] - (cuts[i - 1] if i else 0.0)) for i, name in enumerate(cpu.STAGES)}
    split["total"] = cuts[-1]
    split["pdu_per_s"] = paths * job.dims * len(job.models) / cuts[-1]
    return split

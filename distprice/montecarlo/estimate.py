"""Prices from partial sums: path ranges priced anywhere, combined in a fixed order of ranges.

A job's paths k = 0 … N−1 are the parallel dimension. :func:`split` cuts them into ranges; pricing a range
(:func:`distprice.montecarlo.pricing.price_range`) gives a :class:`Partial`, a few hundred bytes that
pickle; :func:`combine` adds the partials of one job in the order of their first path, so that the price
does not depend on how the paths were split beyond float64 rounding (≈ 1e-16 relative).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import OptionError
from .job import BATCHES, batch_starts


@dataclass(frozen=True)
class Partial:
    """Payoff sums of paths first … first + count − 1 of one job: ``batch_sums`` float64 [M, BATCHES]
    (batch b holds paths k with k · BATCHES // paths = b), with the engine and its wall time (seconds)."""

    job: str
    paths: int
    first: int
    count: int
    batch_sums: np.ndarray
    engine: str
    seconds: float


@dataclass(frozen=True)
class Estimate:
    """One job's price per model (float64 [M]), the standard error over the batches' means (NaN with fewer
    than 2 paths per batch), the paths priced and the seconds the ranges took, summed."""

    job: str
    paths: int
    price: np.ndarray
    stderr_batches: np.ndarray
    seconds: float
    ranges: int


def split(paths: int, ranges: int) -> list[tuple[int, int]]:
    """``ranges`` contiguous (first, count) ranges of nearly equal size covering paths 0 … paths − 1."""
    if ranges < 1:
        raise OptionError(f"the number of path ranges must be >= 1, not {ranges}")
    edges = np.linspace(0, paths, min(ranges, paths) + 1).round().astype(np.int64)
    return [(int(a), int(b - a)) for a, b in zip(edges[:-1], edges[1:])]


def combine(partials: list[Partial]) -> Estimate:
    """The estimate of one job from partials that cover its paths exactly once (in any order given)."""
    if not partials:
        raise OptionError("no partial results to combine")
    partials = sorted(partials, key=lambda p: p.first)
    job, paths = partials[0].job, partials[0].paths
    covered = 0
    for p in partials:
        if p.job != job or p.paths != paths:
            raise OptionError(f"partials of jobs '{job}' and '{p.job}' cannot be combined")
        if p.first != covered:
            raise OptionError(
                f"job '{job}': paths {covered}..{p.first - 1} are missing or priced twice (a range starts at {p.first})"
            )
        covered = p.first + p.count
    if covered != paths:
        raise OptionError(f"job '{job}': paths {covered}..{paths - 1} are not priced")
    sums = np.zeros_like(partials[0].batch_sums)
    for p in partials:
        sums = sums + p.batch_sums
    price = np.zeros(sums.shape[0])
    for b in range(sums.shape[1]):
        price = price + sums[:, b]
    counts = np.diff(batch_starts(paths))
    if counts.min() >= 1:
        means = sums / counts
        stderr = means.std(axis=1, ddof=1) / np.sqrt(BATCHES)
    else:
        stderr = np.full(sums.shape[0], np.nan)
    return Estimate(job, paths, price / paths, stderr, float(sum(p.seconds for p in partials)), len(partials))

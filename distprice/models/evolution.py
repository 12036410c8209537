"""Differential evolution (Storn and Price) as in LexiFi's calibrator: a generic minimiser over a box that
evaluates a whole population per call of the objective.

Per generation: one F ~ U(0.5, 1); for member i, three distinct others a, b, c; base = the best member with
probability 1/2, else x_a; mutant = base + F (x_b - x_c); binomial crossover (CR = 0.9) takes a mutant
coordinate only where it lies in the box, except one random coordinate j0 that is always taken (so trials
may leave the box); a trial replaces its member when its value is lower or equal. The best member is the
lowest value, the lowest index on ties. Every random number comes from ``numpy.random.default_rng(seed)`` in
a fixed order, so a seed and an objective give one result.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import OptionError

CROSSOVER = 0.9
SCALE_RANGE = (0.5, 1.0)
"""F is drawn uniformly in this range once per generation."""


@dataclass(frozen=True)
class Generation:
    """Where the search stands after a generation (generation 0 is the initial population)."""

    index: int
    n_evals: int
    best: np.ndarray
    best_value: float


@dataclass(frozen=True)
class Evolution:
    """The outcome of a search: the best point, its value, evaluations spent and why the search stopped."""

    best: np.ndarray
    best_value: float
    n_evals: int
    generations: int
    status: str
    """``target_reached`` or ``max_evals_reached``."""


def evolve(objective: Callable[[np.ndarray], np.ndarray], lower, upper, *, population: int = 40,
           max_evals: int = 2000, seed: int = 0, target: float = 0.0,
           progress: Callable[[Generation], None] | None = None) -> Evolution:
    """Minimise ``objective`` (a ``(P, D)`` population to ``P`` values, NaN read as +inf) from a population drawn
    uniformly in the box ``[lower, upper]``, until ``max_evals`` evaluations or a value <= ``target``.
    ``progress`` is called after every generation."""
    lower, upper = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
    if population < 4 or max_evals < population:
        raise OptionError(f"differential evolution needs population >= 4 and max_evals >= population, got "
                          f"population={population}, max_evals={max_evals}")
    dims = len(lower)
    generations = (max_evals - population) // population
    rng = np.random.default_rng(seed)
    members = rng.uniform(lower, upper, (population, dims))
    values = _values(objective, members)
    n_evals, best = population, int(np.argmin(values))
    if progress:
        progress(Generation(0, n_evals, members[best].copy(), float(values[best])))
    g = 0
    while g < generations and values[best] > target:
        scale = rng.uniform(*SCALE_RANGE)
        others = rng.random((population, population - 1)).argsort(axis=1)[:, :3]
        a, b, c = (others + (others >= np.arange(population)[:, None])).T   # skip the member itself
        from_best = rng.random(population) < 0.5
        crossed = rng.random((population, dims)) < CROSSOVER
        forced = rng.integers(0, dims, population)[:, None] == np.arange(dims)
        base = np.where(from_best[:, None], members[best], members[a])
        mutant = base + scale * (members[b] - members[c])
        inside = (mutant >= lower) & (mutant <= upper)
        trials = np.where(forced | (crossed & inside), mutant, members)
        trial_values = _values(objective, trials)
        better = trial_values <= values
        members[better], values[better] = trials[better], trial_values[better]
        n_evals, best, g = n_evals + population, int(np.argmin(values)), g + 1
        if progress:
            progress(Generation(g, n_evals, members[best].copy(), float(values[best])))
    status = "target_reached" if values[best] <= target else "max_evals_reached"
    return Evolution(members[best].copy(), float(values[best]), n_evals, g, status)


def _values(objective, points: np.ndarray) -> np.ndarray:
    values = np.asarray(objective(points), dtype=np.float64)
    return np.where(np.isnan(values), np.inf, values)

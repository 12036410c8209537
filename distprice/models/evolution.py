"""Differential evolution (Storn and Price) as in LexiFi's calibrator: a generic minimiser over a box that
evaluates a whole population per call of the objective.

Per generation: one F ~ U(0.5, 1); for member i, three distinct others a, b, c; base = the best member with
probability 1/2, else x_a; mutant = base + F (x_b - x_c); binomial crossover (CR = 0.9) takes a mutant
coordinate only where it lies in the box, except one random coordinate j0 that is always taken (so trials
may leave the box); a trial replaces its member when its value is lower or equal. The best member is the
lowest value, the lowest index on ties. Randomness comes from ``numpy.random.default_rng(seed)``: per
generation F, then one uniform row per member (see :func:`_trials`), so a seed and an objective give one result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numba
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


def evolve(
    objective: Callable[[np.ndarray], np.ndarray],
    lower,
    upper,
    *,
    population: int = 40,
    max_evals: int = 2000,
    seed: int = 0,
    target: float = 0.0,
    progress: Callable[[Generation], None] | None = None,
) -> Evolution:
    """Minimise ``objective`` (a ``(P, D)`` population to ``P`` values, NaN read as +inf) from a population drawn
    uniformly in the box ``[lower, upper]``, until ``max_evals`` evaluations or a value <= ``target``.
    ``progress`` is called after every generation."""
    lower, upper = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
    if population < 4 or max_evals < population:
        raise OptionError(
            f"differential evolution needs population >= 4 and max_evals >= population, got "
            f"population={population}, max_evals={max_evals}"
        )
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
        trials = _trials(members, best, scale, rng.random((population, population + dims + 1)), lower, upper)
        best = _select(members, values, trials, _values(objective, trials))
        n_evals, g = n_evals + population, g + 1
        if progress:
            progress(Generation(g, n_evals, members[best].copy(), float(values[best])))
    status = "target_reached" if values[best] <= target else "max_evals_reached"
    return Evolution(members[best].copy(), float(values[best]), n_evals, g, status)


def _values(objective, points: np.ndarray) -> np.ndarray:
    values = np.asarray(objective(points), dtype=np.float64)
    return np.where(np.isnan(values), np.inf, values)


@numba.njit(cache=True)
def _trials(members, best, scale, draws, lower, upper):
    """The trial of each member from its row of uniforms ``draws[i]``: the first P - 1 rank the other members
    (a, b, c: the three lowest, in order), the next one picks the base (best below 1/2), the next D the
    crossover (below CR), the last j0 = floor(u D)."""
    population, dims = members.shape
    trials = np.empty_like(members)
    for i in range(population):
        row = draws[i]
        a = b = c = -1
        first = second = third = np.inf
        for k in range(population - 1):
            key = row[k]
            if key < third:
                if key < second:
                    c, third = b, second
                    if key < first:
                        b, second, a, first = a, first, k, key
                    else:
                        b, second = k, key
                else:
                    c, third = k, key
        a, b, c = a + (a >= i), b + (b >= i), c + (c >= i)  # skip the member itself
        base = best if row[population - 1] < 0.5 else a
        forced = min(int(row[population + dims] * dims), dims - 1)
        for j in range(dims):
            mutant = members[base, j] + scale * (members[b, j] - members[c, j])
            inside = lower[j] <= mutant <= upper[j]
            take = j == forced or (row[population + j] < CROSSOVER and inside)
            trials[i, j] = mutant if take else members[i, j]
    return trials


@numba.njit(cache=True)
def _select(members, values, trials, trial_values):
    """Greedy replacement in place (a trial takes its member's place when its value is lower or equal); the
    index of the best member (lowest value, lowest index on ties)."""
    best = 0
    for i in range(len(values)):
        if trial_values[i] <= values[i]:
            members[i] = trials[i]
            values[i] = trial_values[i]
        if values[i] < values[best]:
            best = i
    return best

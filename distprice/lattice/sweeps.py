"""Curve bumps and the risk engines' interface: the trees a risk job rolls back and the bumps it rolls them
back under.

A *bump* changes a row's zero curve ``z(t)`` to ``z(t) + dz(t)``, pointwise, with ``dz`` given by its values
on a grid of key times (years of the row's curve): linear between them, flat before the first and after the
last. A parallel shift by s is one knot of value s; key rate k bumped by h is ``h`` at knot k and 0 at the
others (:func:`key_rate_bumps`); the OAS spread and a bump at it add.

Why the fast engines need no new forward pass for a bump (exact, any dz): the displacements alpha_m of a
tree do not depend on the node, so changing them by d_m scales every state price of step m by one factor,
and the fit ``alpha_m = (ln sum_j Q(m, j) exp(-j dr dt) - ln P(0, (m+1) dt)) / dt`` then gives
``exp(-alpha'_m dt) = exp(-alpha_m dt) * r(t_{m+1}) / r(t_m)``, ``r(t) = exp(-dz(t) t)`` (= P'(0, t) / P(0, t)).
An event's forward adjustment ``P'(0, t) / P'(0, tau)`` is the base one times ``r(t) / r(tau)``. A bump is
thus a backward pass with its own ``exp(-alpha dt)`` and event amounts. Where a bump and the first bump of a
call agree on every time from some step up, their backward passes agree there bit for bit: the engine
starts the bump's pass from the first bump's values at that step (:func:`start_steps`), so a key-rate bump
costs the steps below its triangle only. The same scaling makes the bumped state prices of step m the base
ones times ``r(t_m)``: below a row's first exercise its option is only discounted, and its value at the root
is ``r(t_m) sum_j Q(m, j) O(m, j)`` with the base tree's Q, so a pass can stop there. A volatility bump changes
the tree (its rate step dr): new trees, the same events.

A risk engine (reference, CPU, GPU) has two methods:

- ``trees(rows, volatility, dr)``: the trees of batch rows ``rows`` with volatility ``volatility`` and
  rate step ``dr`` (arrays, one per tree; a row may appear with several volatilities); the fast engines run
  the forward passes here, once, and keep their ``exp(-alpha dt)``;
- ``roll(trees, tasks, grid, dz)``: bond and option values at the root (float64 arrays (tasks, bumps)) of
  trees ``tasks`` (positions in ``trees``) under the bumps ``dz`` (tasks, bumps, knots) on ``grid``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numba
import numpy as np

from ..curves import ZeroCurve
from .geometry import PHASES


@dataclass(frozen=True)
class Trees:
    """Trees of a risk job: the batch row of each, its volatility and its rate step ``dr``; an engine keeps
    what it computed for them in ``state`` (its forward passes)."""

    rows: np.ndarray
    volatility: np.ndarray
    dr: np.ndarray
    state: object = None


def key_rate_bumps(keys: int) -> np.ndarray:
    """The unit key-rate bumps b_1 .. b_m on a grid of ``keys`` times, one per row: b_k is 1 at key k and 0 at
    the others, so that it falls linearly to 0 at its neighbours, b_1 is 1 before key 1 and b_m 1 after key
    m; they sum to 1 at every time."""
    return np.eye(keys)


def bump_rate(t, grid: np.ndarray, dz: np.ndarray):
    """``dz(t)``: linear between the ``grid`` times, flat outside."""
    return np.interp(t, grid, dz)


@numba.njit(cache=True, _nrt=False)  # called per step and event: no reference counts (cpu.py)
def knot_interval(t, grid):
    """The knot interval j of time t (``grid[j] < t <= grid[j + 1]``; 0 before the grid, the last one after)."""
    j = 0
    while j < len(grid) - 2 and grid[j + 1] < t:
        j += 1
    return j


@numba.njit(cache=True, _nrt=False)
def exponent_in(t, grid, dz, j):
    """``dz(t) * t`` for t in knot interval j (:func:`knot_interval`), dz linear between the ``grid`` times and
    flat outside (kernels/bumps.cuh likewise): the fast engines' :func:`bump_rate` times t."""
    m = len(grid)
    if t <= grid[0]:
        return dz[0] * t
    if t >= grid[m - 1]:
        return dz[m - 1] * t
    return (dz[j] + (dz[j + 1] - dz[j]) * (t - grid[j]) / (grid[j + 1] - grid[j])) * t


@numba.njit(cache=True, _nrt=False)
def bump_exponent(t, grid, dz):
    """``dz(t) * t`` (:func:`exponent_in`, its interval searched)."""
    return exponent_in(t, grid, dz, knot_interval(t, grid))


@dataclass(frozen=True)
class BumpedCurve:
    """A zero curve bumped pointwise: ``z(t) + dz(t)`` (what the reference engine prices on, literally)."""

    curve: ZeroCurve
    grid: np.ndarray
    dz: np.ndarray

    @property
    def dates(self):
        return self.curve.dates

    @property
    def days_per_year(self) -> int:
        return self.curve.days_per_year

    def at(self, valuation: int) -> BumpedCurve:
        """This curve seen from another valuation date (the grid stays in years from that date)."""
        return dataclasses.replace(self, curve=self.curve.at(valuation))

    def rate(self, t):
        return self.curve.rate(t) + bump_rate(t, self.grid, self.dz)

    def discount(self, t):
        """``P'(0, t) = exp(-(z(t) + dz(t)) t)``."""
        t = np.asarray(t, dtype=np.float64)
        return np.exp(-self.rate(t) * t)


def start_steps(grid: np.ndarray, dz: np.ndarray, dt: np.ndarray, height: np.ndarray, phase: np.ndarray) -> np.ndarray:
    """The step from which each bump's backward pass must run, (tasks, bumps): the tree's height, or a lower
    step above which the bump agrees with the task's first bump at every time (0: it agrees over the whole
    tree), where the engine takes over the first bump's values; ``phase`` each tree's (sixteenths of a step:
    its step s >= 1 lies at ``(s + phase / 16) dt``).

    Bumps that differ at knots k0 .. k1 only agree at every t >= K = K_{k1+1} and every t <= K_{k0-1}. The
    events of step s lie after step s - 1 (a cash flow between two steps is paid in parts at both), so from the
    first step s with ``t_{s-1} >= K``, ``ceil(K / dt - phase / 16) + 1``, every step's rate factors and events
    use only times at or beyond K. A tree whose events and steps all lie before K_{k0-1} (its height plus one
    step) does not see the difference at all.
    """
    differs = dz != dz[:, :1, :]
    m = len(grid)
    any_ = differs.any(axis=2)
    last = np.where(any_, m - 1 - np.argmax(differs[:, :, ::-1], axis=2), -1)
    first = np.where(any_, np.argmax(differs, axis=2), m)
    height = np.asarray(height, dtype=np.int64)[:, None]
    dt = np.asarray(dt, dtype=np.float64)[:, None]
    late = np.asarray(phase, dtype=np.float64)[:, None] / PHASES
    start = np.ceil(grid[np.minimum(last + 1, m - 1)] / dt - late).astype(np.int64) + 1
    start = np.where(last == m - 1, height, np.minimum(start, height))
    unseen = ~any_ | ((first >= 1) & (grid[np.maximum(first - 1, 0)] >= (height + 1) * dt))
    start = np.where(unseen, 0, start)
    start[:, 0] = height[:, 0]
    return start


def cut_steps(batch) -> np.ndarray:
    """The step at which each row's backward passes stop (a Batch's rows): its first exercise, below which the
    option is only discounted and is valued on the tree's state prices there; 0 (the root) for a row with no
    exercise or whose first is at the top of its tree."""
    first = batch.events.first_exercise_step()
    return np.where(first < batch.geometry.height, first, 0)

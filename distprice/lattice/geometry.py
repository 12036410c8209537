"""Hull-White trinomial-tree geometry of a whole portfolio at once (numpy).

Conventions: times in years, ``dt = 1 / steps_per_year``; a time t maps to step ``round(t * spy)`` with halves
rounded up; node ``(i, j)`` has ``|j| <= min(i, jmax)``; width ``2 jmax + 1``; height ``n = max(1, round(T * spy))``
steps for a redemption at T years. A dated row's tree may have a *phase*: its steps s >= 1 lie at ``(s + phase / 16)
dt`` (:func:`~.events.step_time`), so that its exercise dates fall on nodes, its first step lasting ``(1 + phase /
16) dt`` (docs/model/tree.rst); time-form rows have phase 0. ``jmax`` is Hull and White's cut, except for a mean
reversion so low that the cut lies beyond :data:`CUT_LIMIT`: that tree is never cut, ``jmax = n``. The geometry is
computed once, when a portfolio is validated, and travels with its rows.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

JMAX_FACTOR = 0.184
"""Hull and White's choice: ``jmax`` is the smallest integer above ``0.184 / |M|``."""
PHASES = 16
"""A tree's phase counts sixteenths of a step, from ``-PHASES / 2`` to ``PHASES / 2 - 1``."""
CUT_LIMIT = 16384
"""The widest cut (``jmax``) of a tree: a tree whose Hull-White cut lies beyond it (a mean reversion below about
``0.184 steps_per_year / 16384``, down to 0) is not cut at all but fans out to its last step, ``jmax = height``
(no node beyond ``|j| = height`` is ever reached, so this changes no price: the tree is the one it would be with
any cut above its height, and it is QuantLib's tree, which is never cut). Validation refuses such a tree taller
than its limit of width allows."""


def to_step(t, steps_per_year):
    """The tree step of time ``t`` (years): ``round(t * spy)``, halves up, as int64 (a time validation refuses,
    NaN or 1e308, gives some int64 without a warning)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.floor(np.asarray(t, dtype=np.float64) * steps_per_year + 0.5).astype(np.int64)


def tree_height(maturity, steps_per_year):
    """The height of a tree whose redemption is ``maturity`` years away: ``max(1, round(T * spy))`` steps."""
    return np.maximum(to_step(maturity, steps_per_year), 1)


@dataclass(frozen=True)
class TreeGeometry:
    """Per-instrument tree shape: ``dt`` (years), ``dr`` (rate step), ``M``, ``jmax``, ``width``, ``height``,
    ``phase`` (sixteenths of a step by which the steps s >= 1 lie late, from -8 to 7) and ``root`` (the variance
    of the first step, ``(1 + phase / 16) dt`` long, over a step's: the root branches ``root / 6``,
    ``1 - root / 3``, ``root / 6``)."""

    dt: np.ndarray
    dr: np.ndarray
    M: np.ndarray
    jmax: np.ndarray
    width: np.ndarray
    height: np.ndarray
    phase: np.ndarray
    root: np.ndarray

    @property
    def node_steps(self) -> np.ndarray:
        """:func:`node_steps` of each tree."""
        return node_steps(self.width, self.height)

    def with_dr(self, dr) -> TreeGeometry:
        """The same trees with rate steps ``dr`` (other volatilities, which change nothing else of a tree)."""
        return dataclasses.replace(self, dr=np.asarray(dr, dtype=np.float64))

    def take(self, positions) -> TreeGeometry:
        """The geometry of the trees at ``positions`` (an index array or a boolean mask; consecutive positions:
        views)."""
        positions = consecutive(positions)
        return TreeGeometry(**{f.name: np.asarray(getattr(self, f.name))[positions] for f in dataclasses.fields(self)})


def node_steps(width, height) -> np.ndarray:
    """Node-steps of trees of ``width`` and ``height`` (arrays or scalars): a forward and a backward pass over
    the full rectangle, ``2 width height`` per tree, as float64 (whole numbers: their sums are exact below
    2**53)."""
    return 2.0 * np.asarray(width, dtype=np.float64) * np.asarray(height, dtype=np.float64)


def consecutive(positions):
    """``positions`` (an index array) as a slice when they are consecutive and increasing (taking them then
    makes views, not copies); anything else as it is."""
    if (
        isinstance(positions, np.ndarray)
        and positions.dtype.kind in "iu"
        and positions.ndim == 1
        and len(positions)
        and positions[-1] - positions[0] == len(positions) - 1
        and (len(positions) < 2 or (np.diff(positions) == 1).all())
    ):
        return slice(int(positions[0]), int(positions[-1]) + 1)
    return positions


def tree_geometry(mean_reversion, volatility, maturity, steps_per_year, height=None, phase=0) -> TreeGeometry:
    """Geometry of the Hull-White tree of each instrument (Hull and White 1994) whose redemption is ``maturity``
    years away, or ``height`` steps where given (a dated row's, counted in days), of ``phase`` (a dated row's);
    arguments are arrays or scalars, ``mean_reversion`` > 0.

    The step's variance ``sigma^2 (1 - exp(-2 a dt)) / (2 a)`` and ``M = exp(-a dt) - 1`` are computed with
    ``expm1``, exact to rounding however small ``a dt`` is (the variance tends to ``sigma^2 dt``, Ho-Lee's)."""
    a = np.asarray(mean_reversion, dtype=np.float64)
    sigma = np.asarray(volatility, dtype=np.float64)
    spy = np.asarray(steps_per_year, dtype=np.float64)
    dt = 1.0 / spy
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # a or sigma of 1e308 (refused): no warning
        x = 2.0 * a * dt
        variance = sigma**2 * dt * np.where(x > 0, -np.expm1(-x) / x, 1.0)
        M = np.expm1(-a * dt)
        cut = np.ceil(np.where(M < 0, -JMAX_FACTOR / M, np.inf))
    dr = np.sqrt(3.0 * variance)
    height = tree_height(maturity, spy) if height is None else np.asarray(height, dtype=np.int64)
    jmax = np.where(cut <= CUT_LIMIT, cut, height).astype(np.int64)
    phase = np.broadcast_to(np.asarray(phase, dtype=np.int64), np.shape(jmax))
    return TreeGeometry(
        dt=dt, dr=dr, M=M, jmax=jmax, width=2 * jmax + 1, height=height, phase=phase, root=root_variance(a, dt, phase)
    )


def root_variance(mean_reversion, dt, phase) -> np.ndarray:
    """The variance of a first step ``h = (1 + phase / 16) dt`` long over that of a step dt long,
    ``(1 - exp(-2 a h)) / (1 - exp(-2 a dt))`` (``h / dt`` as a tends to 0); exactly 1 at phase 0."""
    a = np.asarray(mean_reversion, dtype=np.float64)
    h = (PHASES + np.asarray(phase, dtype=np.int64)) * np.asarray(dt, dtype=np.float64) / PHASES
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        ratio = np.where(a * dt > 0, np.expm1(-2.0 * a * h) / np.expm1(-2.0 * a * dt), h / dt)
    return np.where(np.asarray(phase) == 0, 1.0, ratio)


def branching(jmax: int, M: float):
    """Branching probabilities ``pu, pm, pd`` of nodes ``j = -jmax..jmax`` (index ``j + jmax``).

    Interior nodes branch to ``j+1, j, j-1``; the top node ``jmax`` to ``j, j-1, j-2``; the bottom node
    ``-jmax`` to ``j+2, j+1, j`` (the first probability always goes to the highest target).
    """
    x = np.arange(-jmax, jmax + 1, dtype=np.float64) * M
    pu = 1.0 / 6.0 + (x * x + x) / 2.0
    pm = 2.0 / 3.0 - x * x
    pd = 1.0 / 6.0 + (x * x - x) / 2.0
    top, bottom = x[-1], x[0]
    pu[-1], pm[-1], pd[-1] = (
        7.0 / 6.0 + (top * top + 3.0 * top) / 2.0,
        -1.0 / 3.0 - top * top - 2.0 * top,
        1.0 / 6.0 + (top * top + top) / 2.0,
    )
    pu[0], pm[0], pd[0] = (
        1.0 / 6.0 + (bottom * bottom - bottom) / 2.0,
        -1.0 / 3.0 - bottom * bottom + 2.0 * bottom,
        7.0 / 6.0 + (bottom * bottom - 3.0 * bottom) / 2.0,
    )
    return pu, pm, pd

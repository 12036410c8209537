"""Hull-White trinomial-tree geometry and event schedules, vectorised over a whole portfolio (SPEC §2–§3).

Conventions: times in years, ``dt = 1 / steps_per_year``; a time t maps to step ``round(t * spy)`` with
halves rounded up; node ``(i, j)`` has ``|j| <= min(i, jmax)``; width ``2 jmax + 1``; height ``n`` steps.
Event schedules come as CSR tables (``offsets`` of length rows + 1), events of a row in decreasing step
order, which is the order the backward pass meets them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

JMAX_FACTOR = 0.184
"""Hull and White's choice: ``jmax`` is the smallest integer above ``0.184 / |M|``."""

_SCHEDULE_EPS = 1e-9
"""Tolerance, in periods of a schedule, when deciding whether a time falls on the schedule."""


def to_step(t, steps_per_year):
    """The tree step of time ``t`` (years): ``round(t * spy)``, halves up, as int64."""
    return np.floor(np.asarray(t, dtype=np.float64) * steps_per_year + 0.5).astype(np.int64)


@dataclass(frozen=True)
class TreeGeometry:
    """Per-instrument tree shape: ``dt`` (years), ``dr`` (rate step), ``M``, ``jmax``, ``width``, ``height``."""

    dt: np.ndarray
    dr: np.ndarray
    M: np.ndarray
    jmax: np.ndarray
    width: np.ndarray
    height: np.ndarray

    @property
    def node_steps(self) -> np.ndarray:
        """Node-steps of each tree: forward plus backward over the full rectangle, ``2 * width * height``."""
        return 2 * self.width * self.height


def tree_geometry(mean_reversion, volatility, maturity, steps_per_year) -> TreeGeometry:
    """Geometry of the Hull-White tree of each instrument (SPEC §2); arguments are arrays or scalars."""
    a = np.asarray(mean_reversion, dtype=np.float64)
    sigma = np.asarray(volatility, dtype=np.float64)
    spy = np.asarray(steps_per_year, dtype=np.float64)
    dt = 1.0 / spy
    variance = sigma**2 * (1.0 - np.exp(-2.0 * a * dt)) / (2.0 * a)
    dr = np.sqrt(3.0 * variance)
    M = np.exp(-a * dt) - 1.0
    jmax = np.ceil(-JMAX_FACTOR / M).astype(np.int64)
    height = to_step(maturity, spy)
    return TreeGeometry(dt=dt, dr=dr, M=M, jmax=jmax, width=2 * jmax + 1, height=height)


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
    pu[-1], pm[-1], pd[-1] = (7.0 / 6.0 + (top * top + 3.0 * top) / 2.0, -1.0 / 3.0 - top * top - 2.0 * top,
                              1.0 / 6.0 + (top * top + top) / 2.0)
    pu[0], pm[0], pd[0] = (1.0 / 6.0 + (bottom * bottom - bottom) / 2.0, -1.0 / 3.0 - bottom * bottom + 2.0 * bottom,
                           7.0 / 6.0 + (bottom * bottom - 3.0 * bottom) / 2.0)
    return pu, pm, pd


@dataclass(frozen=True)
class EventTable:
    """Events of every row in CSR form: row r owns ``step[offsets[r]:offsets[r+1]]`` and the same ``value``."""

    offsets: np.ndarray
    step: np.ndarray
    value: np.ndarray

    def row(self, r: int):
        """The (step, value) arrays of row ``r``."""
        lo, hi = self.offsets[r], self.offsets[r + 1]
        return self.step[lo:hi], self.value[lo:hi]


def _expand(counts: np.ndarray):
    """Row index and 0-based rank within the row of each of ``counts.sum()`` items, plus CSR offsets."""
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    rows = np.repeat(np.arange(len(counts)), counts)
    rank = np.arange(offsets[-1], dtype=np.int64) - offsets[rows]
    return rows, rank, offsets


def _compact(rows: np.ndarray, keep: np.ndarray, n_rows: int, step: np.ndarray, value: np.ndarray) -> EventTable:
    offsets = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows[keep], minlength=n_rows), out=offsets[1:])
    return EventTable(offsets, step[keep], value[keep])


def _periods_before(span, frequency):
    """Number of whole schedule periods ``k`` with ``k / frequency < span`` (tolerant to rounding)."""
    return np.maximum(np.ceil(span * frequency - _SCHEDULE_EPS), 0).astype(np.int64)


def accrued(t, maturity, coupon, coupon_frequency, face):
    """Accrued interest at time ``t``: ``face * coupon * (t - t_prev)`` (SPEC §3.3).

    ``t_prev`` is the latest time ``<= t`` of the regular schedule ``maturity - k / coupon_frequency``
    (which runs back before today); zero on a coupon date and for zero-coupon bonds.
    """
    t, maturity, coupon, face = (np.asarray(v, dtype=np.float64) for v in (t, maturity, coupon, face))
    frequency = np.asarray(coupon_frequency, dtype=np.float64)
    paying = (coupon > 0) & (frequency > 0)
    safe_frequency = np.where(paying, frequency, 1.0)
    k = np.ceil((maturity - t) * safe_frequency - _SCHEDULE_EPS)
    t_prev = maturity - k / safe_frequency
    return np.where(paying, face * coupon * np.maximum(t - t_prev, 0.0), 0.0)


def coupon_events(maturity, coupon, coupon_frequency, face, steps_per_year) -> EventTable:
    """Coupons per row: times ``maturity - k / f`` (> 0) mapped to steps ≥ 1, amount ``face * coupon / f``."""
    maturity = np.asarray(maturity, dtype=np.float64)
    frequency = np.asarray(coupon_frequency, dtype=np.int64)
    paying = (np.asarray(coupon) > 0) & (frequency > 0)
    counts = np.where(paying, _periods_before(maturity, np.where(paying, frequency, 1)), 0)
    rows, k, _ = _expand(counts)
    t = maturity[rows] - k / frequency[rows]
    step = to_step(t, np.asarray(steps_per_year)[rows])
    amount = (np.asarray(face, dtype=np.float64) * np.asarray(coupon, dtype=np.float64) / np.maximum(frequency, 1))[rows]
    return _compact(rows, step >= 1, len(maturity), step, amount)


EUROPEAN, BERMUDAN, AMERICAN = 0, 1, 2
EXERCISE_CODES = {"european": EUROPEAN, "bermudan": BERMUDAN, "american": AMERICAN}


def exercise_events(exercise_code, expiry, first_exercise, exercise_frequency, strike,
                    maturity, coupon, coupon_frequency, face, steps_per_year) -> EventTable:
    """Exercise steps per row (steps ≥ 1) with the exercise amount ``K = strike + accrued(t)`` (SPEC §3.3).

    european: ``expiry``; bermudan: ``expiry - k / exercise_frequency`` while ``>= first_exercise`` and
    ``> 0``; american: every step from ``max(1, round(first_exercise * spy))`` to ``round(expiry * spy)``.
    """
    code = np.asarray(exercise_code)
    expiry = np.asarray(expiry, dtype=np.float64)
    first = np.asarray(first_exercise, dtype=np.float64)
    spy = np.asarray(steps_per_year, dtype=np.int64)
    ex_frequency = np.asarray(exercise_frequency, dtype=np.int64)
    last_step = to_step(expiry, spy)
    first_american = np.maximum(1, to_step(first, spy))
    # k = 0, 1, ... while expiry - k / f >= first_exercise
    bermudan_counts = np.floor(np.maximum(expiry - first, 0.0) * ex_frequency + _SCHEDULE_EPS).astype(np.int64) + 1
    counts = np.select([code == EUROPEAN, code == BERMUDAN],
                       [np.ones_like(last_step), bermudan_counts],
                       np.maximum(last_step - first_american + 1, 0))
    rows, k, _ = _expand(counts)
    c = code[rows]
    t = np.where(c == AMERICAN, (last_step[rows] - k) / spy[rows], expiry[rows] - k / ex_frequency[rows])
    step = np.where(c == AMERICAN, last_step[rows] - k, to_step(t, spy[rows]))
    keep = (step >= 1) & (t > 0)  # no event at or before today
    amount = np.asarray(strike, dtype=np.float64)[rows] + accrued(
        t, np.asarray(maturity)[rows], np.asarray(coupon)[rows], np.asarray(coupon_frequency)[rows],
        np.asarray(face)[rows])
    return _compact(rows, keep, len(expiry), step, amount)

"""Hull-White trinomial-tree geometry and event schedules of a whole portfolio at once (SPEC §2–§3): the
geometry in numpy, the schedules in numba loops over rows (two passes: count the events, then fill them).

Conventions: times in years, ``dt = 1 / steps_per_year``; a time t maps to step ``round(t * spy)`` with
halves rounded up; node ``(i, j)`` has ``|j| <= min(i, jmax)``; width ``2 jmax + 1``; height ``n`` steps.
Event schedules come as CSR tables (``offsets`` of length rows + 1), events of a row in decreasing step
order, which is the order the backward pass meets them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numba
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


@numba.vectorize(["float64(float64, float64, float64, float64, float64)"], cache=True)
def accrued(t, maturity, coupon, coupon_frequency, face):
    """Accrued interest at time ``t``: ``face * coupon * (t - t_prev)`` (SPEC §3.3); a ufunc.

    ``t_prev`` is the latest time ``<= t`` of the regular schedule ``maturity - k / coupon_frequency``
    (which runs back before today); zero on a coupon date and for zero-coupon bonds.
    """
    if coupon <= 0.0 or coupon_frequency <= 0.0:
        return 0.0
    k = math.ceil((maturity - t) * coupon_frequency - _SCHEDULE_EPS)
    t_prev = maturity - k / coupon_frequency
    return face * coupon * max(t - t_prev, 0.0)


@numba.njit(cache=True)
def _step_of(t, spy):
    """``round(t * spy)``, halves up (as :func:`to_step`, for one time)."""
    return np.int64(math.floor(t * spy + 0.5))


@numba.njit(cache=True)
def _coupon_count(maturity, frequency):
    """Coupon times ``maturity - k / f`` that are > 0 (tolerant to rounding): k = 0 .. count - 1."""
    return max(np.int64(math.ceil(maturity * frequency - _SCHEDULE_EPS)), 0)


@numba.njit(cache=True, nogil=True)
def _coupon_table(maturity, coupon, frequency, face, spy):
    n = len(maturity)
    offsets = np.zeros(n + 1, dtype=np.int64)
    for r in range(n):
        kept = 0
        if coupon[r] > 0 and frequency[r] > 0:
            for k in range(_coupon_count(maturity[r], frequency[r])):
                if _step_of(maturity[r] - k / frequency[r], spy[r]) >= 1:
                    kept += 1
        offsets[r + 1] = offsets[r] + kept
    step = np.empty(offsets[n], dtype=np.int64)
    value = np.empty(offsets[n], dtype=np.float64)
    for r in range(n):
        e = offsets[r]
        if e == offsets[r + 1]:
            continue
        amount = face[r] * coupon[r] / frequency[r]
        for k in range(_coupon_count(maturity[r], frequency[r])):
            s = _step_of(maturity[r] - k / frequency[r], spy[r])
            if s >= 1:
                step[e], value[e] = s, amount
                e += 1
    return offsets, step, value


def coupon_events(maturity, coupon, coupon_frequency, face, steps_per_year) -> EventTable:
    """Coupons per row: times ``maturity - k / f`` (> 0) mapped to steps ≥ 1, amount ``face * coupon / f``."""
    maturity, coupon, face = (np.ascontiguousarray(v, dtype=np.float64) for v in (maturity, coupon, face))
    frequency, spy = (np.ascontiguousarray(v, dtype=np.int64) for v in (coupon_frequency, steps_per_year))
    return EventTable(*_coupon_table(maturity, coupon, frequency, face, spy))


EUROPEAN, BERMUDAN, AMERICAN = 0, 1, 2
EXERCISE_CODES = {"european": EUROPEAN, "bermudan": BERMUDAN, "american": AMERICAN}


@numba.njit(cache=True)
def _exercise_at(code, k, last_step, expiry, ex_frequency, spy):
    """Time and step of a row's k-th exercise date counted back from expiry."""
    if code == AMERICAN:
        return (last_step - k) / spy, last_step - k
    t = expiry - k / ex_frequency
    return t, _step_of(t, spy)


@numba.njit(cache=True)
def _exercise_count(code, last_step, expiry, first, ex_frequency, spy):
    """Exercise dates of a row before dropping those at or before today: k = 0 .. count - 1."""
    if code == EUROPEAN:
        return 1
    if code == BERMUDAN:  # k = 0, 1, ... while expiry - k / f >= first_exercise
        return np.int64(math.floor(max(expiry - first, 0.0) * ex_frequency + _SCHEDULE_EPS)) + 1
    return max(last_step - max(1, _step_of(first, spy)) + 1, 0)


@numba.njit(cache=True, nogil=True)
def _exercise_table(code, expiry, first, ex_frequency, strike, maturity, coupon, coupon_frequency, face, spy):
    n = len(expiry)
    offsets = np.zeros(n + 1, dtype=np.int64)
    for r in range(n):
        last_step = _step_of(expiry[r], spy[r])
        kept = 0
        for k in range(_exercise_count(code[r], last_step, expiry[r], first[r], ex_frequency[r], spy[r])):
            t, s = _exercise_at(code[r], k, last_step, expiry[r], ex_frequency[r], spy[r])
            if s >= 1 and t > 0:  # no event at or before today
                kept += 1
        offsets[r + 1] = offsets[r] + kept
    step = np.empty(offsets[n], dtype=np.int64)
    value = np.empty(offsets[n], dtype=np.float64)
    for r in range(n):
        last_step = _step_of(expiry[r], spy[r])
        e = offsets[r]
        for k in range(_exercise_count(code[r], last_step, expiry[r], first[r], ex_frequency[r], spy[r])):
            t, s = _exercise_at(code[r], k, last_step, expiry[r], ex_frequency[r], spy[r])
            if s >= 1 and t > 0:
                step[e] = s
                value[e] = strike[r] + accrued(t, maturity[r], coupon[r], coupon_frequency[r], face[r])
                e += 1
    return offsets, step, value


def exercise_events(exercise_code, expiry, first_exercise, exercise_frequency, strike,
                    maturity, coupon, coupon_frequency, face, steps_per_year) -> EventTable:
    """Exercise steps per row (steps ≥ 1) with the exercise amount ``K = strike + accrued(t)`` (SPEC §3.3).

    european: ``expiry``; bermudan: ``expiry - k / exercise_frequency`` while ``>= first_exercise`` and
    ``> 0``; american: every step from ``max(1, round(first_exercise * spy))`` to ``round(expiry * spy)``.
    """
    floats = (np.ascontiguousarray(v, dtype=np.float64)
              for v in (expiry, first_exercise, strike, maturity, coupon, coupon_frequency, face))
    expiry, first, strike, maturity, coupon, coupon_frequency, face = floats
    code, ex_frequency, spy = (np.ascontiguousarray(v, dtype=np.int64)
                               for v in (exercise_code, exercise_frequency, steps_per_year))
    return EventTable(*_exercise_table(code, expiry, first, ex_frequency, strike, maturity, coupon,
                                       coupon_frequency, face, spy))

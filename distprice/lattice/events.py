"""Coupon and exercise events of a whole portfolio at once, mapped to tree steps (numba loops over rows, two
passes: count the events, then fill them).

Times are in years; a time t maps to step ``round(t * spy)``, halves up (:func:`~.geometry.to_step`).
Event tables are CSR (``offsets`` of length rows + 1), a row's events in decreasing step order, which is the
order the backward pass meets them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

_SCHEDULE_EPS = 1e-9
"""Tolerance, in periods of a schedule, when deciding whether a time falls on the schedule."""


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
    """Accrued interest at time ``t``: ``face * coupon * (t - t_prev)``; a ufunc.

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
    """Exercise steps per row (steps ≥ 1) with the exercise amount ``K = strike + accrued(t)``.

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

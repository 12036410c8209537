"""The events of a whole portfolio at once, mapped to tree steps: each row's redemption, coupons and exercises,
as one table in the order the backward pass applies them (numba loops over rows, two passes: count the
events, then fill them; blocks of rows on several threads).

An event has a time t (years of the row's tree, t > 0), a kind and an amount: the redemption and each coupon
pay their cash flow, an exercise is worth ``payoff(bond, amount)`` (its amount includes the accrued interest
at its own time). It is applied at step ``s = max(1, round(t * spy))`` (halves up); the tree's height is
``n = max(1, round(T * spy))``, T the time of the redemption. Within a step, events come in decreasing time;
at equal times the redemption first, then the exercises, then the coupons. An engine applies an amount A due
at t at step s as ``A * P(0, t) / P(0, tau_s)`` (the forward adjustment), ``tau_s`` the step's time
(:func:`step_time`: ``s * dt``, or ``(s + phase / 16) dt`` on a dated tree of a phase): exactly A when the event
lies on the tree's grid, where its time is stored as ``tau_s`` itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from ..dates.parallel import over_rows
from .geometry import PHASES, consecutive

_SCHEDULE_EPS = 1e-9
"""Tolerance, in periods of a schedule, when deciding whether a time falls on the schedule."""
GRID_EPS = 1e-9
"""Tolerance, in tree steps, within which a time-form event is taken to lie on the tree's grid."""
SAME_TIME = 1e-9
"""Time-form event times closer than this (years) are the same time (their schedules' arithmetic differs)."""

REDEMPTION, EXERCISE, COUPON = 0, 1, 2
"""Kinds of events, in the order they are applied at equal times."""
CALL, PUT = 3, 4
"""The exercises of a bond with both rights (a callable_puttable_bond), whose option is the holder's rights net
(puts less calls, either sign) and whose price is bond plus option: at an issuer's ``CALL`` the option becomes
``min(option, amount - bond)``, at a holder's ``PUT`` ``max(option, amount - bond)`` (the holder's value
capped at the call price, floored at the put price). Applied where exercises are; a date with both applies
the put, priced at or below the call, and the call: either order gives the same."""


@numba.njit(cache=True, inline="always")
def is_exercise(kind) -> bool:
    """Whether an event of ``kind`` is an exercise (EXERCISE, CALL or PUT)."""
    return kind == EXERCISE or kind == CALL or kind == PUT


EUROPEAN, BERMUDAN, AMERICAN = 0, 1, 2
EXERCISE_CODES = {"european": EUROPEAN, "bermudan": BERMUDAN, "american": AMERICAN}
# The row and event kernels below run without numba's runtime (``_nrt=False``): no reference counting of the
# arrays they pass on, per row and per event (see cpu.py); they allocate nothing and return no array.


@dataclass(frozen=True)
class EventTable:
    """Every row's events in CSR form, in the order the backward pass applies them: row r owns
    ``step[offsets[r]:offsets[r+1]]`` and the same slices of ``time``, ``kind`` and ``amount``."""

    offsets: np.ndarray
    step: np.ndarray
    time: np.ndarray
    kind: np.ndarray
    amount: np.ndarray

    def row(self, r: int):
        """The (step, time, kind, amount) arrays of row ``r``."""
        lo, hi = self.offsets[r], self.offsets[r + 1]
        return self.step[lo:hi], self.time[lo:hi], self.kind[lo:hi], self.amount[lo:hi]

    def take(self, positions) -> EventTable:
        """The events of the rows at ``positions`` (an index array), renumbered from 0; all rows in order: this
        table itself; consecutive rows: views of its arrays."""
        positions = np.asarray(positions, dtype=np.int64)
        if len(positions) == len(self.offsets) - 1 and np.array_equal(positions, np.arange(len(positions))):
            return self
        span = consecutive(positions)
        if isinstance(span, slice):
            lo, hi = self.offsets[span.start], self.offsets[span.stop]
            return EventTable(
                self.offsets[span.start : span.stop + 1] - lo,
                self.step[lo:hi],
                self.time[lo:hi],
                self.kind[lo:hi],
                self.amount[lo:hi],
            )
        counts = np.diff(self.offsets)[positions]
        offsets = np.zeros(len(positions) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        origin = np.repeat(self.offsets[:-1][positions] - offsets[:-1], counts) + np.arange(offsets[-1])
        return EventTable(offsets, self.step[origin], self.time[origin], self.kind[origin], self.amount[origin])

    @classmethod
    def combine(cls, rows: int, parts) -> EventTable:
        """One table of ``rows`` rows from ``parts``, pairs ``(positions, table)``: each table holds the events
        of the rows at its positions (rows that no part covers have none; one part of every row in order: its
        table itself)."""
        if len(parts) == 1 and len(parts[0][0]) == rows and np.array_equal(parts[0][0], np.arange(rows)):
            return parts[0][1]
        counts = np.zeros(rows, dtype=np.int64)
        for positions, table in parts:
            counts[positions] = np.diff(table.offsets)
        offsets = np.zeros(rows + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        columns = {
            name: np.empty(offsets[-1], dtype=dtype)
            for name, dtype in (("step", np.int64), ("time", np.float64), ("kind", np.uint8), ("amount", np.float64))
        }
        for positions, table in parts:
            sizes = np.diff(table.offsets)
            target = np.repeat(offsets[positions] - table.offsets[:-1], sizes) + np.arange(table.offsets[-1])
            for name, column in columns.items():
                column[target] = getattr(table, name)
        return cls(offsets, **columns)

    def last_exercise_step(self) -> np.ndarray:
        """The step of each row's last exercise (0 for a row without one): above it an option is worth
        nothing."""
        return self._exercise_steps(True)

    def first_exercise_step(self) -> np.ndarray:
        """The step of each row's first exercise (0 for a row without one): below it an option is only
        discounted."""
        return self._exercise_steps(False)

    def _exercise_steps(self, last: bool) -> np.ndarray:
        out = np.zeros(len(self.offsets) - 1, dtype=np.int64)
        over_rows(_exercise_step, len(out), self.offsets, self.step, self.kind, last, out)
        return out


@numba.njit(cache=True, nogil=True)
def _exercise_step(lo, hi, offsets, step, kind, last, out):
    """Per row of ``lo .. hi``, the step of its last (``last``) or first exercise into ``out`` (0 without one: a
    row's events come in decreasing steps)."""
    for r in range(lo, hi):
        if last:
            for e in range(offsets[r], offsets[r + 1]):
                if is_exercise(kind[e]):
                    out[r] = step[e]
                    break
        else:
            for e in range(offsets[r + 1] - 1, offsets[r] - 1, -1):
                if is_exercise(kind[e]):
                    out[r] = step[e]
                    break


@numba.njit(cache=True, nogil=True, _nrt=False)
def _accrued(t, maturity, coupon, coupon_frequency, face):
    if coupon <= 0.0 or coupon_frequency <= 0.0:
        return 0.0
    k = math.ceil((maturity - t) * coupon_frequency - _SCHEDULE_EPS)
    t_prev = maturity - k / coupon_frequency
    return face * coupon * max(t - t_prev, 0.0)


@numba.vectorize(["float64(float64, float64, float64, float64, float64)"], cache=True)
def accrued(t, maturity, coupon, coupon_frequency, face):
    """Accrued interest at time ``t``: ``face * coupon * (t - t_prev)``; a ufunc.

    ``t_prev`` is the latest time ``<= t`` of the regular schedule ``maturity - k / coupon_frequency``
    (which runs back before today); zero on a coupon date and for zero-coupon bonds.
    """
    return _accrued(t, maturity, coupon, coupon_frequency, face)


@numba.njit(cache=True, inline="always", _nrt=False)
def step_time(s, dt, phase):
    """The time of step s of a tree of step ``dt`` and ``phase``, ``(16 s + phase) dt / 16`` years for s >= 1
    (one rounding: the division is exact), 0 at the root; ``s * dt`` itself at phase 0. The engines and the
    event tables all use it, so that an event on the grid is at its step's time to the bit."""
    return (PHASES * s + phase) * dt / PHASES if s > 0 else 0.0


@numba.njit(cache=True, _nrt=False)
def time_step(t, spy):
    """The step of a time-form event at ``t`` years: ``max(1, round(t * spy))``, halves up."""
    return max(np.int64(1), np.int64(math.floor(t * spy + 0.5)))


@numba.njit(cache=True, _nrt=False)
def _on_grid(t, s, spy):
    """The time an engine sees: ``s * dt`` itself when ``t`` lies on step s of the grid, else ``t``."""
    dt = 1.0 / spy
    return s * dt if abs(t * spy - s) <= GRID_EPS else t


@numba.njit(cache=True, _nrt=False)
def _coupon_time(r, k, maturity, frequency):
    return maturity[r] - k / frequency[r]


@numba.njit(cache=True, _nrt=False)
def _coupon_count(maturity, frequency):
    """Coupon times ``maturity - k / f`` that are > 0 (tolerant to rounding): k = 0 .. count - 1."""
    return max(np.int64(math.ceil(maturity * frequency - _SCHEDULE_EPS)), 0)


@numba.njit(cache=True, _nrt=False)
def _exercise_count(code, expiry, first, ex_frequency, spy):
    """Exercise dates of a row (all at times > 0): k = 0 .. count - 1, latest first."""
    if code == EUROPEAN:
        return 1
    if code == BERMUDAN:  # k = 0, 1, ... while expiry - k / f >= first_exercise and > 0
        count = np.int64(math.floor(max(expiry - first, 0.0) * ex_frequency + _SCHEDULE_EPS)) + 1
        return min(count, _coupon_count(expiry, ex_frequency))
    return max(time_step(expiry, spy) - max(1, np.int64(math.floor(first * spy + 0.5))) + 1, 0)


@numba.njit(cache=True, _nrt=False)
def _exercise_time(code, k, expiry, ex_frequency, spy):
    """Time of a row's k-th exercise date counted back from expiry (american: a step's time)."""
    if code == AMERICAN:
        return (time_step(expiry, spy) - k) / spy
    return expiry - k / ex_frequency


@numba.njit(cache=True, nogil=True, _nrt=False)
def _row_sizes(r, code, expiry, first, ex_frequency, maturity, coupon, frequency, spy, has_option):
    """Coupons and exercise dates of row r."""
    coupons = _coupon_count(maturity[r], frequency[r]) if coupon[r] > 0 and frequency[r] > 0 else 0
    exercises = _exercise_count(code[r], expiry[r], first[r], ex_frequency[r], spy[r]) if has_option[r] else 0
    return coupons, exercises


@numba.njit(cache=True, nogil=True, _nrt=False)
def _time_form_counts(lo, hi, code, expiry, first, ex_frequency, maturity, coupon, frequency, spy, has_option, counts):
    for r in range(lo, hi):
        coupons, exercises = _row_sizes(
            r, code, expiry, first, ex_frequency, maturity, coupon, frequency, spy, has_option
        )
        counts[r] = 1 + coupons + exercises


@numba.njit(cache=True, nogil=True, _nrt=False)
def _time_form_fill(
    lo,
    hi,
    code,
    expiry,
    first,
    ex_frequency,
    strike,
    maturity,
    coupon,
    frequency,
    face,
    spy,
    has_option,
    offsets,
    step,
    time,
    kind,
    amount,
):
    for r in range(lo, hi):
        coupons, exercises = _row_sizes(
            r, code, expiry, first, ex_frequency, maturity, coupon, frequency, spy, has_option
        )
        pay = face[r] * coupon[r] / frequency[r] if coupons else 0.0
        # merge the three lists, each latest first: redemption, exercises, coupons at equal times
        c, x, redeemed = 0, 0, False
        tc = _coupon_time(r, c, maturity, frequency) if c < coupons else -1.0
        tx = _exercise_time(code[r], x, expiry[r], ex_frequency[r], spy[r]) if x < exercises else -1.0
        for e in range(offsets[r], offsets[r + 1]):
            if not redeemed and maturity[r] >= max(tc, tx) - SAME_TIME:
                t, kind[e], amount[e] = maturity[r], REDEMPTION, face[r]
                redeemed = True
            elif x < exercises and tx >= tc - SAME_TIME:
                t, kind[e] = tx, EXERCISE
                amount[e] = strike[r] + _accrued(tx, maturity[r], coupon[r], frequency[r], face[r])
                x += 1
                tx = _exercise_time(code[r], x, expiry[r], ex_frequency[r], spy[r]) if x < exercises else -1.0
            else:
                t, kind[e], amount[e] = tc, COUPON, pay
                c += 1
                tc = _coupon_time(r, c, maturity, frequency) if c < coupons else -1.0
            step[e] = time_step(t, spy[r])
            time[e] = _on_grid(t, step[e], spy[r])


def time_form_events(
    exercise_code,
    expiry,
    first_exercise,
    exercise_frequency,
    strike,
    maturity,
    coupon,
    coupon_frequency,
    face,
    steps_per_year,
    has_option,
) -> EventTable:
    """The events of time-form rows (times in years from today).

    Redemption ``face`` at ``maturity``; coupons ``face * coupon / f`` at ``maturity - k / f`` while > 0; for
    rows ``has_option``, exercises worth ``strike + accrued(t)`` at t: european ``expiry``; bermudan
    ``expiry - k / exercise_frequency`` while ``>= first_exercise`` and > 0; american the time of every step
    from ``max(1, round(first_exercise * spy))`` to ``max(1, round(expiry * spy))``.
    """
    floats = (
        np.ascontiguousarray(v, dtype=np.float64) for v in (expiry, first_exercise, strike, maturity, coupon, face)
    )
    expiry, first, strike, maturity, coupon, face = floats
    code, ex_frequency, frequency, spy = (
        np.ascontiguousarray(v, dtype=np.int64)
        for v in (exercise_code, exercise_frequency, coupon_frequency, steps_per_year)
    )
    has_option = np.ascontiguousarray(has_option, dtype=np.bool_)
    n = len(maturity)
    counts = np.empty(n, dtype=np.int64)
    over_rows(
        _time_form_counts, n, code, expiry, first, ex_frequency, maturity, coupon, frequency, spy, has_option, counts
    )
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    m = offsets[-1]
    table = EventTable(
        offsets, np.empty(m, np.int64), np.empty(m, np.float64), np.empty(m, np.uint8), np.empty(m, np.float64)
    )
    over_rows(
        _time_form_fill,
        n,
        code,
        expiry,
        first,
        ex_frequency,
        strike,
        maturity,
        coupon,
        frequency,
        face,
        spy,
        has_option,
        offsets,
        table.step,
        table.time,
        table.kind,
        table.amount,
    )
    return table

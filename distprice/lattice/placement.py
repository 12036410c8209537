"""Cash flows between two tree steps, shared by both: how a dated row's redemption and coupons reach a tree
whose steps are not on their dates (docs/model/events.rst).

A cash flow A due at t between the times of steps s0 and s0 + 1 (s0 >= 1; :func:`~.events.step_time`, which a
tree's phase shifts) is paid in two parts, ``(1 - b) A`` at step s0 and ``b A`` at step s0 + 1, b its place
between them (``t / dt - phase / 16 - s0``), each with the forward adjustment of its step (the engines apply it:
``P(0, t) / P(0, tau_s)``). The parts are worth A ``P(0, t)`` together on the curve, as the whole flow
at its nearest step is, but node by node they are worth what the flow is worth there: a step's value of 1
paid a step later falls as the step's rate rises, as the value of 1 paid at t does. A flow moved whole to its
nearest step is worth the same in every state of that step; on a coarse tree, the redemption's error in a
bond's value in each state reaches a call or put dates earlier.

A flow stays whole, on its nearest step, where an exercise date lies between (or on) its two steps: an
exercise sees the flows after its own date only, and a part moved past it would be seen, or missed.

Only dated rows are spread (:mod:`~.dated`'s events; time-form rows keep their flows on their nearest steps).
A dated row's tree reaches the step at or after its redemption: ``max(1, ceil((16 k spy - phase D) / (16 D)))``
steps, k the days from the valuation date to the redemption and D the curve's days a year.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ..dates.parallel import over_rows
from .events import COUPON, REDEMPTION, EventTable, is_exercise, step_time
from .geometry import PHASES


def top_steps(days, steps_per_year, days_per_year, phase=0) -> np.ndarray:
    """The height of a dated row's tree of ``phase`` whose redemption is ``days`` days after its valuation
    date: ``max(1, ceil((16 days spy - phase D) / (16 D)))``, in integers."""
    D = np.asarray(days_per_year, dtype=np.int64)
    u = PHASES * np.asarray(days, dtype=np.int64) * np.asarray(steps_per_year, dtype=np.int64)
    u -= np.asarray(phase, dtype=np.int64) * D
    return np.maximum(-(-u // (PHASES * D)), 1)


@numba.njit(cache=True, inline="always")
def _place(t, spy, q):
    """Where time ``t`` lies in steps: ``t spy - q / 16`` (step s >= 1 at s)."""
    return t * spy - q / PHASES


@numba.njit(cache=True, inline="always")
def _interval(kind, t, step, per_step, spy, q):
    """The step s0 before a cash flow of ``kind`` at time ``t`` (on step ``step``) between two steps, or -1 where
    it stays whole (on the grid, a flow before the first step, or not a cash flow). Scalars only: a helper
    given arrays costs their reference counts at every call."""
    if kind != REDEMPTION and kind != COUPON:
        return -1
    if t == step_time(step, per_step, q):
        return -1
    s0 = int(math.floor(_place(t, spy, q)))
    return s0 if s0 >= 1 else -1


@numba.njit(cache=True)
def _row_steps(a, b, time, step, kind, per_step, spy, q, at):
    """For each event e of one row's events ``a .. b``, ``at[e - a]``: the step s0 when e is a cash flow to spread
    over s0 and s0 + 1 (no exercise of its row between those steps' times or on one), else -1; returns the row's
    events once its flows are spread (a spread flow is two events). A row's events come in decreasing time: the
    exercises in that span are the flow's neighbours."""
    count = 0
    for e in range(a, b):
        s0 = _interval(kind[e], time[e], step[e], per_step, spy, q)
        if s0 >= 0:
            first, last = step_time(s0, per_step, q), step_time(s0 + 1, per_step, q)
            x = e - 1
            while s0 >= 0 and x >= a and time[x] <= last:
                if is_exercise(kind[x]):
                    s0 = -1
                x -= 1
            x = e + 1
            while s0 >= 0 and x < b and time[x] >= first:
                if is_exercise(kind[x]):
                    s0 = -1
                x += 1
        at[e - a] = s0
        count += 2 if s0 >= 0 else 1
    return count


@numba.njit(cache=True)
def _scratch(lo, hi, offsets):
    """Room for the spread steps of the longest row of rows ``lo .. hi``."""
    widest = 0
    for r in range(lo, hi):
        widest = max(widest, offsets[r + 1] - offsets[r])
    return np.empty(widest, np.int64)


@numba.njit(cache=True, nogil=True)
def _counts(lo, hi, offsets, time, step, kind, spy, phase, counts):
    """Events per row of rows ``lo .. hi`` once their flows are spread."""
    at = _scratch(lo, hi, offsets)
    for r in range(lo, hi):
        counts[r] = _row_steps(offsets[r], offsets[r + 1], time, step, kind, 1.0 / spy[r], spy[r], phase[r], at)


@numba.njit(cache=True, nogil=True)
def _fill(lo, hi, offsets, time, step, kind, amount, spy, phase, new_offsets, n_step, n_time, n_kind, n_amount):
    """Rows ``lo .. hi``'s events into their new slices: each run of spread flows between the same two steps
    (consecutive: no other event lies between them) as their parts at the later step, then at the earlier one,
    so that the table stays in decreasing step and time."""
    at = _scratch(lo, hi, offsets)
    for r in range(lo, hi):
        sp, q = spy[r], phase[r]
        a, b = offsets[r], offsets[r + 1]
        _row_steps(a, b, time, step, kind, 1.0 / sp, sp, q, at)
        out = new_offsets[r]
        e = a
        while e < b:
            s0 = at[e - a]
            if s0 < 0:
                n_step[out], n_time[out], n_kind[out], n_amount[out] = step[e], time[e], kind[e], amount[e]
                out += 1
                e += 1
                continue
            end = e + 1
            while end < b and at[end - a] == s0:
                end += 1
            for upper in (True, False):
                for f in range(e, end):
                    part = _place(time[f], sp, q) - s0
                    n_step[out], n_time[out], n_kind[out] = s0 + 1 if upper else s0, time[f], kind[f]
                    n_amount[out] = amount[f] * (part if upper else 1.0 - part)
                    out += 1
            e = end


def spread_cash_flows(table: EventTable, steps_per_year, phase) -> EventTable:
    """The events of dated rows (:func:`~.dated.dated_events`) with their cash flows between two steps spread
    over both (see the module's notes); ``steps_per_year`` and the tree's ``phase`` per row."""
    spy = np.ascontiguousarray(steps_per_year, np.int64)
    phase = np.ascontiguousarray(phase, np.int64)
    rows = len(table.offsets) - 1
    counts = np.zeros(rows, np.int64)
    over_rows(_counts, rows, table.offsets, table.time, table.step, table.kind, spy, phase, counts)
    offsets = np.zeros(rows + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    if offsets[-1] == table.offsets[-1]:
        return table
    m = offsets[-1]
    spread = EventTable(
        offsets, np.empty(m, np.int64), np.empty(m, np.float64), np.empty(m, np.uint8), np.empty(m, np.float64)
    )
    over_rows(
        _fill,
        rows,
        table.offsets,
        table.time,
        table.step,
        table.kind,
        table.amount,
        spy,
        phase,
        offsets,
        spread.step,
        spread.time,
        spread.kind,
        spread.amount,
    )
    return spread

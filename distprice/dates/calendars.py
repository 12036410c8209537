"""Business days of the calendars: tests, the business-day conventions, advancing by business days, the last
business day of a month and the business days between two dates.

Kernels read one table of bits (:func:`business_table`), built from the shipped holiday lists and the
Saturday-Sunday weekend; outside 1901-2199, where no holidays are known, a calendar other than ``none`` has only
its weekend. The functions without a leading underscore take names or
codes (scalars or one per date) and arrays of day numbers, and return arrays.
"""
from __future__ import annotations

import functools

import numba
import numpy as np

from .civil import month_end, weekday
from .csr import DateTable, offsets_of
from .holidays import FIRST_DAY, LAST_DAY, LISTED, shipped
from .registry import (CALENDARS, CONVENTIONS, FOLLOWING, MODIFIED_FOLLOWING, NO_CALENDAR, PRECEDING,
                       UNADJUSTED, WEEKENDS)


@functools.cache
def business_table() -> np.ndarray:
    """Business days as bits: bit ``i % 8`` of ``table[calendar code, i // 8]`` is 1 where day ``FIRST_DAY + i``
    is a business day of the calendar (82 KB for all six calendars: it stays in a core's cache)."""
    days = np.arange(FIRST_DAY, LAST_DAY + 1, dtype=np.int64)
    workday = (days + 3) % 7 < 5
    table = np.empty((len(CALENDARS.names), len(days)), dtype=bool)
    table[NO_CALENDAR] = True
    table[WEEKENDS] = workday
    assert set(shipped()) == set(LISTED)
    for name, holidays in shipped().items():
        row = workday.copy()
        row[holidays - FIRST_DAY] = False
        table[CALENDARS.code(name)] = row
    return np.packbits(table, axis=1, bitorder="little")


# ---- kernels: one date, the table passed in ----

@numba.njit(cache=True)
def is_business(business, calendar, day):
    """Whether ``day`` is a business day of ``calendar``."""
    i = numba.uint64(day - FIRST_DAY)
    if i <= numba.uint64(LAST_DAY - FIRST_DAY):
        return (business[calendar, i >> numba.uint64(3)] >> (i & numba.uint64(7))) & 1 != 0
    return calendar == NO_CALENDAR or weekday(day) < 5


@numba.njit(cache=True)
def following(business, calendar, day):
    """The first business day on or after ``day``."""
    while not is_business(business, calendar, day):
        day += 1
    return day


@numba.njit(cache=True)
def preceding(business, calendar, day):
    """The last business day on or before ``day``."""
    while not is_business(business, calendar, day):
        day -= 1
    return day


@numba.njit(cache=True)
def adjust(business, calendar, day, convention):
    """``day`` moved by a business-day convention (a code of ``CONVENTIONS``)."""
    if convention == UNADJUSTED:
        return day
    if convention == PRECEDING:
        return preceding(business, calendar, day)
    moved = following(business, calendar, day)
    if convention == MODIFIED_FOLLOWING and moved != day and moved > month_end(day):
        return preceding(business, calendar, day)
    return moved


@numba.njit(cache=True)
def advance(business, calendar, day, n):
    """``n`` business days after ``day`` (before it for n < 0), stepping a calendar day at a time and skipping
    holidays; for n = 0, ``day`` if it is a business day, else the next one."""
    if n == 0:
        return following(business, calendar, day)
    step = 1 if n > 0 else -1
    for _ in range(abs(n)):
        day += step
        while not is_business(business, calendar, day):
            day += step
    return day


@numba.njit(cache=True)
def last_business_day(business, calendar, day):
    """The last business day of ``day``'s month."""
    return preceding(business, calendar, month_end(day))


# ---- vectorised ----

@numba.njit(cache=True)
def _apply(business, calendars, days, arguments, what, out):
    for i in range(len(days)):
        c, d, a = calendars[i], days[i], arguments[i]
        if what == 0:
            out[i] = is_business(business, c, d)
        elif what == 1:
            out[i] = adjust(business, c, d, a)
        elif what == 2:
            out[i] = advance(business, c, d, a)
        else:
            out[i] = last_business_day(business, c, d)


def _vectorised(calendar, days, argument, what) -> np.ndarray:
    codes = CALENDARS.codes(calendar)
    days = np.asarray(days, dtype=np.int64)
    shape = np.broadcast_shapes(codes.shape, days.shape, np.shape(argument))
    flat = [np.ascontiguousarray(np.broadcast_to(a, shape).ravel())
            for a in (codes, days, np.asarray(argument, dtype=np.int64))]
    out = np.empty(shape, dtype=np.int64)
    _apply(business_table(), *flat, what, out.reshape(-1))
    return out


def is_business_day(calendar, days) -> np.ndarray:
    """Whether each day is a business day of ``calendar`` (bool array)."""
    return _vectorised(calendar, days, 0, 0).astype(bool)


def adjust_days(calendar, days, convention) -> np.ndarray:
    """Each day moved by ``convention`` (a name or code of ``CONVENTIONS``, or one per day)."""
    return _vectorised(calendar, days, CONVENTIONS.codes(convention), 1)


def advance_days(calendar, days, n) -> np.ndarray:
    """Each day advanced by ``n`` business days (see :func:`advance`; 0 days: the day or the next business day)."""
    return _vectorised(calendar, days, n, 2)


def last_business_days(calendar, days) -> np.ndarray:
    """The last business day of each day's month."""
    return _vectorised(calendar, days, 0, 3)


@numba.njit(cache=True)
def _business_days(business, calendars, start, end, offsets, days):
    for r in range(len(start)):
        k = offsets[r]
        for d in range(start[r], end[r] + 1):
            if is_business(business, calendars[r], d):
                days[k] = d
                k += 1


@numba.njit(cache=True)
def _business_counts(business, calendars, start, end, counts):
    for r in range(len(start)):
        for d in range(start[r], end[r] + 1):
            counts[r] += is_business(business, calendars[r], d)


def business_days(calendar, start, end) -> DateTable:
    """The business days ``start <= d <= end`` of each row (a CSR table; empty where end < start)."""
    start, end = np.broadcast_arrays(np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64))
    start, end = np.ascontiguousarray(start.ravel()), np.ascontiguousarray(end.ravel())
    codes = np.ascontiguousarray(np.broadcast_to(CALENDARS.codes(calendar), start.shape))
    business = business_table()
    counts = np.zeros(len(start), dtype=np.int64)
    _business_counts(business, codes, start, end, counts)
    offsets = offsets_of(counts)
    days = np.empty(offsets[-1], dtype=np.int64)
    _business_days(business, codes, start, end, offsets, days)
    return DateTable(offsets, days)

"""Gregorian calendar arithmetic on day numbers, for numba kernels (and plain Python).

A day number is the count of days since 1970-01-01 (day 0; negative before it), as in ``numpy.datetime64[D]``.
Years, months (1-12) and days of month convert both ways with integer arithmetic, valid from 0000-03-01 on: the
year is split at 1 March so that the leap day ends it, and 400-year eras of 146 097 days repeat exactly. The
arithmetic is unsigned (every quantity is >= 0 from that date on), so divisions by constants stay cheap; from
1900 to 2200, a table of month starts (29 KB, in cache) answers faster still.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import int64, uint64

_ERA_DAYS = 146_097
"""Days in 400 Gregorian years."""
_SHIFT = 719_468
"""Days from 0000-03-01 (day 0 of era 0 in the March-based count) to 1970-01-01."""


@numba.njit(cache=True)
def _ymd(day):
    z = uint64(day + _SHIFT)
    era = z // uint64(_ERA_DAYS)
    doe = z - era * uint64(_ERA_DAYS)  # day of era, 0..146096
    yoe = (doe - doe // uint64(1460) + doe // uint64(36524) - doe // uint64(146096)) // uint64(365)  # 0..399
    doy = doe - (uint64(365) * yoe + yoe // uint64(4) - yoe // uint64(100))  # day of March-based year
    mp = (uint64(5) * doy + uint64(2)) // uint64(153)  # month from March, 0..11
    d = int64(doy - (uint64(153) * mp + uint64(2)) // uint64(5)) + 1
    m = int64(mp) + 3 if mp < 10 else int64(mp) - 9
    return int64(era * uint64(400) + yoe) + (1 if m <= 2 else 0), m, d


@numba.njit(cache=True)
def _day_number(y, m, d):
    yy = uint64(y - (1 if m <= 2 else 0))
    era = yy // uint64(400)
    yoe = yy - era * uint64(400)
    doy = (uint64(153) * uint64(m - 3 if m > 2 else m + 9) + uint64(2)) // uint64(5) + uint64(d - 1)
    doe = yoe * uint64(365) + yoe // uint64(4) - yoe // uint64(100) + doy
    return int64(era * uint64(_ERA_DAYS) + doe) - _SHIFT


_FIRST_YEAR = 1900
_MONTHS = 12 * 301
"""The month table covers 1900-01 .. 2200-12."""
MONTH_STARTS = (
    (np.datetime64(f"{_FIRST_YEAR}-01", "M") + np.arange(_MONTHS + 1)).astype("datetime64[D]").astype(np.int64)
)
"""Day number of the first of each month from 1900-01 on, and of 2201-01-01 last (numpy's calendar, the same
proleptic Gregorian one): dates in the table's years convert with a lookup, others with the arithmetic."""


@numba.njit(cache=True)
def ymd(day):
    """Year, month (1-12) and day of month of a day number."""
    t = uint64(day - MONTH_STARTS[0])
    if t >= uint64(MONTH_STARTS[_MONTHS] - MONTH_STARTS[0]):
        return _ymd(day)
    k = int64(t * uint64(4800) // uint64(_ERA_DAYS))  # 4800 months in 146097 days: off by one at most
    if MONTH_STARTS[k + 1] <= day:
        k += 1
    elif MONTH_STARTS[k] > day:
        k -= 1
    return _FIRST_YEAR + k // 12, k % 12 + 1, day - MONTH_STARTS[k] + 1


@numba.njit(cache=True)
def day_number(y, m, d):
    """Day number of year ``y`` (>= 0), month ``m`` (1-12), day of month ``d``."""
    k = uint64((y - _FIRST_YEAR) * 12 + m - 1)
    if k < uint64(_MONTHS):
        return MONTH_STARTS[k] + d - 1
    return _day_number(y, m, d)


@numba.njit(cache=True)
def is_leap(y):
    """Whether ``y`` is a Gregorian leap year (divisible by 4, and by 16 when divisible by 25: by 400 when by 100)."""
    return (y & 3) == 0 and (y % 25 != 0 or (y & 15) == 0)


_LONGER = sum((n - 28) << (2 * m) for m, n in enumerate((31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31), 1))
"""Days beyond 28 of each month but February, two bits a month at bit 2m."""


@numba.njit(cache=True)
def month_length(y, m):
    """Days in month ``m`` of year ``y``."""
    if m == 2:
        return 29 if is_leap(y) else 28
    return 28 + ((_LONGER >> (2 * m)) & 3)


@numba.njit(cache=True)
def month_day(months, day, last):
    """Day ``day`` (clamped to the month's length), or the last day if ``last``, of the month ``months`` months
    after January of year 0."""
    y, m = months // 12, months % 12 + 1
    length = month_length(y, m)
    return day_number(y, m, length if last else min(day, length))


@numba.njit(cache=True, inline="always")
def day_before(y, m, d):
    """Year, month and day of the day before ``y-m-d`` (a walk back through days without :func:`ymd`)."""
    if d > 1:
        return y, m, d - 1
    if m > 1:
        return y, m - 1, month_length(y, m - 1)
    return y - 1, 12, 31


@numba.njit(cache=True)
def add_months(day, n):
    """``day`` moved by ``n`` months (negative: back), keeping the day of month clamped to the month's length."""
    y, m, d = ymd(day)
    return month_day(y * 12 + m - 1 + n, d, False)


@numba.njit(cache=True)
def month_end(day):
    """The last calendar day of ``day``'s month."""
    y, m, d = ymd(day)
    return day + month_length(y, m) - d


@numba.njit(cache=True)
def weekday(day):
    """Day of the week, Monday 0 ... Sunday 6 (1970-01-01 was a Thursday)."""
    return (day + 3) % 7

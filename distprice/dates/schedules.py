"""Coupon schedules by backward generation from the maturity (QuantLib's ``Schedule(issue, maturity,
Period(12 / f months), calendar, convention, convention, DateGeneration.Backward, end_of_month)``).

``adj`` is the accrual convention on the row's calendar; ``d - m months`` keeps the day of month, clamped to the
month's length. The EOM rule holds when ``end_of_month`` is set and the maturity is the last day of its month.

1. g0 = maturity; g = maturity - k tenors for k = 1, 2, ... (under the EOM rule, the last day of that month),
   until g < issue; each g is kept unless adj(g) = adj(last kept).
2. If adj(last kept) != adj(issue), the issue date is added: a front stub, regular only if g' - tenor = issue,
   g' the last kept date (the last day of its month when ``end_of_month`` and g' is a month end).
3. In increasing order d0 = issue, ..., dN = maturity.
4. d0 -> adj(d0), dN -> adj(dN); an inner date di -> adj(last day of di's month) if ``end_of_month`` and the
   maturity is on or after the last business day of its month, else adj(di).
5. If d(N-1) >= dN, d(N-1) is dropped; if d1 <= d0, d0 is dropped.

Dates g are 28 days apart or more, no calendar closes for 28 days (``LONGEST_CLOSURE``, checked when the
calendars load) and every convention keeps the order of dates: so no two g adjust to the same day, every
g_k >= issue is kept in step 1, the adjusted dates increase and step 5 drops none. The schedule of a row is then
fixed by its :func:`shape` (K, the last k with g_k >= issue, and whether a stub follows), and date j is a
formula of j (:func:`schedule_date`): kernels make the dates they need, such as the coupons after settlement,
without the others.
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass

import numba
import numpy as np

from .calendars import adjust, business_address, business_view, last_business_day
from .civil import add_months, month_day, month_end, month_length, ymd
from .convert import NO_DATE
from .csr import DateTable, offsets_of
from .parallel import over_rows
from .terms import BondTerms

Shape = namedtuple("Shape", "periods stub regular tenor month day eom_rule month_ends")
"""A row's schedule: N (dates d0..dN; 0 for none), whether d0 is the issue date of a front stub, whether the
first period is regular, the tenor (months), the maturity's month (months since January of year 0) and day of
month, the EOM rule, and whether inner dates move to month ends (step 4)."""


@dataclass(frozen=True)
class Schedule(DateTable):
    """The adjusted accrual dates d0 < ... < dN of every row (CSR; none for zero-coupon rows) and whether each
    row's first period (d0, d1) is regular (``regular``, bool per row)."""

    regular: np.ndarray


@numba.njit(cache=True)
def tenor_months(frequency):
    """Months between coupon dates for 1, 2, 4 or 12 coupons a year; 0 for anything else (no coupons)."""
    if frequency == 1 or frequency == 2 or frequency == 4 or frequency == 12:
        return 12 // frequency
    return 0


@numba.njit(cache=True)
def shape(business, issue, maturity, coupon, frequency, calendar, convention, end_of_month):
    """The :data:`Shape` of a row's schedule; N = 0 for a row without coupons, or whose issue and maturity leave
    no period."""
    tenor = tenor_months(frequency)
    if not coupon > 0 or tenor == 0 or issue == NO_DATE or issue >= maturity:
        return Shape(0, False, True, tenor, 0, 0, False, False)
    y, m, d = ymd(maturity)
    month = y * 12 + m - 1
    eom_rule = end_of_month and d == month_length(y, m)
    yi, mi, _ = ymd(issue)
    last = (month - yi * 12 - mi + 1) // tenor  # K, or K + 1 when g in the issue's month falls before the issue
    g = month_day(month - last * tenor, d, eom_rule)
    if g < issue:
        last -= 1
        g = month_day(month - last * tenor, d, eom_rule)
    stub = adjust(business, calendar, g, convention) != adjust(business, calendar, issue, convention)
    regular = True
    if stub:
        before = add_months(g, -tenor)
        if end_of_month and g == month_end(g):
            before = month_end(before)
        regular = before == issue
    periods = last + 1 if stub else last
    month_ends = end_of_month and maturity >= last_business_day(business, calendar, maturity)
    return Shape(periods, stub, regular, tenor, month, d, eom_rule, month_ends)


@numba.njit(cache=True, inline="always")
def schedule_date(business, row, j, issue, calendar, convention):
    """Date ``j`` (0 .. N) of the adjusted schedule of a row of :data:`Shape` ``row``."""
    if j == 0 and row.stub:
        return adjust(business, calendar, issue, convention)
    to_end = row.eom_rule or (row.month_ends and 0 < j < row.periods)
    return adjust(business, calendar, month_day(row.month - (row.periods - j) * row.tenor, row.day, to_end), convention)


@numba.njit(cache=True, nogil=True)
def _count(lo, hi, address, issue, maturity, coupon, frequency, calendar, convention, end_of_month, counts, regular):
    business = business_view(address)
    for r in range(lo, hi):
        row = shape(
            business, issue[r], maturity[r], coupon[r], frequency[r], calendar[r], convention[r], end_of_month[r]
        )
        counts[r] = row.periods + 1 if row.periods > 0 else 0
        regular[r] = row.regular


@numba.njit(cache=True, nogil=True)
def _fill(lo, hi, address, issue, maturity, coupon, frequency, calendar, convention, end_of_month, offsets, out):
    business = business_view(address)
    for r in range(lo, hi):
        row = shape(
            business, issue[r], maturity[r], coupon[r], frequency[r], calendar[r], convention[r], end_of_month[r]
        )
        for j in range(offsets[r + 1] - offsets[r]):
            out[offsets[r] + j] = schedule_date(business, row, j, issue[r], calendar[r], convention[r])


def schedule(terms: BondTerms) -> Schedule:
    """The accrual schedule of every row (rows with ``coupon > 0``; the others get none). Rows are expected to
    pass :func:`~distprice.dates.terms.check_terms`."""
    n, business = len(terms), business_address()
    counts, regular = np.empty(n, dtype=np.int64), np.empty(n, dtype=bool)
    columns = (
        terms.issue,
        terms.maturity,
        terms.coupon,
        terms.frequency,
        terms.calendar,
        terms.accrual_convention,
        terms.end_of_month,
    )
    over_rows(_count, n, business, *columns, counts, regular)
    offsets = offsets_of(counts)
    dates = np.empty(offsets[-1], dtype=np.int64)
    over_rows(_fill, n, business, *columns, offsets, dates)
    return Schedule(offsets, dates, regular)

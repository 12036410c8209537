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
5. If d(N-1) >= dN, d(N-1) is dropped; if d1 <= d0, d0 is dropped (never met with tenors of a month or more).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numba
import numpy as np

from .calendars import adjust, business_table, last_business_day
from .civil import add_months, day_number, month_end, month_length, ymd
from .convert import NO_DATE
from .csr import compact, offsets_of
from .terms import BondTerms


@dataclass(frozen=True)
class Schedule:
    """The adjusted accrual dates d0 < ... < dN of every row (none for zero-coupon rows) and whether each row's
    first period (d0, d1) is regular (``regular``, bool per row).

    Row r's dates are ``buffer[slots[r]:slots[r] + counts[r]]`` (each row is written in room reserved for it);
    ``offsets`` and ``dates`` give the packed CSR table, made on first use."""

    slots: np.ndarray
    counts: np.ndarray
    buffer: np.ndarray
    regular: np.ndarray

    def row(self, r: int) -> np.ndarray:
        """The dates of row ``r``."""
        return self.buffer[self.slots[r]:self.slots[r] + self.counts[r]]

    @functools.cached_property
    def offsets(self) -> np.ndarray:
        """CSR offsets of the packed dates."""
        return offsets_of(self.counts)

    @functools.cached_property
    def dates(self) -> np.ndarray:
        """Every row's dates, packed (CSR with :attr:`offsets`)."""
        return compact(self.buffer, self.slots, self.counts, self.offsets)


@numba.njit(cache=True)
def tenor_months(frequency):
    """Months between coupon dates for 1, 2, 4 or 12 coupons a year; 0 for anything else (no coupons)."""
    if frequency == 1 or frequency == 2 or frequency == 4 or frequency == 12:
        return 12 // frequency
    return 0


@numba.njit(cache=True)
def date_bound(issue, maturity, coupon, frequency):
    """An upper bound of a row's schedule dates: every generated g >= issue lies in a month from the issue's
    to the maturity's, so at most (months between them) / tenor of them, plus the maturity and a stub."""
    tenor = tenor_months(frequency)
    if not coupon > 0 or tenor == 0 or issue == NO_DATE or issue >= maturity:
        return 0
    yi, mi, _ = ymd(issue)
    ym, mm, _ = ymd(maturity)
    return (12 * (ym - yi) + mm - mi) // tenor + 2


@numba.njit(cache=True)
def generate(business, issue, maturity, tenor, calendar, convention, end_of_month, out, lo, room):
    """Writes the adjusted schedule dates of one row at ``out[lo:lo + room]`` (``room`` from :func:`date_bound`);
    returns their count and whether the first period is regular.

    Steps 1-2 run backward from the maturity and write each kept date already adjusted as step 4 says (an inner
    date by the month-end rule when it applies); the last kept date is re-adjusted as d0 when no stub follows."""
    y, m, d = ymd(maturity)
    eom_rule = end_of_month and d == month_length(y, m)
    month_ends = end_of_month and maturity >= last_business_day(business, calendar, maturity)
    last = adjust(business, calendar, maturity, convention)
    out[lo] = last
    n = 1
    kept = maturity                  # the last kept date, unadjusted
    month = y * 12 + m - 1 - tenor   # months since year 0 of g
    while n < room - 1:
        gy, gm = month // 12, month % 12 + 1
        length = month_length(gy, gm)
        first = day_number(gy, gm, 1)
        g = first + (length if eom_rule else min(d, length)) - 1
        if g < issue:
            break
        moved = adjust(business, calendar, g, convention)
        if moved != last:
            out[lo + n] = adjust(business, calendar, first + length - 1, convention) if month_ends else moved
            n += 1
            last = moved
            kept = g
        month -= tenor
    regular = True
    if last != adjust(business, calendar, issue, convention):
        before = add_months(kept, -tenor)
        if end_of_month and kept == month_end(kept):
            before = month_end(before)
        regular = before == issue
        out[lo + n] = adjust(business, calendar, issue, convention)
        n += 1
    elif n > 1:
        out[lo + n - 1] = last
    for i in range(n // 2):
        out[lo + i], out[lo + n - 1 - i] = out[lo + n - 1 - i], out[lo + i]
    if n >= 2 and out[lo + n - 2] >= out[lo + n - 1]:
        out[lo + n - 2] = out[lo + n - 1]
        n -= 1
    if n >= 2 and out[lo + 1] <= out[lo]:
        regular = out[lo + 1] == out[lo]
        for i in range(n - 1):
            out[lo + i] = out[lo + i + 1]
        n -= 1
    return n, regular


@numba.njit(cache=True)
def _bounds(issue, maturity, coupon, frequency, bounds):
    for r in range(len(maturity)):
        bounds[r] = date_bound(issue[r], maturity[r], coupon[r], frequency[r])


@numba.njit(cache=True, parallel=True)
def _generate_all(business, slots, issue, maturity, frequency, calendar, convention, end_of_month, out, counts,
                  regular):
    for r in numba.prange(len(maturity)):
        counts[r], regular[r] = 0, True
        if slots[r + 1] > slots[r]:
            counts[r], regular[r] = generate(business, issue[r], maturity[r], tenor_months(frequency[r]),
                                             calendar[r], convention[r], end_of_month[r], out, slots[r],
                                             slots[r + 1] - slots[r])


def schedule(terms: BondTerms) -> Schedule:
    """The accrual schedule of every row (rows with ``coupon > 0``; the others get none). Rows are expected to
    pass :func:`~distprice.dates.terms.check_terms`."""
    n = len(terms)
    bounds = np.empty(n, dtype=np.int64)
    _bounds(terms.issue, terms.maturity, terms.coupon, terms.frequency, bounds)
    slots = offsets_of(bounds)
    buffer, counts, regular = np.empty(slots[-1], dtype=np.int64), bounds, np.empty(n, dtype=bool)
    _generate_all(business_table(), slots, terms.issue, terms.maturity, terms.frequency, terms.calendar,
                  terms.accrual_convention, terms.end_of_month, buffer, counts, regular)
    return Schedule(slots, counts, buffer, regular)

"""Cash flows of dated bonds: coupons (payment dates, amounts, reference periods), the redemption, the
settlement date, accrued interest, and the live cash flows after settlement. Amounts are in face units.

- Coupon i pays ``face * coupon * yf(d(i-1), d(i); reference)`` on ``p(i)`` = d(i) moved by the payment
  convention. Its reference period is its accrual period, except an irregular first period: (b, d1) with
  b = d1 - tenor and then, if ``end_of_month``: the last day of b's month when the accrual convention is
  ``unadjusted`` and d1 is a month end; the last business day of b's month with another convention when d1 is
  on or after the last business day of its month; otherwise (and without ``end_of_month``) adj(b).
- The redemption ``face * redemption / 100`` is paid on the last coupon's payment date, or on the maturity
  moved by the payment convention for a zero-coupon row.
- Settlement ``S = max(issue, advance(V, settlement_days))``; cash flows paid on or before S are not live.
- Accrued at d: with i the first coupon paid after d (none: 0), 0 if d <= d(i-1), else
  ``face * coupon * yf(d(i-1), min(d, d(i)); reference)`` (QuantLib's ``Bond.accruedAmount(d)`` times face / 100).
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from .calendars import adjust, advance_days, business_table, last_business_day
from .civil import add_months, month_end
from .convert import NO_DATE
from .csr import offsets_of
from .daycounts import year_fraction
from .registry import UNADJUSTED
from .schedules import Schedule, schedule, tenor_months
from .terms import BondTerms


@dataclass(frozen=True)
class Coupons:
    """Coupons of every row (CSR, in payment order): row r owns ``[offsets[r], offsets[r + 1])`` of
    ``accrual_start``, ``accrual_end``, ``payment`` (day numbers) and ``amount`` (face units).

    Per row: ``reference_start``, where the reference period of the row's first coupon here starts (it ends at
    the coupon's accrual end; it differs from the accrual start only for an irregular first period; every later
    coupon's reference period is its accrual period), and ``after``, the date on or before which paid coupons
    were left out (``NO_DATE``: none were)."""

    offsets: np.ndarray
    accrual_start: np.ndarray
    accrual_end: np.ndarray
    payment: np.ndarray
    amount: np.ndarray
    reference_start: np.ndarray
    after: np.ndarray

    @property
    def counts(self) -> np.ndarray:
        """Coupons per row."""
        return np.diff(self.offsets)


@dataclass(frozen=True)
class CashFlows:
    """The live cash flows of every row at its valuation date: ``settlement`` (day numbers), ``accrued`` at
    settlement (face units), the ``coupons`` paid after settlement, and the redemption (``redemption_date``,
    ``redemption_amount`` in face units; live only where ``redemption_date > settlement``)."""

    settlement: np.ndarray
    accrued: np.ndarray
    coupons: Coupons
    redemption_date: np.ndarray
    redemption_amount: np.ndarray

    @property
    def matured(self) -> np.ndarray:
        """Rows whose redemption is paid on or before settlement: nothing left to price."""
        return self.redemption_date <= self.settlement


@numba.njit(cache=True)
def _reference_start(business, d1, tenor, calendar, convention, end_of_month):
    """b of an irregular first period ending on d1."""
    b = add_months(d1, -tenor)
    if end_of_month:
        if convention == UNADJUSTED:
            if d1 == month_end(d1):
                return month_end(b)
        elif d1 >= last_business_day(business, calendar, d1):
            return last_business_day(business, calendar, b)
    return adjust(business, calendar, b, convention)


@numba.njit(cache=True)
def _first_paid_after(business, dates, lo, hi, day, calendar, convention):
    """The smallest i in lo + 1 .. hi - 1 whose payment date adjust(dates[i]) is after ``day`` (hi: none);
    payment dates increase with i."""
    a, b = lo + 1, hi
    while a < b:
        m = (a + b) // 2
        if adjust(business, calendar, dates[m], convention) > day:
            b = m
        else:
            a = m + 1
    return a


@numba.njit(cache=True)
def _count_live(business, slots, dates_per_row, dates, after, calendar, convention, counts):
    for r in range(len(after)):
        lo, hi = slots[r], slots[r] + dates_per_row[r]
        counts[r] = 0
        if hi - lo >= 2:
            counts[r] = hi - _first_paid_after(business, dates, lo, hi, after[r], calendar[r], convention[r])


@numba.njit(cache=True, parallel=True)
def _fill_live(business, slots, dates_per_row, dates, regular, out_offsets, frequency, day_count, calendar,
               accrual_convention, payment_convention, end_of_month, face, coupon, start, end, payment, amount,
               reference):
    for r in numba.prange(len(out_offsets) - 1):
        lo, hi, k = slots[r], slots[r] + dates_per_row[r], out_offsets[r]
        first = hi - (out_offsets[r + 1] - k)
        reference[r] = NO_DATE
        for i in range(first, hi):
            d0, d1 = dates[i - 1], dates[i]
            b = d0
            if i == lo + 1 and not regular[r]:
                b = _reference_start(business, d1, tenor_months(frequency[r]), calendar[r],
                                     accrual_convention[r], end_of_month[r])
            if i == first:
                reference[r] = b
            start[k], end[k] = d0, d1
            payment[k] = adjust(business, calendar[r], d1, payment_convention[r])
            amount[k] = face[r] * coupon[r] * year_fraction(day_count[r], d0, d1, b, d1)
            k += 1


def coupons(terms: BondTerms, dates: Schedule, after=None) -> Coupons:
    """The coupons of every row paid after ``after`` (day numbers per row, or one for all; None: every
    coupon), from the rows' schedules."""
    after = np.full(len(terms), NO_DATE, np.int64) if after is None else np.ascontiguousarray(
        np.broadcast_to(np.asarray(after, dtype=np.int64), (len(terms),)))
    business = business_table()
    counts = np.empty(len(terms), dtype=np.int64)
    _count_live(business, dates.slots, dates.counts, dates.buffer, after, terms.calendar, terms.payment_convention,
                counts)
    offsets = offsets_of(counts)
    columns = [np.empty(offsets[-1], dtype=dtype) for dtype in (np.int64,) * 3 + (np.float64,)]
    reference = np.empty(len(terms), dtype=np.int64)
    _fill_live(business, dates.slots, dates.counts, dates.buffer, dates.regular, offsets, terms.frequency,
               terms.day_count, terms.calendar, terms.accrual_convention, terms.payment_convention,
               terms.end_of_month, terms.face, terms.coupon, *columns, reference)
    return Coupons(offsets, *columns, reference, after)


@numba.njit(cache=True, parallel=True)
def _accrued(offsets, start, end, payment, reference, rows, days, day_count, face, coupon, out):
    for j in numba.prange(len(days)):
        r, d = rows[j], days[j]
        out[j] = 0.0
        a, b = offsets[r], offsets[r + 1]
        while a < b:                      # the first coupon paid after d
            m = (a + b) // 2
            if payment[m] > d:
                b = m
            else:
                a = m + 1
        if a < offsets[r + 1] and d > start[a]:
            b = reference[r] if a == offsets[r] else start[a]
            out[j] = face[r] * coupon[r] * year_fraction(day_count[r], start[a], min(d, end[a]), b, end[a])


def accrued(terms: BondTerms, table: Coupons, rows, days) -> np.ndarray:
    """Accrued interest (face units) of row ``rows[j]`` at day ``days[j]`` (arrays broadcast together; e.g. a
    row's exercise dates). ValueError for a day before the table's ``after`` date of its row: coupons paid before
    it were left out."""
    rows, days = np.broadcast_arrays(np.asarray(rows, dtype=np.int64), np.asarray(days, dtype=np.int64))
    shape = rows.shape
    rows, days = np.ascontiguousarray(rows.ravel()), np.ascontiguousarray(days.ravel())
    early = days < table.after[rows]
    if np.any(early):
        raise ValueError(f"{int(early.sum())} date(s) precede the coupons kept for their row (first at position "
                         f"{int(np.flatnonzero(early)[0])}): use a coupon table cut at or before them")
    out = np.empty(shape, dtype=np.float64)
    _accrued(table.offsets, table.accrual_start, table.accrual_end, table.payment, table.reference_start, rows,
             days, terms.day_count, terms.face, terms.coupon, out.reshape(-1))
    return out


def settlement_dates(terms: BondTerms, valuation) -> np.ndarray:
    """``max(issue, advance(valuation, settlement_days))`` on each row's calendar (day numbers)."""
    valuation = np.broadcast_to(np.asarray(valuation, dtype=np.int64), (len(terms),))
    return np.maximum(terms.issue, advance_days(terms.calendar, valuation, terms.settlement_days))


@numba.njit(cache=True)
def _redemption_dates(business, slots, dates_per_row, dates, maturity, calendar, convention, out):
    for r in range(len(maturity)):
        last = dates[slots[r] + dates_per_row[r] - 1] if dates_per_row[r] > 0 else maturity[r]
        out[r] = adjust(business, calendar[r], last, convention[r])


def redemption_dates(terms: BondTerms, dates: Schedule) -> np.ndarray:
    """The redemption's payment date of each row (day numbers)."""
    out = np.empty(len(terms), dtype=np.int64)
    _redemption_dates(business_table(), dates.slots, dates.counts, dates.buffer, terms.maturity, terms.calendar,
                      terms.payment_convention, out)
    return out


def cash_flows(terms: BondTerms, valuation) -> CashFlows:
    """Settlement, accrued at settlement and the live cash flows of every row valued at ``valuation`` (day
    numbers, per row or one for all). Rows are expected to pass :func:`~distprice.dates.terms.check_terms`."""
    settlement = settlement_dates(terms, valuation)
    dates = schedule(terms)
    live = coupons(terms, dates, after=settlement)
    return CashFlows(settlement=settlement, accrued=accrued(terms, live, np.arange(len(terms)), settlement),
                     coupons=live, redemption_date=redemption_dates(terms, dates),
                     redemption_amount=terms.face * terms.redemption / 100.0)

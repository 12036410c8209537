"""Cash flows of dated bonds: coupons (accrual periods, payment dates, amounts, reference periods), the
redemption, the settlement date, accrued interest, and the live cash flows after settlement. Amounts are in face
units.

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

from .calendars import adjust, advance_days, business_address, business_view, last_business_day
from .civil import add_months, month_end
from .convert import NO_DATE
from .csr import offsets_of
from .daycounts import year_fraction
from .parallel import over_rows
from .registry import UNADJUSTED
from .schedules import schedule_date, shape
from .terms import BondTerms


@dataclass(frozen=True)
class Coupons:
    """Coupons of every row (CSR, in payment order): row r owns ``[offsets[r], offsets[r + 1])`` of
    ``accrual_start``, ``accrual_end``, ``payment`` (day numbers), ``amount`` (face units) and
    ``reference_start`` (day numbers: the reference period ends at the accrual end, and starts elsewhere than
    the accrual start only for an irregular first period). ``after`` (per row) is the date on or before which
    paid coupons were left out (``NO_DATE``: none were)."""

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


@numba.njit(cache=True, nogil=True)
def _count(lo, hi, address, issue, maturity, coupon, frequency, calendar, accrual_convention, payment_convention,
           end_of_month, after, counts, redemption):
    business = business_view(address)
    for r in range(lo, hi):
        row = shape(business, issue[r], maturity[r], coupon[r], frequency[r], calendar[r], accrual_convention[r],
                    end_of_month[r])
        a, b = 1, row.periods + 1        # the first coupon i in 1..N paid after ``after`` (N + 1: none)
        while a < b:
            i = (a + b) // 2
            end = schedule_date(business, row, i, issue[r], calendar[r], accrual_convention[r])
            if adjust(business, calendar[r], end, payment_convention[r]) > after[r]:
                b = i
            else:
                a = i + 1
        counts[r] = row.periods + 1 - a
        last = schedule_date(business, row, row.periods, issue[r], calendar[r], accrual_convention[r]) \
            if row.periods > 0 else maturity[r]
        redemption[r] = adjust(business, calendar[r], last, payment_convention[r])


@numba.njit(cache=True, nogil=True)
def _fill(lo, hi, address, issue, maturity, coupon, frequency, calendar, accrual_convention, payment_convention,
          end_of_month, day_count, face, offsets, start, end, payment, amount, reference):
    business = business_view(address)
    for r in range(lo, hi):
        k, n = offsets[r], offsets[r + 1] - offsets[r]
        if n == 0:
            continue
        row = shape(business, issue[r], maturity[r], coupon[r], frequency[r], calendar[r], accrual_convention[r],
                    end_of_month[r])
        first = row.periods + 1 - n
        d0 = schedule_date(business, row, first - 1, issue[r], calendar[r], accrual_convention[r])
        for i in range(first, row.periods + 1):
            d1 = schedule_date(business, row, i, issue[r], calendar[r], accrual_convention[r])
            b = d0
            if i == 1 and not row.regular:
                b = _reference_start(business, d1, row.tenor, calendar[r], accrual_convention[r], end_of_month[r])
            start[k], end[k], reference[k] = d0, d1, b
            payment[k] = adjust(business, calendar[r], d1, payment_convention[r])
            amount[k] = face[r] * coupon[r] * year_fraction(day_count[r], d0, d1, b, d1)
            k += 1
            d0 = d1


def _coupons(terms: BondTerms, after) -> tuple[Coupons, np.ndarray]:
    n = len(terms)
    after = np.full(n, NO_DATE, np.int64) if after is None else np.ascontiguousarray(
        np.broadcast_to(np.asarray(after, dtype=np.int64), (n,)))
    business = business_address()
    rules = (terms.issue, terms.maturity, terms.coupon, terms.frequency, terms.calendar, terms.accrual_convention,
             terms.payment_convention, terms.end_of_month)
    counts, redemption = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    over_rows(_count, n, business, *rules, after, counts, redemption)
    offsets = offsets_of(counts)
    columns = [np.empty(offsets[-1], dtype=dtype) for dtype in (np.int64,) * 3 + (np.float64, np.int64)]
    over_rows(_fill, n, business, *rules, terms.day_count, terms.face, offsets, *columns)
    return Coupons(offsets, *columns, after), redemption


def coupons(terms: BondTerms, after=None) -> Coupons:
    """The coupons of every row paid after ``after`` (day numbers per row, or one for all; None: every
    coupon). Rows are expected to pass :func:`~distprice.dates.terms.check_terms`."""
    return _coupons(terms, after)[0]


def redemption_dates(terms: BondTerms) -> np.ndarray:
    """The redemption's payment date of each row (day numbers)."""
    return _coupons(terms, np.iinfo(np.int64).max)[1]


@numba.njit(cache=True, nogil=True)
def _accrued(lo, hi, offsets, start, end, payment, reference, rows, days, day_count, face, coupon, out):
    for j in range(lo, hi):
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
            out[j] = face[r] * coupon[r] * year_fraction(day_count[r], start[a], min(d, end[a]), reference[a], end[a])


def accrued(terms: BondTerms, table: Coupons, rows, days) -> np.ndarray:
    """Accrued interest (face units) of row ``rows[j]`` at day ``days[j]`` (arrays broadcast together; e.g. a
    row's exercise dates). ValueError for a day before the table's ``after`` date of its row: coupons paid before
    it were left out."""
    rows, days = np.broadcast_arrays(np.asarray(rows, dtype=np.int64), np.asarray(days, dtype=np.int64))
    dims = rows.shape
    rows, days = np.ascontiguousarray(rows.ravel()), np.ascontiguousarray(days.ravel())
    early = days < table.after[rows]
    if np.any(early):
        raise ValueError(f"{int(early.sum())} date(s) precede the coupons kept for their row (first at position "
                         f"{int(np.flatnonzero(early)[0])}): use a coupon table cut at or before them")
    out = np.empty(dims, dtype=np.float64)
    over_rows(_accrued, len(days), table.offsets, table.accrual_start, table.accrual_end, table.payment,
              table.reference_start, rows, days, terms.day_count, terms.face, terms.coupon, out.reshape(-1))
    return out


def settlement_dates(terms: BondTerms, valuation) -> np.ndarray:
    """``max(issue, advance(valuation, settlement_days))`` on each row's calendar (day numbers)."""
    valuation = np.broadcast_to(np.asarray(valuation, dtype=np.int64), (len(terms),))
    return np.maximum(terms.issue, advance_days(terms.calendar, valuation, terms.settlement_days))


def cash_flows(terms: BondTerms, valuation) -> CashFlows:
    """Settlement, accrued at settlement and the live cash flows of every row valued at ``valuation`` (day
    numbers, per row or one for all). Rows are expected to pass :func:`~distprice.dates.terms.check_terms`."""
    settlement = settlement_dates(terms, valuation)
    live, redemption = _coupons(terms, settlement)
    return CashFlows(settlement=settlement, accrued=accrued(terms, live, np.arange(len(terms)), settlement),
                     coupons=live, redemption_date=redemption,
                     redemption_amount=terms.face * terms.redemption / 100.0)

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
class Settled:
    """Every row at its valuation date: ``settlement`` (day numbers), ``accrued`` at settlement (face units),
    ``live`` (the number of coupons paid after settlement) and the redemption (``redemption_date``,
    ``redemption_amount`` in face units; live only where ``redemption_date > settlement``). The live coupons
    are the last ``live`` of the row's schedule: kernels make the ones they need (:func:`coupon_period`)."""

    settlement: np.ndarray
    accrued: np.ndarray
    live: np.ndarray
    redemption_date: np.ndarray
    redemption_amount: np.ndarray

    @property
    def matured(self) -> np.ndarray:
        """Rows whose redemption is paid on or before settlement: nothing left to price."""
        return self.redemption_date <= self.settlement


@dataclass(frozen=True)
class CashFlows(Settled):
    """:class:`Settled` with the table of the live ``coupons``."""

    coupons: Coupons


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
def coupon_period(business, row, i, d1, issue, calendar, convention, end_of_month):
    """Coupon i's (1..N) accrual start d(i-1) and reference start, d1 = d(i) its accrual end, for a row of
    :data:`~distprice.dates.schedules.Shape` ``row``."""
    d0 = schedule_date(business, row, i - 1, issue, calendar, convention)
    if i == 1 and not row.regular:
        return d0, _reference_start(business, d1, row.tenor, calendar, convention, end_of_month)
    return d0, d0


@numba.njit(cache=True)
def payment_date(business, row, i, issue, calendar, accrual_convention, payment_convention):
    """The payment date of coupon i (1..N): d(i) moved by the payment convention."""
    return adjust(
        business, calendar, schedule_date(business, row, i, issue, calendar, accrual_convention), payment_convention
    )


@numba.njit(cache=True)
def first_live(business, row, issue, calendar, accrual_convention, payment_convention, after):
    """The number (1..N; N + 1: none) of a row's first coupon paid after ``after``."""
    a, b = 1, row.periods + 1
    while a < b:
        i = (a + b) // 2
        if payment_date(business, row, i, issue, calendar, accrual_convention, payment_convention) > after:
            b = i
        else:
            a = i + 1
    return a


@numba.njit(cache=True, nogil=True)
def _settle(
    lo,
    hi,
    address,
    issue,
    maturity,
    coupon,
    frequency,
    calendar,
    accrual_convention,
    payment_convention,
    end_of_month,
    day_count,
    face,
    after,
    live,
    redemption,
    accrued,
):
    business = business_view(address)
    for r in range(lo, hi):
        row = shape(
            business,
            issue[r],
            maturity[r],
            coupon[r],
            frequency[r],
            calendar[r],
            accrual_convention[r],
            end_of_month[r],
        )
        a = first_live(business, row, issue[r], calendar[r], accrual_convention[r], payment_convention[r], after[r])
        live[r] = row.periods + 1 - a
        accrued[r] = 0.0
        if a <= row.periods:
            d1 = schedule_date(business, row, a, issue[r], calendar[r], accrual_convention[r])
            d0, b = coupon_period(business, row, a, d1, issue[r], calendar[r], accrual_convention[r], end_of_month[r])
            if after[r] > d0:
                accrued[r] = face[r] * coupon[r] * year_fraction(day_count[r], d0, min(after[r], d1), b, d1)
        last = (
            schedule_date(business, row, row.periods, issue[r], calendar[r], accrual_convention[r])
            if row.periods > 0
            else maturity[r]
        )
        redemption[r] = adjust(business, calendar[r], last, payment_convention[r])


@numba.njit(cache=True, nogil=True)
def _fill(
    lo,
    hi,
    address,
    issue,
    maturity,
    coupon,
    frequency,
    calendar,
    accrual_convention,
    payment_convention,
    end_of_month,
    day_count,
    face,
    offsets,
    start,
    end,
    payment,
    amount,
    reference,
):
    business = business_view(address)
    for r in range(lo, hi):
        k, n = offsets[r], offsets[r + 1] - offsets[r]
        if n == 0:
            continue
        row = shape(
            business,
            issue[r],
            maturity[r],
            coupon[r],
            frequency[r],
            calendar[r],
            accrual_convention[r],
            end_of_month[r],
        )
        for i in range(row.periods + 1 - n, row.periods + 1):
            d1 = schedule_date(business, row, i, issue[r], calendar[r], accrual_convention[r])
            d0, b = coupon_period(business, row, i, d1, issue[r], calendar[r], accrual_convention[r], end_of_month[r])
            start[k], end[k], reference[k] = d0, d1, b
            payment[k] = adjust(business, calendar[r], d1, payment_convention[r])
            amount[k] = face[r] * coupon[r] * year_fraction(day_count[r], d0, d1, b, d1)
            k += 1


def _rules(terms: BondTerms) -> tuple:
    """The columns that fix a row's schedule and payments (:func:`_settle`'s and :func:`_fill`'s)."""
    return (
        terms.issue,
        terms.maturity,
        terms.coupon,
        terms.frequency,
        terms.calendar,
        terms.accrual_convention,
        terms.payment_convention,
        terms.end_of_month,
        terms.day_count,
        terms.face,
    )


def settle(terms: BondTerms, valuation=None, *, after=None) -> Settled:
    """Settlement, accrued at settlement, live coupon counts and the redemption of every row valued at
    ``valuation`` (day numbers, per row or one for all); with ``after`` instead, the coupons paid after those
    days are live and accrued is taken at them. Rows are expected to pass
    :func:`~distprice.dates.terms.check_terms`."""
    n = len(terms)
    if (valuation is None) == (after is None):
        raise ValueError("settle needs a valuation date or the days after which coupons are live, not both")
    if after is None:
        after = settlement_dates(terms, valuation)
    after = np.ascontiguousarray(np.broadcast_to(np.asarray(after, dtype=np.int64), (n,)))
    live, redemption, accrued_s = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.float64)
    over_rows(_settle, n, business_address(), *_rules(terms), after, live, redemption, accrued_s)
    return Settled(
        settlement=after,
        accrued=accrued_s,
        live=live,
        redemption_date=redemption,
        redemption_amount=terms.face * terms.redemption / 100.0,
    )


def _coupons(terms: BondTerms, settled: Settled) -> Coupons:
    """The table of the coupons ``settled`` counts as live."""
    offsets = offsets_of(settled.live)
    columns = [np.empty(offsets[-1], dtype=dtype) for dtype in (np.int64,) * 3 + (np.float64, np.int64)]
    over_rows(_fill, len(terms), business_address(), *_rules(terms), offsets, *columns)
    accrual_start, accrual_end, payment, amount, reference_start = columns
    return Coupons(offsets, accrual_start, accrual_end, payment, amount, reference_start, settled.settlement)


def coupons(terms: BondTerms, after=None) -> Coupons:
    """The coupons of every row paid after ``after`` (day numbers per row, or one for all; None: every
    coupon). Rows are expected to pass :func:`~distprice.dates.terms.check_terms`."""
    return _coupons(terms, settle(terms, after=NO_DATE if after is None else after))


def redemption_dates(terms: BondTerms) -> np.ndarray:
    """The redemption's payment date of each row (day numbers)."""
    return settle(terms, after=np.iinfo(np.int64).max).redemption_date


@numba.njit(cache=True, nogil=True)
def _accrued(lo, hi, offsets, start, end, payment, reference, rows, days, day_count, face, coupon, out):
    for j in range(lo, hi):
        r, d = rows[j], days[j]
        out[j] = 0.0
        a, b = offsets[r], offsets[r + 1]
        while a < b:  # the first coupon paid after d
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
        raise ValueError(
            f"{int(early.sum())} date(s) precede the coupons kept for their row (first at position "
            f"{int(np.flatnonzero(early)[0])}): use a coupon table cut at or before them"
        )
    out = np.empty(dims, dtype=np.float64)
    over_rows(
        _accrued,
        len(days),
        table.offsets,
        table.accrual_start,
        table.accrual_end,
        table.payment,
        table.reference_start,
        rows,
        days,
        terms.day_count,
        terms.face,
        terms.coupon,
        out.reshape(-1),
    )
    return out


def settlement_dates(terms: BondTerms, valuation) -> np.ndarray:
    """``max(issue, advance(valuation, settlement_days))`` on each row's calendar (day numbers)."""
    valuation = np.broadcast_to(np.asarray(valuation, dtype=np.int64), (len(terms),))
    return np.maximum(terms.issue, advance_days(terms.calendar, valuation, terms.settlement_days))


def cash_flows(terms: BondTerms, valuation) -> CashFlows:
    """Settlement, accrued at settlement and the live cash flows of every row valued at ``valuation`` (day
    numbers, per row or one for all). Rows are expected to pass :func:`~distprice.dates.terms.check_terms`."""
    settled = settle(terms, valuation)
    return CashFlows(**vars(settled), coupons=_coupons(terms, settled))

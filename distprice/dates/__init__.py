"""Real dates for dated bonds: day numbers, day counts, calendars, schedules, coupons, accrued and settlement,
vectorised over a whole portfolio.

Dates are day numbers: int64 days since 1970-01-01 (``numpy.datetime64[D]`` viewed as integers; ``NO_DATE``
for a missing one). Conventions are int8 codes of the registries ``DAY_COUNTS``, ``CALENDARS`` and
``CONVENTIONS``. Per-row variable-length results are CSR tables (``offsets`` of length rows + 1 and flat
arrays). Amounts are in face units.

Typical use::

    terms = terms_from_frame(portfolio)                 # or bond_terms(...); InvalidInputError on bad rows
    settled = settle(terms, valuation)                  # settlement, accrued(S), live coupon counts, redemption
    flows = cash_flows(terms, valuation)                 # the same and the live coupons' table
    accrued(terms, flows.coupons, rows, exercise_days)  # accrued at any dates on or after settlement
"""

from .calendars import adjust_days, advance_days, business_days, business_table, is_business_day, last_business_days
from .cashflows import (
    CashFlows,
    Coupons,
    Settled,
    accrued,
    cash_flows,
    coupons,
    redemption_dates,
    settle,
    settlement_dates,
)
from .convert import EPOCH, NO_DATE, day_numbers, parse_dates, to_arrow, to_datetime64, to_iso
from .csr import DateTable
from .daycounts import year_fractions
from .holidays import FIRST_DAY, LAST_DAY, quantlib_calendar
from .registry import CALENDARS, CONVENTIONS, DAY_COUNTS, FREQUENCIES, Registry
from .schedules import Schedule, schedule
from .terms import DEFAULTS, BondTerms, bond_terms, check_terms, terms_from_frame

__all__ = [
    "adjust_days",
    "advance_days",
    "business_days",
    "business_table",
    "is_business_day",
    "last_business_days",
    "CashFlows",
    "Coupons",
    "Settled",
    "accrued",
    "cash_flows",
    "coupons",
    "redemption_dates",
    "settle",
    "settlement_dates",
    "EPOCH",
    "NO_DATE",
    "day_numbers",
    "parse_dates",
    "to_arrow",
    "to_datetime64",
    "to_iso",
    "DateTable",
    "year_fractions",
    "FIRST_DAY",
    "LAST_DAY",
    "quantlib_calendar",
    "CALENDARS",
    "CONVENTIONS",
    "DAY_COUNTS",
    "FREQUENCIES",
    "Registry",
    "Schedule",
    "schedule",
    "DEFAULTS",
    "BondTerms",
    "bond_terms",
    "check_terms",
    "terms_from_frame",
]

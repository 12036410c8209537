"""The dated terms of a portfolio's bonds, one entry per row, in the arrays the kernels read; reading them from
a table (contract column names and defaults) and checking the rules the date machinery relies on.

A row pays coupons when ``coupon > 0``: it needs ``issue_date`` and ``coupon_frequency`` 1, 2, 4 or 12; any other
row is a zero-coupon bond (its frequency and issue date are not used).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import cast

import numpy as np
import pandas as pd

from ..errors import InvalidInputError, Problem
from .calendars import adjust_days
from .convert import NO_DATE, day_numbers, parse_dates
from .holidays import FIRST_DAY, LAST_DAY
from .registry import CALENDARS, CONVENTIONS, DAY_COUNTS, FREQUENCIES

DEFAULTS = {
    "coupon": 0.0,
    "coupon_frequency": 0,
    "day_count": "30/360",
    "calendar": "none",
    "accrual_convention": "unadjusted",
    "payment_convention": "following",
    "end_of_month": False,
    "settlement_days": 0,
    "face": 100.0,
    "redemption": 100.0,
}
"""Defaults of the optional dated-bond columns; ``maturity_date`` is required, ``issue_date`` when coupon > 0."""
MAX_SETTLEMENT_DAYS = 365
"""The most business days from a valuation date to settlement a row may take."""


@dataclass(frozen=True)
class BondTerms:
    """Terms of n dated bonds, each field an array of length n.

    ``issue``, ``maturity``: day numbers (``issue`` is ``NO_DATE`` where not given); ``frequency``: coupons a
    year (int64); ``day_count``, ``calendar``, ``accrual_convention``, ``payment_convention``: int8 codes of the
    registries; ``end_of_month``: bool; ``settlement_days``: int64 business days; ``face``: notional;
    ``coupon``: annual rate (0.05 = 5 %); ``redemption``: % of face (float64).
    """

    issue: np.ndarray
    maturity: np.ndarray
    frequency: np.ndarray
    day_count: np.ndarray
    calendar: np.ndarray
    accrual_convention: np.ndarray
    payment_convention: np.ndarray
    end_of_month: np.ndarray
    settlement_days: np.ndarray
    face: np.ndarray
    coupon: np.ndarray
    redemption: np.ndarray

    def __len__(self) -> int:
        return len(self.maturity)

    def take(self, rows) -> BondTerms:
        """The terms of ``rows`` (positions or a mask)."""
        return BondTerms(*(getattr(self, f.name)[rows] for f in fields(self)))


_DTYPES = {
    "issue": np.int64,
    "maturity": np.int64,
    "frequency": np.int64,
    "day_count": np.int8,
    "calendar": np.int8,
    "accrual_convention": np.int8,
    "payment_convention": np.int8,
    "end_of_month": np.bool_,
    "settlement_days": np.int64,
    "face": np.float64,
    "coupon": np.float64,
    "redemption": np.float64,
}


def bond_terms(
    maturity,
    issue=NO_DATE,
    *,
    coupon=0.0,
    frequency=0,
    day_count="30/360",
    calendar="none",
    accrual_convention="unadjusted",
    payment_convention="following",
    end_of_month=False,
    settlement_days=0,
    face=100.0,
    redemption=100.0,
) -> BondTerms:
    """:class:`BondTerms` from columns or scalars (broadcast to the longest): dates in any form
    :func:`~distprice.dates.convert.day_numbers` reads, conventions as names or codes. No rule is checked here
    (see :func:`check_terms`); unknown names and non-dates raise ValueError."""
    columns = dict(
        issue=day_numbers(issue if np.ndim(issue) else np.atleast_1d(issue)),
        maturity=day_numbers(maturity if np.ndim(maturity) else np.atleast_1d(maturity)),
        frequency=frequency,
        day_count=DAY_COUNTS.codes(day_count),
        calendar=CALENDARS.codes(calendar),
        accrual_convention=CONVENTIONS.codes(accrual_convention),
        payment_convention=CONVENTIONS.codes(payment_convention),
        end_of_month=end_of_month,
        settlement_days=settlement_days,
        face=face,
        coupon=coupon,
        redemption=redemption,
    )
    size = max(np.size(v) for v in columns.values())
    return BondTerms(
        **{
            k: np.ascontiguousarray(np.broadcast_to(np.asarray(v, dtype=_DTYPES[k]), (size,)))
            for k, v in columns.items()
        }
    )


def check_terms(terms: BondTerms, valuation=None, where: Callable[[int], str] | None = None) -> list[Problem]:
    """Every broken rule of ``terms`` (and of the valuation dates, if given), one :class:`Problem` per row and
    rule, named by ``where(position)`` (default ``row <position + 1>``) and the contract's column names."""
    where = where or (lambda p: f"row {p + 1}")
    found: list[tuple[int, int, str, str]] = []

    def flag(mask, column, rule):
        found.extend((int(p), len(found), column, rule) for p in np.flatnonzero(mask))

    def date_range(days, column, present):
        flag(present & ((days < FIRST_DAY) | (days > LAST_DAY)), column, "must lie in 1901-01-01 .. 2199-12-31")

    coupons = terms.coupon > 0
    flag(terms.maturity == NO_DATE, "maturity_date", "is required")
    date_range(terms.maturity, "maturity_date", terms.maturity != NO_DATE)
    has_issue = terms.issue != NO_DATE
    flag(coupons & ~has_issue, "issue_date", "is required when coupon > 0")
    date_range(terms.issue, "issue_date", has_issue)
    flag(~(terms.coupon >= 0), "coupon", "must be a number >= 0")
    flag(
        coupons & ~np.isin(terms.frequency, FREQUENCIES),
        "coupon_frequency",
        f"must be one of {', '.join(map(str, FREQUENCIES))} when coupon > 0",
    )
    flag(
        (terms.settlement_days < 0) | (terms.settlement_days > MAX_SETTLEMENT_DAYS),
        "settlement_days",
        f"must be between 0 and {MAX_SETTLEMENT_DAYS}",
    )
    ordered = coupons & has_issue & (terms.maturity != NO_DATE)
    flag(ordered & (terms.issue >= terms.maturity), "issue_date", "must be before maturity_date")
    rows = np.flatnonzero(ordered & (terms.issue < terms.maturity))
    inside = rows[(terms.issue[rows] >= FIRST_DAY) & (terms.maturity[rows] <= LAST_DAY)]
    issue_day = adjust_days(terms.calendar[inside], terms.issue[inside], terms.accrual_convention[inside])
    same = issue_day == adjust_days(terms.calendar[inside], terms.maturity[inside], terms.accrual_convention[inside])
    flag(
        np.isin(np.arange(len(terms)), inside[same]),
        "maturity_date",
        "adjusts to the same business day as issue_date: the bond has no coupon period",
    )
    if valuation is not None:
        valuation = np.broadcast_to(np.asarray(valuation, dtype=np.int64), (len(terms),))
        flag(valuation == NO_DATE, "valuation_date", "is required")
        date_range(valuation, "valuation_date", valuation != NO_DATE)
    found.sort()
    return [Problem(p, where(p), column, rule) for p, _, column, rule in found]


def terms_from_frame(frame: pd.DataFrame, table: str = "portfolio", id_column: str = "id") -> BondTerms:
    """:class:`BondTerms` of a table with the contract's columns (``maturity_date``, ``issue_date``, ``coupon``,
    ``coupon_frequency``, ``day_count``, ``calendar``, ``accrual_convention``, ``payment_convention``,
    ``end_of_month``, ``settlement_days``, ``face``, ``redemption``; missing columns and empty cells take
    :data:`DEFAULTS`). InvalidInputError lists every problem: unknown names, non-dates, non-numbers and the rules
    of :func:`check_terms`, each naming ``<table> row <n> (id '<id>')`` and the column."""
    ids = frame[id_column].to_numpy(dtype=object) if id_column in frame.columns else None

    def where(p: int) -> str:
        label = f" ({id_column} '{ids[p]}')" if ids is not None and not pd.isna(ids[p]) else ""
        return f"{table} row {p + 1}{label}"

    if "maturity_date" not in frame.columns:
        raise InvalidInputError([Problem(None, table, "maturity_date", f"{table} must have this column")])
    terms, problems = read_terms(frame, where)
    if problems:
        raise InvalidInputError(problems)
    return terms


def read_terms(frame: pd.DataFrame, where: Callable[[int], str]) -> tuple[BondTerms, list[Problem]]:
    """:class:`BondTerms` of every row of ``frame`` (see :func:`terms_from_frame`) and every problem found,
    sorted by row, each named by ``where(position)``; rows with a problem hold defaults where the value was
    unusable."""
    n = len(frame)
    problems: list[Problem] = []

    def flag(positions, column, rule):
        problems.extend(Problem(int(p), where(int(p)), column, rule) for p in positions)

    def dates(column):
        if column not in frame.columns:
            return np.full(n, NO_DATE, dtype=np.int64)
        days, bad = parse_dates(frame[column])
        flag(bad, column, "must be a date YYYY-MM-DD")
        return days

    def names(column, registry):
        if column not in frame.columns:
            return np.full(n, registry.code(DEFAULTS[column]), dtype=np.int8)
        codes, unknown = registry.encode(frame[column], default=DEFAULTS[column])
        flag(unknown, column, registry.rule())
        return np.maximum(codes, 0)

    def numbers(column, integer=False):
        if column not in frame.columns:
            return np.full(n, DEFAULTS[column], dtype=np.float64)
        raw = frame[column]
        values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan, copy=True)
        empty = raw.isna().to_numpy()
        whole = np.isfinite(values) & (values == np.round(values))
        flag(
            np.flatnonzero(~empty & (np.isnan(values) | (integer & ~whole))),
            column,
            "must be an integer" if integer else "must be a number",
        )
        values[empty] = DEFAULTS[column]
        if integer:  # flagged ones: within int64 (a huge or infinite one stays huge for the range rules)
            return np.clip(np.nan_to_num(values), -(2.0**31), 2.0**31)
        return values

    def flags(column):
        if column not in frame.columns:
            return np.zeros(n, dtype=bool)
        codes, labels = pd.factorize(frame[column].astype("string"))  # the distinct values, read once; missing: -1
        text = pd.Series(labels, dtype="string").str.strip().str.lower()
        true, false = (
            text.isin(["true", "1", "1.0", "yes"]).to_numpy(),
            text.isin(["false", "0", "0.0", "no"]).to_numpy(),
        )
        flag(np.flatnonzero(~np.append(true | false, True)[codes]), column, "must be true or false")
        return np.append(true, False)[codes]

    terms = BondTerms(
        issue=dates("issue_date"),
        maturity=dates("maturity_date"),
        frequency=numbers("coupon_frequency", integer=True).astype(np.int64),
        day_count=names("day_count", DAY_COUNTS),
        calendar=names("calendar", CALENDARS),
        accrual_convention=names("accrual_convention", CONVENTIONS),
        payment_convention=names("payment_convention", CONVENTIONS),
        end_of_month=flags("end_of_month"),
        settlement_days=numbers("settlement_days", integer=True).astype(np.int64),
        face=numbers("face"),
        coupon=numbers("coupon"),
        redemption=numbers("redemption"),
    )
    flagged = {(p.position, p.column) for p in problems}
    problems += [p for p in check_terms(terms, where=where) if (p.position, p.column) not in flagged]
    return terms, sorted(problems, key=lambda p: cast(int, p.position))  # every problem here names a row

"""Swaption rows (``instrument`` ``swaption``): the right to enter, on an exercise date, the rest of a
fixed-for-floating swap (physical settlement), european or bermudan, priced on the row's Hull-White tree as an
option on the swap's fixed leg.

On a tree fitted to the curve that also discounts, a floating leg without spread is worth its notional N on each
of its reset dates: its coupons telescope. A receiver swap entered on a date e where the floating leg resets is
then worth the fixed leg's coupons still to come, plus N at the end, less N: a coupon bond less par. So a
receiver swaption is a call on the fixed leg's bond (the swap's fixed rate, schedule and day count, N redeemed at
the end) exercised at a dirty price of 100 % on each exercise date, and a payer swaption is the put: the
row is that bond option, and every engine prices it as one.

A swaption row is dated. Its columns: ``option_type`` ``payer`` or ``receiver``, ``exercise`` ``european`` or
``bermudan``, the swap's ``start_date`` and ``maturity_date``, its ``fixed_rate`` (a decimal > 0) and the fixed
leg's ``coupon_frequency``, ``day_count``, ``calendar``, ``accrual_convention`` and ``end_of_month`` (its
schedule generated back from ``maturity_date``, as a bond's), ``face`` (the notional the price is given
for), ``expiry_date`` and ``first_exercise_date``. A fixed coupon is paid on its accrual end
(``payment_convention``, when given, must be the ``accrual_convention``).

Exercise dates are start dates of the fixed leg's coupon periods (``start_date`` and each coupon's accrual end
but the last) after the valuation date: european, ``expiry_date``, which must be one; bermudan, every one from
``first_exercise_date`` (default: the first) to ``expiry_date``. Exercising on such a date enters the swap of
the fixed coupons whose periods start on or after it; the floating leg is taken to reset there. The row is
valued at its valuation date: its settlement is that date.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from ..curves import MAX_RATE, percent_slip
from ..dates import NO_DATE, parse_dates
from ..dates.cashflows import coupons
from ..dates.terms import BondTerms

SWAPTION = "swaption"
SWAPTION_TYPES = ("payer", "receiver")
AS_BOND_OPTION = {"payer": "put", "receiver": "call"}
"""The bond option a swaption is on its fixed leg's bond (struck at par, dirty)."""
SWAPTION_COLUMNS = ("start_date", "fixed_rate")
"""Columns of swaption rows only."""
BOND_COLUMNS = ("issue_date", "coupon", "redemption", "strike", "settlement_days")
"""Columns of bonds that a swaption row leaves empty: its fixed leg takes them from its own columns."""
RENAMED = {"issue_date": "start_date", "coupon": "fixed_rate"}
"""A bond term's column as a swaption row names it."""
PAR = 100.0
"""A swaption's exercise price on its fixed leg's bond, % of face, dirty."""


def swaption_rules(
    frame: pd.DataFrame, swaption: np.ndarray, present: Callable[[str], np.ndarray], flag: Callable
) -> None:
    """Flags (``flag(mask, column, rule)``) the rules of the swaption columns: ``start_date`` and ``fixed_rate``
    given on swaption rows and only there, the bonds' own columns left empty, ``payment_convention`` the
    ``accrual_convention``; ``present(column)``: where a column holds a value."""
    others = ~swaption
    for column in SWAPTION_COLUMNS:
        flag(others & present(column), column, "is for swaption rows")
    for column in BOND_COLUMNS:
        flag(
            swaption & present(column),
            column,
            "must be empty for a swaption: its fixed leg is given by start_date, fixed_rate and face, exercised at par",
        )
    if not swaption.any():
        return
    flag(swaption & ~present("start_date"), "start_date", "is required (the swap's start)")
    if "start_date" in frame.columns:
        _, bad = parse_dates(frame["start_date"])
        mask = np.zeros(len(frame), bool)
        mask[bad] = True
        flag(swaption & mask, "start_date", "must be a date YYYY-MM-DD")
    rate = _fixed_rate(frame)
    given = present("fixed_rate")
    flag(swaption & ~given, "fixed_rate", "is required (the swap's fixed rate, a decimal)")
    flag(swaption & given & np.isnan(rate), "fixed_rate", "must be a number")
    flag(swaption & ~(rate > 0) & ~np.isnan(rate), "fixed_rate", "must be > 0 (a decimal: 0.03 is 3 %)")
    high = swaption & (rate > MAX_RATE)
    for value in np.unique(rate[high]):
        flag(high & (rate == value), "fixed_rate", percent_slip(float(value), "a fixed rate", "above 1"))
    if "payment_convention" in frame.columns:
        accrual = _text(frame, "accrual_convention").fillna("unadjusted")
        payment = _text(frame, "payment_convention")
        flag(
            swaption & payment.notna().to_numpy() & (payment != accrual).fillna(False).to_numpy(),
            "payment_convention",
            "must be the accrual_convention for a swaption (or empty): its fixed coupons are paid on their accrual "
            "end dates",
        )


def fixed_leg(frame: pd.DataFrame, swaption: np.ndarray) -> pd.DataFrame:
    """``frame`` (a dated rows' term columns) with the swaption rows' fixed leg as a bond's terms: ``issue_date``
    the ``start_date``, ``coupon`` the ``fixed_rate``, ``redemption`` 100, ``payment_convention`` the
    ``accrual_convention``."""
    frame = frame.copy()
    rows = np.flatnonzero(swaption)

    def put(column, values, dtype=object):
        base = frame[column].astype(object) if column in frame.columns else pd.Series(None, frame.index, object)
        base.iloc[rows] = values
        frame[column] = base.astype(dtype) if dtype is not object else base

    start = frame["start_date"].iloc[rows].to_numpy(dtype=object) if "start_date" in frame else [None] * len(rows)
    put("issue_date", start)
    rate = _fixed_rate(frame)[rows]
    put("coupon", np.where(rate > 0, rate, -1.0))  # missing or not > 0: refused as a fixed_rate, not read as no coupon
    put("redemption", PAR)
    accrual = frame["accrual_convention"].iloc[rows].to_numpy(dtype=object) if "accrual_convention" in frame else None
    put("payment_convention", accrual if accrual is not None else "unadjusted")
    return frame


def renamed(problem_column: str, rule: str) -> tuple[str, str]:
    """A bond term's problem as a swaption row's: its column and rule in the swaption's names."""
    rule = rule.replace("issue_date", "start_date").replace("coupon > 0", "fixed_rate > 0")
    return RENAMED.get(problem_column, problem_column), rule.replace("the bond has", "the swap has")


def exercise_dates(
    terms: BondTerms, valuation: np.ndarray, first: np.ndarray, expiry: np.ndarray, european: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The exercise dates of swaption rows (their fixed legs' ``terms``, checked): the start dates of the fixed
    coupon periods after ``valuation``, from ``first`` (``NO_DATE``: any) to ``expiry`` (``european``: expiry
    alone). Returns CSR ``offsets`` and ``day`` (increasing per row), and whether each row's expiry is a start
    date."""
    table = coupons(terms)
    row = np.repeat(np.arange(len(terms)), table.counts)
    start = table.accrual_start
    on_start = np.zeros(len(terms), bool)
    on_start[row[start == expiry[row]]] = True
    low = np.where(european, expiry, np.where(first == NO_DATE, np.iinfo(np.int64).min, first))[row]
    keep = (start > valuation[row]) & (start >= low) & (start <= expiry[row])
    offsets = np.zeros(len(terms) + 1, np.int64)
    np.cumsum(np.bincount(row[keep], minlength=len(terms)), out=offsets[1:])
    return offsets, start[keep], on_start


def _fixed_rate(frame: pd.DataFrame) -> np.ndarray:
    if "fixed_rate" not in frame.columns:
        return np.full(len(frame), np.nan)
    raw = frame["fixed_rate"]
    if pd.api.types.is_bool_dtype(raw.dtype):
        return np.full(len(frame), np.nan)
    return pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def _text(frame: pd.DataFrame, column: str) -> pd.Series:
    if column not in frame.columns:
        return pd.Series(pd.NA, index=frame.index, dtype="string")
    return frame[column].astype("string").str.strip().str.lower()

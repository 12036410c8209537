"""Rows of a curves input that quote deposits and swaps (a value in ``instrument``), each curve of them
bootstrapped into knots (:mod:`distprice.bootstrap`).

A quote row has ``curve``, ``instrument`` (``deposit`` or ``swap``), ``tenor`` (a whole number then ``D``,
``W``, ``M`` or ``Y``: ``3M``, ``10Y``; a swap's in months or years), ``rate`` (decimal), ``valuation_date``
(the day of the quotes, the same on every row of a curve) and, optionally, ``day_count`` (the deposit's or
the fixed leg's, default :data:`DEFAULT_DAY_COUNT`), ``fixed_frequency`` (a swap's fixed payments a year: 1,
2, 4 or 12; required for swaps), ``calendar`` (default ``none``), ``convention`` (``following``,
``modified_following`` (default) or ``preceding``) and ``settlement_days`` (business days to spot, default 2).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .bootstrap import Quote, bootstrap, deposit, swap
from .dates import CALENDARS, DAY_COUNTS, FREQUENCIES, NO_DATE, parse_dates, to_iso
from .errors import Problem

QUOTE_COLUMNS = (
    "instrument",
    "tenor",
    "rate",
    "valuation_date",
    "fixed_frequency",
    "calendar",
    "convention",
    "settlement_days",
)
"""The columns of quote rows only (``curve`` and ``day_count`` are shared with knot rows)."""
KNOT_COLUMNS = ("t", "date", "zero_rate", "discount_factor", "compounding")
"""The columns of knot rows only: a quote row leaves them empty."""
INSTRUMENTS = ("deposit", "swap")
DEFAULT_DAY_COUNT = {"deposit": "ACT/360", "swap": "30/360"}
QUOTE_CONVENTIONS = ("following", "modified_following", "preceding")
DEFAULT_CONVENTION = "modified_following"
DEFAULT_SETTLEMENT_DAYS = 2
MAX_SETTLEMENT_DAYS = 30
QUOTE_DAY_COUNTS = tuple(name for name in DAY_COUNTS.names if name != "ACT/ACT-ICMA")
"""Day counts of quotes: all but ACT/ACT-ICMA, which needs a bond's reference periods."""
TENOR = re.compile(r"\s*(\d+)\s*([DWMY])\s*", re.IGNORECASE)


def quote_rows(table: pd.DataFrame) -> np.ndarray:
    """Where ``table`` (a curves input) has a quote row: a value in ``instrument``."""
    if "instrument" not in table.columns:
        return np.zeros(len(table), dtype=bool)
    return _texts(table["instrument"]) != ""


def _texts(column: pd.Series) -> np.ndarray:
    """A column's cells as stripped text ("" where missing)."""
    return column.astype("string").str.strip().fillna("").to_numpy(dtype=object)


def _column(table: pd.DataFrame, name: str) -> np.ndarray:
    return _texts(table[name]) if name in table.columns else np.full(len(table), "", dtype=object)


def _numbers(table: pd.DataFrame, name: str) -> np.ndarray:
    if name not in table.columns:
        return np.full(len(table), np.nan)
    return pd.to_numeric(table[name], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def curves_from_quotes(
    table: pd.DataFrame, rows: np.ndarray, rate_rule
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], list[Problem]]:
    """The knots (day numbers from the valuation date on, continuous ACT/365F zero rates) of each curve that
    ``table``'s quote rows give, with the problems found; ``rows`` numbers them in the curves input (1-based),
    ``rate_rule(rate)`` is the rule a rate breaks (None for none). A curve with a problem is left out."""
    problems: list[Problem] = []

    def flag(i: int, column: str, rule: str) -> None:
        problems.append(Problem(None, f"curves row {rows[i]}", column, rule))

    days, not_dates = (
        parse_dates(table["valuation_date"])
        if "valuation_date" in table.columns
        else (np.full(len(table), NO_DATE), np.zeros(0, np.int64))
    )
    days[not_dates] = NO_DATE
    cells = {c: _column(table, c) for c in ("instrument", "tenor", "calendar", "convention", "day_count")}
    ids = table["curve"] if "curve" in table.columns else pd.Series([None] * len(table))
    cells["curve"] = ids.astype(str).where(ids.notna(), "").to_numpy(dtype=object)  # ids as knot rows read them
    cells.update({c: _numbers(table, c) for c in ("rate", "fixed_frequency", "settlement_days")})
    knot_cells = [(c, _column(table, c) != "") for c in KNOT_COLUMNS if c in table.columns]
    quotes: dict[str, list[tuple[int, Quote | None]]] = {}
    for i in range(len(table)):
        for column, given in knot_cells:
            if given[i]:
                flag(i, column, "a quote row (one with an instrument) takes no knot: leave it empty")
        if days[i] == NO_DATE:
            flag(i, "valuation_date", "must be a date YYYY-MM-DD: the day of the quotes")
        row = {c: values[i] for c, values in cells.items()}
        quote = _quote(row, int(days[i]), rate_rule, lambda column, rule, i=i: flag(i, column, rule))
        quotes.setdefault(cells["curve"][i], []).append((i, quote if days[i] != NO_DATE else None))
    knots = {}
    for name, given in quotes.items():
        first = given[0][0]
        differing = [i for i, _ in given if days[i] != days[first]]
        for i in differing:
            flag(i, "valuation_date", f"must be the same on every row of curve '{name}'")
        if name and not differing and all(q is not None for _, q in given):
            built = _built(name, int(days[first]), [(rows[i], i, q) for i, q in given if q is not None], flag)
            if built is not None:
                knots[name] = built
    problems.sort(key=lambda p: int(p.where.removeprefix("curves row ")))
    return knots, problems


def _quote(row: dict, valuation: int, rate_rule, flag) -> Quote | None:
    """The quote of one row (its cells by column), or None after flagging (``flag(column, rule)``) every rule
    it breaks."""
    broken = []

    def rule(column: str, text: str) -> None:
        broken.append(column)
        flag(column, text)

    kind = row["instrument"].lower()
    if not row["curve"]:
        rule("curve", "curve id is required")
    if kind not in INSTRUMENTS:
        rule("instrument", f"must be {' or '.join(INSTRUMENTS)} (or empty on a row that gives a knot)")
    tenor = TENOR.fullmatch(row["tenor"])
    count, unit = (int(tenor[1]), tenor[2].upper()) if tenor else (0, "")
    if count < 1:
        rule("tenor", "must be a whole number >= 1 then D, W, M or Y, such as 3M or 10Y")
    elif kind == "swap" and unit not in "MY":
        rule("tenor", "a swap's tenor is in months (M) or years (Y)")
    rate = row["rate"]
    if not np.isfinite(rate):
        rule("rate", "must be a finite number")
    elif (slip := rate_rule(rate)) is not None:
        rule("rate", slip)
    frequency = row["fixed_frequency"]
    if kind == "swap" and frequency not in FREQUENCIES:
        rule("fixed_frequency", f"a swap's fixed payments a year: one of {', '.join(map(str, FREQUENCIES))}")
    if kind == "deposit" and np.isfinite(frequency):
        rule("fixed_frequency", "applies to swaps only: leave it empty on a deposit")
    settlement = DEFAULT_SETTLEMENT_DAYS if np.isnan(row["settlement_days"]) else row["settlement_days"]
    if not (0 <= settlement <= MAX_SETTLEMENT_DAYS and settlement == int(settlement)):
        rule("settlement_days", f"must be a whole number from 0 to {MAX_SETTLEMENT_DAYS}")
    calendar = row["calendar"] or "none"
    if calendar.upper() not in (c.upper() for c in CALENDARS.names):
        rule("calendar", CALENDARS.rule())
    convention = (row["convention"] or DEFAULT_CONVENTION).lower()
    if convention not in QUOTE_CONVENTIONS:
        rule("convention", f"must be one of {', '.join(QUOTE_CONVENTIONS)} (a quote's dates are business days)")
    day_count = (row["day_count"] or DEFAULT_DAY_COUNT.get(kind, "ACT/360")).upper()
    if day_count not in QUOTE_DAY_COUNTS:
        rule("day_count", f"a quote's day count must be one of {', '.join(QUOTE_DAY_COUNTS)}")
    if broken or valuation == NO_DATE:
        return None
    if kind == "deposit":
        return deposit(valuation, count, unit, rate, day_count, calendar, convention, int(settlement))
    months = count * (12 if unit == "Y" else 1)
    return swap(valuation, months, rate, int(frequency), day_count, calendar, convention, int(settlement))


def _built(
    name: str, valuation: int, given: list[tuple[int, int, Quote]], flag
) -> tuple[np.ndarray, np.ndarray] | None:
    """The knots of one curve's quotes of ``valuation`` (each with its row number and position), or None after
    flagging why there are none."""
    given = sorted(given, key=lambda g: g[2].end)
    clashes = [(row, j, q) for (row, _, p), (_, j, q) in zip(given, given[1:]) if q.end == p.end]
    for row, j, q in clashes:
        flag(
            j,
            "tenor",
            f"ends on {to_iso([q.end])[0]}, as curves row {row} does: a curve's quotes end on different days",
        )
    if clashes:
        return None
    quotes = [q for _, _, q in given]
    zeros, failed = bootstrap(valuation, quotes)
    if failed is not None:
        flag(
            given[failed][1],
            "rate",
            f"no zero rate of curve '{name}' prices this quote to par after the quotes ending before it "
            "(a rate out of line with its neighbours?)",
        )
        return None
    return np.array([valuation] + [q.end for q in quotes], dtype=np.int64), zeros

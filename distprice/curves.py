"""Zero curves: continuously compounded zero rates, linear in time between knots, flat outside.

Times are in years from the valuation date, ``P(0, t) = exp(-z(t) * t)``. A curve's knots are given by
``t`` (years), or by ``date``: a dated knot lies ``days / D`` years after the valuation date, D = 360 for
the day count ``ACT/360`` and 365 for any other (``ACT/365F``, the default), and the curve of a valuation
date is :meth:`ZeroCurve.at` it. D also sets the years of the trees priced on the curve: a date d is
``t(d) = (d - V) / D`` there. A curve set maps a curve id to a :class:`ZeroCurve`; the built-in curve ``hull``
(Hull's Table 30.2 example) is always available unless the curves input defines a curve of that name itself.

A curves input gives each curve one of three ways, all read into such knots (the trees take nothing else):
``zero_rate`` knots under a ``compounding`` (:mod:`distprice.compounding`) and any ``day_count`` but
ACT/ACT-ICMA (by date, converted on each valuation date: :class:`~distprice.compounding.ZeroQuote`);
``discount_factor`` knots, starting with 1 on the curve's own day (t = 0 or its first date), each read as the
continuous zero rate of its discount factor; or deposit and swap quotes, bootstrapped
(:mod:`distprice.curve_quotes`).

Zero rates are decimals: one beyond ±:data:`MAX_RATE` is refused as a percentage typed as a number unless
``allow_large_rates``. A curve by date is anchored on its valuation date: a row is refused when its curve has
no knot after the row's valuation date, or one before it (:func:`~distprice.lattice.instruments.prepare`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .compounding import COMPOUNDINGS, DEFAULT_COMPOUNDING, ZeroQuote, continuous_rates
from .curve_quotes import QUOTE_COLUMNS, curves_from_quotes, quote_rows
from .dates import DAY_COUNTS, NO_DATE, parse_dates
from .errors import InvalidInputError, Problem
from .tables import check_names, read_table

_HULL_DAYS = np.array([3, 31, 62, 94, 185, 367, 731, 1096, 1461, 1826, 2194, 2558, 2922, 3287, 3653])
# fmt: off
_HULL_RATES = np.array([0.0501772, 0.0498284, 0.0497234, 0.0496157, 0.0499058, 0.0509389, 0.0579733,
                        0.0630595, 0.0673464, 0.0694816, 0.0708807, 0.0727527, 0.0730852, 0.0739790,
                        0.0749015])
# fmt: on
HULL_CURVE = (_HULL_DAYS / 365.0, _HULL_RATES)
"""Knots of the built-in ``hull`` curve: (t in years, zero rate continuously compounded)."""

CURVE_COLUMNS = ("curve", "zero_rate")
"""Columns every curves input of knots has (``discount_factor`` may stand for ``zero_rate``), besides ``t`` or
``date`` (and the optional ``day_count`` and ``compounding``)."""
DAYS_PER_YEAR = {"ACT/365F": 365, "ACT/360": 360}
"""The day counts of the trees' years and their D: a curve year is D calendar days."""
CURVE_DAY_COUNTS = tuple(name for name in DAY_COUNTS.names if name != "ACT/ACT-ICMA")
"""The day counts of zero rates by date (ACT/ACT-ICMA needs a bond's reference periods); knots by ``t`` and
discount factors take those of :data:`DAYS_PER_YEAR` only."""
KNOWN_COLUMNS = (*CURVE_COLUMNS, "t", "date", "day_count", "discount_factor", "compounding", *QUOTE_COLUMNS)
MAX_RATE = 1.0
"""The largest size of a zero rate (and of a coupon) taken as given: 1 is 100 % a year. A larger one is almost
always a percentage typed as a number (3.86 for 3.86 %); ``allow_large_rates`` takes it."""


def percent_slip(value: float, what: str = "a zero rate", beyond: str = "beyond ±1") -> str:
    """The rule a rate ``value`` outside its bounds breaks (``what`` names the rate, ``beyond`` where it lies),
    with the decimal it most likely stands for."""
    rule = f"{what} is a decimal: 0.05 is 5 %; {beyond} it needs allow_large_rates, --allow-large-rates"
    if abs(value) <= 100:
        return f"{value:g} looks like a percentage: write {value / 100:g} ({rule})"
    return f"{value:g} is not a rate ({rule})"


@dataclass(frozen=True)
class ZeroCurve:
    """A zero curve given by knots ``t`` (years, strictly increasing) and ``zero_rate``; ``dates`` (day numbers)
    when its knots were given by date (``t`` then holds them in years from :attr:`valuation`). ``day_count``
    is the trees' (:data:`DAYS_PER_YEAR`). With a ``quote``, the zero rates by date are as given, under another
    compounding or day count: :meth:`at` converts them."""

    t: np.ndarray
    zero_rate: np.ndarray
    day_count: str = "ACT/365F"
    dates: np.ndarray | None = None
    valuation: int | None = None
    quote: ZeroQuote | None = None

    @property
    def days_per_year(self) -> int:
        """D of the curve's day count."""
        return DAYS_PER_YEAR[self.day_count]

    def at(self, valuation: int) -> ZeroCurve:
        """This curve seen from the valuation date ``valuation`` (a day number): dated knots at
        ``(date - valuation) / D`` years, quoted rates converted to continuous ones there; a curve with knots in
        years is the same on every date."""
        if self.dates is None or (valuation == self.valuation and self.quote is None):
            return self
        t = (self.dates - valuation) / self.days_per_year
        if self.quote is None:
            return dataclasses.replace(self, t=t, valuation=valuation)
        rates = self.quote.zero_rates(self.zero_rate, self.dates, valuation, t)
        return dataclasses.replace(self, t=t, zero_rate=rates, valuation=valuation, quote=None)

    def shifted(self, shift: float) -> ZeroCurve:
        """The same knots with ``shift`` (decimal) added to every (continuous) zero rate."""
        if self.quote is not None:
            return dataclasses.replace(self, quote=self.quote.shifted(shift))
        return dataclasses.replace(self, zero_rate=self.zero_rate + shift)

    def rate(self, t):
        """Zero rate at ``t`` years: linear between knots, flat beyond the first and last knot."""
        return np.interp(t, self.t, self.zero_rate)

    def discount(self, t):
        """Discount factor ``P(0, t) = exp(-z(t) t)``."""
        t = np.asarray(t, dtype=np.float64)
        return np.exp(-self.rate(t) * t)


def builtin_curves() -> dict[str, ZeroCurve]:
    """The curves every job can name without a curves input: ``hull``."""
    return {"hull": ZeroCurve(*HULL_CURVE)}


def curves_from_frame(
    table: pd.DataFrame, allow_large_rates: bool = False
) -> tuple[dict[str, ZeroCurve], list[Problem]]:
    """Build a curve set (built-ins included) from a curves table, with the problems found: rows of knots
    (``curve, t | date, zero_rate | discount_factor[, compounding, day_count]``) and rows of deposit and swap
    quotes (:mod:`distprice.curve_quotes`), each curve given one way.

    Problems name the 1-based row of the curves input, the column and the rule broken; curves with a
    problem are left out of the set so that instruments naming them are reported too. A zero rate (or a quoted
    rate) beyond ±:data:`MAX_RATE` is a problem unless ``allow_large_rates``.
    """
    quoted = quote_rows(table)
    if not quoted.any():
        return _knot_curves(table, allow_large_rates)
    misspelled = check_names("curves input", table.columns, KNOWN_COLUMNS)
    if misspelled:
        return builtin_curves(), misspelled
    knot_rows, quote_rows_at = np.flatnonzero(~quoted) + 1, np.flatnonzero(quoted) + 1
    curves, problems = builtin_curves(), []
    if len(knot_rows):
        knot_table = table.iloc[knot_rows - 1].reset_index(drop=True)
        curves, found = _knot_curves(knot_table, allow_large_rates)
        problems = [_renumbered(p, knot_rows) for p in found]
        for column in QUOTE_COLUMNS:
            for r in knot_rows[_given(knot_table, column)]:
                rule = "a knot row (no instrument) takes no quote terms: leave it empty"
                problems.append(Problem(None, f"curves row {r}", column, rule))
    quote_table = table.iloc[quote_rows_at - 1].reset_index(drop=True)
    knots, found = curves_from_quotes(
        quote_table, quote_rows_at, lambda rate: _rate_rule(rate, allow_large_rates, "a quoted rate")
    )
    problems += found
    ids = table["curve"] if "curve" in table.columns else pd.Series([None] * len(table))
    named, text = ids.notna().to_numpy(), ids.astype(str).to_numpy(dtype=object)
    both = set(text[named & ~quoted]) & set(text[named & quoted])
    for r in np.flatnonzero(named & quoted & np.isin(text, list(both))) + 1:
        problems.append(Problem(None, f"curves row {r}", "instrument", "its curve has knot rows too: give it one way"))
    curves.update(
        {name: ZeroCurve(np.zeros(len(dates)), zeros, "ACT/365F", dates) for name, (dates, zeros) in knots.items()}
    )
    for name in both:
        curves.pop(name, None)
    problems.sort(key=lambda p: int(p.where.removeprefix("curves row ")) if p.where.startswith("curves row") else 0)
    return curves, problems


def _renumbered(problem: Problem, rows: np.ndarray) -> Problem:
    """``problem`` of a part of a curves input (rows numbered from 1 there) with its row's number in the whole."""
    if not problem.where.startswith("curves row "):
        return problem
    return dataclasses.replace(problem, where=f"curves row {rows[int(problem.where.removeprefix('curves row ')) - 1]}")


def _rate_rule(rate: float, allow_large_rates: bool, what: str = "a zero rate") -> str | None:
    """The rule ``rate`` breaks (a percentage typed as a number), or None."""
    return percent_slip(float(rate), what) if abs(rate) > MAX_RATE and not allow_large_rates else None


def _knot_curves(table: pd.DataFrame, allow_large_rates: bool) -> tuple[dict[str, ZeroCurve], list[Problem]]:
    """:func:`curves_from_frame` of a table of knot rows only."""
    curves = builtin_curves()
    missing = [
        c for c in CURVE_COLUMNS if c not in table.columns and not (c == "zero_rate" and "discount_factor" in table)
    ]
    if "t" not in table.columns and "date" not in table.columns:
        missing.append("t")
    misspelled = check_names("curves input", table.columns, KNOWN_COLUMNS)
    if missing or misspelled:
        return curves, misspelled + [
            Problem(
                None,
                "curves input",
                col,
                "curves input must have this column"
                + {"t": " (or date)", "zero_rate": " (or discount_factor)"}.get(col, ""),
            )
            for col in missing
        ]
    problems: list[Problem] = []
    n = len(table)
    rows = np.arange(1, n + 1)
    ids = table["curve"]
    t = (
        pd.to_numeric(table["t"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        if "t" in table.columns
        else np.full(n, np.nan)
    )
    days, not_dates = (
        parse_dates(table["date"]) if "date" in table.columns else (np.full(n, NO_DATE), np.zeros(0, np.int64))
    )
    dated = days != NO_DATE
    z = _numbers(table, "zero_rate")
    p = _numbers(table, "discount_factor")
    by_discount = _given(table, "discount_factor")
    day_count = _labels(table, "day_count", "ACT/365F")
    compounding = _labels(table, "compounding", DEFAULT_COMPOUNDING)

    def flag(mask, column, rule):
        for r in rows[mask]:
            problems.append(Problem(None, f"curves row {r}", column, rule))

    flag(ids.isna().to_numpy(), "curve", "curve id is required")
    flag(np.isin(np.arange(n), not_dates), "date", "must be a date YYYY-MM-DD")
    flag(~dated & ~np.isfinite(t) & ~np.isin(np.arange(n), not_dates), "t", "must be a finite number (or give date)")
    flag(dated & np.isfinite(t), "t", "give t or date, not both")
    flag(~dated & np.isfinite(t) & (t < 0), "t", "must be >= 0")
    flag(~np.isfinite(z) & ~by_discount, "zero_rate", "must be a finite number")
    flag(by_discount & _given(table, "zero_rate"), "discount_factor", "give zero_rate or discount_factor, not both")
    bad_discount = by_discount & ~(np.isfinite(p) & (p > 0))
    flag(bad_discount, "discount_factor", "must be a finite number > 0")
    large = np.isfinite(z) & (np.abs(z) > MAX_RATE) & (not allow_large_rates)
    for r in rows[large]:
        problems.append(Problem(None, f"curves row {r}", "zero_rate", percent_slip(float(z[r - 1]))))
    known_compounding = np.isin(compounding, list(COMPOUNDINGS))
    flag(~known_compounding, "compounding", f"must be one of {', '.join(COMPOUNDINGS)}")
    flag(by_discount & _given(table, "compounding"), "compounding", "applies to zero_rate: leave it empty here")
    known_day_count = np.isin(day_count, CURVE_DAY_COUNTS)
    flag(~known_day_count, "day_count", f"must be one of {', '.join(CURVE_DAY_COUNTS)}")
    tree_years = known_day_count & ~np.isin(day_count, list(DAYS_PER_YEAR)) & (~dated | by_discount)
    flag(
        tree_years,
        "day_count",
        f"a curve by t, or of discount factors, takes {' or '.join(DAYS_PER_YEAR)}: the years of its trees",
    )
    no_growth = (
        ~dated & np.isfinite(t) & np.isfinite(z) & known_compounding & ~np.isfinite(_continuous(z, t, compounding))
    )
    flag(no_growth, "zero_rate", "gives no discount factor at its t under its compounding (1 + rate x t <= 0)")
    good = (
        (dated ^ np.isfinite(t))
        & ~(~dated & (t < 0))
        & (np.isfinite(z) ^ by_discount)
        & ~bad_discount
        & ~large
        & known_compounding
        & known_day_count
        & ~tree_years
        & ~no_growth
    )
    bad_curves = set(ids[~good].dropna().astype(str))
    frame = pd.DataFrame(
        {
            "curve": ids,
            "_t": t,
            "_days": days,
            "_dated": dated,
            "_z": np.where(by_discount, p, z),
            "_discount": by_discount,
            "_compounding": compounding,
            "_dc": day_count,
            "_row": rows,
        }
    ).dropna(subset=["curve"])
    for name, group in frame.groupby(frame["curve"].astype(str), sort=False):
        if name in bad_curves:
            continue
        knots_dated = group["_dated"].to_numpy()
        if knots_dated.any() and not knots_dated.all():
            flag(
                np.isin(rows, group["_row"].to_numpy()[1:]),
                "date",
                f"curve '{name}' gives some knots by t and some by date: give them all one way",
            )
            continue
        mixed = next((c for c in ("_discount", "_compounding", "_dc") if len(set(group[c])) > 1), None)
        if mixed is not None:
            column = {"_discount": "discount_factor", "_compounding": "compounding", "_dc": "day_count"}[mixed]
            rule = f"must be the same on every row of curve '{name}'"
            if mixed == "_discount":
                rule = (
                    f"curve '{name}' gives some knots by zero_rate and some by discount_factor: give them all one way"
                )
            flag(np.isin(rows, group["_row"].to_numpy()[1:]), column, rule)
            continue
        key = group["_days"].to_numpy() if knots_dated.all() else group["_t"].to_numpy()
        increasing = np.diff(key) > 0
        if not increasing.all():
            flag(
                np.isin(rows, group["_row"].to_numpy()[1:][~increasing]),
                "date" if knots_dated.all() else "t",
                f"must be strictly increasing within curve '{name}'",
            )
            continue
        if group["_discount"].iloc[0]:
            curve = _discount_curve(name, group, knots_dated.all(), flag, rows)
        else:
            curve = _zero_curve(group, knots_dated.all())
        if curve is not None:
            curves[name] = curve
    problems.sort(key=lambda p: int(p.where.removeprefix("curves row ")))
    return curves, problems


def _numbers(table: pd.DataFrame, column: str) -> np.ndarray:
    """A number column (NaN where missing or not a number; all NaN when absent)."""
    if column not in table.columns:
        return np.full(len(table), np.nan)
    return pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def _given(table: pd.DataFrame, column: str) -> np.ndarray:
    """Where a column has a value (not missing, not blank)."""
    if column not in table.columns:
        return np.zeros(len(table), dtype=bool)
    return (table[column].astype("string").str.strip().fillna("") != "").to_numpy(dtype=bool)


def _labels(table: pd.DataFrame, column: str, default: str) -> np.ndarray:
    """A label column stripped and in ``default``'s case (upper or lower), ``default`` where missing or
    absent."""
    if column not in table.columns:
        return np.full(len(table), default, dtype=object)
    text = table[column].astype("string").str.strip()
    text = text.str.upper() if default.isupper() else text.str.lower()
    return text.where(text.fillna("") != "", default).to_numpy(dtype=object)


def _continuous(rates: np.ndarray, years: np.ndarray, compounding: np.ndarray) -> np.ndarray:
    """:func:`~distprice.compounding.continuous_rates` of knots in years, each under its own compounding."""
    out = np.full(len(rates), np.nan)
    for name in set(compounding) & set(COMPOUNDINGS):
        at = compounding == name
        out[at] = continuous_rates(rates[at], years[at], years[at], name)
    return out


def _zero_curve(group: pd.DataFrame, by_date: bool) -> ZeroCurve:
    """The curve of one curve's zero-rate knots (checked)."""
    rates = group["_z"].to_numpy().copy()
    compounding, day_count = group["_compounding"].iloc[0], group["_dc"].iloc[0]
    if by_date:
        dates = group["_days"].to_numpy().astype(np.int64)
        if compounding == DEFAULT_COMPOUNDING and day_count in DAYS_PER_YEAR:
            return ZeroCurve(np.zeros(len(dates)), rates, day_count, dates)
        tree_day_count = day_count if day_count in DAYS_PER_YEAR else "ACT/365F"
        return ZeroCurve(np.zeros(len(dates)), rates, tree_day_count, dates, quote=ZeroQuote(compounding, day_count))
    t = group["_t"].to_numpy().copy()
    if compounding != DEFAULT_COMPOUNDING:
        rates = continuous_rates(rates, t, t, compounding)
    return ZeroCurve(t, rates, day_count)


def _discount_curve(name: str, group: pd.DataFrame, by_date: bool, flag, rows) -> ZeroCurve | None:
    """The curve of one curve's discount-factor knots (checked): the first is 1 on the curve's own day (t = 0 or
    its first date); each other one, ``P``, ``t`` years after it, is the zero rate ``-ln(P) / t``."""
    factors, day_count = group["_z"].to_numpy(), group["_dc"].iloc[0]
    first = np.isin(rows, group["_row"].to_numpy()[:1])
    if by_date:
        dates = group["_days"].to_numpy().astype(np.int64)
        t = (dates - dates[0]) / DAYS_PER_YEAR[day_count]
    else:
        t = group["_t"].to_numpy().copy()
    if factors[0] != 1 or t[0] != 0:
        where = "on its first date" if by_date else "at t = 0"
        flag(first, "discount_factor", f"curve '{name}' of discount factors starts {where} with discount factor 1")
        return None
    if len(t) < 2:
        flag(first, "discount_factor", f"curve '{name}' of discount factors needs a knot after its first")
        return None
    zeros = np.empty(len(t))
    zeros[1:] = -np.log(factors[1:]) / t[1:]
    zeros[0] = zeros[1]
    if by_date:
        return ZeroCurve(np.zeros(len(t)), zeros, day_count, dates)
    return ZeroCurve(t, zeros, day_count)


def load_curves(curves, allow_large_rates: bool = False) -> dict[str, ZeroCurve]:
    """A curve set from None (built-ins only), a path, a curves table (see :func:`curves_from_frame`) or a dict
    of :class:`ZeroCurve` (built-ins added).

    Raises :class:`InvalidInputError` when the curves input breaks a rule (every problem, by row; a dict's
    zero rates beyond ±:data:`MAX_RATE` by curve and knot, unless ``allow_large_rates``).
    """
    if curves is None:
        return builtin_curves()
    if isinstance(curves, dict):
        problems = [
            Problem(None, f"curve {name!r} knot {k + 1}", "zero_rate", percent_slip(float(rate)))
            for name, curve in curves.items()
            for k, rate in enumerate(curve.zero_rate)
            if abs(rate) > MAX_RATE and not allow_large_rates
        ]
        if problems:
            raise InvalidInputError(problems)
        return {**builtin_curves(), **curves}
    table = curves if isinstance(curves, pd.DataFrame) else read_table(curves)
    curve_set, problems = curves_from_frame(table, allow_large_rates)
    if problems:
        raise InvalidInputError(problems)
    return curve_set

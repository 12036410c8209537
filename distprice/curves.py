"""Zero curves: continuously compounded zero rates, linear in time between knots, flat outside.

Times are in years from the valuation date, ``P(0, t) = exp(-z(t) * t)``. A curve's knots are given by
``t`` (years), or by ``date``: a dated knot lies ``days / D`` years after the valuation date, D = 365 for
the day count ``ACT/365F`` (the default) or 360 for ``ACT/360``, and the curve of a valuation date is
:meth:`ZeroCurve.at` it. The day count also sets the years of the trees priced on the curve: a date d is
``t(d) = (d - V) / D`` there. A curve set maps a curve id to a :class:`ZeroCurve`; the built-in curve ``hull``
(Hull's Table 30.2 example) is always available unless the curves input defines a curve of that name itself.

Zero rates are decimals: one beyond ±:data:`MAX_RATE` is refused as a percentage typed as a number unless
``allow_large_rates``. A curve by date is anchored on its valuation date: a row is refused when its curve has
no knot after the row's valuation date, or one before it (:func:`~distprice.lattice.instruments.prepare`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .dates import NO_DATE, parse_dates
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
"""Columns every curves input has, besides ``t`` or ``date`` (and the optional ``day_count``)."""
DAYS_PER_YEAR = {"ACT/365F": 365, "ACT/360": 360}
"""The curve day counts and their D: a curve year is D calendar days."""
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
    when its knots were given by date (``t`` then holds them in years from :attr:`valuation`)."""

    t: np.ndarray
    zero_rate: np.ndarray
    day_count: str = "ACT/365F"
    dates: np.ndarray | None = None
    valuation: int | None = None

    @property
    def days_per_year(self) -> int:
        """D of the curve's day count."""
        return DAYS_PER_YEAR[self.day_count]

    def at(self, valuation: int) -> ZeroCurve:
        """This curve seen from the valuation date ``valuation`` (a day number): dated knots at
        ``(date - valuation) / D`` years; a curve with knots in years is the same on every date."""
        if self.dates is None or valuation == self.valuation:
            return self
        return dataclasses.replace(self, t=(self.dates - valuation) / self.days_per_year, valuation=valuation)

    def shifted(self, shift: float) -> ZeroCurve:
        """The same knots with ``shift`` (decimal) added to every zero rate."""
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
    """Build a curve set (built-ins included) from a ``curve, t | date, zero_rate[, day_count]`` table, with the
    problems found.

    Problems name the 1-based row of the curves input, the column and the rule broken; curves with a
    problem are left out of the set so that instruments naming them are reported too. A zero rate beyond
    ±:data:`MAX_RATE` is a problem unless ``allow_large_rates``.
    """
    curves = builtin_curves()
    missing = [c for c in CURVE_COLUMNS if c not in table.columns]
    if "t" not in table.columns and "date" not in table.columns:
        missing.append("t")
    misspelled = check_names("curves input", table.columns, (*CURVE_COLUMNS, "t", "date", "day_count"))
    if missing or misspelled:
        return curves, misspelled + [
            Problem(
                None, "curves input", col, "curves input must have this column" + (" (or date)" if col == "t" else "")
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
    z = pd.to_numeric(table["zero_rate"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    day_count = (
        table["day_count"].astype("string").str.strip().str.upper().fillna("ACT/365F").to_numpy(dtype=object)
        if "day_count" in table.columns
        else np.full(n, "ACT/365F", dtype=object)
    )

    def flag(mask, column, rule):
        for r in rows[mask]:
            problems.append(Problem(None, f"curves row {r}", column, rule))

    flag(ids.isna().to_numpy(), "curve", "curve id is required")
    flag(np.isin(np.arange(n), not_dates), "date", "must be a date YYYY-MM-DD")
    flag(~dated & ~np.isfinite(t) & ~np.isin(np.arange(n), not_dates), "t", "must be a finite number (or give date)")
    flag(dated & np.isfinite(t), "t", "give t or date, not both")
    flag(~dated & np.isfinite(t) & (t < 0), "t", "must be >= 0")
    flag(~np.isfinite(z), "zero_rate", "must be a finite number")
    large = np.isfinite(z) & (np.abs(z) > MAX_RATE) & (not allow_large_rates)
    for r in rows[large]:
        problems.append(Problem(None, f"curves row {r}", "zero_rate", percent_slip(float(z[r - 1]))))
    flag(
        ~pd.Series(day_count).isin(list(DAYS_PER_YEAR)).to_numpy(),
        "day_count",
        f"must be one of {', '.join(DAYS_PER_YEAR)}",
    )
    good = (
        (dated ^ np.isfinite(t))
        & ~(~dated & (t < 0))
        & np.isfinite(z)
        & ~large
        & pd.Series(day_count).isin(list(DAYS_PER_YEAR)).to_numpy()
    )
    bad_curves = set(ids[~good].dropna().astype(str))
    frame = pd.DataFrame(
        {"curve": ids, "_t": t, "_days": days, "_dated": dated, "_z": z, "_dc": day_count, "_row": rows}
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
        if len(set(group["_dc"])) > 1:
            flag(
                np.isin(rows, group["_row"].to_numpy()[1:]),
                "day_count",
                f"must be the same on every row of curve '{name}'",
            )
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
        day_count_name = group["_dc"].iloc[0]
        if knots_dated.all():
            curves[name] = ZeroCurve(
                np.zeros(len(key)), group["_z"].to_numpy().copy(), day_count_name, key.astype(np.int64)
            )
        else:
            curves[name] = ZeroCurve(key.copy(), group["_z"].to_numpy().copy(), day_count_name)
    problems.sort(key=lambda p: int(p.where.removeprefix("curves row ")))
    return curves, problems


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

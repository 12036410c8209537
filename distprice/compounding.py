"""Zero rates under a compounding, read as QuantLib's ``InterestRate`` reads them, and the continuously
compounded rates of the same discount factors, which the trees take.

A rate r grows 1 over τ years (τ of the rate's day count) to ``exp(r τ)`` (``continuous``), ``1 + r τ``
(``simple``) or ``(1 + r / f)^(f τ)`` compounded f times a year (``annual`` 1, ``semiannual`` 2, ``quarterly``
4, ``monthly`` 12); the discount factor is its inverse. Over t tree years the continuous rate of that
discount factor is ``ln(growth) / t``. A knot at t = 0 is converted over 1/365 of a year instead (no
discount factor there to match), as QuantLib's ``ZeroCurve`` does.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .dates import year_fractions

COMPOUNDINGS = {"continuous": 0, "simple": -1, "annual": 1, "semiannual": 2, "quarterly": 4, "monthly": 12}
"""The compoundings of a zero rate and their frequencies f (0: continuous, -1: simple)."""
DEFAULT_COMPOUNDING = "continuous"
FIRST_KNOT_YEARS = 1 / 365
"""The years a knot at t = 0 is converted over."""


def log_growth(rate, years, compounding: str) -> np.ndarray:
    """``ln`` of what 1 grows to at ``rate`` over ``years`` under ``compounding`` (a name of
    :data:`COMPOUNDINGS`); NaN where it does not grow to a positive amount."""
    rate, years = np.asarray(rate, dtype=np.float64), np.asarray(years, dtype=np.float64)
    f = COMPOUNDINGS[compounding]
    with np.errstate(invalid="ignore", divide="ignore"):
        if f == 0:
            return rate * years
        if f < 0:
            return np.where(1 + rate * years > 0, np.log1p(rate * years), np.nan)
        return np.where(1 + rate / f > 0, f * years * np.log1p(rate / f), np.nan)


def continuous_rates(rate, years, tree_years, compounding: str) -> np.ndarray:
    """The continuously compounded rates over ``tree_years`` of the discount factors that ``rate`` gives over
    ``years`` (its day count's) under ``compounding``; at ``tree_years`` 0, the rate over
    :data:`FIRST_KNOT_YEARS`."""
    years, tree_years = np.asarray(years, dtype=np.float64), np.asarray(tree_years, dtype=np.float64)
    first = tree_years == 0
    years = np.where(first, FIRST_KNOT_YEARS, years)
    tree_years = np.where(first, FIRST_KNOT_YEARS, tree_years)
    return log_growth(rate, years, compounding) / tree_years


@dataclass(frozen=True)
class ZeroQuote:
    """How the zero rates of a curve by date are quoted, when not continuously compounded on the tree's years:
    their ``compounding`` and ``day_count`` (a name of :data:`~distprice.dates.DAY_COUNTS`). They are
    converted on each valuation date (:meth:`zero_rates`); ``shift`` (decimal) is then added to every
    continuous rate (a parallel shift of the curve)."""

    compounding: str
    day_count: str
    shift: float = 0.0

    def zero_rates(self, rates: np.ndarray, dates: np.ndarray, valuation: int, t: np.ndarray) -> np.ndarray:
        """The continuous rates, over ``t`` tree years, of the quoted ``rates`` of the knot ``dates`` (day
        numbers) seen from ``valuation``: each discount factor is ``1 / growth(rate, yf(valuation, date))``."""
        early = dates < valuation  # only for rows refused for it: the year fraction counted backwards
        years = year_fractions(
            self.day_count, np.where(early, dates, valuation), np.where(early, valuation, dates)
        ) * np.where(early, -1.0, 1.0)
        return continuous_rates(rates, years, t, self.compounding) + self.shift

    def shifted(self, shift: float) -> ZeroQuote:
        """The same quote with ``shift`` more added to the continuous rates."""
        return dataclasses.replace(self, shift=self.shift + shift)

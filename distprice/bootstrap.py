"""Zero curves bootstrapped from deposit and fixed-for-floating swap quotes on one curve (the swap's floating
leg is projected and discounted on the curve it builds), as QuantLib's ``PiecewiseLinearZero`` builds them
from ``DepositRateHelper`` and ``SwapRateHelper`` quotes.

Dates are day numbers. From the valuation date V, the start (spot) of every quote is ``settlement_days``
business days after V (after the first business day on or after V). A deposit ends a tenor after spot: n
business days (``D``), or n weeks, months or years later moved by the business-day convention (``W``, ``M``,
``Y``; a month end is kept only as the months' lengths allow, no end-of-month rule), and prices to par when
``P(start) / P(end) = 1 + rate × yf(start, end)``. A swap ends its tenor after spot (that date moved by the
convention); its fixed leg pays ``rate × yf`` at the end of each period of the schedule generated backwards
from there (:mod:`distprice.dates.schedules`, front stub if any), dates moved by the convention. Its floating
leg on the same calendar and convention is worth ``P(start) − P(end)`` on the curve whatever its tenor and day
count (each coupon pays its period's forward rate and is discounted on the same curve), so the swap is at par
when ``rate × Σ yf_i P(pay_i) = P(start) − P(end)``.

The curve has a knot at V and one at each quote's end (its pillar); continuously compounded zero rates on
ACT/365F years are linear between knots, the rate at V is the first pillar's (flat before it), and each pillar's
rate makes its quote price to par given the pillars before it (Newton's method to the last bit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .dates import adjust_days, advance_days, bond_terms, schedule, year_fractions
from .dates.civil import add_months

DAYS_PER_YEAR = 365
"""The bootstrapped curve's years (ACT/365F)."""
MAX_ITERATIONS = 50


@dataclass(frozen=True)
class Quote:
    """A deposit (one ``accrual`` paid at ``end``) or a swap (fixed payments on ``pay``, the last at ``end``),
    quoted at ``rate``, starting on ``start``: see the module docstring for when it prices to par."""

    swap: bool
    rate: float
    start: int
    end: int
    pay: np.ndarray
    accrual: np.ndarray


def spot(valuation: int, calendar: str, settlement_days: int) -> int:
    """The start of the quotes of ``valuation``: ``settlement_days`` business days after V's first business
    day."""
    return int(advance_days(calendar, adjust_days(calendar, valuation, "following"), settlement_days))


def deposit(
    valuation: int, count: int, unit: str, rate: float, day_count: str, calendar: str, convention: str, settlement: int
) -> Quote:
    """A deposit of ``count`` ``unit`` (``D`` business days, ``W``, ``M``, ``Y``) from spot."""
    start = spot(valuation, calendar, settlement)
    if unit == "D":
        end = int(advance_days(calendar, start, count))
    else:
        moved = start + 7 * count if unit == "W" else add_months(start, count * (12 if unit == "Y" else 1))
        end = int(adjust_days(calendar, moved, convention))
    accrual = year_fractions(day_count, start, end)
    return Quote(False, rate, start, end, np.array([end]), np.atleast_1d(accrual))


def swap(
    valuation: int,
    months: int,
    rate: float,
    frequency: int,
    day_count: str,
    calendar: str,
    convention: str,
    settlement: int,
) -> Quote:
    """A swap of ``months`` from spot whose fixed leg pays ``frequency`` times a year."""
    start = spot(valuation, calendar, settlement)
    terms = bond_terms(
        add_months(start, months),
        start,
        coupon=1.0,
        frequency=frequency,
        calendar=calendar,
        accrual_convention=convention,
    )
    dates = schedule(terms).dates
    return Quote(True, rate, start, int(dates[-1]), dates[1:], year_fractions(day_count, dates[:-1], dates[1:]))


def _logs(days, valuation: int, knots: np.ndarray, zeros: np.ndarray):
    """Logs of the discount factors at ``days`` on the knots so far (the last one being solved for), their
    years and the weight of the last knot's rate in each."""
    t = (np.asarray(days) - valuation) / DAYS_PER_YEAR
    times = (knots - valuation) / DAYS_PER_YEAR
    if len(knots) == 2:  # the knot at V follows the first pillar
        weight = np.ones_like(t)
    else:
        weight = np.clip((t - times[-2]) / (times[-1] - times[-2]), 0.0, 1.0)
    return -np.interp(t, times, zeros) * t, t, weight


def _residual(quote: Quote, valuation: int, knots: np.ndarray, zeros: np.ndarray) -> tuple[float, float]:
    """How far ``quote`` is from par on the knots, and its derivative in the last knot's rate: a deposit's in
    logs (linear in that rate), a swap's in present value per unit notional."""
    (log_start, log_end), (t_start, t_end), (w_start, _) = _logs([quote.start, quote.end], valuation, knots, zeros)
    if not quote.swap:
        growth = 1 + quote.rate * quote.accrual[0]  # no par rate when it is not positive
        return log_start - log_end - (np.log1p(quote.rate * quote.accrual[0]) if growth > 0 else np.nan), (
            t_end - w_start * t_start
        )
    logs, t, w = _logs(quote.pay, valuation, knots, zeros)
    p, p_start, p_end = np.exp(logs), np.exp(log_start), np.exp(log_end)
    annuity = quote.rate * quote.accrual
    value = float(annuity @ p) - p_start + p_end
    slope = -float(annuity @ (w * t * p)) + w_start * t_start * p_start - t_end * p_end
    return value, slope


def bootstrap(valuation: int, quotes: list[Quote]) -> tuple[np.ndarray, int | None]:
    """The zero rates (continuous, ACT/365F) of the knots ``[valuation, q.end for q in quotes]`` (``quotes``
    in increasing order of their distinct ends, all after ``valuation``), and the position of the first quote
    no rate prices to par (None when all do; its rate and those after it are NaN)."""
    knots = np.array([valuation] + [q.end for q in quotes], dtype=np.int64)
    zeros = np.full(len(knots), np.nan)
    for k, quote in enumerate(quotes, start=1):
        z = zeros[k - 1] if k > 1 else quote.rate
        for _ in range(MAX_ITERATIONS):
            trial = zeros[: k + 1].copy()
            trial[k] = z
            if k == 1:
                trial[0] = z
            value, slope = _residual(quote, valuation, knots[: k + 1], trial)
            step = value / slope if slope != 0 else np.nan
            if not np.isfinite(step):
                break
            z -= step
            if abs(step) <= 4 * np.finfo(float).eps * max(1.0, abs(z)):
                zeros[k] = z
                break
        if not np.isfinite(zeros[k]):
            return zeros, k - 1
        if k == 1:
            zeros[0] = zeros[1]
    return zeros, None

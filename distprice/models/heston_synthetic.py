"""Synthetic Heston quote surfaces of any size, for benchmarks (10 000 or 100 000 quotes, long maturities).

A surface is priced by the GL-20 recipe (the reference engine) at known parameters, its prices are turned into
Black-Scholes implied volatilities and perturbed by relative noise. Everything is drawn from
``numpy.random.default_rng(seed)``: a seed and a size give one table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .heston import black_call
from .heston_quotes import DAYS_PER_YEAR, make_surface
from .heston_reference import ReferenceEngine

TRUE_PARAMS = (0.03, 0.09, -0.6, 0.8, 0.7)
"""``(v0, theta, rho, kappa, eta)`` of the synthetic surfaces: near the 1062-quote optimum."""
QUOTES_PER_MATURITY = 50
VALUATION_DATE = "2026-01-02"


def synthetic_quotes(
    n_quotes: int,
    seed: int = 0,
    *,
    maturities: int | None = None,
    max_years: float = 30.0,
    noise: float = 0.005,
    params=TRUE_PARAMS,
) -> pd.DataFrame:
    """A ``heston_quotes`` table of one surface (``synthetic``, spot 1, rates 0) of ``n_quotes`` quotes on
    ``maturities`` distinct dates (default ``n_quotes / 50``) between one month and ``max_years`` years, strikes
    from 2.5 standard deviations in the money to 2 out, vols with relative noise ``noise``."""
    rng = np.random.default_rng(seed)
    count = maturities or max(1, n_quotes // QUOTES_PER_MATURITY)
    days = np.sort(rng.choice(np.arange(30, int(max_years * DAYS_PER_YEAR) + 1), size=count, replace=False))
    quotes = []
    # Prices too close to their bounds have no implied volatility: draw until there are enough quotes.
    while sum(len(q[0]) for q in quotes) < n_quotes:
        term = rng.integers(0, count, n_quotes)
        t = days[term] / DAYS_PER_YEAR
        log_strike = 0.25 * np.sqrt(t) * rng.uniform(-2.5, 2.0, n_quotes)
        prices = ReferenceEngine(make_surface("synthetic", t, log_strike, np.full(n_quotes, 0.2))).prices(
            np.array([params])
        )[0]
        vol = implied_vol(log_strike, t, prices) * (1.0 + noise * rng.standard_normal(n_quotes))
        keep = np.isfinite(vol)
        quotes.append((days[term][keep], log_strike[keep], vol[keep]))
    day, log_strike, vol = (np.concatenate(parts)[:n_quotes] for parts in zip(*quotes))
    valuation = pd.Timestamp(VALUATION_DATE)
    return pd.DataFrame(
        {
            "surface": "synthetic",
            "valuation_date": valuation,
            "maturity": valuation + pd.to_timedelta(day, unit="D"),
            "strike": np.exp(log_strike),
            "implied_vol": vol,
        }
    )


def implied_vol(log_strike, t, price, iterations: int = 100) -> np.ndarray:
    """Black-Scholes volatility of normalised calls by bisection on log volatility in [1e-4, 5]; NaN where the
    price is outside what those volatilities give."""
    low, high = np.full(len(price), np.log(1e-4)), np.full(len(price), np.log(5.0))

    def call(log_vol):
        return black_call(log_strike, np.exp(2.0 * log_vol) * t)

    reachable = (call(low) < price) & (price < call(high))
    for _ in range(iterations):
        middle = 0.5 * (low + high)
        above = call(middle) > price
        high, low = np.where(above, middle, high), np.where(above, low, middle)
    return np.where(reachable, np.exp(0.5 * (low + high)), np.nan)

"""Fitting Hull-White mean reversion and volatility to swaption quotes, one model at a time.

Per model, minimise ``sum_q w_q (model_q / market_q - 1)^2`` (relative price errors) over ``a, sigma > 0`` by
scipy's bounded trust-region least squares (``least_squares``, method ``trf``: Levenberg-Marquardt steps inside
the bounds), from ``a = 0.1`` and the volatility that prices the quotes' average normal volatility.
:func:`fit_hull_white` fits one model and is pure (one cluster task per model);
:func:`calibrate_hull_white` fits every model of a quotes table in this process.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..curves import ZeroCurve
from ..tables import read_table
from .hull_white import payer_price
from .swaptions import Swaptions, implied_volatility, swaption_sets

LOWER = np.array([1e-6, 1e-8])
"""Bounds of (mean reversion, volatility) from below; neither has one above."""
START_MEAN_REVERSION = 0.1
TOLERANCE = 1e-14
"""ftol, xtol and gtol of the least squares: the fit stops where the parameters stop moving."""
MAX_EVALS = 1000
MODEL_COLUMNS = ("model", "curve", "mean_reversion", "volatility", "rmse", "n_quotes", "n_evals", "status")


@dataclass(frozen=True)
class HullWhiteFit:
    """One model's fit: ``rmse`` is the weighted r.m.s. difference of model and quoted volatilities, each in its
    quote's units (normal or lognormal); ``model_price`` and ``market_price`` are per quote, per unit notional."""

    model: str
    curve: str
    mean_reversion: float
    volatility: float
    rmse: float
    n_quotes: int
    n_evals: int
    status: str
    market_price: np.ndarray
    model_price: np.ndarray


def fit_hull_white(swaptions: Swaptions) -> HullWhiteFit:
    """Fit ``a`` and ``sigma`` of one model to its swaptions."""
    from scipy.optimize import least_squares

    market = swaptions.market_price()
    root_weight = np.sqrt(swaptions.weight)
    evaluations = 0

    def residuals(x):
        nonlocal evaluations
        evaluations += 1
        return root_weight * (payer_price(swaptions, x[0], x[1]) / market - 1.0)

    start = np.array([START_MEAN_REVERSION, _start_volatility(swaptions)])
    result = least_squares(
        residuals,
        start,
        bounds=(LOWER, np.inf),
        method="trf",
        x_scale=start,
        ftol=TOLERANCE,
        xtol=TOLERANCE,
        gtol=TOLERANCE,
        max_nfev=MAX_EVALS,
    )
    a, sigma = result.x
    model = payer_price(swaptions, a, sigma)
    error = implied_volatility(swaptions, model) - swaptions.volatility
    rmse = float(np.sqrt(np.sum(swaptions.weight * error * error) / np.sum(swaptions.weight)))
    status = "converged" if result.status > 0 else "max_evals_reached"
    return HullWhiteFit(
        swaptions.model,
        swaptions.curve,
        float(a),
        float(sigma),
        rmse,
        swaptions.size,
        evaluations,
        status,
        market,
        model,
    )


def _start_volatility(swaptions: Swaptions) -> float:
    """The short-rate volatility that, with no mean reversion, matches the quotes' mean normal volatility."""
    normal = np.where(swaptions.normal, swaptions.volatility, swaptions.volatility * swaptions.forward)
    return float(np.mean(normal))


def calibrate_hull_white(quotes, curves: dict[str, ZeroCurve] | None = None) -> pd.DataFrame:
    """Fit every model of ``quotes`` (a DataFrame or a CSV / Parquet path) on ``curves`` (id -> ZeroCurve, added
    to the built-in ``hull``). Returns the model table ``model, curve, mean_reversion, volatility, rmse,
    n_quotes, n_evals, status``, one row per model in order of first appearance."""
    table = read_table(quotes) if isinstance(quotes, (str, Path)) else quotes
    return model_table([fit_hull_white(s) for s in swaption_sets(table, curves)])


def model_table(fits: list[HullWhiteFit]) -> pd.DataFrame:
    """The model table of ``fits``, one row each: ``model, curve, mean_reversion, volatility, rmse, n_quotes,
    n_evals, status``."""
    return pd.DataFrame([{c: getattr(f, c) for c in MODEL_COLUMNS} for f in fits], columns=list(MODEL_COLUMNS))

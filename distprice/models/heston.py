"""The Heston model's formulas for European calls, written to be read (numpy, complex arithmetic).

Everything is normalised by the forward: F = spot * df_div / df = 1, a strike is ``k = K / F`` and a price is
``C = call / (F * df)``. Parameters come in the order ``(v0, theta, rho, kappa, eta)``: initial variance,
long-run variance, correlation, mean reversion speed and volatility of variance. Times are in years.

The pricer (LexiFi's, reproduced exactly): the call is a Black-Scholes call whose total variance ``s`` matches
the Heston log-price mean (the control variate), plus a correction integrated along ``x - i``:
``C = BS(k, s) + (1/pi) int_0^inf Re[(psi_BS(x - i) - psi_H(x - i)) / (x (x - i)) exp(-i x ln k)] dx``,
clamped to the no-arbitrage bounds ``[max(0, 1 - k), 1]``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

PARAMETERS = ("v0", "theta", "rho", "kappa", "eta")
LOWER = np.array([1e-6, 1e-6, -1.0, 1e-4, 1e-4])
UPPER = np.array([1.0, 1.0, 0.0, 4.0, 2.0])
"""The box of the search, in PARAMETERS order."""
EPSILON = 0.01
"""Step of the central differences that estimate the control variate's variance."""
VEGA_FLOOR = 0.1
"""Market vegas (normalised, per unit of volatility) below this are raised to it in the objective."""


def characteristic(xi, t, v0, theta, rho, kappa, eta):
    """Heston characteristic function of ``ln(S_t / F)`` at complex ``xi`` (the form without the branch-cut trap)."""
    d0 = kappa - 1j * rho * eta * xi
    d = np.sqrt(d0 * d0 + eta * eta * xi * (xi + 1j))
    g = (d0 - d) / (d0 + d)
    e = np.exp(-d * t)
    eta2 = eta * eta
    return np.exp(
        kappa * theta / eta2 * ((d0 - d) * t - 2.0 * np.log((1.0 - g * e) / (1.0 - g)))
        + v0 / eta2 * (d0 - d) * (1.0 - e) / (1.0 - g * e)
    )


def control_variance(t, v0, theta, rho, kappa, eta):
    """Total variance ``s`` of the Black-Scholes control variate: twice the mean of ``ln(S_t / F)`` under the
    share measure, by central differences of the characteristic function around ``-i`` (step EPSILON)."""

    def psi(xi):
        return characteristic(xi, t, v0, theta, rho, kappa, eta)

    real_step = psi(EPSILON - 1j) - psi(-EPSILON - 1j)
    imaginary_step = psi(1j * (EPSILON - 1.0)) - psi(-1j * (1.0 + EPSILON))
    return 0.5 * np.imag(real_step - 1j * imaginary_step) / EPSILON


def correction(x, t, variance, v0, theta, rho, kappa, eta):
    """The integrand's strike-free factor ``(psi_BS(x - i) - psi_H(x - i)) / (x (x - i))`` at real ``x > 0``."""
    z = x - 1j
    black = np.exp(-0.5 * variance * z * (z + 1j))
    return (black - characteristic(z, t, v0, theta, rho, kappa, eta)) / (x * z)


def black_call(log_strike, variance):
    """Normalised Black-Scholes call ``N(d1) - k N(d1 - sqrt(s))`` of strike ``k = exp(log_strike)`` and total
    variance ``s``."""
    deviation = np.sqrt(variance)
    d1 = (-log_strike + 0.5 * variance) / deviation
    return ndtr(d1) - np.exp(log_strike) * ndtr(d1 - deviation)


def clamp(raw, strike):
    """A call price within its no-arbitrage bounds ``[max(0, 1 - k), 1]``; NaN where ``raw`` is not finite."""
    price = np.maximum(np.maximum(0.0, 1.0 - strike), np.minimum(1.0, raw))
    return np.where(np.isfinite(raw), price, np.nan)


def market_call(log_strike, t, vol):
    """Normalised market call of implied volatility ``vol`` and its vega ``sqrt(t) phi(d1)``, floored at VEGA_FLOOR."""
    variance = vol * vol * t
    price = black_call(log_strike, variance)
    d1 = (-log_strike + 0.5 * variance) / np.sqrt(variance)
    vega = np.sqrt(t) * np.exp(-0.5 * d1 * d1) / np.sqrt(2.0 * np.pi)
    return price, np.maximum(vega, VEGA_FLOOR)


def unpack(params):
    """``(v0, theta, rho, kappa, eta)`` as columns of a ``(P, 5)`` population (each of shape ``(P, 1)``)."""
    params = np.atleast_2d(np.asarray(params, dtype=np.float64))
    return tuple(params[:, i, None] for i in range(5))

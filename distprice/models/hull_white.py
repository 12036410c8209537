"""Hull-White one-factor prices of European payer swaptions, exactly, by Jamshidian's decomposition.

Model: ``dr = (theta(t) - a r) dt + sigma dW`` with constant mean reversion ``a`` and volatility ``sigma``,
fitted to the zero curve. At the expiry T0 a zero-coupon bond is ``P(T0, t) = P(0, t) / P(0, T0)
exp(-B x - B^2 v / 2)`` with ``B = (1 - exp(-a (t - T0))) / a``, ``v = sigma^2 (1 - exp(-2 a T0)) / (2 a)``
and ``x`` the centred short rate (so neither the price nor this module needs the curve's forward rate).
A payer swaption is a put, struck at 1, on the bond paying ``amounts`` at the payment times; with ``x*``
where that bond is worth 1 it is a sum of puts on zero-coupon bonds struck at ``P(T0, t_i; x*)``, each priced
by the closed form ``K P(0, T0) N(-h + s) - P(0, t_i) N(-h)``, ``s = B sqrt(v)``,
``h = ln(P(0, t_i) / (K P(0, T0))) / s + s / 2``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

from .swaptions import Swaptions

NEWTON_STEPS = 100


def _b(a, tau):
    """``(1 - exp(-a tau)) / a``, and ``tau`` where ``a`` is 0."""
    a = np.asarray(a, dtype=np.float64)
    safe = np.where(a == 0.0, 1.0, a)
    return np.where(a == 0.0, tau, -np.expm1(-safe * tau) / safe)


def payer_price(swaptions: Swaptions, mean_reversion: float, volatility: float) -> np.ndarray:
    """Hull-White prices of ``swaptions`` (per unit notional) at ``a = mean_reversion``, ``sigma = volatility``."""
    a, sigma = float(mean_reversion), float(volatility)
    expiry = swaptions.expiry[:, None]
    b = _b(a, swaptions.pay_time - expiry)
    variance = sigma * sigma * _b(2.0 * a, swaptions.expiry)[:, None]
    ratio = swaptions.pay_discount / swaptions.start_discount[:, None]
    forward_bond = ratio * np.exp(-0.5 * b * b * variance)
    amounts = swaptions.amounts
    x = critical_rate(amounts * forward_bond, b)
    strike = forward_bond * np.exp(-b * x[:, None])
    deviation = b * np.sqrt(variance)
    paid = swaptions.accrual > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.log(ratio / strike) / deviation + 0.5 * deviation
        put = strike * swaptions.start_discount[:, None] * ndtr(-h + deviation) - swaptions.pay_discount * ndtr(-h)
    return np.sum(np.where(paid, amounts * put, 0.0), axis=1)


def critical_rate(weights: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row, the ``x`` where ``sum_i weights_i exp(-b_i x) = 1`` (weights > 0 where they count, so the sum is
    convex and decreasing in x: Newton converges from any start, monotonically after its first step)."""
    x = np.zeros(len(weights))
    for _ in range(NEWTON_STEPS):
        terms = weights * np.exp(-b * x[:, None])
        step = (terms.sum(axis=1) - 1.0) / (terms * b).sum(axis=1)
        x += step
        if np.all(np.abs(step) <= 1e-15 * (1.0 + np.abs(x))):
            break
    return x

"""European payer swaptions quoted by volatility: the ``swaption_quotes`` table, its rules, cash flows and
market prices.

Table columns, one row per quote: ``model`` (id of the Hull-White model the quote calibrates), ``curve`` (id of a
zero curve), ``expiry`` and ``tenor`` (years), ``fixed_frequency`` (1, 2 or 4 payments a year),
``volatility`` and ``volatility_type`` (``normal``: in rate units, 0.0085 = 85 bp; ``lognormal``: Black),
optional ``strike`` (fixed rate; empty: at the money, the forward swap rate) and ``weight`` (>= 0, default 1).

Time form: the swap starts at the expiry T0, pays ``strike / f`` at ``T0 + i / f`` (i = 1 .. tenor f); its
floating leg is worth ``P(0, T0) - P(0, Tn)``. Annuity ``A = sum_i tau_i P(0, t_i)``, forward rate
``F = (P(0, T0) - P(0, Tn)) / A``. Prices are per unit notional.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy.special import ndtr

from ..curves import ZeroCurve, builtin_curves
from .checks import Checks

TABLE = "swaption_quotes"
COLUMNS = ("model", "curve", "expiry", "tenor", "fixed_frequency", "volatility", "volatility_type")
FREQUENCIES = (1, 2, 4)
VOLATILITY_TYPES = ("normal", "lognormal")
WHOLE = 1e-9
"""``tenor * fixed_frequency`` within this of an integer counts as a whole number of periods."""
MAX_YEARS = 100.0
"""The longest expiry and tenor (years) a quote may have."""
VOLATILITY_RANGE = {"normal": (1e-6, 1.0), "lognormal": (1e-4, 10.0)}
"""The volatilities a quote may have, by type: 0.01 to 10 000 bp a year, 0.01 to 1 000 %."""


@dataclass(frozen=True)
class Swaptions:
    """Payer swaptions of one model as cash flows on its curve, padded to a common number of payments
    (padding: accrual 0, payment at the expiry). ``rows`` are their positions in the quotes table."""

    model: str
    curve: str
    rows: np.ndarray
    expiry: np.ndarray
    pay_time: np.ndarray
    accrual: np.ndarray
    start_discount: np.ndarray
    pay_discount: np.ndarray
    strike: np.ndarray
    volatility: np.ndarray
    normal: np.ndarray
    weight: np.ndarray

    @property
    def size(self) -> int:
        return len(self.expiry)

    @property
    def annuity(self) -> np.ndarray:
        return np.sum(self.accrual * self.pay_discount, axis=1)

    @property
    def forward(self) -> np.ndarray:
        """Forward swap rate ``(P(0, T0) - P(0, Tn)) / A``."""
        last = np.take_along_axis(self.pay_discount, _last_payment(self.accrual)[:, None], axis=1)[:, 0]
        return (self.start_discount - last) / self.annuity

    @property
    def amounts(self) -> np.ndarray:
        """Coupon bond cash flows: ``strike * tau_i``, plus 1 at the last payment."""
        amounts = self.strike[:, None] * self.accrual
        amounts[np.arange(self.size), _last_payment(self.accrual)] += 1.0
        return amounts

    def market_price(self) -> np.ndarray:
        """Bachelier (normal) or Black (lognormal) payer prices at the quoted volatilities."""
        return swaption_price(self.annuity, self.forward, self.strike, self.expiry, self.volatility, self.normal)


def _last_payment(accrual: np.ndarray) -> np.ndarray:
    return (accrual > 0).sum(axis=1) - 1


def swaption_price(annuity, forward, strike, expiry, volatility, normal) -> np.ndarray:
    """Payer swaption prices: ``A [(F - K) N(d) + s phi(d)]``, ``d = (F - K) / s``, ``s = sigma sqrt(T0)`` where
    ``normal``; else Black ``A [F N(d1) - K N(d1 - s)]``, ``d1 = ln(F / K) / s + s / 2``."""
    deviation = volatility * np.sqrt(expiry)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = (forward - strike) / deviation
        bachelier = (forward - strike) * ndtr(d) + deviation * np.exp(-0.5 * d * d) / np.sqrt(2.0 * np.pi)
        d1 = np.log(forward / strike) / deviation + 0.5 * deviation
        black = forward * ndtr(d1) - strike * ndtr(d1 - deviation)
    return annuity * np.where(normal, bachelier, black)


def implied_volatility(swaptions: Swaptions, price: np.ndarray, iterations: int = 200) -> np.ndarray:
    """The normal or lognormal volatility (each quote's own type) at which the market formula gives ``price``:
    bisection on log volatility in [1e-12, 10] (NaN where ``price`` is out of reach)."""
    annuity, forward = swaptions.annuity, swaptions.forward
    low, high = np.full(swaptions.size, np.log(1e-12)), np.full(swaptions.size, np.log(10.0))

    def price_at(log_vol):
        return swaption_price(annuity, forward, swaptions.strike, swaptions.expiry, np.exp(log_vol), swaptions.normal)

    reachable = (price_at(low) <= price) & (price <= price_at(high))
    for _ in range(iterations):
        middle = 0.5 * (low + high)
        above = price_at(middle) > price
        high, low = np.where(above, middle, high), np.where(above, low, middle)
    return np.where(reachable, np.exp(0.5 * (low + high)), np.nan)


def time_form_cash_flows(expiry, tenor, frequency) -> tuple[np.ndarray, np.ndarray]:
    """Payment times ``T0 + i / f`` and accruals ``1 / f`` (i = 1 .. tenor f), padded (times T0, accruals 0)."""
    expiry, frequency = np.asarray(expiry, dtype=np.float64), np.asarray(frequency, dtype=np.float64)
    periods = np.rint(np.asarray(tenor, dtype=np.float64) * frequency).astype(np.int64)
    i = np.arange(1, max(int(periods.max(initial=1)), 1) + 1)[None, :]
    paid = i <= periods[:, None]
    pay_time = np.where(paid, expiry[:, None] + i / frequency[:, None], expiry[:, None])
    return pay_time, np.where(paid, 1.0 / frequency[:, None], 0.0)


def swaption_sets(quotes: pd.DataFrame, curves: dict[str, ZeroCurve] | None = None) -> list[Swaptions]:
    """The swaptions of each model of a quotes table (time form), in order of first appearance. ``curves``
    add to (or replace) the built-in ones. InvalidInputError lists every bad cell."""
    curves = {**builtin_curves(), **(curves or {})}
    checks = Checks(TABLE, quotes, "model")
    if not checks.require(COLUMNS, ("strike", "weight")):
        checks.raise_if_any()
    model = checks.label("model")
    curve = checks.label("curve")
    expiry = checks.number("expiry")
    tenor = checks.number("tenor")
    frequency = checks.number("fixed_frequency")
    volatility = checks.number("volatility")
    kind = checks.label("volatility_type")
    strike = checks.number("strike", np.nan)
    weight = checks.number("weight", 1.0)

    numbers = {"expiry": expiry, "tenor": tenor, "volatility": volatility, "strike": strike, "weight": weight}
    for column, values in numbers.items():
        checks.flag(np.isinf(values), column, "must be finite")
    checks.flag(expiry <= 0, "expiry", "must be > 0")
    checks.flag(tenor <= 0, "tenor", "must be > 0")
    checks.flag(np.isfinite(expiry) & (expiry > MAX_YEARS), "expiry", f"must be <= {MAX_YEARS:g} (years)")
    checks.flag(np.isfinite(tenor) & (tenor > MAX_YEARS), "tenor", f"must be <= {MAX_YEARS:g} (years)")
    checks.flag(volatility <= 0, "volatility", "must be > 0")
    checks.flag(strike <= 0, "strike", "must be > 0 (or empty: at the money)")
    checks.flag(weight < 0, "weight", "must be >= 0")
    known_frequency = np.isin(frequency, FREQUENCIES)
    checks.flag(
        ~np.isnan(frequency) & ~known_frequency, "fixed_frequency", f"must be one of {', '.join(map(str, FREQUENCIES))}"
    )
    periods = tenor * frequency
    checks.flag(
        known_frequency & (tenor > 0) & ~(np.abs(periods - np.rint(periods)) <= WHOLE),
        "tenor",
        "must be a whole number of fixed periods (tenor * fixed_frequency an integer)",
    )
    checks.flag(
        [k is not None and k not in VOLATILITY_TYPES for k in kind],
        "volatility_type",
        f"must be one of {', '.join(VOLATILITY_TYPES)}",
    )
    for name, (low, top) in VOLATILITY_RANGE.items():
        outside = (volatility > 0) & np.isfinite(volatility) & ~((low <= volatility) & (volatility <= top))
        checks.flag(
            (kind == name) & outside, "volatility", f"must be between {low:g} and {top:g} for a {name} volatility"
        )
    known_curve = np.array([c in curves for c in curve])
    checks.flag(
        [c is not None and not known for c, known in zip(curve, known_curve)],
        "curve",
        f"unknown curve (known: {', '.join(sorted(curves))})",
    )
    groups = {name: np.flatnonzero(model == name) for name in dict.fromkeys(m for m in model if m is not None)}
    for name, rows in groups.items():
        checks.flag_at(
            rows[curve[rows] != curve[rows[0]]],
            "curve",
            f"must be the same on every row of model '{name}' (its first row has '{curve[rows[0]]}')",
        )
        if np.sum(weight[rows] > 0) < 2:
            checks.flag_at(
                rows[:1],
                "weight",
                f"model '{name}' needs at least 2 quotes with weight > 0 (it fits mean reversion and volatility)",
            )
    checks.raise_if_any()

    sets = []
    for name, rows in groups.items():
        swaptions = _swaptions(
            name,
            curves[curve[rows[0]]],
            curve[rows[0]],
            rows,
            expiry[rows],
            tenor[rows],
            frequency[rows],
            strike[rows],
            volatility[rows],
            kind[rows] == "normal",
            weight[rows],
        )
        atm = swaptions.forward
        checks.flag_at(
            rows[np.isnan(strike[rows]) & ~(atm > 0)],
            "strike",
            "at the money, the forward swap rate is <= 0: Jamshidian's decomposition needs a strike > 0",
        )
        checks.flag_at(
            rows[~swaptions.normal & ~(atm > 0)], "volatility_type", "lognormal needs a forward swap rate > 0"
        )
        with np.errstate(all="ignore"):
            price = swaptions.market_price()
        checks.flag_at(
            rows[(atm > 0) & ~(np.isfinite(price) & (price > 0))],
            "volatility",
            "gives a swaption price that is not a positive finite number",
        )
        sets.append(swaptions)
    checks.raise_if_any()
    return sets


def _swaptions(
    model, curve: ZeroCurve, curve_name, rows, expiry, tenor, frequency, strike, volatility, normal, weight
) -> Swaptions:
    pay_time, accrual = time_form_cash_flows(expiry, tenor, frequency)
    swaptions = Swaptions(
        model=model,
        curve=curve_name,
        rows=rows,
        expiry=expiry,
        pay_time=pay_time,
        accrual=accrual,
        start_discount=curve.discount(expiry),
        pay_discount=curve.discount(pay_time),
        strike=strike,
        volatility=volatility,
        normal=np.asarray(normal, dtype=bool),
        weight=weight,
    )
    at_the_money = np.isnan(strike)
    if at_the_money.any():
        swaptions = replace(swaptions, strike=np.where(at_the_money, swaptions.forward, strike))
    return swaptions

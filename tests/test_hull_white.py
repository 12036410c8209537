"""Hull-White swaptions: Jamshidian prices against QuantLib and an integral over the Gaussian factor, fits of
mean reversion and volatility against QuantLib's calibration, quote tables and their rules."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from distprice.curves import ZeroCurve, builtin_curves
from distprice.errors import InvalidInputError
from distprice.models import calibrate_hull_white
from distprice.models.hull_white import _b, critical_rate, payer_price
from distprice.models.hull_white_fit import fit_hull_white
from distprice.models.swaptions import Swaptions, implied_volatility, swaption_sets

ql = pytest.importorskip("QuantLib")

MONTHS = [0, 6, 12, 24, 36, 60, 84, 120, 180, 240, 360]


class QuantLibMarket:
    """A QuantLib zero curve (ACT/365, linear zero rates, knots at whole months) and the same curve for distprice;
    swaptions are built by SwaptionHelper (fixed leg 30/360 on whole months, so accruals are exactly 1/f) and
    handed to distprice as the helper's own cash flows."""

    def __init__(self, rates):
        self.today = ql.Date(15, 1, 2026)
        ql.Settings.instance().evaluationDate = self.today
        self.counter = ql.Actual365Fixed()
        dates = [self.today + ql.Period(m, ql.Months) for m in MONTHS]
        self.handle = ql.YieldTermStructureHandle(
            ql.ZeroCurve(dates, list(rates), self.counter, ql.NullCalendar(), ql.Linear(), ql.Continuous)
        )
        self.curve = ZeroCurve(np.array([self.time(d) for d in dates]), np.asarray(rates, dtype=float))
        self.index = ql.IborIndex(
            "flat",
            ql.Period(6, ql.Months),
            0,
            ql.USDCurrency(),
            ql.NullCalendar(),
            ql.Unadjusted,
            False,
            self.counter,
            self.handle,
        )

    def time(self, date) -> float:
        return self.counter.yearFraction(self.today, date)

    def helper(self, expiry_months, tenor_years, frequency, volatility, normal, offset=None):
        """A swaption helper at the money, or a payer struck ``offset`` above the forward swap rate."""

        def make(strike):
            return ql.SwaptionHelper(
                self.today + ql.Period(expiry_months, ql.Months),
                ql.Period(tenor_years, ql.Years),
                ql.QuoteHandle(ql.SimpleQuote(volatility)),
                self.index,
                ql.Period(12 // frequency, ql.Months),
                ql.Thirty360(ql.Thirty360.BondBasis),
                self.counter,
                self.handle,
                ql.BlackCalibrationHelper.RelativePriceError,
                strike,
                1.0,
                ql.Normal if normal else ql.ShiftedLognormal,
            )

        at_the_money = make(ql.nullDouble())
        return at_the_money if offset is None else make(at_the_money.underlying().fixedRate() + offset)

    def swaptions(self, helpers, quotes) -> Swaptions:
        """distprice's payer swaptions on the helpers' fixed legs (QuantLib's ATM helpers are receivers: at the
        money both are worth the same)."""
        legs = [h.underlying().fixedLeg() for h in helpers]
        width = max(len(leg) for leg in legs)
        pay_time, accrual = np.zeros((len(legs), width)), np.zeros((len(legs), width))
        expiry = np.array([self.time(h.swaption().exercise().dates()[0]) for h in helpers])
        for row, leg in enumerate(legs):
            pay_time[row] = expiry[row]
            pay_time[row, : len(leg)] = [self.time(c.date()) for c in leg]
            accrual[row, : len(leg)] = [ql.as_coupon(c).accrualPeriod() for c in leg]
        return Swaptions(
            "m",
            "c",
            np.arange(len(helpers)),
            expiry,
            pay_time,
            accrual,
            self.curve.discount(expiry),
            self.curve.discount(pay_time),
            np.array([h.underlying().fixedRate() for h in helpers]),
            np.array([q[3] for q in quotes]),
            np.array([q[4] for q in quotes]),
            np.ones(len(helpers)),
        )


def random_grid(rng, size):
    """(expiry months, tenor years, fixed frequency, volatility, normal, strike offset or None) of random
    swaptions: at the money, or payers out of the money."""
    grid = []
    for _ in range(size):
        normal = bool(rng.random() < 0.5)
        offset = None if rng.random() < 0.6 else float(rng.uniform(0.001, 0.01))
        grid.append(
            (
                int(rng.choice([3, 6, 12, 24, 36, 60, 84, 120])),
                int(rng.integers(1, 16)),
                int(rng.choice([1, 2, 4])),
                float(rng.uniform(0.006, 0.012) if normal else rng.uniform(0.15, 0.3)),
                normal,
                offset,
            )
        )
    return grid


def random_rates(rng):
    return np.sort(rng.uniform(0.02, 0.045, len(MONTHS)))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_jamshidian_prices_match_quantlib(seed):
    rng = np.random.default_rng(seed)
    market = QuantLibMarket(random_rates(rng))
    a, sigma = float(rng.uniform(0.01, 0.3)), float(rng.uniform(0.005, 0.015))
    model = ql.HullWhite(market.handle, a, sigma)
    quotes = random_grid(rng, 12)
    helpers = [market.helper(*q) for q in quotes]
    for h in helpers:
        h.setPricingEngine(ql.JamshidianSwaptionEngine(model))
    swaptions = market.swaptions(helpers, quotes)
    price = payer_price(swaptions, a, sigma)
    # Market prices: Bachelier and Black on the same annuity and forward.
    np.testing.assert_allclose(swaptions.market_price(), [h.marketValue() for h in helpers], rtol=1e-12)
    # QuantLib's engine stops its critical-rate search at an accuracy of 1e-8: agreement to ~1e-7.
    np.testing.assert_allclose(price, [h.modelValue() for h in helpers], rtol=1e-6)
    # At our critical rate, QuantLib's zero-bond options sum to our price to rounding.
    b = _b(a, swaptions.pay_time - swaptions.expiry[:, None])
    forward_bond = (
        swaptions.pay_discount
        / swaptions.start_discount[:, None]
        * np.exp(-0.5 * b * b * sigma**2 * _b(2 * a, swaptions.expiry)[:, None])
    )
    strikes = forward_bond * np.exp(-b * critical_rate(swaptions.amounts * forward_bond, b)[:, None])
    np.testing.assert_allclose(np.sum(swaptions.amounts * strikes, axis=1), 1.0, rtol=1e-14)
    for row in range(len(helpers)):
        paid = swaptions.accrual[row] > 0
        legs = zip(swaptions.amounts[row][paid], strikes[row][paid], swaptions.pay_time[row][paid])
        value = sum(c * model.discountBondOption(ql.Option.Put, k, swaptions.expiry[row], t) for c, k, t in legs)
        assert price[row] == pytest.approx(value, rel=1e-12)


def test_jamshidian_price_is_the_expected_exercise_value():
    """Under the expiry's forward measure the centred short rate is N(0, v): integrate the exercise value."""
    from scipy.integrate import quad

    swaptions = swaption_sets(
        pd.DataFrame(
            {
                "model": "m",
                "curve": "hull",
                "expiry": [1.0, 5.0, 0.25],
                "tenor": [5.0, 5.0, 9.75],
                "fixed_frequency": [2, 1, 4],
                "volatility": [0.01, 0.2, 0.008],
                "volatility_type": ["normal", "lognormal", "normal"],
                "strike": [0.07, np.nan, 0.06],
            }
        )
    )[0]
    for a in (0.0, 0.03, 0.4):
        sigma = 0.011
        price = payer_price(swaptions, a, sigma)
        for row in range(swaptions.size):
            t0 = swaptions.expiry[row]
            b = _b(a, swaptions.pay_time[row] - t0)
            v = sigma**2 * float(_b(2 * a, t0))
            ratio = swaptions.pay_discount[row] / swaptions.start_discount[row]

            def value(x):
                bond = np.sum(swaptions.amounts[row] * ratio * np.exp(-b * x - 0.5 * b * b * v))
                return max(1.0 - bond, 0.0) * np.exp(-0.5 * x * x / v) / np.sqrt(2 * np.pi * v)

            x_star = critical_rate(swaptions.amounts[row : row + 1] * ratio * np.exp(-0.5 * b * b * v), b[None])[0]
            expected = (
                swaptions.start_discount[row]
                * quad(value, x_star, 12 * np.sqrt(v), epsabs=1e-16, epsrel=1e-13, limit=200)[0]
            )
            assert price[row] == pytest.approx(expected, rel=1e-11)


@pytest.mark.parametrize("seed", [11, 12, 13, 14])
def test_fitted_mean_reversion_and_volatility_match_quantlib(seed):
    """Random grids of market volatilities (a Hull-White model's, plus noise): the same least-squares optimum."""
    rng = np.random.default_rng(seed)
    market = QuantLibMarket(random_rates(rng))
    quotes = random_grid(rng, int(rng.integers(6, 14)))
    true_a, true_sigma = float(rng.uniform(0.02, 0.2)), float(rng.uniform(0.006, 0.014))
    helpers = [market.helper(*q) for q in quotes]
    swaptions = market.swaptions(helpers, quotes)
    volatility = implied_volatility(swaptions, payer_price(swaptions, true_a, true_sigma))
    volatility *= rng.uniform(0.97, 1.03, len(volatility))
    quotes = [(*q[:3], v, *q[4:]) for q, v in zip(quotes, volatility)]
    swaptions = replace(swaptions, volatility=volatility)

    helpers = [market.helper(*q) for q in quotes]
    model = ql.HullWhite(market.handle, 0.1, 0.01)
    for h in helpers:
        h.setPricingEngine(ql.JamshidianSwaptionEngine(model))
    # Finite differences of 1e-6 relative (epsfcn 1e-12): QuantLib's prices carry ~1e-7 of critical-rate noise.
    model.calibrate(
        helpers, ql.LevenbergMarquardt(1e-12, 1e-12, 1e-12), ql.EndCriteria(10_000, 1_000, 1e-12, 1e-12, 1e-12)
    )
    expected_a, expected_sigma = model.params()
    fit = fit_hull_white(swaptions)
    assert fit.status == "converged"
    assert fit.mean_reversion == pytest.approx(expected_a, rel=1e-6)
    assert fit.volatility == pytest.approx(expected_sigma, rel=1e-6)
    np.testing.assert_allclose(fit.market_price, [h.marketValue() for h in helpers], rtol=1e-10)

    def objective(a, sigma):
        error = payer_price(swaptions, a, sigma) / fit.market_price - 1.0
        return error @ error

    # Both optimisers stop at a minimum of the same sum of squares: ours is no worse than QuantLib's but for
    # the last bits of the sum (the two evaluate the same prices in a different order).
    assert objective(fit.mean_reversion, fit.volatility) <= objective(expected_a, expected_sigma) * (1 + 1e-10)


def quotes_table(**columns):
    base = {
        "model": ["USD", "USD", "USD", "EUR", "EUR"],
        "curve": ["hull", "hull", "hull", "flat", "flat"],
        "expiry": [1.0, 2.0, 5.0, 1.0, 3.0],
        "tenor": [5.0, 3.0, 5.0, 2.0, 7.0],
        "fixed_frequency": [2, 2, 1, 1, 4],
        "volatility": [0.0095, 0.009, 0.2, 0.008, 0.0085],
        "volatility_type": ["normal", "normal", "lognormal", "normal", "normal"],
    }
    return pd.DataFrame({**base, **columns})


def test_calibrate_hull_white_fits_every_model(tmp_path):
    """EUR's volatilities are a Hull-White model's own (a = 0.05, sigma = 0.01): the fit finds it again."""
    flat = {"flat": ZeroCurve(np.array([0.0, 30.0]), np.array([0.03, 0.03]))}
    eur = swaption_sets(quotes_table().iloc[3:], flat)[0]
    volatility = implied_volatility(eur, payer_price(eur, 0.05, 0.01))
    quotes = quotes_table(volatility=[0.0095, 0.009, 0.2, *volatility])
    table = calibrate_hull_white(quotes, flat)
    assert list(table.columns) == [
        "model",
        "curve",
        "mean_reversion",
        "volatility",
        "rmse",
        "n_quotes",
        "n_evals",
        "status",
    ]
    assert list(table["model"]) == ["USD", "EUR"] and list(table["curve"]) == ["hull", "flat"]
    assert list(table["n_quotes"]) == [3, 2] and list(table["status"]) == ["converged"] * 2
    assert table["n_evals"].min() > 2
    usd, eur = table.iloc[0], table.iloc[1]
    assert (eur["mean_reversion"], eur["volatility"]) == pytest.approx((0.05, 0.01), rel=1e-8)
    assert eur["rmse"] < 1e-12 and usd["rmse"] > 1e-5
    usd_swaptions = swaption_sets(quotes.iloc[:3])[0]
    error = implied_volatility(usd_swaptions, payer_price(usd_swaptions, usd["mean_reversion"], usd["volatility"]))
    assert usd["rmse"] == pytest.approx(np.sqrt(np.mean((error - usd_swaptions.volatility) ** 2)), rel=1e-12)
    quotes.to_csv(tmp_path / "quotes.csv", index=False)
    pd.testing.assert_frame_equal(calibrate_hull_white(tmp_path / "quotes.csv", flat), table)


def test_time_form_cash_flows_and_at_the_money_strike():
    curve = builtin_curves()["hull"]
    s = swaption_sets(quotes_table().iloc[:3])[0]
    np.testing.assert_allclose(s.pay_time[0], 1.0 + np.arange(1, 11) / 2)
    np.testing.assert_allclose(s.pay_time[2, :5], 5.0 + np.arange(1, 6))
    np.testing.assert_array_equal(s.accrual[2], [1.0] * 5 + [0.0] * 5)
    annuity = np.sum(0.5 * curve.discount(1.0 + np.arange(1, 11) / 2))
    forward = (curve.discount(1.0) - curve.discount(6.0)) / annuity
    assert s.strike[0] == pytest.approx(forward, rel=1e-14)
    assert s.market_price()[0] == pytest.approx(annuity * 0.0095 * np.sqrt(1.0) / np.sqrt(2 * np.pi), rel=1e-14)
    # At the money a payer and a receiver are worth the same in the model: parity to the swap's value, 0.
    assert s.forward[0] == pytest.approx(s.strike[0], rel=1e-15)


@pytest.mark.parametrize(
    "change, column, rule",
    [
        (dict(tenor=1e12), "tenor", "must be <= 100 (years)"),
        (dict(expiry=500.0), "expiry", "must be <= 100 (years)"),
        (dict(volatility=1e12), "volatility", "must be between 1e-06 and 1 for a normal volatility"),
        (dict(volatility=1e-300), "volatility", "must be between 1e-06 and 1 for a normal volatility"),
        (
            dict(volatility=50.0, volatility_type="lognormal"),
            "volatility",
            "must be between 0.0001 and 10 for a lognormal volatility",
        ),
        (
            dict(volatility=1e-6, strike=5.0),
            "volatility",
            "gives a swaption price that is not a positive finite number",
        ),
    ],
)
def test_a_quote_out_of_any_market_is_named(change, column, rule):
    """Quotes no market has (a tenor of 10^12 years, a volatility of 10^12) are named, not fitted: before, they
    ran out of memory or stopped the fit with a traceback."""
    table = quotes_table(strike=np.nan).iloc[:3].copy()  # model USD, on the built-in curve
    for name, value in change.items():
        table[name] = table[name].astype(object)
        table.loc[0, name] = value
    with pytest.raises(InvalidInputError) as caught:
        swaption_sets(table)
    assert [(p.position, p.column, p.rule) for p in caught.value.problems] == [(0, column, rule)]


def test_bad_swaption_quotes_are_all_named():
    table = quotes_table(
        model=["USD", "USD", "USD", "EUR", None],
        curve=["hull", "hull", "nope", "hull", "hull"],
        expiry=[1.0, -1.0, 5.0, 1.0, 3.0],
        tenor=[5.3, 3.0, 5.0, 2.0, 7.0],
        fixed_frequency=[2, 3, 1, 1, 4],
        volatility=[0.0095, 0.0, 0.2, -0.01, 0.0085],
        volatility_type=["normal", "normal", "black", "normal", "normal"],
        strike=[np.nan, 0.05, -0.01, np.nan, np.nan],
        weight=[1.0, 1.0, -1.0, 1.0, 1.0],
    )
    with pytest.raises(InvalidInputError) as caught:
        swaption_sets(table)
    found = {(p.position, p.column, p.rule.split(" (")[0]) for p in caught.value.problems}
    assert found == {
        (0, "tenor", "must be a whole number of fixed periods"),
        (1, "expiry", "must be > 0"),
        (1, "volatility", "must be > 0"),
        (1, "fixed_frequency", "must be one of 1, 2, 4"),
        (2, "curve", "unknown curve"),
        (2, "volatility_type", "must be one of normal, lognormal"),
        (2, "strike", "must be > 0"),
        (2, "weight", "must be >= 0"),
        (2, "curve", "must be the same on every row of model 'USD'"),
        (3, "volatility", "must be > 0"),
        (3, "weight", "model 'EUR' needs at least 2 quotes with weight > 0"),
        (4, "model", "is required"),
    }
    assert "swaption_quotes row 3 (model 'USD'), column 'curve': unknown curve (known: hull)" in str(caught.value)


def test_negative_at_the_money_forward_is_named():
    inverted = ZeroCurve(np.array([0.0, 1.0, 10.0]), np.array([0.05, 0.05, -0.01]))
    table = quotes_table(curve=["low"] * 5, model=["M"] * 5, expiry=[1.0] * 5, tenor=[9.0] * 5, fixed_frequency=[1] * 5)
    with pytest.raises(InvalidInputError) as caught:
        swaption_sets(table, {"low": inverted})
    assert {p.column for p in caught.value.problems} == {"strike", "volatility_type"}
    assert len(caught.value.problems) == 6


def test_missing_columns_are_named():
    with pytest.raises(InvalidInputError) as caught:
        calibrate_hull_white(pd.DataFrame({"model": ["m"], "expiry": [1.0]}))
    assert {p.column for p in caught.value.problems} == {
        "curve",
        "tenor",
        "fixed_frequency",
        "volatility",
        "volatility_type",
    }

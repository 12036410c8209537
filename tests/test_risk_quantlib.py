"""Risk measures of dated callable and puttable bonds against QuantLib's ``CallableBond.OAS``,
``effectiveDuration`` and ``effectiveConvexity`` (the same spread bump), on trees that coincide with
QuantLib's (ACT/360 curve, 360 steps a year: every date a node; small trees so that QuantLib is quick)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import distprice
from distprice.curves import load_curves
from distprice.job import exercise_schedule, valuation_day
from distprice.lattice.instruments import prepare
from distprice.lattice.quotes import read_market_prices
from distprice.lattice.risk import price_measures, risk_engine, settlement

ql = pytest.importorskip("QuantLib")
from distprice.lattice.quantlib_dated import price_dated_quantlib, risk_dated_quantlib  # noqa: E402

AS_OF = "2025-12-15"
BUMP_BP = 2.0
"""QuantLib's bump in the comparison (ours is passed the same)."""
CURVES = pd.DataFrame(
    {
        "curve": "usd",
        "date": ["2026-03-16", "2026-12-15", "2027-12-15", "2029-06-15"],
        "zero_rate": [0.031, 0.034, 0.036, 0.039],
        "day_count": "ACT/360",
    }
)
BONDS = pd.DataFrame(
    [
        dict(
            id="call",
            instrument="callable_bond",
            exercise="bermudan",
            strike=100.0,
            coupon=0.055,
            coupon_frequency=2,
            issue_date="2025-09-15",
            maturity_date="2027-03-15",
            day_count="30/360",
            first_exercise_date="2026-03-15",
            expiry_date="2026-09-15",
            mean_reversion=0.4,
            volatility=0.012,
        ),
        dict(
            id="put",
            instrument="puttable_bond",
            exercise="bermudan",
            strike=100.0,
            coupon=0.04,
            coupon_frequency=4,
            issue_date="2025-08-10",
            maturity_date="2027-02-10",
            day_count="ACT/365F",
            calendar="US",
            first_exercise_date="2026-05-10",
            expiry_date="2026-11-10",
            mean_reversion=0.35,
            volatility=0.011,
        ),
        dict(
            id="stepdown",
            instrument="callable_bond",
            exercise="bermudan",
            coupon=0.065,
            coupon_frequency=2,
            issue_date="2025-04-01",
            maturity_date="2027-04-01",
            day_count="30E/360",
            mean_reversion=0.45,
            volatility=0.013,
        ),
    ]
).assign(steps_per_year=360, curve="usd")
SCHEDULE = pd.DataFrame(
    {
        "id": "stepdown",
        "date": ["2026-04-01", "2026-07-20", "2026-10-01"],
        "price": [101.5, 102.0, 100.0],
        "price_type": ["clean", "dirty", "clean"],
    }
)


def _setup(settlement_days: int, rows=slice(None)):
    curves = load_curves(CURVES)
    book = BONDS[rows].assign(settlement_days=settlement_days, id=BONDS["id"][rows] + f"-T{settlement_days}")
    table = SCHEDULE.assign(id=SCHEDULE["id"] + f"-T{settlement_days}")
    table = table[table["id"].isin(book["id"])]
    prepared = prepare(book, curves, as_of=valuation_day(AS_OF), exercise_schedule=exercise_schedule(table, book))
    assert not prepared.problems, prepared.problems
    instruments = prepared.instruments()
    theirs = price_dated_quantlib(book, curves, AS_OF, table, steps=instruments.geometry.height.tolist())
    market = theirs["clean_price"].to_numpy() - 1.0  # the model's clean price less one
    quotes, problems = read_market_prices(book.assign(market_price=market))
    assert not problems
    return book, table, curves, instruments, market, quotes


@pytest.fixture(scope="module")
def same_day():
    return _setup(0)


def test_oas_duration_and_convexity_equal_quantlibs_when_settlement_is_the_valuation_date(same_day):
    book, table, curves, instruments, market, quotes = same_day
    ours = price_measures(
        instruments, curves, engine="cpu", measures=["duration", "convexity", "oas"], bump_bp=BUMP_BP, quotes=quotes
    )
    theirs = risk_dated_quantlib(
        book, curves, AS_OF, table, steps=instruments.geometry.height.tolist(), bump=BUMP_BP * 1e-4, market_clean=market
    )
    assert all(e is None for e in ours["error"])
    assert np.all(theirs["oas"] > 0.002)  # a point of price is tens of basis points
    # Measured: OAS within 8.2e-13, duration 7.1e-11 relative, convexity 2.3e-7 relative (a second difference
    # over 2 bp magnifies the prices' last bits by ~1e8)
    np.testing.assert_allclose(ours["oas"], theirs["oas"], rtol=0, atol=2e-11)
    np.testing.assert_allclose(ours["effective_duration"], theirs["effective_duration"], rtol=7.5e-10)
    np.testing.assert_allclose(ours["effective_convexity"], theirs["effective_convexity"], rtol=2.4e-7)
    assert ours["effective_convexity"][1] > 0  # a put adds convexity


def test_with_settlement_after_valuation_our_oas_matches_the_dirty_price_at_settlement():
    """T+2: QuantLib's OAS makes the value at the valuation date equal the market's dirty price (our tree
    agrees at that spread); ours makes the dirty price at settlement equal it, a spread higher by about
    ``t(S) (z(t(S)) + oas) / duration``; at our OAS QuantLib's duration and convexity equal ours."""
    book, table, curves, instruments, market, quotes = _setup(2, slice(0, 1))
    ours = price_measures(
        instruments, curves, engine="cpu", bump_bp=BUMP_BP, quotes=quotes, measures=["duration", "convexity", "oas"]
    )
    steps = instruments.geometry.height.tolist()
    theirs = risk_dated_quantlib(book, curves, AS_OF, table, steps=steps, bump=BUMP_BP * 1e-4, market_clean=market)
    t, discount, interest = settlement(instruments, curves)
    assert np.all(t == 2 / 360)
    dirty = market + interest
    risk = risk_engine("cpu", instruments, curves)
    trees = risk.trees([0], instruments.table["volatility"], instruments.geometry.dr)
    for spread, equation in (
        (theirs["oas"].to_numpy(), lambda price, s: price),
        (ours["oas"], lambda price, s: price / (discount * np.exp(-s * t))),
    ):
        bond, option = risk.roll(trees, [0], np.zeros(1), spread[:, None, None])
        price = bond[:, 0] - option[:, 0]  # a callable bond
        np.testing.assert_allclose(equation(price, spread), dirty, rtol=1e-10)
    curve = curves["usd"].at(valuation_day(AS_OF))
    expected = t * (curve.rate(t) + ours["oas"]) / ours["effective_duration"]
    np.testing.assert_allclose(ours["oas"] - theirs["oas"], expected, rtol=0.05)
    at_ours = risk_dated_quantlib(book, curves, AS_OF, table, steps=steps, bump=BUMP_BP * 1e-4, spread=ours["oas"])
    np.testing.assert_allclose(ours["effective_duration"], at_ours["effective_duration"], rtol=1e-9)
    np.testing.assert_allclose(ours["effective_convexity"], at_ours["effective_convexity"], rtol=1e-6)


def test_reference_engine_agrees_on_dated_rows_with_market_prices(same_day):
    book, table, curves, instruments, market, quotes = same_day
    rows = instruments.take([0, 2])
    quoted = quotes.take([0, 2])
    measures = ["dv01", "duration", "convexity", "vega", "oas"]
    cpu = price_measures(rows, curves, engine="cpu", measures=measures, quotes=quoted)
    ref = price_measures(rows, curves, engine="reference", measures=measures, quotes=quoted)
    np.testing.assert_allclose(cpu["oas"], ref["oas"], rtol=0, atol=1e-11)
    for column in ("dv01", "effective_duration", "vega"):
        np.testing.assert_allclose(cpu[column], ref[column], rtol=1e-9, err_msg=column)
    np.testing.assert_allclose(cpu["effective_convexity"], ref["effective_convexity"], rtol=1e-7)


@pytest.mark.parametrize("settlement_days", [1, 3])
def test_oas_of_both_engines_reprices_the_dirty_price_at_settlement(settlement_days):
    """T+1 and T+3 (a Tuesday and a Thursday after a Monday): the CPU and reference engines find the same OAS,
    and the curve shifted by it, priced as any curve is, gives the market's dirty price at settlement, the
    settlement term of the OAS equation checked from outside it."""
    book, table, curves, instruments, market, quotes = _setup(settlement_days)
    found = {
        engine: price_measures(instruments, curves, engine=engine, measures=["oas"], quotes=quotes)
        for engine in ("cpu", "reference")
    }
    assert all(e is None for e in found["cpu"]["error"]) and np.all(found["cpu"]["oas"] > 0.002)
    np.testing.assert_allclose(found["cpu"]["oas"], found["reference"]["oas"], rtol=0, atol=1e-11)
    for engine, measured in found.items():
        shifted = pd.concat(
            [CURVES.assign(curve=f"usd{i}", zero_rate=CURVES["zero_rate"] + s) for i, s in enumerate(measured["oas"])]
        )
        own = book.assign(curve=[f"usd{i}" for i in range(len(book))])
        priced = distprice.price(own, shifted, engine=engine, as_of=AS_OF, exercise_schedule=table)
        np.testing.assert_allclose(priced["dirty_price"], market + priced["accrued"], rtol=1e-9, err_msg=engine)

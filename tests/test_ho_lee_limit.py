"""A mean reversion near zero (the Ho-Lee limit): the tree is not cut but fans out to its last step, equal to
QuantLib's on a daily grid down to a = 1e-12, and its prices move smoothly as ``a`` falls through the
smallest cut (docs/model/tree.rst)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import distprice
from distprice.curves import load_curves
from distprice.lattice.geometry import CUT_LIMIT, tree_geometry
from distprice.lattice.instruments import prepare

ql = pytest.importorskip("QuantLib")
from distprice.lattice.quantlib import price_quantlib  # noqa: E402
from distprice.lattice.quantlib_dated import price_dated_quantlib  # noqa: E402

AS_OF = "2025-12-15"
CURVES = pd.DataFrame(
    {
        "curve": "usd",
        "date": ["2026-03-16", "2026-12-15", "2028-12-15", "2031-06-16", "2040-01-15"],
        "zero_rate": [0.031, 0.033, 0.036, 0.04, 0.043],
        "day_count": "ACT/365F",
    }
)
DAILY = 365
LOWEST_CUT = -np.log1p(-0.184 / CUT_LIMIT) * DAILY
"""The mean reversion whose cut at 365 steps a year is CUT_LIMIT exactly (about 0.0041): lower ones are not cut."""
MEAN_REVERSIONS = [0.02, 0.0046, 1.001 * LOWEST_CUT, 0.999 * LOWEST_CUT, 1e-3, 1e-6, 1e-9, 1e-12]


def dated_bonds(mean_reversions) -> pd.DataFrame:
    """A 5 % semiannual bond of three and a half years, callable and puttable at par every coupon date from
    its second, at each mean reversion; volatility 1 %, one step a day of its ACT/365F curve."""
    rows = []
    for k, a in enumerate(mean_reversions):
        for instrument in ("callable_bond", "puttable_bond"):
            rows.append(
                dict(
                    id=f"{instrument}-{k}",
                    instrument=instrument,
                    exercise="bermudan",
                    strike=100.0,
                    coupon=0.05,
                    coupon_frequency=2,
                    issue_date="2025-06-15",
                    maturity_date="2029-06-15",
                    first_exercise_date="2026-12-15",
                    expiry_date="2028-12-15",
                    mean_reversion=a,
                    volatility=0.01,
                    steps_per_year=DAILY,
                    curve="usd",
                )
            )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def daily():
    portfolio = dated_bonds(MEAN_REVERSIONS)
    ours = distprice.price(portfolio, CURVES, engine="cpu", as_of=AS_OF)
    assert ours["error"].isna().all(), ours["error"].dropna().tolist()
    theirs = price_dated_quantlib(portfolio, load_curves(CURVES), AS_OF, steps=ours["height"].tolist())
    return portfolio, ours, theirs


def test_a_tree_whose_cut_lies_beyond_the_limit_fans_out_to_its_last_step(daily):
    portfolio, ours, _ = daily
    cut = portfolio["mean_reversion"] >= LOWEST_CUT
    assert set(cut) == {True, False}
    assert (ours["width"][~cut] == 2 * ours["height"][~cut] + 1).all()
    hull_white = 2 * np.ceil(-0.184 / np.expm1(-portfolio["mean_reversion"][cut] / DAILY)) + 1
    np.testing.assert_array_equal(ours["width"][cut], hull_white)
    assert ours["width"][cut].max() > 2 * CUT_LIMIT - 40  # just above the lowest cut: about the widest tree


def test_equal_to_quantlib_on_a_daily_grid_down_to_a_1e_12(daily):
    """QuantLib's tree is never cut; every date is a node: the same prices, at every mean reversion, to 1e-10.
    Closer where QuantLib's step variance is exact: below a = 1.5e-8 it takes sigma^2 dt, above it
    ``(1 - exp(-2 a dt)) / (2 a)``, which loses digits as ``a dt`` falls (about 1e-8 of the variance at
    a = 1e-6: 3e-11 of the price; with QuantLib's variance the prices agree to 7e-15 there); this tree takes
    expm1."""
    portfolio, ours, theirs = daily
    a = portfolio["mean_reversion"]
    exact = (a < 1.5e-8) | (a >= 1e-3)
    for column in ("price", "dirty_price", "clean_price", "accrued"):
        np.testing.assert_allclose(ours[column], theirs[column], rtol=1e-10, atol=0, err_msg=column)
        np.testing.assert_allclose(ours[column][exact], theirs[column][exact], rtol=1e-13, err_msg=column)
    assert (ours["option_price"] > 0.3).all()  # the options are worth something at every a


def test_prices_move_smoothly_as_the_mean_reversion_falls_through_the_lowest_cut(daily):
    """Price against a: monotone (a callable gains, a puttable loses as a rises: long rates move less), with a
    slope that stays bounded across the lowest cut (where the tree stops being cut) and tends to the Ho-Lee
    limit linearly."""
    portfolio, ours, _ = daily
    a = portfolio["mean_reversion"].to_numpy()
    for instrument, sign in (("callable_bond", 1), ("puttable_bond", -1)):
        mine = (portfolio["instrument"] == instrument).to_numpy()
        price = ours["price"].to_numpy()[mine]
        slope = np.diff(price) / np.diff(a[mine])
        assert (sign * slope > 0).all(), slope
        assert np.abs(slope).max() < 5 * np.abs(slope).min() + 5, slope
        across = slice(2, 3)  # between 1.001 and 0.999 times the lowest cut
        assert abs(slope[across][0]) == pytest.approx(abs(slope[1]), rel=0.05)
        assert abs(price[-2] - price[-1]) < 1e-6  # a = 1e-9 and 1e-12: the limit


def test_the_reference_engine_prices_the_ho_lee_limit_as_the_cpu_engine():
    portfolio = dated_bonds([1e-12, 0.999 * LOWEST_CUT])
    reference = distprice.price(portfolio, CURVES, engine="reference", as_of=AS_OF)
    cpu = distprice.price(portfolio, CURVES, engine="cpu", as_of=AS_OF)
    np.testing.assert_allclose(reference["price"], cpu["price"], rtol=1e-13)
    assert (reference["width"] == 2 * reference["height"] + 1).all()


def test_time_form_rows_equal_quantlib_at_a_1e_12_on_a_daily_grid():
    """Bond options and callable and puttable bonds in years, one step a day of a 360-day year, every date a
    node: QuantLib's prices, on both host engines."""
    curves = pd.DataFrame(dict(curve="flat", t=[0.0, 10.0], zero_rate=[0.03, 0.045]))
    common = dict(maturity=3.0, coupon=0.04, coupon_frequency=2, mean_reversion=1e-12, volatility=0.012)
    portfolio = pd.DataFrame(
        [
            dict(id="call", instrument="bond_option", option_type="call", exercise="european", strike=99.0, expiry=1.0),
            dict(id="put", instrument="bond_option", option_type="put", exercise="bermudan", strike=101.0, expiry=2.5),
            dict(id="callable", instrument="callable_bond", exercise="bermudan", strike=100.0, expiry=2.5),
            dict(id="puttable", instrument="puttable_bond", exercise="bermudan", strike=98.0, expiry=2.0),
        ]
    ).assign(**common, exercise_frequency=2, first_exercise=1.0, steps_per_year=360, curve="flat")
    loaded = load_curves(curves)
    peer = price_quantlib(prepare(portfolio, loaded).table, {k: (c.t, c.zero_rate) for k, c in loaded.items()})
    for engine in ("cpu", "reference"):
        ours = distprice.price(portfolio, curves, engine=engine)
        assert (ours["width"] == 2 * 1080 + 1).all()
        for column in ("bond_price", "option_price", "price"):
            np.testing.assert_allclose(ours[column], peer[column], rtol=1e-11, err_msg=f"{engine} {column}")
        assert (ours["option_price"] > 0.1).all()


def test_the_step_variance_tends_to_sigma_squared_dt():
    """expm1 keeps the variance exact as a dt vanishes (1 - exp(-2 a dt) would lose every digit), down to a
    mean reversion whose a dt underflows."""
    for a in (1e-6, 1e-12, 1e-300, 5e-324):
        g = tree_geometry(a, 0.01, 2.0, 365)
        assert float(g.dr) == pytest.approx(0.01 * np.sqrt(3.0 / 365), rel=1e-8)
        assert int(g.jmax) == int(g.height) == 730

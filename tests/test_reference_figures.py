"""The reference figures (docs/model/tree.rst): Hull's example, the analytic value, exact repricing of
discount bonds, parity, exercise order."""

import numpy as np
import pandas as pd
import pytest

import distprice
from distprice.curves import builtin_curves

from utils import HULL_PUT, jamshidian_bond_option

HULL_STEPS = (1, 5, 10, 25, 100, 365)
HULL_TREE = (1.8799573, 1.8382686, 1.8185118, 1.8112069, 1.8105391, 1.8096889)
ENGINES = ("reference", "cpu")


@pytest.mark.parametrize("engine", ENGINES)
def test_hull_table(engine):
    book = pd.DataFrame([dict(HULL_PUT, id=s, steps_per_year=s) for s in HULL_STEPS])
    priced = distprice.price(book, engine=engine)
    np.testing.assert_allclose(priced["price"], HULL_TREE, rtol=0, atol=5e-8)
    last = priced.iloc[-1]
    assert (last["width"], last["height"]) == (1345, 3285)


@pytest.mark.parametrize("engine", ENGINES)
def test_the_tree_converges_to_the_analytic_value(engine):
    """The closed-form Hull-White put on a zero-coupon bond is 1.8092942; the engine's tree comes closer to it
    at every finer grid of Hull's table, to within 4e-4 at 365 steps a year."""
    curve = builtin_curves()["hull"]
    analytic = jamshidian_bond_option(curve.discount, 0.1, 0.01, 3.0, [9.0], [100.0], 63.0, "put")
    assert analytic == pytest.approx(1.8092942, abs=5e-8)
    steps = HULL_STEPS[1:]
    book = pd.DataFrame([dict(HULL_PUT, id=s, steps_per_year=s) for s in steps])
    error = np.abs(distprice.price(book, engine=engine)["price"].to_numpy() - analytic)
    assert (np.diff(error) < 0).all() and error[-1] < 4e-4, error


@pytest.mark.parametrize("engine", ENGINES)
def test_tree_reprices_discount_bonds(engine):
    """A zero-coupon bond is worth ``face * P(0, T)`` on the tree, for every maturity on the grid."""
    curve = builtin_curves()["hull"]
    heights = np.array([1, 2, 3, 7, 36, 120, 361])
    book = pd.DataFrame(
        dict(
            id=np.arange(len(heights)),
            option_type="call",
            strike=0.0,
            expiry=heights / 12,
            maturity=heights / 12,
            mean_reversion=np.linspace(0.02, 0.9, len(heights)),
            volatility=0.015,
            curve="hull",
            face=250.0,
        )
    )
    priced = distprice.price(book, engine=engine)
    np.testing.assert_allclose(priced["bond_price"], 250.0 * curve.discount(heights / 12), rtol=1e-13)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("coupon,expiry", [(0.0, 2.0), (0.06, 2.0), (0.06, 2.25 + 1 / 12)])
def test_put_call_parity(engine, coupon, expiry):
    """European: ``call - put = B_ex(0) - K P(0, T_ex)``, B_ex the bond's cash flows after expiry."""
    curve = builtin_curves()["hull"]
    spy, maturity, face, strike = 12, 7.0, 100.0, 95.0
    common = dict(
        strike=strike,
        expiry=expiry,
        maturity=maturity,
        coupon=coupon,
        coupon_frequency=2 if coupon else 0,
        face=face,
        mean_reversion=0.05,
        volatility=0.012,
        steps_per_year=spy,
        curve="hull",
    )
    priced = distprice.price(
        pd.DataFrame([dict(common, id="c", option_type="call"), dict(common, id="p", option_type="put")]), engine=engine
    )
    coupon_times = maturity - np.arange(0, 2 * maturity) / 2
    after = coupon_times[coupon_times > expiry + 1e-12]
    bond_ex = (
        face * curve.discount(maturity) + (face * coupon / 2 * curve.discount(after)).sum()
        if coupon
        else face * curve.discount(maturity)
    )
    last_coupon = coupon_times[coupon_times <= expiry + 1e-12].max() if coupon else expiry
    K = strike + face * coupon * (expiry - last_coupon)
    call, put = priced["price"]
    assert call - put == pytest.approx(bond_ex - K * curve.discount(expiry), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_american_ge_bermudan_ge_european(engine, mixed_portfolio):
    """With every bermudan date on the tree's grid (off-grid dates carry other accrued amounts)."""
    base = mixed_portfolio.assign(
        instrument="bond_option",
        exercise_frequency=1,
        option_type=np.where(np.arange(len(mixed_portfolio)) % 2, "call", "put"),
    ).head(60)
    prices = {
        style: distprice.price(base.assign(exercise=style), engine=engine)["option_price"].to_numpy()
        for style in ("european", "bermudan", "american")
    }
    assert (prices["american"] >= prices["bermudan"] - 1e-12).all()
    assert (prices["bermudan"] >= prices["european"] - 1e-12).all()
    assert (prices["american"] > prices["european"] + 1e-9).any()

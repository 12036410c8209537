"""distprice against QuantLib's Hull-White tree on instruments where the two trees coincide and agree
exactly (docs/model/tree.rst)."""

import numpy as np
import pandas as pd
import pytest

import distprice
from distprice.curves import load_curves
from distprice.lattice.instruments import prepare

pytest.importorskip("QuantLib")
from distprice.lattice.quantlib import price_quantlib  # noqa: E402

# every knot on a whole day of a 360-day year
CURVES = pd.DataFrame(
    dict(
        curve=["usd"] * 6 + ["eur"] * 4,
        t=np.array([30, 180, 360, 720, 1800, 3600, 90, 720, 2160, 7200]) / 360,
        zero_rate=[0.041, 0.043, 0.045, 0.047, 0.050, 0.052, 0.021, 0.018, 0.025, 0.031],
    )
)


def on_grid_portfolio(rng: np.random.Generator, n: int) -> pd.DataFrame:
    """Instruments whose every date is a whole Act360 day on the tree grid, with ``a * dt <= 0.004``."""
    rows = []
    for i in range(n):
        spy = int(rng.choice([12, 24, 36]))  # one step is at least 10 days: no exercise in a coupon's last week
        height = int(rng.integers(2, 121))
        expiry_step = int(rng.integers(1, height + 1))
        ex_frequency = int(rng.choice([1, 2, 4, 12]))
        coupon = float(rng.choice([0.0, 0.04, 0.065]))
        instrument = str(rng.choice(["bond_option", "callable_bond", "puttable_bond"]))
        rows.append(
            dict(
                id=i,
                instrument=instrument,
                option_type=str(rng.choice(["call", "put"])) if instrument == "bond_option" else None,
                exercise=str(rng.choice(["european", "bermudan", "american"])),
                strike=float(rng.uniform(60, 105)),
                expiry=expiry_step / spy,
                first_exercise=int(rng.integers(0, expiry_step + 1)) / spy,
                exercise_frequency=ex_frequency,
                maturity=height / spy,
                coupon=coupon,
                coupon_frequency=int(rng.choice([1, 2, 4])) if coupon else 0,
                face=float(rng.choice([100.0, 1000.0])),
                mean_reversion=float(rng.uniform(0.005, 0.004 * spy)),
                volatility=float(rng.uniform(0.003, 0.02)),
                steps_per_year=spy,
                curve=str(rng.choice(["usd", "eur"])),
            )
        )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def agreement():
    portfolio = on_grid_portfolio(np.random.default_rng(5), 300)
    curves = load_curves(CURVES)
    peer = price_quantlib(prepare(portfolio, curves).table, {k: (c.t, c.zero_rate) for k, c in curves.items()})
    return portfolio, peer


@pytest.mark.parametrize("engine", ["cpu", "reference"])
def test_agrees_with_quantlib(engine, agreement):
    portfolio, peer = agreement
    ours = distprice.price(portfolio, CURVES, engine=engine)
    assert set(portfolio["instrument"]) == {"bond_option", "callable_bond", "puttable_bond"}
    assert set(portfolio["exercise"]) == {"european", "bermudan", "american"}
    for column in ("bond_price", "option_price", "price"):
        diff = (ours[column] - peer[column]).abs()
        # an option's rounding is that of the bond it is written on: measure against the bond price
        assert (diff / peer["bond_price"]).max() < 1e-13, column
        sizeable = peer[column].abs() > 0.01 * portfolio["face"]
        assert (diff / peer[column].abs())[sizeable].max() < 1e-12, column
    assert (peer["option_price"] > 1e-3).sum() > 100  # most options are worth something

"""Shared test data: random portfolios of every instrument kind, exercise style and coupon shape."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

HULL_PUT = dict(instrument="bond_option", option_type="put", exercise="european", strike=63.0, expiry=3.0,
                maturity=9.0, coupon=0.0, face=100.0, mean_reversion=0.1, volatility=0.01, curve="hull")


def random_portfolio(rng: np.random.Generator, n: int, max_steps_per_year: int = 52) -> pd.DataFrame:
    """``n`` valid instruments on the ``hull`` curve with small trees (fast under the reference engine)."""
    rows = []
    for i in range(n):
        spy = int(rng.choice([s for s in (1, 2, 4, 12, 24, 52) if s <= max_steps_per_year]))
        height = int(rng.integers(1, min(30 * spy, 240) + 1))
        maturity = height / spy
        expiry = int(rng.integers(1, height + 1)) / spy
        coupon = float(rng.choice([0.0, 0.03, 0.07]))
        instrument = str(rng.choice(["bond_option", "callable_bond", "puttable_bond"]))
        rows.append(dict(
            id=f"ins-{i}", instrument=instrument,
            option_type=str(rng.choice(["call", "put"])) if instrument == "bond_option" else None,
            exercise=str(rng.choice(["european", "bermudan", "american"])),
            strike=float(rng.uniform(30, 110)), expiry=expiry, first_exercise=float(rng.uniform(0, expiry)),
            exercise_frequency=int(rng.choice([1, 2, 4, 12])), maturity=maturity, coupon=coupon,
            coupon_frequency=int(rng.choice([1, 2, 4])) if coupon else 0, face=float(rng.choice([100.0, 1000.0])),
            mean_reversion=float(rng.uniform(0.02, 1.5)), volatility=float(rng.uniform(0.002, 0.03)),
            steps_per_year=spy, curve="hull", quantity=float(rng.integers(-5, 6))))
    return pd.DataFrame(rows)


@pytest.fixture(scope="session")
def mixed_portfolio() -> pd.DataFrame:
    return random_portfolio(np.random.default_rng(20261122), 150)

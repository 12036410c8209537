"""Vectorised geometry and event tables against the rules read row by row (the reference engine)."""
import numpy as np
import pytest

from distprice.lattice.reference import _events
from distprice.lattice.instruments import prepare
from distprice.curves import builtin_curves
from distprice.lattice.events import EXERCISE_CODES, accrued, coupon_events, exercise_events
from distprice.lattice.geometry import to_step, tree_geometry

from utils import random_portfolio


def test_geometry_of_hull_example():
    g = tree_geometry(0.1, 0.01, 9.0, 365)
    assert (int(g.width), int(g.height), int(g.jmax)) == (1345, 3285, 672)
    assert int(g.node_steps) == 2 * 1345 * 3285
    assert float(g.dr) == pytest.approx(np.sqrt(3 * 0.01**2 * (1 - np.exp(-0.2 / 365)) / 0.2), rel=1e-15)


def test_to_step_rounds_halves_up():
    assert to_step([0.0, 0.04, 1 / 24, 0.125, 9.0], 12).tolist() == [0, 0, 1, 2, 108]


def test_accrued():
    # 6% semi-annual on 100, maturity 5: coupon dates ..., 4.0, 4.5, 5.0
    assert accrued(4.25, 5.0, 0.06, 2, 100.0) == pytest.approx(1.5)
    assert accrued(4.5, 5.0, 0.06, 2, 100.0) == 0.0
    assert accrued(0.1, 5.0, 0.06, 2, 100.0) == pytest.approx(0.6)  # schedule runs back before today
    assert accrued(3.3, 5.0, 0.0, 0, 100.0) == 0.0


def test_event_tables_match_row_by_row_reading():
    curves = builtin_curves()
    table = prepare(random_portfolio(np.random.default_rng(7), 300), curves).table
    cols = {c: table[c].to_numpy() for c in table.columns}
    coupons = coupon_events(cols["maturity"], cols["coupon"], cols["coupon_frequency"], cols["face"],
                            cols["steps_per_year"])
    exercises = exercise_events(table["exercise"].map(EXERCISE_CODES).to_numpy(), cols["expiry"],
                                cols["first_exercise"], cols["exercise_frequency"], cols["strike"], cols["maturity"],
                                cols["coupon"], cols["coupon_frequency"], cols["face"], cols["steps_per_year"])
    for r, ins in enumerate(table.itertuples(index=False)):
        expected_coupons, expected_exercises = _events(ins)
        steps, amounts = coupons.row(r)
        assert (np.diff(steps) <= 0).all()
        got = {}
        for s, a in zip(steps, amounts):
            got[int(s)] = got.get(int(s), 0.0) + a
        assert got.keys() == expected_coupons.keys()
        np.testing.assert_allclose([got[s] for s in got], [expected_coupons[s] for s in got], rtol=1e-14)
        steps, amounts = exercises.row(r)
        assert (np.diff(steps) <= 0).all() and (steps >= 1).all()
        got = {}
        for s, a in zip(steps, amounts):
            got.setdefault(int(s), []).append(a)
        assert got.keys() == expected_exercises.keys()
        for s in got:
            np.testing.assert_allclose(sorted(got[s]), sorted(expected_exercises[s]), rtol=1e-12, atol=1e-12)

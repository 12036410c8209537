"""Vectorised geometry and event tables against the rules read row by row (the reference engine)."""

import numpy as np
import pytest

from distprice.curves import builtin_curves
from distprice.lattice import events as codes
from distprice.lattice.events import EXERCISE_CODES, accrued, time_form_events
from distprice.lattice.geometry import to_step, tree_geometry
from distprice.lattice.instruments import prepare
from distprice.lattice.reference import COUPON, EXERCISE, REDEMPTION, _events_by_step

from utils import random_portfolio

KINDS = {REDEMPTION: codes.REDEMPTION, EXERCISE: codes.EXERCISE, COUPON: codes.COUPON}


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
    """Every row's events, step by step in the order they are applied, with their forward-adjusted amounts,
    equal the reference engine's literal reading (off-grid rows included)."""
    curves = builtin_curves()
    portfolio = random_portfolio(np.random.default_rng(7), 300)
    off_grid = portfolio.index % 3 == 0  # times that fall between the tree's steps
    portfolio.loc[off_grid, "maturity"] += 0.013
    portfolio.loc[off_grid, "expiry"] += 0.007
    table = prepare(portfolio, curves).table
    cols = {c: table[c].to_numpy() for c in table.columns}
    events = time_form_events(
        table["exercise"].map(EXERCISE_CODES).to_numpy(),
        cols["expiry"],
        cols["first_exercise"],
        cols["exercise_frequency"],
        cols["strike"],
        cols["maturity"],
        cols["coupon"],
        cols["coupon_frequency"],
        cols["face"],
        cols["steps_per_year"],
        (table["instrument"] != "bond").to_numpy(),
    )
    curve = curves["hull"]
    for r, ins in enumerate(table.itertuples(index=False)):
        steps, times, kinds, amounts = events.row(r)
        assert (np.diff(steps) <= 0).all() and (steps >= 1).all()
        assert steps[0] == tree_geometry(ins.mean_reversion, ins.volatility, ins.maturity, ins.steps_per_year).height
        dt = 1.0 / ins.steps_per_year
        adjusted = amounts * curve.discount(times) / curve.discount(steps * dt)
        got = {}
        for s, k, a in zip(steps, kinds, adjusted):
            got.setdefault(int(s), []).append((int(k), a))
        expected = _events_by_step(ins, curve)
        assert got.keys() == expected.keys()
        for s in got:
            assert [k for k, _ in got[s]] == [KINDS[k] for k, _ in expected[s]], (r, s)
            np.testing.assert_allclose([a for _, a in got[s]], [a for _, a in expected[s]], rtol=1e-14, atol=1e-12)


def test_events_on_the_grid_are_at_the_steps_own_time():
    """An on-grid event's time is ``s * dt`` itself, so its forward adjustment is exactly 1."""
    table = prepare(random_portfolio(np.random.default_rng(3), 50), builtin_curves()).table
    cols = {c: table[c].to_numpy() for c in table.columns}
    events = time_form_events(
        table["exercise"].map(EXERCISE_CODES).to_numpy(),
        cols["expiry"],
        cols["first_exercise"],
        cols["exercise_frequency"],
        cols["strike"],
        cols["maturity"],
        cols["coupon"],
        cols["coupon_frequency"],
        cols["face"],
        cols["steps_per_year"],
        np.ones(len(table), dtype=bool),
    )
    spy = np.repeat(cols["steps_per_year"], np.diff(events.offsets))
    on_grid = np.abs(events.time * spy - events.step) <= 1e-9
    assert on_grid.sum() > 1000 and (~on_grid).sum() > 100
    np.testing.assert_array_equal(events.time[on_grid], events.step[on_grid] * (1.0 / spy[on_grid]))

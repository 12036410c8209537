"""Cash flows between two tree steps spread over both (distprice/lattice/placement.py, docs/model/events.rst):
the table's shape and order, the straight bond still exact on the curve, the reference engine equal to the CPU
engine, and a coarse tree's error on QuantLib's callable bond example about QuantLib's own."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import distprice
from distprice.cuda import gpu_available
from distprice.curves import load_curves
from distprice.job import exercise_schedule as read_schedule
from distprice.lattice.batch import events_of, pack
from distprice.lattice.engines import GPU_ENGINES
from distprice.lattice.events import COUPON, REDEMPTION, is_exercise, step_time
from distprice.lattice.instruments import prepare
from distprice.lattice.quantlib_dated import quantlib_example
from distprice.lattice.sweeps import cut_steps

from utils import random_dated_bonds

AS_OF = "2025-12-15"
CURVES = pd.DataFrame(
    {
        "curve": "usd",
        "date": ["2026-03-16", "2026-12-15", "2028-12-15", "2031-06-16", "2040-01-15"],
        "zero_rate": [0.031, 0.033, 0.036, 0.04, 0.043],
        "day_count": "ACT/365F",
    }
)


@pytest.fixture(scope="module")
def coarse_book():
    """Random dated callable and puttable bonds, a quarter american, at 12 steps a year: most dates between two
    steps."""
    return random_dated_bonds(np.random.default_rng(8), 24, steps_per_year=12, years=(1, 12), american=True)


def test_the_spread_table_keeps_each_flow_and_the_backward_order(coarse_book):
    portfolio, schedule = coarse_book
    curves = load_curves(CURVES)
    day = int(np.datetime64(AS_OF).astype(np.int64))
    prepared = prepare(portfolio, curves, as_of=day, exercise_schedule=read_schedule(schedule, portfolio))
    assert not prepared.problems
    instruments = prepared.instruments()
    events = events_of(instruments)
    spread = 0
    for r in range(len(portfolio)):
        step, time, kind, amount = events.row(r)
        phase = instruments.geometry.phase[r]  # steps s >= 1 at (s + phase / 16) / 12 years
        assert (np.diff(step) <= 0).all() and (np.diff(time)[np.diff(step) == 0] <= 0).all()
        assert step.max() <= instruments.geometry.height[r]
        exercises = time[[is_exercise(k) for k in kind]]
        for t in np.unique(time[(kind == COUPON) | (kind == REDEMPTION)]):
            parts = np.flatnonzero(time == t)
            flows = parts[(kind[parts] == COUPON) | (kind[parts] == REDEMPTION)]
            if len(set(step[flows])) == 1:
                continue  # whole: on the grid, before the first step, or an exercise between its steps
            spread += 1
            lo, hi = step[flows].min(), step[flows].max()
            first, last = step_time(lo, 1 / 12, phase), step_time(hi, 1 / 12, phase)
            assert hi == lo + 1 and first < t < last
            assert not ((first <= exercises) & (exercises <= last)).any()
            upper = amount[flows][step[flows] == hi].sum()
            assert upper / amount[flows].sum() == pytest.approx(t * 12 - phase / 16 - lo, rel=1e-12)
    assert spread > 100
    assert (instruments.geometry.phase != 0).sum() > 10  # most bermudan rows' trees have a phase


def test_a_trees_phase_brings_its_exercise_dates_onto_nodes(coarse_book):
    """An american row's expiry lies within a thirty-second of a step of a node; the bermudan rows' dates, whose
    places within a step spread with their calendars, come nearly three times closer to nodes than on unshifted
    trees (rms 0.10 of a step against 0.28 at 12 steps a year; 0.093 with every date weighing alike)."""
    portfolio, schedule = coarse_book
    curves = load_curves(CURVES)
    day = int(np.datetime64(AS_OF).astype(np.int64))
    instruments = prepare(
        portfolio, curves, as_of=day, exercise_schedule=read_schedule(schedule, portfolio)
    ).instruments()
    events = events_of(instruments)
    shifted, unshifted = [], []
    for r in range(len(portfolio)):
        step, time, kind, _ = events.row(r)
        place = time[[is_exercise(k) for k in kind]] * 12  # in steps, latest first
        phase = instruments.geometry.phase[r]
        if portfolio["exercise"][r] == "american":
            assert abs(place[0] - phase / 16 - round(place[0] - phase / 16)) <= 1 / 32
            continue
        shifted += list(place - phase / 16 - np.round(place - phase / 16))
        unshifted += list(place - np.round(place))
    assert np.sqrt(np.mean(np.square(shifted))) < 0.4 * np.sqrt(np.mean(np.square(unshifted)))


def test_the_reference_engine_spreads_alike(coarse_book):
    portfolio, schedule = coarse_book
    ref = distprice.price(portfolio, CURVES, engine="reference", as_of=AS_OF, exercise_schedule=schedule)
    cpu = distprice.price(portfolio, CURVES, engine="cpu", as_of=AS_OF, exercise_schedule=schedule)
    assert ref["error"].isna().all()
    for column in ("price", "bond_price", "option_price", "clean_price"):
        np.testing.assert_allclose(cpu[column], ref[column], rtol=1e-12, atol=1e-11, err_msg=column)
    np.testing.assert_array_equal(cpu["height"], ref["height"])


def test_the_tree_still_reprices_the_bond_on_the_curve(coarse_book):
    """A callable's bond, rolled through the tree with its flows in parts, is its flows discounted on the curve."""
    portfolio, schedule = coarse_book
    priced = distprice.price(portfolio, CURVES, engine="cpu", as_of=AS_OF, exercise_schedule=schedule)
    plain = distprice.price(
        portfolio.assign(instrument="bond", exercise=None, strike=np.nan, first_exercise_date=None, expiry_date=None),
        CURVES,
        engine="cpu",
        as_of=AS_OF,
    )
    np.testing.assert_allclose(priced["bond_price"], plain["price"], rtol=1e-13)


def test_quantlibs_example_at_8_steps_a_year_is_as_close_as_quantlibs_own_grid():
    """At a = 0.06, sigma = 0.20 and 8 steps a year, the clean price was 0.43 from its daily limit with every flow
    whole on its nearest step; spread, 0.21, as QuantLib's grid with every date a node (0.20 from its own daily
    limit: measured once, 53.1743 at 49 steps against 53.3710)."""
    coarse, calls, curve = quantlib_example(0.06, 0.20, 8)
    fine, _, _ = quantlib_example(0.06, 0.20, 365)
    priced = distprice.price(
        pd.concat([coarse, fine.assign(id="fine")], ignore_index=True),
        curve,
        engine="cpu",
        exercise_schedule=pd.concat([calls, calls.assign(id="fine")], ignore_index=True),
    )
    error = priced.loc[0, "clean_price"] - priced.loc[1, "clean_price"]
    assert priced.loc[1, "clean_price"] == pytest.approx(53.36964, abs=1e-5)
    assert -0.25 < error < -0.15


@pytest.mark.gpu
@pytest.mark.parametrize("engine", GPU_ENGINES)
def test_the_gpu_engines_price_the_spread_flows_as_the_cpu_engine(coarse_book, engine):
    """The kernels read the same event table (the parts are events like any other): nothing new on the device."""
    if not gpu_available():
        pytest.skip("needs a CUDA GPU and CuPy")
    portfolio, schedule = coarse_book
    cpu = distprice.price(portfolio, CURVES, engine="cpu", as_of=AS_OF, exercise_schedule=schedule)
    gpu = distprice.price(portfolio, CURVES, engine=engine, as_of=AS_OF, exercise_schedule=schedule)
    assert gpu["error"].isna().all()
    for column in ("price", "bond_price", "option_price"):
        np.testing.assert_allclose(gpu[column], cpu[column], rtol=1e-12, atol=1e-11, err_msg=column)


TOP_AS_OF = "2026-01-05"
TOP_CURVES = pd.DataFrame(
    {
        "curve": "eur",
        "date": ["2026-07-06", "2028-01-05", "2031-01-06", "2036-01-07"],
        "zero_rate": [0.021, 0.024, 0.027, 0.031],
        "day_count": "ACT/360",
    }
)


def top_book() -> pd.DataFrame:
    """Rows whose one exercise date is their redemption date, 1 845 days (61.5 steps of 30 days) after valuation:
    their trees' phase (-8) puts it on a node, their top step, so their backward passes reach the root through
    its first step of its own."""
    row = dict(
        coupon=0.045,
        coupon_frequency=1,
        issue_date="2024-01-24",
        maturity_date="2031-01-24",
        day_count="30/360",
        calendar="TARGET",
        settlement_days=0,
        mean_reversion=0.04,
        volatility=0.012,
        steps_per_year=12,
        curve="eur",
        exercise="european",
        expiry_date="2031-01-24",
    )
    return pd.DataFrame(
        [
            dict(row, id="call", instrument="callable_bond", strike=99.5),
            dict(row, id="put", instrument="puttable_bond", strike=101.0),
            dict(row, id="option", instrument="bond_option", option_type="put", strike=104.0),
        ]
    )


def test_a_tree_whose_only_exercise_is_its_top_step_rolls_back_through_its_root():
    portfolio = top_book()
    curves = load_curves(TOP_CURVES)
    batch = pack(prepare(portfolio, curves, as_of=int(np.datetime64(TOP_AS_OF).astype(np.int64))).instruments(), curves)
    assert (batch.geometry.phase == -8).all() and (cut_steps(batch) == 0).all()
    assert (batch.events.first_exercise_step() == batch.geometry.height).all()
    cpu = distprice.price(portfolio, TOP_CURVES, engine="cpu", as_of=TOP_AS_OF, measures="dv01,duration")
    ref = distprice.price(portfolio, TOP_CURVES, engine="reference", as_of=TOP_AS_OF, measures="dv01,duration")
    assert cpu["error"].isna().all() and (cpu["option_price"].abs() > 0.4).all()
    for column in ("price", "bond_price", "option_price", "dv01", "effective_duration"):
        np.testing.assert_allclose(cpu[column], ref[column], rtol=1e-12, atol=1e-13, err_msg=column)


@pytest.mark.gpu
@pytest.mark.parametrize("engine", GPU_ENGINES)
def test_the_gpu_engines_roll_back_through_the_root_as_the_cpu_engine(engine):
    if not gpu_available():
        pytest.skip("needs a CUDA GPU and CuPy")
    portfolio = top_book()
    cpu = distprice.price(portfolio, TOP_CURVES, engine="cpu", as_of=TOP_AS_OF, measures="dv01")
    gpu = distprice.price(portfolio, TOP_CURVES, engine=engine, as_of=TOP_AS_OF, measures="dv01")
    assert gpu["error"].isna().all()
    for column in ("price", "bond_price", "option_price", "dv01"):
        np.testing.assert_allclose(gpu[column], cpu[column], rtol=1e-12, atol=1e-13, err_msg=column)

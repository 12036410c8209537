"""Risk measures from the trees: closed forms where the tree reprices exactly, the key rates summing to the
duration, vega against re-priced trees, the CPU engine against the reference engine (which prices every bump
anew, literally), the OAS's failures and the options' and market prices' rules."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from distprice import price
from distprice.cuda import gpu_available
from distprice.curves import ZeroCurve, builtin_curves
from distprice.errors import OptionError
from distprice.lattice.batch import pack
from distprice.lattice.cpu import price_cpu
from distprice.lattice.geometry import tree_geometry
from distprice.lattice.measures import (
    DEFAULT_KEY_RATES,
    MEASURES,
    krd_column,
    measure_columns,
    parse_key_rates,
    parse_measures,
)
from distprice.lattice.oas import find_roots
from distprice.lattice.quotes import Quotes, read_market_prices
from distprice.lattice.risk import price_measures
from distprice.lattice.sweeps import key_rate_bumps, start_steps

from utils import HULL_PUT, instruments_of, random_portfolio

KRD = [krd_column(k) for k in DEFAULT_KEY_RATES]


@pytest.fixture(scope="module")
def book():
    """24 random rows of every kind with small trees, and the hull curve."""
    return instruments_of(random_portfolio(np.random.default_rng(20261124), 24, max_steps_per_year=12))


@pytest.fixture(scope="module")
def cpu_measures(book):
    return price_measures(book, builtin_curves(), engine="cpu")


def test_a_zero_coupon_bond_has_its_closed_form_measures():
    """P(h) = P exp(-h T) on every tree (the tree reprices a discount bond): duration sinh(hT)/h, convexity
    2 (cosh(hT) - 1) / h^2, dv01 P sinh(hT) 1bp/h; at T = 4 the key rates 3 and 5 take half each."""
    row = dict(
        id="z", instrument="bond", maturity=4.0, mean_reversion=0.1, volatility=0.01, steps_per_year=12, curve="hull"
    )
    out = price_measures(instruments_of(pd.DataFrame([row])), builtin_curves(), engine="cpu")
    h, T = 1e-3, 4.0
    P = float(builtin_curves()["hull"].discount(T)) * 100
    assert out["effective_duration"][0] == pytest.approx(math.sinh(h * T) / h, rel=1e-11)
    assert out["effective_convexity"][0] == pytest.approx(2 * (math.cosh(h * T) - 1) / h**2, rel=1e-7)
    assert out["dv01"][0] == pytest.approx(P * math.sinh(h * T) * 0.1, rel=1e-11)
    assert out["krd_3y"][0] == pytest.approx(math.sinh(h * T / 2) / h, rel=1e-11)
    assert out["krd_5y"][0] == pytest.approx(math.sinh(h * T / 2) / h, rel=1e-11)
    assert all(abs(out[c][0]) < 1e-10 for c in KRD if c not in ("krd_3y", "krd_5y"))
    assert out["vega"][0] == 0.0 and out["error"][0] is None


def test_key_rate_durations_sum_to_the_effective_duration(book, cpu_measures):
    total = sum(cpu_measures[c] for c in KRD)
    duration = cpu_measures["effective_duration"]
    priced = np.isfinite(duration) & (np.abs(duration) < 1e3)  # an option worth almost nothing has no duration
    assert priced.sum() >= 18
    np.testing.assert_allclose(total[priced], duration[priced], rtol=3e-3, atol=1e-6)


def test_a_plain_bonds_key_rate_durations_sum_to_its_duration_to_second_order():
    # the triangles add up to the parallel bump: for a price smooth in the curve, the central differences agree
    # to O(h^2) (h^2 t^2 / 6 for a cash flow at t); the guide's bound is 2e-4 at 10 bp
    import distprice
    from distprice.lattice import datasets

    book = datasets.generate("R1", 200, seed=3).assign(instrument="bond")
    for column in ("option_type", "exercise", "strike", "expiry", "first_exercise", "exercise_frequency"):
        book[column] = None
    priced = distprice.price(book, measures="duration,krd")
    total = priced[KRD].sum(axis=1)
    np.testing.assert_allclose(total, priced["effective_duration"], rtol=2e-4)
    assert (np.abs(total / priced["effective_duration"] - 1) > 1e-6).any()  # second order, not exact


def test_cpu_and_reference_engines_agree(book, cpu_measures):
    """The reference engine re-prices every bump on a bumped curve, refitting the tree; the CPU engine scales
    the fitted tree's discounts: the same numbers to rounding."""
    rows = book.take(np.arange(0, len(book), 3))
    cpu = {k: v[::3] for k, v in cpu_measures.items()}
    ref = price_measures(rows, builtin_curves(), engine="reference")
    scale = np.abs(price_cpu(pack(rows, builtin_curves()))[0])[:, None].ravel()  # bond prices, face units
    for column in ("dv01", "vega"):
        np.testing.assert_allclose(cpu[column], ref[column], rtol=0, atol=1e-12 * scale.max(), err_msg=column)
    for column in ("effective_duration", *KRD):
        np.testing.assert_allclose(cpu[column], ref[column], rtol=1e-10, atol=1e-10, err_msg=column)
    np.testing.assert_allclose(cpu["effective_convexity"], ref["effective_convexity"], rtol=1e-8, atol=1e-6)


def test_vega_is_half_the_difference_of_trees_one_bp_of_sigma_apart():
    """Priced again by the pricing engine on rows whose volatility moved: callable bonds lose, puttable bonds
    and options gain."""
    bond = dict(
        coupon=0.07,
        coupon_frequency=2,
        maturity=10.0,
        mean_reversion=0.1,
        volatility=0.012,
        curve="hull",
        steps_per_year=12,
        exercise="bermudan",
        first_exercise=2.0,
        expiry=9.0,
        exercise_frequency=2,
    )
    rows = [dict(bond, id=f"c{k}", instrument="callable_bond", strike=k) for k in (98.0, 100.0, 102.0)]
    rows += [dict(bond, id=f"p{k}", instrument="puttable_bond", strike=k) for k in (96.0, 99.0)]
    rows += [
        dict(bond, id=f"o{t}", instrument="bond_option", option_type=t, strike=98.0, exercise="european", expiry=3.0)
        for t in ("call", "put")
    ]
    book = instruments_of(pd.DataFrame(rows))
    vega = price_measures(book, builtin_curves(), measures=["vega"])["vega"]
    prices = {}
    for name, move in (("up", 1e-4), ("down", -1e-4)):
        table = book.table.assign(volatility=book.table["volatility"] + move)
        g = tree_geometry(table["mean_reversion"], table["volatility"], table["maturity"], table["steps_per_year"])
        bond_price, option = price_cpu(pack(dataclasses.replace(book, table=table, geometry=g), builtin_curves()))
        kind = table["instrument"].to_numpy()
        prices[name] = np.where(
            kind == "bond_option", option, bond_price + np.where(kind == "callable_bond", -option, option)
        )
    np.testing.assert_allclose(vega, (prices["up"] - prices["down"]) / 2, rtol=1e-12, atol=1e-14)
    assert np.all(vega[:3] < -1e-3) and np.all(vega[3:] > 1e-3)


def test_hull_put_measures_at_its_oas_and_a_price_no_spread_reaches():
    """Hull's put (1.8185 at 10 steps a year): quoted at 1.6 it has a spread; at 50 (above the strike's
    present value) none in [-20%, +20%] reaches it: that row alone gets an error."""
    row = dict(id="put", steps_per_year=10, **HULL_PUT)
    book = instruments_of(pd.DataFrame([row, {**row, "id": "high"}, {**row, "id": "none"}]))
    quotes = Quotes(np.array([1.6, 50.0, np.nan]), np.zeros(3, dtype=bool))
    out = price_measures(book, builtin_curves(), engine="cpu", quotes=quotes)
    assert out["error"][0] is None and out["error"][2] is None
    assert "oas: no spread in [-20%, +20%] matches the market price 50 (clean)" in out["error"][1]
    assert np.isnan(out["oas"][1]) and np.isnan(out["dv01"][1]) and np.isnan(out["oas"][2])
    assert -0.05 < out["oas"][0] < 0 and out["effective_duration"][0] < 0  # a put on a bond gains as rates rise
    again = price_measures(
        book.take([0]), builtin_curves(), engine="reference", measures=["oas"], quotes=quotes.take([0])
    )
    assert again["oas"][0] == pytest.approx(out["oas"][0], abs=1e-12)


def test_start_steps_skip_what_a_bump_cannot_change():
    grid = np.array([1.0, 2.0, 3.0, 5.0])
    h = 1e-3
    dz = np.concatenate([np.zeros((1, 4)), h * key_rate_bumps(4), np.full((1, 4), h), np.zeros((1, 4))])[None]
    dt, height = np.array([1 / 12]), np.array([36])  # three years, monthly
    start = start_steps(grid, np.repeat(dz, 1, axis=0), dt, height, [0])[0]
    # bump 0 from the top; key 1 agrees beyond 2 y (step 25 on); key 2 beyond 3 y; keys 3, 4 and the parallel
    # shift run from the top; a bump equal to bump 0 copies it
    assert start.tolist() == [36, 25, 36, 36, 36, 36, 0]
    short = start_steps(grid, dz, dt, np.array([12]), [0])[0]  # one year: keys 3 and 4 are zero before 2 y: unseen
    assert short.tolist() == [12, 12, 12, 0, 0, 12, 0]


def test_oas_roots_of_many_rows_at_once():
    rng = np.random.default_rng(4)
    root = rng.uniform(-0.1, 0.1, 200)
    root[:3] = [0.25, -0.3, 0.0]
    slope = rng.uniform(0.5, 30, 200)
    calls = []

    def evaluate(rows, points):
        calls.append(len(rows))
        return 100 * np.expm1(-slope[rows, None] * (points - root[rows, None]))

    found, count = find_roots(evaluate, np.zeros(200), np.full(200, 1e-3), -0.2, 0.2, 1e-10)
    assert np.isnan(found[:2]).all() and found[2] == 0.0
    np.testing.assert_allclose(found[2:], root[2:], rtol=0, atol=1e-10)
    assert count.max() <= 14 and calls == sorted(calls, reverse=True)


def test_oas_roots_stop_once_the_steps_vouch_for_the_tolerance():
    """Roots near the start, as OAS are: after two secant steps, the second far shorter than the first, the next
    point is returned unevaluated when the steps' ratio extrapolates its error below xtol / 2, so many rows take
    four evaluations instead of five; every root is still well within xtol."""
    rng = np.random.default_rng(5)
    root = rng.uniform(-3e-3, 3e-3, 500)
    slope = rng.uniform(2, 30, 500)

    def evaluate(rows, points):
        x = points - root[rows, None]
        return 100 * np.expm1(-slope[rows, None] * x) + 40 * x**2

    found, count = find_roots(evaluate, np.zeros(500), np.full(500, 1e-3), -0.2, 0.2, 1e-10)
    assert np.abs(found - root).max() < 1e-11
    assert (count == 4).sum() >= 100 and count.max() <= 6


def test_oas_roots_from_values_known_at_the_first_point():
    """Given each row's value at the first point (a pricing's, at spread 0), the search evaluates only the second
    one first and then steps exactly as it would have: the same roots to the bit, one evaluation fewer a row
    (a failed row too: its infinite value is taken as given)."""
    rng = np.random.default_rng(6)
    root = rng.uniform(-3e-3, 3e-3, 300)
    slope = rng.uniform(2, 30, 300)
    seen = []

    def evaluate(rows, points):
        seen.append(points.shape)
        x = points - root[rows, None]
        value = 100 * np.expm1(-slope[rows, None] * x) + 40 * x**2
        value[rows == 7] = np.inf
        return value

    found, count = find_roots(evaluate, np.zeros(300), np.full(300, 1e-3), -0.2, 0.2, 1e-10)
    at_zero = evaluate(np.arange(300), np.zeros((300, 1)))[:, 0]
    seen.clear()
    again, fewer = find_roots(evaluate, np.zeros(300), np.full(300, 1e-3), -0.2, 0.2, 1e-10, at_zero)
    np.testing.assert_array_equal(again, found)
    np.testing.assert_array_equal(fewer, count - 1)
    assert seen[0] == (300, 1) and np.isnan(again[7]) and np.isfinite(np.delete(again, 7)).all()


def test_measure_options_are_checked():
    assert parse_measures("krd, dv01") == ("dv01", "krd")
    assert measure_columns(MEASURES, (0.5, 2)) == (
        "dv01",
        "effective_duration",
        "effective_convexity",
        "krd_0.5y",
        "krd_2y",
        "vega",
        "oas",
    )
    assert parse_key_rates("1, 2.5,10") == (1.0, 2.5, 10.0)
    for bad, message in (("dv01,gamma", "unknown measure 'gamma'"), ("", "at least one"), ("oas,oas", "once")):
        with pytest.raises(OptionError, match=message):
            parse_measures(bad)
    for bad, message in (("2,1", "strictly increasing"), ("0,1", "> 0"), ("1,x", "numbers of years")):
        with pytest.raises(OptionError, match=message):
            parse_key_rates(bad)
    book = instruments_of(pd.DataFrame([dict(id="p", **HULL_PUT)]))
    with pytest.raises(OptionError, match="fp64"):
        price_measures(book, builtin_curves(), real=np.float32)
    with pytest.raises(OptionError, match="bump"):
        price_measures(book, builtin_curves(), bump_bp=0)


def test_market_prices_are_read_and_checked():
    table = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d", 7],
            "market_price": [101.5, None, "x", -1.0, 99.0],
            "market_price_type": ["clean", None, "dirty", "mid", "DIRTY"],
        }
    )
    quotes, problems = read_market_prices(table)
    np.testing.assert_array_equal(quotes.price, [101.5, np.nan, np.nan, np.nan, 99.0])
    assert quotes.dirty.tolist() == [False, False, True, False, True]
    assert [str(p) for p in problems] == [
        "row 3 (id 'c'), column 'market_price': must be a number",
        "row 4 (id 'd'), column 'market_price': must be finite and > 0 (units of face)",
        "row 4 (id 'd'), column 'market_price_type': must be one of clean, dirty",
    ]


def test_a_volatility_of_one_bp_has_no_vega():
    row = dict(HULL_PUT, id="flat", volatility=5e-5, steps_per_year=4)
    out = price_measures(instruments_of(pd.DataFrame([row])), builtin_curves(), measures=["vega", "duration"])
    assert np.isnan(out["vega"][0]) and "volatility must be > 1 bp" in out["error"][0]
    assert np.isfinite(out["effective_duration"][0])


def test_no_rows_give_empty_columns():
    empty = instruments_of(pd.DataFrame([dict(id="p", **HULL_PUT)])).take([])
    out = price_measures(empty, {"hull": ZeroCurve(np.array([1.0]), np.array([0.05]))}, measures="oas,krd")
    assert set(out) == {"oas", *KRD, "error"} and all(len(v) == 0 for v in out.values())


def test_plain_bonds_off_the_tree_equal_their_trees():
    """A plain bond's measures come from its discounted cash flows: its tree gives the same values under
    every bump (coupons off the tree's grid too: 5 steps a year, quarterly coupons, and a dated bond)."""
    from distprice.curves import load_curves
    from distprice.lattice.cpu_risk import CpuRisk
    from distprice.lattice.instruments import prepare
    from distprice.lattice.straight import Straight

    curves = load_curves(
        pd.DataFrame(
            {
                "curve": "usd",
                "date": ["2026-06-15", "2028-12-15", "2036-01-15"],
                "zero_rate": [0.03, 0.036, 0.042],
                "day_count": "ACT/365F",
            }
        )
    )
    rows = pd.DataFrame(
        [
            dict(
                id="t",
                instrument="bond",
                maturity=7.3,
                coupon=0.05,
                coupon_frequency=4,
                mean_reversion=0.1,
                volatility=0.01,
                steps_per_year=5,
                curve="hull",
            ),
            dict(
                id="d",
                instrument="bond",
                maturity_date="2034-03-01",
                issue_date="2024-03-01",
                coupon=0.045,
                coupon_frequency=2,
                day_count="30/360",
                mean_reversion=0.05,
                volatility=0.01,
                steps_per_year=12,
                curve="usd",
                settlement_days=2,
            ),
        ]
    )
    prepared = prepare(rows, {**builtin_curves(), **curves}, as_of=int(np.datetime64("2025-12-15", "D").astype(int)))
    assert not prepared.problems
    bonds = prepared.instruments()
    curves = {**builtin_curves(), **curves}
    grid = np.array(DEFAULT_KEY_RATES)
    dz = 0.004 + np.concatenate([np.zeros((1, 8)), np.full((1, 8), 1e-3), 1e-3 * key_rate_bumps(8)])
    dz = np.broadcast_to(dz, (2, *dz.shape))
    engine = CpuRisk(pack(bonds, curves))
    trees = engine.trees(np.arange(2), bonds.table["volatility"], bonds.geometry.dr)
    on_trees = engine.roll(trees, np.arange(2), grid, dz)[0]
    np.testing.assert_allclose(Straight(bonds, curves).price(np.arange(2), grid, dz), on_trees, rtol=1e-12)


def test_cpu_risk_shares_trees_and_stops_at_the_first_exercise():
    """Rows on three models share their forward passes (a volatility bump's trees too), each pass stops at the
    row's first exercise, the option valued there on the state prices, and a callable or puttable bond rolls its
    holder's value back alone: the reference engine's values (every bump priced anew), bumps that start above,
    at and below that step alike."""
    from distprice.lattice.cpu_risk import CpuRisk
    from distprice.lattice.reference import ReferenceRisk

    table = random_portfolio(np.random.default_rng(7), 30, max_steps_per_year=12)
    models = table.iloc[:3][["mean_reversion", "volatility", "steps_per_year"]].to_numpy()
    table[["mean_reversion", "volatility", "steps_per_year"]] = models[np.arange(len(table)) % 3]
    table["steps_per_year"] = table["steps_per_year"].astype(int)
    table.loc[:2, ["exercise", "first_exercise"]] = ["american", 0.0]  # exercisable from the first step
    rows = instruments_of(table)
    curves = builtin_curves()
    embedded = (rows.table["instrument"] != "bond_option").to_numpy()
    assert 8 <= embedded.sum() <= 22
    engine = CpuRisk(pack(rows, curves), embedded)
    cut = engine.cut
    assert (cut > 1).sum() >= 15 and (cut == 1).sum() >= 3
    n = len(rows)
    sigma = np.r_[rows.table["volatility"], rows.table["volatility"] + 1e-4]
    dr = np.r_[rows.geometry.dr, rows.geometry.dr * sigma[n:] / sigma[:n]]
    trees = engine.trees(np.r_[np.arange(n), np.arange(n)], sigma, dr)
    alpha_at = trees.state[0]
    assert len(np.unique(alpha_at)) == 6  # one forward pass per model and volatility
    grid = np.array(DEFAULT_KEY_RATES)
    dz = 0.002 + np.concatenate([np.zeros((1, 8)), np.full((1, 8), 1e-3), 1e-3 * key_rate_bumps(8)])
    dz = np.broadcast_to(dz, (n, *dz.shape))
    start = start_steps(grid, dz, rows.geometry.dt, rows.geometry.height, rows.geometry.phase)
    assert ((start[:, 2:] <= cut[:, None]) & (start[:, 2:] > 0)).any() and (start[:, 2:] > cut[:, None]).any()
    reference = ReferenceRisk(rows, curves)
    ref_trees = reference.trees(trees.rows, sigma, dr)
    for tasks, bumps in ((np.arange(n), dz), (np.arange(n, 2 * n), dz[:, :2])):
        got = engine.roll(trees, tasks, grid, bumps)
        expected = reference.roll(ref_trees, tasks, grid, bumps)
        for a, b in zip(got, expected):
            np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12 * rows.table["face"].max())


def test_cpu_risk_rolls_two_bumps_from_one_step_in_one_sweep():
    """Bumps that start at the same step (a parallel or key-rate +h and -h) roll back together, two rows of
    values per sweep of the node weights: each gets what it gets rolled alone with bump 0, bond options (bond
    and option rows) and callable or puttable bonds (one row) alike, from the top and from bump 0's kept
    rows."""
    from distprice.lattice.cpu_risk import CpuRisk

    rows = instruments_of(random_portfolio(np.random.default_rng(11), 30, max_steps_per_year=12))
    curves = builtin_curves()
    embedded = (rows.table["instrument"] != "bond_option").to_numpy()
    assert 8 <= embedded.sum() <= 22
    engine = CpuRisk(pack(rows, curves), embedded)
    n = len(rows)
    trees = engine.trees(np.arange(n), rows.table["volatility"].to_numpy(), rows.geometry.dr)
    grid = np.array(DEFAULT_KEY_RATES)
    h = 1e-3
    keys = key_rate_bumps(len(grid))
    dz = 0.001 + np.concatenate([np.zeros((1, 8)), np.full((1, 8), h), np.full((1, 8), -h), h * keys, -h * keys])
    dz = np.broadcast_to(dz, (n, *dz.shape))
    start = start_steps(grid, dz, rows.geometry.dt, rows.geometry.height, rows.geometry.phase)
    rolled = start[:, 1:] > engine.cut[:, None]
    assert rolled.sum() >= 100 and (rolled & (start[:, 1:] < rows.geometry.height[:, None])).sum() >= 30
    together = engine.roll(trees, np.arange(n), grid, dz)
    for b in range(1, dz.shape[1]):
        alone = engine.roll(trees, np.arange(n), grid, np.ascontiguousarray(dz[:, [0, b]]))
        for got, expected in zip(together, alone):
            np.testing.assert_allclose(got[:, b], expected[:, 1], rtol=1e-14, atol=0)


def test_cpu_risk_starts_bumps_at_the_last_exercise_from_a_discount_bond():
    """Where a row's cash flows above its last exercise all fall at one step (zero-coupon bonds here), its tree
    rolls the discount bond of that step back to the last exercise once, and every bump that starts at or above
    it starts there from that row: the reference engine's values and the engine's own without that row, bumps
    from the bond, from bump 0's kept rows below it and from the cut alike."""
    from distprice.lattice.cpu_risk import CpuRisk
    from distprice.lattice.reference import ReferenceRisk

    table = random_portfolio(np.random.default_rng(5), 30, max_steps_per_year=12)
    table.loc[::2, ["coupon", "coupon_frequency"]] = [0.0, 0]
    rows = instruments_of(table)
    curves = builtin_curves()
    embedded = (rows.table["instrument"] != "bond_option").to_numpy()
    engine, plain = CpuRisk(pack(rows, curves), embedded), CpuRisk(pack(rows, curves), embedded)
    plain.bonded[:] = False
    last = engine.batch.option_from
    assert engine.bonded.sum() >= 15 and (engine.flow[engine.bonded] > last[engine.bonded]).all()
    n = len(rows)
    grid = np.array(DEFAULT_KEY_RATES)
    keys = key_rate_bumps(len(grid))
    dz = 0.001 + np.concatenate(
        [np.zeros((1, 8)), np.full((1, 8), 1e-3), np.full((1, 8), -1e-3), 1e-3 * keys, -1e-3 * keys]
    )
    dz = np.broadcast_to(dz, (n, *dz.shape))
    start = start_steps(grid, dz, rows.geometry.dt, rows.geometry.height, rows.geometry.phase)[engine.bonded, 1:]
    above, cut = last[engine.bonded, None], engine.cut[engine.bonded, None]
    assert (start >= above).sum() >= 50 and ((start > cut) & (start < above)).sum() >= 10
    assert (start <= cut).sum() >= 10
    volatility, dr = rows.table["volatility"].to_numpy(), rows.geometry.dr
    got = engine.roll(engine.trees(np.arange(n), volatility, dr), np.arange(n), grid, dz)
    alone = plain.roll(plain.trees(np.arange(n), volatility, dr), np.arange(n), grid, dz)
    reference = ReferenceRisk(rows, curves)
    expected = reference.roll(reference.trees(np.arange(n), volatility, dr), np.arange(n), grid, dz)
    for a, b, c in zip(got, alone, expected):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13 * rows.table["face"].max())
        np.testing.assert_allclose(a, c, rtol=1e-11, atol=1e-12 * rows.table["face"].max())


def test_oas_search_survives_flat_functions():
    """A row whose function is flat between its first two points (an option worth nothing) has no root."""
    found, _ = find_roots(
        lambda rows, points: np.full(points.shape, 2.0), np.zeros(3), np.full(3, 1e-3), -0.2, 0.2, 1e-10
    )
    assert np.isnan(found).all()


@pytest.mark.parametrize(
    "engine",
    [
        "cpu",
        pytest.param(
            "gpu-flat",
            marks=[pytest.mark.gpu, pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU and CuPy")],
        ),
    ],
)
def test_key_rate_durations_of_trees_whose_steps_lie_early_equal_the_references(engine):
    """Desk rows whose trees have a negative phase (their steps lie early) and a cash flow within half a step
    before a key rate's knot: a bump takes over bump 0's values only from steps whose events all lie beyond the
    knot, so each key rate duration equals the reference engine's, which prices every bumped curve anew (they
    were 4e-6 apart when the phase was left out)."""
    from distprice.lattice.desk import desk

    book = desk(400, seed=9)
    rows = book.portfolio.iloc[[46, 162, 386]]
    schedule = book.exercise_schedule[book.exercise_schedule["id"].isin(rows["id"])]
    got, expected = (
        price(rows, book.curves, exercise_schedule=schedule, engine=name, measures="krd")
        for name in (engine, "reference")
    )
    columns = [c for c in got.columns if c.startswith("krd_")]
    assert len(columns) == 8 and got[columns].notna().all().all()
    for column in columns:
        np.testing.assert_allclose(got[column], expected[column], rtol=1e-10, atol=1e-10, err_msg=column)

"""The fast CPU engine against the reference engine, on random portfolios and edge cases."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

import distprice
from distprice.curves import builtin_curves
from distprice.lattice.cpu import BLOCKS_PER_THREAD, balance

from utils import HULL_PUT, instruments_of, random_portfolio

RTOL = 1e-12


def assert_engines_agree(portfolio, curves=None, rtol=RTOL, precision="fp64"):
    ref = distprice.price(portfolio, curves, engine="reference")
    fast = distprice.price(portfolio, curves, engine="cpu", precision=precision)
    assert (fast["engine"] == "cpu").all() and (ref["engine"] == "reference").all()
    for column in ("bond_price", "option_price", "price"):
        scale = np.maximum(ref[column].abs(), ref["face"] if "face" in ref else 100.0)
        np.testing.assert_array_less(np.abs(fast[column] - ref[column]), rtol * scale, err_msg=column)
    return ref, fast


def test_cpu_matches_reference_on_mixed_portfolio(mixed_portfolio):
    ref, fast = assert_engines_agree(mixed_portfolio)
    # relative to each price itself, where the price is not vanishingly small
    big = ref["option_price"].abs() > 1e-6
    rel = (fast["option_price"] - ref["option_price"]).abs()[big] / ref["option_price"].abs()[big]
    assert rel.max() < 1e-11
    assert big.sum() > 50


def test_fp32_error_is_small_but_not_zero(mixed_portfolio):
    ref = distprice.price(mixed_portfolio, engine="reference")
    fp32 = distprice.price(mixed_portfolio, engine="cpu", precision="fp32")
    error = (fp32["bond_price"] - ref["bond_price"]).abs() / ref["bond_price"]
    assert 0 < error.max() < 1e-4


@pytest.mark.parametrize(
    "case",
    [
        dict(mean_reversion=5.0, steps_per_year=1, maturity=4.0, expiry=2.0),  # width 3
        dict(maturity=1 / 12, expiry=1 / 12),  # height 1
        dict(maturity=5.0, expiry=5.0, coupon=0.05, coupon_frequency=2),  # expiry at maturity
        dict(maturity=2.0, expiry=1.5, exercise="american", coupon=0.08, coupon_frequency=12, steps_per_year=4),
        dict(
            maturity=30.0,
            expiry=29.0,
            exercise="bermudan",
            exercise_frequency=4,
            first_exercise=1.0,
            mean_reversion=0.002,
            volatility=0.004,
        ),  # wide tree, never at edges
    ],
)
def test_edge_cases(case):
    row = {**HULL_PUT, "steps_per_year": 12, "id": 1, **case}
    ref, fast = assert_engines_agree(pd.DataFrame([row]))
    assert np.isfinite(ref["price"]).all()


def test_width_three_tree():
    priced = distprice.price(pd.DataFrame([dict(HULL_PUT, id=1, mean_reversion=5.0, steps_per_year=1)]))
    assert priced.loc[0, "width"] == 3


def test_multiple_curves_and_quantity():
    curves = pd.DataFrame(
        dict(
            curve=["flat"] * 2 + ["steep"] * 3, t=[0.0, 30.0, 0.5, 5.0, 30.0], zero_rate=[0.03, 0.03, 0.01, 0.04, 0.06]
        )
    )
    book = pd.DataFrame(
        [
            dict(HULL_PUT, id=i, curve=c, quantity=q)
            for i, (c, q) in enumerate([("flat", 2.0), ("steep", -1.0), ("hull", 3.0)])
        ]
    )
    ref, fast = assert_engines_agree(book, curves)
    np.testing.assert_allclose(fast["value"], fast["price"] * book["quantity"], rtol=1e-15)
    assert fast["price"].nunique() == 3


def test_empty_portfolio():
    """An empty portfolio is an error (a file emptied by mistake must not give an empty answer), unless asked for."""
    empty = pd.DataFrame([dict(HULL_PUT, id=1)]).iloc[:0]
    with pytest.raises(distprice.InvalidInputError, match="portfolio: has no rows"):
        distprice.price(empty)
    priced = distprice.price(empty, allow_empty=True)
    assert len(priced) == 0 and "price" in priced.columns


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 6))
def test_cpu_matches_reference_property(seed, size):
    assert_engines_agree(random_portfolio(np.random.default_rng(seed), size, max_steps_per_year=24))


@pytest.mark.parametrize("rows", [7, 200, 100_001])
def test_balance_spreads_cost_evenly(rows):
    cost = np.random.default_rng(3).uniform(1, 100, rows)
    order, offsets = balance(cost, 4)
    assert sorted(order.tolist()) == list(range(rows))
    loads = np.array([cost[order[offsets[t] : offsets[t + 1]]].sum() for t in range(4)])
    run = cost.max() if rows <= 4 * BLOCKS_PER_THREAD else cost.sum() / (4 * BLOCKS_PER_THREAD) + 2 * cost.max()
    assert loads.max() - loads.min() <= run
    for t in range(4):  # each thread reads its rows in increasing position
        assert (np.diff(order[offsets[t] : offsets[t + 1]]) > 0).all()


def test_fp32_overflow_is_a_clear_error_not_an_inf():
    # 97 years at a = 0.009: the tree's bottom edge sits at a rate near -230% a year, whose bond values pass
    # the float32 range on the way back to a one-year expiry (harmless in fp64, where those nodes carry no
    # weight). Expiring at 40 years the option never sees them: the CPU engine stops at the exercise.
    row = dict(
        HULL_PUT, id="long", maturity=97.0, expiry=1.0, mean_reversion=0.009, volatility=0.0194, steps_per_year=12
    )
    late = distprice.price(pd.DataFrame([dict(row, expiry=40.0)]), engine="cpu", precision="fp32")["price"][0]
    assert late == pytest.approx(
        distprice.price(pd.DataFrame([dict(row, expiry=40.0)]), engine="cpu")["price"][0], rel=1e-6
    )
    assert np.isfinite(distprice.price(pd.DataFrame([row]), engine="cpu")["price"]).all()
    with pytest.raises(distprice.InvalidInputError, match="row 1 .id 'long'.: could not be priced: .* fp32 range"):
        distprice.price(pd.DataFrame([row]), engine="cpu", precision="fp32")
    # in report mode it is that row's error, and the other rows are priced
    book = pd.DataFrame([row, dict(HULL_PUT, id="fine", steps_per_year=12)])
    reported = distprice.price(book, engine="cpu", precision="fp32", on_invalid="report")
    assert reported["error"].notna().tolist() == [True, False] and "price it in fp64" in reported.loc[0, "error"]
    assert np.isnan(reported.loc[0, "price"]) and np.isfinite(reported.loc[1, "price"])


def test_parts_laid_out_on_threads_equal_the_parts_laid_out_alone(mixed_portfolio):
    from distprice.curves import builtin_curves
    from distprice.lattice.batch import pack, pack_parts

    curves = builtin_curves()
    instruments = instruments_of(mixed_portfolio)
    parts = [np.arange(j, len(instruments), 3) for j in range(3)] + [np.arange(len(instruments))]
    batches = list(pack_parts(instruments, parts, curves, threads=3))
    assert len(batches) == 4
    for rows, batch in zip(parts, batches):
        alone = pack(instruments.take(rows), curves)
        np.testing.assert_array_equal(batch.is_call, alone.is_call)
        np.testing.assert_array_equal(batch.events.amount, alone.events.amount)
        np.testing.assert_array_equal(batch.events.step, alone.events.step)
        np.testing.assert_array_equal(batch.geometry.height, alone.geometry.height)


def test_layout_threads_run_numba_on_the_callers_thread_count(mixed_portfolio, monkeypatch):
    # numba's thread count is per thread: a Dask worker's layout threads must not start at every core
    import numba

    from distprice.curves import builtin_curves
    from distprice.lattice import batch

    seen = []
    monkeypatch.setattr(batch, "pack", lambda *args: seen.append(numba.get_num_threads()))
    instruments = instruments_of(mixed_portfolio)
    parts = [np.arange(j, len(instruments), 3) for j in range(3)]
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        list(batch.pack_parts(instruments, parts, builtin_curves(), threads=3))
    finally:
        numba.set_num_threads(before)
    assert seen == [1, 1, 1]


@pytest.mark.parametrize(
    "case",
    [
        dict(expiry=0.01, maturity=0.02, steps_per_year=12),  # both within half a step of today
        dict(expiry=0.03, maturity=2.04, coupon=0.06, coupon_frequency=4),  # off-grid expiry, maturity, coupons
        dict(
            expiry=1.5,
            maturity=3.0,
            coupon=0.05,
            coupon_frequency=2,
            exercise="bermudan",
            exercise_frequency=2,
            first_exercise=0.5,
            steps_per_year=3,
        ),  # coupon and exercise in one step
    ],
)
def test_events_off_the_grid_and_near_today(case):
    """Events within half a step of today are live (step 1), amounts off the grid are forward-adjusted:
    the CPU engine agrees with the reference, and the straight bond is repriced exactly by the tree."""
    row = {**HULL_PUT, "id": 1, "steps_per_year": 12, **case}
    ref, fast = assert_engines_agree(pd.DataFrame([row]))
    assert ref.loc[0, "height"] >= 1 and np.isfinite(fast["price"]).all()
    curve, face, f = builtin_curves()["hull"], row["face"], row.get("coupon_frequency", 1)
    coupons = (
        [row["maturity"] - k / f for k in range(100) if row["maturity"] - k / f > 1e-9] if row.get("coupon") else []
    )
    straight = face * curve.discount(row["maturity"]) + sum(
        face * row["coupon"] / f * curve.discount(t) for t in coupons
    )
    assert fast.loc[0, "bond_price"] == pytest.approx(straight, rel=1e-13)


def test_trees_shorter_than_their_jmax():
    # one year at 4 steps a year, mean reversions as small as R1's: jmax up to ~90 while no step reaches past
    # |j| = 4; rows of every jmax follow one another on each thread, so a row's coefficients and scratch rows
    # (over the nodes it reaches) sit where other rows' were
    from distprice.lattice import datasets

    book = datasets.generate("R1", 400, seed=5)
    rng = np.random.default_rng(5)
    book = book.assign(
        maturity=rng.integers(1, 5, len(book)) / 4.0,
        steps_per_year=4,
        first_exercise=0.0,
        expiry=lambda b: np.minimum(b["maturity"], rng.integers(1, 5, len(b)) / 4.0),
    )
    ref, fast = assert_engines_agree(book)
    assert (ref["height"] < (ref["width"] - 1) // 2).mean() > 0.9


def test_host_pieces_cover_the_rows_in_order_and_cap_their_size(monkeypatch):
    # a big table of small trees is one piece by its work; the cap cuts it so that each piece's arrays stay small
    from types import SimpleNamespace

    from distprice import execute
    from distprice.inspector import CostModel
    from distprice.lattice.datasets import generate
    from distprice.lattice.desk import desk
    from distprice.lattice.geometry import tree_geometry

    n, model = 10_000, CostModel("cpu")
    geometry = tree_geometry(np.full(n, 0.1), np.full(n, 0.01), np.full(n, 1.0), np.full(n, 4))
    table = SimpleNamespace(geometry=geometry)
    rows = np.arange(n)
    assert len(execute.host_pieces(table, rows, "cpu", model)) == 1
    monkeypatch.setattr(execute, "HOST_PIECE_MAX_ROWS", 1_000)
    pieces = execute.host_pieces(table, rows, "cpu", model)
    assert len(pieces) == 10 and max(map(len, pieces)) <= 1_001
    np.testing.assert_array_equal(np.concatenate(pieces), rows)
    # and a job priced in such pieces, or in pieces of any predicted time, is the job priced whole
    book, dated = generate("S1", 3_000, seed=4), desk(400, seed=3)
    whole = distprice.price(book, engine="cpu")
    dated_whole = distprice.price(
        dated.portfolio, dated.curves, engine="cpu", exercise_schedule=dated.exercise_schedule
    )
    for cap, seconds in ((150, execute.PIECE_SECONDS), (execute.HOST_PIECE_MAX_ROWS, 1e-6)):
        monkeypatch.setattr(execute, "HOST_PIECE_MAX_ROWS", cap)
        monkeypatch.setattr(execute, "PIECE_SECONDS", seconds)
        pd.testing.assert_frame_equal(distprice.price(book, engine="cpu"), whole)
        pd.testing.assert_frame_equal(
            distprice.price(dated.portfolio, dated.curves, engine="cpu", exercise_schedule=dated.exercise_schedule),
            dated_whole,
        )


def test_host_pieces_are_cut_by_predicted_time_and_long_rows_are_few_a_piece():
    """Pieces of about PIECE_SECONDS of predicted work each, so that a stop waits for one at most: rows of a
    thousandth of that many a piece, rows predicted longer than that as few a piece as the engine has
    threads (100-year trees at 365 steps a year)."""
    from types import SimpleNamespace

    import numba

    from distprice import execute
    from distprice.lattice.geometry import tree_geometry
    from distprice.tuning import shipped_default

    model, threads = shipped_default("cpu", "fp64"), numba.get_num_threads()  # a 2-core machine's figures
    short, long = 20_000, 50
    mean_reversion = np.r_[np.full(short, 0.1), np.full(long, 0.005)]
    maturity = np.r_[np.full(short, 10.0), np.full(long, 100.0)]
    steps = np.r_[np.full(short, 12), np.full(long, 365)]
    table = SimpleNamespace(geometry=tree_geometry(mean_reversion, np.full(short + long, 0.01), maturity, steps))
    rows = np.arange(short + long)
    seconds = execute.row_seconds(table.geometry, rows, "cpu", model)
    assert seconds[:short].max() < execute.PIECE_SECONDS / 1000 < execute.PIECE_SECONDS < seconds[short:].min()
    pieces = execute.host_pieces(table, rows, "cpu", model)
    np.testing.assert_array_equal(np.concatenate(pieces), rows)
    for piece in pieces:
        if piece[-1] < short:  # short rows only: about PIECE_SECONDS of them
            assert 0.5 * execute.PIECE_SECONDS < seconds[piece].sum() < 1.5 * execute.PIECE_SECONDS
        else:
            assert (piece >= short).sum() <= max(threads, 1) or len(piece) == 1
    assert sum(piece[0] >= short for piece in pieces) >= long // max(threads, 1)
    # the reference engine, which the cost model does not predict, by its own seconds per node-step
    reference = execute.host_pieces(table, rows[:short], "reference", model)
    per_piece = [execute.ENGINES["reference"].node_step_seconds * table.geometry.node_steps[p].sum() for p in reference]
    assert max(per_piece) < 1.5 * execute.PIECE_SECONDS


def test_measure_pieces_are_sized_for_the_engine_that_measures():
    """Risk measures come in pieces of about MEASURE_PIECE_SECONDS of the measuring engine's predicted work (times
    the passes): on a GPU by the GPU's prediction, not the CPU's (20 000 short rows under the full measure set are
    one piece on an H200, several on the CPU); past that, about that much a piece; the pieces cover the rows in
    order."""
    from types import SimpleNamespace

    from distprice import execute
    from distprice.lattice.geometry import tree_geometry
    from distprice.tuning import shipped_default

    class Book(SimpleNamespace):
        def __len__(self):
            return len(self.geometry.width)

    n, passes = 20_000, 17
    geometry = tree_geometry(np.full(n, 0.05), np.full(n, 0.01), np.linspace(1.0, 10.0, n), np.full(n, 26))
    table = Book(geometry=geometry)
    gpu, cpu = shipped_default("NVIDIA H200", "fp64"), shipped_default("cpu", "fp64")
    seconds = execute.named_seconds(table, "gpu-flat", gpu, True) * passes
    for more in (1, 200):
        pieces = execute.measure_pieces(table, "gpu-flat", gpu, passes * more)
        assert len(pieces) == math.ceil(more * seconds / execute.MEASURE_PIECE_SECONDS)
        np.testing.assert_array_equal(np.concatenate(pieces), np.arange(n))
    on_cpu = execute.measure_pieces(table, "cpu", cpu, passes)
    rows = np.arange(n)
    cpu_seconds = execute.row_seconds(geometry, rows, "cpu", cpu) * passes
    assert len(on_cpu) == math.ceil(cpu_seconds.sum() / execute.MEASURE_PIECE_SECONDS) > 1
    np.testing.assert_array_equal(np.concatenate(on_cpu), rows)

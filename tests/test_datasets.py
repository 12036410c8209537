"""The papers' synthetic portfolios and Hull's example: shapes, fractions, the portfolio rules, strikes."""

from functools import cache

import numpy as np
import pandas as pd
import pytest

from distprice.curves import HULL_CURVE
from distprice.lattice.datasets import (
    DATASETS,
    DEFAULT_SIZES,
    MIXTURES,
    _clean_forward_hull,
    generate,
    mean_reversion_for_width,
)

TIME_FORM = [name for name in DATASETS if name != "desk"]
"""The datasets in the papers' time form (``desk`` is dated: see test_desk.py)."""
PORTFOLIO_COLUMNS = [
    "id",
    "instrument",
    "option_type",
    "exercise",
    "strike",
    "expiry",
    "first_exercise",
    "exercise_frequency",
    "maturity",
    "coupon",
    "coupon_frequency",
    "face",
    "mean_reversion",
    "volatility",
    "steps_per_year",
    "curve",
    "quantity",
]
PAPERS = ["U1", "U2", "R1", "R2", "R3", "S1", "S2"]
OURS = ["B1", *MIXTURES]
SKEWED_SIZE = 20_000  # 1% = 200 rows
SMALL_SIZE = 2_000


def size_for(name):
    return SKEWED_SIZE if name in ("S1", "S2") else SMALL_SIZE


@cache
def portfolio(name, size, seed=0):
    return generate(name, size, seed)


def tree_shape(frame):
    """Width and height of each row's tree, by the tree's shape in docs/model/tree.rst (computed here,
    independently of the package)."""
    dt = 1.0 / frame["steps_per_year"].to_numpy()
    m = np.exp(-frame["mean_reversion"].to_numpy() * dt) - 1.0
    jmax = np.ceil(-0.184 / m).astype(np.int64)
    height = np.rint(frame["maturity"].to_numpy() * frame["steps_per_year"].to_numpy()).astype(np.int64)
    return 2 * jmax + 1, height


def discount_hull(t):
    t = np.asarray(t, dtype=float)
    return np.exp(-np.interp(t, *HULL_CURVE) * t)


def clean_forward_by_loop(maturity, expiry, coupon, coupon_frequency, face=100.0):
    """Clean forward price at expiry (years), cash flows listed one by one (docs/model/events.rst)."""
    if coupon == 0:
        return face * discount_hull(maturity) / discount_hull(expiry)
    times = maturity - np.arange(0, int(maturity * coupon_frequency) + 2) / coupon_frequency
    after = times[times > expiry + 1e-9]
    previous = times[times <= expiry + 1e-9].max()
    dirty = (
        face * coupon / coupon_frequency * discount_hull(after).sum() + face * discount_hull(maturity)
    ) / discount_hull(expiry)
    return dirty - face * coupon * (expiry - previous)


def test_unknown_name_lists_the_names():
    with pytest.raises(ValueError) as info:
        generate("R4")
    for name in DATASETS:
        assert name in str(info.value)


def test_negative_size_is_refused():
    with pytest.raises(ValueError, match="size"):
        generate("R1", -1)


def test_default_sizes():
    assert DEFAULT_SIZES == {
        "U1": 3000,
        "U2": 100_000,
        "R1": 100_000,
        "R2": 100_000,
        "R3": 100_000,
        "S1": 100_000,
        "S2": 100_000,
        "book": 6,
        "desk": 100_000,
        "B1": 100_000,
        "U1+S1": 103_000,
        "R1+S2": 200_000,
    }
    assert len(generate("U1")) == 3000
    assert len(generate("book")) == 6


@pytest.mark.parametrize("name", TIME_FORM)
def test_columns_size_ids_and_dtypes(name):
    frame = portfolio(name, 37)
    assert list(frame.columns) == PORTFOLIO_COLUMNS
    assert len(frame) == 37
    assert frame["id"].dtype == np.int64
    np.testing.assert_array_equal(frame["id"].to_numpy(), np.arange(37))
    for column in ("instrument", "option_type", "exercise", "curve"):
        assert pd.api.types.is_string_dtype(frame[column])
    for column in ("exercise_frequency", "coupon_frequency", "steps_per_year"):
        assert frame[column].dtype == np.int64
    for column in (
        "strike",
        "expiry",
        "first_exercise",
        "maturity",
        "coupon",
        "face",
        "mean_reversion",
        "volatility",
        "quantity",
    ):
        assert frame[column].dtype == np.float64


@pytest.mark.parametrize("name", PAPERS)
def test_deterministic_per_seed_and_different_across_seeds(name):
    size = size_for(name)
    pd.testing.assert_frame_equal(generate(name, size, seed=3), generate(name, size, seed=3))
    first, second = generate(name, size, seed=3), generate(name, size, seed=4)
    assert (first["strike"] != second["strike"]).mean() > 0.9
    assert (first["expiry"] != second["expiry"]).mean() > 0.5


def test_datasets_differ_from_each_other_at_the_same_seed():
    r1, r3 = portfolio("R1", SMALL_SIZE), portfolio("R3", SMALL_SIZE)
    assert (r1["maturity"] != r3["maturity"]).mean() > 0.9


@pytest.mark.parametrize("name", ["book", "S2"])
def test_empty_portfolio(name):
    frame = generate(name, 0)
    assert list(frame.columns) == PORTFOLIO_COLUMNS
    assert len(frame) == 0


def test_mean_reversion_gives_back_every_odd_width():
    widths = np.arange(3, 32770, 2)
    a = mean_reversion_for_width(widths)
    assert (a > 0).all()
    m = np.exp(-a * (1.0 / 12)) - 1.0
    np.testing.assert_array_equal(2 * np.ceil(-0.184 / m).astype(np.int64) + 1, widths)
    # -0.184 / M sits half a step below jmax: far from the edge where ceil could flip.
    np.testing.assert_allclose(-0.184 / m, (widths - 1) / 2 - 0.5, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(2 * np.ceil(-0.184 / np.expm1(-a / 12)).astype(np.int64) + 1, widths)


@pytest.mark.parametrize("name", PAPERS)
def test_widths_odd_and_heights_in_spec_ranges(name):
    frame = portfolio(name, size_for(name))
    width, height = tree_shape(frame)
    assert (width % 2 == 1).all()
    assert (frame["steps_per_year"] == 12).all()
    np.testing.assert_allclose(frame["maturity"].to_numpy() * 12, height, rtol=0, atol=1e-9)
    assert width.min() >= 7 and width.max() <= 511
    assert height.min() >= (12 if name.startswith("S") else 13) and height.max() <= 1200


@pytest.mark.parametrize("name", ["U1", "U2"])
def test_uniform_datasets_are_constant(name):
    width, height = tree_shape(portfolio(name, SMALL_SIZE))
    assert (width == 259).all() and (height == 606).all()


def test_r1_uniform_widths_and_heights():
    width, height = tree_shape(portfolio("R1", SMALL_SIZE))
    assert abs(width.mean() - 259) < 12 and abs(width.std() - 146) < 8  # uniform odd 7..511
    assert abs(height.mean() - 606.5) < 25 and abs(height.std() - 343) < 15  # uniform 13..1200
    assert width.min() <= 11 and width.max() >= 507
    assert height.min() <= 20 and height.max() >= 1190


def test_r2_normal_heights():
    width, height = tree_shape(portfolio("R2", SMALL_SIZE))
    assert abs(width.mean() - 259) < 12 and abs(width.std() - 146) < 8
    assert abs(height.mean() - 606.5) < 15 and abs(height.std() - 197.8) < 10
    assert 0.64 < (abs(height - 606.5) < 197.8).mean() < 0.72  # one sd holds ~68%


def test_r3_normal_widths():
    width, height = tree_shape(portfolio("R3", SMALL_SIZE))
    assert abs(width.mean() - 259) < 6 and abs(width.std() - 84) < 5
    assert 0.64 < (abs(width - 259) < 84).mean() < 0.72
    assert abs(height.mean() - 606.5) < 25 and abs(height.std() - 343) < 15


def test_s1_one_percent_wide_and_tall_in_the_same_rows():
    width, height = tree_shape(portfolio("S1", SKEWED_SIZE))
    wide, tall = width >= 461, height >= 1082
    assert wide.sum() == SKEWED_SIZE // 100
    np.testing.assert_array_equal(wide, tall)
    assert height[wide].max() <= 1200 and width[wide].max() <= 511
    assert width[~wide].max() <= 57 and width[~wide].min() >= 7
    assert height[~wide].max() <= 131 and height[~wide].min() >= 12
    assert np.flatnonzero(wide).max() - np.flatnonzero(wide).min() > SKEWED_SIZE // 2  # not sorted


def test_s2_wide_rows_and_tall_rows_are_disjoint():
    width, height = tree_shape(portfolio("S2", SKEWED_SIZE))
    wide, tall = width >= 461, height >= 1082
    assert wide.sum() == SKEWED_SIZE // 100 and tall.sum() == SKEWED_SIZE // 100
    assert not (wide & tall).any()
    assert height[wide].min() >= 12 and height[wide].max() <= 131
    assert width[tall].min() >= 7 and width[tall].max() <= 57
    rest = ~(wide | tall)
    assert width[rest].max() <= 57 and height[rest].max() <= 131


@pytest.mark.parametrize("name", TIME_FORM)
def test_rows_obey_spec_rules(name):
    frame = portfolio(name, size_for(name))
    spy = frame["steps_per_year"].to_numpy()
    assert frame["id"].is_unique
    assert set(frame["instrument"]) <= {"bond_option", "callable_bond", "puttable_bond"}
    assert set(frame["option_type"]) <= {"call", "put"}
    assert set(frame["exercise"]) <= {"european", "bermudan", "american"}
    assert ((frame["instrument"] != "callable_bond") | (frame["option_type"] == "call")).all()
    assert ((frame["instrument"] != "puttable_bond") | (frame["option_type"] == "put")).all()
    assert (frame["strike"] >= 0).all()
    assert (frame["expiry"] > 0).all() and (frame["expiry"] <= frame["maturity"]).all()
    assert (np.rint(frame["expiry"].to_numpy() * spy) >= 1).all()
    assert (frame["first_exercise"] >= 0).all() and (frame["first_exercise"] <= frame["expiry"]).all()
    assert (frame["exercise_frequency"] >= 1).all()
    assert (frame["coupon"] >= 0).all() and (frame["coupon_frequency"] >= 0).all()
    assert (frame["coupon_frequency"][frame["coupon"] > 0] >= 1).all()
    assert (frame["face"] > 0).all() and (frame["mean_reversion"] > 0).all()
    assert (frame["volatility"] > 0).all() and (frame["steps_per_year"] >= 1).all()
    assert np.isfinite(frame.select_dtypes("number").to_numpy()).all()


@pytest.mark.parametrize("name", PAPERS)
def test_papers_mix_of_instruments(name):
    frame = portfolio(name, SMALL_SIZE)
    shares = frame["instrument"].value_counts(normalize=True)
    assert abs(shares["bond_option"] - 0.8) < 0.03
    assert abs(shares["callable_bond"] - 0.1) < 0.02 and abs(shares["puttable_bond"] - 0.1) < 0.02
    options = frame[frame["instrument"] == "bond_option"]
    assert abs((options["option_type"] == "call").mean() - 0.5) < 0.04
    assert (frame["exercise"] == "bermudan").all()
    assert set(frame["exercise_frequency"]) == {1, 2, 4, 12}
    coupon = frame["coupon"].to_numpy()
    pays = coupon > 0
    assert abs(pays.mean() - 0.5) < 0.04
    assert coupon[pays].min() >= 0.02 and coupon[pays].max() <= 0.08
    np.testing.assert_allclose(coupon / 0.0025, np.rint(coupon / 0.0025), atol=1e-9)
    assert set(frame["coupon_frequency"][pays]) == {1, 2, 4}
    assert (frame["coupon_frequency"][~pays] == 0).all()
    for column in ("expiry", "first_exercise", "maturity"):  # whole months
        months = frame[column].to_numpy() * 12
        np.testing.assert_allclose(months, np.rint(months), rtol=0, atol=1e-9)
    assert (frame["face"] == 100).all() and (frame["curve"] == "hull").all()
    assert set(frame["quantity"]) <= {1.0, 2.0, 5.0, 10.0}
    assert frame["volatility"].between(0.005, 0.02).all()


def test_first_exercise_is_reached_exactly_by_the_bermudan_schedule():
    frame = portfolio("R1", SMALL_SIZE)
    expiry, first = frame["expiry"].to_numpy(), frame["first_exercise"].to_numpy()
    frequency = frame["exercise_frequency"].to_numpy()
    later = first > 0
    k = np.rint((expiry - first) * frequency)
    np.testing.assert_array_equal((expiry - k / frequency)[later], first[later])


def test_strikes_are_near_the_clean_forward_price():
    frame = portfolio("R1", SMALL_SIZE)
    forward = np.array(
        [
            clean_forward_by_loop(row.maturity, row.expiry, row.coupon, row.coupon_frequency)
            for row in frame.itertuples()
        ]
    )
    strike = frame["strike"].to_numpy()
    np.testing.assert_allclose(strike, np.round(strike, 2), rtol=0, atol=1e-9)
    rounding = 0.005 + 1e-9
    assert (strike >= 0.95 * forward - rounding).all() and (strike <= 1.05 * forward + rounding).all()
    ratio = (strike / forward)[forward > 10]  # rounding to 0.01 blurs ratios of tiny prices
    assert ratio.min() < 0.955 and ratio.max() > 1.045
    assert abs(ratio.mean() - 1) < 0.005


def test_clean_forward_matches_cash_flow_by_cash_flow():
    # maturity, expiry (months), coupon, coupons a year: on a coupon date, between, before the first
    # coupon period, at maturity, zero-coupon, beyond the last curve knot.
    cases = [
        (120, 36, 0.05, 2),
        (120, 37, 0.05, 2),
        (121, 1, 0.06, 1),
        (60, 60, 0.04, 4),
        (606, 300, 0.0, 0),
        (1200, 1199, 0.08, 4),
        (13, 12, 0.03, 1),
    ]
    maturity, expiry, coupon, frequency = (np.array(column) for column in zip(*cases))
    got = _clean_forward_hull(maturity, expiry, coupon, frequency, 100.0)
    want = [clean_forward_by_loop(m / 12, e / 12, c, f) for m, e, c, f in cases]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert got[3] == pytest.approx(100.0, rel=1e-14)  # expiry at maturity: the face
    zero = 100 * discount_hull(606 / 12) / discount_hull(300 / 12)
    assert got[4] == pytest.approx(zero, rel=1e-13)


def test_book_holds_hulls_example():
    frame = generate("book")
    assert (frame["instrument"] == "bond_option").all() and (frame["option_type"] == "put").all()
    assert (frame["exercise"] == "european").all() and (frame["curve"] == "hull").all()
    for column, value in [
        ("strike", 63.0),
        ("expiry", 3.0),
        ("maturity", 9.0),
        ("coupon", 0.0),
        ("coupon_frequency", 0),
        ("face", 100.0),
        ("mean_reversion", 0.1),
        ("volatility", 0.01),
        ("quantity", 1.0),
    ]:
        assert (frame[column] == value).all(), column
    assert frame["steps_per_year"].tolist() == [1, 5, 10, 25, 100, 365]
    width, height = tree_shape(frame)
    assert (width[-1], height[-1]) == (1345, 3285)
    assert height.tolist() == [9, 45, 90, 225, 900, 3285]


def test_book_cycles_through_the_resolutions():
    frame = generate("book", 14)
    assert frame["steps_per_year"].tolist() == [1, 5, 10, 25, 100, 365] * 2 + [1, 5]
    np.testing.assert_array_equal(frame["id"].to_numpy(), np.arange(14))


def test_bimodal_and_mixtures():
    width, height = tree_shape(generate("B1", 4000, seed=3))
    narrow = width <= 15
    assert 0.45 < narrow.mean() < 0.55
    assert width[narrow].min() >= 7 and height[narrow].min() >= 900 and height[narrow].max() <= 1200
    assert width[~narrow].min() >= 401 and width[~narrow].max() <= 511 and height[~narrow].max() <= 131
    mixed = generate("U1+S1", 1030, seed=1)
    assert len(mixed) == 1030 and list(mixed["id"]) == list(range(1030))
    width, _ = tree_shape(mixed)
    assert (width == 259).sum() >= 30  # the U1 share, 3 of every 103 rows
    pd.testing.assert_frame_equal(mixed, generate("U1+S1", 1030, seed=1))

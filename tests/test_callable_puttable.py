"""Bonds with calls and puts (``callable_puttable_bond``): each date of the exercise schedule a call or a put,
or both; against QuantLib's tree engine where every date is a node, including QuantLib's own cached
callable/puttable bond and its interplay cases; on the reference and CPU engines; its risk measures against
QuantLib's; its bad input (docs/guide/dated.rst)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import distprice
from distprice import InvalidInputError
from distprice.cuda import gpu_available
from distprice.curves import load_curves
from distprice.job import exercise_schedule, valuation_day
from distprice.lattice.instruments import prepare
from distprice.lattice.quotes import read_market_prices
from distprice.lattice.risk import price_measures

from utils import assert_engines_close, random_dated_bonds, with_both_rights

ql = pytest.importorskip("QuantLib")
from distprice.lattice.quantlib_dated import price_dated_quantlib, risk_dated_quantlib  # noqa: E402

AS_OF = "2025-12-15"
PRICES = ["price", "dirty_price", "clean_price", "accrued"]
CURVES = pd.DataFrame(
    {
        "curve": "usd",
        "date": ["2026-03-16", "2026-12-15", "2028-12-15", "2031-06-16", "2040-01-15"],
        "zero_rate": [0.031, 0.033, 0.036, 0.04, 0.043],
        "day_count": "ACT/360",
    }
)


@pytest.fixture(scope="module")
def book():
    """Random dated bonds with both rights (every day count, calendar and convention pair; front stubs, end of
    month, settlement 0-3 days; clean and dirty prices, dates on and off the coupon cycle, a put and a call on
    some dates), on an ACT/360 curve at 360 steps a year: every date is a tree node."""
    portfolio, schedule = random_dated_bonds(np.random.default_rng(55), 80, steps_per_year=360, years=(0.5, 2.5))
    portfolio, table = with_both_rights(portfolio, schedule, np.random.default_rng(56))
    ours = distprice.price(portfolio, CURVES, engine="cpu", as_of=AS_OF, exercise_schedule=table)
    assert ours["error"].isna().all(), ours["error"].dropna().head().tolist()
    return portfolio, table, ours


def test_the_book_has_calls_puts_and_both_on_one_date(book):
    portfolio, table, ours = book
    assert len(portfolio) >= 20 and set(table["right"]) == {"call", "put"}
    rights = table.groupby(["id", "date"])["right"].nunique()
    assert (rights == 2).sum() >= 5
    assert (table["price_type"] == "dirty").any()
    assert (ours["option_price"] > 0.01).sum() >= 3 and (ours["option_price"] < -0.01).sum() >= 5  # puts, calls


def test_exact_against_quantlib_where_every_date_is_a_node(book):
    """QuantLib's CallableFixedRateBond with a Call or Put callability per date, on its tree engine of the same
    steps: measured within 2.7e-15 relative on 34 bonds, 20 of their dates with both rights (1e-10 asked)."""
    portfolio, table, ours = book
    theirs = price_dated_quantlib(portfolio, load_curves(CURVES), AS_OF, table, steps=ours["height"].tolist())
    for column in PRICES:
        np.testing.assert_allclose(ours[column], theirs[column], rtol=1e-12, atol=1e-12, err_msg=column)


def test_the_reference_engine_agrees(book):
    portfolio, table, ours = book
    some = portfolio.head(12)
    lines = table[table["id"].isin(some["id"])]
    reference = distprice.price(some, CURVES, engine="reference", as_of=AS_OF, exercise_schedule=lines)
    assert reference["error"].isna().all()
    for column in ("price", "bond_price", "option_price", "clean_price"):
        np.testing.assert_allclose(reference[column], ours[column].head(12), rtol=1e-12, atol=1e-10, err_msg=column)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU and CuPy")
@pytest.mark.parametrize("engine", ["gpu-outer", "gpu-flat"])
def test_the_gpu_engines_agree(book, engine):
    """The GPU kernels on the device (kernels/events.cuh's bounds of the holder's net rights) price the book as
    the CPU engine."""
    portfolio, table, ours = book
    gpu = distprice.price(portfolio, CURVES, engine=engine, as_of=AS_OF, exercise_schedule=table)
    assert_engines_close(gpu, ours, rtol=1e-12)


def test_only_calls_or_only_puts_price_as_a_callable_or_a_puttable_bond(book):
    """A bond with both rights whose dates are all calls is the callable bond of those dates, its option the
    call's negative; all puts, the puttable bond."""
    portfolio, table, _ = book
    rows = portfolio.head(8)
    for right, instrument, sign in (("call", "callable_bond", -1.0), ("put", "puttable_bond", 1.0)):
        dates = table[table["id"].isin(rows["id"]) & (table["right"] == right)]
        rows_with = rows[rows["id"].isin(dates["id"])]
        both = distprice.price(rows_with, CURVES, engine="cpu", as_of=AS_OF, exercise_schedule=dates)
        alone = distprice.price(
            rows_with.assign(instrument=instrument),
            CURVES,
            engine="cpu",
            as_of=AS_OF,
            exercise_schedule=dates.drop(columns="right"),
        )
        np.testing.assert_allclose(both["price"], alone["price"], rtol=1e-14)
        np.testing.assert_allclose(both["option_price"], sign * alone["option_price"], rtol=1e-12, atol=1e-13)


# ---- QuantLib's test suite (test-suite/callablebonds.cpp), re-expressed in the dated form ----

QL_TODAY, QL_SETTLEMENT = "2004-06-03", "2004-06-08"
"""QuantLib's cached-value test values on 3 June 2004; its bonds settle three TARGET days later, where its flat
curve starts: the row is valued there (settlement 0 days), as QuantLib's tree is."""
ODD_YEARS = ["2005-02-24", "2007-02-26", "2009-02-24", "2011-02-24", "2013-02-25"]
EVEN_YEARS = ["2006-02-24", "2008-02-25", "2010-02-24", "2012-02-24"]
"""The issue date 24 February 2004 advanced by whole years on TARGET (QuantLib's ``oddYears``, ``evenYears``)."""


def suite_bond(ident: str, instrument: str, coupon: float = 0.05) -> dict:
    """The test suite's bond: issued 100 days before 3 June 2004 (TARGET), ten years, semiannual 5 % 30/360
    coupons rolled modified following; QuantLib's HullWhite model by default (a = 0.1, sigma = 0.01); one step
    a day of the flat 3.2 % ACT/365F curve."""
    return dict(
        id=ident,
        instrument=instrument,
        exercise="bermudan",
        coupon=coupon,
        coupon_frequency=2 if coupon else 0,
        issue_date="2004-02-24",
        maturity_date="2014-02-24",
        day_count="30/360",
        calendar="TARGET",
        accrual_convention="modified_following",
        payment_convention="modified_following",
        mean_reversion=0.1,
        volatility=0.01,
        steps_per_year=365,
        curve="flat",
    )


def flat(rate: float) -> pd.DataFrame:
    return pd.DataFrame(dict(curve="flat", t=[1.0, 30.0], zero_rate=[rate, rate]))


def dates(ident: str, days, price: float, right: str | None) -> list[dict]:
    return [dict(id=ident, date=day, price=price, right=right) for day in days]


def test_quantlibs_cached_callable_puttable_bond_bond3_on_a_daily_grid():
    """testCached's three bonds: calls at 110 on even years, puts at 100 on odd years, and both (bond3). Given
    QuantLib's 240 steps, our QuantLib objects give its cached clean prices (to its 1e-8); on one step a day,
    where both trees are the same, ours equal QuantLib's: measured within 2e-15 relative."""
    portfolio = pd.DataFrame(
        [
            suite_bond("bond1", "callable_bond"),
            suite_bond("bond2", "puttable_bond"),
            suite_bond("bond3", "callable_puttable_bond"),
        ]
    )
    table = pd.DataFrame(
        dates("bond1", EVEN_YEARS, 110.0, None)
        + dates("bond2", ODD_YEARS, 100.0, None)
        + dates("bond3", EVEN_YEARS, 110.0, "call")
        + dates("bond3", ODD_YEARS, 100.0, "put")
    )
    curves = load_curves(flat(0.032))
    cached = price_dated_quantlib(portfolio, curves, QL_SETTLEMENT, table, steps=[240] * 3)
    np.testing.assert_allclose(cached["clean_price"], [110.60975477, 115.16559362, 110.97509625], rtol=0, atol=1e-8)

    ours = distprice.price(portfolio, flat(0.032), engine="cpu", as_of=QL_SETTLEMENT, exercise_schedule=table)
    assert (ours["height"] == 3548).all()
    theirs = price_dated_quantlib(portfolio, curves, QL_SETTLEMENT, table, steps=ours["height"].tolist())
    for column in PRICES:
        np.testing.assert_allclose(ours[column], theirs[column], rtol=1e-10, err_msg=column)
    bond3 = ours.set_index("id").loc["bond3"]
    assert bond3["clean_price"] == pytest.approx(110.98401, abs=1e-5)
    assert bond3["option_price"] == pytest.approx(bond3["price"] - bond3["bond_price"], rel=1e-14)


@pytest.mark.parametrize(
    "case,lines,exercised",
    [
        # an earlier out-of-the-money call prevents a later in-the-money put; so with a later call too
        ("call then put", [("2008-02-25", 100.0, "call"), ("2010-02-24", 1000.0, "put")], "2008-02-25"),
        (
            "call, put, call",
            [("2008-02-25", 100.0, "call"), ("2010-02-24", 1000.0, "put"), ("2012-02-24", 100.0, "call")],
            "2008-02-25",
        ),
        # an earlier in-the-money put prevents a later in-the-money call; so with a later put too
        ("put then call", [("2008-02-25", 100.0, "put"), ("2010-02-24", 10.0, "call")], "2008-02-25"),
        (
            "put, call, put",
            [("2008-02-25", 100.0, "put"), ("2010-02-24", 10.0, "call"), ("2012-02-24", 100.0, "put")],
            "2008-02-25",
        ),
    ],
)
def test_quantlibs_interplay_cases(case, lines, exercised):
    """testInterplay's zero-coupon bonds on a flat 3 % curve: the bond is worth its first exercise price at
    that date, discounted (QuantLib's test holds it within 1e-2; the tree reprices discount bonds exactly:
    within 1e-10 here)."""
    portfolio = pd.DataFrame([suite_bond(case, "callable_puttable_bond", coupon=0.0)])
    table = pd.DataFrame([dict(id=case, date=d, price=p, right=r) for d, p, r in lines])
    ours = distprice.price(portfolio, flat(0.03), engine="cpu", as_of=QL_SETTLEMENT, exercise_schedule=table)
    assert ours["error"].isna().all()
    years = (np.datetime64(exercised) - np.datetime64(QL_SETTLEMENT)).astype(int) / 365
    assert ours["price"][0] == pytest.approx(lines[0][1] * np.exp(-0.03 * years), rel=1e-10)


@pytest.mark.parametrize("order", [["call", "put"], ["put", "call"]])
def test_a_date_with_a_call_and_a_put_holds_the_holders_value_between_them(order):
    """The suite's bond cut to four years, with both a call at 104 and a put at 101 on 24 February 2006 and a
    put at 100 a year later: in either order in the table (QuantLib applies a date's callabilities in its
    schedule's order) the holder's value there is held between 101 and 104, and the price is QuantLib's on
    the same tree."""
    price = {"call": 104.0, "put": 101.0}
    portfolio = pd.DataFrame([dict(suite_bond("both", "callable_puttable_bond"), maturity_date="2008-02-24")])
    table = pd.DataFrame(
        [dict(id="both", date="2006-02-24", price=price[r], right=r) for r in order]
        + dates("both", ["2007-02-26"], 100.0, "put")
    )
    ours = distprice.price(portfolio, flat(0.032), engine="cpu", as_of=QL_SETTLEMENT, exercise_schedule=table)
    theirs = price_dated_quantlib(
        portfolio, load_curves(flat(0.032)), QL_SETTLEMENT, table, steps=ours["height"].tolist()
    )
    assert ours["price"][0] == pytest.approx(theirs["price"][0], rel=1e-10)
    only_put = distprice.price(
        portfolio, flat(0.032), engine="cpu", as_of=QL_SETTLEMENT, exercise_schedule=table[table["right"] == "put"]
    )
    assert ours["price"][0] < only_put["price"][0] - 0.1  # the call takes value from the holder


def test_risk_measures_equal_quantlibs():
    """OAS, effective duration and convexity of a bond with both rights: QuantLib's ``CallableBond.OAS``,
    ``effectiveDuration`` and ``effectiveConvexity`` on the same tree (ACT/360 curve, 360 steps a year), to
    the tolerances the callable and puttable bonds meet."""
    bond = dict(
        id="both",
        instrument="callable_puttable_bond",
        exercise="bermudan",
        coupon=0.05,
        coupon_frequency=2,
        issue_date="2025-09-15",
        maturity_date="2027-09-15",
        day_count="30/360",
        mean_reversion=0.3,
        volatility=0.012,
        steps_per_year=360,
        curve="usd",
    )
    book = pd.DataFrame([bond])
    table = pd.DataFrame(
        [
            dict(id="both", date="2026-03-15", price=99.0, right="put"),
            dict(id="both", date="2026-09-15", price=100.5, right="call"),
            dict(id="both", date="2026-09-15", price=99.5, right="put"),
            dict(id="both", date="2027-03-15", price=100.0, right="call"),
        ]
    )
    curves = load_curves(CURVES)
    prepared = prepare(book, curves, as_of=valuation_day(AS_OF), exercise_schedule=exercise_schedule(table, book))
    assert not prepared.problems, prepared.problems
    instruments = prepared.instruments()
    steps = instruments.geometry.height.tolist()
    model = price_dated_quantlib(book, curves, AS_OF, table, steps=steps)
    market = model["clean_price"].to_numpy() - 0.5
    quotes, problems = read_market_prices(book.assign(market_price=market))
    assert not problems
    measures = ["duration", "convexity", "oas", "vega"]
    ours = price_measures(instruments, curves, engine="cpu", measures=measures, bump_bp=2.0, quotes=quotes)
    theirs = risk_dated_quantlib(book, curves, AS_OF, table, steps=steps, bump=2e-4, market_clean=market)
    assert ours["error"][0] is None
    assert theirs["oas"][0] > 0.001
    np.testing.assert_allclose(ours["oas"], theirs["oas"], rtol=0, atol=2e-11)
    np.testing.assert_allclose(ours["effective_duration"], theirs["effective_duration"], rtol=7.5e-10)
    np.testing.assert_allclose(ours["effective_convexity"], theirs["effective_convexity"], rtol=2.4e-7)
    reference = price_measures(instruments, curves, engine="reference", measures=measures, quotes=quotes)
    np.testing.assert_allclose(reference["vega"], ours["vega"], rtol=1e-9)
    assert ours["vega"][0] != 0.0


# ---- bad input ----

GOOD = suite_bond("cp", "callable_puttable_bond")
GOOD_DATES = dates("cp", EVEN_YEARS, 104.0, "call") + dates("cp", ODD_YEARS, 100.0, "put")


def problems_of(rows: list[dict], lines: list[dict]):
    with pytest.raises(InvalidInputError) as info:
        distprice.price(
            pd.DataFrame(rows),
            flat(0.03),
            as_of=QL_SETTLEMENT,
            exercise_schedule=pd.DataFrame(lines) if lines else None,
        )
    return info.value.problems


def test_the_good_row_prices():
    priced = distprice.price(
        pd.DataFrame([GOOD]), flat(0.03), as_of=QL_SETTLEMENT, exercise_schedule=pd.DataFrame(GOOD_DATES)
    )
    assert priced["error"].isna().all()


@pytest.mark.parametrize(
    "row,lines,column,rule",
    [
        (
            dict(GOOD, instrument="callable_bond"),
            GOOD_DATES,
            "right",
            "only a callable_puttable_bond's dates have one",
        ),
        (GOOD, [dict(GOOD_DATES[0], right="both"), *GOOD_DATES[1:]], "right", "must be one of call, put"),
        (GOOD, [dict(GOOD_DATES[0], right=None), *GOOD_DATES[1:]], "right", "without a right: give call or put"),
        (GOOD, [], "exercise", "needs its dates in the exercise schedule table"),
        (dict(GOOD, exercise="european", expiry_date="2010-02-24", strike=100.0), GOOD_DATES, "exercise", "bermudan"),
        (dict(GOOD, option_type="call"), GOOD_DATES, "option_type", "must be empty for a callable_puttable_bond"),
        (
            {k: v for k, v in GOOD.items() if k not in ("maturity_date", "issue_date")} | dict(maturity=9.0),
            [],
            "instrument",
            "a callable_puttable_bond is a dated row",
        ),
        (GOOD, [*GOOD_DATES, dict(GOOD_DATES[0], price=103.0)], "date", "is given twice for this id"),
        (GOOD, [*GOOD_DATES, dict(GOOD_DATES[0], price=104.5, right="put")], "price", "at or below the call"),
        (
            GOOD,
            [*GOOD_DATES, dict(GOOD_DATES[0], price=100.0, right="put", price_type="dirty")],
            "price",
            "with the same price_type",
        ),
    ],
    ids=[
        "right on a callable_bond",
        "unknown right",
        "right missing",
        "no schedule",
        "european",
        "option_type given",
        "time form",
        "date twice",
        "put above the call",
        "put of another price type",
    ],
)
def test_bad_input_names_table_row_column_and_rule(row, lines, column, rule):
    problems = problems_of([row], lines)
    assert any(p.column == column and rule in p.rule for p in problems), problems

"""Dated rows against QuantLib and the reference engine: exact where every date is a tree node, convergent and
continuous where not; mixed with time-form rows; their bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import distprice
from distprice.curves import load_curves
from distprice.dates import CALENDARS, DAY_COUNTS, cash_flows, day_numbers, quantlib_calendar, terms_from_frame, to_iso

from utils import random_dated_bonds

ql = pytest.importorskip("QuantLib")
from distprice.lattice.quantlib_dated import price_dated_quantlib, ql_date, quantlib_example  # noqa: E402

AS_OF = "2025-12-15"
PRICES = ["price", "dirty_price", "clean_price", "accrued"]


def curve_table(day_count: str) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "curve": "usd",
            "date": ["2026-03-16", "2026-12-15", "2028-12-15", "2031-06-16", "2040-01-15"],
            "zero_rate": [0.031, 0.033, 0.036, 0.04, 0.043],
            "day_count": day_count,
        }
    )


@pytest.fixture(scope="module")
def exact_book():
    """Random dated callable and puttable bonds (every day count, calendar, convention pair, frequency; front
    stubs, end of month, settlement 0-3 days, step-down and dirty exercise prices, exercises on payment dates
    and off-cycle), on an ACT/360 curve at 360 steps a year: every date is a tree node."""
    return random_dated_bonds(np.random.default_rng(20261124), 36, steps_per_year=360, years=(0.5, 2.5))


def test_the_sample_covers_the_conventions(exact_book):
    portfolio, schedule = exact_book
    assert set(portfolio["day_count"]) == set(DAY_COUNTS.names)
    assert set(portfolio["calendar"]) == set(CALENDARS.names)
    assert {"callable_bond", "puttable_bond"} <= set(portfolio["instrument"])
    assert (portfolio["settlement_days"] > 0).any() and portfolio["end_of_month"].any()
    assert (schedule["price_type"] == "dirty").any() and len(set(schedule["id"])) >= 5


def test_exact_against_quantlib_where_every_date_is_a_node(exact_book):
    portfolio, schedule = exact_book
    curves = curve_table("ACT/360")
    ours = distprice.price(portfolio, curves, engine="cpu", as_of=AS_OF, exercise_schedule=schedule)
    assert ours["error"].isna().all(), ours["error"].dropna().head().tolist()
    theirs = price_dated_quantlib(portfolio, load_curves(curves), AS_OF, schedule, steps=ours["height"].tolist())
    for column in PRICES:
        np.testing.assert_allclose(ours[column], theirs[column], rtol=2e-13, atol=1e-12, err_msg=column)
    assert (ours["option_price"] > 1e-4).sum() > 10  # the options are worth something


@pytest.fixture(scope="module")
def american_book():
    """Random dated american callable and puttable bonds on 30/360, struck at today's clean price, each
    exercisable every business day of its calendar from a coupon payment date to 8 days before the next
    (QuantLib moves an exercise date in the week before a payment onto it), on an ACT/360 curve at 360 steps a
    year; and, for QuantLib, which has no american exercise, the same days as a bermudan schedule (the days
    checked with QuantLib's calendars)."""
    portfolio, _ = random_dated_bonds(np.random.default_rng(20261125), 30, steps_per_year=360, years=(0.5, 1.5))
    portfolio = portfolio[portfolio["strike"].notna()].head(10).assign(day_count="30/360", exercise="american")
    plain = portfolio.assign(instrument="bond", exercise=None, strike=None, first_exercise_date=None, expiry_date=None)
    clean = distprice.price(plain, curve_table("ACT/360"), engine="cpu")["clean_price"].to_numpy()
    portfolio["strike"] = np.round(clean, 2)  # at the money today
    table = []
    for i, row in portfolio.iterrows():
        frame = pd.DataFrame([row])
        terms = terms_from_frame(frame)
        flows = cash_flows(terms, day_numbers([row["valuation_date"]]))
        payments = [int(d) for d in flows.coupons.payment if d > flows.settlement[0]]
        start = payments[len(payments) // 3]
        end = payments[payments.index(start) + 1] - 8 if start != payments[-1] else start
        portfolio.loc[i, ["first_exercise_date", "expiry_date"]] = to_iso([start, end])
        calendar = quantlib_calendar(row["calendar"])
        table += [
            dict(id=row["id"], date=str(to_iso([day])[0]), price=row["strike"], price_type="clean")
            for day in range(start, end + 1)
            if calendar.isBusinessDay(ql_date(day))
        ]
    return portfolio.reset_index(drop=True), pd.DataFrame(table)


def test_american_30_360_rows_exact_against_quantlib(american_book):
    """Every business day a bermudan date at the clean strike, as QuantLib is given them: the same prices,
    exactly, where every date is a tree node."""
    portfolio, days = american_book
    assert days.groupby("id").size().min() >= 1 and days.groupby("id").size().max() > 20
    curves = curve_table("ACT/360")
    ours = distprice.price(portfolio, curves, engine="cpu", as_of=AS_OF)
    assert ours["error"].isna().all(), ours["error"].dropna().head().tolist()
    theirs = price_dated_quantlib(portfolio, load_curves(curves), AS_OF, days, steps=ours["height"].tolist())
    for column in PRICES:
        np.testing.assert_allclose(ours[column], theirs[column], rtol=2e-13, atol=1e-12, err_msg=column)
    assert (ours["option_price"] > 1e-3).sum() >= 6  # the options are worth something
    bermudan = distprice.price(portfolio, curves, engine="cpu", as_of=AS_OF, exercise_schedule=days)
    np.testing.assert_allclose(bermudan["price"], ours["price"], rtol=1e-14)


def test_reference_and_cpu_engines_agree_on_dated_rows(exact_book):
    portfolio, schedule = random_dated_bonds(
        np.random.default_rng(3), 24, steps_per_year=12, years=(1, 12), american=True
    )
    curves = curve_table("ACT/365F")
    ref = distprice.price(portfolio, curves, engine="reference", as_of=AS_OF, exercise_schedule=schedule)
    cpu = distprice.price(portfolio, curves, engine="cpu", as_of=AS_OF, exercise_schedule=schedule)
    assert ref["error"].isna().all()
    for column in ("price", "bond_price", "option_price", "dirty_price", "clean_price"):
        np.testing.assert_allclose(cpu[column], ref[column], rtol=1e-12, atol=1e-11, err_msg=column)


def real_bond(**change) -> pd.DataFrame:
    """A 4.5 % semiannual bond to 2034-06-15 callable at 100 clean on its coupon dates 2027-06-15 ... 2029-06-15
    (a 3 %, sigma 1 %)."""
    row = dict(
        id="B1",
        instrument="callable_bond",
        exercise="bermudan",
        strike=100.0,
        coupon=0.045,
        coupon_frequency=2,
        issue_date="2024-06-15",
        maturity_date="2034-06-15",
        day_count="ACT/365F",
        first_exercise_date="2027-06-15",
        expiry_date="2029-06-15",
        mean_reversion=0.03,
        volatility=0.01,
        steps_per_year=52,
        curve="usd",
    )
    return pd.DataFrame([{**row, **change}])


QUANTLIB_730 = 98.96931337209497
"""QuantLib 1.44's price of :func:`real_bond` at 730 steps a year on ACT/365F (every date a node), measured once
with :func:`price_dated_quantlib`: it takes QuantLib five minutes."""


def test_a_real_bond_at_52_steps_is_within_half_a_cent_of_the_fine_limit():
    """At 52 steps a year, within 0.005 per 100 of QuantLib on a grid where every date is a node (730 a year),
    which distprice's own 730-a-year price equals."""
    curves = curve_table("ACT/365F")
    ours = distprice.price(
        pd.concat([real_bond(), real_bond(id="fine", steps_per_year=730)], ignore_index=True),
        curves,
        engine="cpu",
        as_of=AS_OF,
    )
    assert ours.loc[1, "price"] == pytest.approx(QUANTLIB_730, rel=1e-13)
    assert abs(ours.loc[0, "price"] - QUANTLIB_730) < 0.005
    assert abs(ours.loc[0, "price"] - QUANTLIB_730) > 1e-6  # 52 a year is not the fine limit itself


def real_bonds() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Five real bonds and their exercise schedule table: B1 (:func:`real_bond`); B2, 5.25 % semiannual 30/360
    on the US calendar, T+1, par calls on every payment date 2030-03 .. 2034-09; B3, 3.875 % annual ACT/ACT-ICMA
    on TARGET, calls on three coupon dates and a monthly par-call window before maturity; B4, a 4 % quarterly
    ACT/360 puttable with a front stub, puts yearly; B5, 6.5 % semiannual 30E/360 with a short front stub,
    step-down calls and a dirty off-cycle call."""
    base = dict(instrument="callable_bond", exercise="bermudan", strike=100.0, curve="usd")
    rows = [
        real_bond().iloc[0].to_dict(),
        dict(
            base,
            id="B2",
            coupon=0.0525,
            coupon_frequency=2,
            issue_date="2025-03-15",
            maturity_date="2035-03-15",
            day_count="30/360",
            calendar="US",
            accrual_convention="unadjusted",
            payment_convention="following",
            settlement_days=1,
            first_exercise_date="2030-03-15",
            expiry_date="2034-09-15",
            mean_reversion=0.04,
            volatility=0.011,
        ),
        dict(
            base,
            id="B3",
            coupon=0.03875,
            coupon_frequency=1,
            issue_date="2022-09-01",
            maturity_date="2032-09-01",
            day_count="ACT/ACT-ICMA",
            calendar="TARGET",
            accrual_convention="modified_following",
            payment_convention="modified_following",
            mean_reversion=0.02,
            volatility=0.008,
        ),
        dict(
            base,
            id="B4",
            instrument="puttable_bond",
            coupon=0.04,
            coupon_frequency=4,
            issue_date="2025-10-20",
            maturity_date="2033-11-30",
            day_count="ACT/360",
            calendar="US",
            mean_reversion=0.05,
            volatility=0.01,
        ),
        dict(
            base,
            id="B5",
            coupon=0.065,
            coupon_frequency=2,
            issue_date="2025-10-01",
            maturity_date="2031-05-15",
            day_count="30E/360",
            mean_reversion=0.05,
            volatility=0.012,
        ),
    ]
    table = [
        ("B3", d, 100.0, "clean")
        for d in ("2029-09-03", "2030-09-02", "2031-09-01", "2032-06-01", "2032-07-01", "2032-08-02")
    ]
    table += [("B4", d, 100.0, "clean") for d in ("2026-11-30", "2027-11-30", "2028-11-30", "2029-11-30", "2030-11-29")]
    table += [
        ("B5", "2027-05-17", 103.25, "clean"),
        ("B5", "2028-05-15", 101.625, "clean"),
        ("B5", "2029-05-15", 100.0, "clean"),
        ("B5", "2029-10-01", 104.5, "dirty"),
    ]
    return pd.DataFrame(rows), pd.DataFrame(table, columns=["id", "date", "price", "price_type"])


def test_five_real_bonds_converge_to_their_fine_limit():
    """At 12, 52 and 365 steps a year, within 0.008, 0.004 and 0.001 per 100 of the limit extrapolated from 730
    and 1 460 (first order); measured: 0.0042, 0.0025 and 0.00076 at most (B1, B5, B4; 0.011 and 0.0038 on a tree
    without a phase). QuantLib's grid, on which every date is a node, gives 0.0048, 0.0027 and, at 365 where ours
    is one too, the same prices but for B4, whose last put it moves onto the coupon's payment date three days
    later."""
    portfolio, table = real_bonds()
    curves = curve_table("ACT/365F")
    price = {
        spy: distprice.price(
            portfolio.assign(steps_per_year=spy), curves, engine="cpu", as_of=AS_OF, exercise_schedule=table
        )["price"].to_numpy()
        for spy in (12, 52, 365, 730, 1460)
    }
    limit = 2 * price[1460] - price[730]
    for spy, bound in ((12, 0.008), (52, 0.004), (365, 0.001)):
        assert np.abs(price[spy] - limit).max() <= bound, (spy, price[spy] - limit)
    assert (np.abs(price[365] - limit) < np.abs(price[12] - limit)).all()
    assert np.abs(price[12] - limit).max() > 0.003  # coarse trees are not the limit


@pytest.mark.parametrize("steps_per_year, bound", [(12, 0.063), (52, 0.014)])
def test_moving_a_call_date_by_a_day_moves_the_price_a_little(steps_per_year, bound):
    """The first or last call date moved -3 .. +3 days, one day at a time: the price moves by far less than the
    2.25 coupon the current rules let it jump (the events' order and the forward adjustment)."""
    curves = curve_table("ACT/365F")
    for column in ("first_exercise_date", "expiry_date"):
        moved = pd.concat(
            [real_bond(id=f"d{k}", steps_per_year=steps_per_year) for k in range(-3, 4)], ignore_index=True
        )
        schedule = pd.DataFrame(
            {
                "id": [f"d{k}" for k in range(-3, 4) for _ in range(5)],
                "date": [str(d) for k in range(-3, 4) for d in _calls(column, k)],
                "price": 100.0,
            }
        )
        priced = distprice.price(moved, curves, engine="cpu", as_of=AS_OF, exercise_schedule=schedule)
        assert np.abs(np.diff(priced["price"])).max() <= bound, (column, priced["price"].tolist())


def _calls(column: str, k: int) -> list:
    """B1's five call dates with the first or the last moved by k days."""
    dates = [np.datetime64(d) for d in ("2027-06-15", "2027-12-15", "2028-06-15", "2028-12-15", "2029-06-15")]
    dates[0 if column == "first_exercise_date" else -1] += k
    return dates


def test_the_forward_adjustment_reprices_the_straight_bond_on_any_grid():
    """Without an option the tree's price is the discounted cash flows, at 12, 52 and 365 steps a year."""
    curves = curve_table("ACT/365F")
    terms = terms_from_frame(real_bond())
    flows = cash_flows(terms, np.datetime64(AS_OF).astype(np.int64))
    curve = load_curves(curves)["usd"].at(int(np.datetime64(AS_OF).astype(np.int64)))
    days = np.r_[flows.coupons.payment, flows.redemption_date] - np.datetime64(AS_OF).astype(np.int64)
    amounts = np.r_[flows.coupons.amount, flows.redemption_amount]
    expected = float((amounts * curve.discount(days / 365)).sum())
    for spy in (12, 52, 365):
        bond = real_bond(
            id="bond",
            instrument="bond",
            exercise=None,
            strike=None,
            first_exercise_date=None,
            expiry_date=None,
            steps_per_year=spy,
        )
        assert distprice.price(bond, curves, engine="cpu", as_of=AS_OF).loc[0, "price"] == pytest.approx(
            expected, rel=1e-13
        )


def test_dated_and_time_form_rows_mix_in_one_portfolio():
    curves = curve_table("ACT/365F")
    timed = dict(
        id="t",
        instrument="bond_option",
        option_type="put",
        exercise="european",
        strike=63.0,
        expiry=3.0,
        maturity=9.0,
        mean_reversion=0.1,
        volatility=0.01,
        curve="hull",
        steps_per_year=10,
    )
    mixed = pd.concat([real_bond(), pd.DataFrame([timed])], ignore_index=True)
    priced = distprice.price(mixed, curves, engine="cpu", as_of=AS_OF)
    alone = distprice.price(real_bond(), curves, engine="cpu", as_of=AS_OF)
    assert priced.loc[0, "price"] == alone.loc[0, "price"]
    assert priced.loc[1, "price"] == pytest.approx(1.8185118, abs=2e-7)  # Hull's example at 10 steps a year
    assert np.isnan(priced.loc[1, "dirty_price"]) and not np.isnan(priced.loc[0, "dirty_price"])


@pytest.mark.parametrize(
    "change, column, rule",
    [
        (dict(day_count="ACT/999"), "day_count", "day count must be one of"),
        (dict(calendar="Mars"), "calendar", "calendar must be one of"),
        (dict(issue_date="2035-01-01"), "issue_date", "must be before maturity_date"),
        (dict(expiry_date="2035-01-15"), "expiry_date", "must be on or before the redemption date"),
        (
            dict(first_exercise_date="2025-06-15", expiry_date="2025-12-01"),
            "exercise",
            "leaves no exercise date after the settlement date",
        ),
        (
            dict(
                maturity_date="2025-12-10",
                first_exercise_date=None,
                expiry_date=None,
                instrument="bond",
                exercise=None,
                strike=None,
            ),
            "maturity_date",
            "redeemed on or before the settlement date",
        ),
        (dict(expiry="2.0"), "expiry", "is for rows in years"),
        (dict(expiry_date=None), "expiry_date", "is required"),
        (dict(maturity_date="2034-02-30"), "maturity_date", "must be a date YYYY-MM-DD"),  # dated, not a date
        (dict(expiry_date="2029-06-31"), "expiry_date", "must be a date YYYY-MM-DD"),
        (dict(valuation_date="someday"), "valuation_date", "must be a date YYYY-MM-DD"),
        (dict(maturity_date=20340215), "maturity_date", "must be a date YYYY-MM-DD"),  # a column of numbers
        (dict(issue_date=46000.0), "issue_date", "must be a date YYYY-MM-DD"),
        (dict(valuation_date=True), "valuation_date", "must be a date YYYY-MM-DD"),
    ],
)
def test_bad_dated_rows_name_row_column_and_rule(change, column, rule):
    curves = curve_table("ACT/365F")
    with pytest.raises(distprice.InvalidInputError) as error:
        distprice.price(real_bond(**change), curves, as_of=None if "valuation_date" in change else AS_OF)
    assert f"row 1 (id 'B1'), column '{column}'" in str(error.value) and rule in str(error.value), str(error.value)
    if rule.startswith("must be a date"):  # named once: not also as a missing date
        assert len(error.value.problems) == 1, str(error.value)


def test_without_a_valuation_date_a_dated_row_is_invalid():
    with pytest.raises(distprice.InvalidInputError, match="valuation_date.*as_of"):
        distprice.price(real_bond(), curve_table("ACT/365F"))


@pytest.mark.parametrize("table", ["curves", "exercise schedule"])
def test_a_table_whose_dates_are_numbers_names_them(table):
    """A curves or exercise schedule table whose date column holds numbers names each row, as for text that is
    not a date."""
    curves = curve_table("ACT/365F")
    schedule = pd.DataFrame({"id": ["B1"], "date": ["2027-06-15"], "price": [101.0]})
    (curves if table == "curves" else schedule)["date"] = 20270615
    with pytest.raises(distprice.InvalidInputError, match=rf"{table} row 1\b.*column 'date': must be a date"):
        distprice.price(real_bond(), curves, as_of=AS_OF, exercise_schedule=schedule)


def test_an_exercise_table_naming_an_unknown_id_is_refused():
    schedule = pd.DataFrame({"id": ["B1", "nobody"], "date": ["2027-06-15", "2027-06-15"], "price": [101.0, 100.0]})
    with pytest.raises(distprice.InvalidInputError, match=r"exercise schedule row 2 \(id 'nobody'\), column 'id'"):
        distprice.price(real_bond(), curve_table("ACT/365F"), as_of=AS_OF, exercise_schedule=schedule)
    years = (
        real_bond()
        .drop(columns=["issue_date", "maturity_date", "day_count", "first_exercise_date", "expiry_date"])
        .assign(maturity=8.0, expiry=3.0, first_exercise=1.0)
    )
    with pytest.raises(distprice.InvalidInputError, match=r"exercise schedule row 2 \(id 'nobody'\), column 'id'"):
        distprice.price(years, curve_table("ACT/365F"), as_of=AS_OF, exercise_schedule=schedule)  # no dated row


def test_quantlibs_time_grid_takes_the_nearest_whole_steps_between_its_dates():
    """QuantLib's tree engine cuts each interval between two of its dates (coupons, calls, redemption) into the
    nearest whole number of the steps it is given: quarterly dates 1.8 steps apart take 2 each, 1.2 apart one
    each; a plain bond takes no tree."""
    from distprice.lattice.quantlib_dated import quantlib_steps

    example, calls, curve = quantlib_example(0.06, 0.20, 6)
    curves = load_curves(curve)
    book = pd.concat([example, example.assign(id="plain", instrument="bond", exercise=None)], ignore_index=True)
    # 25 coupon dates from 2006-09-15 (30 days away, a step) to 2012-09-15: 6.09 years
    assert quantlib_steps(book, curves, [44, 44], exercise_schedule=calls).tolist() == [1 + 24 * 2, 0]
    assert quantlib_steps(book.head(1), curves, [29], exercise_schedule=calls).tolist() == [1 + 24]
    assert quantlib_steps(book.head(1), curves, [97], exercise_schedule=calls).tolist() == [1 + 24 * 4]

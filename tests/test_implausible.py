"""Inputs that would price silently wrong are refused, naming table, row, column and rule: a curve stale for a
row's valuation date or anchored before it, zero rates and coupons typed as percentages; and no price below
zero is ever an output, with or without allow_large_rates."""

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import distprice
from distprice.cli import main
from distprice.cluster.config import parse_config
from distprice.curves import ZeroCurve, load_curves

AS_OF = "2026-11-20"
USD = pd.DataFrame(
    {
        "curve": "USD",
        "date": ["2026-12-21", "2027-11-20", "2028-11-20", "2031-11-20", "2036-11-20"],
        "zero_rate": [0.0386, 0.0362, 0.0351, 0.0374, 0.0414],
    }
)
PRICE = 111.15209474908507
"""The price of :func:`bond` on USD, valued on AS_OF."""
SLIP = "(a zero rate is a decimal: 0.05 is 5 %; beyond ±1 it needs allow_large_rates, --allow-large-rates)"
COUPON_SLIP = "(a coupon is a decimal: 0.05 is 5 %; above 1 it needs allow_large_rates, --allow-large-rates)"
BELOW = "a price is never below zero; check the curve's zero rates and the coupon (decimals: 0.05 is 5 %)"


def bond(**change) -> pd.DataFrame:
    """A 6.25 % semiannual 30/360 bond to 2031-03-15 on the US calendar, T+2, on the curve USD."""
    row = dict(
        id="B1",
        instrument="bond",
        coupon=0.0625,
        coupon_frequency=2,
        issue_date="2021-03-15",
        maturity_date="2031-03-15",
        day_count="30/360",
        calendar="US",
        settlement_days=2,
        mean_reversion=0.03,
        volatility=0.0105,
        steps_per_year=52,
        curve="USD",
    )
    return pd.DataFrame([{**row, **change}])


def problems(*args, **keywords) -> list[str]:
    """The problems ``distprice.price`` (strict, on the cpu engine) names."""
    with pytest.raises(distprice.InvalidInputError) as error:
        distprice.price(*args, engine="cpu", **keywords)
    return [str(p) for p in error.value.problems]


def test_the_bond_prices_on_its_curve():
    assert distprice.price(bond(), USD, engine="cpu", as_of=AS_OF)["price"].iloc[0] == pytest.approx(PRICE, rel=1e-13)


@pytest.mark.parametrize("last", ["2025-11-20", "2026-11-20"])
def test_a_curve_without_a_knot_after_the_valuation_date_is_refused(last):
    """A curve of last year's dates (or ending on the valuation date) would be extrapolated flat over the bond's
    whole life: the row is refused, naming the curve, its last knot and the valuation date."""
    stale = USD.assign(date=pd.date_range(end=last, periods=5, freq="MS").strftime("%Y-%m-%d"))
    stale.loc[4, "date"] = last
    rule = (
        f"row 1 (id 'B1'), column 'curve': curve 'USD' has no knot after the valuation date 2026-11-20: its last "
        f"knot is {last} (a stale curve; give the curve of the valuation date)"
    )
    assert problems(bond(), stale, as_of=AS_OF) == [rule]
    reported = distprice.price(bond(), stale, engine="cpu", as_of=AS_OF, on_invalid="report")
    assert np.isnan(reported.loc[0, "price"]) and reported.loc[0, "error"] == rule


def test_a_knot_before_the_valuation_date_is_refused_and_one_on_it_is_the_curve_at_zero():
    early = pd.concat([USD.head(1).assign(date="2026-10-01"), USD], ignore_index=True)
    assert problems(bond(), early, as_of=AS_OF) == [
        "row 1 (id 'B1'), column 'curve': curve 'USD' has a knot before the valuation date 2026-11-20: its first "
        "knot is 2026-10-01 (a curve's knots start on its valuation date; give the curve of that date, or leave "
        "out the knots before it)"
    ]
    on = pd.concat([USD.head(1).assign(date=AS_OF), USD], ignore_index=True)  # flat to the first knot either way
    priced = distprice.price(bond(), on, engine="cpu", as_of=AS_OF)
    assert priced["price"].iloc[0] == pytest.approx(PRICE, rel=1e-13) and priced["error"].isna().all()


def test_each_row_is_checked_at_its_own_valuation_date():
    book = pd.concat(
        [bond(maturity_date="2040-03-15"), bond(id="B2", maturity_date="2040-03-15", valuation_date="2037-01-02")],
        ignore_index=True,
    )
    priced = distprice.price(book, USD, engine="cpu", as_of=AS_OF, on_invalid="report")
    alone = distprice.price(book.head(1), USD, engine="cpu", as_of=AS_OF)
    assert priced.loc[0, "price"] == alone.loc[0, "price"] and np.isnan(priced.loc[1, "price"])
    assert priced["error"].fillna("").tolist() == [
        "",
        "row 2 (id 'B2'), column 'curve': curve 'USD' has no knot after the valuation date 2037-01-02: its last "
        "knot is 2036-11-20 (a stale curve; give the curve of the valuation date)",
    ]


def test_a_row_in_years_on_a_dated_curve_is_checked_at_as_of():
    years = pd.DataFrame([dict(id="T1", instrument="bond", maturity=5.0, mean_reversion=0.03, volatility=0.01)])
    assert problems(years.assign(curve="USD"), USD, as_of="2037-01-02") == [
        "row 1 (id 'T1'), column 'curve': curve 'USD' has no knot after the valuation date 2037-01-02: its last "
        "knot is 2036-11-20 (a stale curve; give the curve of the valuation date)"
    ]


def test_scenario_curves_are_checked_and_shifts_keep_the_base_curves_dates():
    """A scenario's own stale curve is named as the scenario's; shifted curves keep the base curve's knots, so a
    stale base curve is named once, not once per shift."""
    stale = USD.assign(date=USD["date"].str.replace("20", "19", n=1))
    scenarios = stale.assign(scenario="old", t=np.nan)
    assert problems(bond(), USD, as_of=AS_OF, scenarios=scenarios) == [
        "row 1 (id 'B1'), column 'curve': scenario curve 'USD' has no knot after the valuation date 2026-11-20: its "
        "last knot is 1936-11-20 (a stale curve; give the curve of the valuation date)"
    ]
    assert len(problems(bond(), stale, as_of=AS_OF, shifts_bp=[-100, 0, 100])) == 1


@pytest.mark.parametrize(
    "rate,rule",
    [
        (3.86, f"3.86 looks like a percentage: write 0.0386 {SLIP}"),
        (-2.0, f"-2 looks like a percentage: write -0.02 {SLIP}"),
        (386.0, f"386 is not a rate {SLIP}"),
    ],
)
def test_a_zero_rate_beyond_one_is_refused_as_a_percentage(rate, rule):
    curves = USD.assign(zero_rate=[0.0386, rate, 0.0351, 1.0, -1.0])  # ±1 itself is taken
    assert problems(bond(), curves, as_of=AS_OF) == [f"curves row 2, column 'zero_rate': {rule}"]
    assert load_curves(curves, allow_large_rates=True)["USD"].zero_rate[1] == rate


def test_rates_in_percent_are_refused_in_scenarios_and_in_curves_made_in_python():
    scenarios = pd.DataFrame({"scenario": "up", "curve": "hull", "t": [1.0, 10.0], "zero_rate": [0.04, 4.5]})
    years = pd.DataFrame([dict(id="T1", instrument="bond", maturity=5.0, mean_reversion=0.03, volatility=0.01)])
    assert problems(years.assign(curve="hull"), scenarios=scenarios) == [
        f"scenarios row 2 (scenario 'up'), column 'zero_rate': 4.5 looks like a percentage: write 0.045 {SLIP}"
    ]
    mine = {"x": ZeroCurve(np.array([1.0, 5.0]), np.array([0.03, 3.5]))}
    assert problems(years.assign(curve="x"), mine) == [
        f"curve 'x' knot 2, column 'zero_rate': 3.5 looks like a percentage: write 0.035 {SLIP}"
    ]
    assert distprice.price(years.assign(curve="x"), mine, allow_large_rates=True)["error"].isna().all()


def test_a_coupon_above_one_is_refused_as_a_percentage_in_both_forms():
    years = pd.DataFrame(
        [
            dict(id=f"T{k}", instrument="bond", maturity=5.0, coupon=c, coupon_frequency=2)
            for k, c in enumerate([5.0, 1.0, 11.0])
        ]
    ).assign(mean_reversion=0.03, volatility=0.01, curve="hull")
    assert problems(years) == [
        f"row 1 (id 'T0'), column 'coupon': 5 looks like a percentage: write 0.05 {COUPON_SLIP}",
        f"row 3 (id 'T2'), column 'coupon': 11 looks like a percentage: write 0.11 {COUPON_SLIP}",
    ]
    assert problems(years, allow_large_rates=True) == ["row 3 (id 'T2'), column 'coupon': must be at most 10"]
    assert problems(bond(coupon=6.25), USD, as_of=AS_OF) == [
        f"row 1 (id 'B1'), column 'coupon': 6.25 looks like a percentage: write 0.0625 {COUPON_SLIP}"
    ]
    taken = distprice.price(bond(coupon=6.25), USD, engine="cpu", as_of=AS_OF, allow_large_rates=True)
    assert taken["price"].iloc[0] == pytest.approx(2674.2510802264487, rel=1e-12)  # as given: 625 % a year


def test_a_price_below_zero_is_the_rows_error_never_an_output():
    """At 500 % a year (allowed) the dirty price of the plain and the callable bond is less than their accrued
    interest: their clean prices, below zero, are their errors; the puttable bond and the bond option keep their
    prices, which are not below zero."""
    option = dict(exercise="bermudan", strike=100.0, first_exercise_date="2027-03-15", expiry_date="2030-03-15")
    book = pd.concat(
        [
            bond(),
            bond(id="C1", instrument="callable_bond", **option),
            bond(id="P1", instrument="puttable_bond", **option),
            bond(id="O1", instrument="bond_option", option_type="put", **option),
        ],
        ignore_index=True,
    )
    hot = USD.assign(zero_rate=5.0)
    rule = "column 'clean_price': -0.454946 (dirty 0.742971 less accrued 1.19792): " + BELOW
    priced = distprice.price(book, hot, engine="cpu", as_of=AS_OF, allow_large_rates=True, on_invalid="report")
    assert priced["error"].fillna("").tolist() == [f"row 1 (id 'B1'), {rule}", f"row 2 (id 'C1'), {rule}", "", ""]
    for column in ("price", "value", "bond_price", "option_price", "dirty_price", "clean_price"):
        assert priced[column].iloc[:2].isna().all() and priced[column].iloc[2].round(4) > 0, column
    assert priced["price"].iloc[2:].round(4).tolist() == [21.3403, 20.637]
    assert problems(book, hot, as_of=AS_OF, allow_large_rates=True) == [
        f"row 1 (id 'B1'), {rule}",
        f"row 2 (id 'C1'), {rule}",
    ]
    measured = distprice.price(
        book.head(1), hot, engine="cpu", as_of=AS_OF, allow_large_rates=True, on_invalid="report", measures="dv01"
    )
    assert np.isnan(measured.loc[0, "dv01"]) and measured.loc[0, "error"] == f"row 1 (id 'B1'), {rule}"


def test_a_price_below_zero_under_one_scenario_is_that_scenarios_error():
    shifts = [0, 46_000]  # +460 % on every rate
    priced = distprice.price(bond(), USD, engine="cpu", as_of=AS_OF, shifts_bp=shifts, on_invalid="report")
    assert priced["scenario"].tolist() == ["+0bp", "+46000bp"]
    assert priced.loc[0, "price"] == pytest.approx(PRICE, rel=1e-13) and np.isnan(priced.loc[1, "price"])
    assert priced["error"].isna().tolist() == [True, False] and "column 'clean_price'" in priced.loc[1, "error"]
    (said,) = problems(bond(), USD, as_of=AS_OF, shifts_bp=shifts)
    assert said.startswith("row 1 (id 'B1') under scenario '+46000bp', column 'clean_price': -")


def test_the_option_flows_from_the_command_line_and_the_config(tmp_path):
    bond(coupon=6.25).to_csv(tmp_path / "b.csv", index=False)
    USD.to_csv(tmp_path / "c.csv", index=False)
    args = ["run", "--portfolio", str(tmp_path / "b.csv"), "--curves", str(tmp_path / "c.csv"), "--as-of", AS_OF]
    refused = CliRunner().invoke(main, [*args, "--output", str(tmp_path / "o.csv")])
    assert refused.exit_code == 2 and "6.25 looks like a percentage: write 0.0625" in refused.output
    taken = CliRunner().invoke(main, [*args, "--output", str(tmp_path / "o.csv"), "--allow-large-rates"])
    assert taken.exit_code == 0, taken.output
    assert pd.read_csv(tmp_path / "o.csv")["price"].iloc[0] == pytest.approx(2674.2510802264487, rel=1e-12)
    assert parse_config({"job": {"allow_large_rates": True}}).job.allow_large_rates is True
    with pytest.raises(distprice.ConfigError, match="job.allow_large_rates"):
        parse_config({"job": {"allow_large_rates": "yes please"}})


def test_a_bond_an_engine_values_at_zero_is_the_rows_error_never_an_output(monkeypatch):
    """A bond's coupons and redemption to come are worth more than 0: where an engine gives 0 (a fault seen once
    on a GPU: whole groups of rows at 0, some with no accrued interest, whose clean price 0 passed as a price), the
    row is refused, in strict mode the job; the other rows keep their prices."""
    import distprice.api as api

    priced_by = api.price_parts

    def faulty(*args, **keywords):
        bond, option, seconds = priced_by(*args, **keywords)
        bond[:, 0] = option[:, 0] = 0.0
        return bond, option, seconds

    monkeypatch.setattr(api, "price_parts", faulty)
    book = pd.concat([bond(), bond(id="B2", coupon=0.05)], ignore_index=True)
    rule = "column 'bond_price': 0: coupons and a redemption to come are worth more than 0; check the curve's zero "
    rule += "rates, or price the row again"
    priced = distprice.price(book, USD, engine="cpu", as_of=AS_OF, on_invalid="report")
    assert priced["error"].fillna("").tolist() == [f"row 1 (id 'B1'), {rule}", ""]
    assert priced.loc[0, ["price", "bond_price", "dirty_price", "clean_price"]].isna().all()
    assert priced.loc[1, "price"] > 90
    assert problems(book, USD, as_of=AS_OF) == [f"row 1 (id 'B1'), {rule}"]

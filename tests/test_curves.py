"""Curves as desks keep them: compounded zero rates on any day count, discount factors, and curves bootstrapped
from deposit and swap quotes, each against QuantLib's curve of the same inputs (1e-12 in discount factor), the
bad-input rules of each, and bonds priced on them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import distprice
from distprice.cuda import gpu_available
from distprice.curves import curves_from_frame, load_curves
from distprice.dates import day_numbers
from distprice.errors import InvalidInputError

ql = pytest.importorskip("QuantLib")

V = "2025-11-14"
"""A Friday: the curves' day."""
VDAY = int(day_numbers(np.array([V]))[0])
TOLERANCE = 1e-12
"""In discount factor."""
QL_COMPOUNDING = {
    "continuous": (ql.Continuous, ql.Annual),
    "simple": (ql.Simple, ql.Annual),
    "annual": (ql.Compounded, ql.Annual),
    "semiannual": (ql.Compounded, ql.Semiannual),
    "quarterly": (ql.Compounded, ql.Quarterly),
    "monthly": (ql.Compounded, ql.Monthly),
}
QL_DAY_COUNT = {
    "ACT/360": ql.Actual360(),
    "ACT/365F": ql.Actual365Fixed(),
    "30/360": ql.Thirty360(ql.Thirty360.BondBasis),
    "30E/360": ql.Thirty360(ql.Thirty360.European),
    "ACT/ACT-ISDA": ql.ActualActual(ql.ActualActual.ISDA),
}
QL_CALENDAR = {
    "none": ql.NullCalendar(),
    "weekends": ql.WeekendsOnly(),
    "TARGET": ql.TARGET(),
    "US": ql.UnitedStates(ql.UnitedStates.GovernmentBond),
    "UK": ql.UnitedKingdom(ql.UnitedKingdom.Exchange),
}
QL_CONVENTION = {"following": ql.Following, "modified_following": ql.ModifiedFollowing, "preceding": ql.Preceding}
KNOT_DATES = [
    "2025-11-14",
    "2025-12-15",
    "2026-05-14",
    "2026-11-16",
    "2027-11-15",
    "2030-11-14",
    "2035-11-14",
    "2055-11-15",
]
RATES = [0.0391, 0.0386, 0.0371, 0.0362, 0.0351, 0.0374, 0.0414, 0.0452]


def ql_date(day: int):
    return ql.Date(14, 11, 2025) + int(day - VDAY)


def days_to(last: int) -> np.ndarray:
    return np.arange(VDAY, last + 1)


def ours(curve, days) -> np.ndarray:
    """Discount factors of a curve of the curve set, seen from V, at day numbers."""
    seen = curve.at(VDAY)
    return seen.discount((days - VDAY) / seen.days_per_year)


def theirs(curve, days) -> np.ndarray:
    return np.array([curve.discount(ql_date(d)) for d in days])


@pytest.fixture(autouse=True)
def evaluation_date():
    ql.Settings.instance().evaluationDate = ql_date(VDAY)


# ---- zero rates under a compounding and a day count ----


@pytest.mark.parametrize("compounding", list(QL_COMPOUNDING))
@pytest.mark.parametrize("day_count", ["ACT/365F", "ACT/360"])
def test_compounded_zero_rates_are_quantlibs_zero_curve_on_every_day(compounding, day_count):
    table = pd.DataFrame(
        dict(curve="c", date=KNOT_DATES, zero_rate=RATES, compounding=compounding, day_count=day_count)
    )
    curve = load_curves(table)["c"]
    dates = day_numbers(np.array(KNOT_DATES))
    comp, frequency = QL_COMPOUNDING[compounding]
    reference = ql.ZeroCurve(
        [ql_date(d) for d in dates], RATES, QL_DAY_COUNT[day_count], ql.NullCalendar(), ql.Linear(), comp, frequency
    )
    days = days_to(dates[-1])
    assert np.abs(ours(curve, days) - theirs(reference, days)).max() < TOLERANCE


@pytest.mark.parametrize("compounding", ["simple", "annual", "quarterly"])
@pytest.mark.parametrize("day_count", ["30/360", "30E/360", "ACT/ACT-ISDA"])
def test_other_day_counts_give_quantlibs_discount_factors_at_the_knots(compounding, day_count):
    """Between knots QuantLib interpolates on the day count's own years, distprice on ACT/365F years."""
    table = pd.DataFrame(
        dict(curve="c", date=KNOT_DATES, zero_rate=RATES, compounding=compounding, day_count=day_count)
    )
    curve = load_curves(table)["c"]
    dates = day_numbers(np.array(KNOT_DATES))
    comp, frequency = QL_COMPOUNDING[compounding]
    reference = ql.ZeroCurve(
        [ql_date(d) for d in dates], RATES, QL_DAY_COUNT[day_count], ql.NullCalendar(), ql.Linear(), comp, frequency
    )
    assert curve.day_count == "ACT/365F"
    assert np.abs(ours(curve, dates) - theirs(reference, dates)).max() < TOLERANCE


@pytest.mark.parametrize("compounding", ["simple", "semiannual", "monthly"])
def test_compounded_knots_in_years_are_the_same_curve_as_by_date(compounding):
    years = (day_numbers(np.array(KNOT_DATES)) - VDAY) / 365
    by_t = load_curves(pd.DataFrame(dict(curve="c", t=years, zero_rate=RATES, compounding=compounding)))["c"]
    by_date = load_curves(pd.DataFrame(dict(curve="c", date=KNOT_DATES, zero_rate=RATES, compounding=compounding)))
    t = np.linspace(0, 30, 301)
    assert np.abs(by_t.discount(t) - by_date["c"].at(VDAY).discount(t)).max() < 1e-15


def test_continuous_zero_rates_read_as_before():
    table = pd.DataFrame(dict(curve="c", date=KNOT_DATES[1:], zero_rate=RATES[1:], day_count="ACT/360"))
    curve = load_curves(table)["c"]
    assert curve.quote is None and curve.day_count == "ACT/360"
    assert curve.zero_rate.tolist() == RATES[1:]
    assert curve.at(VDAY).t.tolist() == ((day_numbers(np.array(KNOT_DATES[1:])) - VDAY) / 360).tolist()


def test_a_parallel_shift_of_a_compounded_curve_moves_its_continuous_rates():
    table = pd.DataFrame(dict(curve="c", date=KNOT_DATES, zero_rate=RATES, compounding="semiannual"))
    curve = load_curves(table)["c"]
    shifted = curve.shifted(0.001).shifted(0.0005)
    assert np.abs(shifted.at(VDAY).zero_rate - (curve.at(VDAY).zero_rate + 0.0015)).max() < 1e-17
    assert np.abs(curve.at(VDAY).zero_rate - 2 * np.log1p(np.array(RATES) / 2)).max() < 1e-16


# ---- discount factors ----

FACTORS = [1.0, 0.99671, 0.98176, 0.96446, 0.93185, 0.83542, 0.66129, 0.40011]


@pytest.mark.parametrize("day_count", ["ACT/365F", "ACT/360"])
def test_discount_factors_by_date_are_kept_and_interpolated_linearly_in_zero_rate(day_count):
    table = pd.DataFrame(dict(curve="c", date=KNOT_DATES, discount_factor=FACTORS, day_count=day_count))
    curve = load_curves(table)["c"]
    dates = day_numbers(np.array(KNOT_DATES))
    assert np.abs(ours(curve, dates) - FACTORS).max() < 1e-15
    counter = QL_DAY_COUNT[day_count]
    rates = [
        ql.InterestRate.impliedRate(1 / f, counter, ql.Continuous, ql.Annual, ql_date(dates[0]), ql_date(d)).rate()
        for f, d in zip(FACTORS[1:], dates[1:])
    ]
    reference = ql.ZeroCurve(
        [ql_date(d) for d in dates], rates[:1] + rates, counter, ql.NullCalendar(), ql.Linear(), ql.Continuous
    )
    days = days_to(dates[-1])
    assert np.abs(ours(curve, days) - theirs(reference, days)).max() < TOLERANCE


def test_discount_factors_in_years():
    years = (day_numbers(np.array(KNOT_DATES)) - VDAY) / 365
    curve = load_curves(pd.DataFrame(dict(curve="c", t=years, discount_factor=FACTORS)))["c"]
    assert np.abs(curve.discount(years) - FACTORS).max() < 1e-15
    assert curve.rate(0) == curve.rate(years[1]) == -np.log(FACTORS[1]) / years[1]


# ---- bootstrapped from deposits and swaps ----

EUR = [
    ("deposit", "1D", 0.0190, "ACT/360", None),
    ("deposit", "1W", 0.0195, "ACT/360", None),
    ("deposit", "1M", 0.0201, "ACT/360", None),
    ("deposit", "3M", 0.0206, "ACT/360", None),
    ("deposit", "6M", 0.0211, "ACT/360", None),
    ("swap", "1Y", 0.0215, "30/360", 1),
    ("swap", "18M", 0.0221, "30/360", 1),
    ("swap", "2Y", 0.0228, "30/360", 1),
    ("swap", "3Y", 0.0240, "30/360", 1),
    ("swap", "5Y", 0.0262, "30/360", 1),
    ("swap", "7Y", 0.0281, "30/360", 1),
    ("swap", "10Y", 0.0302, "30/360", 1),
    ("swap", "15Y", 0.0321, "30/360", 1),
    ("swap", "20Y", 0.0328, "30/360", 1),
    ("swap", "30Y", 0.0325, "30/360", 1),
]
MARKETS = {
    "EUR": (EUR, "TARGET", "modified_following", 2),
    "USD": (
        [(k, t, r + 0.015, "ACT/360" if k == "deposit" else "30/360", 2 if f else None) for k, t, r, _, f in EUR],
        "US",
        "modified_following",
        2,
    ),
    "GBP": ([(k, t, r + 0.01, "ACT/365F", 2 if f else None) for k, t, r, _, f in EUR], "UK", "following", 0),
    "ISDA": (
        [(k, t, r, "ACT/ACT-ISDA" if f else "ACT/365F", 4 if f else None) for k, t, r, _, f in EUR],
        "weekends",
        "preceding",
        1,
    ),
}


def quotes_table(name: str) -> pd.DataFrame:
    quotes, calendar, convention, settlement = MARKETS[name]
    return pd.DataFrame(
        [
            dict(
                curve=name,
                instrument=kind,
                tenor=tenor,
                rate=rate,
                valuation_date=V,
                day_count=day_count,
                fixed_frequency=frequency,
                calendar=calendar,
                convention=convention,
                settlement_days=settlement,
            )
            for kind, tenor, rate, day_count, frequency in quotes
        ]
    )


def quantlib_bootstrap(name: str, accuracy=None):
    quotes, calendar, convention, settlement = MARKETS[name]
    cal, conv = QL_CALENDAR[calendar], QL_CONVENTION[convention]
    index = ql.IborIndex("float", ql.Period("6M"), settlement, ql.EURCurrency(), cal, conv, False, ql.Actual360())
    helpers = []
    for kind, tenor, rate, day_count, frequency in quotes:
        if kind == "deposit":
            helpers.append(
                ql.DepositRateHelper(rate, ql.Period(tenor), settlement, cal, conv, False, QL_DAY_COUNT[day_count])
            )
        else:
            helpers.append(
                ql.SwapRateHelper(
                    rate,
                    ql.Period(tenor),
                    cal,
                    {1: ql.Annual, 2: ql.Semiannual, 4: ql.Quarterly}[frequency],
                    conv,
                    QL_DAY_COUNT[day_count],
                    index,
                    ql.QuoteHandle(),
                    ql.Period(0, ql.Days),
                    ql.YieldTermStructureHandle(),
                    settlement,
                )
            )
    solver = ql.IterativeBootstrap() if accuracy is None else ql.IterativeBootstrap(accuracy)
    return ql.PiecewiseLinearZero(ql_date(VDAY), helpers, ql.Actual365Fixed(), solver)


@pytest.mark.parametrize("name", list(MARKETS))
def test_a_bootstrapped_curve_is_quantlibs_piecewise_linear_zero_on_every_day(name):
    curve = load_curves(quotes_table(name))[name]
    reference = quantlib_bootstrap(name, accuracy=1e-15)  # QuantLib's own solver to the last bit, as ours
    pillars = [int(day_numbers(np.array([d.ISO()]))[0]) for d in reference.dates()]
    assert curve.dates.tolist() == pillars
    days = days_to(pillars[-1])
    assert np.abs(ours(curve, days) - theirs(reference, days)).max() < TOLERANCE
    default = quantlib_bootstrap(name)  # at QuantLib's default accuracy (1e-12 in zero rate)
    assert np.abs(ours(curve, days) - theirs(default, days)).max() < 1e-11


@pytest.mark.parametrize("name", ["EUR", "USD"])
def test_every_swap_prices_to_par_on_its_curve(name):
    """QuantLib's swaps of the quotes, projected and discounted on distprice's curve, are worth zero."""
    quotes, calendar, convention, settlement = MARKETS[name]
    curve = load_curves(quotes_table(name))[name]
    handle = ql.YieldTermStructureHandle(
        ql.ZeroCurve([ql_date(d) for d in curve.dates], list(curve.zero_rate), ql.Actual365Fixed(), ql.NullCalendar())
    )
    cal, conv = QL_CALENDAR[calendar], QL_CONVENTION[convention]
    index = ql.IborIndex(
        "float", ql.Period("3M"), settlement, ql.USDCurrency(), cal, conv, False, ql.Actual360(), handle
    )
    swaps = [
        ql.MakeVanillaSwap(
            ql.Period(tenor),
            index,
            rate,
            settlementDays=settlement,
            fixedLegTenor=ql.Period(12 // frequency, ql.Months),
            fixedLegDayCount=QL_DAY_COUNT[day_count],
            fixedLegConvention=conv,
            fixedLegTerminationDateConvention=conv,
            fixedLegCalendar=cal,
            floatingLegCalendar=cal,
            pricingEngine=ql.DiscountingSwapEngine(handle),
        )
        for kind, tenor, rate, day_count, frequency in quotes
        if kind == "swap"
    ]
    assert len(swaps) == 10
    assert max(abs(swap.NPV()) for swap in swaps) < 1e-14


# ---- bonds priced on them ----

BOND = dict(
    id="ACME",
    instrument="callable_bond",
    exercise="bermudan",
    first_exercise_date="2027-03-15",
    expiry_date="2030-03-15",
    strike=100.0,
    coupon=0.0625,
    coupon_frequency=2,
    issue_date="2021-03-15",
    maturity_date="2031-03-15",
    day_count="30/360",
    calendar="US",
    payment_convention="following",
    settlement_days=2,
    mean_reversion=0.03,
    volatility=0.0105,
    steps_per_year=52,
    curve="c",
)


def priced(curves, **row) -> pd.Series:
    out = distprice.price(pd.DataFrame([dict(BOND, **row)]), curves, as_of=V, engine="cpu")
    assert out["error"].isna().all(), out["error"].tolist()
    return out.iloc[0]


@pytest.mark.parametrize("compounding, frequency", [("annual", 1), ("semiannual", 2), ("quarterly", 4)])
def test_a_bond_on_a_compounded_curve_is_the_bond_on_the_equivalent_continuous_curve(compounding, frequency):
    compounded = pd.DataFrame(dict(curve="c", date=KNOT_DATES[1:], zero_rate=RATES[1:], compounding=compounding))
    continuous = pd.DataFrame(
        dict(curve="c", date=KNOT_DATES[1:], zero_rate=frequency * np.log1p(np.array(RATES[1:]) / frequency))
    )
    a, b = priced(compounded), priced(continuous)
    assert a["clean_price"] == pytest.approx(b["clean_price"], abs=1e-12)
    assert a["option_price"] == pytest.approx(b["option_price"], abs=1e-12)
    assert (
        abs(
            a["clean_price"]
            - priced(pd.DataFrame(dict(curve="c", date=KNOT_DATES[1:], zero_rate=RATES[1:])))["clean_price"]
        )
        > 0.02
    )


def test_a_time_form_bond_on_a_compounded_curve_in_years():
    years = [0.5, 2, 5, 10]
    rates = [0.031, 0.035, 0.038, 0.041]
    row = dict(
        id="b",
        instrument="bond",
        maturity=7.0,
        coupon=0.05,
        coupon_frequency=2,
        mean_reversion=0.1,
        volatility=0.01,
        steps_per_year=24,
        curve="c",
    )
    one = distprice.price(
        pd.DataFrame([row]), pd.DataFrame(dict(curve="c", t=years, zero_rate=rates, compounding="annual"))
    )
    two = distprice.price(pd.DataFrame([row]), pd.DataFrame(dict(curve="c", t=years, zero_rate=np.log1p(rates))))
    assert one["price"].iloc[0] == pytest.approx(two["price"].iloc[0], abs=1e-12)


def test_a_bond_on_a_bootstrapped_curve_is_quantlibs_bond_on_its_curve():
    """A plain bond: its cash flows discounted on QuantLib's PiecewiseLinearZero of the same quotes."""
    row = dict(
        instrument="bond",
        exercise=None,
        first_exercise_date=None,
        expiry_date=None,
        strike=None,
        steps_per_year=365,
        curve="USD",
        issue_date="2024-03-15",
    )
    ours_row = priced(quotes_table("USD"), **row)
    curve = quantlib_bootstrap("USD", accuracy=1e-15)
    schedule = ql.Schedule(
        ql.Date(15, 3, 2024),
        ql.Date(15, 3, 2031),
        ql.Period(6, ql.Months),
        QL_CALENDAR["US"],
        ql.Unadjusted,
        ql.Unadjusted,
        ql.DateGeneration.Backward,
        False,
    )
    bond = ql.FixedRateBond(2, 100.0, schedule, [0.0625], ql.Thirty360(ql.Thirty360.BondBasis), ql.Following)
    bond.setPricingEngine(ql.DiscountingBondEngine(ql.YieldTermStructureHandle(curve)))
    assert ours_row["dirty_price"] == pytest.approx(bond.dirtyPrice(), abs=1e-9)
    assert ours_row["clean_price"] == pytest.approx(bond.cleanPrice(), abs=1e-9)


# ---- bad inputs ----


def problems(table: pd.DataFrame) -> list[str]:
    return [str(p) for p in curves_from_frame(table)[1]]


def knots(**change) -> pd.DataFrame:
    return pd.DataFrame(dict(dict(curve="c", date=KNOT_DATES[:3], zero_rate=RATES[:3]), **change))


@pytest.mark.parametrize(
    "table, expected",
    [
        (knots(compounding="daily"), "curves row 1, column 'compounding': must be one of continuous, simple, annual"),
        (
            knots(compounding=["annual", "annual", "simple"]),
            "curves row 3, column 'compounding': must be the same on every row of curve 'c'",
        ),
        (knots(day_count="ACT/ACT-ICMA"), "curves row 1, column 'day_count': must be one of ACT/360, ACT/365F, 30/360"),
        (
            pd.DataFrame(dict(curve="c", t=[0.5, 1], zero_rate=[0.03, 0.04], day_count="30/360")),
            "curves row 1, column 'day_count': a curve by t, or of discount factors, takes ACT/365F or ACT/360",
        ),
        (
            pd.DataFrame(dict(curve="c", t=[0.5, 40], zero_rate=[0.03, -0.04], compounding="simple")),
            "curves row 2, column 'zero_rate': gives no discount factor at its t under its compounding",
        ),
        (
            knots(zero_rate=[0.03, 3.5, 0.04], compounding="annual"),
            "curves row 2, column 'zero_rate': 3.5 looks like a percentage: write 0.035",
        ),
        (
            pd.DataFrame(
                dict(curve="c", date=KNOT_DATES[:3], discount_factor=[1, 0.99, 0.98], zero_rate=[None, 0.03, None])
            ),
            "curves row 2, column 'discount_factor': give zero_rate or discount_factor, not both",
        ),
        (
            pd.DataFrame(dict(curve="c", date=KNOT_DATES[:3], discount_factor=[1, 0, 0.98])),
            "curves row 2, column 'discount_factor': must be a finite number > 0",
        ),
        (
            pd.DataFrame(dict(curve="c", date=KNOT_DATES[:3], discount_factor=[0.999, 0.99, 0.98])),
            "curves row 1, column 'discount_factor': curve 'c' of discount factors starts on its first date with",
        ),
        (
            pd.DataFrame(dict(curve="c", t=[0.5, 1], discount_factor=[0.99, 0.98])),
            "curves row 1, column 'discount_factor': curve 'c' of discount factors starts at t = 0 with",
        ),
        (
            pd.DataFrame(dict(curve="c", t=[0.0], discount_factor=[1.0])),
            "curves row 1, column 'discount_factor': curve 'c' of discount factors needs a knot after its first",
        ),
        (
            pd.DataFrame(dict(curve="c", t=[0, 1, 2], discount_factor=[1, 0.99, None], zero_rate=[None, None, 0.03])),
            "curves row 2, column 'discount_factor': curve 'c' gives some knots by zero_rate and some by",
        ),
        (
            pd.DataFrame(dict(curve="c", t=[0, 1], discount_factor=[1, 0.99], compounding=[None, "annual"])),
            "curves row 2, column 'compounding': applies to zero_rate: leave it empty here",
        ),
        (
            pd.DataFrame(dict(curve="c", date=KNOT_DATES[:2], discount_factor=[1, 0.99], day_count="30/360")),
            "curves row 1, column 'day_count': a curve by t, or of discount factors, takes ACT/365F or ACT/360",
        ),
        (
            pd.DataFrame(dict(curve="c", t=[0.5], discount_factr=[0.99])),
            "curves input, column 'discount_factr': is not a column distprice reads: did you mean 'discount_factor'?",
        ),
    ],
)
def test_each_knot_rule_names_row_column_and_rule(table, expected):
    found = problems(table)
    assert any(p.startswith(expected) for p in found), found


def quotes(**change) -> pd.DataFrame:
    table = quotes_table("EUR").head(8)
    for column, (row, value) in change.items():
        table[column] = table[column].astype(object) if column in table else None
        table.loc[row, column] = value
    return table


@pytest.mark.parametrize(
    "table, expected",
    [
        (quotes(instrument=(2, "future")), "curves row 3, column 'instrument': must be deposit or swap"),
        (quotes(tenor=(2, "3X")), "curves row 3, column 'tenor': must be a whole number >= 1 then D, W, M or Y"),
        (quotes(tenor=(2, "0M")), "curves row 3, column 'tenor': must be a whole number >= 1"),
        (quotes(tenor=(6, "2W")), "curves row 7, column 'tenor': a swap's tenor is in months (M) or years (Y)"),
        (quotes(tenor=(4, "1Y")), "curves row 6, column 'tenor': ends on 2026-11-18, as curves row 5 does"),
        (quotes(rate=(2, "n/a")), "curves row 3, column 'rate': must be a finite number"),
        (
            quotes(rate=(6, 2.21)),
            "curves row 7, column 'rate': 2.21 looks like a percentage: write 0.0221 (a quoted rate is a decimal",
        ),
        (quotes(rate=(4, -0.004)), None),
        (
            quotes(valuation_date=(3, "2025-11-17")),
            "curves row 4, column 'valuation_date': must be the same on every row of curve 'EUR'",
        ),
        (quotes(valuation_date=(0, "yesterday")), "curves row 1, column 'valuation_date': must be a date YYYY-MM-DD"),
        (
            quotes(fixed_frequency=(6, 3)),
            "curves row 7, column 'fixed_frequency': a swap's fixed payments a year: one of 1, 2, 4, 12",
        ),
        (quotes(fixed_frequency=(0, 1)), "curves row 1, column 'fixed_frequency': applies to swaps only"),
        (
            quotes(settlement_days=(1, 2.5)),
            "curves row 2, column 'settlement_days': must be a whole number from 0 to 30",
        ),
        (quotes(calendar=(1, "Mars")), "curves row 2, column 'calendar': calendar must be one of none, weekends, US"),
        (
            quotes(convention=(1, "unadjusted")),
            "curves row 2, column 'convention': must be one of following, modified_following, preceding",
        ),
        (quotes(day_count=(6, "ACT/ACT-ICMA")), "curves row 7, column 'day_count': a quote's day count must be one of"),
        (
            quotes(zero_rate=(3, 0.02)),
            "curves row 4, column 'zero_rate': a quote row (one with an instrument) takes no knot",
        ),
        (
            pd.concat([quotes(), pd.DataFrame(dict(curve=["EUR"], t=[1.0], zero_rate=[0.02]))], ignore_index=True),
            "curves row 1, column 'instrument': its curve has knot rows too: give it one way",
        ),
        (
            pd.concat(
                [quotes(), pd.DataFrame(dict(curve=["k"], t=[1.0], zero_rate=[0.02], tenor=["3M"]))], ignore_index=True
            ),
            "curves row 9, column 'tenor': a knot row (no instrument) takes no quote terms",
        ),
    ],
)
def test_each_quote_rule_names_row_column_and_rule(table, expected):
    found = problems(table)
    if expected is None:
        assert not found
    else:
        assert any(p.startswith(expected) for p in found), found


def test_a_quote_no_zero_rate_prices_to_par_is_named():
    table = quotes(rate=(4, -3.0))  # a 6-month deposit at -300 %: 1 + rate x 0.5 < 0
    found = [str(p) for p in curves_from_frame(table, allow_large_rates=True)[1]]
    assert found == [
        "curves row 5, column 'rate': no zero rate of curve 'EUR' prices this quote to par after the quotes ending "
        "before it (a rate out of line with its neighbours?)"
    ]


def test_a_curve_with_a_problem_is_left_out_and_load_curves_lists_every_problem():
    table = pd.concat([quotes(rate=(2, "n/a")), quotes_table("USD")], ignore_index=True)
    curves, found = curves_from_frame(table)
    assert "EUR" not in curves and "USD" in curves and len(found) == 1
    with pytest.raises(InvalidInputError, match="curves row 3, column 'rate'"):
        load_curves(table)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU and CuPy")
@pytest.mark.parametrize("curves", ["USD", "compounded"])
def test_the_gpu_engine_prices_on_these_curves_as_the_cpu_engine(curves):
    if curves == "USD":
        table = quotes_table("USD")
    else:
        table = pd.DataFrame(dict(curve="USD", date=KNOT_DATES[1:], zero_rate=RATES[1:], compounding="quarterly"))
    book = pd.DataFrame([BOND, dict(BOND, id="put", instrument="puttable_bond", strike=99.0)]).assign(curve="USD")
    cpu = distprice.price(book, table, as_of=V, engine="cpu")
    for engine in ("gpu-outer", "gpu-flat"):
        gpu = distprice.price(book, table, as_of=V, engine=engine)
        assert gpu["error"].isna().all()
        assert np.abs(gpu["price"] - cpu["price"]).max() < 1e-10

"""Swaptions (``swaption``): payer and receiver, european and bermudan, physically settled, on the Hull-White
tree as options on their fixed legs; against QuantLib's ``TreeSwaptionEngine`` where every day is a node, on a
flat and a sloped curve; the reference and CPU engines; the model table of ``calibrate hull-white``; risk
measures; bad input (docs/guide/swaptions.rst)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import distprice
from distprice import InvalidInputError
from distprice.cuda import gpu_available
from distprice.curves import load_curves
from distprice.job import valuation_day

ql = pytest.importorskip("QuantLib")
from distprice.lattice.quantlib_dated import price_swaptions_quantlib  # noqa: E402

AS_OF = "2025-12-15"
CURVES = pd.concat(
    [
        pd.DataFrame(
            {
                "curve": "sloped",
                "date": ["2026-03-16", "2026-12-15", "2028-12-15", "2031-06-16", "2040-01-15"],
                "zero_rate": [0.021, 0.026, 0.033, 0.038, 0.043],
                "day_count": "ACT/365F",
            }
        ),
        pd.DataFrame(
            {"curve": "flat", "date": ["2026-12-15", "2040-12-17"], "zero_rate": 0.03, "day_count": "ACT/365F"}
        ),
    ]
)
"""Both on ACT/365F: at 365 steps a year every day is a node of the tree, as on QuantLib's grid of the same steps."""


def swaption(ident: str, option_type: str, fixed_rate: float, **terms) -> dict:
    """A 1y into 2y swaption on the sloped curve: annual 30/360 fixed coupons rolled modified following on TARGET,
    european at the start; one step a day."""
    return dict(
        dict(
            id=ident,
            instrument="swaption",
            option_type=option_type,
            exercise="european",
            fixed_rate=fixed_rate,
            coupon_frequency=1,
            start_date="2026-12-15",
            maturity_date="2028-12-15",
            expiry_date="2026-12-15",
            day_count="30/360",
            calendar="TARGET",
            accrual_convention="modified_following",
            mean_reversion=0.15,
            volatility=0.01,
            steps_per_year=365,
            curve="sloped",
        ),
        **terms,
    )


BERMUDAN = dict(exercise="bermudan", expiry_date="2027-12-15")
"""Exercisable at the start and the first coupon date."""
SEMIANNUAL = dict(
    coupon_frequency=2,
    day_count="ACT/360",
    start_date="2026-06-15",
    maturity_date="2028-06-15",
    exercise="bermudan",
    expiry_date="2027-12-15",
    mean_reversion=0.3,
    volatility=0.008,
)
"""6m into 2y, semiannual ACT/360 fixed coupons, bermudan at every fixed start but the last."""
STARTED = dict(start_date="2025-06-16", maturity_date="2028-06-15", exercise="bermudan", expiry_date="2027-06-15")
"""A swap that started before the valuation date: exercisable at its coupon dates to come (a cancellable swap's
option)."""


@pytest.fixture(scope="module")
def book():
    """Payer and receiver, out of, at and in the money (the forward swap rates are near 3.2 % sloped, 3.0 %
    flat), on four exercise schedules and two curves; priced by the CPU engine."""
    rows = []
    for curve in ("sloped", "flat"):
        for shape, terms in (("eu", {}), ("berm", BERMUDAN), ("semi", SEMIANNUAL), ("started", STARTED)):
            for option_type in ("payer", "receiver"):
                for rate in (0.022, 0.031, 0.04):
                    ident = f"{curve}-{shape}-{option_type}-{rate}"
                    rows.append(swaption(ident, option_type, rate, curve=curve, **terms))
    portfolio = pd.DataFrame(rows)
    ours = distprice.price(portfolio, CURVES, engine="cpu", as_of=AS_OF)
    assert ours["error"].isna().all(), ours["error"].dropna().head().tolist()
    return portfolio, ours


def test_the_book_is_in_and_out_of_the_money(book):
    _, ours = book
    assert len(ours) == 48
    assert (ours["price"] < 0.2).sum() >= 8 and (ours["price"] > 1.0).sum() >= 16
    assert ours["accrued"].isna().all() and ours["clean_price"].isna().all()
    np.testing.assert_array_equal(ours["dirty_price"], ours["price"])  # settled at the valuation date


def equal_to_quantlib(portfolio: pd.DataFrame, ours: pd.DataFrame) -> None:
    theirs = price_swaptions_quantlib(portfolio, load_curves(CURVES), AS_OF, steps=ours["height"].tolist())
    np.testing.assert_allclose(ours["price"], theirs, rtol=1e-10, atol=1e-12)


def test_equal_to_quantlibs_tree_swaption_engine_on_a_daily_grid(book):
    """QuantLib's VanillaSwap (Euribor floating leg) and Swaption on TreeSwaptionEngine of the same steps, one
    a day: within 1e-10 relative (measured on the whole book: 2.1e-12 at most, 1.7e-13 the median). A fifth of
    the book, every kind of row; QuantLib takes a second or two a row."""
    portfolio, ours = book
    equal_to_quantlib(portfolio.iloc[::5], ours.iloc[::5])


@pytest.mark.slow
def test_the_whole_book_equal_to_quantlib(book):
    portfolio, ours = book
    equal_to_quantlib(portfolio, ours)


@pytest.mark.slow
def test_quantlibs_bermudan_example_5y_into_5y():
    """QuantLib's Bermudan swaption example: 5y into 5y, annual 30/360 fixed coupons on unadjusted TARGET dates (some
    on a weekend), exercisable at each fixed start;
    here on the flat curve, one step a day, its calibrated model (a = 0.07, sigma = 0.006), payer and
    receiver at the money. QuantLib takes about 50 s a row on this 3653-step tree (distprice 0.03 s)."""
    rows = [
        swaption(
            f"example-{option_type}",
            option_type,
            0.03,
            start_date="2030-12-16",
            maturity_date="2035-12-16",
            exercise="bermudan",
            expiry_date="2034-12-16",
            accrual_convention="unadjusted",
            curve="flat",
            mean_reversion=0.07,
            volatility=0.006,
        )
        for option_type in ("payer", "receiver")
    ]
    portfolio = pd.DataFrame(rows)
    ours = distprice.price(portfolio, CURVES, engine="cpu", as_of=AS_OF)
    equal_to_quantlib(portfolio, ours)
    assert ours["price"].min() > 1.0


def test_the_reference_engine_agrees(book):
    portfolio, ours = book
    some = portfolio.iloc[::6]
    reference = distprice.price(some, CURVES, engine="reference", as_of=AS_OF)
    np.testing.assert_allclose(reference["price"], ours["price"].iloc[::6], rtol=1e-12, atol=1e-13)


def test_a_receiver_is_a_call_on_the_fixed_leg_at_par_a_payer_the_put(book):
    """Swaptions on a swap that started before the valuation date, as dated bond options on the fixed leg's bond
    exercised at 100 dirty on the dates of an exercise schedule: the same prices."""
    portfolio, ours = book
    rows = portfolio[portfolio["id"].str.startswith("sloped-started")]
    bonds = rows.drop(columns=["fixed_rate", "start_date", "expiry_date"]).assign(
        instrument="bond_option",
        option_type=rows["option_type"].map({"payer": "put", "receiver": "call"}),
        coupon=rows["fixed_rate"],
        issue_date=rows["start_date"],
        payment_convention="modified_following",
    )
    lines = pd.DataFrame(
        [dict(id=i, date=d, price=100.0, price_type="dirty") for i in rows["id"] for d in ("2026-06-15", "2027-06-15")]
    )
    options = distprice.price(bonds, CURVES, engine="cpu", as_of=AS_OF, exercise_schedule=lines)
    assert options["error"].isna().all()
    swaptions = ours.set_index("id").loc[rows["id"]]
    np.testing.assert_allclose(options["price"], swaptions["price"], rtol=1e-14)
    np.testing.assert_allclose(options["bond_price"], swaptions["bond_price"], rtol=1e-14)


def test_parity_payer_less_receiver_is_the_forward_swap(book):
    """A european payer less the receiver of the same strike is the payer swap entered at the start: the
    notional at the start (a year after the valuation date) less the fixed leg's bond, on the tree's curve."""
    _, ours = book
    frame = ours.set_index("id")
    curves = load_curves(CURVES)
    for curve in ("sloped", "flat"):
        start = float(curves[curve].at(valuation_day(AS_OF)).discount(1.0))
        for rate in (0.022, 0.031, 0.04):
            payer, receiver = (frame.loc[f"{curve}-eu-{kind}-{rate}"] for kind in ("payer", "receiver"))
            swap = 100.0 * start - payer["bond_price"]
            assert payer["price"] - receiver["price"] == pytest.approx(swap, rel=1e-10, abs=1e-11)


def test_rows_take_a_and_sigma_from_the_model_table_of_calibrate_hull_white(book):
    """Rows naming a model take its mean reversion, volatility and curve from the table calibrate hull-white
    writes: the same prices as rows giving them."""
    portfolio, ours = book
    rows = portfolio.iloc[:12]
    models = pd.DataFrame(
        dict(
            model=["eur"],
            curve=["sloped"],
            mean_reversion=[0.15],
            volatility=[0.01],
            rmse=[1e-6],
            n_quotes=[8],
            n_evals=[20],
            status=["converged"],
        )
    )
    named = rows.drop(columns=["mean_reversion", "volatility", "curve"]).assign(model="eur")
    priced = distprice.price(named, CURVES, engine="cpu", as_of=AS_OF, models=models)
    np.testing.assert_array_equal(priced["price"], ours["price"].iloc[:12])


def test_calibrated_models_price_a_swaption_book():
    """The model table that calibrate_hull_white returns, passed as it is: its a and sigma price the book."""
    quotes = pd.DataFrame(
        dict(
            model="eur",
            curve="flat",
            expiry=[1.0, 1.0, 2.0, 2.0, 5.0],
            tenor=[1.0, 2.0, 1.0, 3.0, 5.0],
            fixed_frequency=1,
            volatility=[0.0085, 0.0088, 0.0090, 0.0091, 0.0089],
            volatility_type="normal",
        )
    )
    models = distprice.calibrate_hull_white(quotes, CURVES)
    assert (models["status"] == "converged").all(), models
    row = swaption("fit", "payer", 0.03)
    named = {k: v for k, v in row.items() if k not in ("mean_reversion", "volatility", "curve")}
    priced = distprice.price(pd.DataFrame([dict(named, model="eur")]), CURVES, as_of=AS_OF, models=models)
    given = dict(row, curve="flat", mean_reversion=models["mean_reversion"][0], volatility=models["volatility"][0])
    direct = distprice.price(pd.DataFrame([given]), CURVES, as_of=AS_OF)
    assert priced["price"][0] == direct["price"][0] > 0.1


def test_risk_measures_of_swaptions_equal_repricing(book):
    """dv01 and vega from the risk engine equal the swaptions priced anew under the bumped curve (all zero rates
    +-10 bp) and the bumped volatility (+-1 bp)."""
    portfolio, _ = book
    rows = portfolio[portfolio["curve"] == "sloped"].iloc[::4]
    measured = distprice.price(rows, CURVES, engine="cpu", as_of=AS_OF, measures="dv01,vega")
    assert measured["error"].isna().all()

    def priced(rows, curves):
        return distprice.price(rows, curves, engine="cpu", as_of=AS_OF)["price"].to_numpy()

    h = 1e-3
    down, up = (priced(rows, CURVES.assign(zero_rate=CURVES["zero_rate"] + s)) for s in (-h, h))
    np.testing.assert_allclose(measured["dv01"], (down - up) / 2 * (1e-4 / h), rtol=1e-9)
    lower, upper = (priced(rows.assign(volatility=rows["volatility"] + s), CURVES) for s in (-1e-4, 1e-4))
    np.testing.assert_allclose(measured["vega"], (upper - lower) / 2, rtol=1e-9)
    assert (measured["vega"] > 0).all()
    payer = rows["option_type"].eq("payer").to_numpy()
    assert (measured["dv01"][payer] < 0).all() and (measured["dv01"][~payer] > 0).all()


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU and CuPy")
@pytest.mark.parametrize("engine", ["gpu-flat", "gpu-outer"])
def test_gpu_engines_equal_the_cpu_engine(book, engine):
    portfolio, ours = book
    theirs = distprice.price(portfolio, CURVES, engine=engine, as_of=AS_OF)
    np.testing.assert_allclose(theirs["price"], ours["price"], rtol=1e-11, atol=1e-12)


# ---- bad input ----

GOOD = swaption("s", "payer", 0.03)


def problems_of(row: dict, lines: list[dict] | None = None):
    with pytest.raises(InvalidInputError) as info:
        distprice.price(
            pd.DataFrame([row]), CURVES, as_of=AS_OF, exercise_schedule=pd.DataFrame(lines) if lines else None
        )
    return [(p.column, p.rule) for p in info.value.problems]


def test_the_good_row_prices():
    assert distprice.price(pd.DataFrame([GOOD]), CURVES, as_of=AS_OF)["error"].isna().all()


@pytest.mark.parametrize(
    "row,column,rule",
    [
        (dict(GOOD, option_type=None), "option_type", "is required for a swaption: payer or receiver"),
        (dict(GOOD, option_type="call"), "option_type", "must be payer or receiver for a swaption"),
        (dict(GOOD, instrument="bond_option", fixed_rate=None), "option_type", "payer and receiver are a swaption's"),
        (dict(GOOD, fixed_rate=None), "fixed_rate", "is required"),
        (dict(GOOD, fixed_rate=-0.01), "fixed_rate", "must be > 0"),
        (dict(GOOD, fixed_rate=3.0), "fixed_rate", "3 looks like a percentage: write 0.03"),
        (dict(GOOD, fixed_rate="abc"), "fixed_rate", "must be a number"),
        (dict(GOOD, start_date=None), "start_date", "is required"),
        (dict(GOOD, start_date="2026-13-01"), "start_date", "must be a date"),
        (dict(GOOD, start_date="2029-01-01"), "start_date", "must be before maturity_date"),
        (dict(GOOD, coupon=0.03), "coupon", "must be empty for a swaption"),
        (dict(GOOD, strike=100.0), "strike", "must be empty for a swaption"),
        (dict(GOOD, issue_date="2026-12-15"), "issue_date", "must be empty for a swaption"),
        (dict(GOOD, settlement_days=2), "settlement_days", "must be empty for a swaption"),
        (dict(GOOD, payment_convention="following"), "payment_convention", "must be the accrual_convention"),
        (dict(GOOD, exercise="american"), "exercise", "must be european or bermudan for a swaption"),
        (dict(GOOD, expiry_date=None), "expiry_date", "is required"),
        (dict(GOOD, expiry_date="2027-01-15"), "expiry_date", "must be the start date of a fixed coupon period"),
        (dict(GOOD, expiry_date="2025-12-01"), "expiry_date", "must be the start date of a fixed coupon period"),
        (
            dict(GOOD, exercise="bermudan", start_date="2025-06-16", expiry_date="2026-06-01"),
            "exercise",
            "leaves no exercise date",
        ),
        (
            dict(GOOD, exercise="bermudan", first_exercise_date="2027-12-15", expiry_date="2027-06-15"),
            "first_exercise_date",
            "must be on or before expiry_date",
        ),
        (
            {k: v for k, v in GOOD.items() if k not in ("start_date", "maturity_date", "expiry_date")}
            | dict(maturity=3.0, expiry=1.0),
            "instrument",
            "a swaption is a dated row",
        ),
    ],
)
def test_bad_rows_name_their_column_and_rule(row, column, rule):
    found = problems_of(row)
    assert any(c == column and rule in r for c, r in found), found


def test_start_date_and_fixed_rate_are_for_swaptions_only():
    bond = dict(GOOD, instrument="bond_option", option_type="call", strike=100.0, coupon=0.03, issue_date="2026-12-15")
    found = problems_of(bond)
    assert ("start_date", "is for swaption rows") in found and ("fixed_rate", "is for swaption rows") in found


def test_a_swaption_takes_no_dates_from_the_exercise_schedule():
    found = problems_of(GOOD, [dict(id="s", date="2026-12-15", price=100.0)])
    assert any(c == "exercise" and "the exercise schedule table gives dates to a swaption" in r for c, r in found)


@pytest.mark.parametrize("table", ["coupon_schedule", "principal_schedule"])
def test_a_swaption_takes_no_coupon_or_principal_schedule(table):
    value = {"coupon_schedule": {"coupon": 0.04}, "principal_schedule": {"repaid": 10.0}}[table]
    lines = pd.DataFrame([dict(id="s", date="2027-12-15", **value)])
    with pytest.raises(InvalidInputError) as info:
        distprice.price(pd.DataFrame([GOOD]), CURVES, as_of=AS_OF, **{table: lines})
    found = [(p.column, p.rule) for p in info.value.problems]
    assert (
        "instrument",
        f"the {table.replace('_', ' ')} has dates for this row: a swaption takes none (its fixed "
        "leg is its fixed_rate on face)",
    ) in found


def test_the_problem_names_its_row():
    with pytest.raises(InvalidInputError) as info:
        distprice.price(pd.DataFrame([GOOD, dict(GOOD, id="bad", fixed_rate=None)]), CURVES, as_of=AS_OF)
    (problem,) = info.value.problems
    assert problem.where == "row 2 (id 'bad')" and problem.column == "fixed_rate"

"""Every rule of the portfolio table and its curves (docs/guide/bonds.rst, docs/guide/errors.rst): the
problem names row, id, column and rule; strict raises, report flags."""

import numpy as np
import pandas as pd
import pytest

import distprice
from distprice import InvalidInputError, Limits

from utils import HULL_PUT

GOOD = dict(HULL_PUT, id="good")


@pytest.mark.parametrize(
    "change,column,rule",
    [
        (dict(id=None), "id", "is required"),
        (dict(instrument="swap"), "instrument", "must be one of"),
        (dict(option_type=None), "option_type", "is required for a bond_option"),
        (dict(option_type="straddle"), "option_type", "must be one of"),
        (dict(instrument="callable_bond", option_type="put"), "option_type", "implies option_type call"),
        (dict(instrument="puttable_bond", option_type="call"), "option_type", "implies option_type put"),
        (dict(exercise="asian"), "exercise", "must be one of"),
        (dict(strike=None), "strike", "is required"),
        (dict(strike=-1.0), "strike", "must be >= 0"),
        (dict(strike="abc"), "strike", "must be a number"),
        (dict(strike=np.inf), "strike", "must be finite"),
        (dict(expiry=0.0), "expiry", "must be > 0"),
        (dict(expiry=10.0), "expiry", "must be <= maturity"),
        (dict(first_exercise=-1.0), "first_exercise", "must be >= 0"),
        (dict(exercise="bermudan", first_exercise=4.0), "first_exercise", "must be <= expiry"),
        (dict(exercise_frequency=0), "exercise_frequency", "must be >= 1"),
        (dict(exercise_frequency=1.5), "exercise_frequency", "must be a whole number"),
        (dict(maturity=None), "maturity", "is required"),
        (dict(maturity=-2.0), "maturity", "must be > 0"),
        (dict(coupon=-0.01), "coupon", "must be >= 0"),
        (dict(coupon=0.05, coupon_frequency=0), "coupon_frequency", "must be >= 1 when coupon > 0"),
        (dict(coupon_frequency=-1), "coupon_frequency", "must be >= 0"),
        (dict(face=0.0), "face", "must be > 0"),
        (dict(mean_reversion=0.0), "mean_reversion", "must be > 0"),
        (dict(mean_reversion=None), "mean_reversion", "is required"),
        (dict(volatility=-0.01), "volatility", "must be > 0"),
        (dict(steps_per_year=0), "steps_per_year", "must be >= 1"),
        (
            dict(curve="gbp"),
            "curve",
            "names the curve 'gbp', which is not in the curves input: no curves were given "
            "(--curves, or curves=); the built-in curve is 'hull'",
        ),
        (dict(quantity="many"), "quantity", "must be a number"),
        # a low mean reversion: a tree never cut, as wide as its 18000 steps allow
        (dict(mean_reversion=1e-5, steps_per_year=2000), "mean_reversion", "gives a tree wider than 32769 nodes"),
        (dict(mean_reversion=1e-300, steps_per_year=2000), "mean_reversion", "gives a tree wider than 32769 nodes"),
        (dict(maturity=100.0, steps_per_year=2500), "maturity", "gives a tree taller than 200000 steps"),
    ],
)
def test_each_rule_names_row_column_and_rule(change, column, rule):
    bad = dict(GOOD, id="bad", **{k: v for k, v in change.items() if k != "id"})
    if "id" in change:
        bad["id"] = change["id"]
    portfolio = pd.DataFrame([GOOD, bad, dict(GOOD, id="also-good")])
    with pytest.raises(InvalidInputError) as info:
        distprice.price(portfolio)
    problems = info.value.problems
    assert all(p.position == 1 for p in problems), problems
    assert any(p.column == column and rule in p.rule for p in problems), problems
    label = "row 2 (id missing)" if change.get("id", "bad") is None else "row 2 (id 'bad')"
    assert label in str(info.value) and column in str(info.value)

    report = distprice.price(portfolio, on_invalid="report")
    assert list(report["id"].fillna("?")) == ["good", "?" if change.get("id", 1) is None else "bad", "also-good"]
    assert np.isnan(report.loc[1, "price"]) and rule in report.loc[1, "error"]
    assert report["error"].isna()[[0, 2]].all()
    assert np.isfinite(report.loc[[0, 2], "price"]).all()


def test_duplicate_ids_flag_every_copy():
    portfolio = pd.DataFrame([GOOD, dict(GOOD, id="x"), GOOD])
    with pytest.raises(InvalidInputError) as info:
        distprice.price(portfolio)
    assert sorted(p.position for p in info.value.problems if p.column == "id") == [0, 2]


def test_missing_required_column():
    with pytest.raises(InvalidInputError, match="column 'strike': is required"):
        distprice.price(pd.DataFrame([GOOD]).drop(columns="strike"))


def test_defaults_and_implied_option_type():
    minimal = {k: GOOD[k] for k in ("id", "strike", "expiry", "maturity", "mean_reversion", "volatility")}
    book = pd.DataFrame(
        [
            dict(minimal, option_type="put", curve="hull"),
            dict(minimal, id="cb", instrument="callable_bond", curve="hull"),
            dict(minimal, id="pb", instrument="PUTTABLE_BOND ", curve="hull"),
        ]
    )
    priced = distprice.price(book)
    assert priced.loc[0, "height"] == 9 * 12  # steps_per_year defaults to 12
    np.testing.assert_allclose(priced.loc[1, "price"], priced.loc[1, "bond_price"] - priced.loc[1, "option_price"])
    np.testing.assert_allclose(priced.loc[2, "price"], priced.loc[2, "bond_price"] + priced.loc[2, "option_price"])
    assert priced.loc[1, "option_price"] > priced.loc[2, "option_price"] * 0  # priced, not skipped


def test_default_curve_needs_a_curves_input():
    book = pd.DataFrame([{k: v for k, v in GOOD.items() if k != "curve"}])
    with pytest.raises(
        InvalidInputError,
        match="curve.*names no curve, and the curves input has no curve 'default': no curves were given",
    ):
        distprice.price(book)
    other = pd.DataFrame(dict(curve=["usd"], t=[1.0], zero_rate=[0.03]))
    with pytest.raises(InvalidInputError, match=r"has no curve 'default' \(hull, usd\)"):
        distprice.price(book, other)
    curves = pd.DataFrame(dict(curve=["default"], t=[1.0], zero_rate=[0.03]))
    flat = distprice.price(book, curves)
    assert flat.loc[0, "bond_price"] == pytest.approx(100 * np.exp(-0.03 * 9), rel=1e-13)


@pytest.mark.parametrize(
    "curves,column,rule",
    [
        (dict(curve=["c", "c"], t=[1.0, 1.0], zero_rate=[0.01, 0.02]), "t", "strictly increasing"),
        (dict(curve=["c", "c"], t=[-1.0, 1.0], zero_rate=[0.01, 0.02]), "t", "must be >= 0"),
        (dict(curve=["c", None], t=[1.0, 2.0], zero_rate=[0.01, 0.02]), "curve", "curve id is required"),
        (dict(curve=["c"], t=[1.0], zero_rate=["x"]), "zero_rate", "must be a finite number"),
        (dict(curve=["c"], t=[1.0]), "zero_rate", "must have this column"),
    ],
)
def test_curve_rules(curves, column, rule):
    with pytest.raises(InvalidInputError) as info:
        distprice.price(pd.DataFrame([GOOD]), pd.DataFrame(curves))
    assert any(p.column == column and rule in p.rule for p in info.value.problems), info.value.problems


def test_limits_are_configurable():
    with pytest.raises(InvalidInputError, match="wider than 101 nodes"):
        distprice.price(pd.DataFrame([dict(GOOD, steps_per_year=52)]), limits=Limits(max_width=101))


def test_extra_columns_and_index_are_kept():
    book = pd.DataFrame(
        [dict(GOOD, desk="rates", book_id=7), dict(GOOD, id="b", desk="alm", book_id=8)], index=[10, 20]
    )
    priced = distprice.price(book)
    assert list(priced.index) == [10, 20] and list(priced["desk"]) == ["rates", "alm"]
    assert list(priced.columns[: len(book.columns)]) == list(book.columns)


def test_unknown_engine_and_precision():
    with pytest.raises(ValueError, match="unknown engine"):
        distprice.price(pd.DataFrame([GOOD]), engine="abacus")
    with pytest.raises(ValueError, match="precision"):
        distprice.price(pd.DataFrame([GOOD]), precision="fp16")
    with pytest.raises(ValueError, match="reference engine computes in fp64"):
        distprice.price(pd.DataFrame([GOOD]), engine="reference", precision="fp32")


# ---- column names: a misspelling is an error, an unknown column passes through, said once ----


def test_a_misspelled_column_is_an_error_naming_the_column_it_misspells(caplog):
    from distprice.lattice.desk import AS_OF, desk

    book = desk(4, seed=1)
    options = dict(curves=book.curves, exercise_schedule=book.exercise_schedule, as_of=AS_OF)
    slipped = book.portfolio.rename(columns={"day_count": "daycount"}).assign(settlement_day=1)
    with pytest.raises(InvalidInputError) as error:
        distprice.price(slipped, **options)
    said = str(error.value)
    assert "'daycount'" in said and "did you mean 'day_count'?" in said
    assert "'settlement_day'" in said and "did you mean 'settlement_days'?" in said
    for meant, wrong in (
        ("calendar", "calender"),
        ("coupon", " coupon"),
        ("quantity", "Quantity"),
        ("steps_per_year", "steps-per-year"),
    ):
        with pytest.raises(InvalidInputError, match=f"did you mean '{meant}'"):
            distprice.price(book.portfolio.rename(columns={meant: wrong}), **options)
    # a column like none distprice reads passes through to the priced table, and the log lists it once
    with caplog.at_level("INFO", logger="distprice.tables"):
        for _ in range(2):
            priced = distprice.price(book.portfolio.assign(desk_note="x"), **options)
    assert (priced["desk_note"] == "x").all()
    assert caplog.text.count("columns distprice does not read, passed through: currency, desk_note") == 1


def test_misspelled_columns_of_the_other_tables_are_errors(tmp_path):
    from click.testing import CliRunner

    from distprice.cli import main

    book = pd.DataFrame([dict(HULL_PUT, id="a", curve="usd")])
    curves = pd.DataFrame({"curve": ["usd", "usd"], "t": [1.0, 10.0], "zero_rate": [0.03, 0.04]})
    with pytest.raises(InvalidInputError, match="curves input.*'zero-rate'.*did you mean 'zero_rate'"):
        distprice.price(book, curves.rename(columns={"zero_rate": "zero-rate"}))
    scenarios = curves.assign(scenario="up")
    with pytest.raises(InvalidInputError, match="scenarios input.*'Scenario'.*did you mean 'scenario'"):
        distprice.price(book, curves, scenarios=scenarios.rename(columns={"scenario": "Scenario"}))
    models = pd.DataFrame({"model": ["m"], "mean_reversion": [0.1], "volatility": [0.01]})
    with pytest.raises(InvalidInputError, match="model table.*'volatilty'.*did you mean 'volatility'"):
        distprice.price(book.assign(model="m"), curves, models=models.rename(columns={"volatility": "volatilty"}))
    from distprice.montecarlo import datasets as paths

    tables = paths.large(1024)
    tables["mc_spots"] = tables["mc_spots"].rename(columns={"spot": "Spot"})
    with pytest.raises(InvalidInputError, match="mc_spots.*'Spot'.*did you mean 'spot'"):
        distprice.price_mc(tables)
    quotes = pd.DataFrame(
        {"maturity": ["2027-01-04"], "strike": [1.0], "implied-vol": [0.2], "valuation_date": ["2026-01-02"]}
    )
    with pytest.raises(InvalidInputError, match="heston_quotes.*'implied-vol'.*did you mean 'implied_vol'"):
        distprice.calibrate_heston(quotes, max_evals=40, population=40, engine="cpu")
    # on the command line: exit 2, the table, the column and the one it misspells
    book.rename(columns={"strike": "strikes"}).to_csv(tmp_path / "book.csv", index=False)
    curves.to_csv(tmp_path / "curves.csv", index=False)
    args = ["run", "--portfolio", str(tmp_path / "book.csv"), "--curves", str(tmp_path / "curves.csv")]
    result = CliRunner().invoke(main, [*args, "--output", str(tmp_path / "o.csv")])
    assert result.exit_code == 2 and "'strikes'" in result.output and "did you mean 'strike'?" in result.output
    assert not (tmp_path / "o.csv").exists()


def twice(table: pd.DataFrame, column: str) -> pd.DataFrame:
    """``table`` with a second column named ``column``."""
    return pd.concat([table, table[[column]]], axis=1)


def test_a_name_given_to_two_columns_is_an_error_naming_the_table_and_the_column(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from click.testing import CliRunner

    from distprice.cli import main
    from distprice.families import lattice
    from distprice.job import JobOptions
    from distprice.lattice.desk import AS_OF, desk
    from distprice.montecarlo import datasets as paths

    rule = "is the name of 2 columns: keep one, or rename the others"
    book = pd.DataFrame([dict(HULL_PUT, id="a", curve="usd")])
    noted = book.assign(desk_note="x")  # a column passed through: twice, it could not be written
    curves = pd.DataFrame({"curve": ["usd", "usd"], "t": [1.0, 10.0], "zero_rate": [0.03, 0.04]})
    for table, call in (
        ("portfolio", lambda: distprice.price(twice(book, "strike"), curves)),
        ("portfolio", lambda: distprice.price(twice(noted, "desk_note"), curves)),
        ("curves input", lambda: distprice.price(book, twice(curves, "zero_rate"))),
        ("scenarios input", lambda: distprice.price(book, curves, scenarios=twice(curves.assign(scenario="up"), "t"))),
    ):
        with pytest.raises(InvalidInputError) as caught:
            call()
        column = str(caught.value.problems[0].column)
        assert [str(p) for p in caught.value.problems] == [f"{table}, column '{column}': {rule}"]
    models = pd.DataFrame({"model": ["m"], "mean_reversion": [0.1], "volatility": [0.01]})
    with pytest.raises(InvalidInputError, match=f"model table, column 'volatility': {rule}"):
        distprice.price(book.assign(model="m"), curves, models=twice(models, "volatility"))
    dated = desk(2, seed=1)
    with pytest.raises(InvalidInputError, match=f"exercise schedule, column 'price': {rule}"):
        distprice.price(
            dated.portfolio, dated.curves, exercise_schedule=twice(dated.exercise_schedule, "price"), as_of=AS_OF
        )
    tables = paths.large(1024)
    tables["mc_spots"] = twice(tables["mc_spots"], "spot")
    with pytest.raises(InvalidInputError, match=f"mc_spots, column 'spot': {rule}"):
        distprice.price_mc(tables)
    quotes = pd.DataFrame(
        {"maturity": ["2027-01-04"], "strike": [1.0], "implied_vol": [0.2], "valuation_date": ["2026-01-02"]}
    )
    with pytest.raises(InvalidInputError, match=f"heston_quotes, column 'strike': {rule}"):
        distprice.calibrate_heston(twice(quotes, "strike"), max_evals=40, population=40, engine="cpu")
    # a CSV file on the command line: exit 2, no traceback
    twice(book, "strike").to_csv(tmp_path / "book.csv", index=False)
    curves.to_csv(tmp_path / "curves.csv", index=False)
    args = ["run", "--portfolio", str(tmp_path / "book.csv"), "--curves", str(tmp_path / "curves.csv")]
    result = CliRunner().invoke(main, [*args, "--output", str(tmp_path / "o.csv")])
    assert result.exit_code == 2 and f"portfolio, column 'strike': {rule}" in result.output, result.output
    assert "Traceback" not in result.output and not (tmp_path / "o.csv").exists()
    # a Parquet file (pyarrow would refuse to read it in words of its own), also one the workers would read
    arrow = pa.Table.from_pandas(book, preserve_index=False)
    pq.write_table(arrow.append_column("strike", arrow.column("strike")), tmp_path / "book.parquet")
    with pytest.raises(InvalidInputError, match=f"book.parquet, column 'strike': {rule}"):
        distprice.price(str(tmp_path / "book.parquet"), curves)
    with pytest.raises(InvalidInputError, match=f"portfolio, column 'strike': {rule}"):
        lattice.read(str(tmp_path / "book.parquet"), JobOptions.of(curves=curves).checked(), read_on_workers_rows=1)


def test_a_position_by_notional_is_valued_per_face_and_never_beside_a_quantity():
    rows = pd.DataFrame(
        [
            dict(HULL_PUT, id="by-quantity", quantity=3.0),
            dict(HULL_PUT, id="by-notional", face=100.0, notional=5_000_000.0),
            dict(HULL_PUT, id="short", face=1000.0, notional=-2_000.0),
            dict(HULL_PUT, id="both", quantity=2.0, notional=1_000.0),
        ]
    )
    with pytest.raises(InvalidInputError, match=r"row 4 \(id 'both'\), column 'notional': give quantity or notional"):
        distprice.price(rows)
    priced = distprice.price(rows, on_invalid="report").set_index("id")
    assert priced.loc["by-quantity", "value"] == 3.0 * priced.loc["by-quantity", "price"]
    assert priced.loc["by-notional", "value"] == pytest.approx(priced.loc["by-notional", "price"] / 100 * 5e6)
    assert priced.loc["short", "value"] == pytest.approx(priced.loc["short", "price"] / 1000 * -2_000.0)
    assert np.isnan(priced.loc["both", "value"]) and "not both" in priced.loc["both", "error"]

"""Any value in any cell of a job's tables: each row is priced or names its problem, a table's problem stops the
job with an InvalidInputError; no other exception reaches the user, no row is lost or repeated.

The values are what spreadsheets and careless exports hold: text where numbers belong, numbers where dates
belong, true/false, infinities, the largest and smallest doubles, dates that do not exist, empty cells.
"""
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import distprice
from distprice.lattice.desk import desk

from utils import random_portfolio

VALUES = [None, "", " ", "abc", "-1", "0", "nan", "inf", "2031-02-30", "2030-13-01", " 2030-01-01 ", "20300101",
          "TRUE", 1e308, -1e308, 1e-300, -5, 0, 3.5, 20300101, True, False, float("inf"), float("nan"), "american",
          "bermudan", "call", "put", "bond", "callable_bond", "USD", "hull", "2026-11-20", "1900-01-01",
          "9999-12-31", "ACT/360", "US", "following", 12, 52, 100000, "é" * 3]

BOOK = desk(12, seed=3)
TIMED = random_portfolio(np.random.default_rng(11), 12, max_steps_per_year=12)
MODELS = pd.DataFrame({"model": ["m1", "m2"], "mean_reversion": [0.1, 0.05], "volatility": [0.01, 0.012]})
SCENARIOS = pd.DataFrame({"scenario": ["s1", "s1", "s2"], "curve": "hull", "t": [0.0, 10.0, 0.0],
                          "zero_rate": [0.03, 0.04, 0.05]})


def _edit(frame: pd.DataFrame, edits) -> pd.DataFrame:
    frame = frame.copy()
    for row, column, value in edits:
        name = frame.columns[column % len(frame.columns)]
        frame[name] = frame[name].astype(object)
        frame.iat[row % len(frame), frame.columns.get_loc(name)] = value
    return frame


EDITS = st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), st.sampled_from(VALUES)), min_size=1,
                 max_size=3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=st.sampled_from(["portfolio", "curves", "exercise schedule"]), edits=EDITS,
       measures=st.sampled_from([None, "dv01,krd,vega,oas"]))
def test_any_value_anywhere_is_priced_or_named(table, edits, measures):
    portfolio, curves, schedule = BOOK.portfolio.copy(), BOOK.curves, BOOK.exercise_schedule
    portfolio["market_price"] = np.where(np.arange(len(portfolio)) % 3 == 0, 99.0, np.nan)
    if table == "portfolio":
        portfolio = _edit(portfolio, edits)
    elif table == "curves":
        curves = _edit(curves, edits)
    else:
        schedule = _edit(schedule, edits)
    try:
        priced = distprice.price(portfolio, curves, exercise_schedule=schedule, engine="cpu", on_invalid="report",
                                 measures=measures)
    except distprice.InvalidInputError as error:
        assert error.problems and all(str(p) for p in error.problems)
        return
    assert len(priced) == len(portfolio)
    assert priced["id"].astype(object).tolist() == portfolio["id"].astype(object).tolist()
    flagged = priced["error"].notna().to_numpy()
    assert np.isfinite(priced["price"].to_numpy()[~flagged]).all()  # a row without a price names why
    assert all(isinstance(e, str) and e for e in priced["error"][flagged])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=st.sampled_from(["portfolio", "models", "scenarios"]), edits=EDITS)
def test_any_value_in_a_book_in_years_is_priced_or_named(table, edits):
    """Rows in years, half of them naming a model of a model table, priced under scenarios."""
    portfolio, models, scenarios = TIMED.copy(), MODELS, SCENARIOS
    named = np.arange(len(portfolio)) % 2 == 0
    portfolio["model"] = np.where(named, np.where(np.arange(len(portfolio)) % 4 == 0, "m1", "m2"), None)
    for column in ("mean_reversion", "volatility"):
        portfolio[column] = portfolio[column].where(~named)
    if table == "portfolio":
        portfolio = _edit(portfolio, edits)
    elif table == "models":
        models = _edit(models, edits)
    else:
        scenarios = _edit(scenarios, edits)
    try:
        priced = distprice.price(portfolio, models=models, scenarios=scenarios, engine="cpu", on_invalid="report")
    except distprice.InvalidInputError as error:
        assert error.problems and all(str(p) for p in error.problems)
        return
    sets = priced["scenario"].nunique()
    assert len(priced) == len(portfolio) * sets and sets >= 2  # the base and the table's scenarios
    for _, rows in priced.groupby("scenario", sort=False):
        assert rows["id"].astype(object).tolist() == portfolio["id"].astype(object).tolist()
    flagged = priced["error"].notna().to_numpy()
    assert np.isfinite(priced["price"].to_numpy()[~flagged]).all()


@pytest.mark.parametrize("column", ["mean_reversion", "volatility", "steps_per_year", "maturity_date", "coupon"])
def test_a_whole_column_of_nonsense_names_every_row(column):
    """A column of text where numbers or dates belong: every row names it, none is priced."""
    portfolio = BOOK.portfolio.assign(**{column: "abc"})
    priced = distprice.price(portfolio, BOOK.curves, exercise_schedule=BOOK.exercise_schedule, engine="cpu",
                             on_invalid="report")
    assert len(priced) == len(portfolio) and priced["price"].isna().all()
    assert priced["error"].str.contains(f"column '{column}'").all()

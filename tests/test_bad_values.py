"""Any value in any cell of a job's tables: each row is priced or names its problem, a table's problem stops the
job with an InvalidInputError; no other exception reaches the user, no row is lost or repeated.

The values are what spreadsheets and careless exports hold: text where numbers belong, numbers where dates
belong, true/false, infinities, the largest and smallest doubles, dates that do not exist, empty cells.
"""

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import distprice
from distprice.lattice.desk import desk

from utils import random_portfolio

VALUES = [
    None,
    "",
    " ",
    "abc",
    "-1",
    "0",
    "nan",
    "inf",
    "2031-02-30",
    "2030-13-01",
    " 2030-01-01 ",
    "20300101",
    "TRUE",
    1e308,
    -1e308,
    1e-300,
    -5,
    0,
    3.5,
    20300101,
    True,
    False,
    float("inf"),
    float("nan"),
    "american",
    "bermudan",
    "call",
    "put",
    "bond",
    "callable_bond",
    "USD",
    "hull",
    "2026-11-20",
    "1900-01-01",
    "9999-12-31",
    "ACT/360",
    "US",
    "following",
    12,
    52,
    100000,
    "é" * 3,
]

BOOK = desk(12, seed=3)
TIMED = random_portfolio(np.random.default_rng(11), 12, max_steps_per_year=12)
MODELS = pd.DataFrame({"model": ["m1", "m2"], "mean_reversion": [0.1, 0.05], "volatility": [0.01, 0.012]})
SCENARIOS = pd.DataFrame(
    {"scenario": ["s1", "s1", "s2"], "curve": "hull", "t": [0.0, 10.0, 0.0], "zero_rate": [0.03, 0.04, 0.05]}
)


def _edit(frame: pd.DataFrame, edits) -> pd.DataFrame:
    frame = frame.copy()
    for row, column, value in edits:
        name = frame.columns[column % len(frame.columns)]
        frame[name] = frame[name].astype(object)
        frame.iat[row % len(frame), frame.columns.get_loc(name)] = value
    return frame


EDITS = st.lists(
    st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), st.sampled_from(VALUES)), min_size=1, max_size=3
)


def _priced_or_named(tables: dict, edited: str, edits, **keywords):
    """Prices ``tables`` (keywords of distprice.price, ``portfolio`` first) with ``edits`` made to table ``edited``:
    the job stops naming its problems, or each scenario holds every row, in order, priced or naming why not.
    Returns the priced table, or None when the job stopped."""
    tables = {name: _edit(table, edits) if name == edited else table for name, table in tables.items()}
    portfolio = tables["portfolio"]
    try:
        priced = distprice.price(**tables, engine="cpu", on_invalid="report", **keywords)
    except distprice.InvalidInputError as error:
        assert error.problems and all(str(p) for p in error.problems)
        return None
    ids = portfolio["id"].astype(object).tolist()
    runs = [rows for _, rows in priced.groupby("scenario", sort=False)] if "scenario" in priced else [priced]
    assert len(priced) == len(portfolio) * len(runs)
    assert all(rows["id"].astype(object).tolist() == ids for rows in runs)
    flagged = priced["error"].notna().to_numpy()
    assert np.isfinite(priced["price"].to_numpy()[~flagged]).all()  # a row without a price names why
    assert all(isinstance(e, str) and e for e in priced["error"][flagged])
    return priced


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    table=st.sampled_from(["portfolio", "curves", "exercise_schedule"]),
    edits=EDITS,
    measures=st.sampled_from([None, "dv01,krd,vega,oas"]),
)
def test_any_value_anywhere_is_priced_or_named(table, edits, measures):
    portfolio = BOOK.portfolio.assign(market_price=np.where(np.arange(len(BOOK.portfolio)) % 3 == 0, 99.0, np.nan))
    _priced_or_named(
        dict(portfolio=portfolio, curves=BOOK.curves, exercise_schedule=BOOK.exercise_schedule),
        table,
        edits,
        measures=measures,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=st.sampled_from(["portfolio", "models", "scenarios"]), edits=EDITS)
def test_any_value_in_a_book_in_years_is_priced_or_named(table, edits):
    """Rows in years, half of them naming a model of a model table, priced under scenarios."""
    portfolio = TIMED.copy()
    named = np.arange(len(portfolio)) % 2 == 0
    portfolio["model"] = np.where(named, np.where(np.arange(len(portfolio)) % 4 == 0, "m1", "m2"), None)
    for column in ("mean_reversion", "volatility"):
        portfolio[column] = portfolio[column].where(~named)
    priced = _priced_or_named(dict(portfolio=portfolio, models=MODELS, scenarios=SCENARIOS), table, edits)
    assert priced is None or priced["scenario"].nunique() >= 2  # the base and the table's scenarios


@pytest.mark.parametrize("column", ["mean_reversion", "volatility", "steps_per_year", "maturity_date", "coupon"])
def test_a_whole_column_of_nonsense_names_every_row(column):
    """A column of text where numbers or dates belong: every row names it, none is priced."""
    portfolio = BOOK.portfolio.assign(**{column: "abc"})
    priced = distprice.price(
        portfolio, BOOK.curves, exercise_schedule=BOOK.exercise_schedule, engine="cpu", on_invalid="report"
    )
    assert len(priced) == len(portfolio) and priced["price"].isna().all()
    assert priced["error"].str.contains(f"column '{column}'").all()

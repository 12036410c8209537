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
QUOTED = BOOK.portfolio.assign(market_price=np.where(np.arange(len(BOOK.portfolio)) % 3 == 0, 99.0, np.nan))
"""The desk's rows, a third with a market price (so that the OAS reads it)."""
TIMED = random_portfolio(np.random.default_rng(11), 12, max_steps_per_year=12)
MODELS = pd.DataFrame({"model": ["m1", "m2"], "mean_reversion": [0.1, 0.05], "volatility": [0.01, 0.012]})
SCENARIOS = pd.DataFrame(
    {"scenario": ["s1", "s1", "s2"], "curve": "hull", "t": [0.0, 10.0, 0.0], "zero_rate": [0.03, 0.04, 0.05]}
)
MEASURES = "dv01,krd,vega,oas"


def _in_years_with_models() -> pd.DataFrame:
    """TIMED with half its rows naming a model of MODELS instead of their own mean reversion and volatility."""
    portfolio = TIMED.copy()
    named = np.arange(len(portfolio)) % 2 == 0
    portfolio["model"] = np.where(named, np.where(np.arange(len(portfolio)) % 4 == 0, "m1", "m2"), None)
    for column in ("mean_reversion", "volatility"):
        portfolio[column] = portfolio[column].where(~named)
    return portfolio


def _edit(frame: pd.DataFrame, edits) -> pd.DataFrame:
    frame = frame.copy()
    for row, column, value in edits:
        name = frame.columns[column % len(frame.columns)]
        frame[name] = frame[name].astype(object)
        frame.iat[row % len(frame), frame.columns.get_loc(name)] = value
    return frame


def _every_cell(portfolio: pd.DataFrame, schedule: pd.DataFrame | None = None):
    """One row for each column but ``id`` and each of VALUES: a copy of one of ``portfolio``'s rows (in turn)
    with that value in that column, under an id of its own; ``schedule``'s rows copied to the new ids."""
    columns = portfolio.columns.drop("id")
    cells = [(column, v, value) for column in columns for v, value in enumerate(VALUES)]
    sources = np.arange(len(cells)) % len(portfolio)
    frame = portfolio.iloc[sources].astype(object).reset_index(drop=True)
    for k, (column, _, value) in enumerate(cells):
        frame.iat[k, frame.columns.get_loc(column)] = value
    frame["id"] = [f"{source}/{column}/{v}" for source, (column, v, _) in zip(frame["id"], cells)]
    if schedule is None:
        return frame, None
    copies = pd.DataFrame({"id": portfolio["id"].to_numpy()[sources], "copy": frame["id"]})
    copied = schedule.merge(copies, on="id").drop(columns="id").rename(columns={"copy": "id"})
    return frame, copied[schedule.columns]


def _each_row_priced_or_named(priced: pd.DataFrame, portfolio: pd.DataFrame) -> None:
    """Each scenario of ``priced`` holds every row of ``portfolio``, in order, priced or naming why not."""
    ids = portfolio["id"].astype(object).tolist()
    runs = [rows for _, rows in priced.groupby("scenario", sort=False)] if "scenario" in priced else [priced]
    assert len(priced) == len(portfolio) * len(runs)
    assert all(rows["id"].astype(object).tolist() == ids for rows in runs)
    flagged = priced["error"].notna().to_numpy()
    assert np.isfinite(priced["price"].to_numpy()[~flagged]).all()  # a row without a price names why
    assert all(isinstance(e, str) and e for e in priced["error"][flagged])


def test_every_value_in_every_column_of_a_dated_book_is_priced_or_named():
    """Each value in each column of the desk's rows, one cell a row, in one job with every measure: no cell
    stops the job (a row's problem is that row's), and each row is priced or names why."""
    portfolio, schedule = _every_cell(QUOTED, BOOK.exercise_schedule)
    priced = distprice.price(
        portfolio, BOOK.curves, exercise_schedule=schedule, engine="cpu", on_invalid="report", measures=MEASURES
    )
    _each_row_priced_or_named(priced, portfolio)
    assert priced["error"].isna().sum() > 100 and priced["error"].notna().sum() > 500


def test_every_value_in_every_column_of_a_book_in_years_is_priced_or_named():
    """The same for rows in years, half of them naming a model of a model table, priced under scenarios."""
    portfolio, _ = _every_cell(_in_years_with_models())
    priced = distprice.price(portfolio, models=MODELS, scenarios=SCENARIOS, engine="cpu", on_invalid="report")
    _each_row_priced_or_named(priced, portfolio)
    assert priced["scenario"].nunique() == 3  # the base and the table's two
    assert priced["error"].isna().sum() > 100 and priced["error"].notna().sum() > 500


EDITS = st.lists(st.tuples(st.integers(0, 100), st.integers(0, 100), st.sampled_from(VALUES)), min_size=1, max_size=4)
"""A few cells of a table (row and column taken modulo its size) and the values put there."""


def _priced_or_named(tables: dict, edited: str, edits, **keywords):
    """Prices ``tables`` (keywords of distprice.price, ``portfolio`` first) with ``edits`` made to table ``edited``:
    the job stops naming its problems, or each scenario holds every row, in order, priced or naming why not.
    Returns the priced table, or None when the job stopped."""
    tables = {name: _edit(table, edits) if name == edited else table for name, table in tables.items()}
    try:
        priced = distprice.price(**tables, engine="cpu", on_invalid="report", **keywords)
    except distprice.InvalidInputError as error:
        assert error.problems and all(str(p) for p in error.problems)
        return None
    _each_row_priced_or_named(priced, tables["portfolio"])
    return priced


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=st.sampled_from(["portfolio", "curves", "exercise_schedule"]), edits=EDITS)
def test_any_values_anywhere_are_priced_or_named(table, edits):
    """Several cells of one table at once, ids and the curves' and schedule's tables included: the job stops
    naming its problems, or prices every row or names why; with every measure where the curves change (the
    bumped and shifted curves), the measures' own cells being those of the test above."""
    _priced_or_named(
        dict(portfolio=QUOTED, curves=BOOK.curves, exercise_schedule=BOOK.exercise_schedule),
        table,
        edits,
        measures=MEASURES if table == "curves" else None,
    )


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=st.sampled_from(["portfolio", "models", "scenarios"]), edits=EDITS)
def test_any_values_in_a_book_in_years_are_priced_or_named(table, edits):
    """Several cells of the book in years, its model table or its scenarios."""
    tables = dict(portfolio=_in_years_with_models(), models=MODELS, scenarios=SCENARIOS)
    priced = _priced_or_named(tables, table, edits)
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

"""The ``desk`` book: a dated book as a desk holds it, with its curves and exercise schedule."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import distprice
from distprice.curves import load_curves
from distprice.lattice.desk import AS_OF, MODELS, desk
from distprice.lattice.quantlib_dated import price_dated_quantlib

from utils import assert_engines_close


def test_the_desk_is_deterministic_and_mixes_what_a_desk_holds():
    book = desk(4000, seed=3)
    again = desk(4000, seed=3)
    pd.testing.assert_frame_equal(book.portfolio, again.portfolio)
    pd.testing.assert_frame_equal(book.exercise_schedule, again.exercise_schedule)
    assert not book.portfolio.equals(desk(4000, seed=4).portfolio)
    portfolio = book.portfolio
    shares = portfolio["instrument"].value_counts(normalize=True)
    assert 0.38 < shares["callable_bond"] < 0.52 and 0.1 < shares["puttable_bond"] < 0.2
    assert set(portfolio["currency"]) == set(MODELS) and (portfolio["valuation_date"] == AS_OF).all()
    models = portfolio.groupby("currency")[["mean_reversion", "volatility", "steps_per_year", "curve"]].nunique()
    assert (models == 1).all().all()  # one tree model per currency
    years = (pd.to_datetime(portfolio["maturity_date"]) - pd.Timestamp(AS_OF)).dt.days / 365
    assert years.min() >= 0.9 and years.max() <= 30.1  # maturities fall on the 15th of a month
    assert set(portfolio.loc[portfolio["instrument"] == "puttable_bond", "exercise"]) == {"american", "bermudan"}


def test_step_down_calls_fall_to_par():
    schedule = desk(3000, seed=1).exercise_schedule
    assert len(schedule) > 100
    for _, calls in schedule.groupby("id"):
        prices = calls.sort_values("date")["price"].to_numpy()
        assert prices[0] > 100 and (np.diff(prices) <= 1e-12).all() and prices[-1] >= 100


def test_every_desk_row_prices():
    pytest.importorskip("QuantLib")
    book = desk(600, seed=2)
    priced = distprice.price(book.portfolio, book.curves, engine="cpu", exercise_schedule=book.exercise_schedule)
    assert priced["error"].isna().all() and np.isfinite(priced["price"]).all()
    callable_rows = priced["instrument"] == "callable_bond"
    assert (priced.loc[callable_rows, "option_price"] > 0).mean() > 0.9
    # the plain bonds are QuantLib's (its FixedRateBond discounted on the same curves)
    bonds = (priced["instrument"] == "bond").to_numpy()
    theirs = price_dated_quantlib(book.portfolio[bonds], load_curves(book.curves))
    for column in ("price", "dirty_price", "clean_price", "accrued"):
        np.testing.assert_allclose(priced.loc[bonds, column], theirs[column], rtol=1e-12, err_msg=column)
    # and a few rows of each other kind, short ones, are the reference engine's
    years = (pd.to_datetime(book.portfolio["maturity_date"]) - pd.Timestamp(AS_OF)).dt.days / 365
    sample = book.portfolio[~bonds & (years < 4).to_numpy()].groupby("instrument").head(4)
    assert set(sample["instrument"]) == {"callable_bond", "puttable_bond", "bond_option"}
    table = book.exercise_schedule[book.exercise_schedule["id"].isin(sample["id"])]
    reference = distprice.price(sample, book.curves, engine="reference", exercise_schedule=table)
    assert_engines_close(priced.loc[sample.index], reference.set_axis(sample.index))

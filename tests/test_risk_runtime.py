"""Risk measures through the interfaces: ``distprice.price(measures=...)``, ``distprice run --measures``, a
cluster (one measuring task per chunk, the same numbers as in this process), market prices and their rules."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import distprice
from distprice.cli import main
from distprice.cluster.pricer import Pricer
from distprice.curves import builtin_curves
from distprice.errors import InvalidInputError, OptionError
from distprice.lattice.measures import measure_columns
from distprice.lattice.quotes import read_market_prices
from distprice.lattice.risk import price_measures

from utils import HULL_PUT, instruments_of, random_portfolio

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ALL = "dv01,duration,convexity,krd,vega,oas"
COLUMNS = list(measure_columns(ALL.split(",")))


@pytest.fixture(scope="module")
def quoted():
    """40 random rows, every fourth (worth something) with a market price near its model price."""
    book = random_portfolio(np.random.default_rng(11), 40, max_steps_per_year=12)
    model = distprice.price(book, engine="cpu")["price"].to_numpy()
    market = np.where((np.arange(40) % 4 == 0) & (model > 0.1), model * 0.99, np.nan)
    return book.assign(market_price=market, market_price_type="dirty")


def test_price_adds_the_measure_columns_after_the_prices(quoted):
    """The job's measures are ``price_measures``' own, its OAS search starting from the job's prices (no
    backward pass at spread 0): the same bits; without them, the same measures to rounding."""
    priced = distprice.price(quoted, engine="cpu", measures=ALL)
    names = list(priced.columns)
    assert names[names.index("option_price") + 1 : names.index("width")] == COLUMNS
    quotes, problems = read_market_prices(quoted)
    instruments, curves = instruments_of(quoted), builtin_curves()
    expected = price_measures(
        instruments, curves, engine="cpu", measures=ALL, quotes=quotes, base=priced["price"].to_numpy()
    )
    for column in COLUMNS:
        np.testing.assert_array_equal(priced[column].to_numpy(), expected[column])
    assert not problems and priced["oas"].notna().sum() == np.isfinite(quoted["market_price"]).sum() >= 5
    alone = price_measures(instruments, curves, engine="cpu", measures=ALL, quotes=quotes)
    np.testing.assert_allclose(alone["oas"], expected["oas"], rtol=0, atol=1e-10)
    for column in COLUMNS:
        scale = np.nanmax(np.abs(expected[column]))
        np.testing.assert_allclose(alone[column], expected[column], rtol=0, atol=1e-6 * scale, err_msg=column)


def test_a_job_measures_its_rows_in_pieces(monkeypatch, quoted):
    """A job in this process measures its rows piece by piece (a risk engine holds all of its rows' trees and
    bumped values at once; :func:`~distprice.execute.measure_pieces`): the same bits as the whole book measured
    at once."""
    from distprice import execute

    whole = distprice.price(quoted, engine="cpu", measures=ALL)
    calls = []
    measure = price_measures

    def counted(instruments, *args, **kwargs):
        calls.append(len(instruments))
        return measure(instruments, *args, **kwargs)

    monkeypatch.setattr(execute, "MEASURE_PIECE_SECONDS", 1e-5)
    monkeypatch.setattr("distprice.job.price_measures", counted)
    pieces = distprice.price(quoted, engine="cpu", measures=ALL)
    assert len(calls) >= 5 and sum(calls) == len(quoted)
    pd.testing.assert_frame_equal(pieces, whole)


def test_a_cluster_measures_each_chunk_as_this_process_does(local, quoted):
    here = distprice.price(quoted, engine="cpu", measures=ALL)
    with Pricer(local, chunks_per_worker=2) as pricer:
        there = pricer.price(quoted, engine="cpu", measures=ALL)
    pd.testing.assert_frame_equal(there.reset_index(drop=True), here.reset_index(drop=True))


def test_run_writes_the_measures_and_refuses_them_with_scenarios(tmp_path, quoted):
    quoted.to_csv(tmp_path / "b.csv", index=False)
    args = ["run", "--portfolio", str(tmp_path / "b.csv"), "--output", str(tmp_path / "o.csv"), "--engine", "cpu"]
    result = CliRunner().invoke(main, [*args, "--measures", "dv01,krd", "--key-rates", "2,5,10", "--bump-bp", "5"])
    assert result.exit_code == 0, result.output
    written = pd.read_csv(tmp_path / "o.csv")
    assert {"dv01", "krd_2y", "krd_5y", "krd_10y"} <= set(written.columns) and "oas" not in written.columns
    expected = distprice.price(quoted, engine="cpu", measures="dv01,krd", key_rates=[2, 5, 10], bump_bp=5)
    np.testing.assert_allclose(written["krd_5y"], expected["krd_5y"], rtol=1e-15)
    for extra, said in (
        (["--shifts-bp", "0,10"], "give --measures or --scenarios"),
        (["--measures", "dv01", "--bump-bp", "0"], "Invalid value for --bump-bp"),
        (["--measures", "gamma"], "unknown measure 'gamma'"),
    ):
        result = CliRunner().invoke(
            main, [*args, "--measures", "dv01", *extra] if "--measures" not in extra else [*args, *extra]
        )
        assert result.exit_code == 2 and said in result.output, result.output


def test_market_prices_break_rules_as_columns_do():
    rows = pd.DataFrame(
        [
            dict(HULL_PUT, id="a", market_price=1.8),
            dict(HULL_PUT, id="b", market_price=-1.0),
            dict(HULL_PUT, id="c", market_price=1.8, market_price_type="mid"),
        ]
    )
    with pytest.raises(InvalidInputError) as info:
        distprice.price(rows, measures="oas")
    message = str(info.value)
    assert (
        "row 2 (id 'b'), column 'market_price'" in message and "row 3 (id 'c'), column 'market_price_type'" in message
    )
    reported = distprice.price(rows, measures="oas", on_invalid="report")
    assert reported["oas"].notna().tolist() == [True, False, False]
    assert reported["price"].notna().tolist() == [True, False, False]
    assert distprice.price(rows.iloc[[1]])["error"].isna().all()  # no measures: the columns are carried through


def test_an_oas_no_spread_reaches_is_the_rows_error_and_it_keeps_its_price():
    rows = pd.DataFrame([dict(HULL_PUT, id="a", market_price=1.8), dict(HULL_PUT, id="b", market_price=95.0)])
    priced = distprice.price(rows, measures="oas,duration")
    assert priced["price"].notna().all() and np.isnan(priced.loc[1, "oas"])
    assert priced.loc[0, "error"] is pd.NA and "oas: no spread" in priced.loc[1, "error"]
    assert np.isnan(priced.loc[1, "effective_duration"]) and np.isfinite(priced.loc[0, "effective_duration"])


def test_measure_options_are_checked_up_front():
    with pytest.raises(OptionError, match="give measures or scenarios"):
        distprice.price(pd.DataFrame([dict(HULL_PUT, id="a")]), measures="dv01", shifts_bp=[0, 10])
    with pytest.raises(InvalidInputError, match="'dv01': is a column distprice writes"):
        distprice.price(pd.DataFrame([dict(HULL_PUT, id="a", dv01=1.0)]), measures="dv01")

"""Heston pricing: the benchmark's GL-20 figures, the accurate mode against QuantLib, the engines against each
other, quote tables and their rules."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from distprice.errors import InvalidInputError
from distprice.models import heston_surfaces, read_benchmark, read_quotes
from distprice.models.heston_cpu import CpuEngine
from distprice.models.heston_fit import rmse
from distprice.models.heston_quotes import make_surface
from distprice.models.heston_reference import ReferenceEngine
from distprice.tables import write_table

DATA = Path(__file__).parent / "data" / "heston"
X_INIT = (0.04, 0.04, -0.5, 0.01, 0.4)
X_OPT = (0.026358152, 0.087861902, -0.57880994, 0.77093579, 0.67852823)
X_ACCURATE = (0.026209633, 0.087490927, -0.5775236, 0.79033223, 0.69246888)
"""Optimum of the accurate objective (RMSE 0.738941)."""


@pytest.fixture(scope="module")
def surface():
    return heston_surfaces(read_benchmark(DATA / "1062_quotes.in")[0])[0]


def random_population(seed: int, size: int) -> np.ndarray:
    """Members drawn in the search box, plus out-of-box ones a differential evolution trial can produce."""
    rng = np.random.default_rng(seed)
    population = rng.uniform([1e-6, 1e-6, -1.0, 1e-4, 1e-4], [1.0, 1.0, 0.0, 4.0, 2.0], (size, 5))
    population[0] = X_OPT
    population[1] = (0.03, 0.08, -1.05, 0.8, 0.6)  # rho < -1
    population[2] = (0.03, 0.08, 0.3, 4.5, -0.6)  # rho > 0, kappa > 4, eta < 0
    population[3] = (0.04, 0.04, -0.5, 1.0, 0.0)  # eta = 0: the pricer breaks down
    return population


def test_benchmark_file_holds_the_published_quotes(surface):
    quotes, settings = read_benchmark(DATA / "1062_quotes.in")
    assert (settings.max_evals, settings.nodes, settings.population) == (2000, 20, 40)
    assert len(quotes) == 1062 and quotes["maturity"].nunique() == 17
    assert quotes["maturity"].min() == pd.Timestamp("2017-02-17")
    assert quotes["maturity"].max() == pd.Timestamp("2026-12-18")
    assert quotes["strike"].min() == pytest.approx(0.083, abs=5e-4)
    assert quotes["strike"].max() == pytest.approx(3.52, abs=5e-3)
    assert quotes["implied_vol"].min() == pytest.approx(0.120, abs=5e-4)
    assert quotes["implied_vol"].max() == pytest.approx(2.33, abs=5e-3)
    assert np.sum(surface.vega == 0.1) == 450
    assert surface.market[[0, 500, 1061]] == pytest.approx([0.850194115534, 0.105395681529, 0.128959143002], rel=1e-10)


@pytest.mark.parametrize("engine", [ReferenceEngine, CpuEngine])
def test_gl20_objective_reproduces_the_fixed_points(surface, engine):
    pricer = engine(surface, "gl20")
    f = pricer.objective(np.array([X_INIT, X_OPT]))
    assert f == pytest.approx([2.2513185337, 0.0599851151124], rel=1e-10)
    assert [rmse(v, surface.size) for v in f] == pytest.approx([4.6042215682, 0.7515527875], rel=1e-10)
    prices = pricer.prices(np.array([X_OPT]))[0]
    assert prices[[0, 500, 1061]] == pytest.approx([0.850386776221, 0.101243559015, 0.135127493566], rel=1e-10)


@pytest.mark.parametrize("engine", [ReferenceEngine, CpuEngine])
def test_accurate_objective_reproduces_the_published_rmse(surface, engine):
    f = engine(surface, "accurate").objective(np.array([X_OPT, X_ACCURATE]))
    assert rmse(f[0], surface.size) == pytest.approx(0.739206, abs=5e-7)
    assert rmse(f[1], surface.size) == pytest.approx(0.738941, abs=5e-7)


def quantlib_calls(params, today, maturities, strikes, spot=1.0, rate=0.0, dividend=0.0):
    """Present values of European calls from QuantLib's AnalyticHestonEngine (ACT/365, flat rates), integrating
    adaptively to a relative 1e-13 (its default 144-point Gauss-Laguerre rule errs by up to 3e-10 here)."""
    import QuantLib as ql

    v0, theta, rho, kappa, eta = params
    day = ql.Date(today.day, today.month, today.year)
    ql.Settings.instance().evaluationDate = day
    counter = ql.Actual365Fixed()
    process = ql.HestonProcess(
        ql.YieldTermStructureHandle(ql.FlatForward(day, rate, counter)),
        ql.YieldTermStructureHandle(ql.FlatForward(day, dividend, counter)),
        ql.QuoteHandle(ql.SimpleQuote(spot)),
        v0,
        kappa,
        theta,
        eta,
        rho,
    )
    engine = ql.AnalyticHestonEngine(ql.HestonModel(process), 1e-13, 1_000_000)
    out = []
    for maturity, strike in zip(maturities, strikes):
        option = ql.EuropeanOption(
            ql.PlainVanillaPayoff(ql.Option.Call, float(strike)),
            ql.EuropeanExercise(ql.Date(maturity.day, maturity.month, maturity.year)),
        )
        option.setPricingEngine(engine)
        out.append(option.NPV())
    return np.array(out)


@pytest.mark.parametrize("params", [X_OPT, X_ACCURATE, (0.2, 0.01, -0.9, 0.1, 2.0), (0.01, 0.3, -0.1, 3.5, 0.3)])
def test_accurate_mode_matches_quantlib(params):
    """Every maturity of the benchmark, strikes from deep in to deep out of the money."""
    quotes = read_benchmark(DATA / "1062_quotes.in")[0].iloc[::9].reset_index(drop=True)
    surface = heston_surfaces(quotes)[0]
    expected = quantlib_calls(params, dt.date(2017, 1, 26), quotes["maturity"], quotes["strike"])
    for engine in (ReferenceEngine, CpuEngine):
        prices = engine(surface, "accurate").prices(np.array([params]))[0]
        assert np.max(np.abs(prices - expected)) <= 1e-10


def test_model_prices_carry_spot_rates_and_dividends():
    """A surface of spot 95, rate 3 %, dividend 1 %: model prices in currency equal QuantLib's."""
    from distprice.models.heston_fit import heston_engine

    quotes = read_benchmark(DATA / "1062_quotes.in")[0].iloc[::20].reset_index(drop=True)
    quotes = quotes.assign(strike=quotes["strike"] * 95.0, spot=95.0, rate=0.03, dividend=0.01)
    surface = heston_surfaces(quotes)[0]
    prices = surface.scale * heston_engine(surface, "accurate", "cpu").prices(np.array([X_OPT]))[0]
    expected = quantlib_calls(X_OPT, dt.date(2017, 1, 26), quotes["maturity"], quotes["strike"], 95.0, 0.03, 0.01)
    assert np.max(np.abs(prices - expected)) <= 1e-10 * 95.0


@pytest.mark.parametrize("quadrature", ["gl20", "accurate"])
def test_cpu_engine_matches_reference_on_random_populations(surface, quadrature):
    population = random_population(7, 40)
    if quadrature == "accurate":  # the reference's adaptive panels are slow: fewer quotes and members
        surface = heston_surfaces(read_benchmark(DATA / "1062_quotes.in")[0].iloc[::7])[0]
        population = np.vstack([population[:4], X_ACCURATE, (0.1, 0.2, -0.3, 2.0, 1.0)])
    cpu, reference = CpuEngine(surface, quadrature), ReferenceEngine(surface, quadrature)
    f_cpu, f_reference = cpu.objective(population), reference.objective(population)
    broken = [1, 3] if quadrature == "accurate" else [3]  # rho < -1 (accurate refuses it), eta = 0
    finite = np.isfinite(f_reference)
    np.testing.assert_array_equal(np.flatnonzero(~finite), broken)
    np.testing.assert_array_equal(np.isinf(f_cpu), ~finite)
    np.testing.assert_allclose(f_cpu[finite], f_reference[finite], rtol=1e-10)
    p_cpu, p_reference = cpu.prices(population), reference.prices(population)
    np.testing.assert_array_equal(np.isnan(p_cpu), np.isnan(p_reference))
    np.testing.assert_allclose(p_cpu[0], p_reference[0], rtol=0, atol=1e-13)
    np.testing.assert_allclose(p_cpu[finite], p_reference[finite], rtol=0, atol=1e-10)


def test_engine_objective_is_deterministic(surface):
    population = random_population(3, 40)
    cpu = CpuEngine(surface)
    assert np.array_equal(cpu.objective(population), cpu.objective(population))
    assert np.array_equal(cpu.objective(population[:5]), cpu.objective(population)[:5])


def test_quotes_read_alike_from_benchmark_csv_and_parquet(tmp_path, surface):
    quotes = read_benchmark(DATA / "1062_quotes.in")[0]
    for name in ("quotes.csv", "quotes.parquet"):
        write_table(quotes.assign(maturity=quotes["maturity"].dt.strftime("%Y-%m-%d")), tmp_path / name)
        again = heston_surfaces(read_quotes(tmp_path / name))[0]
        np.testing.assert_array_equal(again.times, surface.times)
        np.testing.assert_array_equal(again.market, surface.market)
    assert len(read_quotes(DATA / "1062_quotes.in")) == 1062


def test_surfaces_are_split_and_normalised_by_their_forward():
    quotes = pd.DataFrame(
        {
            "surface": ["a", "b", "a", "b"],
            "valuation_date": ["2026-01-02"] * 4,
            "maturity": ["2027-01-02", "2026-07-03", "2028-01-02", "2027-01-02"],
            "strike": [100.0, 1.1, 90.0, 0.9],
            "implied_vol": [0.2, 0.3, 0.25, 0.35],
            "spot": [100.0, 1.0, 100.0, 1.0],
            "rate": [0.05, 0.0, 0.05, 0.0],
            "dividend": [0.02, 0.0, 0.02, 0.0],
            "weight": [1.0, 2.0, np.nan, 0.5],
        }
    )
    a, b = heston_surfaces(quotes)
    assert (a.name, b.name) == ("a", "b")
    np.testing.assert_array_equal(a.rows, [0, 2])
    np.testing.assert_allclose(a.times, [365 / 365, 730 / 365])
    forward = 100.0 * np.exp(0.03 * a.times)
    np.testing.assert_allclose(a.log_strike, np.log([100.0, 90.0] / forward), rtol=0, atol=1e-15)
    np.testing.assert_allclose(a.scale, forward * np.exp(-0.05 * a.times), rtol=1e-14)
    np.testing.assert_array_equal(a.weight, [1.0, 1.0])
    np.testing.assert_array_equal(b.weight, [2.0, 0.5])
    assert b.times[0] == 182 / 365


def test_bad_quotes_are_all_named():
    quotes = pd.DataFrame(
        {
            "surface": ["s", "s", "s", "s", "s", "t"],
            "valuation_date": ["2026-01-02", "2026-01-02", "2026-01-02", "2026-01-02", "2026-01-03", "2026-01-02"],
            "maturity": ["2026-01-02", "2025-06-01", "2027-01-02", "not a date", "2027-01-02", "2027-01-02"],
            "strike": [1.0, -1.0, 0.0, 1.0, 1.0, 1.0],
            "implied_vol": [0.2, 0.0, -0.1, "x", 0.2, np.inf],
            "weight": [1.0, 1.0, -2.0, 1.0, 1.0, 0.0],
            "spot": [1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
        }
    )
    with pytest.raises(InvalidInputError) as caught:
        heston_surfaces(quotes)
    found = {(p.position, p.column, p.rule) for p in caught.value.problems}
    assert found == {
        (0, "maturity", "must be after the valuation date"),
        (1, "maturity", "must be after the valuation date"),
        (1, "strike", "must be > 0"),
        (1, "implied_vol", "must be > 0"),
        (2, "strike", "must be > 0"),
        (2, "implied_vol", "must be > 0"),
        (2, "weight", "must be >= 0"),
        (3, "maturity", "must be a date (YYYY-MM-DD)"),
        (3, "implied_vol", "must be a number"),
        (4, "valuation_date", "must be the same on every row of surface 's' (its first row has 2026-01-02)"),
        (5, "implied_vol", "must be finite"),
        (5, "spot", "must be > 0"),
        (5, "weight", "surface 't' needs a quote with weight > 0"),
    }
    assert "heston_quotes row 1 (surface 's'), column 'maturity': must be after the valuation date" in str(caught.value)


def test_missing_columns_are_named():
    with pytest.raises(InvalidInputError) as caught:
        heston_surfaces(pd.DataFrame({"strike": [1.0], "maturity": ["2027-01-01"]}))
    assert {(p.column, p.rule) for p in caught.value.problems} == {
        ("implied_vol", "heston_quotes must have this column"),
        ("valuation_date", "heston_quotes must have this column"),
    }


def test_bad_benchmark_file_is_named(tmp_path):
    path = tmp_path / "bad.in"
    path.write_text("2000 -- max_global\n20 -- nb_points\n\n[20170217,20170317]\n[1.0]\n[0.2,0.3]\n")
    with pytest.raises(InvalidInputError) as caught:
        read_benchmark(path)
    rules = [p.rule for p in caught.value.problems]
    assert rules == ["needs a line '<value> -- np'", "needs a line '<value> -- today'"]


@pytest.mark.parametrize(
    "text, rule",
    [
        (
            b"2000 -- max_global\n20 -- nb_points\n4O -- np\n20170126 -- today\n[20170217]\n[1.0]\n[0.2]\n",
            "np must be a whole number >= 1, not '4O'",
        ),
        (
            b"2000 -- max_global\n20 -- nb_points\n40 -- np\n2017-01-26 -- today\n[20170217]\n[1.0]\n[0.2]\n",
            "today must be a date yyyymmdd, not '2017-01-26'",
        ),
        (
            b"2000 -- max_global\n20 -- nb_points\n40 -- np\n20170126 -- today\n[2017\xff0217]\n[1.0]\n[0.2]\n",
            "is not UTF-8 text",
        ),
    ],
)
def test_a_benchmark_file_with_a_bad_setting_or_bytes_is_named(tmp_path, text, rule):
    """Before, these stopped the job with a ValueError or UnicodeDecodeError and a traceback."""
    path = tmp_path / "bad.in"
    path.write_bytes(text)
    with pytest.raises(InvalidInputError) as caught:
        read_benchmark(path)
    assert [p.rule for p in caught.value.problems] == [rule]


def test_make_surface_groups_maturities():
    s = make_surface("x", [2.0, 1.0, 2.0], np.log([1.0, 1.1, 0.9]), [0.2, 0.25, 0.3])
    np.testing.assert_array_equal(s.times, [1.0, 2.0])
    np.testing.assert_array_equal(s.term, [1, 0, 1])
    assert s.size == 3 and np.all(s.vega >= 0.1)


def test_dates_may_be_yyyymmdd_integers_or_timestamps():
    as_integers = pd.DataFrame(
        {
            "valuation_date": [20260102, 20260102],
            "maturity": [20270102, 20280102],
            "strike": [1.0, 1.1],
            "implied_vol": [0.2, 0.25],
        }
    )
    as_timestamps = as_integers.assign(
        valuation_date=pd.Timestamp("2026-01-02"), maturity=pd.to_datetime(["2027-01-02", "2028-01-02"])
    )
    for quotes in (as_integers, as_timestamps):
        s = heston_surfaces(quotes)[0]
        assert s.name == "default"
        np.testing.assert_array_equal(s.times, [365 / 365, 730 / 365])
